/*
 * pool_refill.c: the pool's refiller (pool.h): each pass, on its own thread, ends the standby
 * cells that expired, failed or are beyond what the settings ask, and launches the cells each
 * shape's target lacks, within the caps, on threads of their own.
 */
#include "pool_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cancel.h"
#include "cells/cells.h"
#include "cells/cellsync.h"
#include "clock.h"
#include "log.h"
#include "daemon/kiyot.h"
#include "xalloc.h"

/* One standby cell's launch, on a thread of its own. */
struct launch_job {
	struct pool *p;
	struct standby *c; /* listed while launching: only its launch unlists it */
	struct cell_spec spec;
	char *cell_id, *type;
	char *prepull[POOL_PREPULL_MAX];
};

/* A cell a pass ends, and why (for the log). */
struct ending {
	char *cell_id;
	char *why;
};

static void job_free(struct launch_job *j)
{
	for (size_t i = 0; i < j->spec.n_prepull; i++)
		free(j->prepull[i]);
	free(j->cell_id);
	free(j->type);
	free(j);
}

static bool stopping(void *ctx)
{
	struct pool *p = ctx;

	return __atomic_load_n(&p->stop, __ATOMIC_RELAXED) != 0;
}

/* After a launch of the shape failed: no launch of it for a while, longer each time. Needs
 * the lock. */
static void shape_back_off(struct shape *s)
{
	s->backoff_s = s->backoff_s ? s->backoff_s * 2 : POOL_RETRY_MIN_S;
	if (s->backoff_s > POOL_RETRY_MAX_S)
		s->backoff_s = POOL_RETRY_MAX_S;
	s->retry_ns = clock_mono_ns() + (int64_t)s->backoff_s * 1000000000LL;
}

/* Ends a standby launch: the cell ready, kept for the next kiyot (stopping), or gone. */
static void launch_ended(struct launch_job *j, int ret, char *ip, bool kept, double secs,
			 const struct err *err)
{
	struct pool *p = j->p;
	struct standby *c = j->c;
	struct shape *s = c->shape;
	struct err serr = ERR_INIT;

	pthread_mutex_lock(&p->lock);
	c->launching = false;
	s->launching--;
	if (ret == 0) {
		c->state = SB_READY;
		c->ip = ip;
		c->ready_ns = clock_now_ns();
		s->ready_s = s->ready_s > 0 ? 0.8 * s->ready_s + 0.2 * secs : secs;
		s->backoff_s = 0;
		if (pool_record_save(p, c, &serr) < 0)
			log_error("pool: %s", serr.msg);
		log_info("pool: refill: standby cell %s (%s, %s) ready in %.2f s", j->cell_id,
			 s->type, s->spot ? "spot" : "on-demand", secs);
	} else if (kept || stopping(p)) {
		log_info("pool: standby cell %s: its launch stops with kiyot; the next kiyot "
			 "resumes "
			 "it",
			 j->cell_id);
	} else {
		shape_back_off(s);
		log_warn("pool: standby cell %s (%s) did not come up: %s; the next launch of %s in "
			 "%d s",
			 j->cell_id, s->type, err->msg, s->type, s->backoff_s);
		pool_record_delete(p, j->cell_id);
		pool_standby_drop(p, c);
	}
	p->launches--;
	p->kicked = ret == 0 ? p->kicked : true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	cellsync_kick(p->k->cellsync);
}

static void *launch_main(void *arg)
{
	struct launch_job *j = arg;
	struct cell_launched launched = { 0 };
	struct cancel_scope sc;
	struct err err = ERR_INIT;
	char *ip = NULL;
	int64_t t0 = clock_mono_ns();
	int ret;

	cancel_scope_enter(&sc, stopping, j->p);
	ret = cells_launch(j->p->k->cells, &j->spec, &ip, &launched, &err);
	cancel_scope_leave(&sc);
	launch_ended(j, ret, ip, launched.kept, (double)(clock_mono_ns() - t0) / 1e9, &err);
	cell_launched_release(&launched);
	job_free(j);
	return NULL;
}

/* A launch job for c (marked launching, counted). Needs the lock. */
static struct launch_job *job_for(struct pool *p, struct standby *c)
{
	struct launch_job *j = xcalloc(1, sizeof(*j));

	j->p = p;
	j->c = c;
	j->cell_id = xstrdup(c->cell_id);
	j->type = xstrdup(c->shape->type);
	j->spec.cell_id = j->cell_id;
	j->spec.pod_uid = j->spec.pod_name = j->spec.pod_namespace = "";
	j->spec.instance_type = j->type;
	j->spec.cpus = c->shape->cpus;
	j->spec.memory_bytes = c->shape->memory_bytes;
	j->spec.spot = c->shape->spot;
	j->spec.arch = c->shape->arch;
	j->spec.standby = 1;
	/* the images most pods of the shape used, pulled as it boots */
	j->spec.n_prepull =
		pool_images_common(&c->shape->images, (const char **)j->prepull, POOL_PREPULL_MAX);
	for (size_t i = 0; i < j->spec.n_prepull; i++)
		j->prepull[i] = xstrdup(j->prepull[i]);
	j->spec.prepull = (const char *const *)j->prepull;
	c->launching = true;
	c->shape->launching++;
	p->launches++;
	return j;
}

