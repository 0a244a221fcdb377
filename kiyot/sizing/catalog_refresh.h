/*
 * catalog_refresh.h: brings a catalog up to date from the EC2 API of its region.
 *
 * A refresh asks DescribeInstanceTypes for every type the region offers and
 * DescribeSpotPriceHistory for the latest Linux/UNIX spot price of each, then merges them into
 * the data the catalog was loaded with (the shipped catalog) and publishes the result as the
 * catalog's current one (catalog_publish; readers take it with catalog_acquire):
 *  - vCPUs, memory and GPUs come from the API; so do the generation (current or previous) and
 *    the architectures (ProcessorInfo.SupportedArchitectures: x86_64, arm64);
 *  - spot prices come from the API where it reports one (the latest of any zone), else stay;
 *    each zone's latest price is kept too (catalog_type.zone_spot), for choosing the zone of a
 *    spot pod;
 *    one outside 1% to 200% of the type's on-demand price is dropped with a warning naming the
 *    type, the price and where it came from;
 *  - on-demand prices stay those of the current catalog: the shipped ones, or the AWS Price
 *    List's where a price refresh (below) got one; burstable baselines stay as shipped: the EC2
 *    API has neither. A type stays burstable only when both the API and the shipped data say so
 *    (only the shipped data knows its baseline);
 *  - a type the region no longer offers is dropped;
 *  - a type the API lists and the shipped data lacks is NOT added: without an on-demand price
 *    sizing could not rank it for on-demand pods (it would look free). It is counted in
 *    types_unpriced instead.
 * Each refresh starts again from the data the catalog was loaded with, so refreshing
 * periodically neither accumulates nor loses anything: a type that comes back is back.
 *
 * A price refresh (catalog_refresh_prices) asks the AWS Price List (pricing.h) for the
 * region's Linux on-demand prices and publishes the current catalog with them in place of the
 * shipped ones: each type the List prices gets its price (a price outside a tenth to ten times
 * the shipped one is not believed: dropped with a warning); each type it does not keeps its
 * shipped price. Every price keeps its source (catalog_price_source): "AWS Price List
 * 2026-11-29 12:28 UTC" for those, the shipped snapshot with its date for the rest, and spot
 * prices "EC2 spot price history <date/time>" once the EC2 refresh got them; the Cell's sizing
 * reason quotes the chosen one. A List that prices none of the catalog's types is a failure.
 *
 * On any failure nothing is published, the current catalog stays as it was, and err says what
 * failed, e.g. "catalog refresh: ec2 DescribeSpotPriceHistory: AuthFailure: ...". An answer that
 * lists no instance type, or none the catalog knows, is a failure too: it would empty the
 * catalog.
 *
 *	struct catalog_refresh_counts n;
 *	if (catalog_refresh_counted(k->catalog, ec2, &n, err) < 0)
 *		log_warn("%s; keeping the instance catalog as it was", err->msg);
 *
 * Thread safety: any number of readers may use the catalog while a refresh runs; refreshes of
 * one catalog may run at once too (the last to finish wins).
 */
#ifndef KIYOT_CATALOG_REFRESH_H
#define KIYOT_CATALOG_REFRESH_H

#include <stdbool.h>
#include <stddef.h>

#include "catalog.h"
#include "providers/ec2/ec2.h"
#include "providers/ec2/pricing.h"
#include "err.h"

/* How often kiyot refreshes its catalog when its cells are EC2 instances. */
#define CATALOG_REFRESH_INTERVAL_S (6 * 60 * 60)
/* How often it asks the AWS Price List for on-demand prices. */
#define CATALOG_PRICE_INTERVAL_S (24 * 60 * 60)
/* A Price List price is believed between these multiples of the shipped one. */
#define CATALOG_PRICE_MIN_RATIO 0.1
#define CATALOG_PRICE_MAX_RATIO 10.0

/* What one refresh changed. */
struct catalog_refresh_counts {
	size_t types_listed;   /* instance types DescribeInstanceTypes listed */
	size_t types_kept;     /* types in the refreshed catalog */
	size_t types_updated;  /* kept types whose vCPUs, memory, GPUs, architectures or
				* generation changed */
	size_t spot_updated;   /* kept types whose spot price came from the API */
	size_t spot_dropped;   /* spot prices not believed (outside 1% to 200% of on-demand) */
	size_t types_dropped;  /* types the region no longer offers */
	size_t types_unpriced; /* types the API lists that have no on-demand price: not added */
};

/* What one price refresh changed. */
struct catalog_price_counts {
	size_t products;     /* products the Price List answered */
	size_t priced;	     /* types of the catalog whose price is now the List's */
	size_t not_believed; /* List prices outside CATALOG_PRICE_MIN_RATIO..MAX_RATIO of the
			      * shipped price: dropped */
	size_t unpriced;     /* types of the catalog the List did not price: shipped price */
};

/*
 * Asks the Price List p for the on-demand prices of c's region and publishes the current
 * catalog with them, as described above; counts may be NULL. On failure nothing is published
 * and err says why ("catalog prices: AWS Price List GetProducts: AccessDeniedException: ...").
 */
int catalog_refresh_prices(struct catalog *c, struct pricing_client *p,
			   struct catalog_price_counts *counts, struct err *err);

/* Refreshes c from EC2 as described above; counts may be NULL. */
int catalog_refresh_counted(struct catalog *c, struct ec2_client *ec2,
			    struct catalog_refresh_counts *counts, struct err *err);

/* catalog_refresh_counted without the counts. */
int catalog_refresh(struct catalog *c, struct ec2_client *ec2, struct err *err);

/*
 * Refreshes c in the background: once at once, then every interval_s seconds, each time
 * logging one line with the counts, or the failure (then the catalog stays as it was). The call
 * itself does not wait for EC2. ec2 is borrowed and must outlive catalog_refresh_stop(c). One
 * refresher per catalog: EEXIST when c has one already.
 */
int catalog_refresh_start(struct catalog *c, struct ec2_client *ec2, int interval_s,
			  struct err *err);

/* What a background refresher does. */
struct catalog_refresh_config {
	int interval_s;	      /* EC2 refreshes; 0: CATALOG_REFRESH_INTERVAL_S */
	bool price_list;      /* also ask the AWS Price List for on-demand prices */
	int price_interval_s; /* how often; 0: CATALOG_PRICE_INTERVAL_S */
	/* NULL: the Price List's public endpoint for the region (pricing_default_endpoint) */
	const char *price_list_endpoint;
	struct pricing_config pricing; /* tests' retries and sleeps; endpoint, region and
					* credentials are set by the refresher */
};

/*
 * catalog_refresh_start with a Price List as well (cfg->price_list): its client signs with
 * ec2's credentials; it is asked at once after the first EC2 refresh, then every
 * price_interval_s; a failure keeps the prices the catalog has (the shipped snapshot until
 * the List answered) and logs one warning naming the cause. Without it, one line says the
 * on-demand prices are the shipped snapshot's.
 */
int catalog_refresh_start_config(struct catalog *c, struct ec2_client *ec2,
				 const struct catalog_refresh_config *cfg, struct err *err);

/*
 * Stops the refresher of c and waits for it (for a refresh under way, that is until its EC2
 * calls end). Nothing when c has none, or c is NULL.
 */
void catalog_refresh_stop(struct catalog *c);

#endif
