/*
 * agent_client.c: the real agents' client (see agent_client.h): calls over gRPC, the Watch
 * over the cell feed (feed.h), on the port after the agent's gRPC one. Exec, Attach and
 * PortForward are bidirectional gRPC calls read and written from a completion-queue loop of
 * GRPC_LOOP_THREADS threads (rpc_loop.h), however many are open.
 *
 * An agent older than the cell feed (an EC2 cell booted from an earlier image) serves the
 * same Watch over gRPC only. Its feed is refused; after two refusals in a row a Watch asks the
 * agent for Hello over gRPC, and if it answers, that cell is watched over gRPC (on a
 * completion-queue loop made the first time one is needed, rpc_loop.h) until that Watch ends;
 * the next one tries the feed again.
 */
#include "agent_client.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "feed.h"
#include "clock.h"
#include "log.h"
#include "metrics/metrics.h"
#include "netaddr.h"
#include "pki.h"
#include "rpc.h"
#include "rpc_loop.h"
#include "xalloc.h"

#define AGENT_METHOD(name) "/kiyot.cell.v1.CellAgent/" name
/* The longest WatchEvent taken: a log chunk is at most 256 KiB. */
#define WATCH_MAX_FRAME (1u << 20)
/* Feeds refused in a row before a Watch asks whether the agent serves gRPC only. */
#define FEED_REFUSALS_BEFORE_PROBE 2
#define PROBE_TIMEOUT_MS 2000
#define GRPC_LOOP_THREADS 2

/* The implementation's state: the loop that reads the feeds, and the TLS context for them,
 * made for the certificate kiyot presents (the same for every cell; a new one if it
 * changes). */
struct agent_real {
	struct feed_loop *feeds;
	pthread_mutex_t lock;
	SSL_CTX *ctx;
	char *ctx_cert;
	/* the completion-queue loop of streams (Exec, Attach, PortForward) and of Watches over
	 * gRPC; made when first needed */
	struct rpc_loop *grpc_calls;
	/* the Watches open, for the feeds' figures (metrics.h), and their collector */
	struct watch_arg *watches;
	struct metrics_collector *figures;
};

struct agent_conn {
	struct rpc_channel *ch;
	SSL_CTX *ctx;	   /* a reference */
	char *feed_target; /* "ip:port" of the feed */
	char *cell_id;
	/* Feeds refused in a row, and whether the agent was found to serve its Watch over gRPC
	 * only (guarded by the implementation's lock; a connection outlives its Watches). */
	int feed_refused;
	bool grpc_only, told;
};

/* The feed's TLS context for tls, a new reference. */
static int feed_ctx(struct agent_real *r, const struct agent_tls *tls, SSL_CTX **out,
		    struct err *err)
{
	int ret = 0;

	pthread_mutex_lock(&r->lock);
	if (!r->ctx || strcmp(r->ctx_cert, tls->cert) != 0) {
		SSL_CTX *ctx = NULL;

		ret = pki_tls_ctx(tls->ca, tls->cert, tls->key, PKI_CLIENT, NULL, &ctx, err);
		if (ret == 0) {
			SSL_CTX_free(r->ctx);
			free(r->ctx_cert);
			r->ctx = ctx;
			r->ctx_cert = xstrdup(tls->cert);
		}
	}
	if (ret == 0 && SSL_CTX_up_ref(r->ctx))
		*out = r->ctx;
	else if (ret == 0)
		ret = err_set(err, ENOMEM, "the feed's TLS context");
	pthread_mutex_unlock(&r->lock);
	return ret;
}

static int grpc_connect(void *self, const struct agent_tls *tls, const char *cell_id,
			const char *target, struct agent_conn **out, struct err *err)
{
	struct rpc_tls rt = { tls->ca, tls->cert, tls->key, cell_id };
	struct agent_conn *c = xcalloc(1, sizeof(*c));

	if (feed_address(target, &c->feed_target, err) < 0 ||
	    feed_ctx(self, tls, &c->ctx, err) < 0 ||
	    rpc_channel_new_tls(target, &rt, &c->ch, err) < 0) {
		SSL_CTX_free(c->ctx);
		free(c->feed_target);
		free(c);
		return -err->code;
	}
	c->cell_id = xstrdup(cell_id);
	*out = c;
	return 0;
}

