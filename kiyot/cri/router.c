/*
 * router.c: sends each CRI call to kiyot or to the fallback runtime (see router.h).
 *
 * Forwarded requests are re-encoded from the decoded message; protobuf-c keeps fields it does
 * not know, so the fallback sees what the kubelet sent. Forwarded answers are unpacked on the
 * heap and handed to the call (rpc_adopt), so a response may point into them.
 */
#include "router.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cells/cells.h"
#include "clock.h"
#include "cri_validate.h"
#include "events.h"
#include "log.h"
#include "xalloc.h"

#define RT_PATH(m) "/runtime.v1.RuntimeService/" m
#define IMG_PATH(m) "/runtime.v1.ImageService/" m

#define CALL_TIMEOUT_MS (2 * 60 * 1000)		  /* the kubelet's own default */
#define RUN_TIMEOUT_MS (4 * 60 * 1000)		  /* a sandbox may pull its pause image */
#define PULL_TIMEOUT_MS (30 * 60 * 1000)	  /* the kubelet sets no deadline on pulls */
#define EXEC_NO_TIMEOUT_MS (24LL * 3600 * 1000)	  /* ExecSync without a timeout */
#define WARN_EVERY_NS (30LL * 1000 * 1000 * 1000) /* partial-list warnings at most this often */
#define RELAY_RETRY_MS 1000			  /* reopening the fallback's event stream */
#define RELAY_NONE_RETRY_MS (5 * 60 * 1000) /* a fallback without events: an upgrade may add them */

struct router {
	char *endpoint;
	struct rpc_channel *ch;
	struct events *events; /* kiyot's event hub, where the fallback's events are relayed */
	pthread_t relay;
	pthread_mutex_t lock; /* guards what follows */
	pthread_cond_t wake;
	int64_t last_warn_ns;
	int stopping;
	struct rpc_stream *stream; /* the relay's open stream, so router_close can cancel it */
};

/* Copies the fallback's container events into kiyot's hub, so GetContainerEvents carries
 * both runtimes' events; reopens the stream while the fallback is away. */
