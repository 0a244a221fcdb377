/*
 * pool.c: the warm pool's shapes and standby cells, their records in the store, their adoption
 * by a restarted kiyot, and claims (pool.h). The refiller is pool_refill.c's.
 */
#include "pool.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cells/cells.h"
#include "cells/cellsync.h"
#include "clock.h"
#include "log.h"
#include "pool_internal.h"
#include "sizing/catalog.h"
#include "daemon/kiyot.h"
#include "state/store.h"
#include "xalloc.h"

/* The architecture a cell of the catalog type t boots (CELL_ARCH_*), as sizing chooses it: arm64
 * for a type that runs arm64 alone, x86_64 otherwise (and for a type the catalog lacks). */
static unsigned type_arch(const struct catalog_type *t)
{
	return t && (t->arch & CATALOG_ARCH_ALL) == CATALOG_ARCH_ARM64 ? CELL_ARCH_ARM64
								       : CELL_ARCH_X86_64;
}

struct shape *pool_shape_get(struct pool *p, const char *type, int spot)
{
	struct shape *s, **tail = &p->shapes;
	struct catalog *cat;
	const struct catalog_type *t;

	spot = spot ? CELL_SPOT : 0;
	for (s = p->shapes; s; tail = &s->next, s = s->next)
		if (s->spot == spot && !strcmp(s->type, type))
			return s;
	s = xcalloc(1, sizeof(*s));
	s->type = xstrdup(type);
	s->spot = spot;
	s->count = -1;
	cat = catalog_acquire(p->k->catalog);
	t = catalog_find(cat, type);
	s->arch = type_arch(t);
	s->key = xasprintf("%s/%s/%s/%s", type, spot ? "spot" : "on-demand",
			   catalog_arch_name(s->arch), p->placement);
	if (t) {
		s->price = spot && t->spot_price > 0 ? t->spot_price : t->price;
		s->cpus = t->cpu;
		s->memory_bytes = t->memory_bytes;
	}
	catalog_release(cat);
	*tail = s;
	return s;
}

static void shape_free(struct shape *s)
{
	free(s->key);
	free(s->type);
	pool_arrivals_release(&s->arrivals);
	pool_images_release(&s->images);
	free(s->replace_until);
	free(s);
}

size_t pool_replacements(struct shape *s, int64_t now_mono_ns)
{
	size_t w = 0;

	for (size_t i = 0; i < s->n_replace; i++)
		if (s->replace_until[i] > now_mono_ns)
			s->replace_until[w++] = s->replace_until[i];
	s->n_replace = w;
	return w;
}

/* A pod of the shape claims a standby cell: the oldest replacement asked for it is served.
 * Needs the lock. */
static void replacement_served(struct shape *s)
{
	if (!s->n_replace)
		return;
	memmove(s->replace_until, s->replace_until + 1,
		(s->n_replace - 1) * sizeof(*s->replace_until));
	s->n_replace--;
}

static char *meta_key(const char *cell_id)
{
	return xasprintf(POOL_META_PREFIX "%s", cell_id);
}

static const char *state_name(enum standby_state st)
{
	switch (st) {
	case SB_READY:
		return "ready";
	case SB_CLAIMED:
		return "claimed";
	default:
		return "booting";
	}
}

int pool_record_save(struct pool *p, const struct standby *c, struct err *err)
{
	_cleanup_free_ char *key = meta_key(c->cell_id);
	json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:I, s:I}", "key", c->shape->key,
			      "instanceType", c->shape->type, "state",
			      state_name(c->state == SB_ENDING ? SB_READY : c->state), "spot",
			      c->shape->spot, "ip", c->ip ? c->ip : "", "claimedBy",
			      c->claimed_by ? c->claimed_by : "", "placement", p->placement,
			      "createdNs", (json_int_t)c->created_ns, "readyNs",
			      (json_int_t)c->ready_ns);
	_cleanup_free_ char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	json_decref(o);
	if (!text)
		abort();
	if (store_put_meta(p->k->store, key, text, err) < 0)
		return err_wrap(err, "standby cell %s", c->cell_id);
	return 0;
}

