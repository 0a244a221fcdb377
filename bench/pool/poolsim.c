/*
 * poolsim.c: the warm pool's planning (kiyot/pool/pool_plan.c) replayed over a day of pod
 * arrivals (bench/pool/trace.tsv, made by gen-trace.py), in simulated time: no cells, no
 * threads, one refiller pass a simulated second as kiyot's refiller runs (POOL_TICK_MS). Prints,
 * for no pool, fixed pools of 1, 2 and 5 per shape and the adaptive pool at several settings,
 * how many pods started warm (of all, of the steady arrivals, of the bursts' pods) and what the
 * standby cells cost next to the pods' own cells. Asserts nothing.
 *
 *	build-x/bench/poolsim bench/pool/trace.tsv
 *
 * The refiller's rules, as pool_refill.c applies them: a shape's target is its fixed count, or
 * with the adaptive pool pool_adaptive_target (the Poisson quantile at targetHitPercent of the
 * arrivals one boot sees at the shape's exponentially weighted rate, raised by a burst with
 * burstSeconds; the adaptive lines keep windowSeconds 600 and idleLifetimeSeconds 900 unless
 * they say otherwise) when larger; pool_plan_caps shares the caps among shapes; cells beyond
 * what the caps keep are ended (an adaptive shape keeps its cells above target for their
 * lifetime); ready cells past the idle lifetime end; at most POOL_LAUNCHES_MAX launches at
 * once. A pod arriving counts as an arrival, then takes the oldest ready standby cell of its
 * shape or waits for a boot (its time to ready, paid at its own type's price).
 *
 * With cronJobs (pool.cronJobs), the pool also knows the trace's CronJobs ("# cronjob" lines:
 * schedule and pods a run, as kiyot reads them from the API server) and raises a shape's
 * target by a run's pods from its time to ready plus POOL_CRON_MARGIN_S before the run until
 * they claimed or POOL_CRON_GRACE_S passed (pool_cron_advance, pool_cron_extra,
 * pool_cron_claim: kiyot's rule, runs at one time sharing the launches); it knows nothing of
 * the other bursts. Those lines start the pool an hour before the day (the trace's CronJobs run
 * at midnight too), which adds that hour's standby cells to their spend.
 *
 * Lines judge the pools: the bound, a pool that knows every arrival ahead, and references that
 * foresee every arrival but the bursts' or but the bursts that are no CronJob's (see
 * clairvoyant, foresee_steady).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/cronsched.h"
#include "pool/pool.h"
#include "pool/pool_config.h"
#include "pool/pool_plan.h"
#include "xalloc.h"

#define DAY_S 86400
#define SHAPES_MAX 16
#define PODS_MAX 200000
#define CRONJOBS_MAX 64

struct pod {
	int t, shape, run_s;
	int burst; /* 0: a steady arrival; else the number of its burst (the trace's column) */
	int cron;  /* a CronJob's run: its index + 1; 0: none */
};

/* A CronJob of the trace and, in a simulation, its runs as the pool foresees them. */
struct cronjob {
	char name[64];
	int shape, pods;
	struct cronsched sched;
	struct pool_cron_run runs[POOL_CRON_RUNS];
	size_t n_runs;
	int64_t seen_s, next_s;
};

struct cell {
	int launch_t, ready_t;
};

struct shape {
	char type[32];
	int spot, ready_s;
	double price;
	/* the simulation's */
	struct pool_arrivals arr;
	struct cell *cells; /* oldest first */
	size_t n, cap;
};

struct policy {
	const char *name;
	int fixed; /* per shape; 0: none */
	int adaptive, window_s, lifetime_s, max_cells;
	double max_dollars;
	int hit_percent;
	double burst_s; /* <0: the shape's time to ready */
	int cron;	/* pool.cronJobs */
};

struct result {
	int warm, pods;
	int burst_warm, burst_pods; /* of them, the pods of bursts */
	int cron_warm, cron_pods;   /* of those, the pods of CronJob runs */
	double standby, own;	    /* $ */
};

