/*
 * pool_cron.c: standby cells ahead of CronJob runs (pool.cronJobs). A thread lists the
 * cluster's CronJobs every POOL_CRON_LIST_S (kube/cronjobs.h: those whose pods kiyot runs),
 * sizes each one's pod template as a RunPodSandbox of its pods would be sized
 * (cells/provision.h), and hands the pool their shapes, schedules and pod counts; the refiller
 * raises each shape's target by a run's pods from when the run comes within its lead (the
 * shape's time to ready and a margin: pool_cron_target) until they claimed or
 * POOL_CRON_GRACE_S passed, however the lead changes in between.
 */
#include "pool_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cells/provision.h"
#include "clock.h"
#include "kube/cronjobs.h"
#include "kube/kube.h"
#include "kube/podobject.h"
#include "log.h"
#include "daemon/kiyot.h"
#include "xalloc.h"

/* The target-runtime annotation's value that sends a pod to kiyot (cri/router.h's). */
#define CRON_TARGET "kiyot"

static int64_t now_s(void)
{
	return clock_now_ns() / 1000000000LL;
}

static void cron_free(struct pool_cron *c)
{
	free(c->key);
	free(c);
}

void pool_cron_free_all(struct pool *p)
{
	while (p->crons) {
		struct pool_cron *c = p->crons;

		p->crons = c->next;
		cron_free(c);
	}
}

void pool_cron_set(struct pool *p, const struct pool_cron_want *want, size_t n)
{
	struct pool_cron *kept = NULL, **tail = &kept;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < n; i++) {
		struct shape *s = pool_shape_get(p, want[i].instance_type, want[i].spot);
		struct pool_cron *c = NULL;

		for (struct pool_cron **pp = &p->crons; *pp; pp = &(*pp)->next)
			if (!strcmp((*pp)->key, want[i].key)) {
				c = *pp;
				*pp = c->next;
				break;
			}
		if (!c) {
			c = xcalloc(1, sizeof(*c));
			c->key = xstrdup(want[i].key);
			c->seen_s = now_s(); /* runs from now on */
		}
		if (c->shape && c->shape != s)
			c->n_runs = 0; /* its pods are of another shape now */
		c->shape = s;
		c->sched = *want[i].sched;
		c->next_s = 0; /* (made again at the next pass) */
		c->pods = want[i].pods;
		c->next = NULL;
		*tail = c;
		tail = &c->next;
	}
	pool_cron_free_all(p);
	p->crons = kept;
	p->kicked = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* Brings c's runs up to now, logging those that came into their lead. Needs the lock. */
static void runs_update(struct pool_cron *c, int64_t now, double lead_s)
{
	size_t came = pool_cron_advance(c->runs, &c->n_runs, &c->sched, c->pods, &c->seen_s, now,
					lead_s, POOL_CRON_GRACE_S);

	for (size_t i = c->n_runs - came; i < c->n_runs; i++) {
		unsigned sec = (unsigned)(c->runs[i].at_s % 86400);

		log_info("pool: pre-warming %d %s%s for CronJob %s at %02u:%02u:%02u UTC", c->pods,
			 c->shape->type, c->shape->spot ? " (spot)" : "", c->key, sec / 3600,
			 sec % 3600 / 60, sec % 60);
	}
}

/* The pods of the CronJobs (every shape's) whose next run is c's: runs at one time share the
 * pool's launches, so their cells are asked for earlier (pool_cron_lead). Needs the lock. */
static int crowd(struct pool *p, const struct pool_cron *c, int64_t now)
{
	int pods = 0;

	for (struct pool_cron *d = p->crons; d; d = d->next) {
		if (d->next_s < now && d->next_s != -1)
			d->next_s = cronsched_next(&d->sched, now - 1);
		if (d->next_s == c->next_s)
			pods += d->pods;
	}
	return pods;
}

int pool_cron_target(struct pool *p, struct shape *s, double ready_s)
{
	int64_t now = now_s();
	int extra = 0;

	for (struct pool_cron *c = p->crons; c; c = c->next) {
		double lead;

		if (c->shape != s)
			continue;
		if (c->next_s < now && c->next_s != -1)
			c->next_s = cronsched_next(&c->sched, now - 1);
		lead = pool_cron_lead(ready_s, crowd(p, c, now), POOL_LAUNCHES_MAX);

		runs_update(c, now, lead);
		extra += pool_cron_extra(c->runs, c->n_runs, now, POOL_CRON_GRACE_S);
	}
	return extra;
}

void pool_cron_claimed(struct pool *p, struct shape *s)
{
	int64_t now = now_s();

	for (struct pool_cron *c = p->crons; c; c = c->next)
		if (c->shape == s && pool_cron_claim(c->runs, c->n_runs, now, POOL_CRON_GRACE_S))
			return;
}

bool pool_cron_uses(const struct pool *p, const struct shape *s)
{
	for (const struct pool_cron *c = p->crons; c; c = c->next)
		if (c->shape == s)
			return true;
	return false;
}

/* A CronJob's template as sized, kept while its resourceVersion stays. */
struct sized {
	char *key, *version;
	char *type; /* NULL: it could not be sized (logged once) */
	int spot;
};

static void sized_free(struct sized *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].key);
		free(v[i].version);
		free(v[i].type);
	}
	free(v);
}

