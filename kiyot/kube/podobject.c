/*
 * podobject.c: the Pod object of a sandbox from the API server (see podobject.h).
 */
#include "podobject.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "codec.h"
#include "image.h"
#include "kube.h"
#include "log.h"
#include "xalloc.h"

struct podobject_reader {
	pthread_mutex_t lock;
	pthread_cond_t freed; /* a client was given back */
	struct kube_client *clients[PODOBJECT_CLIENTS];
	bool busy[PODOBJECT_CLIENTS];
	size_t n_clients; /* 0: disabled */
	char *disabled;	  /* why, when disabled */
	long timeout_ms;
};

struct podobject_reader *podobject_reader_new(const char *kubeconfig, long timeout_ms)
{
	struct podobject_reader *r = xcalloc(1, sizeof(*r));
	pthread_condattr_t ca;
	struct err err = ERR_INIT;

	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->freed, &ca);
	pthread_condattr_destroy(&ca);
	r->timeout_ms = timeout_ms > 0 ? timeout_ms : PODOBJECT_TIMEOUT_MS;
	for (size_t i = 0; i < PODOBJECT_CLIENTS; i++) {
		if (kube_client_new(kubeconfig, &r->clients[i], &err) < 0)
			break;
		r->n_clients++;
	}
	if (r->n_clients == 0) {
		r->disabled = xasprintf("no API server to read Pod objects from: %s", err.msg);
		if (err.code == ENOENT)
			log_info("pods are sized from their sandbox config: %s", err.msg);
		else
			log_warn("pods are sized from their sandbox config, not their Pod objects: "
				 "%s",
				 err.msg);
	}
	return r;
}

void podobject_reader_free(struct podobject_reader *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_clients; i++)
		kube_client_free(r->clients[i]);
	pthread_cond_destroy(&r->freed);
	pthread_mutex_destroy(&r->lock);
	free(r->disabled);
	free(r);
}

int podobject_reader_enabled(const struct podobject_reader *r)
{
	return r->n_clients > 0;
}

/* A free client, waiting until deadline (monotonic ns) at most; -1 when none came free. */
static int take_client(struct podobject_reader *r, int64_t deadline)
{
	struct timespec ts = { (time_t)(deadline / 1000000000LL), (long)(deadline % 1000000000LL) };
	int got = -1;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		for (size_t i = 0; i < r->n_clients && got < 0; i++)
			if (!r->busy[i])
				got = (int)i;
		if (got >= 0 || pthread_cond_timedwait(&r->freed, &r->lock, &ts) == ETIMEDOUT)
			break;
	}
	if (got < 0) {
		for (size_t i = 0; i < r->n_clients && got < 0; i++)
			if (!r->busy[i])
				got = (int)i;
	}
	if (got >= 0)
		r->busy[got] = true;
	pthread_mutex_unlock(&r->lock);
	return got;
}

static void give_client(struct podobject_reader *r, int i)
{
	pthread_mutex_lock(&r->lock);
	r->busy[i] = false;
	pthread_cond_signal(&r->freed);
	pthread_mutex_unlock(&r->lock);
}

/* Copies the members of obj named in keys (all of them when obj is not an object, which the
 * validation then reports). */
static json_t *pick(const json_t *obj, const char *const *keys)
{
	json_t *out;

	if (!json_is_object(obj))
		return json_incref((json_t *)obj);
	out = json_object();
	for (; *keys; keys++) {
		json_t *v = json_object_get(obj, *keys);

		if (v)
			json_object_set(out, *keys, v);
	}
	return out;
}

/* A container's name, image and the resources sizing reads. */
static json_t *trim_container(const json_t *c)
{
	static const char *const keys[] = { "name", "image", "imagePullPolicy", "restartPolicy",
					    NULL };
	static const char *const sides[] = { "requests", "limits", NULL };
	static const char *const names[] = { "cpu", "memory", "nvidia.com/gpu", NULL };
	const json_t *res = json_object_get(c, "resources");
	json_t *out = pick(c, keys);

	if (json_is_object(c) && res) {
		json_t *tr = json_is_object(res) ? json_object() : json_incref((json_t *)res);

		for (size_t i = 0; json_is_object(res) && sides[i]; i++) {
			json_t *side = json_object_get(res, sides[i]);

			if (side)
				json_object_set_new(tr, sides[i], pick(side, names));
		}
		json_object_set_new(out, "resources", tr);
	}
	return out;
}

static json_t *trim_list(const json_t *list)
{
	json_t *out, *c;
	size_t i;

	if (!json_is_array(list))
		return json_incref((json_t *)list);
	out = json_array();
	json_array_foreach (list, i, c)
		json_array_append_new(out, trim_container(c));
	return out;
}

