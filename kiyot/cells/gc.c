/*
 * gc.c: keeping the provider's cells and kiyot's sandboxes in agreement. The provider is the
 * source of truth for what exists; every cell carries our cluster id (providers list only
 * those), so nothing else is ever touched.
 *
 * For each cell the provider lists:
 *   - its sandbox is ready: keep it (resume its agent stream; heal a dead agent);
 *   - its sandbox is still launching, or being stopped: leave it alone;
 *   - its sandbox's launch was interrupted (a crash): keep it for the kubelet's retry, which
 *     resumes the launch; terminate it if no retry came within the grace period;
 *   - no sandbox owns it: terminate it (at start-up at once, later after the grace period,
 *     so a cell being made right now is never taken for an orphan).
 * A ready sandbox whose cell is gone is marked not ready, its containers exited.
 *
 * The collector runs on a thread of its own, its first pass too, so kiyot serves the CRI while
 * it reads the provider's cells; the cells of sandboxes recorded ready are resumed from their
 * records before that. The cells it ends are terminated by up to GC_TERMINATORS
 * threads at once, so a provider that batches terminations (EC2) gets them together: a
 * thousand orphans cost a few calls, not two each, one after the other. Stopping it ends a
 * pass at once: the pass and its terminators check the stop flag before each cell, and their
 * provider calls run in a cancel scope (cancel.h) that the stop cancels.
 */
#include "gc.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cancel.h"
#include "cells.h"
#include "cellsync.h"
#include "clock.h"
#include "log.h"
#include "pool/pool.h"
#include "daemon/kiyot.h"
#include "xalloc.h"

struct orphan {
	char *cell_id;
	int64_t first_seen_ns;
};

/* The most threads that terminate cells at once in one pass. */
#define GC_TERMINATORS 128

struct gc {
	struct kiyot *k;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stop;		      /* written under lock, read anywhere */
	bool asked;		      /* gc_pass_now: a pass is wanted now (under lock) */
	unsigned long begun, ended;   /* passes so far (under lock) */
	const struct gc_clock *clock; /* NULL: the real clocks */
	struct orphan *orphans;
	size_t n_orphans, cap;
};

static const struct gc_clock *next_clock;

void gc_set_clock(const struct gc_clock *clock)
{
	next_clock = clock;
}

static int64_t mono_ns(const struct gc *g)
{
	return g->clock ? g->clock->mono_ns(g->clock->ctx) : clock_mono_ns();
}

static int64_t wall_ns(const struct gc *g)
{
	return g->clock ? g->clock->wall_ns(g->clock->ctx) : clock_now_ns();
}

/* Whether gc_stop was called: a pass and its provider calls end. */
static bool stopping(void *ctx)
{
	struct gc *g = ctx;

	return __atomic_load_n(&g->stop, __ATOMIC_RELAXED) != 0;
}

/* When a cell was first seen without an owner (remembered across passes). */
static int64_t orphan_since(struct gc *g, const char *id, int64_t now)
{
	for (size_t i = 0; i < g->n_orphans; i++)
		if (strcmp(g->orphans[i].cell_id, id) == 0)
			return g->orphans[i].first_seen_ns;
	xgrow((void **)&g->orphans, &g->cap, g->n_orphans + 1, sizeof(*g->orphans));
	g->orphans[g->n_orphans].cell_id = xstrdup(id);
	g->orphans[g->n_orphans].first_seen_ns = now;
	g->n_orphans++;
	return now;
}

static void orphans_forget(struct gc *g, const struct cell_info *cells, size_t n)
{
	size_t w = 0;

	for (size_t i = 0; i < g->n_orphans; i++) {
		int listed = 0;

		for (size_t j = 0; j < n; j++)
			if (strcmp(cells[j].cell_id, g->orphans[i].cell_id) == 0)
				listed = 1;
		if (listed)
			g->orphans[w++] = g->orphans[i];
		else
			free(g->orphans[i].cell_id);
	}
	g->n_orphans = w;
}

enum verdict {
	KEEP,
	RESUME,
	HEAL_AND_RESUME,
	TERMINATE,
	TERMINATE_INTERRUPTED
};

