/*
 * fuzz_catalog_advisor: Spot Instance Advisor tables (catalog_advisor.h) as a catalog file's
 * author or a damaged build could write them, read for one region. The first byte picks the
 * region; the rest is the table. Besides what the sanitizers catch, it checks the reader's
 * promises: a refusal is EINVAL or E2BIG with a message and leaves nothing; a table read gives
 * a YYYY-MM-DD date and advice sorted by type, each found by its name, with a band from 0 to 4
 * and savings from 0 to 99 or none.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sizing/catalog_advisor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const regions[] = { "us-east-1", "lab-1", "", "eu-west-1" };

static void fail(const char *what, const struct err *err)
{
	fprintf(stderr, "%s (error %d \"%s\")\n", what, err->code, err->msg);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err err = ERR_INIT;
	struct catalog_advisor a;
	int ret;

	if (size < 1)
		return 0;
	ret = catalog_advisor_parse((const char *)data + 1, size - 1,
				    regions[data[0] % (sizeof(regions) / sizeof(regions[0]))], &a,
				    &err);
	if (ret < 0) {
		if ((ret != -EINVAL && ret != -E2BIG) || err.code != -ret || !err.msg[0] || a.n ||
		    a.advice)
			fail("table refused without EINVAL or E2BIG and a message", &err);
		return 0;
	}
	if (strlen(a.date) != 10 || a.date[4] != '-' || a.date[7] != '-')
		fail("a date that is not YYYY-MM-DD", &err);
	for (size_t i = 0; i < a.n; i++) {
		const struct catalog_advice *v = &a.advice[i];

		if (v->band < 0 || v->band > CATALOG_ADVISOR_MAX_BAND)
			fail("a band out of range", &err);
		if (v->savings != CATALOG_ADVISOR_NO_SAVINGS && (v->savings < 0 || v->savings > 99))
			fail("savings out of range", &err);
		if (i && strcmp(a.advice[i - 1].type, v->type) >= 0)
			fail("advice not sorted by type", &err);
		if (catalog_advisor_find(&a, v->type) != v)
			fail("advice not found by its type", &err);
	}
	catalog_advisor_release(&a);
	return 0;
}
