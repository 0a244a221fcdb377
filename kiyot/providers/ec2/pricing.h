/*
 * pricing.h: EC2 on-demand prices from the AWS Price List Query API (GetProducts).
 *
 * GetProducts speaks AWS's JSON 1.1 protocol: a POST of a JSON body to "/" with
 * X-Amz-Target: AWSPriceListService.GetProducts, signed by libcurl's SigV4 for the service
 * "pricing" in the endpoint's region (the Price List has a few endpoints, each serving every
 * region's prices). The client asks for the products of service AmazonEC2 with TERM_MATCH
 * filters regionCode <region>, operatingSystem Linux, tenancy Shared, preInstalledSw NA,
 * capacitystatus Used (and instanceType, one query a type, when asked for a few types), and
 * pages with NextToken until an answer has none. Each answer's PriceList is a list of strings,
 * each a product document; what is kept of one is its product.attributes.instanceType and its
 * on-demand price: terms.OnDemand.<term>.priceDimensions.<dim>.pricePerUnit.USD of the first
 * dimension whose unit is "Hrs". A product without those, or priced at $0, is skipped (and
 * counted); so is a second product of a type already priced.
 *
 *	struct pricing_list l = PRICING_LIST_INIT;
 *	if (pricing_ec2_on_demand(pc, "eu-west-1", NULL, 0, &l, err) < 0)
 *		err: "AWS Price List GetProducts: AccessDeniedException: ...; the node's
 *		     credentials need the IAM action pricing:GetProducts"
 *	p = pricing_list_find(&l, "m5.large");   p->usd_per_hour
 *	pricing_list_release(&l);
 *
 * Everything read is bounded: an answer's size, the pages, the products, a product document's
 * size, the token's and the type name's lengths. Throttling (ThrottlingException, 429), 5xx
 * and network failures are retried with exponential back-off and full jitter, as the EC2
 * client does; ExpiredTokenException fetches new credentials once; a caller in a cancel scope
 * (cancel.h) that gives up ends waits and transfers at once (-ECANCELED). errno of a failure:
 * EAGAIN (retries used up), EACCES (credentials or permissions), EPROTO (an answer that is not
 * the Price List's), EINVAL (anything else the endpoint refused).
 *
 * Thread safety: a client may be used from several threads at once; pricing_parse_page is a
 * pure function.
 */
#ifndef KIYOT_PRICING_H
#define KIYOT_PRICING_H

#include <stddef.h>
#include <stdint.h>

#include "awscreds.h"
#include "err.h"

/* Largest answer (one page) read. */
#define PRICING_MAX_RESPONSE (16u << 20)
/* Largest product document (one string of PriceList) read; a bigger one is skipped. */
#define PRICING_MAX_PRODUCT (1u << 20)
/* Most pages one query follows, and most products all of them may price. */
#define PRICING_MAX_PAGES 1000
#define PRICING_MAX_PRODUCTS 20000
/* Longest NextToken accepted. */
#define PRICING_MAX_TOKEN 4096
/* An instance type name is shorter than this; a longer one is skipped. */
#define PRICING_MAX_TYPE_NAME 64
/* A price at or above this (USD an hour) is not believed: skipped. */
#define PRICING_MAX_PRICE 1e5
/* MaxResults: the Price List's own maximum. */
#define PRICING_PAGE_SIZE 100
/* Most instance types one call asks one by one (more: ask for the region's every type). */
#define PRICING_MAX_TYPES_ASKED 100

/* The endpoint whose region serves the Price List nearest a region, e.g.
 * "https://api.pricing.ap-south-1.amazonaws.com/" for ap-northeast-1; us-east-1's otherwise. */
const char *pricing_default_endpoint(const char *region);

/* One instance type's on-demand Linux price. */
struct pricing_price {
	char instance_type[PRICING_MAX_TYPE_NAME];
	double usd_per_hour;
};

/* Prices gathered from one or more answers (a value: _INIT, _release). */
struct pricing_list {
	struct pricing_price *items;
	size_t n, cap;
	size_t products; /* product documents read */
	size_t skipped;	 /* of those, without an instance type and an hourly USD on-demand price,
			  * or of a type already priced */
};

#define PRICING_LIST_INIT                                                                          \
	{                                                                                          \
		NULL, 0, 0, 0, 0                                                                   \
	}

void pricing_list_release(struct pricing_list *l);
/* The price of type, or NULL. Linear. */
const struct pricing_price *pricing_list_find(const struct pricing_list *l, const char *type);

/*
 * Parses one GetProducts answer (len bytes, not necessarily NUL-terminated) into acc, appending
 * the prices of its products (a type acc already has is skipped). *next is its NextToken (the
 * caller frees it), or NULL on the last page. An answer that is not a JSON object whose
 * PriceList (absent: none) is a list, or whose NextToken is not a string of 1 to
 * PRICING_MAX_TOKEN bytes, is refused: EPROTO, acc and *next unchanged. A product that does not
 * read is skipped; acc never holds more than PRICING_MAX_PRODUCTS prices (more: E2BIG).
 */
int pricing_parse_page(const char *body, size_t len, struct pricing_list *acc, char **next,
		       struct err *err);

struct pricing_config {
	/* NULL: pricing_default_endpoint(region); else an http:// or https:// URL */
	const char *endpoint;
	/* the region whose prices the client is mainly for (for the default endpoint) */
	const char *region;
	struct aws_creds_provider *creds;     /* required; borrowed, must outlive the client */
	int max_attempts;		      /* tries per call on throttling, 5xx, network; 0: 8 */
	int64_t backoff_base_ns;	      /* 0: 100 ms */
	int64_t backoff_cap_ns;		      /* 0: 20 s */
	long timeout_ms;		      /* one page's deadline; 0: 60000 */
	long connect_timeout_ms;	      /* 0: 5000 */
	int page_size;			      /* MaxResults 1..100; 0: 100 */
	void (*sleep)(void *ctx, int64_t ns); /* between retries; NULL: nanosleep */
	void *sleep_ctx;
};

struct pricing_client;

/* EINVAL for a missing region or credentials, or an endpoint that is not an http(s) URL. */
int pricing_client_new(const struct pricing_config *cfg, struct pricing_client **out,
		       struct err *err);
void pricing_client_free(struct pricing_client *c);
const char *pricing_client_endpoint(const struct pricing_client *c);
/* HTTP requests sent so far, retries included. */
uint64_t pricing_client_requests(const struct pricing_client *c);

/*
 * The on-demand Linux prices (shared tenancy, no pre-installed software) of region's instance
 * types into *out (initialised here; the caller releases it, on failure too): of every type
 * (types NULL) or of the n_types named (at most PRICING_MAX_TYPES_ASKED, one query each).
 */
int pricing_ec2_on_demand(struct pricing_client *c, const char *region, const char *const *types,
			  size_t n_types, struct pricing_list *out, struct err *err);

#endif