static void grpc_disconnect(void *self, struct agent_conn *c)
{
	(void)self;
	if (!c)
		return;
	rpc_channel_free(c->ch);
	SSL_CTX_free(c->ctx);
	free(c->feed_target);
	free(c->cell_id);
	free(c);
}

static bool real_listening(void *self, const char *target, int timeout_ms)
{
	(void)self;
	return netaddr_listening(target, timeout_ms);
}

/* A plaintext channel of its own for each Enroll: the cell serves nothing else over it. */
static int grpc_enroll(void *self, const char *target, const Kiyot__Cell__V1__EnrollRequest *req,
		       int64_t timeout_ms, Kiyot__Cell__V1__EnrollResponse **resp, struct err *err)
{
	struct rpc_channel *ch = NULL;
	int ret;

	(void)self;
	if (rpc_channel_new(target, &ch, err) < 0)
		return -err->code;
	ret = rpc_unary(ch, AGENT_METHOD("Enroll"), &req->base,
			&kiyot__cell__v1__enroll_response__descriptor, timeout_ms,
			(ProtobufCMessage **)resp, err);
	rpc_channel_free(ch);
	return ret;
}

static int grpc_hello(void *self, struct agent_conn *c, int64_t timeout_ms,
		      Kiyot__Cell__V1__HelloResponse **resp, struct err *err)
{
	Kiyot__Cell__V1__HelloRequest req = KIYOT__CELL__V1__HELLO_REQUEST__INIT;

	(void)self;
	return rpc_unary(c->ch, AGENT_METHOD("Hello"), &req.base,
			 &kiyot__cell__v1__hello_response__descriptor, timeout_ms,
			 (ProtobufCMessage **)resp, err);
}

/* A unary call on behalf of the CRI call this thread serves (rpc_current(), or none). */
static int call_for(struct agent_conn *c, const char *method, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *desc, int64_t timeout_ms, void *resp,
		    struct err *err)
{
	return rpc_unary_for(rpc_current(), c->ch, method, req, desc, timeout_ms,
			     (ProtobufCMessage **)resp, err);
}

/* call_for of a call that may be made twice: the agent's API asks for state or sets it whole
 * (Apply, PullImage, Stats, WriteVolume), so a connection that failed is tried once more. */
static int call_twice_for(struct agent_conn *c, const char *method, const ProtobufCMessage *req,
			  const ProtobufCMessageDescriptor *desc, int64_t timeout_ms, void *resp,
			  struct err *err)
{
	return rpc_unary_idempotent(rpc_current(), c->ch, method, req, desc, timeout_ms,
				    (ProtobufCMessage **)resp, err);
}

static int grpc_apply(void *self, struct agent_conn *c, const Kiyot__Cell__V1__ApplyRequest *req,
		      int64_t timeout_ms, Kiyot__Cell__V1__ApplyResponse **resp, struct err *err)
{
	(void)self;
	return call_twice_for(c, AGENT_METHOD("Apply"), &req->base,
			      &kiyot__cell__v1__apply_response__descriptor, timeout_ms, resp, err);
}

static int grpc_pull_image(void *self, struct agent_conn *c,
			   const Kiyot__Cell__V1__PullImageRequest *req, int64_t timeout_ms,
			   Kiyot__Cell__V1__PullImageResponse **resp, struct err *err)
{
	(void)self;
	return call_twice_for(c, AGENT_METHOD("PullImage"), &req->base,
			      &kiyot__cell__v1__pull_image_response__descriptor, timeout_ms, resp,
			      err);
}

static int grpc_exec_sync(void *self, struct agent_conn *c,
			  const Kiyot__Cell__V1__ExecSyncRequest *req, int64_t timeout_ms,
			  Kiyot__Cell__V1__ExecSyncResponse **resp, struct err *err)
{
	(void)self;
	return call_for(c, AGENT_METHOD("ExecSync"), &req->base,
			&kiyot__cell__v1__exec_sync_response__descriptor, timeout_ms, resp, err);
}

