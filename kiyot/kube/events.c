/*
 * events.c: the recorder: a bounded queue filled by kube_eventf, cut per object by a token
 * bucket, and one worker that posts, or patches the count of an event it posted before.
 */
#include "events.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "kube.h"
#include "log.h"
#include "xalloc.h"

#define EVENTS_TRIES 3
#define EVENTS_STOP_GRACE_MS 1000

struct queued {
	char *kind, *api_version, *ns, *name, *uid;
	const char *type; /* "Normal" or "Warning" */
	char *reason, *message;
	int64_t wall_ns;
};

/* An event posted before: repeats patch its count. */
struct posted {
	char *key; /* object, type, reason and message */
	char *event_name, *event_ns;
	int count;
	uint64_t used; /* for eviction: the least recently used goes */
};

/* An involved object's token bucket. */
struct bucket {
	char *key;
	double tokens;
	int64_t refilled_ns; /* monotonic */
	uint64_t used;
};

struct kube_recorder {
	struct kube_client *kc;
	char *host;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* work queued, stop asked, or an event done */
	struct queued *q[KUBE_EVENTS_QUEUED];
	size_t head, n;
	uint64_t recorded, done; /* events queued / handled so far, for flush */
	uint64_t dropped;
	int stop;
	int64_t stop_deadline_ns; /* monotonic: the worker gives up what is left after it */
	struct bucket buckets[KUBE_EVENTS_REMEMBERED];
	size_t n_buckets;
	uint64_t tick;
	/* the worker's own */
	struct posted posted[KUBE_EVENTS_REMEMBERED];
	size_t n_posted;
};

static void queued_free(struct queued *e)
{
	if (!e)
		return;
	free(e->kind);
	free(e->api_version);
	free(e->ns);
	free(e->name);
	free(e->uid);
	free(e->reason);
	free(e->message);
	free(e);
}

static char *object_key(const char *kind, const char *ns, const char *name, const char *uid)
{
	return xasprintf("%s\x1f%s\x1f%s\x1f%s", kind, ns, name, uid);
}

/* Whether the object may have one more event now (takes a token). Under r->lock. */
static bool bucket_take(struct kube_recorder *r, const char *key)
{
	int64_t now = clock_mono_ns();
	struct bucket *b = NULL;

	for (size_t i = 0; i < r->n_buckets && !b; i++)
		if (strcmp(r->buckets[i].key, key) == 0)
			b = &r->buckets[i];
	if (!b) {
		if (r->n_buckets < KUBE_EVENTS_REMEMBERED) {
			b = &r->buckets[r->n_buckets++];
		} else { /* the object heard of least recently gives its place */
			b = &r->buckets[0];
			for (size_t i = 1; i < r->n_buckets; i++)
				if (r->buckets[i].used < b->used)
					b = &r->buckets[i];
			free(b->key);
		}
		b->key = xstrdup(key);
		b->tokens = KUBE_EVENTS_BURST;
		b->refilled_ns = now;
	}
	b->used = ++r->tick;
	b->tokens += (double)(now - b->refilled_ns) / (KUBE_EVENTS_REFILL_S * 1e9);
	if (b->tokens > KUBE_EVENTS_BURST)
		b->tokens = KUBE_EVENTS_BURST;
	b->refilled_ns = now;
	if (b->tokens < 1)
		return false;
	b->tokens -= 1;
	return true;
}

void kube_eventf(struct kube_recorder *r, const struct kube_ref *obj, enum kube_event_type type,
		 const char *reason, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kube_veventf(r, obj, type, reason, fmt, ap);
	va_end(ap);
}

void kube_veventf(struct kube_recorder *r, const struct kube_ref *obj, enum kube_event_type type,
		  const char *reason, const char *fmt, va_list ap)
{
	_cleanup_free_ char *key = NULL;
	struct queued *e;
	char msg[KUBE_EVENT_MESSAGE_MAX];
	int n;

	if (!r)
		return;
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n >= (int)sizeof(msg)) /* cut, and say so */
		memcpy(msg + sizeof(msg) - 4, "...", 4);
	e = xcalloc(1, sizeof(*e));
	e->kind = xstrdup(obj->kind);
	e->api_version = xstrdup(obj->api_version);
	e->ns = xstrdup(obj->namespace_ ? obj->namespace_ : "");
	e->name = xstrdup(obj->name);
	e->uid = xstrdup(obj->uid ? obj->uid : "");
	e->type = type == KUBE_EVENT_WARNING ? "Warning" : "Normal";
	e->reason = xstrdup(reason);
	e->message = xstrdup(msg);
	e->wall_ns = clock_now_ns();
	key = object_key(e->kind, e->ns, e->name, e->uid);
	pthread_mutex_lock(&r->lock);
	if (r->stop || r->n == KUBE_EVENTS_QUEUED || !bucket_take(r, key)) {
		r->dropped++;
		pthread_mutex_unlock(&r->lock);
		log_debug("events: dropped %s %s of %s %s/%s: %s", e->type, e->reason, e->kind,
			  e->ns, e->name, e->message);
		queued_free(e);
		return;
	}
	r->q[(r->head + r->n++) % KUBE_EVENTS_QUEUED] = e;
	r->recorded++;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* The worker's record of an event like e, or NULL. */