static enum verdict judge(struct kiyot *k, struct gc *g, const struct cell_info *c, int startup,
			  int64_t now)
{
	int64_t grace = (int64_t)k->cfg.gc_grace_s * 1000000000LL;
	struct sandbox *sb = records_sandbox_of_cell(k->records, c->cell_id);

	if (!sb && pool_owns(k->pool, c->cell_id))
		return KEEP; /* a standby cell the pool records: the pool's to end */
	if (!sb)
		return startup || now - orphan_since(g, c->cell_id, now) >= grace ? TERMINATE
										  : KEEP;
	if (sb->phase == SANDBOX_STOPPING)
		return KEEP;
	if (sb->state == SANDBOX_READY)
		return c->phase == CELL_FAILED ? HEAL_AND_RESUME : RESUME;
	if (sb->phase == SANDBOX_LAUNCHING || startup)
		return KEEP;
	return wall_ns(g) - sb->created_ns >= grace ? TERMINATE_INTERRUPTED : KEEP;
}

/* The sandbox of an interrupted launch the gc ends, with a reference, stopping from now on:
 * a retry of the launch waits until its cell is gone. Needs the records' lock. */
static struct sandbox *claim(struct kiyot *k, const struct cell_info *c)
{
	struct sandbox *sb = records_sandbox_of_cell(k->records, c->cell_id);
	struct err err = ERR_INIT;

	if (!sb || sandbox_begin(k->records, sb, SANDBOX_STOPPING, &err) < 0)
		return NULL; /* judged idle under this same lock: cannot happen */
	return sandbox_get(sb);
}

/* Ends the gc's stop of sb: the cell is gone (gone: it was terminated). */
static void release(struct kiyot *k, struct sandbox *sb, bool gone)
{
	struct err err = ERR_INIT;

	records_lock(k->records);
	if (gone && sandbox_listed(sb) && sb->state != SANDBOX_READY) {
		sb->cell_id[0] = '\0';
		if (records_save_sandbox(k->records, sb, &err) < 0)
			log_error("sandbox %s: %s", sb->id, err.msg);
	}
	sandbox_end(k->records, sb);
	records_unlock(k->records);
	sandbox_put(sb);
}

/* Carries out a verdict; sb is the claimed sandbox of TERMINATE_INTERRUPTED. */
static void act(struct kiyot *k, const struct cell_info *c, enum verdict v, struct sandbox *sb)
{
	struct err err = ERR_INIT;

	switch (v) {
	case KEEP:
		return;
	case HEAL_AND_RESUME:
		log_warn("cells: cell %s: its agent is not running; restarting it", c->cell_id);
		if (k->provider.ops->heal &&
		    k->provider.ops->heal(k->provider.self, c->cell_id, &err) < 0)
			log_error("cells: %s", err.msg);
		/* fall through */
	case RESUME:
		cells_resume(k->cells, c->cell_id, c->ip);
		return;
	case TERMINATE:
	case TERMINATE_INTERRUPTED:
		log_info("cells: terminating cell %s (%s)", c->cell_id,
			 v == TERMINATE ? "no sandbox owns it"
					: "its interrupted launch was not retried");
		if (cells_terminate(k->cells, c->cell_id, &err) < 0)
			log_error("cells: %s", err.msg);
		if (sb)
			release(k, sb, err.code == 0);
		return;
	}
}

/* Ready sandboxes whose cell the provider no longer has lose it. */
/* The ids of the sandboxes ready now: only those can have lost a cell the next list misses
 * (one that becomes ready while the provider lists was not in the list yet). Needs the records' lock. */
static char **ready_sandboxes(struct kiyot *k, size_t *n)
{
	struct sandbox **v;
	size_t nv = records_sandboxes(k->records, &v);
	char **ids = xcalloc(nv + 1, sizeof(*ids));

	*n = 0;
	for (size_t i = 0; i < nv; i++)
		if (v[i]->state == SANDBOX_READY && v[i]->phase == SANDBOX_IDLE)
			ids[(*n)++] = xstrdup(v[i]->id);
	sandboxes_put(v, nv);
	return ids;
}

static bool listed(char **ids, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ids[i], id) == 0)
			return true;
	return false;
}

/* What the collector reports to the pods' side (cells.h); none without a cell manager. */
static const struct cells_hooks *gc_hooks(struct kiyot *k)
{
	static const struct cells_hooks none = { 0 };

	return k->cells ? cells_hooks(k->cells) : &none;
}

