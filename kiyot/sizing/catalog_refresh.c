/*
 * catalog_refresh.c: the instance catalog brought up to date from DescribeInstanceTypes and
 * DescribeSpotPriceHistory, once or periodically on a thread. See catalog_refresh.h for the
 * merge rules.
 */
#include "catalog_refresh.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cancel.h"
#include "clock.h"
#include "log.h"
#include "xalloc.h"

/* Sizes beyond these are not believed; the shipped ones stay (catalog.c has the same caps). */
#define REFRESH_MAX_VCPUS 1000000
#define REFRESH_MAX_MEMORY_MIB (1000000LL * 1024)
#define REFRESH_MAX_GPUS 1024
#define REFRESH_MAX_PRICE 1e6
/* A spot price is believed between these fractions of the type's on-demand price. */
#define REFRESH_SPOT_MIN 0.01
#define REFRESH_SPOT_MAX 2.0

/* Orders instance types by name, for qsort and bsearch. */
static int refresh_type_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ec2_type_info *)a)->name,
		      ((const struct ec2_type_info *)b)->name);
}

/* Orders spot prices by type name, for bsearch. */
static int refresh_spot_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ec2_spot_price *)a)->instance_type,
		      ((const struct ec2_spot_price *)b)->instance_type);
}

/* Moves the types that have a name to the front, freeing the rest; returns their count. */
static size_t refresh_named_types(struct ec2_type_info *a, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (a[i].name && a[i].name[0])
			a[k++] = a[i];
		else
			free(a[i].name);
	}
	return k;
}

/* The API's description of a type, from the sorted array, or NULL. */
static const struct ec2_type_info *refresh_find_type(const struct ec2_type_info *a, size_t n,
						     const char *name)
{
	struct ec2_type_info key = { .name = (char *)name };

	return n ? bsearch(&key, a, n, sizeof(*a), refresh_type_cmp) : NULL;
}

/* The API's spot prices of a type (one per zone), from the array sorted by type: the first
 * and, in *count, how many; NULL when none. */
static const struct ec2_spot_price *refresh_find_spot(const struct ec2_spot_price *a, size_t n,
						      const char *name, size_t *count)
{
	struct ec2_spot_price key = { .instance_type = (char *)name };
	const struct ec2_spot_price *hit = n ? bsearch(&key, a, n, sizeof(*a), refresh_spot_cmp)
					     : NULL,
				    *end;

	*count = 0;
	if (!hit)
		return NULL;
	while (hit > a && strcmp(hit[-1].instance_type, name) == 0)
		hit--;
	for (end = hit; end < a + n && strcmp(end->instance_type, name) == 0; end++)
		;
	*count = (size_t)(end - hit);
	return hit;
}

/* The latest of a type's zone prices (ties: the lower price): its catalog spot price. */
static const struct ec2_spot_price *refresh_latest(const struct ec2_spot_price *z, size_t n)
{
	const struct ec2_spot_price *best = n ? &z[0] : NULL;

	for (size_t i = 1; i < n; i++)
		if (z[i].timestamp_ns > best->timestamp_ns ||
		    (z[i].timestamp_ns == best->timestamp_ns && z[i].price < best->price))
			best = &z[i];
	return best;
}

/* Whether a spot price from EC2 is believable for a type: finite, and between REFRESH_SPOT_MIN
 * and REFRESH_SPOT_MAX of its on-demand price (any positive price below the cap when the
 * catalog has no on-demand price). A $0.00001 or a 50x price is a broken answer, not a bargain:
 * sizing would put every spot pod on it. */
static bool spot_plausible(const struct catalog_type *base, const struct ec2_spot_price *spot)
{
	if (!isfinite(spot->price) || spot->price <= 0 || spot->price >= REFRESH_MAX_PRICE)
		return false;
	if (!(base->price > 0))
		return true;
	return spot->price >= base->price * REFRESH_SPOT_MIN &&
	       spot->price <= base->price * REFRESH_SPOT_MAX;
}