/* The part of a Pod object kiyot reads, in the same shape, so errors name the same fields. */
static json_t *trim_pod(const json_t *pod)
{
	static const char *const top[] = { "apiVersion", "kind", NULL };
	/* ownerReferences: the controller names the owner whose usage sizes a burst pod */
	static const char *const md[] = { "name", "namespace", "uid", "ownerReferences", NULL };
	const json_t *spec = json_object_get(pod, "spec"), *v;
	json_t *out = pick(pod, top);

	if ((v = json_object_get(pod, "metadata")))
		json_object_set_new(out, "metadata", pick(v, md));
	if (spec && !json_is_object(spec)) {
		json_object_set(out, "spec", (json_t *)spec);
	} else if (spec) {
		json_t *ts = json_object();

		if ((v = json_object_get(spec, "initContainers")))
			json_object_set_new(ts, "initContainers", trim_list(v));
		if ((v = json_object_get(spec, "containers")))
			json_object_set_new(ts, "containers", trim_list(v));
		if ((v = json_object_get(spec, "overhead"))) {
			static const char *const names[] = { "cpu", "memory", NULL };

			json_object_set_new(ts, "overhead", pick(v, names));
		}
		json_object_set_new(out, "spec", ts);
	}
	return out;
}

int podobject_from_json(const json_t *pod, const char *uid, struct podspec **out, struct err *err)
{
	struct podspec *p = NULL;
	json_t *t;
	int ret;

	if (!json_is_object(pod))
		return err_set(err, EINVAL, "the Pod object is not a JSON object");
	t = trim_pod(pod);
	ret = podspec_from_json(t, &p, err);
	json_decref(t);
	if (ret < 0)
		return err_wrap(err, "the Pod object");
	if (!p->uid || strcmp(p->uid, uid) != 0) {
		ret = err_set(err, ESTALE,
			      "the Pod object has metadata.uid \"%s\", the sandbox \"%s\": it is "
			      "another pod of the same name",
			      p->uid ? p->uid : "", uid);
		podspec_free(p);
		return ret;
	}
	*out = p;
	return 0;
}

/* What an answer other than 200 means. */
static int status_error(long status, json_t *resp, const char *ns, const char *name,
			struct err *err)
{
	const char *msg = kube_status_message(resp, "no message");

	if (status == 404)
		return err_set(err, ENOENT, "Pod %s/%s is not in the API server (404)", ns, name);
	if (status == 401 || status == 403)
		return err_set(err, EACCES,
			       "the API server refused to show Pod %s/%s (%ld: %s); kiyot's "
			       "account needs get on pods (deploy/rbac.yaml)",
			       ns, name, status, msg);
	return err_set(err, EPROTO, "reading Pod %s/%s: the API server answered %ld: %s", ns, name,
		       status, msg);
}

int podobject_get(struct podobject_reader *r, const char *ns, const char *name, const char *uid,
		  struct podspec **out, struct err *err)
{
	int64_t start = clock_mono_ns();
	int64_t deadline = start + (int64_t)r->timeout_ms * 1000000;
	_cleanup_free_ char *ens = NULL, *ename = NULL, *path = NULL;
	json_t *resp = NULL;
	long status = 0, left_ms;
	int i, ret;

	if (r->n_clients == 0)
		return err_set(err, ENOENT, "%s", r->disabled);
	i = take_client(r, deadline);
	if (i < 0)
		return err_set(err, ETIMEDOUT,
			       "all %zu connections to the API server stayed busy for %ld ms",
			       r->n_clients, r->timeout_ms);
	left_ms = (long)((deadline - clock_mono_ns()) / 1000000);
	if (left_ms < 1)
		left_ms = 1;
	ens = pct_encode(ns);
	ename = pct_encode(name);
	path = xasprintf("/api/v1/namespaces/%s/pods/%s", ens, ename);
	kube_client_set_timeouts(r->clients[i], left_ms, left_ms);
	ret = kube_request(r->clients[i], "GET", path, NULL, NULL, &status, &resp, err);
	give_client(r, i);
	if (ret < 0)
		return err_wrap(err, "no answer from the API server (kiyot waits %ld ms at most)",
				r->timeout_ms);
	if (status != 200)
		ret = status_error(status, resp, ns, name, err);
	else
		ret = podobject_from_json(resp, uid, out, err);
	json_decref(resp);
	return ret;
}

/* Adds the image of c to list unless it is there (by normalised reference) or out of
 * bounds. */
static void add_image(json_t *list, json_t *seen, size_t *bytes, size_t *dropped,
		      const struct podspec_container *c)
{
	struct image_ref ref = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *norm = NULL;
	size_t len = c->image ? strlen(c->image) : 0;

	if (!len || c->pull_policy == PODSPEC_PULL_NEVER)
		return;
	if (image_ref_parse(c->image, &ref, &err) < 0) {
		(*dropped)++;
		return;
	}
	norm = image_ref_string(&ref);
	image_ref_release(&ref);
	if (json_object_get(seen, norm))
		return;
	if (len > PODOBJECT_MAX_IMAGE || json_array_size(list) >= PODOBJECT_MAX_PREPULL ||
	    *bytes + len > PODOBJECT_MAX_PREPULL_BYTES) {
		(*dropped)++;
		return;
	}
	json_object_set_new(seen, norm, json_true());
	json_array_append_new(list, json_string(c->image));
	*bytes += len;
}

json_t *podobject_prepull(const struct podspec *p, size_t *n_dropped)
{
	json_t *list = json_array(), *seen = json_object();
	size_t bytes = 0, dropped = 0;

	for (size_t i = 0; i < p->n_init_containers; i++)
		add_image(list, seen, &bytes, &dropped, &p->init_containers[i]);
	for (size_t i = 0; i < p->n_containers; i++)
		add_image(list, seen, &bytes, &dropped, &p->containers[i]);
	json_decref(seen);
	if (n_dropped)
		*n_dropped = dropped;
	return list;
}
