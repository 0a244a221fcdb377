/*
 * provider_ec2.c: cells as EC2 instances. The cloud is the source of truth: every instance
 * kiyot launches carries its cluster id and cell id as tags, list() asks EC2 (one paginated
 * DescribeInstances filtered by the cluster id), and nothing without our cluster id is ever
 * touched.
 *
 * Launches are idempotent: the ClientToken comes from the cluster, the pod UID, the cell and the
 * instance type, so a retried launch (after a timeout, or a kiyot killed mid-launch) gets the
 * same instance back instead of a second one. A type without capacity passes the launch to the
 * next candidate sizing offered.
 *
 * Waiting for instances to run is batched: a poller thread describes all of the cluster's
 * instances in one call while any launch waits, and wakes every waiter; a hundred launches
 * cost one DescribeInstances a second, not a hundred.
 */
#include "providers/provider.h"

#include <errno.h>
#include <math.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "awscreds.h"
#include "cancel.h"
#include "clock.h"
#include "codec.h"
#include "ec2.h"
#include "log.h"
#include "strvec.h"
#include "xalloc.h"

#define DEFAULT_LAUNCH_TIMEOUT_S 600
#define DEFAULT_POLL_MS 1000

/* What the poller last saw of one of our instances. */
struct seen {
	char *instance_id;
	char *cell_id;
	char *state;
	char *ip;
};

/* An instance this provider launched lately, for terminations EC2 cannot list yet. */
struct recent {
	char *cell_id;
	char *instance_id;
	int64_t at_ns; /* monotonic */
};

#define RECENT_NS (300 * 1000000000LL) /* how long a launch counts as recent */

static void recent_release(struct recent *r)
{
	free(r->cell_id);
	free(r->instance_id);
}

struct ec2p {
	char *cluster_id;
	char *node; /* NULL: none (instances untagged, every node's listed) */
	char *image_id, *instance_profile;
	char *image_id_arm64; /* NULL: no arm64 cells */
	char **subnets; /* ec2.subnetIds (or ec2.subnetId), tried in order; none: EC2's default */
	size_t n_subnets;
	/* the subnets' availability zones (DescribeSubnets, asked once at the first spot launch
	 * that can use them; again after a failure, at most once a minute), under lock */
	char (*subnet_zones)[32];
	int64_t zones_tried_ns;
	char **security_groups;
	size_t n_security_groups;
	int launch_timeout_s, poll_ms;
	struct aws_creds_provider *creds;
	struct ec2_client *client;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* the cache changed, or a waiter arrived, or stop */
	struct seen *cache;
	size_t n_cache;
	uint64_t generation;   /* bumped by every poll */
	int64_t cache_ns;      /* when the cache was last described whole (monotonic), or 0 */
	struct recent *recent; /* launches of the last RECENT_NS */
	size_t n_recent, cap_recent;
	int waiters;
	int stop;
	pthread_t poller;

	pthread_mutex_t term_lock; /* the terminate batch: queue and its leader */
	pthread_cond_t term_cond;
	struct term_req *term_queue;
	int term_leader;
};

static void seen_free(struct seen *a, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(a[i].instance_id);
		free(a[i].cell_id);
		free(a[i].state);
		free(a[i].ip);
	}
	free(a);
}

/* DescribeInstances of every live instance of the cluster (one paginated call). */
static int describe_ours(struct ec2p *p, struct ec2_instance **out, size_t *n, struct err *err)
{
	const char *cluster[] = { p->cluster_id };
	const char *states[] = { "pending", "running", "shutting-down", "stopping", "stopped" };
	struct ec2_filter f[2] = {
		{ "tag:" EC2_TAG_CLUSTER_ID, cluster, 1 },
		{ "instance-state-name", states, ARRAY_SIZE(states) },
	};
	struct ec2_describe_query q = { f, 2, NULL, 0, 0 };

	return ec2_describe_instances(p->client, &q, out, n, NULL, err);
}

/* Whether the provider is being destroyed: the poller's call in flight ends. */
static bool provider_stopping(void *ctx)
{
	struct ec2p *p = ctx;

	return __atomic_load_n(&p->stop, __ATOMIC_RELAXED) != 0;
}

static void *poller_thread(void *arg)
{
	struct ec2p *p = arg;
	struct cancel_scope sc;
	struct timespec ts;

	cancel_scope_enter(&sc, provider_stopping, p);
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct ec2_instance *inst = NULL;
		struct seen *fresh;
		size_t n = 0;
		struct err err = ERR_INIT;
		int ret;

		if (!p->waiters) {
			pthread_cond_wait(&p->cond, &p->lock);
			continue;
		}
		pthread_mutex_unlock(&p->lock);
		ret = describe_ours(p, &inst, &n, &err);
		if (ret < 0)
			log_warn("ec2: describing instances: %s", err.msg);
		fresh = xcalloc(n + 1, sizeof(*fresh));
		for (size_t i = 0; i < n; i++) {
			const char *cell = ec2_tags_get(&inst[i].tags, EC2_TAG_CELL_ID);

			fresh[i].instance_id = xstrdup(inst[i].instance_id);
			fresh[i].cell_id = xstrdup(cell ? cell : "");
			fresh[i].state = xstrdup(inst[i].state);
			fresh[i].ip = xstrdup(inst[i].private_ip ? inst[i].private_ip : "");
		}
		ec2_instances_free(inst, n);
		pthread_mutex_lock(&p->lock);
		if (ret == 0) {
			seen_free(p->cache, p->n_cache);
			p->cache = fresh;
			p->n_cache = n;
			p->cache_ns = clock_mono_ns();
		} else {
			seen_free(fresh, n);
		}
		p->generation++;
		pthread_cond_broadcast(&p->cond);
		ts = clock_deadline(CLOCK_MONOTONIC, p->poll_ms);
		while (!p->stop && pthread_cond_timedwait(&p->cond, &p->lock, &ts) == 0)
			; /* wake-ups from waiters do not shorten the period */
	}
	pthread_mutex_unlock(&p->lock);
	cancel_scope_leave(&sc);
	return NULL;
}

/* An instance's state reason as one line: EC2's message, which starts with the code, or the
 * code and the message; NULL when it has none. */
static char *reason_of(const struct ec2_instance *in)
{
	const char *code = in->state_reason_code, *msg = in->state_reason_message;

	if (!code && !msg)
		return NULL;
	if (!code || (msg && strncmp(msg, code, strlen(code)) == 0))
		return xstrdup(msg);
	return msg ? xasprintf("%s: %s", code, msg) : xstrdup(code);
}