/* A new standby cell of s, recorded before its launch (so the next kiyot finds it): its job,
 * or NULL when the store refused it. Needs the lock. */
static struct launch_job *launch_new(struct pool *p, struct shape *s)
{
	_cleanup_free_ char *rnd = kiyot_new_id();
	_cleanup_free_ char *id = xasprintf(POOL_ID_PREFIX "%.17s", rnd);
	struct standby *c = pool_standby_add(p, s, id);
	struct err err = ERR_INIT;

	if (pool_record_save(p, c, &err) < 0) {
		log_error("pool: %s; not launching it", err.msg);
		pool_standby_drop(p, c);
		shape_back_off(s);
		return NULL;
	}
	return job_for(p, c);
}

/* Marks c ending for why (formatted). Needs the lock. */
static void end_cell(struct standby *c, struct ending **v, size_t *n, size_t *cap, char *why)
{
	c->state = SB_ENDING;
	xgrow((void **)v, cap, *n + 1, sizeof(**v));
	(*v)[*n].cell_id = xstrdup(c->cell_id);
	(*v)[(*n)++].why = why;
}

/* The standby cells of s in a state (BOOTING and READY with live). Needs the lock. */
static int count_cells(struct pool *p, const struct shape *s, bool with_ending)
{
	int n = 0;

	for (struct standby *c = p->cells; c; c = c->next)
		if (c->shape == s && (c->state == SB_BOOTING || c->state == SB_READY ||
				      (with_ending && c->state == SB_ENDING)))
			n++;
	return n;
}

/* The cells s wants now: its count, or what its arrivals ask when the pool is adaptive, the
 * larger, one more for each replacement asked for an interrupted cell, and the pods of the
 * CronJob runs due within its time to ready (pool.cronJobs). Needs the lock. */
static int shape_target(struct pool *p, struct shape *s, int64_t now)
{
	int target = s->count > 0 ? s->count : 0;
	double ready = s->ready_s > 0 ? s->ready_s
				      : (p->remote ? POOL_READY_REMOTE_S : POOL_READY_LOCAL_S);

	if (p->cfg.adaptive) {
		struct pool_adaptive ap = { .window_s = p->cfg.window_s,
					    .ready_s = ready,
					    .hit_percent = p->cfg.target_hit_percent,
					    .burst_s = p->cfg.burst_s,
					    .max = POOL_COUNT_MAX };
		int at;

		pool_arrivals_since(&s->arrivals, now - (int64_t)POOL_RATE_HORIZON *
								  p->cfg.window_s * 1000000000LL);
		at = pool_adaptive_target(&s->arrivals, now, &ap);

		if (at > target)
			target = at;
	}
	/* the replacements asked for interrupted cells and CronJob runs come on top */
	if (p->cfg.cron_jobs)
		target += pool_cron_target(p, s, ready);
	return target + (int)pool_replacements(s, now);
}

/* Forgets the shapes no setting lists that have no cell and no arrival left to count. Needs
 * the lock. */
static void forget_idle_shapes(struct pool *p, int64_t now)
{
	int64_t keep_s = p->cfg.window_s > p->cfg.idle_lifetime_s ? p->cfg.window_s
								  : p->cfg.idle_lifetime_s;

	for (struct shape **pp = &p->shapes; *pp;) {
		struct shape *s = *pp;
		bool used =
			s->count >= 0 || s->launching || pool_replacements(s, now) ||
			pool_cron_uses(p, s) ||
			(s->last_arrival_ns && now - s->last_arrival_ns < keep_s * 1000000000LL);

		for (struct standby *c = p->cells; c && !used; c = c->next)
			used = c->shape == s;
		if (used) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		free(s->key);
		free(s->type);
		pool_arrivals_release(&s->arrivals);
		pool_images_release(&s->images);
		free(s->replace_until);
		free(s);
	}
}

/* Ends the expired and failed ready cells. Needs the lock. */
static void expire(struct pool *p, struct ending **v, size_t *n, size_t *cap)
{
	int64_t now = clock_now_ns();
	int64_t life = (int64_t)p->cfg.idle_lifetime_s * 1000000000LL;

	for (struct standby *c = p->cells; c; c = c->next) {
		if (c->state != SB_READY)
			continue;
		if (c->failed)
			end_cell(c, v, n, cap, xstrdup("it failed or is gone"));
		else if (life > 0 && now - c->ready_ns >= life)
			end_cell(c, v, n, cap,
				 xasprintf("expiry: standby for %d s, its idle lifetime "
					   "(pool.adaptive.idleLifetimeSeconds)",
					   p->cfg.idle_lifetime_s));
	}
}

/* Plans every shape at once: the cells beyond what the caps (and, without the adaptive pool,
 * the targets) keep end; the cells the targets lack within the caps are launched. Needs the
 * lock. */
