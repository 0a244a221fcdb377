/*
 * catalog.h: EC2 instance types of one region, with their size and prices.
 *
 * The catalog shipped inside the binary is kiyot/sizing/data/aws-instance-catalog.json (public
 * facts of 2026 for us-east-1, the other regions derived from it: see data/README.md), embedded
 * by kiyot/sizing/catalog_data.c and parsed at each catalog_load() (kiyot loads once; the
 * parsed tree is not kept). A refreshed catalog in the same format can be read from a file
 * instead:
 *
 *	{"<region>": [{"instanceType": "t4g.nano", "cpu": 2, "memory": 0.5, "gpu": 0,
 *	               "burstable": true, "baseline": 0.1, "price": 0.0042,
 *	               "spotPrice": 0.0034, "generation": "current", "arch": ["arm64"],
 *	               "spotBand": 0}, ...],
 *	 "<region>": {"from": "<region>", "priceFactor": 1.115}, ...}
 *
 * cpu is in vCPUs, memory in GiB, baseline in sustained vCPUs (= cpu unless burstable), prices
 * in USD per hour. arch lists the architectures the type runs ("x86_64", "arm64"; x86_64 when
 * absent). spotBand is the type's spot interruption-frequency band (0: under 5% a month, 1: 5
 * to 10%, 2: 10 to 15%, 3: 15 to 20%, 4: over 20%, as EC2's Spot Instance Advisor bands
 * them); unknown when absent. A region given as an object is another region's list with both
 * prices multiplied by priceFactor (an estimate; catalog_price_note says so).
 *
 * catalog_load also applies the embedded Spot Instance Advisor table (catalog_advisor.h) for
 * its region: each type it lists gets its band, and, where it gives the savings, the spot
 * price on-demand x (1 - savings); the others keep what the catalog says. A catalog file or
 * text is read as it is.
 *
 *	struct catalog *c;
 *	if (catalog_load("us-east-1", &c, err) < 0)
 *		return -1;   err: unknown region "mars-1"; known regions: af-south-1, ...
 *	for (size_t i = 0; i < catalog_count(c); i++)
 *		use(catalog_at(c, i));
 *	catalog_free(c);
 *
 * The types of a catalog never change once it is built: it may be read from several threads at
 * once. catalog_load is thread-safe.
 *
 * Refreshing (catalog_refresh.h). A refresh never touches the types of the catalog it refreshes:
 * it builds a new catalog and publishes it as that catalog's current one. Readers that want the
 * refreshed data take the current one for the length of one use and give it back:
 *
 *	struct catalog *now = catalog_acquire(k->catalog);
 *	ret = sizing_pick(now, &demand, &reserve, &choice, err);
 *	catalog_release(now);
 *
 * Catalogs are reference counted. catalog_acquire takes a reference to the current catalog
 * under the catalog's mutex, and catalog_publish swaps the current pointer under the same
 * mutex and drops the reference the catalog held on the one it replaces; whoever releases last
 * frees it. So a reader's catalog is never changed nor freed under it, however long it takes,
 * and a refresh never waits for readers. Code that reads a catalog directly (catalog_at,
 * catalog_find, sizing_pick on k->catalog itself) keeps working as before and keeps seeing the
 * data that catalog was loaded with.
 */
#ifndef KIYOT_CATALOG_H
#define KIYOT_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Largest catalog file catalog_load_file reads. */
#define CATALOG_MAX_FILE (16u << 20)
/* Most instance types one region may list. */
#define CATALOG_MAX_TYPES 10000

/* Architectures, as a set of bits. */
#define CATALOG_ARCH_X86_64 1u
#define CATALOG_ARCH_ARM64 2u
#define CATALOG_ARCH_ALL (CATALOG_ARCH_X86_64 | CATALOG_ARCH_ARM64)

/* The spot interruption band of a type whose band is not known. */
#define CATALOG_SPOT_BAND_UNKNOWN (-1)

/* The latest spot price of a type in one availability zone (from a refresh). */
struct catalog_zone_price {
	char zone[32]; /* "us-east-1a" */
	double price;  /* USD/hour */
};

struct catalog_type {
	char *name;	      /* "t3.nano" */
	double cpu;	      /* vCPUs */
	double memory_gib;    /* as listed */
	int64_t cpu_milli;    /* cpu * 1000, rounded */
	int64_t memory_bytes; /* memory_gib * 2^30, rounded */
	int gpus;
	bool burstable;
	double baseline;   /* sustained vCPUs */
	double price;	   /* on-demand, USD/hour */
	double spot_price; /* USD/hour, a snapshot */
	char *generation;  /* "current", "previous" */
	unsigned arch;	   /* CATALOG_ARCH_* bits; never 0 */
	int spot_band;	   /* 0 (under 5%) to 4 (over 20%), or CATALOG_SPOT_BAND_UNKNOWN */
	/* the latest spot price per availability zone, where a refresh saw one (owned) */
	struct catalog_zone_price *zone_spot;
	size_t n_zone_spot;
	/* where price and spot_price came from (CATALOG_FROM_*; catalog_price_source words it) */
	unsigned char price_from, spot_from;
};

/* Where a price came from. */
#define CATALOG_FROM_SHIPPED 0 /* the data the catalog was loaded with */
#define CATALOG_FROM_API                                                                           \
	1 /* a refresh: the AWS Price List (on-demand prices),
				* DescribeSpotPriceHistory (spot prices) */