/* Whether an EC2 state is one an instance may still come up from. */
static bool state_live(const char *state)
{
	return state && (strcmp(state, "pending") == 0 || strcmp(state, "running") == 0);
}

/* DescribeInstances of the cluster's instances whose `filter` is value, whatever their state
 * (the poller lists only live ones): a pending or running one in *out if there is one, else
 * the one launched last. -ENOENT when EC2 lists none (as it may for a few seconds after
 * RunInstances). */
static int describe_one(struct ec2p *p, const char *filter, const char *value,
			struct ec2_instance *out, struct err *err)
{
	const char *cluster[] = { p->cluster_id };
	const char *values[] = { value };
	struct ec2_filter f[2] = {
		{ "tag:" EC2_TAG_CLUSTER_ID, cluster, 1 }, /* only ever ours */
		{ filter, values, 1 },
	};
	struct ec2_describe_query q = { f, 2, NULL, 0, 0 };
	struct ec2_instance *inst = NULL;
	size_t n = 0, best = 0;

	if (ec2_describe_instances(p->client, &q, &inst, &n, NULL, err) < 0)
		return -err->code;
	for (size_t i = 1; i < n; i++)
		if (!state_live(inst[best].state) &&
		    (state_live(inst[i].state) || inst[i].launch_ns > inst[best].launch_ns))
			best = i;
	if (n) {
		*out = inst[best];
		inst[best] = (struct ec2_instance){ 0 };
	}
	ec2_instances_free(inst, n);
	return n ? 0 : err_set(err, ENOENT, "EC2 lists no instance with %s %s", filter, value);
}

/* While a launch waits, the instance is described by itself this often when the poller does
 * not list it: the poller leaves terminated instances out. */
#define WAIT_DESCRIBE_NS (3 * 1000000000LL)

/* EIO saying that an instance left pending and running while its launch waited, what it is
 * now and why (EC2's state reason, from a DescribeInstances of it): seen is the state the
 * poller saw it in, or NULL when the poller no longer lists it (terminated). 0 when nothing
 * says it left: EC2 lists it live, or could not say and the poller saw nothing. */
static int left_boot(struct ec2p *p, const char *instance_id, const char *seen, struct err *err)
{
	struct ec2_instance in = { 0 };
	struct err derr = ERR_INIT;
	_cleanup_free_ char *reason = NULL;
	const char *state = seen;
	int ret;

	if (describe_one(p, "instance-id", instance_id, &in, &derr) < 0)
		log_debug("ec2: describing instance %s: %s", instance_id, derr.msg);
	else if (!state_live(in.state))
		state = in.state;
	if (!state) {
		ec2_instance_release(&in);
		return 0;
	}
	reason = reason_of(&in);
	ret = err_set(err, EIO, "the instance %s was %s during boot%s%s", instance_id, state,
		      reason ? ": " : "", reason ? reason : "");
	ec2_instance_release(&in);
	return ret;
}

/* Waits until the poller sees the instance running with an address (fills *ip), or it left
 * pending (EIO with EC2's state reason), or the launch is cancelled (ECANCELED). */
static int wait_running(struct ec2p *p, const char *instance_id, char **ip, struct err *err)
{
	int64_t deadline = clock_mono_ns() + (int64_t)p->launch_timeout_s * 1000000000LL;
	int64_t next_describe = clock_mono_ns() + WAIT_DESCRIBE_NS;
	int ret = -ETIMEDOUT;

	pthread_mutex_lock(&p->lock);
	p->waiters++;
	pthread_cond_broadcast(&p->cond);
	while (!p->stop && clock_mono_ns() < deadline) {
		uint64_t gen = p->generation;
		_cleanup_free_ char *left = NULL; /* the state it left pending for */
		bool listed = false;
		struct timespec ts;

		for (size_t i = 0; i < p->n_cache; i++) {
			const struct seen *s = &p->cache[i];

			if (strcmp(s->instance_id, instance_id) != 0)
				continue;
			listed = true;
			if (strcmp(s->state, "running") == 0 && s->ip[0]) {
				*ip = xstrdup(s->ip);
				ret = 0;
			} else if (!state_live(s->state) && !left) {
				left = xstrdup(s->state);
			}
		}
		if (ret == 0)
			break;
		if (cancel_requested()) {
			ret = err_set(err, ECANCELED, "instance %s: its launch was cancelled",
				      instance_id);
			break;
		}
		if (left || (!listed && clock_mono_ns() >= next_describe)) {
			pthread_mutex_unlock(&p->lock);
			ret = left_boot(p, instance_id, left, err);
			pthread_mutex_lock(&p->lock);
			next_describe = clock_mono_ns() + WAIT_DESCRIBE_NS;
			if (ret < 0)
				break;
			ret = -ETIMEDOUT;
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += 1;
		while (!p->stop && p->generation == gen)
			if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) != 0)
				break;
	}
	p->waiters--;
	pthread_mutex_unlock(&p->lock);
	if (ret == -ETIMEDOUT)
		err_set(err, ETIMEDOUT, "instance %s did not run with an address within %d s",
			instance_id, p->launch_timeout_s);
	return ret;
}

/* Remembers a launch (dropping those older than RECENT_NS). */
static void recent_add(struct ec2p *p, const char *cell_id, const char *instance_id)
{
	int64_t now = clock_mono_ns();

	pthread_mutex_lock(&p->lock);
	for (size_t j = 0; j < p->n_recent; j++)
		if (now - p->recent[j].at_ns > RECENT_NS ||
		    strcmp(p->recent[j].instance_id, instance_id) == 0) {
			recent_release(&p->recent[j]);
			p->recent[j--] = p->recent[--p->n_recent];
		}
	xgrow((void **)&p->recent, &p->cap_recent, p->n_recent + 1, sizeof(*p->recent));
	p->recent[p->n_recent++] = (struct recent){ xstrdup(cell_id), xstrdup(instance_id), now };
	pthread_mutex_unlock(&p->lock);
}

/* The idempotency token of a launch: the same pod, cell, type, subnet and market always give
 * the same one. A launch in the first subnet and the pod's own market keeps the token it had
 * before subnets and market fallbacks existed (a kiyot restarted across an upgrade resumes it). */