static void plan(struct pool *p, int64_t now, struct ending **v, size_t *n, size_t *cap,
		 struct launch_job ***jobs, size_t *n_jobs, size_t *jobs_cap)
{
	size_t ns = 0, i = 0;
	struct pool_plan_shape *grow, *keep;
	struct shape *s;

	for (s = p->shapes; s; s = s->next)
		ns++;
	grow = xcalloc(ns + 1, sizeof(*grow));
	keep = xcalloc(ns + 1, sizeof(*keep));
	for (s = p->shapes; s; s = s->next, i++) {
		int target = shape_target(p, s, now), have = count_cells(p, s, false);

		grow[i] = (struct pool_plan_shape){ target, s->price, 0 };
		/* an adaptive shape's cells above its target wait for their lifetime */
		keep[i] =
			(struct pool_plan_shape){ p->cfg.adaptive && have > target ? have : target,
						  s->price, 0 };
	}
	pool_plan_caps(grow, ns, p->cfg.max_cells, p->cfg.max_dollars_per_hour);
	pool_plan_caps(keep, ns, p->cfg.max_cells, p->cfg.max_dollars_per_hour);
	for (s = p->shapes, i = 0; s; s = s->next, i++) {
		int shed = count_cells(p, s, false) - keep[i].allowed;
		int lack = grow[i].allowed - count_cells(p, s, true);

		for (struct standby *c = p->cells; c && shed > 0; c = c->next)
			if (c->shape == s && c->state == SB_READY) {
				end_cell(c, v, n, cap,
					 xasprintf("%s wants %d standby cells%s", s->type,
						   keep[i].allowed,
						   keep[i].allowed < keep[i].want
							   ? " within the caps (pool.adaptive."
							     "maxCells, maxDollarsPerHour)"
							   : ""));
				shed--;
			}
		if (grow[i].allowed < grow[i].want && lack <= 0 && !s->launching)
			log_debug("pool: %s: the caps allow %d of the %d standby cells it wants",
				  s->type, grow[i].allowed, grow[i].want);
		for (; lack > 0 && now >= s->retry_ns && p->launches < POOL_LAUNCHES_MAX; lack--) {
			struct launch_job *j = launch_new(p, s);

			if (!j)
				break;
			xgrow((void **)jobs, jobs_cap, *n_jobs + 1, sizeof(**jobs));
			(*jobs)[(*n_jobs)++] = j;
		}
	}
	free(grow);
	free(keep);
}

/* Starts the jobs' threads; a job without one is undone. */
static void start_jobs(struct launch_job **jobs, size_t n)
{
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (size_t i = 0; i < n; i++) {
		struct err err = ERR_INIT;

		if (pthread_create(&(pthread_t){ 0 }, &attr, launch_main, jobs[i]) == 0)
			continue;
		err_set(&err, EAGAIN, "no thread to launch it");
		launch_ended(jobs[i], -EAGAIN, NULL, false, 0, &err);
		job_free(jobs[i]);
	}
	pthread_attr_destroy(&attr);
}

/* One pass of the refiller. */
static void pass(struct pool *p)
{
	struct ending *ends = NULL;
	struct launch_job **jobs = NULL;
	size_t n_ends = 0, ends_cap = 0, n_jobs = 0, jobs_cap = 0;
	int64_t now = clock_mono_ns();

	pthread_mutex_lock(&p->lock);
	expire(p, &ends, &n_ends, &ends_cap);
	forget_idle_shapes(p, now);
	/* launches a stop cut short (this kiyot's or the last one's) go on with the same id */
	for (struct standby *c = p->cells; c && p->launches < POOL_LAUNCHES_MAX; c = c->next)
		if (c->state == SB_BOOTING && !c->launching) {
			xgrow((void **)&jobs, &jobs_cap, n_jobs + 1, sizeof(*jobs));
			jobs[n_jobs++] = job_for(p, c);
		}
	plan(p, now, &ends, &n_ends, &ends_cap, &jobs, &n_jobs, &jobs_cap);
	pthread_mutex_unlock(&p->lock);
	start_jobs(jobs, n_jobs);
	free(jobs);
	for (size_t i = 0; i < n_ends; i++) {
		if (!stopping(p))
			pool_end_cell(p, ends[i].cell_id, ends[i].why);
		free(ends[i].cell_id);
		free(ends[i].why);
	}
	free(ends);
	if (n_ends || n_jobs)
		cellsync_kick(p->k->cellsync);
}

void *pool_refill_main(void *arg)
{
	struct pool *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!stopping(p)) {
		struct timespec ts;

		p->kicked = false;
		pthread_mutex_unlock(&p->lock);
		pass(p);
		pthread_mutex_lock(&p->lock);
		ts = clock_deadline(CLOCK_MONOTONIC, POOL_TICK_MS);
		while (!stopping(p) && !p->kicked &&
		       pthread_cond_timedwait(&p->cond, &p->lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}