void pool_record_delete(struct pool *p, const char *cell_id)
{
	_cleanup_free_ char *key = meta_key(cell_id);
	struct err err = ERR_INIT;

	if (store_del_meta(p->k->store, key, &err) < 0)
		log_error("pool: standby cell %s: forgetting its record: %s", cell_id, err.msg);
}

struct standby *pool_standby_add(struct pool *p, struct shape *s, const char *cell_id)
{
	struct standby *c = xcalloc(1, sizeof(*c)), **tail = &p->cells;

	c->cell_id = xstrdup(cell_id);
	c->shape = s;
	c->state = SB_BOOTING;
	c->created_ns = clock_now_ns();
	while (*tail)
		tail = &(*tail)->next;
	*tail = c;
	return c;
}

void pool_standby_drop(struct pool *p, struct standby *c)
{
	for (struct standby **pp = &p->cells; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	free(c->cell_id);
	free(c->ip);
	free(c->claimed_by);
	free(c);
}

static struct standby *standby_find(struct pool *p, const char *cell_id)
{
	for (struct standby *c = p->cells; c; c = c->next)
		if (!strcmp(c->cell_id, cell_id))
			return c;
	return NULL;
}

void pool_kick(struct pool *p)
{
	pthread_mutex_lock(&p->lock);
	p->kicked = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void pool_end_cell(struct pool *p, const char *cell_id, const char *why)
{
	struct err err = ERR_INIT;
	struct standby *c;

	log_info("pool: standby cell %s: %s; terminating it", cell_id, why);
	if (cells_terminate(p->k->cells, cell_id, &err) < 0) {
		/* kept recorded (ending): the next pass tries again */
		log_error("pool: standby cell %s: %s", cell_id, err.msg);
		pthread_mutex_lock(&p->lock);
		c = standby_find(p, cell_id);
		if (c) {
			c->state = SB_READY;
			c->failed = true;
		}
		pthread_mutex_unlock(&p->lock);
		return;
	}
	pthread_mutex_lock(&p->lock);
	c = standby_find(p, cell_id);
	if (c)
		pool_standby_drop(p, c);
	pool_record_delete(p, cell_id);
	pthread_mutex_unlock(&p->lock);
	cellsync_kick(p->k->cellsync);
}

bool pool_is_standby_id(const char *cell_id)
{
	return cell_id && !strncmp(cell_id, POOL_ID_PREFIX, strlen(POOL_ID_PREFIX));
}

/* Where the provider's launches put a cell, as far as a standby cell must match it: local
 * cells are all alike; an EC2 cell's subnets and security groups come from the config. */
static char *placement_of(const struct kiyot *k)
{
	char *s = xstrdup(k->provider.ops->name ? k->provider.ops->name : "cells");

	if (!k->provider.ops->remote_files)
		return s;
	for (size_t i = 0; i <= k->cfg.ec2.n_subnet_ids; i++) {
		const char *id = i < k->cfg.ec2.n_subnet_ids ? k->cfg.ec2.subnet_ids[i]
							     : k->cfg.ec2.subnet_id;
		char *n = id && id[0] ? xasprintf("%s%c%s", s, i ? ',' : ' ', id) : NULL;

		if (n) {
			free(s);
			s = n;
		}
	}
	for (size_t i = 0; i < k->cfg.ec2.n_security_group_ids; i++) {
		char *n = xasprintf("%s%c%s", s, i ? ',' : ' ', k->cfg.ec2.security_group_ids[i]);

		free(s);
		s = n;
	}
	return s;
}

/* The settings' instance types must be the catalog's. */
static int check_types(struct kiyot *k, const struct pool_config *c, struct err *err)
{
	struct catalog *cat = catalog_acquire(k->catalog);
	int ret = 0;

	for (size_t i = 0; i < c->n_shapes && !ret; i++)
		if (!catalog_find(cat, c->shapes[i].instance_type))
			ret = err_set(
				err, EINVAL,
				"pool.shapes[%zu].instanceType: \"%s\" is no instance type of "
				"region %s; name one of the catalog's, as sizing would pick",
				i, c->shapes[i].instance_type, catalog_region(cat));
	catalog_release(cat);
	return ret;
}

/* A sandbox record names cell_id: the claim that took it was recorded. */
static bool sandbox_owns(struct kiyot *k, const char *sandbox_id, const char *cell_id)
{
	struct sandbox *sb;
	bool owns;

	records_lock(k->records);
	sb = records_sandbox(k->records, sandbox_id);
	owns = sb && sb->cell_id && !strcmp(sb->cell_id, cell_id);
	records_unlock(k->records);
	return owns;
}

/* One record of the store, adopted: a ready cell resumed, a launch cut short left to the
 * refiller, a claim resolved. Whether it was. */
static bool adopt(struct pool *p, const char *cell_id, const char *text)
{
	json_t *o = json_loads(text, 0, NULL);
	const char *type = json_string_value(json_object_get(o, "instanceType"));
	const char *state = json_string_value(json_object_get(o, "state"));
	const char *ip = json_string_value(json_object_get(o, "ip"));
	const char *by = json_string_value(json_object_get(o, "claimedBy"));
	struct err err = ERR_INIT;
	struct standby *c;

	if (!type || !state || !ip || !by) {
		log_warn("pool: standby cell %s: its record is damaged; forgetting it (the garbage "
			 "collector ends the cell)",
			 cell_id);
		json_decref(o);
		pool_record_delete(p, cell_id);
		return false;
	}
	if (!strcmp(state, "claimed") && sandbox_owns(p->k, by, cell_id)) {
		log_info("pool: cell %s is sandbox %s's: it was claimed as kiyot stopped", cell_id,
			 by);
		json_decref(o);
		pool_record_delete(p, cell_id);
		return false;
	}
	pthread_mutex_lock(&p->lock);
	c = pool_standby_add(
		p, pool_shape_get(p, type, (int)json_integer_value(json_object_get(o, "spot"))),
		cell_id);
	c->created_ns = json_integer_value(json_object_get(o, "createdNs"));
	c->ready_ns = json_integer_value(json_object_get(o, "readyNs"));
	if (strcmp(state, "booting") != 0 && ip[0]) {
		c->state = SB_READY;
		c->ip = xstrdup(ip);
		if (!c->ready_ns)
			c->ready_ns = clock_now_ns();
	}
	if (!strcmp(state, "claimed")) {
		log_info("pool: cell %s goes back to the pool: sandbox %s claimed it but was never "
			 "recorded, and no pod ran in it",
			 cell_id, by);
		if (pool_record_save(p, c, &err) < 0)
			log_error("pool: %s", err.msg);
	}
	pthread_mutex_unlock(&p->lock);
	json_decref(o);
	if (c->ip) /* (c stays listed: no pass runs before pool_start) */
		cells_resume(p->k->cells, cell_id, c->ip);
	return true;
}

/* Orders the standby cells oldest first (the store lists them by id). */
static void sort_by_age(struct pool *p)
{
	struct standby *sorted = NULL;

	while (p->cells) {
		struct standby *c = p->cells, **pp = &sorted;

		p->cells = c->next;
		while (*pp && (*pp)->created_ns <= c->created_ns)
			pp = &(*pp)->next;
		c->next = *pp;
		*pp = c;
	}
	p->cells = sorted;
}

/* Adopts every standby cell the store records. */
static int adopt_all(struct pool *p, struct err *err)
{
	char **keys = NULL, **values = NULL;
	size_t n = 0, adopted = 0, ready = 0;

	if (store_list_meta(p->k->store, POOL_META_PREFIX, &keys, &values, &n, err) < 0)
		return err_wrap(err, "the pool's standby cells");
	for (size_t i = 0; i < n; i++) {
		adopted += adopt(p, keys[i] + strlen(POOL_META_PREFIX), values[i]);
		free(keys[i]);
		free(values[i]);
	}
	free(keys);
	free(values);
	sort_by_age(p);
	for (struct standby *c = p->cells; c; c = c->next)
		ready += c->state == SB_READY;
	if (adopted)
		log_info("pool: adopted %zu standby cells (%zu ready, %zu launching)", adopted,
			 ready, adopted - ready);
	return 0;
}

int pool_new(struct kiyot *k, struct pool **out, struct err *err)
{
	const struct pool_config *c = &k->cfg.pool;
	struct pool *p;
	pthread_condattr_t ca;

	*out = NULL;
	if (check_types(k, c, err) < 0)
		return err_wrap(err, "config");
	if (pool_config_enabled(c) && !k->provider.ops->standby_cells)
		return err_set(err, EINVAL,
			       "config: pool: the %s provider does not launch standby cells yet; "
			       "remove the pool section (or its counts and adaptive) to run on it",
			       k->provider.ops->name ? k->provider.ops->name : "cells'");
	p = xcalloc(1, sizeof(*p));
	p->k = k;
	p->cfg = *c; /* (the shapes stay k's, which outlive the pool) */
	if (!p->cfg.window_s)
		p->cfg.window_s = POOL_WINDOW_DEFAULT_S;
	if (!p->cfg.target_hit_percent)
		p->cfg.target_hit_percent = POOL_HIT_DEFAULT_PERCENT;
	p->placement = placement_of(k);
	p->remote = k->provider.ops->remote_files;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < c->n_shapes; i++)
		pool_shape_get(p, c->shapes[i].instance_type, c->shapes[i].spot)->count =
			c->shapes[i].count;
	pthread_mutex_unlock(&p->lock);
	if (adopt_all(p, err) < 0) {
		pool_free(p);
		return -err->code;
	}
	if (!pool_config_enabled(c) && !p->cells) {
		pool_free(p);
		return 0;
	}
	if (pool_config_enabled(c))
		log_info("pool: %zu fixed shapes%s%s%s", c->n_shapes,
			 c->adaptive ? ", adaptive" : "", c->cron_jobs ? ", CronJobs foreseen" : "",
			 p->cells ? "" : "; no standby cell yet");
	*out = p;
	return 0;
}

void pool_start(struct pool *p)
{
	int rc;

	if (!p)
		return;
	rc = pthread_create(&p->thread, NULL, pool_refill_main, p);
	if (rc)
		log_error("pool: no refiller thread (%s): standby cells are not refilled",
			  strerror(rc));
	else
		p->started = true;
	if (!p->cfg.cron_jobs)
		return;
	rc = pthread_create(&p->cron_thread, NULL, pool_cron_main, p);
	if (rc)
		log_error("pool: no CronJob lister thread (%s): CronJob pods start without cells "
			  "made ahead",
			  strerror(rc));
	else
		p->cron_started = true;
}

void pool_free(struct pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	__atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	if (p->started)
		pthread_join(p->thread, NULL);
	if (p->cron_started)
		pthread_join(p->cron_thread, NULL);
	pthread_mutex_lock(&p->lock);
	while (p->launches) /* they end at once: their cancel scope reads stop */
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
	while (p->cells)
		pool_standby_drop(p, p->cells);
	pool_cron_free_all(p);
	while (p->shapes) {
		struct shape *s = p->shapes;

		p->shapes = s->next;
		shape_free(s);
	}
	for (size_t i = 0; i < POOL_REBALANCED_MAX; i++)
		free(p->rebalanced[i]);
	free(p->placement);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

bool pool_owns(struct pool *p, const char *cell_id)
{
	bool owns;

	if (!p)
		return false;
	pthread_mutex_lock(&p->lock);
	owns = standby_find(p, cell_id) != NULL;
	pthread_mutex_unlock(&p->lock);
	return owns;
}

void pool_reconcile(struct pool *p, const struct cell_info *cells, size_t n)
{
	bool any = false;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	for (struct standby *c = p->cells; c; c = c->next) {
		const struct cell_info *found = NULL;

		if (c->state != SB_READY || c->failed)
			continue;
		for (size_t i = 0; i < n && !found; i++)
			if (!strcmp(cells[i].cell_id, c->cell_id))
				found = &cells[i];
		if (found && (found->phase == CELL_PENDING || found->phase == CELL_RUNNING))
			continue;
		log_warn("pool: standby cell %s %s; replacing it", c->cell_id,
			 found ? "failed" : "is gone (its provider no longer lists it)");
		c->failed = any = true;
	}
	if (any) {
		p->kicked = true;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
}

void pool_arrival(struct pool *p, const char *instance_type, int spot)
{
	struct shape *s;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	s = pool_shape_get(p, instance_type, spot);
	s->last_arrival_ns = clock_mono_ns();
	pool_arrivals_add(&s->arrivals, s->last_arrival_ns);
	p->kicked = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void pool_rebalance(struct pool *p, const char *cell_id, const char *instance_type, int spot)
{
	int64_t life_s;
	struct shape *s;

	if (!p || !p->cfg.rebalance_replacement || !cell_id || !instance_type)
		return;
	life_s = p->cfg.idle_lifetime_s ? p->cfg.idle_lifetime_s : POOL_ADAPTIVE_LIFETIME_DEFAULT_S;
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < POOL_REBALANCED_MAX; i++)
		if (p->rebalanced[i] && !strcmp(p->rebalanced[i], cell_id)) {
			pthread_mutex_unlock(&p->lock);
			return;
		}
	free(p->rebalanced[p->rebalanced_next]);
	p->rebalanced[p->rebalanced_next] = xstrdup(cell_id);
	p->rebalanced_next = (p->rebalanced_next + 1) % POOL_REBALANCED_MAX;
	s = pool_shape_get(p, instance_type, spot);
	if (s->n_replace < POOL_COUNT_MAX) {
		xgrow((void **)&s->replace_until, &s->cap_replace, s->n_replace + 1,
		      sizeof(*s->replace_until));
		s->replace_until[s->n_replace++] = clock_mono_ns() + life_s * 1000000000LL;
	}
	p->kicked = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	log_info("pool: cell %s may be interrupted: one more standby cell of %s (%s) for its pod's "
		 "next sandbox, kept for %lld s or until claimed",
		 cell_id, instance_type, spot ? "spot" : "on-demand", (long long)life_s);
}

void pool_images(struct pool *p, const char *instance_type, int spot, const char *const *refs,
		 size_t n)
{
	if (!p || !n)
		return;
	pthread_mutex_lock(&p->lock);
	pool_images_add(&pool_shape_get(p, instance_type, spot)->images, refs, n);
	pthread_mutex_unlock(&p->lock);
}

void pool_launch_time(struct pool *p, const char *instance_type, int spot, double seconds)
{
	struct shape *s;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	s = pool_shape_get(p, instance_type, spot);
	s->ready_s = s->ready_s > 0 ? 0.8 * s->ready_s + 0.2 * seconds : seconds;
	pthread_mutex_unlock(&p->lock);
}

/* Marks the oldest ready standby cell of key claimed by sandbox_id (recorded): its id and
 * address, or NULL. Needs the lock. */
static struct standby *take(struct pool *p, const char *key, const char *sandbox_id)
{
	struct standby *best = NULL;
	struct err err = ERR_INIT;

	for (struct standby *c = p->cells; c; c = c->next)
		if (c->state == SB_READY && !c->failed && !strcmp(c->shape->key, key) &&
		    (!best || c->ready_ns < best->ready_ns))
			best = c;
	if (!best)
		return NULL;
	best->state = SB_CLAIMED;
	best->claimed_by = xstrdup(sandbox_id);
	if (pool_record_save(p, best, &err) < 0) {
		/* unrecorded, a crash would give it back while the sandbox uses it */
		log_error("pool: %s; launching a cell instead", err.msg);
		best->state = SB_READY;
		free(best->claimed_by);
		best->claimed_by = NULL;
		return NULL;
	}
	/* served now, not at the commit: in between the refiller would see the shape short of
	 * a cell and launch another */
	replacement_served(best->shape);
	pool_cron_claimed(p, best->shape);
	return best;
}

/* The error of a claim that found no ready cell of the shape, saying what its cells were
 * doing instead (the caller launches a cell without logging it). */
static int no_standby(struct pool *p, const char *instance_type, int spot, struct err *err)
{
	int n[SB_ENDING + 1] = { 0 };
	struct shape *s;

	pthread_mutex_lock(&p->lock);
	s = pool_shape_get(p, instance_type, spot);
	for (struct standby *c = p->cells; c; c = c->next)
		if (c->shape == s)
			n[c->failed && c->state == SB_READY ? SB_ENDING : c->state]++;
	pthread_mutex_unlock(&p->lock);
	log_debug("pool: no ready standby cell of %s (%s) to claim: %d booting, %d claimed, %d "
		  "ending",
		  instance_type, spot ? "spot" : "on-demand", n[SB_BOOTING], n[SB_CLAIMED],
		  n[SB_ENDING]);
	return err_set(err, ENOENT, "no standby cell of %s (%s)", instance_type,
		       spot ? "spot" : "on-demand");
}

int pool_claim(struct pool *p, const char *instance_type, int spot, const char *sandbox_id,
	       char **cell_id, char **ip, struct err *err)
{
	if (!p)
		return err_set(err, ENOENT, "no pool");
	for (;;) {
		char *id, *addr;
		struct standby *c;
		struct err herr = ERR_INIT;

		pthread_mutex_lock(&p->lock);
		c = take(p, pool_shape_get(p, instance_type, spot)->key, sandbox_id);
		id = c ? xstrdup(c->cell_id) : NULL;
		addr = c ? xstrdup(c->ip) : NULL;
		pthread_mutex_unlock(&p->lock);
		if (!c)
			return no_standby(p, instance_type, spot, err);
		/* a cell whose agent died since is no use to the pod */
		if (cells_hello(p->k->cells, id, &herr) == 0) {
			*cell_id = id;
			*ip = addr;
			return 0;
		}
		log_warn("pool: standby cell %s does not answer (%s); taking another", id,
			 herr.msg);
		pthread_mutex_lock(&p->lock);
		c = standby_find(p, id);
		if (c)
			c->state = SB_ENDING;
		pthread_mutex_unlock(&p->lock);
		pool_end_cell(p, id, "its agent did not answer a claim");
		free(id);
		free(addr);
	}
}

void pool_claim_commit(struct pool *p, const char *cell_id, const char *what)
{
	struct standby *c;
	_cleanup_free_ char *desc = NULL;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	c = standby_find(p, cell_id);
	if (c) {
		desc = xasprintf("%s, %s, standby for %.1f s", c->shape->type,
				 c->shape->spot ? "spot" : "on-demand",
				 (double)(clock_now_ns() - c->ready_ns) / 1e9);
		pool_standby_drop(p, c);
	}
	pool_record_delete(p, cell_id);
	p->kicked = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	log_info("pool: claim: standby cell %s (%s) now runs %s", cell_id, desc ? desc : "?",
		 what ? what : "a pod");
}

void pool_claim_abort(struct pool *p, const char *cell_id)
{
	struct standby *c;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	c = standby_find(p, cell_id);
	if (c)
		c->state = SB_ENDING;
	pthread_mutex_unlock(&p->lock);
	pool_end_cell(p, cell_id, "its claim could not be recorded");
}

size_t pool_list(struct pool *p, struct pool_view **out)
{
	struct pool_view *v = NULL;
	size_t n = 0, cap = 0;

	*out = NULL;
	if (!p)
		return 0;
	pthread_mutex_lock(&p->lock);
	for (struct standby *c = p->cells; c; c = c->next) {
		if (c->state != SB_BOOTING && c->state != SB_READY)
			continue;
		xgrow((void **)&v, &cap, n + 1, sizeof(*v));
		v[n] = (struct pool_view){ xstrdup(c->cell_id),		xstrdup(c->shape->type),
					   xstrdup(c->ip ? c->ip : ""), c->shape->spot,
					   c->state == SB_READY,	c->created_ns };
		n++;
	}
	pthread_mutex_unlock(&p->lock);
	*out = v;
	return n;
}

void pool_views_free(struct pool_view *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].cell_id);
		free(v[i].instance_type);
		free(v[i].ip);
	}
	free(v);
}