static void client_token(const struct ec2p *p, const struct cell_spec *spec, const char *type,
			 size_t subnet, bool market_fallback, char out[EC2_MAX_CLIENT_TOKEN + 1])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	char *key = xasprintf("%s/%s/%s/%s", p->cluster_id, spec->pod_uid ? spec->pod_uid : "",
			      spec->cell_id, type);
	char hex[65];

	if (subnet > 0 || market_fallback) {
		char *more = xasprintf("%s/subnet-%zu%s", key, subnet,
				       market_fallback ? "/on-demand" : "");

		free(key);
		key = more;
	}
	EVP_Digest(key, strlen(key), md, &mdlen, EVP_sha256(), NULL);
	free(key);
	hex_encode(md, 32, hex);
	/* "kiyot-" and the pod UID where it fits (a standby cell's: its cell id, so a launch
	 * the next kiyot resumes with the same id is the same), then the hash: <= 64 characters */
	snprintf(out, EC2_MAX_CLIENT_TOKEN + 1, "kiyot-%.36s-%.21s",
		 spec->standby	 ? spec->cell_id
		 : spec->pod_uid ? spec->pod_uid
				 : "",
		 hex);
}

/* One way to launch a cell: a type, a subnet (NULL: EC2's default) and a market. */
struct way {
	const char *type;
	const char *subnet;
	size_t subnet_index;
	bool spot;
	bool market_fallback; /* on-demand in place of the pod's spot */
};

/* Appends to a launch's note, within LAUNCH_NOTE_MAX. */
#define LAUNCH_NOTE_MAX 512
static void note_add(char **note, const char *a, const char *sep, const char *b)
{
	char *all = xasprintf("%s%s%s%s%s", *note ? *note : "", *note ? "; " : "", a, sep, b);

	free(*note);
	if (strlen(all) > LAUNCH_NOTE_MAX)
		all[LAUNCH_NOTE_MAX] = '\0';
	*note = all;
}

/* ---- spot: the cheapest zone first, near-ties by interruption risk ---- */

#define ZONES_RETRY_NS (60 * 1000000000LL)
/* Types whose spot prices are this close (a fraction of the lower) count as a tie. */
#define SPOT_NEAR_TIE 0.05

/* A spot interruption band in words: the Spot Instance Advisor's monthly ranges. */
static const char *band_words(int band)
{
	static const char *const words[] = { "<5%", "5-10%", "10-15%", "15-20%", ">20%" };

	return band >= 0 && band < (int)ARRAY_SIZE(words) ? words[band] : "unknown";
}

/* Learns the subnets' zones once (DescribeSubnets); leaves them unknown on a failure (logged)
 * and asks again a minute later at the earliest. */
static void subnet_zones_load(struct ec2p *p)
{
	struct ec2_subnet *got = NULL;
	size_t n = 0;
	char(*zones)[32];
	struct err err = ERR_INIT;
	int64_t now = clock_mono_ns();

	pthread_mutex_lock(&p->lock);
	if (p->subnet_zones || (p->zones_tried_ns && now - p->zones_tried_ns < ZONES_RETRY_NS)) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	p->zones_tried_ns = now;
	pthread_mutex_unlock(&p->lock);
	if (ec2_describe_subnets(p->client, (const char *const *)p->subnets, p->n_subnets, &got, &n,
				 NULL, &err) < 0) {
		log_warn(
			"ec2: the subnets' zones are unknown (%s); spot cells try ec2.subnetIds in "
			"their order",
			err.msg);
		return;
	}
	zones = xcalloc(p->n_subnets, sizeof(*zones));
	for (size_t i = 0; i < p->n_subnets; i++)
		for (size_t j = 0; j < n; j++)
			if (strcmp(got[j].subnet_id, p->subnets[i]) == 0)
				snprintf(zones[i], sizeof(zones[i]), "%.31s",
					 got[j].availability_zone);
	ec2_subnets_free(got, n);
	pthread_mutex_lock(&p->lock);
	if (!p->subnet_zones)
		p->subnet_zones = steal_ptr(zones);
	pthread_mutex_unlock(&p->lock);
	free(zones);
}

/* The spot price of type in zone from the spec's table: the zone's, else the type's anywhere
 * (zone NULL); -1 when neither is known. *band (may be NULL) gets the type's band. */
static double spot_price_in(const struct cell_spec *spec, const char *type, const char *zone,
			    int *band)
{
	double any = -1, here = -1;

	if (band)
		*band = -1;
	for (size_t i = 0; i < spec->n_zone_prices; i++) {
		const struct cell_zone_price *z = &spec->zone_prices[i];

		if (strcmp(z->instance_type, type) != 0)
			continue;
		if (band && z->band >= 0)
			*band = z->band;
		if (!z->zone)
			any = z->price;
		else if (zone && zone[0] && strcmp(z->zone, zone) == 0)
			here = z->price;
	}
	return here >= 0 ? here : any;
}

/* The lowest spot price of type over the subnets' zones; -1 when none is known. */
static double spot_best(const struct ec2p *p, const struct cell_spec *spec, const char *type,
			char (*zones)[32], int *band)
{
	double best = -1;

	for (size_t s = 0; s < (p->n_subnets ? p->n_subnets : 1); s++) {
		double v = spot_price_in(spec, type, zones ? zones[s] : NULL, band);

		if (v >= 0 && (best < 0 || v < best))
			best = v;
	}
	return best;
}

/*
 * A spot pod's plan: a runner-up whose spot price is within SPOT_NEAR_TIE of the chosen
 * type's and whose interruption band is lower (both known) goes first; the subnets are put
 * in the order of the first type's spot price in their zones (unknown last, else as
 * configured). order gets the subnet indices; a note says what moved.
 */
static void spot_plan(const struct ec2p *p, const struct cell_spec *spec, const char **types,
		      size_t n_types, char (*zones)[32], size_t *order, char **note)
{
	size_t n_subnets = p->n_subnets ? p->n_subnets : 1, pick = 0;
	int band0, band, best_band;
	double p0 = spot_best(p, spec, types[0], zones, &band0), v;
	double price[64];

	best_band = band0;
	for (size_t t = 1; t < n_types && p0 > 0; t++) {
		v = spot_best(p, spec, types[t], zones, &band);
		if (v >= 0 && band >= 0 && best_band >= 0 && band < best_band &&
		    fabs(v - p0) <= SPOT_NEAR_TIE * (v < p0 ? v : p0)) {
			pick = t;
			best_band = band;
		}
	}
	if (pick) {
		const char *t = types[pick];
		_cleanup_free_ char *why = xasprintf(
			" first: its spot price is within %.0f%% of %s's and it is interrupted "
			"less often (interruption %s, not %s)",
			SPOT_NEAR_TIE * 100, types[0], band_words(best_band), band_words(band0));

		memmove(types + 1, types, pick * sizeof(*types));
		types[0] = t;
		note_add(note, t, "", why);
	}
	for (size_t s = 0; s < n_subnets; s++) {
		order[s] = s;
		price[s] = spot_price_in(spec, types[0], zones ? zones[s] : NULL, NULL);
		if (!zones || !zones[s][0])
			price[s] = -1;
	}
	/* a stable insertion sort: cheaper first, unknown last */
	for (size_t i = 1; i < n_subnets; i++)
		for (size_t j = i; j > 0; j--) {
			double a = price[order[j - 1]], b = price[order[j]];

			if (!(b >= 0 && (a < 0 || b < a)))
				break;
			size_t tmp = order[j - 1];

			order[j - 1] = order[j];
			order[j] = tmp;
		}
	if (order[0] != 0 && zones) {
		_cleanup_free_ char *why =
			xasprintf(" (%s) first: %s's spot price there is $%.4f/h, $%.4f/h in %s",
				  zones[order[0]], types[0], price[order[0]], price[0], zones[0]);

		note_add(note, p->subnets[order[0]], "", why);
	}
}

