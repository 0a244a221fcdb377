/*
 * agent_client.c: the real agents' client, over gRPC (see agent_client.h).
 */
#include "agent_client.h"

#include <stdlib.h>

#include "rpc.h"
#include "rpc_loop.h"
#include "xalloc.h"

#define AGENT_METHOD(name) "/kiyot.cell.v1.CellAgent/" name

struct agent_conn {
	struct rpc_channel *ch;
};

struct agent_stream {
	struct rpc_stream *rs;
};

static int grpc_connect(void *self, const struct agent_tls *tls, const char *cell_id,
			const char *target, struct agent_conn **out, struct err *err)
{
	struct rpc_tls rt = { tls->ca, tls->cert, tls->key, cell_id };
	struct rpc_channel *ch = NULL;

	(void)self;
	if (rpc_channel_new_tls(target, &rt, &ch, err) < 0)
		return -err->code;
	*out = xmalloc(sizeof(**out));
	(*out)->ch = ch;
	return 0;
}

static void grpc_disconnect(void *self, struct agent_conn *c)
{
	(void)self;
	if (!c)
		return;
	rpc_channel_free(c->ch);
	free(c);
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

static int grpc_apply(void *self, struct agent_conn *c, const Kiyot__Cell__V1__ApplyRequest *req,
		      int64_t timeout_ms, Kiyot__Cell__V1__ApplyResponse **resp, struct err *err)
{
	(void)self;
	return call_for(c, AGENT_METHOD("Apply"), &req->base,
			&kiyot__cell__v1__apply_response__descriptor, timeout_ms, resp, err);
}

static int grpc_pull_image(void *self, struct agent_conn *c,
			   const Kiyot__Cell__V1__PullImageRequest *req, int64_t timeout_ms,
			   Kiyot__Cell__V1__PullImageResponse **resp, struct err *err)
{
	(void)self;
	return call_for(c, AGENT_METHOD("PullImage"), &req->base,
			&kiyot__cell__v1__pull_image_response__descriptor, timeout_ms, resp, err);
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
	return call_for(c, AGENT_METHOD("Stats"), &req.base,
			&kiyot__cell__v1__stats_response__descriptor, timeout_ms, resp, err);
}

static int grpc_write_volume(void *self, struct agent_conn *c,
			     const Kiyot__Cell__V1__WriteVolumeRequest *req, int64_t timeout_ms,
			     Kiyot__Cell__V1__WriteVolumeResponse **resp, struct err *err)
{
	(void)self;
	return call_for(c, AGENT_METHOD("WriteVolume"), &req->base,
			&kiyot__cell__v1__write_volume_response__descriptor, timeout_ms, resp, err);
}

/* The watch's callbacks, between the loop's message type and the agent client's. */
struct grpc_watch_arg {
	agent_watch_event_fn *on_event;
	agent_watch_end_fn *on_end;
	void *arg;
};

static void grpc_watch_msg(void *arg, const ProtobufCMessage *msg)
{
	struct grpc_watch_arg *a = arg;

	a->on_event(a->arg, (const Kiyot__Cell__V1__WatchEvent *)msg);
}

static void grpc_watch_end(void *arg, int ret, const struct err *err)
{
	struct grpc_watch_arg a = *(struct grpc_watch_arg *)arg;

	free(arg);
	a.on_end(a.arg, ret, err);
}

static int grpc_watch(void *self, struct agent_conn *c, const Kiyot__Cell__V1__WatchRequest *req,
		      agent_watch_event_fn *on_event, agent_watch_end_fn *on_end, void *arg,
		      struct agent_watch **out, struct err *err)
{
	struct grpc_watch_arg *a = xmalloc(sizeof(*a));
	struct rpc_watch *w = NULL;

	a->on_event = on_event;
	a->on_end = on_end;
	a->arg = arg;
	if (rpc_watch_open(self, c->ch, AGENT_METHOD("Watch"), &req->base,
			   &kiyot__cell__v1__watch_event__descriptor, grpc_watch_msg,
			   grpc_watch_end, a, &w, err) < 0) {
		free(a);
		return -err->code;
	}
	*out = (struct agent_watch *)w;
	return 0;
}

static void grpc_watch_cancel(void *self, struct agent_watch *w)
{
	(void)self;
	rpc_watch_cancel((struct rpc_watch *)w);
}

static int grpc_open_stream(void *self, struct agent_conn *c, const char *method,
			    const ProtobufCMessage *first,
			    const ProtobufCMessageDescriptor *out_desc, struct agent_stream **out,
			    struct err *err)
{
	_cleanup_free_ char *path = xasprintf(AGENT_METHOD("%s"), method);
	struct rpc_stream *rs = NULL;

	(void)self;
	if (rpc_bidi_open(c->ch, path, first, out_desc, 0, &rs, err) < 0)
		return -err->code;
	*out = xmalloc(sizeof(**out));
	(*out)->rs = rs;
	return 0;
}

static int grpc_send(void *self, struct agent_stream *s, const ProtobufCMessage *msg,
		     struct err *err)
{
	(void)self;
	return rpc_stream_send(s->rs, msg, err);
}

static int grpc_close_send(void *self, struct agent_stream *s, struct err *err)
{
	(void)self;
	return rpc_stream_close_send(s->rs, err);
}

static int grpc_next(void *self, struct agent_stream *s, ProtobufCMessage **msg, struct err *err)
{
	(void)self;
	return rpc_stream_next(s->rs, msg, err);
}

static void grpc_cancel(void *self, struct agent_stream *s)
{
	(void)self;
	rpc_stream_cancel(s->rs);
}

static void grpc_stream_free(void *self, struct agent_stream *s)
{
	(void)self;
	if (!s)
		return;
	rpc_stream_free(s->rs);
	free(s);
}

const struct agent_ops agent_grpc_ops = {
	.name = "grpc",
	.connect = grpc_connect,
	.disconnect = grpc_disconnect,
	.enroll = grpc_enroll,
	.hello = grpc_hello,
	.apply = grpc_apply,
	.pull_image = grpc_pull_image,
	.exec_sync = grpc_exec_sync,
	.stats = grpc_stats,
	.write_volume = grpc_write_volume,
	.watch = grpc_watch,
	.watch_cancel = grpc_watch_cancel,
	.open_stream = grpc_open_stream,
	.send = grpc_send,
	.close_send = grpc_close_send,
	.next = grpc_next,
	.cancel = grpc_cancel,
	.stream_free = grpc_stream_free,
};

int agent_grpc_new(int threads, struct agent_client *out, struct err *err)
{
	struct rpc_loop *l = NULL;

	if (rpc_loop_new(threads, &l, err) < 0)
		return err_wrap(err, "the agents' watch loop");
	*out = (struct agent_client){ &agent_grpc_ops, l };
	return 0;
}

void agent_grpc_free(struct agent_client *c)
{
	rpc_loop_free(c->self);
	c->self = NULL;
}
