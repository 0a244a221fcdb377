/*
 * rpc_call.c: a served call (see rpc.h for the model) from the moment rpc.c hands it to the
 * thread that owns it: the arena and adopted messages its response is built from, reading and
 * sending on its own pluck queue, the check for its client's going away, and its run from
 * request to status around the handler; also how errno values and gRPC statuses map onto each
 * other, for servers and clients alike.
 */
#include "rpc.h"

#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "cancel.h"
#include "clock.h"
#include "log.h"
#include "rpc_internal.h"
#include "rpc_server_internal.h"
#include "xalloc.h"

/* The call whose handler this thread runs (rpc_current). */
static _Thread_local struct rpc_call *current_call;

/* Per-call op tags (only compared, never dereferenced). */
enum {
	TAG_RECV = 1,
	TAG_CLOSE,
	TAG_SEND
};
#define TAG(n) ((void *)(uintptr_t)(n))
/* How long rpc_recv waits, at the end of the client's input, to tell a cancel from a close. */
#define RECV_CANCEL_GRACE_MS 100

void *rpc_alloc(struct rpc_call *c, size_t n)
{
	return arena_alloc(&c->arena, n);
}

char *rpc_strdup(struct rpc_call *c, const char *s)
{
	return arena_strdup(&c->arena, s);
}

struct arena *rpc_arena(struct rpc_call *c)
{
	return &c->arena;
}

char *rpc_strndup(struct rpc_call *c, const char *s, size_t n)
{
	return arena_strndup(&c->arena, s, n);
}

void *rpc_msg_new(struct rpc_call *c, const ProtobufCMessageDescriptor *desc)
{
	ProtobufCMessage *m = rpc_alloc(c, desc->sizeof_message);

	desc->message_init(m);
	return m;
}

void rpc_adopt(struct rpc_call *c, ProtobufCMessage *msg)
{
	c->adopted = xrealloc(c->adopted, (c->n_adopted + 1) * sizeof(*c->adopted));
	c->adopted[c->n_adopted++] = msg;
}

/* Frees what the call's response was built from: adopted messages and the arena. */
static void call_memory_free(struct rpc_call *c)
{
	for (size_t i = 0; i < c->n_adopted; i++)
		protobuf_c_message_free_unpacked(c->adopted[i], NULL);
	free(c->adopted);
	c->adopted = NULL;
	c->n_adopted = 0;
	arena_release(&c->arena);
}

void rpc_call_free(struct rpc_call *c)
{
	if (c->call)
		grpc_call_unref(c->call);
	/* every op of the call completes before its queue is gone: then what they filled */
	rpc_cq_drain_destroy(c->cq);
	if (c->bb)
		grpc_byte_buffer_destroy(c->bb);
	if (c->stage == STAGE_FINISHING && c->sent <= 0) {
		if (c->send_bb)
			grpc_byte_buffer_destroy(c->send_bb);
		grpc_slice_unref(c->send_details);
	}
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->md);
	if (c->req)
		protobuf_c_message_free_unpacked(c->req, NULL);
	call_memory_free(c);
	free(c);
}

/* A deadline ms from now. */
static gpr_timespec deadline_ms(int64_t ms)
{
	return gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

/* Waits for one op tag on the call's own queue; returns its success flag. */
static int call_wait(struct rpc_call *c, int tag)
{
	grpc_event ev = grpc_completion_queue_pluck(c->cq, TAG(tag),
						    gpr_inf_future(GPR_CLOCK_REALTIME), NULL);

	return ev.type == GRPC_OP_COMPLETE && ev.success;
}

struct rpc_call *rpc_current(void)
{
	return current_call;
}

grpc_call *rpc_call_core(struct rpc_call *c)
{
	return c->call;
}

int rpc_cancelled(struct rpc_call *c)
{
	gpr_timespec deadline = c->details.deadline;

	if (!c->close_done) {
		grpc_event ev = grpc_completion_queue_pluck(c->cq, TAG(TAG_CLOSE),
							    gpr_time_0(GPR_CLOCK_REALTIME), NULL);

		if (ev.type == GRPC_OP_COMPLETE)
			c->close_done = 1;
	}
	if (c->close_done && c->cancelled)
		return 1;
	/* core cancels a call at its deadline too, but only once a poller sees its timer: a
	 * loaded server would start a call whose client has already given up */
	return gpr_time_cmp(deadline, gpr_now(deadline.clock_type)) < 0;
}

/* Unpacks a received buffer; NULL buffer decodes as the empty message. */
ProtobufCMessage *rpc_unpack(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb,
			     size_t max, struct err *err)
{
	grpc_byte_buffer_reader rd;
	grpc_slice all;
	ProtobufCMessage *m;

	if (!bb)
		return protobuf_c_message_unpack(desc, NULL, 0, (const uint8_t *)"");
	if (max && grpc_byte_buffer_length(bb) > max) {
		err_set(err, EFBIG, "message of %zu bytes exceeds the %zu-byte limit",
			grpc_byte_buffer_length(bb), max);
		return NULL;
	}
	if (!grpc_byte_buffer_reader_init(&rd, bb)) {
		err_set(err, EINVAL, "unreadable message");
		return NULL;
	}
	all = grpc_byte_buffer_reader_readall(&rd);
	grpc_byte_buffer_reader_destroy(&rd);
	m = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(all),
				      GRPC_SLICE_START_PTR(all));
	grpc_slice_unref(all);
	if (!m)
		err_set(err, EINVAL, "malformed %s message", desc->name);
	return m;
}