static void mark_lost(struct kiyot *k, char **ready, size_t n_ready, const struct cell_info *cells,
		      size_t n)
{
	const struct cells_hooks *hooks = gc_hooks(k);
	struct sandbox **v;
	size_t nv;

	records_lock(k->records);
	nv = records_sandboxes(k->records, &v);
	for (size_t j = 0; j < nv; j++) {
		struct sandbox *sb = v[j];
		int found = 0;

		if (sb->state != SANDBOX_READY || sb->phase != SANDBOX_IDLE ||
		    !listed(ready, n_ready, sb->id))
			continue;
		for (size_t i = 0; i < n && !found; i++)
			found = strcmp(cells[i].cell_id, sb->cell_id) == 0;
		if (found)
			continue;
		log_warn("sandbox %s: its cell %s is gone; marking it not ready", sb->id,
			 sb->cell_id);
		if (hooks->sandbox_lost)
			hooks->sandbox_lost(hooks->ctx, sb, "CellLost");
	}
	records_unlock(k->records);
	sandboxes_put(v, nv);
}

/* The terminations of one pass, shared by its terminator threads. */
struct term_jobs {
	struct gc *g;
	const struct cell_info *cells;
	const enum verdict *v;
	struct sandbox *const *claimed;
	const size_t *idx; /* the cells to terminate */
	size_t n, next;	   /* next: taken under the atomic counter */
};

/* A terminator: takes the pass's next termination until none is left or the gc stops. */
static void *terminator(void *arg)
{
	struct term_jobs *j = arg;
	struct cancel_scope sc;

	cancel_scope_enter(&sc, stopping, j->g);
	for (;;) {
		size_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);

		if (i >= j->n)
			break;
		if (stopping(j->g)) {
			/* a claimed sandbox is let go, its cell kept for the next kiyot */
			if (j->claimed[j->idx[i]])
				release(j->g->k, j->claimed[j->idx[i]], false);
			continue;
		}
		act(j->g->k, &j->cells[j->idx[i]], j->v[j->idx[i]], j->claimed[j->idx[i]]);
	}
	cancel_scope_leave(&sc);
	return NULL;
}

/* Carries out a pass's verdicts: keeping and resuming in order, terminations on up to
 * GC_TERMINATORS threads at once (the provider batches those that come together). */
static void act_all(struct gc *g, const struct cell_info *cells, const enum verdict *v,
		    struct sandbox *const *claimed, size_t n)
{
	struct term_jobs j = { g, cells, v, claimed, NULL, 0, 0 };
	size_t *idx = xcalloc(n + 1, sizeof(*idx));
	pthread_t t[GC_TERMINATORS];
	size_t nt = 0;

