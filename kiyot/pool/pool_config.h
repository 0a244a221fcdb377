/*
 * pool_config.h: the settings of the warm pool (pool.h), the `pool` section of kiyot's config:
 *
 *	pool:
 *	  shapes:                     (standby cells kept for each shape, whatever the pods do)
 *	    - { instanceType: t3.small, spot: false, count: 2 }
 *	  adaptive:                   (standby cells sized from the pods' arrivals)
 *	    enabled: true
 *	    windowSeconds: 600        (the time constant of a shape's arrival rate, and of
 *	                              the fading of a burst it saw)
 *	    targetHitPercent: 97      (the share of a shape's pods its standby cells are sized
 *	                              to start warm, from its rate and time to ready)
 *	    burstSeconds: 0           (arrivals this close make a burst, which raises the target
 *	                              to its size at once, fading over the window; 0: off)
 *	    maxCells: 10              (standby cells of all shapes at most; 0: no cap)
 *	    maxDollarsPerHour: 0.5    (their catalog price at most; 0: no cap)
 *	    idleLifetimeSeconds: 900  (a standby cell this old is terminated, and replaced only
 *	                              when its shape's target still asks for it)
 *	  rebalanceReplacement: true  (a cell EC2 recommends rebalancing, or gives a spot
 *	                              interruption notice, gets one standby cell of its shape
 *	                              beyond the target, for its pod's next sandbox)
 *	  cronJobs: true              (the CronJobs whose pods kiyot runs raise their shape's
 *	                              target ahead of each run by the run's pods; by default on
 *	                              when adaptive is, off otherwise)
 *
 * No section, or zero counts with adaptive off: no standby cell, kiyot behaves as without a
 * pool. The caps bound the fixed shapes too.
 */
#ifndef KIYOT_POOL_CONFIG_H
#define KIYOT_POOL_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/* The most shapes pool.shapes lists, and the most standby cells of one shape. */
#define POOL_SHAPES_MAX 64
#define POOL_COUNT_MAX 256
/* windowSeconds when absent, and idleLifetimeSeconds of the adaptive pool when absent (the
 * fixed shapes' standby cells do not expire unless it is set). */
#define POOL_WINDOW_DEFAULT_S 600
#define POOL_ADAPTIVE_LIFETIME_DEFAULT_S 900
/* targetHitPercent when absent: the share of a shape's pods the adaptive target sizes for */
#define POOL_HIT_DEFAULT_PERCENT 97

struct pool_shape_config {
	char *instance_type;
	bool spot;
	int count;
};

struct pool_config {
	struct pool_shape_config *shapes;
	size_t n_shapes;
	bool adaptive;
	int window_s;
	int target_hit_percent;	     /* the adaptive target's level (pool_adaptive_target) */
	int burst_s;		     /* arrivals this close make a burst; 0: no burst response */
	int max_cells;		     /* 0: no cap */
	double max_dollars_per_hour; /* 0: no cap */
	int idle_lifetime_s;	     /* 0: standby cells do not expire */
	bool rebalance_replacement;  /* a replacement standby cell per interrupted cell */
	bool cron_jobs;		     /* standby cells ahead of CronJob runs (pool_cron.c) */
};

/* Reads the `pool` section v into c (replacing what c had). EINVAL naming the key at fault
 * ("pool.shapes[1].count: must be an integer from 0 to 256"). */
int pool_config_load(struct pool_config *c, json_t *v, struct err *err);
void pool_config_release(struct pool_config *c);
/* Whether the settings ask for any standby cell: a count above zero, adaptive on,
 * rebalance replacements, or CronJobs foreseen. */
bool pool_config_enabled(const struct pool_config *c);

#endif