static struct shape shapes[SHAPES_MAX];
static size_t n_shapes;
static struct pod *pods;
static size_t n_pods;
static struct cronjob crons[CRONJOBS_MAX];
static size_t n_crons;

/* A "# cronjob <name> <type> <spot> <pods> <5 fields>" line, after "# cronjob ". */
static void load_cronjob(const char *line)
{
	struct cronjob *c = &crons[n_crons];
	char type[32];
	int spot, used = 0;
	struct err err = ERR_INIT;

	if (n_crons == CRONJOBS_MAX ||
	    sscanf(line, "%63s %31s %d %d %n", c->name, type, &spot, &c->pods, &used) < 4 || !used)
		return;
	for (size_t i = 0; i < n_shapes; i++)
		if (!strcmp(shapes[i].type, type) && shapes[i].spot == spot) {
			if (cronsched_parse(&c->sched, line + used, &err) < 0) {
				fprintf(stderr, "poolsim: cronjob %s: %s\n", c->name, err.msg);
				return;
			}
			c->shape = (int)i;
			n_crons++;
			return;
		}
}

static int load(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[256];

	if (!f) {
		fprintf(stderr, "poolsim: %s: %s\n", path, strerror(errno));
		return -1;
	}
	pods = xcalloc(PODS_MAX, sizeof(*pods));
	while (fgets(line, sizeof(line), f)) {
		char type[32], job[64] = "";
		int t, spot, run, burst = 0, cron = 0;
		struct shape *s = &shapes[n_shapes];

		if (!strncmp(line, "# shape ", 8)) {
			if (n_shapes < SHAPES_MAX && sscanf(line + 8, "%31s %d %lf %d", s->type,
							    &s->spot, &s->price, &s->ready_s) == 4)
				n_shapes++;
			continue;
		}
		if (!strncmp(line, "# cronjob ", 10)) {
			load_cronjob(line + 10);
			continue;
		}
		if (line[0] == '#' ||
		    sscanf(line, "%d %31s %d %d %d %63s", &t, type, &spot, &run, &burst, job) < 4 ||
		    n_pods == PODS_MAX)
			continue;
		for (size_t i = 0; i < n_crons && job[0]; i++)
			if (!strcmp(crons[i].name, job))
				cron = (int)i + 1;
		for (size_t i = 0; i < n_shapes; i++)
			if (!strcmp(shapes[i].type, type) && shapes[i].spot == spot)
				pods[n_pods++] = (struct pod){ t, (int)i, run, burst, cron };
	}
	fclose(f);
	return n_pods ? 0 : -1;
}

static double cost(const struct shape *s, int seconds)
{
	return s->price * seconds / 3600.0;
}

/* Ends cell i of s at t: its standby time is the pool's spend. */
static void end_cell(struct shape *s, size_t i, int t, struct result *r)
{
	r->standby += cost(s, t - s->cells[i].launch_t);
	memmove(&s->cells[i], &s->cells[i + 1], (s->n - i - 1) * sizeof(*s->cells));
	s->n--;
}