static void *relay_main(void *arg)
{
	struct router *r = arg;
	Runtime__V1__GetEventsRequest req = RUNTIME__V1__GET_EVENTS_REQUEST__INIT;
	int told = 0;

	pthread_mutex_lock(&r->lock);
	while (!r->stopping) {
		struct rpc_stream *s = NULL;
		struct err err = ERR_INIT;
		ProtobufCMessage *msg;
		struct timespec until;
		int64_t t, wait_ms;

		pthread_mutex_unlock(&r->lock);
		if (rpc_stream_open(r->ch, RT_PATH("GetContainerEvents"), &req.base,
				    &runtime__v1__container_event_response__descriptor, 0, &s,
				    &err) == 0) {
			int live;

			pthread_mutex_lock(&r->lock);
			live = !r->stopping;
			r->stream = live ? s : NULL;
			pthread_mutex_unlock(&r->lock);
			while (live && rpc_stream_next(s, &msg, &err) == 1) {
				const Runtime__V1__ContainerEventResponse *ev = (const void *)msg;

				events_publish(r->events, ev->container_id,
					       ev->pod_sandbox_status ? ev->pod_sandbox_status->id
								      : "",
					       ev->container_event_type);
				protobuf_c_message_free_unpacked(msg, NULL);
			}
			pthread_mutex_lock(&r->lock);
			r->stream = NULL;
			pthread_mutex_unlock(&r->lock);
			rpc_stream_free(s);
		}
		wait_ms = RELAY_RETRY_MS;
		if (err.code == ENOSYS) {
			/* containerd before 1.7 has no event stream: the kubelet relists */
			if (!told)
				log_info("fallback runtime %s streams no container events (%s); "
					 "GetContainerEvents carries kiyot's only",
					 r->endpoint, err.msg);
			told = 1;
			wait_ms = RELAY_NONE_RETRY_MS;
		} else {
			log_msg(LOG_DEBUG, "fallback runtime %s: event stream ended: %s",
				r->endpoint, err.msg[0] ? err.msg : "closed");
		}
		pthread_mutex_lock(&r->lock);
		t = clock_now_ns() + wait_ms * 1000000LL;
		until.tv_sec = t / 1000000000;
		until.tv_nsec = t % 1000000000;
		if (!r->stopping)
			pthread_cond_timedwait(&r->wake, &r->lock, &until);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int router_open(struct kiyot *k, const char *endpoint, struct err *err)
{
	struct router *r;
	int ret;

	if (strncmp(endpoint, "unix:///", 8) != 0 || !endpoint[8])
		return err_set(err, EINVAL,
			       "\"%s\" is not a unix socket endpoint; give one such as "
			       "unix:///run/containerd/containerd.sock",
			       endpoint);
	r = xcalloc(1, sizeof(*r));
	r->endpoint = xstrdup(endpoint);
	r->events = k->events;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	ret = rpc_channel_new(endpoint, &r->ch, err);
	if (ret == 0 && (ret = -pthread_create(&r->relay, NULL, relay_main, r)) < 0) {
		err_set(err, -ret, "cannot start the event relay thread");
		rpc_channel_free(r->ch);
	}
	if (ret < 0) {
		free(r->endpoint);
		pthread_cond_destroy(&r->wake);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return ret;
	}
	k->router = r;
	log_info("pods without %s: %s run in the fallback runtime %s", ROUTER_ANNOTATION,
		 ROUTER_TARGET, endpoint);
	return 0;
}

void router_close(struct kiyot *k)
{
	struct router *r = k->router;

	if (!r)
		return;
	k->router = NULL;
	pthread_mutex_lock(&r->lock);
	r->stopping = 1;
	if (r->stream)
		rpc_stream_cancel(r->stream);
	pthread_cond_broadcast(&r->wake);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->relay, NULL);
	rpc_channel_free(r->ch);
	pthread_cond_destroy(&r->wake);
	pthread_mutex_destroy(&r->lock);
	free(r->endpoint);
	free(r);
}

int router_wants_kiyot(void **annotations, size_t n)
{
	const char *v = cri_map_get(annotations, n, ROUTER_ANNOTATION);

	return v && strcmp(v, ROUTER_TARGET) == 0;
}

/* Names the fallback in a failed call's error; an unreachable fallback says so first. */
static int fallback_err(const struct router *r, struct err *err)
{
	size_t n = strlen(r->endpoint);

	/* the client's text already starts with the endpoint: say it once */
	if (strncmp(err->msg, r->endpoint, n) == 0 && err->msg[n] == ' ')
		memmove(err->msg, err->msg + n + 1, strlen(err->msg + n + 1) + 1);
	if (err->code == ECONNREFUSED || err->code == EHOSTUNREACH || err->code == EAGAIN)
		return err_wrap(err, "fallback runtime %s: unavailable", r->endpoint);
	return err_wrap(err, "fallback runtime %s", r->endpoint);
}

/* Sends req to the fallback; its answer (of resp_desc) belongs to the call from now on. */
static int forward_msg(struct kiyot *k, struct rpc_call *call, const char *path,
		       const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
		       int64_t timeout_ms, ProtobufCMessage **out, struct err *err)
{
	ProtobufCMessage *got = NULL;

	if (rpc_unary(k->router->ch, path, req, resp_desc,
		      timeout_ms ? timeout_ms : CALL_TIMEOUT_MS, &got, err) < 0)
		return fallback_err(k->router, err);
	rpc_adopt(call, got);
	*out = got;
	return 0;
}

/* Answers the call with the fallback's answer to the same request. */
static int forward(struct kiyot *k, struct rpc_call *call, const char *path,
		   const ProtobufCMessage *req, ProtobufCMessage *resp, int64_t timeout_ms,
		   struct err *err)
{
	ProtobufCMessage *got;
	int ret = forward_msg(k, call, path, req, resp->descriptor, timeout_ms, &got, err);

	if (ret < 0)
		return ret;
	/* a shallow copy: what it points to lives in `got` until the answer is sent */
	memcpy(resp, got, resp->descriptor->sizeof_message);
	return 0;
}

/* Logs why a merged answer lacks the fallback's part, at most every WARN_EVERY_NS. */
static void warn_partial(struct router *r, const char *method, const struct err *err)
{
	int64_t now = clock_mono_ns();
	int say;

	pthread_mutex_lock(&r->lock);
	say = !r->last_warn_ns || now - r->last_warn_ns >= WARN_EVERY_NS;
	if (say)
		r->last_warn_ns = now;
	pthread_mutex_unlock(&r->lock);
	if (say)
		log_msg(LOG_WARN, "%s: answering with kiyot's items only: %s", method, err->msg);
	else
		log_msg(LOG_DEBUG, "%s: answering with kiyot's items only: %s", method, err->msg);
}

/* Appends src's pointers to the arena array *dst (merging two runtimes' list items). */
static void merge_items(struct rpc_call *call, void ***dst, size_t *n_dst, void **src, size_t n_src)
{
	void **all;

	if (!n_src)
		return;
	all = rpc_alloc(call, (*n_dst + n_src) * sizeof(*all));
	if (*n_dst)
		memcpy(all, *dst, *n_dst * sizeof(*all));
	memcpy(all + *n_dst, src, n_src * sizeof(*all));
	*dst = all;
	*n_dst += n_src;
}

/* 1 if the id is kiyot's (or absent: kiyot's handler then says what is missing), 0 if not; -1 on the thread that took the call
 * (RPC_INLINE) while someone holds the records' lock. */
static int kiyot_owns(struct kiyot *k, struct rpc_call *call, const char *id, bool container)
{
	int found;

	if (!id || !id[0])
		return 1;
	if (!cri_records_lock(k, call))
		return -1;
	found = container ? records_container(k->records, id) != NULL
			  : records_sandbox(k->records, id) != NULL;
	records_unlock(k->records);
	return found;
}

/* The id a request names (its container_id, else its pod_sandbox_id); NULL when none. */
static const char *request_id(const ProtobufCMessage *req, bool *container)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(req->descriptor, "container_id");

	*container = f != NULL;
	if (!f)
		f = protobuf_c_message_descriptor_get_field_by_name(req->descriptor,
								    "pod_sandbox_id");
	if (!f || f->type != PROTOBUF_C_TYPE_STRING || f->label == PROTOBUF_C_LABEL_REPEATED)
		return NULL;
	return *(char *const *)(const void *)((const char *)req + f->offset);
}