static struct posted *posted_find(struct kube_recorder *r, const char *key)
{
	for (size_t i = 0; i < r->n_posted; i++)
		if (strcmp(r->posted[i].key, key) == 0)
			return &r->posted[i];
	return NULL;
}

static struct posted *posted_add(struct kube_recorder *r, const char *key)
{
	struct posted *p;

	if (r->n_posted < KUBE_EVENTS_REMEMBERED) {
		p = &r->posted[r->n_posted++];
	} else {
		p = &r->posted[0];
		for (size_t i = 1; i < r->n_posted; i++)
			if (r->posted[i].used < p->used)
				p = &r->posted[i];
		free(p->key);
		free(p->event_name);
		free(p->event_ns);
	}
	memset(p, 0, sizeof(*p));
	p->key = xstrdup(key);
	return p;
}

/* Whether the worker should give up on what is left (stopping, past its grace). */
static bool giving_up(struct kube_recorder *r)
{
	bool late;

	pthread_mutex_lock(&r->lock);
	late = r->stop && clock_mono_ns() >= r->stop_deadline_ns;
	pthread_mutex_unlock(&r->lock);
	return late;
}

/* One request, tried again on no answer, 429 and 5xx. The status, or -errno. */
static long send_tries(struct kube_recorder *r, const char *method, const char *path,
		       const char *ctype, json_t *body, json_t **resp, struct err *err)
{
	long status = 0;

	for (int i = 0; i < EVENTS_TRIES; i++) {
		json_decref(*resp);
		*resp = NULL;
		if (i > 0) {
			struct timespec until = clock_deadline(CLOCK_MONOTONIC, 1000LL << (i - 1));

			pthread_mutex_lock(&r->lock);
			while (!r->stop &&
			       pthread_cond_timedwait(&r->cond, &r->lock, &until) != ETIMEDOUT)
				;
			pthread_mutex_unlock(&r->lock);
			if (giving_up(r))
				break;
		}
		if (kube_request(r->kc, method, path, ctype, body, &status, resp, err) < 0) {
			status = -err->code;
			continue;
		}
		if (status != 429 && status < 500)
			break;
		err_set(err, EIO, "%s %s: HTTP %ld: %s", method, path, status,
			kube_status_message(*resp, "no message"));
	}
	return status;
}