/* One refiller pass at t. */
static void pass(const struct policy *p, int t, struct result *r)
{
	struct pool_plan_shape grow[SHAPES_MAX], keep[SHAPES_MAX];
	int booting = 0;

	for (size_t i = 0; i < n_shapes; i++) {
		struct shape *s = &shapes[i];
		int target = p->fixed, have;

		for (size_t c = 0; c < s->n;) /* expiry of ready cells */
			if (p->lifetime_s && s->cells[c].ready_t <= t &&
			    t - s->cells[c].ready_t >= p->lifetime_s)
				end_cell(s, c, t, r);
			else
				c++;
		if (p->adaptive) {
			struct pool_adaptive ap = { p->window_s, s->ready_s, p->hit_percent,
						    p->burst_s < 0 ? s->ready_s : p->burst_s,
						    POOL_COUNT_MAX };
			int at;

			pool_arrivals_since(
				&s->arr, ((int64_t)t - (int64_t)POOL_RATE_HORIZON * p->window_s) *
						 1000000000LL);
			at = pool_adaptive_target(&s->arr, (int64_t)t * 1000000000LL, &ap);

			if (at > target)
				target = at;
		}
		for (size_t c = 0; p->cron && c < n_crons; c++) {
			struct cronjob *j = &crons[c];
			int crowd =
				0; /* as pool_cron.c's: the pods of the runs at j's next run's time */
			double lead;

			if (j->shape != (int)i)
				continue;
			for (size_t d = 0; d < n_crons; d++) {
				if (crons[d].next_s < t && crons[d].next_s != -1)
					crons[d].next_s = cronsched_next(&crons[d].sched, t - 1);
				if (crons[d].next_s == j->next_s)
					crowd += crons[d].pods;
			}
			lead = pool_cron_lead(s->ready_s, crowd, POOL_LAUNCHES_MAX);
			pool_cron_advance(j->runs, &j->n_runs, &j->sched, j->pods, &j->seen_s, t,
					  lead, POOL_CRON_GRACE_S);
			target += pool_cron_extra(j->runs, j->n_runs, t, POOL_CRON_GRACE_S);
		}
		have = (int)s->n;
		grow[i] = (struct pool_plan_shape){ target, s->price, 0 };
		keep[i] = (struct pool_plan_shape){ p->adaptive && have > target ? have : target,
						    s->price, 0 };
		for (size_t c = 0; c < s->n; c++)
			booting += s->cells[c].ready_t > t;
	}
	pool_plan_caps(grow, n_shapes, p->max_cells, p->max_dollars);
	pool_plan_caps(keep, n_shapes, p->max_cells, p->max_dollars);
	for (size_t i = 0; i < n_shapes; i++) {
		struct shape *s = &shapes[i];
		int shed = (int)s->n - keep[i].allowed, lack;

		for (size_t c = 0; c < s->n && shed > 0;)
			if (s->cells[c].ready_t <= t) {
				end_cell(s, c, t, r);
				shed--;
			} else {
				c++;
			}
		lack = grow[i].allowed - (int)s->n;
		for (; lack > 0 && booting < POOL_LAUNCHES_MAX; lack--, booting++) {
			xgrow((void **)&s->cells, &s->cap, s->n + 1, sizeof(*s->cells));
			s->cells[s->n++] = (struct cell){ t, t + s->ready_s };
		}
	}
}

static struct result simulate(const struct policy *p)
{
	struct result r = { 0 };
	size_t next = 0;

	for (size_t i = 0; i < n_shapes; i++) {
		pool_arrivals_release(&shapes[i].arr);
		shapes[i].n = 0;
	}
	for (size_t i = 0; i < n_crons; i++) { /* known since before the day */
		crons[i].n_runs = 0;
		crons[i].seen_s = -3600;
		crons[i].next_s = -3600;
	}
	/* with cronJobs the pool runs from an hour before the day, as a pool that ran the day
	 * before would have: the runs at midnight have their cells ahead too */
	for (int t = p->cron ? -3600 : 0; t < DAY_S; t++) {
		for (; next < n_pods && pods[next].t <= t; next++) {
			const struct pod *d = &pods[next];
			struct shape *s = &shapes[d->shape];
			size_t best = s->n;

			r.pods++;
			r.burst_pods += d->burst > 0;
			r.cron_pods += d->cron > 0;
			if (p->adaptive)
				pool_arrivals_add(&s->arr, (int64_t)t * 1000000000LL);
			for (size_t c = 0; c < s->n; c++)
				if (s->cells[c].ready_t <= t &&
				    (best == s->n || s->cells[c].ready_t < s->cells[best].ready_t))
					best = c;
			if (best < s->n) {
				r.warm++;
				r.burst_warm += d->burst > 0;
				r.cron_warm += d->cron > 0;
				for (size_t c = 0; p->cron && c < n_crons; c++)
					if (crons[c].shape == d->shape &&
					    pool_cron_claim(crons[c].runs, crons[c].n_runs, t,
							    POOL_CRON_GRACE_S))
						break;
				end_cell(s, best, t, &r); /* (its standby time so far) */
				r.own += cost(s, d->run_s);
			} else {
				r.own += cost(s, s->ready_s + d->run_s);
			}
		}
		if (p->fixed || p->adaptive || p->cron)
			pass(p, t, &r);
	}
	for (size_t i = 0; i < n_shapes; i++)
		while (shapes[i].n)
			end_cell(&shapes[i], 0, DAY_S, &r);
	return r;
}

