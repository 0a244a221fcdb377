/*
 * fuzz_pricing: GetProducts answers of the AWS Price List as a hostile or broken endpoint would
 * send them, read by pricing_parse_page. Each input is parsed as one page, then again into the
 * same accumulator as a second page. Besides what the sanitizers catch, it checks pricing.h's
 * promises: a refusal is EPROTO (or E2BIG past the products' bound) with a message, leaving no
 * token; a token is 1 to PRICING_MAX_TOKEN bytes; every price kept names a plausible type once
 * and is a finite, positive number of dollars below PRICING_MAX_PRICE; no more products are
 * skipped or priced than were read.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/ec2/pricing.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
	fprintf(stderr, "%s\n", what);
	abort();
}

/* One page into l, checked. */
static void page(const uint8_t *data, size_t size, struct pricing_list *l)
{
	struct err err = ERR_INIT;
	char *next = (char *)"unset";
	size_t before = l->n;
	int ret = pricing_parse_page((const char *)data, size, l, &next, &err);

	if (ret < 0) {
		if (ret != -err.code || (err.code != EPROTO && err.code != E2BIG) || !err.msg[0])
			fail("refused without EPROTO and a message");
		if (next)
			fail("a token from a refused page");
		if (err.code == EPROTO && l->n != before)
			fail("a refused page changed the prices");
	}
	if (next && (!*next || strlen(next) > PRICING_MAX_TOKEN))
		fail("a token out of bounds");
	free(next);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pricing_list l = PRICING_LIST_INIT;

	page(data, size, &l);
	page(data, size, &l);
	if (l.n > PRICING_MAX_PRODUCTS || l.n + l.skipped > l.products)
		fail("more prices than products");
	for (size_t i = 0; i < l.n; i++) {
		const struct pricing_price *p = &l.items[i];
		size_t len = strnlen(p->instance_type, sizeof(p->instance_type));

		if (len == 0 || len >= sizeof(p->instance_type))
			fail("a type name out of bounds");
		if (!isfinite(p->usd_per_hour) || p->usd_per_hour <= 0 ||
		    p->usd_per_hour >= PRICING_MAX_PRICE)
			fail("a price out of bounds");
		if (pricing_list_find(&l, p->instance_type) != p)
			fail("a type priced twice");
	}
	pricing_list_release(&l);
	return 0;
}
