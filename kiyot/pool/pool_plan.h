/*
 * pool_plan.h: the pool's arithmetic, without threads, cells or clocks of its own (pool.c
 * calls it; unit tests call it directly): a shape's arrivals over the window, the adaptive
 * target they give, and the caps applied to every shape's target at once.
 */
#ifndef KIYOT_POOL_PLAN_H
#define KIYOT_POOL_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The times (any clock, ns) pods of one shape arrived, oldest first, at most POOL_ARRIVALS_MAX
 * (the oldest go first when more come). */
#define POOL_ARRIVALS_MAX 4096
struct pool_arrivals {
	int64_t *t;
	size_t n, cap;
};

void pool_arrivals_add(struct pool_arrivals *a, int64_t now_ns);
/* Forgets arrivals before since_ns; how many are left. */
size_t pool_arrivals_since(struct pool_arrivals *a, int64_t since_ns);
void pool_arrivals_release(struct pool_arrivals *a);

/* Arrivals older than this many windows no longer count: pool_arrivals_since(now - this x
 * window) before pool_adaptive_target keeps what it reads. */
#define POOL_RATE_HORIZON 4

/*
 * The arrival rate of a shape at now_ns (per second), exponentially weighted with window_s as
 * its time constant: each arrival age seconds old weighs exp(-age / window_s) / window_s, so a
 * steady rate r reads r and a change shows at once, fading over about a window. Arrivals after
 * now_ns count as now; those older than POOL_RATE_HORIZON windows do not count.
 */
double pool_arrival_rate(const struct pool_arrivals *a, int64_t now_ns, int window_s);

/*
 * The burst a shape saw: the most arrivals within span_s seconds of each other (a burst of
 * them), weighed by exp(-age / window_s) by the age of its last arrival, the largest such over
 * the arrivals of the last POOL_RATE_HORIZON windows. 1 for a lone arrival just now; 0 without.
 */
double pool_burst_size(const struct pool_arrivals *a, int64_t now_ns, double span_s, int window_s);

/* The smallest k with P(N <= k) >= q for N Poisson of mean (0 < q < 1); at most cap. */
int pool_poisson_quantile(double mean, double q, int cap);

/* What the adaptive target of a shape reads besides its arrivals. */
struct pool_adaptive {
	int window_s;	 /* the rate's time constant; no arrival over it: target 0 */
	double ready_s;	 /* a cell of the shape is ready this long after its launch */
	int hit_percent; /* the share of pods the target means to start warm */
	double burst_s;	 /* arrivals this close make a burst (pool_burst_size); 0: none */
	int max;	 /* at most this many cells (0: no such bound) */
};

/*
 * The adaptive target of a shape at now_ns: the cells that start hit_percent of its pods warm
 * while its cells come up, the Poisson quantile at hit_percent of the arrivals expected over
 * ready_s at pool_arrival_rate; at least the burst it saw lately (pool_burst_size over burst_s:
 * a burst raises the target at once, by its size, and the raise fades with the window); at
 * least 1 after an arrival within the window, 0 without one; at most max.
 */
int pool_adaptive_target(const struct pool_arrivals *a, int64_t now_ns,
			 const struct pool_adaptive *p);

/* One shape as the caps see it: the cells it wants, what one costs an hour, and the cells the
 * caps allow it (filled by pool_plan_caps). */
struct pool_plan_shape {
	int want;
	double price;
	int allowed;
};

/*
 * Applies the caps to every shape's want at once: the cells are handed out one per shape in
 * turn (in the order given) while a shape wants more, the total stays within max_cells (0: no
 * cap) and the sum of their prices within max_dollars (0: no cap). Returns the cells allowed.
 */
int pool_plan_caps(struct pool_plan_shape *s, size_t n, int max_cells, double max_dollars);

/* The images the pods of one shape used, counted over about the last POOL_IMAGES_PODS pods
 * (counts halve as more come), at most POOL_IMAGES_MAX images (the least used goes). */
#define POOL_IMAGES_MAX 16
#define POOL_IMAGES_PODS 64
struct pool_images {
	char *ref[POOL_IMAGES_MAX];
	unsigned n[POOL_IMAGES_MAX];
	size_t len;
	unsigned pods;
};

/* One pod of the shape used refs (a ref listed twice counts once). */
void pool_images_add(struct pool_images *im, const char *const *refs, size_t n);
/* The images at least half of the counted pods used, most used first, at most max, into out
 * (borrowed from im until it changes); how many. */
size_t pool_images_common(const struct pool_images *im, const char **out, size_t max);
void pool_images_release(struct pool_images *im);

/* CronJobs (pool.cronJobs): a run's cells are launched this much before it beyond its shape's
 * time to ready, and wait this long past its time for its pods; a CronJob's runs within that
 * span, at most POOL_CRON_RUNS, are kept. */
#define POOL_CRON_MARGIN_S 15
#define POOL_CRON_GRACE_S 120
#define POOL_CRON_RUNS 4

/* One run of a CronJob as the pool foresees it (pool.cronJobs). */
struct pool_cron_run {
	int64_t at_s; /* when it runs: Unix seconds */
	int pods;     /* the pods it starts */
	int claimed;  /* of them, those that took a standby cell */
};

/*
 * The standby cells CronJob runs add to a shape's target at now_s (Unix seconds): for each run
 * of r (those that came within their lead: pool_cron_advance) not past by more than grace_s,
 * its pods that have not claimed a cell yet. 0 for the others: one whose grace passed, one
 * whose pods all claimed. A run that came keeps its cells whatever its lead becomes: the lead
 * follows the shape's measured time to ready, and a quick launch that shortened it would
 * otherwise make the run's ready cells surplus (ended) until the run is within the new lead.
 */
int pool_cron_extra(const struct pool_cron_run *r, size_t n, int64_t now_s, double grace_s);

/*
 * How long before a run of pods pods its cells are asked for: their time to ready once for each
 * wave of launches_max (the pool's launches at once) they need, and POOL_CRON_MARGIN_S, so the
 * last wave is ready by the run.
 */
double pool_cron_lead(double ready_s, int pods, int launches_max);

struct cronsched;
/*
 * Brings a CronJob's runs r[0..*n) (at most POOL_CRON_RUNS) up to now_s: the runs whose grace
 * passed go; the runs of sched after *seen_s (the last run it took) due within lead_s come,
 * each of pods pods, *seen_s following. Returns how many came: the last ones of r.
 */
size_t pool_cron_advance(struct pool_cron_run *r, size_t *n, const struct cronsched *sched,
			 int pods, int64_t *seen_s, int64_t now_s, double lead_s, double grace_s);

/* A pod of the CronJob's shape claimed a standby cell at now_s: counted against the first run
 * under way (its time at most a second ahead, its grace not passed) whose pods have not all
 * claimed. Whether one was. */
bool pool_cron_claim(struct pool_cron_run *r, size_t n, int64_t now_s, double grace_s);

#endif