/* A pod counted in r: its own cell's cost, and whether a cell was up for it (a boot earlier). */
static void count_pod(struct result *r, const struct pod *d, bool warm)
{
	const struct shape *s = &shapes[d->shape];

	r->pods++;
	r->burst_pods += d->burst > 0;
	r->cron_pods += d->cron > 0;
	r->own += cost(s, s->ready_s + d->run_s);
	if (warm) {
		r->warm++;
		r->burst_warm += d->burst > 0;
		r->cron_warm += d->cron > 0;
		r->own -= cost(s, s->ready_s);
		r->standby += cost(s, s->ready_s);
	}
}

static int by_boot_cost(const void *a, const void *b)
{
	const struct shape *sa = &shapes[pods[*(const size_t *)a].shape];
	const struct shape *sb = &shapes[pods[*(const size_t *)b].shape];
	double ca = cost(sa, sa->ready_s), cb = cost(sb, sb->ready_s);

	return (ca > cb) - (ca < cb);
}

/*
 * The bound: a pool that knows every arrival ahead launches a cell exactly its time to ready
 * before a pod, the pods whose cell costs least first, until its standby spend reaches share of
 * the pods' own cost. What no pool can beat at that spend.
 */
static struct result clairvoyant(double share)
{
	struct result r = { 0 };
	size_t *order = xcalloc(n_pods + 1, sizeof(*order));
	bool *warm = xcalloc(n_pods + 1, sizeof(*warm));
	double standby = 0, own = 0;

	for (size_t i = 0; i < n_pods; i++) {
		const struct shape *s = &shapes[pods[i].shape];

		order[i] = i;
		own += cost(s, s->ready_s + pods[i].run_s);
	}
	qsort(order, n_pods, sizeof(*order), by_boot_cost);
	for (size_t i = 0; i < n_pods; i++) {
		const struct shape *s = &shapes[pods[order[i]].shape];
		double boot = cost(s, s->ready_s);

		if (standby + boot > share * (own - boot))
			break;
		standby += boot;
		own -= boot;
		warm[order[i]] = true;
	}
	for (size_t i = 0; i < n_pods; i++)
		count_pod(&r, &pods[i], warm[i]);
	free(order);
	free(warm);
	return r;
}

/*
 * A reference for pools that cannot foresee a burst: it knows the steady arrivals ahead (each
 * served as clairvoyant() serves it; with cron, the CronJobs' runs too), and a burst's pods from
 * its first one on, so the pods that
 * arrive a time to ready or more after the first are served by cells launched for them; the
 * burst's earlier pods can only take cells standing all day, bought per shape, the cell that
 * serves the most such pods of the day per dollar first (it knows the bursts' sizes), while
 * they cost at most share of no pool's total.
 */
#define BURSTS_MAX 4096
static struct result foresee_steady(double share, double none_total, bool cron)
{
	struct result r = { 0 };
	int *first = xcalloc(BURSTS_MAX, sizeof(*first)), *early = xcalloc(BURSTS_MAX, sizeof(int));
	int *shape_of = xcalloc(BURSTS_MAX, sizeof(int)), standing[SHAPES_MAX] = { 0 };
	double spent = 0;