int rpc_send(struct rpc_call *c, const ProtobufCMessage *msg, struct err *err)
{
	grpc_op ops[2];
	grpc_byte_buffer *bb = rpc_pack(msg);
	size_t n = 0;
	int ok;

	memset(ops, 0, sizeof(ops));
	if (!c->sent_initial) {
		ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
		c->sent_initial = 1;
	}
	ops[n].op = GRPC_OP_SEND_MESSAGE;
	ops[n++].data.send_message.send_message = bb;
	if (grpc_call_start_batch(c->call, ops, n, TAG(TAG_SEND), NULL) != GRPC_CALL_OK) {
		grpc_byte_buffer_destroy(bb);
		return err_set(err, ECANCELED, "stream closed");
	}
	ok = call_wait(c, TAG_SEND);
	grpc_byte_buffer_destroy(bb);
	if (!ok)
		return err_set(err, ECANCELED, "client went away");
	return 0;
}

void rpc_call_cancel(struct rpc_call *c)
{
	grpc_call_cancel_with_status(c->call, GRPC_STATUS_CANCELLED, "the stream was ended", NULL);
}

/* Receives the client's next message into *bb (NULL at the end of its input); -1 when the
 * call ended first. */
static int recv_one(struct rpc_call *c, grpc_byte_buffer **bb)
{
	grpc_op op;

	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = bb;
	if (grpc_call_start_batch(c->call, &op, 1, TAG(TAG_RECV), NULL) != GRPC_CALL_OK ||
	    !call_wait(c, TAG_RECV)) {
		if (*bb)
			grpc_byte_buffer_destroy(*bb);
		*bb = NULL;
		return -1;
	}
	return 0;
}

int rpc_recv(struct rpc_call *c, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg,
	     struct err *err)
{
	grpc_byte_buffer *bb = NULL;

	if (recv_one(c, &bb) < 0)
		return err_set(err, ECANCELED, "client went away");
	if (!bb) {
		/* the client's end of input, or its cancel, whose close lands right after */
		if (!c->close_done) {
			grpc_event ev = grpc_completion_queue_pluck(
				c->cq, TAG(TAG_CLOSE), deadline_ms(RECV_CANCEL_GRACE_MS), NULL);

			c->close_done = ev.type == GRPC_OP_COMPLETE;
		}
		if (c->close_done && c->cancelled)
			return err_set(err, ECANCELED, "client went away");
		return 0;
	}
	*msg = rpc_unpack(desc, bb, c->srv->max_message, err);
	grpc_byte_buffer_destroy(bb);
	return *msg ? 1 : -err->code;
}

/* Starts sending the answer: the response (if any) and the status, in one batch. The call is
 * FINISHING from then on: call_finish_wait sees it out. */
static void call_answer(struct rpc_call *c, const ProtobufCMessage *resp, int status,
			const char *msg)
{
	grpc_op ops[3];
	size_t n = 0;

	c->send_bb = resp ? rpc_pack(resp) : NULL;
	c->send_details = grpc_slice_from_copied_string(msg ? msg : "");
	c->status = status;
	c->stage = STAGE_FINISHING;
	memset(ops, 0, sizeof(ops));
	if (!c->sent_initial) {
		ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
		c->sent_initial = 1;
	}
	if (c->send_bb) {
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = c->send_bb;
	}
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = (grpc_status_code)status;
	ops[n++].data.send_status_from_server.status_details = &c->send_details;
	c->sent = grpc_call_start_batch(c->call, ops, n, TAG(TAG_SEND), NULL) == GRPC_CALL_OK ? 0
											      : -1;
}