/* Sizes the pods of cj as a RunPodSandbox would: its annotations and its Pod object. */
static int size_cronjob(struct kiyot *k, const struct cronjob *cj, struct size_choice *out,
			struct err *err)
{
	Runtime__V1__PodSandboxConfig cfg = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
	Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
	json_t *ann = json_object_get(json_object_get(cj->pod, "metadata"), "annotations");
	size_t n = json_object_size(ann), i = 0;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry *e = xcalloc(n + 1, sizeof(*e));
	Runtime__V1__PodSandboxConfig__AnnotationsEntry **pe = xcalloc(n + 1, sizeof(*pe));
	_cleanup_free_ char *uid = xasprintf(CRONJOBS_UID_PREFIX "%s/%s", cj->ns, cj->name);
	struct podspec *pod = NULL;
	const char *key;
	json_t *v;
	int ret;

	json_object_foreach (ann, key, v) {
		if (!json_is_string(v))
			continue;
		e[i] = (Runtime__V1__PodSandboxConfig__AnnotationsEntry)
			RUNTIME__V1__POD_SANDBOX_CONFIG__ANNOTATIONS_ENTRY__INIT;
		e[i].key = (char *)key;
		e[i].value = (char *)json_string_value(v);
		pe[i] = &e[i];
		i++;
	}
	md.name = cj->name;
	md.namespace_ = cj->ns;
	md.uid = uid;
	cfg.metadata = &md;
	cfg.annotations = pe;
	cfg.n_annotations = i;
	ret = podobject_from_json(cj->pod, uid, &pod, err);
	if (ret == 0)
		ret = provision_size_pod(k, &cfg, pod, out, err);
	podspec_free(pod);
	free(pe);
	free(e);
	return ret;
}

/* The sizing of cj: from the last list's when its version is the same, else made (and a
 * failure logged once). */
static struct sized sized_for(struct kiyot *k, const struct cronjob *cj, const char *key,
			      struct sized *old, size_t n_old)
{
	struct size_choice ch = { 0 };
	struct err err = ERR_INIT;
	struct sized s;

	for (size_t i = 0; i < n_old; i++)
		if (old[i].key && !strcmp(old[i].key, key) &&
		    !strcmp(old[i].version, cj->version)) {
			s = old[i];
			old[i] = (struct sized){ 0 };
			return s;
		}
	s = (struct sized){ .key = xstrdup(key), .version = xstrdup(cj->version) };
	if (cj->problem) {
		log_warn("pool: CronJob %s: %s; its pods start without cells made ahead", key,
			 cj->problem);
		return s;
	}
	if (size_cronjob(k, cj, &ch, &err) < 0) {
		log_warn("pool: CronJob %s: sizing its pod template: %s; its pods start without "
			 "cells made ahead",
			 key, err.msg);
		return s;
	}
	s.type = steal_ptr(ch.instance_type);
	s.spot = ch.spot;
	size_choice_release(&ch);
	return s;
}

/* One list: the CronJobs' wants handed to the pool, their sizings kept in *cache. */
static int cron_list(struct pool *p, struct kube_client *kc, struct sized **cache, size_t *n_cache,
		     struct err *err)
{
	struct cronjob *v;
	struct sized *sz;
	struct pool_cron_want *want;
	size_t n, n_want = 0;

	if (cronjobs_list(kc, ANN_TARGET_RUNTIME, CRON_TARGET, &v, &n, err) < 0)
		return -err->code;
	sz = xcalloc(n + 1, sizeof(*sz));
	want = xcalloc(n + 1, sizeof(*want));
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *key = xasprintf("%s/%s", v[i].ns, v[i].name);

		sz[i] = sized_for(p->k, &v[i], key, *cache, *n_cache);
		if (sz[i].type)
			want[n_want++] = (struct pool_cron_want){ sz[i].key, sz[i].type, sz[i].spot,
								  &v[i].sched, v[i].pods };
	}
	pool_cron_set(p, want, n_want);
	free(want);
	cronjobs_free(v, n);
	sized_free(*cache, *n_cache);
	*cache = sz;
	*n_cache = n;
	return 0;
}

static bool cron_stopping(struct pool *p)
{
	return __atomic_load_n(&p->stop, __ATOMIC_RELAXED) != 0;
}

void *pool_cron_main(void *arg)
{
	struct pool *p = arg;
	struct kube_client *kc = NULL;
	struct sized *cache = NULL;
	size_t n_cache = 0;
	struct err err = ERR_INIT;
	char last[sizeof(err.msg)] = "";

	if (kube_client_new(p->k->cfg.kubeconfig, &kc, &err) < 0) {
		log_warn("pool: cronJobs: no API server to list CronJobs from (%s); CronJob pods "
			 "start without cells made ahead (set kubeconfig, or pool.cronJobs: false)",
			 err.msg);
		return NULL;
	}
	kube_client_set_timeouts(kc, 3000, 10000);
	pthread_mutex_lock(&p->lock);
	while (!cron_stopping(p)) {
		struct timespec ts;

		pthread_mutex_unlock(&p->lock);
		err = (struct err)ERR_INIT;
		if (cron_list(p, kc, &cache, &n_cache, &err) < 0) {
			if (strcmp(last, err.msg)) /* (once until it changes) */
				log_warn("pool: cronJobs: %s; trying again every %d s", err.msg,
					 POOL_CRON_LIST_S);
			snprintf(last, sizeof(last), "%s", err.msg);
		} else {
			last[0] = '\0';
		}
		pthread_mutex_lock(&p->lock);
		ts = clock_deadline(CLOCK_MONOTONIC, POOL_CRON_LIST_S * 1000);
		while (!cron_stopping(p) &&
		       pthread_cond_timedwait(&p->cond, &p->lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&p->lock);
	sized_free(cache, n_cache);
	kube_client_free(kc);
	return NULL;
}