	for (size_t i = 0; i < n_pods; i++) {
		const struct pod *d = &pods[i];
		int b = d->burst;

		if (b <= 0 || b >= BURSTS_MAX || (cron && d->cron)) {
			count_pod(&r, d, true);
		} else if (!early[b]) { /* (pods come in time order) */
			first[b] = d->t;
			early[b] = 1;
			shape_of[b] = d->shape;
			count_pod(&r, d, false);
		} else {
			bool late = d->t >= first[b] + shapes[d->shape].ready_s;

			early[b] += !late;
			count_pod(&r, d, late);
		}
	}
	for (;;) {
		size_t best = n_shapes;
		int best_gain = 0;

		for (size_t i = 0; i < n_shapes; i++) {
			int gain = 0;

			for (int b = 1; b < BURSTS_MAX; b++)
				gain += early[b] && shape_of[b] == (int)i && early[b] > standing[i];
			if (gain && spent + cost(&shapes[i], DAY_S) <= share * none_total &&
			    (best == n_shapes ||
			     gain / shapes[i].price > best_gain / shapes[best].price)) {
				best = i;
				best_gain = gain;
			}
		}
		if (best == n_shapes)
			break;
		standing[best]++;
		spent += cost(&shapes[best], DAY_S);
		/* each such pod started warm: its boot is no longer its own cost */
		r.warm += best_gain;
		r.burst_warm += best_gain;
		r.own -= best_gain * cost(&shapes[best], shapes[best].ready_s);
	}
	r.standby += spent;
	free(first);
	free(early);
	free(shape_of);
	return r;
}

static void print_result(const char *name, const struct result *r, const struct result *base)
{
	double total = r->standby + r->own;
	int steady = r->pods - r->burst_pods;

	printf("%-48s %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%% %9.2f %11.2f %9.2f %7.3fx\n", name,
	       100.0 * r->warm / r->pods, steady ? 100.0 * (r->warm - r->burst_warm) / steady : 0.0,
	       r->burst_pods ? 100.0 * r->burst_warm / r->burst_pods : 0.0,
	       r->burst_pods > r->cron_pods
		       ? 100.0 * (r->burst_warm - r->cron_warm) / (r->burst_pods - r->cron_pods)
		       : 0.0,
	       r->cron_pods ? 100.0 * r->cron_warm / r->cron_pods : 0.0, r->standby, r->own, total,
	       total / (base->standby + base->own));
}