/* Posts e, or patches the count of the event like it posted before. */
static void post(struct kube_recorder *r, const struct queued *e)
{
	_cleanup_free_ char *key = xasprintf("%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", e->kind,
					     e->ns, e->name, e->uid, e->type, e->reason,
					     e->message);
	/* a cluster-scoped object's events live in "default" */
	const char *ns = e->ns[0] ? e->ns : "default";
	struct posted *p = posted_find(r, key);
	struct err err = ERR_INIT;
	json_t *body, *resp = NULL;
	char now[40];
	long status;

	clock_rfc3339nano(e->wall_ns, now, sizeof(now));
	now[19] = 'Z'; /* seconds, as the core/v1 timestamps are */
	now[20] = '\0';
	if (p) {
		_cleanup_free_ char *path =
			xasprintf("/api/v1/namespaces/%s/events/%s", p->event_ns, p->event_name);

		p->used = ++r->tick;
		body = json_pack("{s:i,s:s}", "count", p->count + 1, "lastTimestamp", now);
		status = send_tries(r, "PATCH", path, "application/strategic-merge-patch+json",
				    body, &resp, &err);
		json_decref(body);
		json_decref(resp);
		resp = NULL;
		if (status >= 200 && status < 300) {
			p->count++;
			return;
		}
		if (status != 404) { /* not an expired event: a failure */
			log_warn("events: cannot count %s %s of %s %s/%s again: %s", e->type,
				 e->reason, e->kind, e->ns, e->name,
				 status < 0 ? err.msg : "the API server refused the patch");
			return;
		}
		/* the API server let it expire (an hour, by default): a new one */
	} else {
		p = posted_add(r, key);
	}
	p->used = ++r->tick;
	free(p->event_name);
	free(p->event_ns);
	p->event_name = xasprintf("%s.%llx", e->name, (unsigned long long)e->wall_ns);
	p->event_ns = xstrdup(ns);
	p->count = 0;
	body = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s},s:s,s:s,s:s,s:i,s:s,s:s,"
			 "s:{s:s,s:s},s:s,s:s}",
			 "apiVersion", "v1", "kind", "Event", "metadata", "name", p->event_name,
			 "namespace", ns, "involvedObject", "kind", e->kind, "apiVersion",
			 e->api_version, "name", e->name, "namespace", e->ns, "type", e->type,
			 "reason", e->reason, "message", e->message, "count", 1, "firstTimestamp",
			 now, "lastTimestamp", now, "source", "component", "kiyot", "host", r->host,
			 "reportingComponent", "kiyot", "reportingInstance", r->host);
	if (!e->ns[0])
		json_object_del(json_object_get(body, "involvedObject"), "namespace");
	if (e->uid[0])
		json_object_set_new(json_object_get(body, "involvedObject"), "uid",
				    json_string(e->uid));
	{
		_cleanup_free_ char *path = xasprintf("/api/v1/namespaces/%s/events", ns);

		status = send_tries(r, "POST", path, NULL, body, &resp, &err);
	}
	if (status >= 200 && status < 300)
		p->count = 1;
	else
		log_warn("events: cannot record %s %s of %s %s/%s (%s): %s", e->type, e->reason,
			 e->kind, e->ns, e->name, e->message,
			 status < 0 ? err.msg : kube_status_message(resp, "refused"));
	json_decref(body);
	json_decref(resp);
}

static void *worker(void *arg)
{
	struct kube_recorder *r = arg;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		struct queued *e;

		while (!r->n && !r->stop)
			pthread_cond_wait(&r->cond, &r->lock);
		if (!r->n)
			break;
		e = r->q[r->head];
		r->head = (r->head + 1) % KUBE_EVENTS_QUEUED;
		r->n--;
		pthread_mutex_unlock(&r->lock);
		if (!giving_up(r))
			post(r, e);
		queued_free(e);
		pthread_mutex_lock(&r->lock);
		r->done++;
		pthread_cond_broadcast(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

struct kube_recorder *kube_recorder_start(struct kube_client *kc, const char *host)
{
	struct kube_recorder *r = xcalloc(1, sizeof(*r));
	pthread_condattr_t ca;

	r->kc = kc;
	r->host = xstrdup(host);
	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&r->thread, NULL, worker, r) != 0)
		abort();
	return r;
}

struct kube_recorder *kube_recorder_start_configured(const char *kubeconfig, const char *host)
{
	struct kube_client *kc;
	struct err err = ERR_INIT;

	if (kube_client_new(kubeconfig, &kc, &err) < 0) {
		if (err.code == ENOENT && !(kubeconfig && kubeconfig[0]))
			log_info("events: none recorded: %s", err.msg);
		else
			log_error("events: none recorded: %s", err.msg);
		return NULL;
	}
	return kube_recorder_start(kc, host);
}

void kube_recorder_flush(struct kube_recorder *r)
{
	uint64_t upto;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	upto = r->recorded;
	while (r->done < upto)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
}

uint64_t kube_recorder_dropped(struct kube_recorder *r)
{
	uint64_t n;

	if (!r)
		return 0;
	pthread_mutex_lock(&r->lock);
	n = r->dropped;
	pthread_mutex_unlock(&r->lock);
	return n;
}

void kube_recorder_free(struct kube_recorder *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = 1;
	r->stop_deadline_ns = clock_mono_ns() + EVENTS_STOP_GRACE_MS * 1000000LL;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	for (size_t i = 0; i < r->n_buckets; i++)
		free(r->buckets[i].key);
	for (size_t i = 0; i < r->n_posted; i++) {
		free(r->posted[i].key);
		free(r->posted[i].event_name);
		free(r->posted[i].event_ns);
	}
	kube_client_free(r->kc);
	free(r->host);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r);
}