/*
 * The ways to try, in order: each of the pod's types (sizing's choice, then its runners-up) in
 * the first subnet, then in the next subnet, and so on; for a spot pod that allows it
 * (CELL_SPOT_OR_ON_DEMAND), all of that again on demand. A spot pod whose spec has spot
 * prices takes the spot market's subnets cheapest zone first (spot_plan). At most max; *note
 * says what the plan moved (NULL: nothing).
 */
static size_t ways_of(struct ec2p *p, const struct cell_spec *spec, struct way *w, size_t max,
		      char **note)
{
	const char *types[8];
	size_t n_types = 0, n = 0, n_subnets = p->n_subnets ? p->n_subnets : 1;
	int markets = spec->spot == CELL_SPOT_OR_ON_DEMAND ? 2 : 1;
	size_t order[64];
	char(*zones)[32] = NULL;

	*note = NULL;
	types[n_types++] = spec->instance_type;
	for (size_t i = 0; i < spec->n_fallback_types && n_types < ARRAY_SIZE(types); i++)
		types[n_types++] = spec->fallback_types[i];
	if (n_subnets > ARRAY_SIZE(order))
		n_subnets = ARRAY_SIZE(order);
	for (size_t s = 0; s < n_subnets; s++)
		order[s] = s;
	if (spec->spot && spec->n_zone_prices) {
		if (p->n_subnets > 1) {
			subnet_zones_load(p);
			pthread_mutex_lock(&p->lock);
			if (p->subnet_zones) {
				zones = xcalloc(p->n_subnets, sizeof(*zones));
				memcpy(zones, p->subnet_zones, p->n_subnets * sizeof(*zones));
			}
			pthread_mutex_unlock(&p->lock);
		}
		spot_plan(p, spec, types, n_types, zones, order, note);
	}
	free(zones);
	for (int m = 0; m < markets; m++)
		for (size_t i = 0; i < n_subnets; i++) {
			size_t s = m == 0 ? order[i] : i;

			for (size_t t = 0; t < n_types && n < max; t++)
				w[n++] = (struct way){ types[t],
						       p->n_subnets ? p->subnets[s] : NULL, s,
						       spec->spot && m == 0, m == 1 };
		}
	return n;
}

/* "t3.nano in subnet-1 (spot)": a way, for notes and logs. */
static char *way_text(const struct way *w)
{
	return xasprintf("%s%s%s%s", w->type, w->subnet ? " in " : "", w->subnet ? w->subnet : "",
			 w->spot	      ? " (spot)"
			 : w->market_fallback ? " (on-demand)"
					      : "");
}

/* The EC2 error code in a RunInstances failure's message ("ec2 RunInstances: <Code>: ..."). */
static char *code_of(const char *msg)
{
	const char *c = strstr(msg, "RunInstances: ");
	size_t n;

	if (!c)
		return xstrdup("error");
	c += strlen("RunInstances: ");
	n = strcspn(c, ":");
	return xstrndup(c, n < 64 ? n : 64);
}

/*
 * The live instance an earlier launch of the cell made, when RunInstances refused its token with
 * other parameters (the resumed launch of a cell that enrolled meanwhile carries a new
 * enrollment secret in its user-data): launching an id that exists returns the existing cell.
 * 0 with *inst, or -ENOENT.
 */
static int launched_before(struct ec2p *p, const char *cell_id, struct ec2_instance *inst)
{
	struct ec2_instance in = { 0 };
	struct err derr = ERR_INIT;

	if (describe_one(p, "tag:" EC2_TAG_CELL_ID, cell_id, &in, &derr) < 0)
		return -ENOENT;
	if (!in.state || !state_live(in.state)) {
		ec2_instance_release(&in);
		return -ENOENT;
	}
	log_info("ec2: cell %s: its launch was made before (instance %s, %s); resuming it", cell_id,
		 in.instance_id, in.state);
	*inst = in;
	return 0;
}

/*
 * RunInstances along the ways until one has capacity: a capacity, support or limit error
 * (EC2_CAPACITY) passes to the next way, anything else ends the launch. *note says what was
 * tried before the launch that succeeded (NULL when the first did).
 */
static int run_along(struct ec2p *p, const struct cell_spec *spec, const struct ec2_tags *tags,
		     struct ec2_instance *inst, char **note, struct err *err)
{
	struct way w[64];
	size_t n;
	enum ec2_errclass cls = EC2_OK;
	const char *image = p->image_id;
	int ret = -EINVAL;