static int grpc_stats(void *self, struct agent_conn *c, int64_t timeout_ms,
		      Kiyot__Cell__V1__StatsResponse **resp, struct err *err)
{
	Kiyot__Cell__V1__StatsRequest req = KIYOT__CELL__V1__STATS_REQUEST__INIT;

	(void)self;
	return call_twice_for(c, AGENT_METHOD("Stats"), &req.base,
			      &kiyot__cell__v1__stats_response__descriptor, timeout_ms, resp, err);
}

static int grpc_write_volume(void *self, struct agent_conn *c,
			     const Kiyot__Cell__V1__WriteVolumeRequest *req, int64_t timeout_ms,
			     Kiyot__Cell__V1__WriteVolumeResponse **resp, struct err *err)
{
	(void)self;
	return call_twice_for(c, AGENT_METHOD("WriteVolume"), &req->base,
			      &kiyot__cell__v1__write_volume_response__descriptor, timeout_ms, resp,
			      err);
}

/* A Watch's callbacks, between the feed's (or the gRPC loop's) and the agent client's, and
 * what it teaches about the agent: a feed refused, or one that worked. */
struct watch_arg {
	struct agent_real *r;
	struct agent_conn *c;
	bool grpc, got;
	agent_watch_event_fn *on_event;
	agent_watch_end_fn *on_end;
	void *arg;
	/* in r->watches (r->lock); when its newest message came (clock_mono_ns, atomic; 0:
	 * none yet) */
	struct watch_arg *prev, *next;
	int64_t last_ns;
};

/* Lists a new Watch, or takes one off the list. Need r->lock. */
static void watch_list(struct agent_real *r, struct watch_arg *a)
{
	a->prev = NULL;
	a->next = r->watches;
	if (r->watches)
		r->watches->prev = a;
	r->watches = a;
}

static void watch_unlist(struct agent_real *r, struct watch_arg *a)
{
	if (a->prev)
		a->prev->next = a->next;
	else
		r->watches = a->next;
	if (a->next)
		a->next->prev = a->prev;
}

/* kiyot_cell_feed_lag_seconds and kiyot_cell_feeds_connected, at each scrape: a Watch counts
 * as connected from its first message to its end, and its lag is the age of its newest
 * message (a cell pushes its usage every few seconds, so a quiet feed is a stalled one). */
static void feeds_collect(void *ctx, struct metrics_writer *w)
{
	struct agent_real *r = ctx;
	int64_t now = clock_mono_ns(), oldest = 0;
	double connected = 0;

	pthread_mutex_lock(&r->lock);
	for (struct watch_arg *a = r->watches; a; a = a->next) {
		int64_t last = __atomic_load_n(&a->last_ns, __ATOMIC_RELAXED);

		if (!last)
			continue;
		connected++;
		if (now - last > oldest)
			oldest = now - last;
	}
	pthread_mutex_unlock(&r->lock);
	metrics_write_family(w, "kiyot_cell_feeds_connected",
			     "Cells' feeds (Watches) that delivered a message and have not ended.",
			     METRICS_GAUGE);
	metrics_write_sample(w, "kiyot_cell_feeds_connected", NULL, NULL, 0, connected);
	metrics_write_family(w, "kiyot_cell_feed_lag_seconds",
			     "The age of the newest message of the connected feed that has gone "
			     "longest without one.",
			     METRICS_GAUGE);
	metrics_write_sample(w, "kiyot_cell_feed_lag_seconds", NULL, NULL, 0, (double)oldest / 1e9);
}

static void watch_msg(void *arg, const ProtobufCMessage *msg)
{
	struct watch_arg *a = arg;

	a->got = true;
	__atomic_store_n(&a->last_ns, clock_mono_ns(), __ATOMIC_RELAXED);
	a->on_event(a->arg, (const Kiyot__Cell__V1__WatchEvent *)msg);
}

static void watch_end(void *arg, int ret, const struct err *err)
{
	struct watch_arg a = *(struct watch_arg *)arg;

	pthread_mutex_lock(&a.r->lock);
	watch_unlist(a.r, arg);
	pthread_mutex_unlock(&a.r->lock);
	free(arg);
	pthread_mutex_lock(&a.r->lock);
	if (a.grpc)
		a.c->grpc_only = false; /* the next Watch tries the feed again */
	else if (ret == -ECONNREFUSED && !a.got)
		a.c->feed_refused++;
	else
		a.c->feed_refused = 0;
	pthread_mutex_unlock(&a.r->lock);
	a.on_end(a.arg, ret, err);
}

