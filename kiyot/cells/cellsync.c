/*
 * cellsync.c: Cell objects in the API server following kiyot's cells (see cellsync.h).
 */
#include "cellsync.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sizing/catalog.h"
#include "codec.h"
#include "cells.h"
#include "state/crimap.h"
#include "daemon/kiyot.h"
#include "kube/kube.h"
#include "log.h"
#include "pool/pool.h"
#include "provision.h"
#include "xalloc.h"

#define CELLS_PATH "/apis/kiyot.elotl.co/v1/cells"
#define CONFLICT_RETRIES 5

struct cellsync {
	struct kiyot *k;
	struct kube_client *kc;
	char *node;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int kicked, stop, started, failing;
	json_t *instance_ids; /* cell id -> the provider's instance id (worker only) */
};

/* The Cell object a live sandbox should have (without price and instance id). */
static json_t *desired_cell(struct cellsync *cs, const struct sandbox *sb)
{
	const Runtime__V1__PodSandboxMetadata *md = sb->config->metadata;
	const char *lt = cri_map_get((void **)sb->config->annotations, sb->config->n_annotations,
				     ANN_LAUNCH_TYPE);

	return json_pack(
		"{s:s, s:s, s:{s:s, s:{s:s, s:s}}, s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s},"
		" s:{s:s, s:s}}",
		"apiVersion", "kiyot.elotl.co/v1", "kind", "Cell", "metadata", "name", sb->cell_id,
		"labels", CELLSYNC_LABEL_CLUSTER, cs->k->cluster_id, CELLSYNC_LABEL_NODE, cs->node,
		"spec", "podName", md->name, "podNamespace", md->namespace_, "podUid", md->uid,
		"node", cs->node, "launchType",
		lt && strcmp(lt, "spot") == 0 ? "spot" : "on-demand", "instanceType",
		sb->instance_type, "instanceId", "", "ip", sb->state == SANDBOX_READY ? sb->ip : "",
		"status", "phase", sb->state == SANDBOX_READY ? "Running" : "Pending",
		"sizingReason", sb->sizing_reason ? sb->sizing_reason : "");
}

/* The Cell object of a standby cell of the pool: no pod; phase Standby once it serves,
 * Pending while it boots. */
static json_t *standby_cell(struct cellsync *cs, const struct pool_view *v)
{
	return json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s}}, s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s, "
			 "s:s}, s:{s:s, s:s}}",
			 "apiVersion", "kiyot.elotl.co/v1", "kind", "Cell", "metadata", "name",
			 v->cell_id, "labels", CELLSYNC_LABEL_CLUSTER, cs->k->cluster_id,
			 CELLSYNC_LABEL_NODE, cs->node, "spec", "podName", "", "podNamespace", "",
			 "podUid", "", "node", cs->node, "launchType",
			 v->spot ? "spot" : "on-demand", "instanceType", v->instance_type,
			 "instanceId", "", "ip", v->ip, "status", "phase",
			 v->ready ? "Standby" : "Pending", "sizingReason",
			 "a standby cell of the warm pool (pool in kiyot's config)");
}

/* A Unix time in ns as RFC 3339 UTC, as the API shows times. */
static json_t *rfc3339(int64_t unix_ns)
{
	time_t t = (time_t)(unix_ns / 1000000000LL);
	struct tm tm;
	char buf[32];

	if (!gmtime_r(&t, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm))
		return json_string("");
	return json_string(buf);
}

/* Adds what the cell's agent said of its instance's interruption to its object's status
 * (status.interruption); a cell with a notice is in phase Interrupted. Whether it had any. */
static bool add_interruption(struct cellsync *cs, const char *name, json_t *obj)
{
	struct cell_interruption in;
	json_t *st = json_object_get(obj, "status"), *j;

	if (!cs->k->cells || cells_interruption(cs->k->cells, name, &in) < 0 ||
	    !(in.notice || in.rebalance))
		return false;
	j = json_object();
	if (in.notice) {
		json_object_set_new(j, "action", json_string(in.action));
		json_object_set_new(j, "time", rfc3339(in.notice_time_ns));
		json_object_set_new(st, "phase", json_string("Interrupted"));
	}
	if (in.rebalance)
		json_object_set_new(j, "rebalanceRecommendedAt", rfc3339(in.rebalance_time_ns));
	json_object_set_new(st, "interruption", j);
	return true;
}