	*note = NULL;
	if (spec->arch == CELL_ARCH_ARM64) {
		if (!p->image_id_arm64)
			return err_set(
				err, EINVAL,
				"%s is an arm64 type and ec2.imageIds has no arm64 cell image; "
				"add one (or pin the pod to amd64)",
				spec->instance_type);
		image = p->image_id_arm64;
	}
	n = ways_of(p, spec, w, ARRAY_SIZE(w), note);
	for (size_t i = 0; i < n; i++) {
		struct ec2_run_spec rs = { 0 };
		char token[EC2_MAX_CLIENT_TOKEN + 1];
		_cleanup_free_ char *what = way_text(&w[i]);
		_cleanup_free_ char *code = NULL;

		client_token(p, spec, w[i].type, w[i].subnet_index, w[i].market_fallback, token);
		rs.client_token = token;
		rs.image_id = image;
		rs.instance_type = w[i].type;
		rs.subnet_id = w[i].subnet;
		rs.security_group_ids = (const char *const *)p->security_groups;
		rs.n_security_group_ids = p->n_security_groups;
		rs.iam_instance_profile = p->instance_profile;
		rs.user_data = spec->bootstrap;
		rs.user_data_len = spec->bootstrap ? strlen(spec->bootstrap) : 0;
		rs.tags = tags;
		rs.spot = w[i].spot;
		err_clear(err);
		ret = ec2_run_instance(p->client, &rs, inst, &cls, err);
		if (ret < 0 && strstr(err->msg, "IdempotentParameterMismatch") &&
		    launched_before(p, spec->cell_id, inst) == 0)
			ret = 0;
		if (ret == 0) {
			if (*note)
				note_add(note, "launched ", "", what);
			return 0;
		}
		if (cls != EC2_CAPACITY)
			return ret;
		code = code_of(err->msg);
		note_add(note, what, ": ", code);
		if (i + 1 < n) {
			_cleanup_free_ char *next = way_text(&w[i + 1]);

			log_warn("ec2: cell %s: %s: %s; trying %s", spec->cell_id, what, err->msg,
				 next);
		}
	}
	log_warn("ec2: cell %s: no capacity: %s", spec->cell_id, *note ? *note : "");
	err_wrap(err,
		 "no capacity in any of %zu way%s (types x subnets%s): add instance types or "
		 "subnets (ec2.subnetIds)%s; the last",
		 n, n == 1 ? "" : "s", spec->spot ? " x markets" : "",
		 spec->spot == CELL_SPOT ? ", or let the pod run on demand (annotation "
					   "pod.elotl.co/spot-fallback: on-demand)"
					 : "");
	free(*note);
	*note = NULL;
	return ret;
}

/* The tags of spec's instance (ec2_pod_tags): this cluster's and node's, the cell's, and its
 * pod's unless standby. */
static int cell_tags(const struct ec2p *p, const struct cell_spec *spec, bool standby,
		     struct ec2_tags *out, struct err *err)
{
	struct ec2_pod_ident ident = { .cluster_id = p->cluster_id,
				       .node = p->node,
				       .cell_id = spec->cell_id,
				       .pod_name = spec->pod_name,
				       .pod_namespace = spec->pod_namespace,
				       .pod_uid = spec->pod_uid,
				       .label_keys = spec->label_keys,
				       .label_values = spec->label_values,
				       .n_labels = spec->n_labels,
				       .standby = standby };

	return ec2_pod_tags(&ident, out, err);
}

static int ec2_launch(void *self, const struct cell_spec *spec, struct cell_info *out,
		      struct err *err)
{
	struct ec2p *p = self;
	struct ec2_tags tags = EC2_TAGS_INIT;
	struct ec2_instance inst = { 0 };
	char *ip = NULL, *note = NULL;
	int ret = -EINVAL;

	if (cell_tags(p, spec, spec->standby, &tags, err) < 0)
		return err_wrap(err, "cell %s tags", spec->cell_id);
	ret = run_along(p, spec, &tags, &inst, &note, err);
	ec2_tags_release(&tags);
	if (ret < 0)
		return err_wrap(err, "cell %s", spec->cell_id);
	log_info("ec2: cell %s is instance %s (%s%s)%s%s", spec->cell_id, inst.instance_id,
		 inst.instance_type, inst.spot ? ", spot" : "", note ? ": " : "", note ? note : "");
	recent_add(p, spec->cell_id, inst.instance_id);
	ret = wait_running(p, inst.instance_id, &ip, err);
	if (ret == 0) {
		out->cell_id = xstrdup(spec->cell_id);
		out->instance_id = xstrdup(inst.instance_id);
		out->instance_type = xstrdup(inst.instance_type);
		out->ip = ip;
		out->pod_uid = xstrdup(spec->pod_uid ? spec->pod_uid : "");
		out->launched_ns = inst.launch_ns ? inst.launch_ns : clock_now_ns();
		out->phase = CELL_RUNNING;
		out->launch_note = steal_ptr(note);
	} else {
		err_wrap(err, "cell %s", spec->cell_id);
	}
	free(note);
	ec2_instance_release(&inst);
	return ret;
}

static enum cell_phase phase_of(const char *state)
{
	if (strcmp(state, "pending") == 0)
		return CELL_PENDING;
	if (strcmp(state, "running") == 0)
		return CELL_RUNNING;
	if (strcmp(state, "shutting-down") == 0 || strcmp(state, "stopping") == 0)
		return CELL_TERMINATING;
	if (strcmp(state, "terminated") == 0)
		return CELL_TERMINATED;
	return CELL_FAILED;
}

static int ec2_list(void *self, struct cell_info **out, size_t *nout, struct err *err)
{
	struct ec2p *p = self;
	struct ec2_instance *inst = NULL;
	struct cell_info *a;
	size_t n = 0, kept = 0;

	if (describe_ours(p, &inst, &n, err) < 0)
		return err_wrap(err, "ec2: listing the cluster's instances");
	a = xcalloc(n + 1, sizeof(*a));
	for (size_t i = 0; i < n; i++) {
		const char *cell = ec2_tags_get(&inst[i].tags, EC2_TAG_CELL_ID);
		const char *uid = ec2_tags_get(&inst[i].tags, EC2_TAG_POD_UID);
		const char *node = ec2_tags_get(&inst[i].tags, EC2_TAG_NODE);
		struct cell_info *c = &a[kept];

		/* another node's instance of the same cluster is its to keep or collect */
		if (p->node && node && node[0] && strcmp(node, p->node) != 0)
			continue;
		/* an instance of ours without a cell id is known by its instance id */
		c->cell_id = xstrdup(cell && cell[0] ? cell : inst[i].instance_id);
		c->instance_id = xstrdup(inst[i].instance_id);
		c->instance_type = xstrdup(inst[i].instance_type);
		c->ip = xstrdup(inst[i].private_ip ? inst[i].private_ip : "");
		c->pod_uid = xstrdup(uid ? uid : "");
		c->launched_ns = inst[i].launch_ns;
		c->phase = phase_of(inst[i].state);
		kept++;
	}
	ec2_instances_free(inst, n);
	*out = a;
	*nout = kept;
	return 0;
}

/* A cell the poller saw live in a description at most two periods old, asking for one if
 * the cache is older (so every launch waiting for its agent shares the poller's one
 * DescribeInstances a period instead of making its own). Fills *out; false when the cache
 * does not list it live (it may have left: the caller describes it by itself). */