int main(int argc, char **argv)
{
	static const struct policy policies[] = {
		{ "no pool", 0, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ "fixed 1 per shape", 1, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ "fixed 2 per shape", 2, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ "fixed 5 per shape", 5, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ "adaptive targetHitPercent 50", 0, 1, 600, 900, 0, 0, 50, 0, 0 },
		{ "adaptive targetHitPercent 80", 0, 1, 600, 900, 0, 0, 80, 0, 0 },
		{ "adaptive targetHitPercent 90", 0, 1, 600, 900, 0, 0, 90, 0, 0 },
		{ "adaptive targetHitPercent 95", 0, 1, 600, 900, 0, 0, 95, 0, 0 },
		{ "adaptive targetHitPercent 97 (default)", 0, 1, 600, 900, 0, 0, 97, 0, 0 },
		{ "adaptive targetHitPercent 98", 0, 1, 600, 900, 0, 0, 98, 0, 0 },
		{ "adaptive targetHitPercent 99", 0, 1, 600, 900, 0, 0, 99, 0, 0 },
		{ "adaptive 97, burstSeconds 10", 0, 1, 600, 900, 0, 0, 97, 10, 0 },
		{ "adaptive 97, burstSeconds 30", 0, 1, 600, 900, 0, 0, 97, 30, 0 },
		{ "adaptive 99, burstSeconds 30", 0, 1, 600, 900, 0, 0, 99, 30, 0 },
		{ "adaptive 99, window 1200 s, burstSeconds 30", 0, 1, 1200, 900, 0, 0, 99, 30, 0 },
		{ "adaptive 97, window 300 s", 0, 1, 300, 900, 0, 0, 97, 0, 0 },
		{ "adaptive 97, window 1800 s", 0, 1, 1800, 900, 0, 0, 97, 0, 0 },
		{ "adaptive 97, life 300 s", 0, 1, 600, 300, 0, 0, 97, 0, 0 },
		{ "adaptive 97, life 1800 s", 0, 1, 600, 1800, 0, 0, 97, 0, 0 },
		{ "adaptive 97, maxCells 5", 0, 1, 600, 900, 5, 0, 97, 0, 0 },
		{ "adaptive 97, max $0.10/h", 0, 1, 600, 900, 0, 0.10, 97, 0, 0 },
		/* pool.cronJobs: the CronJobs foreseen */
		{ "cronJobs alone", 0, 0, 600, 900, 0, 0, 97, 0, 1 },
		{ "fixed 1 per shape + cronJobs", 1, 0, 0, 0, 0, 0, 0, 0, 1 },
		{ "adaptive targetHitPercent 90 + cronJobs", 0, 1, 600, 900, 0, 0, 90, 0, 1 },
		{ "adaptive 97 + cronJobs (the default)", 0, 1, 600, 900, 0, 0, 97, 0, 1 },
		{ "adaptive 99 + cronJobs", 0, 1, 600, 900, 0, 0, 99, 0, 1 },
		{ "adaptive 97, burstSeconds 30 + cronJobs", 0, 1, 600, 900, 0, 0, 97, 30, 1 },
		{ "adaptive 99, burstSeconds 30 + cronJobs", 0, 1, 600, 900, 0, 0, 99, 30, 1 },
		{ "adaptive 99, window 1200 s, burst 30 + cronJobs", 0, 1, 1200, 900, 0, 0, 99, 30,
		  1 },
	};
	struct result base;

	if (load(argc > 1 ? argv[1] : "bench/pool/trace.tsv") < 0) {
		fprintf(stderr,
			"poolsim: no pods read; usage: poolsim TRACE (bench/pool/trace.tsv)\n");
		return 1;
	}
	printf("warm pool simulation: %zu pods of %zu shapes over a day (time to ready", n_pods,
	       n_shapes);
	for (size_t i = 0; i < n_shapes; i++)
		printf("%s%s %d s", i ? ", " : " ", shapes[i].type, shapes[i].ready_s);
	printf("), %zu CronJobs\n", n_crons);
	base = simulate(&policies[0]);
	printf("%-48s %7s %7s %7s %7s %7s %9s %11s %9s %8s\n", "pool", "warm", "steady", "burst",
	       "other", "cron", "standby $", "pods' own $", "total $", "vs none");
	for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		struct result r = i ? simulate(&policies[i]) : base;

		print_result(policies[i].name, &r, &base);
	}
	{
		struct result c = clairvoyant(0.10);
		struct result f = foresee_steady(0.10, base.standby + base.own, false);
		struct result g = foresee_steady(0.10, base.standby + base.own, true);

		print_result("bound: knows every arrival, standby <= 10%", &c, &base);
		print_result("reference: foresees all but bursts, <= 1.10x", &f, &base);
		print_result("reference: all but non-cron bursts, <= 1.10x", &g, &base);
	}
	printf("(warm: of all pods, of the steady arrivals (%d), of the bursts' pods (%d): those "
	       "of other bursts (%d) and of CronJob runs (%d); pods' own $: each pod's type for "
	       "its run, plus its boot when it did not start warm; standby $: standby cells from "
	       "launch to claim or end; vs none: total over no pool's total)\n",
	       base.pods - base.burst_pods, base.burst_pods, base.burst_pods - base.cron_pods,
	       base.cron_pods);
	for (size_t i = 0; i < n_shapes; i++)
		pool_arrivals_release(&shapes[i].arr);
	free(pods);
	return 0;
}