/* The cells that should have objects, by name: those launching or running a ready sandbox,
 * and those whose sandbox an interruption made not ready, until the kubelet stops it. */
static json_t *desired_cells(struct cellsync *cs)
{
	struct kiyot *k = cs->k;
	json_t *want = json_object(), *interrupted = json_object(), *obj;
	struct sandbox **v;
	const char *name;
	size_t n;

	records_lock(k->records);
	n = records_sandboxes(k->records, &v);
	for (size_t i = 0; i < n; i++) {
		const struct sandbox *sb = v[i];

		if (!sb->cell_id[0])
			continue;
		json_object_set_new(sb->state == SANDBOX_READY || sb->phase == SANDBOX_LAUNCHING
					    ? want
					    : interrupted,
				    sb->cell_id, desired_cell(cs, sb));
	}
	records_unlock(k->records);
	sandboxes_put(v, n);
	{
		struct pool_view *pv;
		size_t np = pool_list(k->pool, &pv);

		for (size_t i = 0; i < np; i++)
			if (!json_object_get(want, pv[i].cell_id))
				json_object_set_new(want, pv[i].cell_id, standby_cell(cs, &pv[i]));
		pool_views_free(pv, np);
	}
	/* (the cell manager's lock is never taken under the records' lock) */
	json_object_foreach (want, name, obj)
		add_interruption(cs, name, obj);
	json_object_foreach (interrupted, name, obj)
		if (add_interruption(cs, name, obj) &&
		    !strcmp(json_string_value(
				    json_object_get(json_object_get(obj, "status"), "phase")),
			    "Interrupted"))
			json_object_set(want, name, obj);
	json_decref(interrupted);
	return want;
}

/* Refreshes the instance ids from the provider when a running cell has none yet. */
static void refresh_instance_ids(struct cellsync *cs, json_t *want)
{
	struct cell_info *cells = NULL;
	struct err err = ERR_INIT;
	const char *name;
	json_t *obj;
	size_t n = 0;
	int need = 0;

	json_object_foreach (want, name, obj) {
		json_t *st = json_object_get(obj, "status");

		const char *phase = json_string_value(json_object_get(st, "phase"));

		if ((!strcmp(phase, "Running") || !strcmp(phase, "Standby")) &&
		    !json_object_get(cs->instance_ids, name))
			need = 1;
	}
	if (!need)
		return;
	if (cs->k->provider.ops->list(cs->k->provider.self, &cells, &n, &err) < 0) {
		log_warn("cells: instance ids unknown for now: %s", err.msg);
		return;
	}
	json_object_clear(cs->instance_ids);
	for (size_t i = 0; i < n; i++)
		if (cells[i].instance_id)
			json_object_set_new(cs->instance_ids, cells[i].cell_id,
					    json_string(cells[i].instance_id));
	cell_info_array_free(cells, n);
}

/* Fills instance ids and prices into the desired objects. */
static void complete(struct cellsync *cs, json_t *want)
{
	struct catalog *cat = cs->k->catalog ? catalog_acquire(cs->k->catalog) : NULL;
	const char *name;
	json_t *obj;

	refresh_instance_ids(cs, want);
	json_object_foreach (want, name, obj) {
		json_t *spec = json_object_get(obj, "spec");
		json_t *iid = json_object_get(cs->instance_ids, name);
		const char *type = json_string_value(json_object_get(spec, "instanceType"));
		int spot = strcmp(json_string_value(json_object_get(spec, "launchType")), "spot") ==
			   0;
		const struct catalog_type *t = cat && type ? catalog_find(cat, type) : NULL;
		double price = t ? (spot ? t->spot_price : t->price) : 0;

		if (iid)
			json_object_set(spec, "instanceId", iid);
		json_object_set_new(json_object_get(obj, "status"), "pricePerHour",
				    json_real((double)(int64_t)(price * 1e6 + 0.5) / 1e6));
	}
	catalog_release(cat);
}