/* A method naming one sandbox or container: the runtime that owns the id answers. */
static int route_by_id(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		       ProtobufCMessage *resp, rpc_handler *own, const char *path, struct err *err)
{
	struct kiyot *k = svc;
	bool container;
	const char *id = request_id(req, &container);
	int ours;

	if (!k->router)
		return own(svc, call, req, resp, err);
	ours = kiyot_owns(k, call, id, container);
	if (ours < 0 || (!ours && rpc_inline(call))) /* the fallback's: asked from a worker */
		return RPC_NEEDS_WORKER;
	if (ours)
		return own(svc, call, req, resp, err);
	return forward(k, call, path, req, resp, 0, err);
}

int router_stop_pod_sandbox(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			    ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_stop_pod_sandbox, RT_PATH("StopPodSandbox"),
			   err);
}

int router_remove_pod_sandbox(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			      ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_remove_pod_sandbox,
			   RT_PATH("RemovePodSandbox"), err);
}

int router_pod_sandbox_status(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			      ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_pod_sandbox_status,
			   RT_PATH("PodSandboxStatus"), err);
}

int router_create_container(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			    ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_create_container, RT_PATH("CreateContainer"),
			   err);
}

int router_pod_sandbox_stats(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			     ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_pod_sandbox_stats, RT_PATH("PodSandboxStats"),
			   err);
}

int router_port_forward(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_port_forward, RT_PATH("PortForward"), err);
}

int router_start_container(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			   ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_start_container, RT_PATH("StartContainer"),
			   err);
}

int router_remove_container(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			    ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_remove_container, RT_PATH("RemoveContainer"),
			   err);
}

int router_container_status(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			    ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_container_status, RT_PATH("ContainerStatus"),
			   err);
}

int router_update_container_resources(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
				      ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_update_container_resources,
			   RT_PATH("UpdateContainerResources"), err);
}

int router_reopen_container_log(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
				ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_reopen_container_log,
			   RT_PATH("ReopenContainerLog"), err);
}

int router_exec(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_exec, RT_PATH("Exec"), err);
}