/* The answer's batch is over (or never started): observe is told, its buffers go. */
static void call_sent(struct rpc_call *c)
{
	if (c->srv->observe)
		c->srv->observe(c->srv->observe_arg, c->method ? c->method->path : NULL, c->status,
				(double)(clock_mono_ns() - c->arrived_ns) / 1e9);
	if (c->send_bb)
		grpc_byte_buffer_destroy(c->send_bb);
	c->send_bb = NULL;
	grpc_slice_unref(c->send_details);
	c->sent = 1;
}

/* Waits, until `until`, for a FINISHING call's answer to go and for its close: 1 once both
 * came, 0 when until came first (the call stays FINISHING, to be waited for again). */
static int call_finish_wait(struct rpc_call *c, gpr_timespec until)
{
	if (c->sent <= 0) {
		if (c->sent == 0 &&
		    grpc_completion_queue_pluck(c->cq, TAG(TAG_SEND), until, NULL).type ==
			    GRPC_QUEUE_TIMEOUT)
			return 0;
		call_sent(c);
	}
	if (!c->close_done) {
		if (grpc_completion_queue_pluck(c->cq, TAG(TAG_CLOSE), until, NULL).type ==
		    GRPC_QUEUE_TIMEOUT)
			return 0;
		c->close_done = 1;
	}
	return 1;
}

/* Whether the call's TLS peer showed a verified certificate whose identity is name. */
static int peer_is(grpc_call *call, const char *name)
{
	grpc_auth_context *ctx = grpc_call_auth_context(call);
	grpc_auth_property_iterator it;
	const grpc_auth_property *p;
	int ok = 0;

	if (!ctx)
		return 0;
	if (grpc_auth_context_peer_is_authenticated(ctx)) {
		it = grpc_auth_context_peer_identity(ctx);
		while (!ok && (p = grpc_auth_property_iterator_next(&it)))
			ok = p->value_length == strlen(name) &&
			     memcmp(p->value, name, p->value_length) == 0;
	}
	grpc_auth_context_release(ctx);
	return ok;
}

/* Starts waiting for the call's end on the server side (what rpc_cancelled reads), once. */
static int call_watch_close(struct rpc_call *c)
{
	grpc_op op;

	if (c->watching)
		return 0;
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	op.data.recv_close_on_server.cancelled = &c->cancelled;
	if (grpc_call_start_batch(c->call, &op, 1, TAG(TAG_CLOSE), NULL) != GRPC_CALL_OK)
		return -1;
	c->watching = 1;
	return 0;
}

/* The cancel scope's check for the call this thread serves. */
static bool call_scope_cancelled(void *ctx)
{
	return rpc_cancelled(ctx) != 0;
}

/* Runs the handler with the call as this thread's current call, inside its cancel scope. */
static int call_handle(struct rpc_call *c, const ProtobufCMessage *req, ProtobufCMessage *resp,
		       struct err *err)
{
	struct cancel_scope scope;
	int ret;

	current_call = c;
	cancel_scope_enter(&scope, call_scope_cancelled, c);
	ret = c->method->handler(c->srv->svc, c, req, resp, err);
	cancel_scope_leave(&scope);
	current_call = NULL;
	return ret;
}

bool rpc_inline(struct rpc_call *c)
{
	return c->inline_run;
}

/* A call's first steps: watches for its close, checks its peer and method, and starts
 * receiving its request. 1 to go on (RECEIVING); 0 when it was answered or cannot be. */
static int call_begin(struct rpc_call *c)
{
	grpc_op op;

	if (call_watch_close(c) < 0)
		return 0;
	if (c->srv->peer_name && !peer_is(c->call, c->srv->peer_name)) {
		call_answer(c, NULL, GRPC_STATUS_UNAUTHENTICATED,
			    "this server takes calls from its own peer only (a client certificate "
			    "naming it)");
		return 0;
	}
	if (!c->method) {
		char *path = grpc_slice_to_c_string(c->details.method);
		char msg[512];

		log_debug("rpc: unknown method %s", path);
		snprintf(msg, sizeof(msg), "unknown method %s", path);
		gpr_free(path);
		call_answer(c, NULL, GRPC_STATUS_UNIMPLEMENTED, msg);
		return 0;
	}
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &c->bb;
	if (grpc_call_start_batch(c->call, &op, 1, TAG(TAG_RECV), NULL) != GRPC_CALL_OK) {
		call_answer(c, NULL, GRPC_STATUS_CANCELLED, "request not received");
		return 0;
	}
	c->stage = STAGE_RECEIVING;
	return 1;
}