/* Whether the Watch should go over gRPC: the agent refused its feed a few times in a row and
 * answers Hello over gRPC (an agent older than the feed). Runs on the caller's thread (the
 * restarter's), which may wait for the Hello. */
static bool watch_over_grpc(struct agent_real *r, struct agent_conn *c)
{
	Kiyot__Cell__V1__HelloResponse *resp = NULL;
	struct err err = ERR_INIT;
	bool probe, tell = false;

	pthread_mutex_lock(&r->lock);
	probe = !c->grpc_only && c->feed_refused >= FEED_REFUSALS_BEFORE_PROBE;
	pthread_mutex_unlock(&r->lock);
	if (probe && grpc_hello(r, c, PROBE_TIMEOUT_MS, &resp, &err) == 0) {
		protobuf_c_message_free_unpacked(&resp->base, NULL);
		pthread_mutex_lock(&r->lock);
		c->grpc_only = true;
		c->feed_refused = 0;
		tell = !c->told;
		c->told = true;
		pthread_mutex_unlock(&r->lock);
	}
	if (tell)
		log_warn("cell %s: its agent serves no cell feed (older than this kiyot): watching "
			 "it over gRPC, at ~170 KB more for as long as it runs",
			 c->cell_id);
	pthread_mutex_lock(&r->lock);
	probe = c->grpc_only;
	pthread_mutex_unlock(&r->lock);
	return probe;
}

static int grpc_loop(struct agent_real *r, struct rpc_loop **out, struct err *err)
{
	int ret = 0;

	pthread_mutex_lock(&r->lock);
	if (!r->grpc_calls)
		ret = rpc_loop_new(GRPC_LOOP_THREADS, &r->grpc_calls, err);
	*out = r->grpc_calls;
	pthread_mutex_unlock(&r->lock);
	return ret;
}

/* A Watch that could not be opened: off the list and freed. */
static void watch_forget(struct agent_real *r, struct watch_arg *a)
{
	pthread_mutex_lock(&r->lock);
	watch_unlist(r, a);
	pthread_mutex_unlock(&r->lock);
	free(a);
}

static int real_watch(void *self, struct agent_conn *c, const Kiyot__Cell__V1__WatchRequest *req,
		      agent_watch_event_fn *on_event, agent_watch_end_fn *on_end, void *arg,
		      struct agent_watch **out, struct err *err)
{
	struct agent_real *r = self;
	struct watch_arg *a = xmalloc(sizeof(*a));
	struct feed_open_args fa = {
		.ctx = c->ctx,
		.target = c->feed_target,
		.peer_name = c->cell_id,
		.request = &req->base,
		.msg_desc = &kiyot__cell__v1__watch_event__descriptor,
		.max_frame = WATCH_MAX_FRAME,
		.on_msg = watch_msg,
		.on_end = watch_end,
		.arg = a,
	};
	struct feed_watch *fw = NULL;
	struct rpc_watch *gw = NULL;
	struct rpc_loop *loop = NULL;

	*a = (struct watch_arg){ r, c, false, false, on_event, on_end, arg, NULL, NULL, 0 };
	pthread_mutex_lock(&r->lock);
	watch_list(r, a);
	pthread_mutex_unlock(&r->lock);
	if (watch_over_grpc(r, c)) {
		/* a handle of either kind: its low bit says which (both are malloc'd) */
		a->grpc = true;
		if (grpc_loop(r, &loop, err) < 0 ||
		    rpc_watch_open(loop, c->ch, AGENT_METHOD("Watch"), &req->base,
				   &kiyot__cell__v1__watch_event__descriptor, watch_msg, watch_end,
				   a, &gw, err) < 0) {
			watch_forget(r, a);
			return -err->code;
		}
		*out = (struct agent_watch *)((uintptr_t)gw | 1);
		return 0;
	}
	if (feed_open(r->feeds, &fa, &fw, err) < 0) {
		watch_forget(r, a);
		return -err->code;
	}
	*out = (struct agent_watch *)fw;
	return 0;
}