/*
 * One shipped type, corrected by what the API says of it, into *out (which then owns copies of
 * the strings). Updates the counts.
 */
static void refresh_merge_type(const struct catalog_type *base, const struct ec2_type_info *api,
			       const struct ec2_spot_price *zones, size_t n_zones,
			       struct catalog_refresh_counts *counts, struct catalog_type *out)
{
	const char *gen = api->current_generation ? "current" : "previous";
	const struct ec2_spot_price *spot = refresh_latest(zones, n_zones);
	bool changed = false;

	*out = *base;
	out->name = xstrdup(base->name);
	out->zone_spot = NULL;
	out->n_zone_spot = 0;
	/* the architectures EC2 lists, where it lists any we know */
	if (api->arch & (EC2_ARCH_X86_64 | EC2_ARCH_ARM64)) {
		out->arch = (api->arch & EC2_ARCH_X86_64 ? CATALOG_ARCH_X86_64 : 0) |
			    (api->arch & EC2_ARCH_ARM64 ? CATALOG_ARCH_ARM64 : 0);
	}
	if (api->vcpus > 0 && api->vcpus <= REFRESH_MAX_VCPUS && api->memory_mib > 0 &&
	    api->memory_mib <= REFRESH_MAX_MEMORY_MIB && api->gpus >= 0 &&
	    api->gpus <= REFRESH_MAX_GPUS) {
		changed = base->cpu_milli != (int64_t)api->vcpus * 1000 ||
			  base->memory_bytes != api->memory_mib * 1048576 ||
			  base->gpus != api->gpus;
		out->cpu = api->vcpus;
		out->cpu_milli = (int64_t)api->vcpus * 1000;
		out->memory_gib = (double)api->memory_mib / 1024.0;
		out->memory_bytes = api->memory_mib * 1048576;
		out->gpus = api->gpus;
	}
	changed = changed || strcmp(base->generation, gen) != 0;
	out->generation = xstrdup(gen);
	/* only the shipped data knows a baseline */
	out->burstable = base->burstable && api->burstable;
	out->baseline = out->burstable && base->baseline < out->cpu ? base->baseline : out->cpu;
	changed = changed || out->burstable != base->burstable || out->arch != base->arch;
	if (spot && spot_plausible(base, spot)) {
		out->spot_price = spot->price;
		out->spot_from = CATALOG_FROM_API;
		counts->spot_updated++;
	} else if (spot) {
		log_warn("catalog refresh: %s: dropped the spot price $%.6g an hour of "
			 "DescribeSpotPriceHistory (%s): not within %.0f%% to %.0f%% of its "
			 "on-demand $%.6g; keeping $%.6g",
			 base->name, spot->price,
			 spot->availability_zone ? spot->availability_zone : "no zone",
			 REFRESH_SPOT_MIN * 100, REFRESH_SPOT_MAX * 100, base->price,
			 base->spot_price);
		counts->spot_dropped++;
	}
	/* every zone's believable price, for choosing a spot pod's zone */
	if (n_zones)
		out->zone_spot = xcalloc(n_zones, sizeof(*out->zone_spot));
	for (size_t i = 0; i < n_zones; i++) {
		if (!zones[i].availability_zone || !spot_plausible(base, &zones[i]) ||
		    strlen(zones[i].availability_zone) >= sizeof(out->zone_spot[0].zone))
			continue;
		snprintf(out->zone_spot[out->n_zone_spot].zone, sizeof(out->zone_spot[0].zone),
			 "%s", zones[i].availability_zone);
		out->zone_spot[out->n_zone_spot++].price = zones[i].price;
	}
	counts->types_updated += changed;
}

/*
 * The catalog c was loaded with, merged with the API's types (sorted, nt of them) and spot
 * prices (sorted by type), into a new catalog. EIO when nothing of c is left.
 */
static int refresh_merge(const struct catalog *c, const struct catalog *cur,
			 const struct ec2_type_info *types, size_t nt,
			 const struct ec2_spot_price *spots, size_t ns,
			 struct catalog_refresh_counts *counts, struct catalog **out,
			 struct err *err)
{
	size_t n = catalog_count(c), k = 0;
	struct catalog_type *merged = xcalloc(n + 1, sizeof(*merged));

