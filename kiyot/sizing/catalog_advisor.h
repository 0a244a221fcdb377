/*
 * catalog_advisor.h: the spot interruption bands and savings of one region, from a table of EC2's
 * Spot Instance Advisor data.
 *
 * The table shipped inside the binary is kiyot/sizing/data/aws-spot-advisor.json (written by
 * data/gen-spot-advisor.py from a dated copy of the Advisor's data: see data/README.md),
 * embedded by catalog_data.c. Its format:
 *
 *	{"date": "2025-06-28", "source": "EC2 Spot Instance Advisor",
 *	 "regions": {"us-east-1": {"t3.nano": [0, 69], "a1.large": [4, 0], "p5.48xlarge": [0]},
 *	             ...}}
 *
 * Per region and instance type (Linux): [band, savings] or [band]. band is the Advisor's
 * interruption-frequency range (0: under 5% a month, 1: 5 to 10%, 2: 10 to 15%, 3: 15 to 20%,
 * 4: over 20%; catalog_spot_band_name words it); savings is the spot price's discount over
 * on-demand in whole percent (0 to 99), averaged by the Advisor over 30 days and the region's
 * zones; absent where the table has none.
 *
 *	struct catalog_advisor a;
 *	if (catalog_advisor_parse(text, len, "us-east-1", &a, err) < 0)
 *		return -1;     err: "spot advisor table: region us-east-1, \"t3.nano\": band 7 ..."
 *	const struct catalog_advice *v = catalog_advisor_find(&a, "t3.nano");
 *	catalog_advisor_release(&a);
 *
 * catalog.c applies it to a catalog being loaded (catalog_apply_advisor in catalog.h). Pure;
 * thread-safe.
 */
#ifndef KIYOT_CATALOG_ADVISOR_H
#define KIYOT_CATALOG_ADVISOR_H

#include <stddef.h>

#include "err.h"

/* Largest table text catalog_advisor_parse reads. */
#define CATALOG_ADVISOR_MAX_TEXT (16u << 20)
/* The highest band (over 20% a month). */
#define CATALOG_ADVISOR_MAX_BAND 4
/* Savings are absent. */
#define CATALOG_ADVISOR_NO_SAVINGS (-1)

/* One type's advice. */
struct catalog_advice {
	char type[64]; /* "t3.nano" */
	int band;      /* 0 to CATALOG_ADVISOR_MAX_BAND */
	int savings;   /* 0 to 99 (percent), or CATALOG_ADVISOR_NO_SAVINGS */
};

/* The advice of one region, sorted by type. */
struct catalog_advisor {
	char date[16]; /* of the Advisor's data, "2025-06-28" */
	struct catalog_advice *advice;
	size_t n;
};

#define CATALOG_ADVISOR_INIT                                                                       \
	{                                                                                          \
		"", NULL, 0                                                                        \
	}

/*
 * Reads region's advice from table text of len bytes (at most CATALOG_ADVISOR_MAX_TEXT) into
 * *out, which the caller releases. A region the table does not list gives no advice (n 0), not
 * an error. Text that is not such a table, or whose region holds an entry out of range, is
 * EINVAL saying where; *out is then empty.
 */
int catalog_advisor_parse(const char *text, size_t len, const char *region,
			  struct catalog_advisor *out, struct err *err);

/* Frees the advice; the advisor is empty afterwards. */
void catalog_advisor_release(struct catalog_advisor *a);

/* The advice for type, or NULL. */
const struct catalog_advice *catalog_advisor_find(const struct catalog_advisor *a,
						  const char *type);

/* The embedded table text (NUL-terminated) and its length; defined in catalog_data.c. */
const char *catalog_advisor_embedded(size_t *len);

#endif