static void real_watch_cancel(void *self, struct agent_watch *w)
{
	uintptr_t h = (uintptr_t)w;

	(void)self;
	if (h & 1)
		rpc_watch_cancel((struct rpc_watch *)(h & ~(uintptr_t)1));
	else
		feed_cancel((struct feed_watch *)w);
}

/* Exec, Attach and PortForward: bidirectional calls on the client's completion-queue loop,
 * whose callbacks are the caller's own (the two tables say the same). */
/* A stream's handle is its rpc_bidi, as a Watch's is its feed. */
static struct rpc_bidi *bidi_of(struct agent_stream *s)
{
	return (struct rpc_bidi *)s;
}

static int grpc_open_stream(void *self, struct agent_conn *c, const char *method,
			    const ProtobufCMessage *first,
			    const ProtobufCMessageDescriptor *out_desc,
			    const struct agent_stream_cbs *cbs, void *arg,
			    struct agent_stream **out, struct err *err)
{
	_cleanup_free_ char *path = xasprintf(AGENT_METHOD("%s"), method);
	struct rpc_bidi_cbs bcbs = { cbs->on_msg, cbs->on_sent, cbs->on_end }; /* copied */
	struct rpc_loop *loop = NULL;
	struct rpc_bidi *b = NULL;

	if (grpc_loop(self, &loop, err) < 0 ||
	    rpc_bidi_open(loop, c->ch, path, first, out_desc, &bcbs, arg, &b, err) < 0)
		return -err->code;
	*out = (struct agent_stream *)b;
	return 0;
}

static void grpc_stream_read(void *self, struct agent_stream *s)
{
	(void)self;
	rpc_bidi_read(bidi_of(s));
}

static int grpc_stream_send(void *self, struct agent_stream *s, const ProtobufCMessage *msg,
			    struct err *err)
{
	(void)self;
	return rpc_bidi_send(bidi_of(s), msg, err);
}

static void grpc_stream_close_send(void *self, struct agent_stream *s)
{
	(void)self;
	rpc_bidi_close_send(bidi_of(s));
}

static void grpc_stream_cancel(void *self, struct agent_stream *s)
{
	(void)self;
	rpc_bidi_cancel(bidi_of(s));
}

static void grpc_stream_free(void *self, struct agent_stream *s)
{
	(void)self;
	rpc_bidi_free(bidi_of(s));
}

const struct agent_ops agent_grpc_ops = {
	.name = "grpc",
	.connect = grpc_connect,
	.disconnect = grpc_disconnect,
	.listening = real_listening,
	.enroll = grpc_enroll,
	.hello = grpc_hello,
	.apply = grpc_apply,
	.pull_image = grpc_pull_image,
	.exec_sync = grpc_exec_sync,
	.stats = grpc_stats,
	.write_volume = grpc_write_volume,
	.watch = real_watch,
	.watch_cancel = real_watch_cancel,
	.open_stream = grpc_open_stream,
	.stream_read = grpc_stream_read,
	.stream_send = grpc_stream_send,
	.stream_close_send = grpc_stream_close_send,
	.stream_cancel = grpc_stream_cancel,
	.stream_free = grpc_stream_free,
};

int agent_grpc_new(int threads, struct agent_client *out, struct err *err)
{
	struct agent_real *r = xcalloc(1, sizeof(*r));

	if (feed_loop_new(threads, &r->feeds, err) < 0) {
		free(r);
		return err_wrap(err, "the agents' feed loop");
	}
	pthread_mutex_init(&r->lock, NULL);
	r->figures = metrics_collector_add(metrics_default(), feeds_collect, r);
	*out = (struct agent_client){ &agent_grpc_ops, r };
	return 0;
}

void agent_grpc_free(struct agent_client *c)
{
	struct agent_real *r = c->self;

	if (!r)
		return;
	metrics_collector_remove(metrics_default(), r->figures);
	feed_loop_free(r->feeds);
	if (r->grpc_calls)
		rpc_loop_free(r->grpc_calls);
	SSL_CTX_free(r->ctx);
	free(r->ctx_cert);
	pthread_mutex_destroy(&r->lock);
	free(r);
	c->self = NULL;
}