	for (size_t i = 0; i < nt; i++) {
		if (i && strcmp(types[i - 1].name, types[i].name) == 0)
			continue;
		counts->types_listed++;
		if (!catalog_find(c, types[i].name))
			counts->types_unpriced++;
	}
	for (size_t i = 0; i < n; i++) {
		const struct catalog_type *t = catalog_at(c, i);
		const struct ec2_type_info *api = refresh_find_type(types, nt, t->name);
		const struct catalog_type *now = cur != c ? catalog_find(cur, t->name) : NULL;
		struct catalog_type base = *t;
		const struct ec2_spot_price *zones;
		size_t nz;

		if (!api) {
			counts->types_dropped++;
			continue;
		}
		/* the Price List's on-demand price, where a price refresh got one */
		if (now && now->price_from == CATALOG_FROM_API) {
			base.price = now->price;
			base.price_from = CATALOG_FROM_API;
		}
		zones = refresh_find_spot(spots, ns, t->name, &nz);
		refresh_merge_type(&base, api, zones, nz, counts, &merged[k++]);
	}
	counts->types_kept = k;
	if (k == 0) {
		free(merged);
		return err_set(err, EIO,
			       "DescribeInstanceTypes lists none of the %zu instance types of the "
			       "catalog of %s; check the EC2 endpoint and region",
			       n, catalog_region(c));
	}
	*out = catalog_new(catalog_region(c), merged, k);
	catalog_copy_sources(*out, cur);
	return 0;
}