int router_attach(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		  ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_attach, RT_PATH("Attach"), err);
}

int router_container_stats(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			   ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_container_stats, RT_PATH("ContainerStats"),
			   err);
}

int router_checkpoint_container(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
				ProtobufCMessage *resp, struct err *err)
{
	return route_by_id(svc, call, req, resp, cri_unimplemented, RT_PATH("CheckpointContainer"),
			   err);
}

/* StopContainer waits out the grace period: the forwarded call's deadline allows for it. */
int router_stop_container(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			  ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__StopContainerRequest *r = (const void *)req;
	struct kiyot *k = svc;
	int64_t grace = r->timeout > 0 ? r->timeout : 0;

	if (!k->router || kiyot_owns(k, call, r->container_id, true) > 0)
		return cri_stop_container(svc, call, req, resp, err);
	return forward(k, call, RT_PATH("StopContainer"), req, resp, grace * 1000 + CALL_TIMEOUT_MS,
		       err);
}

/* ExecSync runs as long as its own timeout (none, or one past it: a day at most). */
int router_exec_sync(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		     ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ExecSyncRequest *r = (const void *)req;
	struct kiyot *k = svc;
	int64_t t = r->timeout > 0 && r->timeout < EXEC_NO_TIMEOUT_MS / 1000
			    ? r->timeout * 1000 + CALL_TIMEOUT_MS
			    : EXEC_NO_TIMEOUT_MS;

	if (!k->router || kiyot_owns(k, call, r->container_id, true) > 0)
		return cri_exec_sync(svc, call, req, resp, err);
	cells_exec_forgo(k->cells); /* removed while it waited for its turn in the cell */
	return forward(k, call, RT_PATH("ExecSync"), req, resp, t, err);
}

/* The annotated pod runs in a cell; any other goes to the fallback as the kubelet sent it. */
int router_run_pod_sandbox(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			   ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__RunPodSandboxRequest *r = (const void *)req;
	struct kiyot *k = svc;

	if (!k->router || !r->config ||
	    router_wants_kiyot((void **)r->config->annotations, r->config->n_annotations))
		return cri_run_pod_sandbox(svc, call, req, resp, err);
	return forward(k, call, RT_PATH("RunPodSandbox"), req, resp, RUN_TIMEOUT_MS, err);
}

/* A list method: kiyot's items, then the fallback's (both get the same filter). With the
 * fallback down the answer has kiyot's items only, so kiyot's pods keep being served. */
static int merge_list(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		      ProtobufCMessage *resp, rpc_handler *own, const char *path, const char *field,
		      struct err *err)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(resp->descriptor, field);
	ProtobufCMessage *fb = NULL;
	struct kiyot *k = svc;
	struct err ferr = ERR_INIT;
	int ret;

	if (k->router && rpc_inline(call)) /* the fallback's part: asked from a worker */
		return RPC_NEEDS_WORKER;
	ret = own(svc, call, req, resp, err);
	if (ret < 0 || ret == RPC_NEEDS_WORKER || !k->router)
		return ret;
	if (forward_msg(k, call, path, req, resp->descriptor, 0, &fb, &ferr) < 0) {
		warn_partial(k->router, path, &ferr);
		return 0;
	}
	merge_items(call, (void ***)(void *)((char *)resp + f->offset),
		    (size_t *)(void *)((char *)resp + f->quantifier_offset),
		    *(void ***)(void *)((char *)fb + f->offset),
		    *(size_t *)(void *)((char *)fb + f->quantifier_offset));
	return 0;
}

int router_list_pod_sandbox(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			    ProtobufCMessage *resp, struct err *err)
{
	return merge_list(svc, call, req, resp, cri_list_pod_sandbox, RT_PATH("ListPodSandbox"),
			  "items", err);
}

int router_list_containers(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			   ProtobufCMessage *resp, struct err *err)
{
	return merge_list(svc, call, req, resp, cri_list_containers, RT_PATH("ListContainers"),
			  "containers", err);
}

int router_list_container_stats(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
				ProtobufCMessage *resp, struct err *err)
{
	return merge_list(svc, call, req, resp, cri_list_container_stats,
			  RT_PATH("ListContainerStats"), "stats", err);
}

