/*
 * pool_internal.h: what the pool's files share: pool.c (shapes, standby cells and their
 * records, adoption, claims) and pool_refill.c (the refiller: targets, caps, expiry, launches).
 */
#ifndef KIYOT_POOL_INTERNAL_H
#define KIYOT_POOL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kube/cronsched.h"
#include "pool.h"
#include "pool_config.h"
#include "pool_plan.h"

/* The store's meta keys of standby cells: "pool/<cell id>". */
#define POOL_META_PREFIX "pool/"
/* A shape's time to ready before any of its cells was measured: a local cell, an EC2 one. */
#define POOL_READY_LOCAL_S 1.0
#define POOL_READY_REMOTE_S 45.0

/* The cells pool_rebalance remembers, so that one asked twice gets one replacement. */
#define POOL_REBALANCED_MAX 256

/* One shape: what a launch of it fixes, its setting, and what the adaptive target reads. */
struct shape {
	char *key; /* "t3.small/on-demand/x86_64/local" */
	char *type;
	int spot;      /* 0 or CELL_SPOT */
	unsigned arch; /* CELL_ARCH_*: the catalog's for the type */
	int count;     /* pool.shapes' count; -1: not listed */
	double price, cpus;
	int64_t memory_bytes;
	struct pool_arrivals arrivals; /* monotonic ns */
	struct pool_images images;     /* what its pods used: its standby cells pre-pull */
	int64_t last_arrival_ns;       /* monotonic; 0: none */
	double ready_s;		       /* measured time to ready (moving average); 0: none */
	int64_t retry_ns;	       /* monotonic: no launch before (after a failure) */
	int backoff_s;
	int launching; /* launches under way */
	/* replacements asked for interrupted cells of the shape (pool_rebalance): each one
	 * more standby cell until its time (monotonic ns), or until a pod claims one */
	int64_t *replace_until;
	size_t n_replace, cap_replace;
	struct shape *next;
};

/* Keeps the shape's replacements that are still due; how many. Needs the lock. */
size_t pool_replacements(struct shape *s, int64_t now_mono_ns);

/* CronJobs (pool.cronJobs) are listed this often (their runs' rule: pool_plan.h). */
#define POOL_CRON_LIST_S 30

/* A CronJob the pool foresees: its pods' shape, schedule and the runs coming or just past. */
struct pool_cron {
	char *key; /* "<namespace>/<name>" */
	struct shape *shape;
	struct cronsched sched;
	int pods;
	int64_t seen_s; /* Unix seconds: its runs up to this one are in runs (or past) */
	int64_t next_s; /* its first run at or after the last pass; -1: none */
	struct pool_cron_run runs[POOL_CRON_RUNS];
	size_t n_runs;
	struct pool_cron *next;
};

/* What one CronJob asks of the pool, as the lister hands it over (pool_cron_set). */
struct pool_cron_want {
	const char *key, *instance_type;
	int spot;
	const struct cronsched *sched;
	int pods;
};

/* Replaces the CronJobs the pool foresees with want[0..n) (runs already counted kept). */
void pool_cron_set(struct pool *p, const struct pool_cron_want *want, size_t n);
/* The standby cells the CronJobs add to s's target now (their runs brought up to date first,
 * a run coming into its lead logged). Needs the lock. */
int pool_cron_target(struct pool *p, struct shape *s, double ready_s);
/* A pod of s claimed a standby cell now: counted against a run of s under way. Needs the
 * lock. */
void pool_cron_claimed(struct pool *p, struct shape *s);
/* Whether a CronJob's pods are of s. Needs the lock. */
bool pool_cron_uses(const struct pool *p, const struct shape *s);
void pool_cron_free_all(struct pool *p);
/* The CronJob lister's thread (pool_cron.c). */
void *pool_cron_main(void *arg);

enum standby_state {
	SB_BOOTING, /* recorded, launching (or cut short by a stop: resumed by the next pass) */
	SB_READY,   /* its agent serves: claimable */
	SB_CLAIMED, /* a sandbox took it and records it */
	SB_ENDING,  /* being terminated */
};

struct standby {
	char *cell_id;
	struct shape *shape;
	enum standby_state state;
	bool launching; /* a launch thread works on it */
	bool failed;	/* the provider lists it failed, or not at all: terminate it */
	char *ip;	/* NULL until ready */
	char *claimed_by;
	int64_t created_ns, ready_ns; /* Unix time; ready_ns 0 until ready */
	struct standby *next;
};

struct pool {
	struct kiyot *k;
	struct pool_config cfg; /* a copy: the fields of k->cfg.pool */
	char *placement;
	bool remote; /* the provider's cells are other machines (time to ready) */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* kicked, a launch ended, stop */
	pthread_t thread;
	bool started, kicked;
	int stop; /* atomic: the refiller and its launches end */
	int launches;
	struct shape *shapes;  /* pool.shapes first, in their order, then adaptive ones */
	struct standby *cells; /* oldest first */
	/* the cells a replacement was asked for lately (pool_rebalance: one each) */
	char *rebalanced[POOL_REBALANCED_MAX];
	size_t rebalanced_next;
	struct pool_cron *crons; /* the CronJobs foreseen (pool.cronJobs) */
	pthread_t cron_thread;
	bool cron_started;
};

/* The shape of type and spot, made (count -1) when there is none. Needs the lock. */
struct shape *pool_shape_get(struct pool *p, const char *type, int spot);
/* Saves / deletes a standby cell's record; logged, not returned: the store is local. */
int pool_record_save(struct pool *p, const struct standby *c, struct err *err);
void pool_record_delete(struct pool *p, const char *cell_id);
/* A new standby cell of the shape, BOOTING, appended to the list (its record not saved yet).
 * Needs the lock. */
struct standby *pool_standby_add(struct pool *p, struct shape *s, const char *cell_id);
/* Unlists and frees c. Needs the lock. */
void pool_standby_drop(struct pool *p, struct standby *c);
/* Terminates the cell, then forgets it (record and entry): for cells in SB_ENDING, without
 * the lock. why goes to the log ("expired"). */
void pool_end_cell(struct pool *p, const char *cell_id, const char *why);
void pool_kick(struct pool *p);
/* The refiller's thread. */
void *pool_refill_main(void *arg);

#endif
