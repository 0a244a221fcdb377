/*
 * pool.h: warm cells. Per shape (instance type, market, architecture and the provider's
 * placement: everything a launch fixes), the pool keeps standby cells: launched, booted and
 * enrolled (the agent holds its own certificate), with no pod. A RunPodSandbox whose sizing
 * picked a shape with a standby cell takes it (pool_claim) instead of launching one; the pool
 * launches another in the background. Cells stay single-use: a standby cell serves at most one
 * pod, and a cell that served a pod is terminated with its sandbox, never given back.
 *
 * Sizes (pool_config.h): a fixed count per shape, and the adaptive target, per shape the
 * standby cells that cover its arrivals while its cells come up (pool_plan.h), within the caps
 * on standby cells and their catalog price per hour. A standby cell older than the idle
 * lifetime is terminated, and a new one launched only when its shape's target still asks for
 * it (a fixed count always does; an adaptive shape without arrivals over its window does not:
 * its pool shrinks to zero once its cells grow old). Cells beyond the caps, and cells of a shape
 * no setting asks for (a count lowered or removed), are terminated at once; an adaptive shape's
 * cells above its target wait for their lifetime, for the next burst.
 *
 * CronJobs (pool.cronJobs, pool_cron.c): the CronJobs whose pods kiyot runs are listed every
 * POOL_CRON_LIST_S; from a shape's time to ready and a margin before a run, the shape's target
 * rises by the run's pods until they claimed or a grace after the run passed.
 *
 * Durable: each standby cell is recorded in the store (meta "pool/<cell id>") before its
 * launch, so a killed kiyot leaks none: the next one adopts them (ready cells are resumed,
 * launches cut short are resumed with the same cell id, which the providers' launch makes
 * idempotent) and the garbage collector keeps the cells the pool records (pool_owns); a
 * standby cell the store does not know is an orphan like any other. A claim is recorded as
 * "claimed by sandbox X" before the sandbox's record names the cell, and the pool's record
 * goes once the sandbox's is saved: a kiyot killed in between finds either a claim no sandbox
 * recorded (the cell, which never ran a pod, goes back to the pool) or the sandbox's record
 * owning the cell (the pool's record goes).
 *
 * Standby cell ids are "sb-" and 17 hex digits (POOL_ID_PREFIX).
 *
 * Thread safety: every function may be called from any thread. The pool's lock is taken under
 * the records' lock (pool_owns in the collector's judgement) and no lock is taken under it, the store's
 * aside. NULL is a pool without standby cells for every function but pool_new.
 */
#ifndef KIYOT_POOL_H
#define KIYOT_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "providers/provider.h"

struct kiyot;
struct pool;

#define POOL_ID_PREFIX "sb-"
/* The refiller's pass at least this often (and whenever a cell is claimed or comes up). */
#define POOL_TICK_MS 1000
/* Standby cells launching at once, all shapes together. */
#define POOL_LAUNCHES_MAX 8
/* After a failed standby launch, its shape waits this long before the next (doubling). */
#define POOL_RETRY_MIN_S 5
#define POOL_RETRY_MAX_S 300

/*
 * The pool of k (its config, catalog, store, cells and provider set up): the settings checked
 * against the catalog (an instance type it does not know: EINVAL naming the key) and the
 * standby cells the store records adopted. *out is NULL when the settings ask for no standby
 * cell and none is recorded: kiyot then runs as without a pool. pool_start starts refilling.
 */
int pool_new(struct kiyot *k, struct pool **out, struct err *err);
void pool_start(struct pool *p);
/* Stops refilling: launches under way end and stay recorded for the next kiyot; the cells
 * keep running. Frees the pool. */
void pool_free(struct pool *p);

/* Whether the pool records the cell (standby, launching, or claimed by a sandbox not yet
 * recorded): the garbage collector keeps it. */
bool pool_owns(struct pool *p, const char *cell_id);
/* What the provider lists now (the collector's pass): a ready standby cell it no longer lists,
 * or lists failed, is terminated and replaced. */
void pool_reconcile(struct pool *p, const struct cell_info *cells, size_t n);

/* A pod of the shape (instance type, spot: cell_spec.spot) arrived: the adaptive target
 * counts it. */
void pool_arrival(struct pool *p, const char *instance_type, int spot);
/* A pod of the shape pre-pulls refs (its images, on a provider whose cells do not share the
 * node's image store): a standby cell of the shape launched later pre-pulls the images at least
 * half of its recent pods used (at most POOL_PREPULL_MAX). */
#define POOL_PREPULL_MAX 4
void pool_images(struct pool *p, const char *instance_type, int spot, const char *const *refs,
		 size_t n);
/* A cell of the shape took seconds from its launch until its agent served: the adaptive
 * target's time to ready. */
void pool_launch_time(struct pool *p, const char *instance_type, int spot, double seconds);

/*
 * The cell cell_id, of the shape (instance type, spot), may soon be interrupted (EC2's
 * rebalance recommendation or spot interruption notice): with pool.rebalanceReplacement, the
 * shape gets one standby cell beyond its target, kept for the idle lifetime (900 s when none is
 * set) or until a pod of the shape claims a cell, so the pod's next sandbox starts warm. Once
 * per cell; nothing without the setting.
 */
void pool_rebalance(struct pool *p, const char *cell_id, const char *instance_type, int spot);

/*
 * Takes a ready standby cell of exactly the shape for sandbox_id: recorded as claimed by it,
 * its agent checked to answer (one that does not is terminated and the next is tried). 0 with
 * *cell_id and *ip (caller frees); -ENOENT when the shape has none. The caller then saves the
 * sandbox's record naming the cell and calls pool_claim_commit, or pool_claim_abort when it
 * could not.
 */
int pool_claim(struct pool *p, const char *instance_type, int spot, const char *sandbox_id,
	       char **cell_id, char **ip, struct err *err);
/* The sandbox's record names the claimed cell: the pool forgets it (and refills). what (the
 * pod, for the log) may be NULL. */
void pool_claim_commit(struct pool *p, const char *cell_id, const char *what);
/* The claim could not be recorded: the cell is terminated (it never ran a pod, but the sandbox
 * may have reached it) and forgotten. */
void pool_claim_abort(struct pool *p, const char *cell_id);

/* Whether cell_id is a standby cell's id (claimed or not). */
bool pool_is_standby_id(const char *cell_id);

/* A standby cell as the Cell objects show it. */
struct pool_view {
	char *cell_id;
	char *instance_type;
	char *ip; /* "" until ready */
	int spot;
	bool ready;
	int64_t created_ns; /* Unix time */
};
/* The standby cells, unclaimed, oldest first: *out (free with pool_views_free). */
size_t pool_list(struct pool *p, struct pool_view **out);
void pool_views_free(struct pool_view *v, size_t n);

#endif