/* Waits, until `until`, for the request being received: 1 once it is in (RECEIVED), -1 when
 * until came first, 0 when the call ended first (answered). */
static int call_receive(struct rpc_call *c, gpr_timespec until)
{
	grpc_event ev = grpc_completion_queue_pluck(c->cq, TAG(TAG_RECV), until, NULL);

	if (ev.type == GRPC_QUEUE_TIMEOUT)
		return -1;
	if (ev.type != GRPC_OP_COMPLETE || !ev.success) {
		if (c->bb)
			grpc_byte_buffer_destroy(c->bb);
		c->bb = NULL;
		call_answer(c, NULL, GRPC_STATUS_CANCELLED, "request not received");
		return 0;
	}
	c->stage = STAGE_RECEIVED;
	return 1;
}

/* Decodes the received request: 1 with it in c->req (READY), 0 when the call was answered
 * instead (malformed, or its client gone while it waited). */
static int call_decode(struct rpc_call *c)
{
	struct err err = ERR_INIT;
	ProtobufCMessage *req = rpc_unpack(c->method->req, c->bb, c->srv->max_message, &err);

	if (c->bb)
		grpc_byte_buffer_destroy(c->bb);
	c->bb = NULL;
	if (!req) {
		call_answer(c, NULL, GRPC_STATUS_INVALID_ARGUMENT, err.msg);
		return 0;
	}
	if (rpc_cancelled(c)) {
		/* its client left while it waited for a worker: nobody wants the work */
		protobuf_c_message_free_unpacked(req, NULL);
		call_answer(c, NULL, GRPC_STATUS_CANCELLED, "the client went away");
		return 0;
	}
	c->req = req;
	c->stage = STAGE_READY;
	return 1;
}

/* Runs the handler on c->req and starts the answer (FINISHING): 0, or RPC_PARKED or
 * RPC_NEEDS_WORKER with the request kept for the handler's next run. */
static int call_serve(struct rpc_call *c)
{
	const struct rpc_method *m = c->method;
	ProtobufCMessage *resp = NULL;
	struct err err = ERR_INIT;
	int ret;

	if (!(m->flags & (RPC_SERVER_STREAM | RPC_BIDI_STREAM)))
		resp = rpc_msg_new(c, m->resp);
	ret = call_handle(c, c->req, resp, &err);
	if (ret == RPC_PARKED || (ret == RPC_NEEDS_WORKER && c->inline_run))
		return ret;
	protobuf_c_message_free_unpacked(c->req, NULL);
	c->req = NULL;
	if (ret == RPC_NEEDS_WORKER) {
		log_error("rpc: %s: its handler asked for a worker on a worker", m->path);
		call_answer(c, NULL, GRPC_STATUS_INTERNAL, "the server's handler failed");
	} else if (ret < 0) {
		int code = err.code ? err.code : -ret;

		log_debug("rpc: %s: %s", m->path, err.msg);
		call_answer(c, NULL, rpc_status_from_errno(code), err.msg);
	} else {
		call_answer(c, resp, GRPC_STATUS_OK, NULL);
	}
	return 0;
}

int rpc_call_run(struct rpc_call *c)
{
	gpr_timespec never = gpr_inf_future(GPR_CLOCK_REALTIME);
	int ret;

	if (c->stage == STAGE_NEW && !call_begin(c))
		goto finish;
	if (c->stage == STAGE_RECEIVING && call_receive(c, never) == 0)
		goto finish;
	if (c->stage == STAGE_RECEIVED && !call_decode(c))
		goto finish;
	if (c->stage == STAGE_READY && c->handed && rpc_cancelled(c)) {
		/* its client left while it waited for a worker, as in call_decode */
		protobuf_c_message_free_unpacked(steal_ptr(c->req), NULL);
		call_answer(c, NULL, GRPC_STATUS_CANCELLED, "the client went away");
	}
	if (c->stage == STAGE_READY && (ret = call_serve(c)) != 0)
		return ret;
finish:
	if (c->stage == STAGE_FINISHING)
		call_finish_wait(c, never);
	return 0;
}