/* "<what> 2026-11-29 12:28 UTC", now. */
static char *refresh_source(const char *what)
{
	time_t now = (time_t)(clock_now_ns() / 1000000000);
	struct tm tm;
	char when[32] = "(no clock)";

	if (gmtime_r(&now, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", &tm);
	return xasprintf("%s %s", what, when);
}

/* Asks EC2, merges, publishes; nothing is published on any failure. */
int catalog_refresh_counted(struct catalog *c, struct ec2_client *ec2,
			    struct catalog_refresh_counts *counts, struct err *err)
{
	struct catalog_refresh_counts cnt = { 0 };
	struct ec2_type_info *types = NULL;
	struct ec2_spot_price *spots = NULL;
	struct catalog *next = NULL;
	size_t nt = 0, ns = 0;
	int ret;

	ret = ec2_describe_instance_types(ec2, &types, &nt, NULL, err);
	if (ret >= 0 && nt == 0)
		ret = err_set(err, EIO, "DescribeInstanceTypes listed no instance types");
	if (ret >= 0)
		ret = ec2_describe_spot_prices_by_zone(ec2, NULL, 0, &spots, &ns, NULL, err);
	if (ret >= 0) {
		struct catalog *cur = catalog_acquire(c);
		_cleanup_free_ char *src = refresh_source("EC2 spot price history");

		nt = refresh_named_types(types, nt);
		qsort(types, nt, sizeof(*types), refresh_type_cmp);
		ret = refresh_merge(c, cur, types, nt, spots, ns, &cnt, &next, err);
		if (ret >= 0)
			catalog_set_sources(next, NULL, NULL, src);
		catalog_release(cur);
	}
	ec2_type_infos_free(types, nt);
	ec2_spot_prices_free(spots, ns);
	if (ret < 0)
		return err_wrap(err, "catalog refresh");
	catalog_publish(c, next);
	if (counts)
		*counts = cnt;
	return 0;
}

/* A deep copy of t: its strings and zone prices. */
static void refresh_copy_type(const struct catalog_type *t, struct catalog_type *out)
{
	*out = *t;
	out->name = xstrdup(t->name);
	out->generation = xstrdup(t->generation ? t->generation : "current");
	out->zone_spot = NULL;
	if (t->n_zone_spot) {
		out->zone_spot = xcalloc(t->n_zone_spot, sizeof(*out->zone_spot));
		memcpy(out->zone_spot, t->zone_spot, t->n_zone_spot * sizeof(*out->zone_spot));
	}
}

/* Whether a Price List price is believable for a type whose loaded price is shipped. */
static bool price_plausible(double shipped, double listed)
{
	if (!(shipped > 0))
		return true;
	return listed >= shipped * CATALOG_PRICE_MIN_RATIO &&
	       listed <= shipped * CATALOG_PRICE_MAX_RATIO;
}

/* The current catalog of c with the List's prices, into *out; EIO when it prices none. */
static int prices_merge(struct catalog *c, const struct pricing_list *l,
			struct catalog_price_counts *counts, struct catalog **out, struct err *err)
{
	struct catalog *cur = catalog_acquire(c);
	size_t n = catalog_count(cur);
	struct catalog_type *types = xcalloc(n + 1, sizeof(*types));
	_cleanup_free_ char *src = refresh_source("AWS Price List");

	for (size_t i = 0; i < n; i++) {
		const struct catalog_type *t = catalog_at(cur, i);
		const struct catalog_type *loaded = catalog_find(c, t->name);
		const struct pricing_price *p = pricing_list_find(l, t->name);
		double shipped = loaded ? loaded->price : t->price;

		refresh_copy_type(t, &types[i]);
		/* each refresh starts from the shipped price: a type the List stopped pricing
		 * does not keep an old List price under a new date */
		types[i].price = shipped;
		types[i].price_from = CATALOG_FROM_SHIPPED;
		if (!p) {
			counts->unpriced++;
		} else if (!price_plausible(shipped, p->usd_per_hour)) {
			log_warn("catalog prices: %s: dropped the AWS Price List's on-demand price "
				 "$%.6g an hour: not within %.2gx to %.2gx of the shipped $%.6g; "
				 "keeping the shipped one",
				 t->name, p->usd_per_hour, CATALOG_PRICE_MIN_RATIO,
				 CATALOG_PRICE_MAX_RATIO, shipped);
			counts->not_believed++;
		} else {
			types[i].price = p->usd_per_hour;
			types[i].price_from = CATALOG_FROM_API;
			counts->priced++;
		}
	}
	if (counts->priced == 0) {
		for (size_t i = 0; i < n; i++) {
			free(types[i].name);
			free(types[i].generation);
			free(types[i].zone_spot);
		}
		free(types);
		err_set(err, EIO,
			"the AWS Price List priced none of the %zu instance types of the catalog "
			"of "
			"%s (%zu products answered, %zu prices not believed)",
			n, catalog_region(c), counts->products, counts->not_believed);
		catalog_release(cur);
		return -EIO;
	}
	*out = catalog_new(catalog_region(c), types, n);
	catalog_copy_sources(*out, cur);
	catalog_set_sources(*out, NULL, src, NULL);
	catalog_release(cur);
	return 0;
}

/* Asks the Price List, merges into the current catalog, publishes. */
int catalog_refresh_prices(struct catalog *c, struct pricing_client *p,
			   struct catalog_price_counts *counts, struct err *err)
{
	struct catalog_price_counts cnt = { 0 };
	struct pricing_list l;
	struct catalog *next = NULL;
	int ret = pricing_ec2_on_demand(p, catalog_region(c), NULL, 0, &l, err);

	cnt.products = l.products;
	if (ret >= 0)
		ret = prices_merge(c, &l, &cnt, &next, err);
	pricing_list_release(&l);
	if (ret < 0)
		return err_wrap(err, "catalog prices");
	catalog_publish(c, next);
	if (counts)
		*counts = cnt;
	return 0;
}

/* Refreshes without reporting counts. */
int catalog_refresh(struct catalog *c, struct ec2_client *ec2, struct err *err)
{
	return catalog_refresh_counted(c, ec2, NULL, err);
}

/* A periodic refresh of one catalog, on its own thread. */
struct catalog_refresher {
	struct catalog *catalog;
	struct ec2_client *ec2;
	struct pricing_client *pricing; /* owned; NULL: the Price List is off */
	int64_t interval_ns, price_interval_ns;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* stop was set */
	bool stop;
	pthread_t thread;
	struct catalog_refresher *next;
};

/* The running refreshers, one per catalog; kiyot has one, tests may have several. */
static struct catalog_refresher *refreshers;
static pthread_mutex_t refreshers_lock = PTHREAD_MUTEX_INITIALIZER;

/* One refresh, and its one log line. */
static void refresher_run_once(struct catalog_refresher *r)
{
	struct catalog_refresh_counts n;
	struct err err = ERR_INIT;

	if (catalog_refresh_counted(r->catalog, r->ec2, &n, &err) < 0) {
		log_warn("%s; keeping the instance catalog of %s as it was", err.msg,
			 catalog_region(r->catalog));
		return;
	}
	log_info("catalog refresh: %s: %zu types updated, %zu spot prices updated (%zu not "
		 "believed), %zu types dropped (EC2 lists %zu types, the catalog now has %zu; %zu "
		 "types without a known on-demand price not added)",
		 catalog_region(r->catalog), n.types_updated, n.spot_updated, n.spot_dropped,
		 n.types_dropped, n.types_listed, n.types_kept, n.types_unpriced);
}

/* One price refresh, and its one log line. */
static void refresher_run_prices(struct catalog_refresher *r)
{
	struct catalog_price_counts n;
	struct err err = ERR_INIT;
	struct catalog *now;

	if (catalog_refresh_prices(r->catalog, r->pricing, &n, &err) < 0) {
		const struct catalog_type *t = NULL;

		if (err.code == ECANCELED) /* stopping: nothing to warn of */
			return;

		now = catalog_acquire(r->catalog);
		for (size_t i = 0;
		     i < catalog_count(now) && (!t || t->price_from != CATALOG_FROM_API); i++)
			t = catalog_at(now, i);
		log_warn("%s; the on-demand prices of %s stay those of the %s", err.msg,
			 catalog_region(r->catalog),
			 t ? catalog_price_source(now, t, false) : "catalog");
		catalog_release(now);
		return;
	}
	log_info("catalog prices: %s: %zu on-demand prices from the AWS Price List (%s; %zu "
		 "products, %zu prices not believed, %zu types without one keep the shipped "
		 "price)",
		 catalog_region(r->catalog), n.priced, pricing_client_endpoint(r->pricing),
		 n.products, n.not_believed, n.unpriced);
}

/* Whether the refresher is stopping: its EC2 calls in flight end (cancel.h). */
static bool refresher_stopping(void *ctx)
{
	struct catalog_refresher *r = ctx;

	return __atomic_load_n(&r->stop, __ATOMIC_RELAXED);
}

/* Refreshes from EC2 at once, then every interval, and the prices from the Price List after
 * the first, then every price interval, until stopped. */
static void *refresher_main(void *arg)
{
	struct catalog_refresher *r = arg;
	struct cancel_scope sc;
	int64_t next_ec2 = 0, next_price = 0;

	cancel_scope_enter(&sc, refresher_stopping, r);
	for (;;) {
		int64_t deadline;
		struct timespec ts;

		if (clock_mono_ns() >= next_ec2) {
			refresher_run_once(r);
			next_ec2 = clock_mono_ns() + r->interval_ns;
		}
		if (r->pricing && clock_mono_ns() >= next_price && !refresher_stopping(r)) {
			refresher_run_prices(r);
			next_price = clock_mono_ns() + r->price_interval_ns;
		}
		deadline = r->pricing && next_price < next_ec2 ? next_price : next_ec2;
		ts.tv_sec = (time_t)(deadline / 1000000000);
		ts.tv_nsec = (long)(deadline % 1000000000);
		pthread_mutex_lock(&r->lock);
		while (!r->stop && clock_mono_ns() < deadline)
			pthread_cond_timedwait(&r->cond, &r->lock, &ts);
		if (r->stop) {
			pthread_mutex_unlock(&r->lock);
			cancel_scope_leave(&sc);
			return NULL;
		}
		pthread_mutex_unlock(&r->lock);
	}
}

/* Frees a refresher whose thread is not running. */
static void refresher_free(struct catalog_refresher *r)
{
	pricing_client_free(r->pricing);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r);
}

/* Starts the refresher thread of c, with EC2 only. */
int catalog_refresh_start(struct catalog *c, struct ec2_client *ec2, int interval_s,
			  struct err *err)
{
	struct catalog_refresh_config cfg = { .interval_s = interval_s };

	if (interval_s <= 0)
		return err_set(err, EINVAL, "catalog refresh: the interval must be positive");
	return catalog_refresh_start_config(c, ec2, &cfg, err);
}

/* The refresher's Price List client, into r->pricing; one line when it is off. */
static int refresher_pricing(struct catalog_refresher *r, const struct catalog_refresh_config *cfg,
			     struct err *err)
{
	struct pricing_config pc = cfg->pricing;
	struct catalog *now;

	if (!cfg->price_list) {
		now = catalog_acquire(r->catalog);
		log_info("catalog prices: %s: the AWS Price List is off (ec2.priceList: false); "
			 "on-demand prices are those of the %s",
			 catalog_region(r->catalog),
			 catalog_count(now) ? catalog_price_source(now, catalog_at(now, 0), false)
					    : "catalog");
		catalog_release(now);
		return 0;
	}
	pc.endpoint = cfg->price_list_endpoint;
	pc.region = catalog_region(r->catalog);
	pc.creds = ec2_client_creds(r->ec2);
	if (pricing_client_new(&pc, &r->pricing, err) < 0)
		return err_wrap(err, "ec2.priceList");
	r->price_interval_ns = (int64_t)(cfg->price_interval_s > 0 ? cfg->price_interval_s
								   : CATALOG_PRICE_INTERVAL_S) *
			       1000000000;
	return 0;
}

/* Starts the refresher thread of c and registers it. */
int catalog_refresh_start_config(struct catalog *c, struct ec2_client *ec2,
				 const struct catalog_refresh_config *cfg, struct err *err)
{
	struct catalog_refresher *r;
	pthread_condattr_t ca;
	int ret = 0;

	if (cfg->interval_s < 0 || cfg->price_interval_s < 0)
		return err_set(err, EINVAL, "catalog refresh: the interval must be positive");
	r = xcalloc(1, sizeof(*r));
	r->catalog = c;
	r->ec2 = ec2;
	r->interval_ns =
		(int64_t)(cfg->interval_s > 0 ? cfg->interval_s : CATALOG_REFRESH_INTERVAL_S) *
		1000000000;
	if (refresher_pricing(r, cfg, err) < 0) {
		free(r);
		return -err->code;
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_lock(&refreshers_lock);
	for (struct catalog_refresher *o = refreshers; o; o = o->next)
		if (o->catalog == c)
			ret = err_set(err, EEXIST, "catalog refresh: already running for %s",
				      catalog_region(c));
	if (ret == 0 && pthread_create(&r->thread, NULL, refresher_main, r) != 0)
		ret = err_set(err, EAGAIN, "catalog refresh: cannot start a thread");
	if (ret == 0) {
		r->next = refreshers;
		refreshers = r;
	}
	pthread_mutex_unlock(&refreshers_lock);
	if (ret < 0)
		refresher_free(r);
	return ret;
}

/* Unregisters the refresher of c, tells it to stop and joins it. */
void catalog_refresh_stop(struct catalog *c)
{
	struct catalog_refresher *r = NULL;

	pthread_mutex_lock(&refreshers_lock);
	for (struct catalog_refresher **p = &refreshers; c && *p; p = &(*p)->next) {
		if ((*p)->catalog == c) {
			r = *p;
			*p = r->next;
			break;
		}
	}
	pthread_mutex_unlock(&refreshers_lock);
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	__atomic_store_n(&r->stop, true, __ATOMIC_RELAXED);
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	refresher_free(r);
}