int router_list_pod_sandbox_stats(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
				  ProtobufCMessage *resp, struct err *err)
{
	return merge_list(svc, call, req, resp, cri_list_pod_sandbox_stats,
			  RT_PATH("ListPodSandboxStats"), "stats", err);
}

int router_list_images(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		       ProtobufCMessage *resp, struct err *err)
{
	return merge_list(svc, call, req, resp, cri_list_images, IMG_PATH("ListImages"), "images",
			  err);
}

int router_version(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		   ProtobufCMessage *resp, struct err *err)
{
	return cri_version(svc, call, req, resp, err);
}

/*
 * The cgroup driver is the fallback runtime's: the kubelet makes the cgroups its pods run in,
 * while cells keep their own. A fallback without RuntimeConfig (containerd 1.6) answers
 * UNIMPLEMENTED, and so does kiyot then, so the kubelet goes by its own --cgroup-driver as it
 * would with that runtime alone.
 */
int router_runtime_config(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			  ProtobufCMessage *resp, struct err *err)
{
	struct kiyot *k = svc;

	if (k->router)
		return forward(k, call, RT_PATH("RuntimeConfig"), req, resp, 0, err);
	return cri_runtime_config(svc, call, req, resp, err);
}

/* kiyot's events, with the fallback's relayed into the same hub (relay_main). */
int router_get_container_events(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
				ProtobufCMessage *resp, struct err *err)
{
	return cri_get_container_events(svc, call, req, resp, err);
}

/* The condition of kiyot's Status answer with this type, or NULL. */
static Runtime__V1__RuntimeCondition *condition_find(Runtime__V1__RuntimeStatus *st,
						     const char *type)
{
	for (size_t i = 0; i < st->n_conditions; i++)
		if (strcmp(st->conditions[i]->type, type) == 0)
			return st->conditions[i];
	return NULL;
}

/* Folds the fallback's Status into kiyot's: a condition both report is true only if both
 * say so (a false one keeps the fallback's reason, its message naming the fallback); others
 * are added; verbose info entries come with a "fallback." prefix. */
static void status_merge(struct kiyot *k, struct rpc_call *call, Runtime__V1__StatusResponse *out,
			 const Runtime__V1__StatusResponse *fb)
{
	Runtime__V1__RuntimeStatus *st = out->status;

	for (size_t i = 0; fb->status && i < fb->status->n_conditions; i++) {
		Runtime__V1__RuntimeCondition *f = fb->status->conditions[i];
		Runtime__V1__RuntimeCondition *c = condition_find(st, f->type);
		_cleanup_free_ char *msg = NULL;

		if (!c) {
			merge_items(call, (void ***)&st->conditions, &st->n_conditions,
				    (void **)&fb->status->conditions[i], 1);
			continue;
		}
		if (f->status || !c->status)
			continue;
		msg = xasprintf("fallback runtime %s: %s", k->router->endpoint,
				f->message && f->message[0] ? f->message : "not ready");
		c->status = 0;
		c->reason = f->reason && f->reason[0] ? f->reason : "FallbackRuntimeNotReady";
		c->message = rpc_strdup(call, msg);
	}
	for (size_t i = 0; i < fb->n_info; i++) {
		Runtime__V1__StatusResponse__InfoEntry *e =
			rpc_msg_new(call, &runtime__v1__status_response__info_entry__descriptor);
		_cleanup_free_ char *key = xasprintf("fallback.%s", fb->info[i]->key);

		e->key = rpc_strdup(call, key);
		e->value = fb->info[i]->value;
		merge_items(call, (void ***)&out->info, &out->n_info, (void **)&e, 1);
	}
}

int router_status(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		  ProtobufCMessage *resp, struct err *err)
{
	Runtime__V1__StatusResponse *out = (void *)resp;
	Runtime__V1__StatusResponse *fb = NULL;
	struct kiyot *k = svc;
	struct err ferr = ERR_INIT;
	int ret = cri_status(svc, call, req, resp, err);

	if (ret < 0 || !k->router)
		return ret;
	if (forward_msg(k, call, RT_PATH("Status"), req, resp->descriptor, 0,
			(ProtobufCMessage **)&fb, &ferr) < 0) {
		/* the node cannot run its other pods: say so in every condition */
		for (size_t i = 0; i < out->status->n_conditions; i++) {
			out->status->conditions[i]->status = 0;
			out->status->conditions[i]->reason = "FallbackRuntimeUnavailable";
			out->status->conditions[i]->message = rpc_strdup(call, ferr.msg);
		}
		return 0;
	}
	status_merge(k, call, out, fb);
	return 0;
}