/* JSON equality where numbers compare by value: an API server may hand 0.0 back as 0. */
static int values_equal(json_t *a, json_t *b)
{
	const char *key;
	json_t *v;

	if (json_is_number(a) && json_is_number(b)) {
		double d = json_number_value(a) - json_number_value(b);

		return d < 1e-9 && d > -1e-9;
	}
	if (!json_is_object(a) || !json_is_object(b))
		return json_equal(a, b);
	if (json_object_size(a) != json_object_size(b))
		return 0;
	json_object_foreach (a, key, v)
		if (!values_equal(v, json_object_get(b, key)))
			return 0;
	return 1;
}

/* Whether an existing object already says what want says. */
static int same(json_t *have, json_t *want)
{
	json_t *hl = json_object_get(json_object_get(have, "metadata"), "labels");
	json_t *wl = json_object_get(json_object_get(want, "metadata"), "labels");
	const char *key;
	json_t *v;

	json_object_foreach (wl, key, v)
		if (!json_equal(json_object_get(hl, key), v))
			return 0;
	return values_equal(json_object_get(have, "spec"), json_object_get(want, "spec")) &&
	       values_equal(json_object_get(have, "status"), json_object_get(want, "status"));
}

/* An API error for what, from an answer that was not the expected one. */
static int api_error(long status, json_t *resp, const char *what, struct err *err)
{
	if (status == 404 && strstr(what, "list"))
		return err_set(err, ENOENT,
			       "%s: the Cell CRD is not installed; kubectl apply -f "
			       "deploy/crd-cells.yaml",
			       what);
	if (status == 401 || status == 403)
		return err_set(err, EACCES,
			       "%s: %ld %s; check the credentials and deploy/rbac.yaml", what,
			       status, kube_status_message(resp, "refused"));
	return err_set(err, EIO, "%s: HTTP %ld: %s", what, status,
		       kube_status_message(resp, "unexpected answer"));
}

/* Replaces the object name with want, based on resourceVersion rv; re-reads on conflict. */
static int update_cell(struct cellsync *cs, const char *name, json_t *want, json_t *have,
		       struct err *err)
{
	_cleanup_free_ char *path = xasprintf(CELLS_PATH "/%s", name);
	json_t *cur = json_incref(have);
	int ret = 0;

	for (int i = 0; i < CONFLICT_RETRIES; i++) {
		json_t *body = json_deep_copy(want), *resp = NULL;
		json_t *md = json_object_get(body, "metadata");
		json_t *cmd = json_object_get(cur, "metadata");
		json_t *labels = json_deep_copy(json_object_get(cmd, "labels"));
		long status = 0;

		if (!json_is_object(labels)) {
			json_decref(labels);
			labels = json_object();
		}
		json_object_update(labels, json_object_get(md, "labels"));
		json_object_set_new(md, "labels", labels);
		json_object_set(md, "resourceVersion", json_object_get(cmd, "resourceVersion"));
		ret = kube_request(cs->kc, "PUT", path, NULL, body, &status, &resp, err);
		json_decref(body);
		json_decref(cur);
		cur = NULL;
		if (ret < 0)
			return ret;
		if (status == 200 || status == 201) {
			json_decref(resp);
			return 0;
		}
		if (status != 409) {
			ret = api_error(status, resp, "update cell", err);
			json_decref(resp);
			return err_wrap(err, "%s", name);
		}
		json_decref(resp);
		log_debug("cells: %s: conflict; reading it again", name);
		if (kube_request(cs->kc, "GET", path, NULL, NULL, &status, &cur, err) < 0)
			return -err->code;
		if (status != 200) {
			ret = api_error(status, cur, "get cell", err);
			json_decref(cur);
			return err_wrap(err, "%s", name);
		}
	}
	json_decref(cur);
	return err_set(err, EAGAIN, "cell %s: still conflicting after %d attempts", name,
		       CONFLICT_RETRIES);
}