static bool state_from_cache(struct ec2p *p, const char *cell_id, struct cell_info *out)
{
	int64_t fresh_ns = 2LL * p->poll_ms * 1000000;
	bool hit = false;

	pthread_mutex_lock(&p->lock);
	if (clock_mono_ns() - p->cache_ns > fresh_ns) {
		uint64_t gen = p->generation;

		p->waiters++;
		pthread_cond_broadcast(&p->cond);
		while (!p->stop && p->generation == gen && !cancel_requested()) {
			struct timespec ts = clock_deadline(CLOCK_MONOTONIC, 100);

			pthread_cond_timedwait(&p->cond, &p->lock, &ts);
		}
		p->waiters--;
	}
	for (size_t i = 0; i < p->n_cache && !hit && clock_mono_ns() - p->cache_ns <= fresh_ns;
	     i++) {
		const struct seen *c = &p->cache[i];

		if ((strcmp(c->cell_id, cell_id) != 0 && strcmp(c->instance_id, cell_id) != 0) ||
		    !state_live(c->state))
			continue;
		out->cell_id = xstrdup(cell_id);
		out->instance_id = xstrdup(c->instance_id);
		out->instance_type = xstrdup("");
		out->ip = xstrdup(c->ip);
		out->pod_uid = xstrdup("");
		out->phase = phase_of(c->state);
		hit = true;
	}
	pthread_mutex_unlock(&p->lock);
	return hit;
}

/* provider_ops.state: the cell's instance as EC2 describes it now (by its cell tag, or its
 * id), whatever its state, with its state reason: from the poller's batched description
 * while that lists it live, else one DescribeInstances of its own (the poller lists only live
 * instances: one that left is described for its state reason). */
static int ec2_state(void *self, const char *cell_id, struct cell_info *out, struct err *err)
{
	struct ec2p *p = self;
	struct ec2_instance in = { 0 };
	const char *uid;

	if (state_from_cache(p, cell_id, out))
		return 0;

	if (describe_one(p, strncmp(cell_id, "i-", 2) == 0 ? "instance-id" : "tag:" EC2_TAG_CELL_ID,
			 cell_id, &in, err) < 0)
		return err_wrap(err, "ec2: cell %s", cell_id);
	uid = ec2_tags_get(&in.tags, EC2_TAG_POD_UID);
	out->cell_id = xstrdup(cell_id);
	out->instance_id = xstrdup(in.instance_id ? in.instance_id : "");
	out->instance_type = xstrdup(in.instance_type ? in.instance_type : "");
	out->ip = xstrdup(in.private_ip ? in.private_ip : "");
	out->pod_uid = xstrdup(uid ? uid : "");
	out->launched_ns = in.launch_ns;
	out->phase = in.state ? phase_of(in.state) : CELL_FAILED;
	out->reason = reason_of(&in);
	ec2_instance_release(&in);
	return 0;
}

/* The instance id of a cell this provider launched lately, or NULL (caller frees). */
static char *recent_instance(struct ec2p *p, const char *cell_id)
{
	char *id = NULL;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n_recent && !id; i++)
		if (strcmp(p->recent[i].cell_id, cell_id) == 0)
			id = xstrdup(p->recent[i].instance_id);
	pthread_mutex_unlock(&p->lock);
	return id;
}

/* provider_ops.assign: a standby cell's instance now runs the pod spec names: the pod's tags
 * (uid, name, namespace, Name and labels, as a launch for it would have them) are added, then
 * the standby tag removed, so an instance is never without an owner's mark. */
static int ec2_assign(void *self, const struct cell_spec *spec, struct err *err)
{
	struct ec2p *p = self;
	struct ec2_tags tags = EC2_TAGS_INIT;
	enum ec2_errclass cls = EC2_OK;
	const char *standby_key[] = { EC2_TAG_STANDBY };
	char *iid = recent_instance(p, spec->cell_id);
	int ret;

	if (!iid) {
		struct ec2_instance in = { 0 };

		if (describe_one(p, "tag:" EC2_TAG_CELL_ID, spec->cell_id, &in, err) < 0)
			return err_wrap(err, "ec2: cell %s", spec->cell_id);
		iid = steal_ptr(in.instance_id);
		ec2_instance_release(&in);
	}
	ret = cell_tags(p, spec, false, &tags, err);
	if (ret == 0)
		ret = ec2_create_tags(p->client, (const char *const *)&iid, 1, &tags, &cls, err);
	if (ret == 0)
		ret = ec2_delete_tags(p->client, (const char *const *)&iid, 1, standby_key, 1, &cls,
				      err);
	ec2_tags_release(&tags);
	if (ret < 0)
		err_wrap(err, "ec2: cell %s (instance %s): tagging it for its pod", spec->cell_id,
			 iid);
	else
		log_info("ec2: standby cell %s (instance %s) now runs pod %s/%s", spec->cell_id,
			 iid, spec->pod_namespace, spec->pod_name);
	free(iid);
	return ret;
}

/* One terminate waiting to be batched. */
struct term_req {
	const char *cell_id;
	int done;
	int ret;
	struct err err;
	struct term_req *next;
};

/* How many requests a batch holds. */
static size_t batch_length(const struct term_req *b)
{
	size_t n = 0;

	for (; b; b = b->next)
		n++;
	return n;
}

#define TERM_BATCH_WINDOW_US 50000 /* how long a batch gathers company */
#define TERM_FILTER_VALUES 100	   /* filter values per DescribeInstances */

/* Describes the cluster's live instances whose tag:cell-id (or instance-id) is one of ids. */
static int find_live(struct ec2p *p, const char *filter, const char **ids, size_t n,
		     struct ec2_instance **out, size_t *nout, struct err *err)
{
	const char *cluster[] = { p->cluster_id };
	const char *states[] = { "pending", "running", "stopping", "stopped" };
	struct ec2_filter f[3] = {
		{ "tag:" EC2_TAG_CLUSTER_ID, cluster, 1 }, /* only ever ours */
		{ filter, ids, n },
		{ "instance-state-name", states, ARRAY_SIZE(states) },
	};
	struct ec2_describe_query q = { f, 3, NULL, 0, 0 };

	return ec2_describe_instances(p->client, &q, out, nout, NULL, err);
}

/* One instance a batch terminates, and the request it is for. */
struct target {
	char *instance_id;
	struct term_req *req;
	bool recent; /* launched lately: EC2 may not know it yet */
};

/* Adds an instance to the batch's targets unless it is there already. */
static void target_add(struct target **t, size_t *n, size_t *cap, const char *iid,
		       struct term_req *req, bool recent)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*t)[i].instance_id, iid) == 0) {
			(*t)[i].recent |= recent;
			return;
		}
	xgrow((void **)t, cap, *n + 1, sizeof(**t));
	(*t)[(*n)++] = (struct target){ xstrdup(iid), req, recent };
}