/* Both runtimes learn the node's pod CIDR (the fallback configures its CNI from it). */
int router_update_runtime_config(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
				 ProtobufCMessage *resp, struct err *err)
{
	struct kiyot *k = svc;
	int ret = cri_update_runtime_config(svc, call, req, resp, err);

	if (ret < 0 || !k->router)
		return ret;
	return forward(k, call, RT_PATH("UpdateRuntimeConfig"), req, resp, 0, err);
}

/* Pulls for a Kiyot pod happen in its cell, whatever the image name; others (and pulls with
 * no pod) are the node's, in the fallback. */
int router_pull_image(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		      ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__PullImageRequest *r = (const void *)req;
	struct kiyot *k = svc;

	if (!k->router ||
	    (r->sandbox_config && router_wants_kiyot((void **)r->sandbox_config->annotations,
						     r->sandbox_config->n_annotations)) ||
	    (r->image &&
	     router_wants_kiyot((void **)r->image->annotations, r->image->n_annotations)))
		return cri_validate(req, err) < 0 ? -err->code
						  : cri_pull_image(svc, call, req, resp, err);
	return forward(k, call, IMG_PATH("PullImage"), req, resp, PULL_TIMEOUT_MS, err);
}

/* The kubelet copies the pod's annotations into the ImageSpec it asks about; without the
 * target-runtime annotation the question is about the node's images. */
int router_image_status(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ImageStatusRequest *r = (const void *)req;
	struct kiyot *k = svc;

	if (!k->router || (r->image && router_wants_kiyot((void **)r->image->annotations,
							  r->image->n_annotations)))
		return cri_image_status(svc, call, req, resp, err);
	if (rpc_inline(call)) /* the fallback's: asked from a worker */
		return RPC_NEEDS_WORKER;
	return forward(k, call, IMG_PATH("ImageStatus"), req, resp, 0, err);
}

/* An image may be known to both runtimes (the merged ListImages shows both): both forget it.
 * An image the fallback does not have is not an error. */
int router_remove_image(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			ProtobufCMessage *resp, struct err *err)
{
	struct kiyot *k = svc;
	int ret = cri_remove_image(svc, call, req, resp, err);

	if (ret < 0 || !k->router)
		return ret;
	ret = forward(k, call, IMG_PATH("RemoveImage"), req, resp, 0, err);
	if (ret == -ENOENT) {
		*err = (struct err)ERR_INIT;
		return 0;
	}
	return ret;
}

/* The node's image disk is the fallback's; with the fallback down, kiyot's answer. */
int router_image_fs_info(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			 ProtobufCMessage *resp, struct err *err)
{
	struct kiyot *k = svc;
	struct err ferr = ERR_INIT;

	if (!k->router || forward(k, call, IMG_PATH("ImageFsInfo"), req, resp, 0, &ferr) < 0) {
		if (k->router)
			warn_partial(k->router, IMG_PATH("ImageFsInfo"), &ferr);
		return cri_image_fs_info(svc, call, req, resp, err);
	}
	return 0;
}

/* Methods kiyot does not serve: the fallback's answer when there is one. */
int router_list_metric_descriptors(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
				   ProtobufCMessage *resp, struct err *err)
{
	struct kiyot *k = svc;

	if (!k->router)
		return cri_unimplemented(svc, call, req, resp, err);
	return forward(k, call, RT_PATH("ListMetricDescriptors"), req, resp, 0, err);
}

int router_list_pod_sandbox_metrics(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
				    ProtobufCMessage *resp, struct err *err)
{
	struct kiyot *k = svc;

	if (!k->router)
		return cri_unimplemented(svc, call, req, resp, err);
	return forward(k, call, RT_PATH("ListPodSandboxMetrics"), req, resp, 0, err);
}