static int create_cell(struct cellsync *cs, const char *name, json_t *want, struct err *err)
{
	json_t *resp = NULL;
	long status = 0;
	_cleanup_free_ char *path = NULL;
	int ret;

	if (kube_request(cs->kc, "POST", CELLS_PATH, NULL, want, &status, &resp, err) < 0)
		return -err->code;
	if (status == 201 || status == 200 || status != 409) {
		ret = status == 201 || status == 200 ? 0
						     : api_error(status, resp, "create cell", err);
		json_decref(resp);
		return ret < 0 ? err_wrap(err, "%s", name) : 0;
	}
	json_decref(resp);
	resp = NULL;
	/* made meanwhile (or a list was stale): update what is there */
	path = xasprintf(CELLS_PATH "/%s", name);
	if (kube_request(cs->kc, "GET", path, NULL, NULL, &status, &resp, err) < 0)
		return -err->code;
	ret = status == 200 ? update_cell(cs, name, want, resp, err)
			    : api_error(status, resp, "get cell", err);
	json_decref(resp);
	return ret;
}

static int delete_cell(struct cellsync *cs, const char *name, struct err *err)
{
	_cleanup_free_ char *path = xasprintf(CELLS_PATH "/%s", name);
	json_t *resp = NULL;
	long status = 0;
	int ret = 0;

	if (kube_request(cs->kc, "DELETE", path, NULL, NULL, &status, &resp, err) < 0)
		return -err->code;
	if (status != 200 && status != 202 && status != 404)
		ret = api_error(status, resp, "delete cell", err);
	json_decref(resp);
	return ret < 0 ? err_wrap(err, "%s", name) : 0;
}

/* The Cell objects of this node's kiyot, by name. */
static int list_cells(struct cellsync *cs, json_t **out, struct err *err)
{
	_cleanup_free_ char *sel_raw = xasprintf(CELLSYNC_LABEL_CLUSTER "=%s," CELLSYNC_LABEL_NODE
									"=%s",
						 cs->k->cluster_id, cs->node);
	_cleanup_free_ char *sel = pct_encode(sel_raw);
	_cleanup_free_ char *path = xasprintf(CELLS_PATH "?labelSelector=%s", sel);
	json_t *resp = NULL, *items, *item, *have;
	long status = 0;
	size_t i;

	if (kube_request(cs->kc, "GET", path, NULL, NULL, &status, &resp, err) < 0)
		return -err->code;
	items = json_object_get(resp, "items");
	if (status != 200 || !json_is_array(items)) {
		int ret = api_error(status, resp, "list cells", err);

		json_decref(resp);
		return ret;
	}
	have = json_object();
	json_array_foreach (items, i, item) {
		json_t *n = json_object_get(json_object_get(item, "metadata"), "name");

		if (json_is_string(n))
			json_object_set(have, json_string_value(n), item);
	}
	json_decref(resp);
	*out = have;
	return 0;
}

int cellsync_reconcile(struct cellsync *cs, struct err *err)
{
	json_t *want = desired_cells(cs), *have = NULL, *obj;
	const char *name;
	int ret = 0;

	complete(cs, want);
	if (list_cells(cs, &have, err) < 0) {
		json_decref(want);
		return -err->code;
	}
	json_object_foreach (have, name, obj) {
		if (json_object_get(want, name))
			continue;
		log_info("cells: deleting Cell %s (no such cell here)", name);
		if ((ret = delete_cell(cs, name, err)) < 0)
			goto out;
	}
	json_object_foreach (want, name, obj) {
		json_t *cur = json_object_get(have, name);

		if (cur && same(cur, obj))
			continue;
		log_debug("cells: %s Cell %s", cur ? "updating" : "creating", name);
		ret = cur ? update_cell(cs, name, obj, cur, err) : create_cell(cs, name, obj, err);
		if (ret < 0)
			goto out;
	}
out:
	json_decref(want);
	json_decref(have);
	return ret;
}