int rpc_call_run_inline(struct rpc_call *c)
{
	gpr_timespec now = gpr_time_0(GPR_CLOCK_REALTIME);
	int ret;

	if (c->stage == STAGE_NEW && !call_begin(c))
		goto finish;
	if (c->stage == STAGE_RECEIVING) {
		/* the message is read with the call's headers, but core hands it over through
		 * the call's own closures, often on the thread that read it: a moment's wait */
		ret = call_receive(c, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
						   gpr_time_from_millis(RPC_INLINE_RECV_WAIT_MS,
									GPR_TIMESPAN)));
		if (ret < 0)
			return RPC_NEEDS_WORKER;
		if (ret == 0)
			goto finish;
	}
	if (c->stage == STAGE_RECEIVED) {
		if (c->bb && grpc_byte_buffer_length(c->bb) > RPC_INLINE_MAX_REQUEST)
			return RPC_NEEDS_WORKER; /* decoding it would hold up the calls behind */
		if (!call_decode(c))
			goto finish;
	}
	if (c->stage == STAGE_READY) {
		c->inline_run = 1;
		ret = call_serve(c);
		c->inline_run = 0;
		c->handed = ret == RPC_NEEDS_WORKER;
		if (ret)
			return ret;
	}
finish:
	if (c->stage == STAGE_FINISHING && !call_finish_wait(c, now))
		return RPC_NEEDS_WORKER;
	return 0;
}

void rpc_call_refuse(struct rpc_call *c, int status, const char *msg)
{
	if (c->stage != STAGE_FINISHING && call_watch_close(c) == 0)
		call_answer(c, NULL, status, msg);
	if (c->stage == STAGE_FINISHING)
		call_finish_wait(c, gpr_inf_future(GPR_CLOCK_REALTIME));
	rpc_call_free(c);
}

int rpc_status_from_errno(int code)
{
	switch (code) {
	case 0:
		return GRPC_STATUS_OK;
	case ENOENT:
		return GRPC_STATUS_NOT_FOUND;
	case EINVAL:
		return GRPC_STATUS_INVALID_ARGUMENT;
	case EEXIST:
		return GRPC_STATUS_ALREADY_EXISTS;
	case ENOSYS:
		return GRPC_STATUS_UNIMPLEMENTED;
	case ETIMEDOUT:
		return GRPC_STATUS_DEADLINE_EXCEEDED;
	case ECONNREFUSED:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EAGAIN:
		return GRPC_STATUS_UNAVAILABLE;
	case EPERM:
	case EACCES:
		return GRPC_STATUS_PERMISSION_DENIED;
	case EFBIG:
	case ENOSPC:
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	case EBUSY:
	case EADDRINUSE:      /* a port another holds (a pod's hostPort) */
	case EXDEV:	      /* content that would escape where it must stay (a layer's entry) */
	case ELOOP:	      /* a loop in what was asked for (redirects, symbolic links) */
	case EPROTONOSUPPORT: /* what a cell's agent is too old to do */
		return GRPC_STATUS_FAILED_PRECONDITION;
	case EBADMSG: /* content that is not what it says (a digest mismatch) */
		return GRPC_STATUS_DATA_LOSS;
	case ECANCELED:
		return GRPC_STATUS_CANCELLED;
	default:
		return GRPC_STATUS_UNKNOWN;
	}
}

int rpc_errno_from_status(int status)
{
	switch (status) {
	case GRPC_STATUS_OK:
		return 0;
	case GRPC_STATUS_NOT_FOUND:
		return ENOENT;
	case GRPC_STATUS_INVALID_ARGUMENT:
		return EINVAL;
	case GRPC_STATUS_ALREADY_EXISTS:
		return EEXIST;
	case GRPC_STATUS_UNIMPLEMENTED:
		return ENOSYS;
	case GRPC_STATUS_DEADLINE_EXCEEDED:
		return ETIMEDOUT;
	case GRPC_STATUS_UNAVAILABLE:
		return ECONNREFUSED;
	case GRPC_STATUS_PERMISSION_DENIED:
		return EPERM;
	case GRPC_STATUS_UNAUTHENTICATED:
		return EACCES;
	case GRPC_STATUS_RESOURCE_EXHAUSTED:
		return EFBIG;
	case GRPC_STATUS_FAILED_PRECONDITION:
		return EBUSY;
	case GRPC_STATUS_DATA_LOSS:
		return EBADMSG;
	case GRPC_STATUS_CANCELLED:
		return ECANCELED;
	default:
		return EIO;
	}
}
