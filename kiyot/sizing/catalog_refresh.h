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
 *  - on-demand prices and burstable baselines stay as shipped: the EC2 API has neither. A type
 *    stays burstable only when both the API and the shipped data say so (only the shipped data
 *    knows its baseline);
 *  - a type the region no longer offers is dropped;
 *  - a type the API lists and the shipped data lacks is NOT added: without an on-demand price
 *    sizing could not rank it for on-demand pods (it would look free). It is counted in
 *    types_unpriced instead.
 * Each refresh starts again from the data the catalog was loaded with, so refreshing
 * periodically neither accumulates nor loses anything: a type that comes back is back.
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

#include <stddef.h>

#include "catalog.h"
#include "providers/ec2/ec2.h"
#include "err.h"

/* How often kiyot refreshes its catalog when its cells are EC2 instances. */
#define CATALOG_REFRESH_INTERVAL_S (6 * 60 * 60)

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

/*
 * Stops the refresher of c and waits for it (for a refresh under way, that is until its EC2
 * calls end). Nothing when c has none, or c is NULL.
 */
void catalog_refresh_stop(struct catalog *c);

#endif