/* Waits until kicked, stopped, or delay_s passed. Returns 0 when stopping. */
static int wait_turn(struct cellsync *cs, int delay_s)
{
	struct timespec ts;
	int go;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += delay_s;
	pthread_mutex_lock(&cs->lock);
	while (!cs->stop && !cs->kicked)
		if (pthread_cond_timedwait(&cs->cond, &cs->lock, &ts) == ETIMEDOUT)
			break;
	cs->kicked = 0;
	go = !cs->stop;
	pthread_mutex_unlock(&cs->lock);
	return go;
}

static void *cellsync_thread(void *arg)
{
	struct cellsync *cs = arg;
	int delay = 0, backoff = 0;

	while (wait_turn(cs, delay)) {
		struct err err = ERR_INIT;

		if (cellsync_reconcile(cs, &err) < 0) {
			backoff = backoff ? backoff * 2 : 1;
			if (backoff > CELLSYNC_BACKOFF_MAX_S)
				backoff = CELLSYNC_BACKOFF_MAX_S;
			if (!cs->failing)
				log_warn("cells: cannot sync Cell objects (retrying): %s", err.msg);
			else
				log_debug("cells: sync still failing: %s", err.msg);
			cs->failing = 1;
			delay = backoff;
			continue;
		}
		if (cs->failing)
			log_info("cells: Cell objects in sync again");
		cs->failing = 0;
		backoff = 0;
		delay = CELLSYNC_RESYNC_S;
	}
	return NULL;
}

struct cellsync *cellsync_start(struct kiyot *k, struct kube_client *kc, const char *node)
{
	struct cellsync *cs = xcalloc(1, sizeof(*cs));
	pthread_condattr_t ca;

	cs->k = k;
	cs->kc = kc;
	cs->node = node ? xstrdup(node) : kiyot_node_name(&k->cfg);
	cs->instance_ids = json_object();
	pthread_mutex_init(&cs->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cs->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&cs->thread, NULL, cellsync_thread, cs) != 0)
		log_error("cells: no Cell sync thread: %s", strerror(errno));
	else
		cs->started = 1;
	log_info("cells: keeping Cell objects of node %s in %s", cs->node, kube_client_server(kc));
	return cs;
}

struct cellsync *cellsync_start_configured(struct kiyot *k)
{
	struct kube_client *kc;
	struct err err = ERR_INIT;

	if (kube_client_new(k->cfg.kubeconfig, &kc, &err) < 0) {
		if (err.code == ENOENT && !(k->cfg.kubeconfig && k->cfg.kubeconfig[0]))
			log_info("cells: no Cell objects: %s", err.msg);
		else
			log_error("cells: no Cell objects: %s", err.msg);
		return NULL;
	}
	return cellsync_start(k, kc, NULL);
}

void cellsync_kick(struct cellsync *cs)
{
	if (!cs)
		return;
	pthread_mutex_lock(&cs->lock);
	cs->kicked = 1;
	pthread_cond_signal(&cs->cond);
	pthread_mutex_unlock(&cs->lock);
}

void cellsync_stop(struct cellsync *cs)
{
	if (!cs)
		return;
	pthread_mutex_lock(&cs->lock);
	cs->stop = 1;
	pthread_cond_broadcast(&cs->cond);
	pthread_mutex_unlock(&cs->lock);
	if (cs->started)
		pthread_join(cs->thread, NULL);
	cs->started = 0;
}

void cellsync_free(struct cellsync *cs)
{
	if (!cs)
		return;
	cellsync_stop(cs);
	kube_client_free(cs->kc);
	json_decref(cs->instance_ids);
	free(cs->node);
	pthread_mutex_destroy(&cs->lock);
	pthread_cond_destroy(&cs->cond);
	free(cs);
}