	for (size_t i = 0; i < n; i++) {
		if (v[i] == TERMINATE || v[i] == TERMINATE_INTERRUPTED)
			idx[j.n++] = i;
		else if (!stopping(g))
			act(g->k, &cells[i], v[i], claimed[i]);
	}
	j.idx = idx;
	while (nt < GC_TERMINATORS && nt + 1 < j.n &&
	       pthread_create(&t[nt], NULL, terminator, &j) == 0)
		nt++;
	terminator(&j); /* this thread is one too (the only one for a single cell) */
	for (size_t i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	free(idx);
}

static void pass(struct gc *g, int startup)
{
	struct kiyot *k = g->k;
	struct cell_info *cells = NULL;
	enum verdict *v;
	struct sandbox **claimed;
	size_t n = 0;
	struct err err = ERR_INIT;
	int64_t now = mono_ns(g);
	char **ready;
	size_t n_ready;
	int ret;

	records_lock(k->records);
	ready = ready_sandboxes(k, &n_ready);
	records_unlock(k->records);
	ret = k->provider.ops->list(k->provider.self, &cells, &n, &err);
	if (ret < 0) {
		log_error("cells: cannot list cells: %s", err.msg);
		goto out;
	}
	v = xcalloc(n + 1, sizeof(*v));
	claimed = xcalloc(n + 1, sizeof(*claimed));
	records_lock(k->records);
	for (size_t i = 0; i < n; i++) {
		v[i] = judge(k, g, &cells[i], startup, now);
		if (v[i] == TERMINATE_INTERRUPTED && !(claimed[i] = claim(k, &cells[i])))
			v[i] = KEEP;
	}
	records_unlock(k->records);
	act_all(g, cells, v, claimed, n);
	free(claimed);
	mark_lost(k, ready, n_ready, cells, n);
	pool_reconcile(k->pool, cells, n);
	orphans_forget(g, cells, n);
	cellsync_kick(k->cellsync);
	if (gc_hooks(k)->pass_done)
		gc_hooks(k)->pass_done(gc_hooks(k)->ctx);
	free(v);
	cell_info_array_free(cells, n);
out:
	for (size_t i = 0; i < n_ready; i++)
		free(ready[i]);
	free(ready);
}

static void *gc_thread(void *arg)
{
	struct gc *g = arg;
	struct cancel_scope sc;
	struct timespec ts;

	cancel_scope_enter(&sc, stopping, g);
	pthread_mutex_lock(&g->lock);
	while (!g->stop) {
		bool startup = g->begun++ == 0; /* what no sandbox owns goes at once */

		g->asked = false;
		pthread_mutex_unlock(&g->lock);
		pass(g, startup);
		pthread_mutex_lock(&g->lock);
		g->ended++;
		pthread_cond_broadcast(&g->cond);
		ts = clock_deadline(CLOCK_MONOTONIC, (int64_t)g->k->cfg.gc_interval_s * 1000);
		while (!g->stop && !g->asked &&
		       pthread_cond_timedwait(&g->cond, &g->lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&g->lock);
	cancel_scope_leave(&sc);
	return NULL;
}

int gc_pass_now(struct gc *g, int timeout_ms)
{
	struct timespec ts = clock_deadline(CLOCK_MONOTONIC, timeout_ms);
	unsigned long want;
	int ret = 0;

	pthread_mutex_lock(&g->lock);
	want = g->begun + 1;
	g->asked = true;
	pthread_cond_broadcast(&g->cond);
	while (timeout_ms > 0 && g->started && !g->stop && g->ended < want && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&g->cond, &g->lock, &ts);
	if ((timeout_ms > 0 && g->ended < want) || !g->started)
		ret = -ETIMEDOUT;
	else
		ret = 0;
	pthread_mutex_unlock(&g->lock);
	return ret;
}

unsigned long gc_passes_ended(struct gc *g)
{
	unsigned long n;

	pthread_mutex_lock(&g->lock);
	n = g->ended;
	pthread_mutex_unlock(&g->lock);
	return n;
}

/* At start-up, before the first pass: the cells of the sandboxes recorded ready are resumed
 * from their records (no provider call), so their Watches, calls and volume syncs work at once;
 * the first pass then checks them against the provider (one gone is marked lost). */
static void resume_recorded(struct kiyot *k)
{
	struct sandbox **v;
	size_t nv, n = 0;
	char **ids, **ips;

	records_lock(k->records);
	nv = records_sandboxes(k->records, &v);
	ids = xcalloc(nv + 1, sizeof(*ids));
	ips = xcalloc(nv + 1, sizeof(*ips));
	for (size_t i = 0; i < nv; i++)
		if (v[i]->state == SANDBOX_READY && v[i]->phase == SANDBOX_IDLE && v[i]->cell_id &&
		    v[i]->cell_id[0] && v[i]->ip && v[i]->ip[0]) {
			ids[n] = xstrdup(v[i]->cell_id);
			ips[n++] = xstrdup(v[i]->ip);
		}
	records_unlock(k->records);
	sandboxes_put(v, nv);
	for (size_t i = 0; i < n; i++) {
		cells_resume(k->cells, ids[i], ips[i]);
		free(ids[i]);
		free(ips[i]);
	}
	free(ids);
	free(ips);
}

struct gc *gc_start(struct kiyot *k)
{
	struct gc *g = xcalloc(1, sizeof(*g));
	pthread_condattr_t ca;

	g->k = k;
	g->clock = next_clock;
	pthread_mutex_init(&g->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cond, &ca);
	pthread_condattr_destroy(&ca);
	resume_recorded(k);
	if (pthread_create(&g->thread, NULL, gc_thread, g) != 0)
		log_error("cells: no garbage collection thread: %s", strerror(errno));
	else
		g->started = true;
	return g;
}

void gc_stop(struct gc *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	__atomic_store_n(&g->stop, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	if (g->started)
		pthread_join(g->thread, NULL);
	for (size_t i = 0; i < g->n_orphans; i++)
		free(g->orphans[i].cell_id);
	free(g->orphans);
	pthread_mutex_destroy(&g->lock);
	pthread_cond_destroy(&g->cond);
	free(g);
}