#define CATALOG_FROM_ADVISOR                                                                       \
	2 /* spot: the on-demand price less the Spot Instance Advisor's savings */

/* The date of the embedded catalog's on-demand prices (data/README.md). */
#define CATALOG_SNAPSHOT_DATE "2026-07-20"

/* "x86_64", "arm64", or "x86_64+arm64" for a set. */
const char *catalog_arch_name(unsigned arch);
/* The bit of an architecture name: "x86_64" or "amd64", "arm64" or "aarch64"; 0 otherwise. */
unsigned catalog_arch_parse(const char *name);

/* The words of a spot interruption band: "<5%", "5-10%", "10-15%", "15-20%", ">20%", or
 * "unknown" (CATALOG_SPOT_BAND_UNKNOWN or out of range). */
const char *catalog_spot_band_name(int band);

/* The spot price of t in zone, or its catalog spot price when no refresh saw that zone. */
double catalog_zone_spot_price(const struct catalog_type *t, const char *zone);

struct catalog;

/* Loads a region of the embedded catalog. Unknown region: ENOENT, listing the known ones. */
int catalog_load(const char *region, struct catalog **out, struct err *err);

/* Loads a region of a catalog file (same format, at most CATALOG_MAX_FILE bytes). */
int catalog_load_file(const char *path, const char *region, struct catalog **out, struct err *err);

/* Loads a region from catalog JSON text of len bytes; what the two above use. */
int catalog_load_text(const char *text, size_t len, const char *region, struct catalog **out,
		      struct err *err);

/*
 * Applies the Spot Instance Advisor table text (catalog_advisor.h) for c's region to c's types,
 * as catalog_load does with the embedded one: bands, and spot prices where it gives savings
 * (their source: "Spot Instance Advisor savings of <date> off <the loaded data's source>").
 * For a catalog just loaded, before anyone else reads it. A bad table is EINVAL and changes
 * nothing.
 */
int catalog_apply_advisor(struct catalog *c, const char *text, size_t len, struct err *err);

/* Drops the loader's reference: the same as catalog_release. NULL is fine. */
void catalog_free(struct catalog *c);

/*
 * The current catalog of c: the one last published for it, or c itself when none was. The
 * caller holds a reference and gives it back with catalog_release. Thread-safe.
 */
struct catalog *catalog_acquire(struct catalog *c);

/* Drops one reference; the last one frees the catalog. NULL is fine. Thread-safe. */
void catalog_release(struct catalog *c);

/*
 * Makes next the current catalog of c, taking over the caller's reference to next (NULL goes
 * back to c's own data). Readers holding the previous one keep it until they release it.
 * next must not be c, nor a catalog whose current one is c. Thread-safe.
 */
void catalog_publish(struct catalog *c, struct catalog *next);

/*
 * A catalog of region made of the n types of the array types, which it takes over with every
 * name, generation and zone_spot in it (all from malloc). One reference, the caller's. For building a
 * refreshed catalog; a name must appear only once.
 */
struct catalog *catalog_new(const char *region, struct catalog_type *types, size_t n);

const char *catalog_region(const struct catalog *c);
/* For a region derived from another (see the format above): "on-demand and spot prices
 * estimated as us-east-1's x 1.115"; NULL for a region listed with its own prices. */
const char *catalog_price_note(const struct catalog *c);
size_t catalog_count(const struct catalog *c);
/*
 * Where t's on-demand price (spot false) or spot price came from, in words for the Cell's
 * reason; never NULL. The data loaded: "shipped snapshot of 2026-07-20" (catalog_load), "catalog
 * file /etc/kiyot/catalog.json" (catalog_load_file), "instance catalog" (catalog_load_text),
 * with ", estimated as us-east-1's x 1.115" for a derived region; a spot price from the Spot
 * Instance Advisor's savings: "Spot Instance Advisor savings of 2025-06-28 off shipped snapshot
 * of 2026-07-20"; a refresh's: "AWS Price List 2026-11-29 12:28 UTC", "EC2 spot price history
 * 2026-11-29 12:28 UTC".
 */
const char *catalog_price_source(const struct catalog *c, const struct catalog_type *t, bool spot);
/* Sets the words of c's sources: of its loaded data, of its CATALOG_FROM_API on-demand and spot
 * prices (copies; NULL leaves one as it was). For a catalog being built by a refresh. */
void catalog_set_sources(struct catalog *c, const char *shipped, const char *price_api,
			 const char *spot_api);
/* Copies every source of src to dst (a refresh's catalog keeps its predecessor's words). */
void catalog_copy_sources(struct catalog *dst, const struct catalog *src);
/* The i-th type (i < catalog_count), in the order of the file. */
const struct catalog_type *catalog_at(const struct catalog *c, size_t i);
/* The type of that exact name, or NULL. */
const struct catalog_type *catalog_find(const struct catalog *c, const char *name);
/* True when the type's name matches pattern: an exact name or a glob ("c5*", "t3?.nano"). */
bool catalog_type_matches(const struct catalog_type *t, const char *pattern);
/* How many types match pattern. */
size_t catalog_count_matching(const struct catalog *c, const char *pattern);

/* The embedded catalog text (NUL-terminated) and its length; defined in catalog_data.c. */
const char *catalog_embedded(size_t *len);

#endif