/* The request of a batch a described instance is for: by its cell tag or its id. */
static struct term_req *request_of(struct term_req *batch, const struct ec2_instance *in)
{
	const char *cell = ec2_tags_get(&in->tags, EC2_TAG_CELL_ID);

	for (struct term_req *r = batch; r; r = r->next)
		if ((cell && strcmp(r->cell_id, cell) == 0) ||
		    strcmp(r->cell_id, in->instance_id) == 0)
			return r;
	return NULL;
}

/* The batch's instances: those EC2 lists for its cells (by tag, a hundred a call) and ids,
 * and the ones this provider launched for its cells lately (EC2 may not list them yet). */
static int find_targets(struct ec2p *p, struct term_req *batch, struct target **t, size_t *n,
			struct err *err)
{
	const char **cells = NULL, **iids = NULL;
	size_t nc = 0, ni = 0, cap_c = 0, cap_i = 0, cap = 0;
	int ret = 0;

	for (struct term_req *r = batch; r; r = r->next) {
		int by_id = strncmp(r->cell_id, "i-", 2) == 0;

		xgrow(by_id ? (void **)&iids : (void **)&cells, by_id ? &cap_i : &cap_c,
		      (by_id ? ni : nc) + 1, sizeof(char *));
		if (by_id)
			iids[ni++] = r->cell_id;
		else
			cells[nc++] = r->cell_id;
	}
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n_recent; i++)
		for (struct term_req *r = batch; r; r = r->next)
			if (strcmp(r->cell_id, p->recent[i].cell_id) == 0)
				target_add(t, n, &cap, p->recent[i].instance_id, r, true);
	pthread_mutex_unlock(&p->lock);
	for (int pass = 0; pass < 2 && ret == 0; pass++) {
		const char **ids = pass ? iids : cells;
		size_t m_all = pass ? ni : nc;

		for (size_t off = 0; off < m_all && ret == 0; off += TERM_FILTER_VALUES) {
			size_t m = m_all - off < TERM_FILTER_VALUES ? m_all - off
								    : TERM_FILTER_VALUES;
			struct ec2_instance *inst = NULL;
			size_t found = 0;

			ret = find_live(p, pass ? "instance-id" : "tag:" EC2_TAG_CELL_ID, ids + off,
					m, &inst, &found, err);
			for (size_t i = 0; ret == 0 && i < found; i++) {
				struct term_req *r = request_of(batch, &inst[i]);

				if (r)
					target_add(t, n, &cap, inst[i].instance_id, r, false);
			}
			ec2_instances_free(inst, found);
		}
	}
	free(cells);
	free(iids);
	return ret;
}

/* Forgets the recent launches of instances that are terminated now or known gone. */
static void recent_forget(struct ec2p *p, const struct target *t, const enum ec2_term *out,
			  size_t n)
{
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < n; i++) {
		if (out[i] != EC2_TERM_DONE && !(out[i] == EC2_TERM_GONE && !t[i].recent))
			continue;
		for (size_t j = 0; j < p->n_recent; j++)
			if (strcmp(p->recent[j].instance_id, t[i].instance_id) == 0) {
				recent_release(&p->recent[j]);
				p->recent[j--] = p->recent[--p->n_recent];
			}
	}
	pthread_mutex_unlock(&p->lock);
}

/*
 * Terminates the instances of every request of a batch: one DescribeInstances per hundred
 * cells and one TerminateInstances per thousand instances, instead of two calls per cell. An
 * instance is settled when the answer lists it, or when EC2 names it unknown and it was not
 * launched lately (then EC2 may only not know it yet); a request whose instances are not all
 * settled fails, saying which are left for the next attempt and why.
 */
static void terminate_batch(struct ec2p *p, struct term_req *batch)
{
	struct target *t = NULL;
	enum ec2_term *out;
	size_t n = 0, done = 0, gone = 0;
	struct err err = ERR_INIT;
	int ret = find_targets(p, batch, &t, &n, &err);

	out = xcalloc(n + 1, sizeof(*out));
	for (size_t off = 0; ret == 0 && off < n; off += EC2_MAX_IDS_PER_CALL) {
		size_t m = n - off < EC2_MAX_IDS_PER_CALL ? n - off : EC2_MAX_IDS_PER_CALL;
		const char **ids = xcalloc(m, sizeof(*ids));
		struct err cerr = ERR_INIT;

		for (size_t i = 0; i < m; i++)
			ids[i] = t[off + i].instance_id;
		if (ec2_terminate_instances(p->client, ids, m, out + off, NULL, &cerr) < 0 &&
		    err.code == 0)
			err = cerr; /* the first failure stands for the batch's */
		free(ids);
	}
	for (size_t i = 0; i < n; i++) {
		if (out[i] == EC2_TERM_GONE && t[i].recent)
			out[i] = EC2_TERM_LEFT;
		done += out[i] == EC2_TERM_DONE;
		gone += out[i] == EC2_TERM_GONE;
	}
	recent_forget(p, t, out, n);
	if (done || gone)
		log_info("ec2: terminated %zu instance%s (%zu already gone) of %zu cell%s", done,
			 done == 1 ? "" : "s", gone, batch_length(batch),
			 batch_length(batch) == 1 ? "" : "s");
	for (struct term_req *r = batch; r; r = r->next) {
		size_t left = 0;
		const char *first = NULL;

		r->ret = ret;
		r->err = err;
		if (ret < 0)
			continue; /* finding the instances failed: all are left */
		for (size_t i = 0; i < n; i++)
			if (t[i].req == r && out[i] == EC2_TERM_LEFT) {
				left++;
				first = first ? first : t[i].instance_id;
			}
		if (!left) {
			r->ret = 0;
			continue;
		}
		if (err.code == 0)
			err_set(&r->err, EAGAIN, "EC2 does not know it yet (just launched)");
		else
			r->err = err;
		r->ret = err_wrap(&r->err, "instance %s%s left for the next attempt", first,
				  left > 1 ? " and others" : "");
	}
	for (size_t i = 0; i < n; i++)
		free(t[i].instance_id);
	free(t);
	free(out);
}

/* Leads one batch: gathers the requests that arrive within the window, runs them, and marks
 * them done. Called and returns with term_lock held. */
static void terminate_lead(struct ec2p *p)
{
	struct term_req *batch;

	p->term_leader = 1;
	pthread_mutex_unlock(&p->term_lock);
	usleep(TERM_BATCH_WINDOW_US);
	pthread_mutex_lock(&p->term_lock);
	batch = p->term_queue;
	p->term_queue = NULL;
	pthread_mutex_unlock(&p->term_lock);
	terminate_batch(p, batch);
	pthread_mutex_lock(&p->term_lock);
	for (struct term_req *r = batch; r; r = r->next)
		r->done = 1;
	p->term_leader = 0;
	pthread_cond_broadcast(&p->term_cond);
}

/* Terminates the cluster's instances of a cell (an instance id also names itself). Calls that
 * come together share their EC2 calls. */
static int ec2_terminate(void *self, const char *cell_id, struct err *err)
{
	struct ec2p *p = self;
	struct term_req r = { 0 };

	r.cell_id = cell_id;
	pthread_mutex_lock(&p->term_lock);
	r.next = p->term_queue;
	p->term_queue = &r;
	while (!r.done) {
		if (!p->term_leader)
			terminate_lead(p);
		else
			pthread_cond_wait(&p->term_cond, &p->term_lock);
	}
	pthread_mutex_unlock(&p->term_lock);
	if (r.ret < 0) {
		*err = r.err;
		return err_wrap(err, "ec2: terminating cell %s", cell_id);
	}
	return 0;
}

static void ec2_destroy(void *self)
{
	struct ec2p *p = self;

	pthread_mutex_lock(&p->lock);
	__atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->poller, NULL);
	seen_free(p->cache, p->n_cache);
	for (size_t i = 0; i < p->n_recent; i++)
		recent_release(&p->recent[i]);
	free(p->recent);
	ec2_client_free(p->client);
	aws_creds_provider_free(p->creds);
	strv_free(p->security_groups);
	free(p->cluster_id);
	free(p->node);
	free(p->image_id);
	free(p->image_id_arm64);
	free(p->subnet_zones);
	strv_free(p->subnets);
	free(p->instance_profile);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->term_lock);
	pthread_cond_destroy(&p->term_cond);
	free(p);
}

static const struct provider_ops ec2_ops = {
	.name = "ec2",
	.boot_timeout_s = 600,
	.remote_files = 1,
	.standby_cells = 1,
	.launch = ec2_launch,
	.state = ec2_state,
	.terminate = ec2_terminate,
	.list = ec2_list,
	.heal = NULL, /* an instance's own init restarts its agent */
	.assign = ec2_assign,
	.destroy = ec2_destroy,
};

static char *dup_or_null(const char *s)
{
	return s && s[0] ? xstrdup(s) : NULL;
}

int provider_ec2_new(const struct ec2_provider_config *cfg, struct provider *out, struct err *err)
{
	struct aws_creds_config cc = { 0 };
	struct ec2_config ec = { 0 };
	struct strvec groups = STRVEC_INIT, subnets = STRVEC_INIT;
	struct ec2p *p;
	pthread_condattr_t ca;

	if (!cfg->cluster_id || !cfg->cluster_id[0])
		return err_set(err, EINVAL, "ec2: no cluster id");
	if (!cfg->region || !cfg->region[0])
		return err_set(err, EINVAL, "ec2.region: required (or set AWS_REGION)");
	if (!cfg->image_id || !cfg->image_id[0])
		return err_set(err, EINVAL, "ec2.imageId: required: the AMI cells boot from");
	p = xcalloc(1, sizeof(*p));
	cc.profile = cfg->profile;
	cc.credentials_file = cfg->credentials_file;
	cc.no_imds = cfg->no_imds;
	if (aws_creds_provider_new(&cc, &p->creds, err) < 0) {
		free(p);
		return err_wrap(err, "ec2 credentials");
	}
	ec.region = cfg->region;
	ec.endpoint = cfg->endpoint && cfg->endpoint[0] ? cfg->endpoint : NULL;
	ec.creds = p->creds;
	/* many launches share EC2's per-account token buckets: give a throttled call time for
	 * the bucket to refill (15 attempts at up to 20 s apart) before a pod fails */
	ec.max_attempts = 15;
	if (ec2_client_new(&ec, &p->client, err) < 0) {
		aws_creds_provider_free(p->creds);
		free(p);
		return err_wrap(err, "ec2");
	}
	p->cluster_id = xstrdup(cfg->cluster_id);
	p->node = dup_or_null(cfg->node && cfg->node[0] ? cfg->node : NULL);
	p->image_id = xstrdup(cfg->image_id);
	p->image_id_arm64 = dup_or_null(cfg->image_id_arm64);
	if (!p->image_id_arm64)
		log_warn("ec2.imageIds has no arm64 image: arm64 cells are off, so pods whose "
			 "images all offer arm64 run on x86_64 types; add an arm64 cell image to "
			 "ec2.imageIds to let them");
	for (size_t i = 0; i < cfg->n_subnet_ids; i++)
		if (cfg->subnet_ids[i] && cfg->subnet_ids[i][0] &&
		    !strv_has(subnets.v, cfg->subnet_ids[i]))
			strvec_push(&subnets, cfg->subnet_ids[i]);
	if (cfg->subnet_id && cfg->subnet_id[0] && !strv_has(subnets.v, cfg->subnet_id))
		strvec_push(&subnets, cfg->subnet_id);
	p->n_subnets = subnets.nr;
	p->subnets = strvec_detach(&subnets);
	p->instance_profile = dup_or_null(cfg->instance_profile);
	for (size_t i = 0; i < cfg->n_security_group_ids; i++)
		strvec_push(&groups, cfg->security_group_ids[i]);
	p->n_security_groups = groups.nr;
	p->security_groups = strvec_detach(&groups);
	p->launch_timeout_s = cfg->launch_timeout_s > 0 ? cfg->launch_timeout_s
							: DEFAULT_LAUNCH_TIMEOUT_S;
	p->poll_ms = cfg->poll_ms > 0 ? cfg->poll_ms : DEFAULT_POLL_MS;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->term_lock, NULL);
	pthread_cond_init(&p->term_cond, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&p->poller, NULL, poller_thread, p) != 0) {
		ec2_client_free(p->client);
		aws_creds_provider_free(p->creds);
		free(p);
		return err_set(err, EAGAIN, "ec2: cannot start the poller thread");
	}
	out->ops = &ec2_ops;
	out->self = p;
	return 0;
}

/* The provider's client, for other users of the same credentials (the catalog refresh). */
struct ec2_client *provider_ec2_client(const struct provider *p)
{
	return p->ops == &ec2_ops ? ((struct ec2p *)p->self)->client : NULL;
}
