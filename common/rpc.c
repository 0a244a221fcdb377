/*
 * rpc.c: the gRPC server over gRPC core (see rpc.h for the model).
 *
 * A few outstanding generic request_call "slots" each own a pluck completion queue that the
 * call will be bound to; the acceptor thread waits on the notification queue, hands the
 * arrived call to its method's pool (or a thread of its own when it streams) and re-arms the
 * slot with a fresh queue. A worker then drives the whole call by plucking its own queue, so no
 * other thread ever touches it. Pools share the server's lock but nothing else: a pool whose
 * threads all wait on a stalled registry delays nobody outside it.
 */
#include "rpc.h"

#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "cancel.h"
#include "log.h"
#include "rpc_internal.h"
#include "xalloc.h"

#define RPC_SLOTS 8
#define RPC_DEFAULT_THREADS 8
#define RPC_DEFAULT_MAX_QUEUE 4096

struct rpc_call {
	struct rpc_server *srv;
	grpc_call *call;
	grpc_completion_queue *cq;
	grpc_call_details details;
	grpc_metadata_array md;
	struct arena arena;
	ProtobufCMessage **adopted; /* rpc_adopt: freed with the arena */
	size_t n_adopted;
	int close_done; /* RECV_CLOSE_ON_SERVER completed */
	int cancelled;	/* what it reported */
	int sent_initial;
	const struct rpc_method *method; /* NULL: unknown */
	struct rpc_call *next_job;
};

/* One pool of unary workers and its queue (guarded by the server's lock). */
struct pool {
	struct rpc_server *srv;
	char name[32];
	pthread_t *threads;
	int n_threads;
	int max_queue;
	int queued;
	struct rpc_call *head, *tail;
	pthread_cond_t cond;
};

struct rpc_server {
	grpc_server *server;
	grpc_completion_queue *notify_cq;
	const struct rpc_method *methods;
	size_t n_methods;
	void *svc;
	size_t max_message;
	char *peer_name; /* TLS: the identity every caller's certificate must carry, or NULL */
	struct rpc_call *slots[RPC_SLOTS];
	pthread_t acceptor;
	struct pool pools[RPC_MAX_POOLS];
	size_t n_pools;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* streams ending */
	int stopping;
	int streams; /* streaming calls in flight */
};

/* The call whose handler this thread runs (rpc_current). */
static _Thread_local struct rpc_call *current_call;

/* Tags on the notification queue: a slot pointer, or this sentinel for shutdown. */
static char shutdown_tag;

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

static struct rpc_call *slot_new(struct rpc_server *s)
{
	struct rpc_call *c = xcalloc(1, sizeof(*c));

	c->srv = s;
	c->cq = grpc_completion_queue_create_for_pluck(NULL);
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->md);
	return c;
}

/* Shuts a call's private queue down and frees it. */
static void cq_destroy_pluck(grpc_completion_queue *cq)
{
	grpc_completion_queue_shutdown(cq);
	for (;;) {
		grpc_event ev = grpc_completion_queue_pluck(
			cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
	}
	grpc_completion_queue_destroy(cq);
}

static void call_free(struct rpc_call *c)
{
	if (c->call)
		grpc_call_unref(c->call);
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->md);
	call_memory_free(c);
	cq_destroy_pluck(c->cq);
	free(c);
}

static int slot_arm(struct rpc_server *s, int i)
{
	struct rpc_call *c = slot_new(s);
	grpc_call_error e = grpc_server_request_call(s->server, &c->call, &c->details, &c->md,
						     c->cq, s->notify_cq, c);

	if (e != GRPC_CALL_OK) {
		log_error("rpc: request_call failed: %d", (int)e);
		call_free(c);
		s->slots[i] = NULL;
		return -1;
	}
	s->slots[i] = c;
	return 0;
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

static grpc_byte_buffer *pack_message(const ProtobufCMessage *msg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	grpc_slice sl = grpc_slice_malloc(n);
	grpc_byte_buffer *bb;

	protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(sl));
	bb = grpc_raw_byte_buffer_create(&sl, 1);
	grpc_slice_unref(sl);
	return bb;
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
	grpc_byte_buffer *bb = pack_message(msg);
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

int rpc_recv(struct rpc_call *c, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg,
	     struct err *err)
{
	grpc_byte_buffer *bb = NULL;
	grpc_op op;

	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &bb;
	if (grpc_call_start_batch(c->call, &op, 1, TAG(TAG_RECV), NULL) != GRPC_CALL_OK ||
	    !call_wait(c, TAG_RECV)) {
		if (bb)
			grpc_byte_buffer_destroy(bb);
		return err_set(err, ECANCELED, "client went away");
	}
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

/* Sends the response (if any) and the status, in one batch. */
static void call_finish(struct rpc_call *c, const ProtobufCMessage *resp, int status,
			const char *msg)
{
	grpc_op ops[3];
	grpc_byte_buffer *bb = resp ? pack_message(resp) : NULL;
	grpc_slice details = grpc_slice_from_copied_string(msg ? msg : "");
	size_t n = 0;

	memset(ops, 0, sizeof(ops));
	if (!c->sent_initial) {
		ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
		c->sent_initial = 1;
	}
	if (bb) {
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = bb;
	}
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = (grpc_status_code)status;
	ops[n++].data.send_status_from_server.status_details = &details;
	if (grpc_call_start_batch(c->call, ops, n, TAG(TAG_SEND), NULL) == GRPC_CALL_OK)
		call_wait(c, TAG_SEND);
	if (bb)
		grpc_byte_buffer_destroy(bb);
	grpc_slice_unref(details);
	if (!c->close_done) {
		call_wait(c, TAG_CLOSE);
		c->close_done = 1;
	}
}

static const struct rpc_method *method_find(struct rpc_server *s, grpc_slice path)
{
	size_t n = GRPC_SLICE_LENGTH(path);

	for (size_t i = 0; i < s->n_methods; i++) {
		const char *p = s->methods[i].path;

		if (strlen(p) == n && memcmp(p, GRPC_SLICE_START_PTR(path), n) == 0)
			return &s->methods[i];
	}
	return NULL;
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

/* Starts waiting for the call's end on the server side (what rpc_cancelled reads). */
static int call_watch_close(struct rpc_call *c)
{
	grpc_op op;

	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	op.data.recv_close_on_server.cancelled = &c->cancelled;
	return grpc_call_start_batch(c->call, &op, 1, TAG(TAG_CLOSE), NULL) == GRPC_CALL_OK ? 0
											    : -1;
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

/* Runs one call from its request to its status. */
static void call_run(struct rpc_call *c)
{
	struct rpc_server *s = c->srv;
	const struct rpc_method *m = c->method;
	grpc_byte_buffer *bb = NULL;
	ProtobufCMessage *req = NULL, *resp = NULL;
	struct err err = ERR_INIT;
	grpc_op op;
	int ret;

	if (call_watch_close(c) < 0)
		return;
	if (s->peer_name && !peer_is(c->call, s->peer_name)) {
		call_finish(c, NULL, GRPC_STATUS_UNAUTHENTICATED,
			    "this server takes calls from its own peer only (a client certificate "
			    "naming it)");
		return;
	}
	if (!m) {
		char *path = grpc_slice_to_c_string(c->details.method);

		log_debug("rpc: unknown method %s", path);
		snprintf(err.msg, sizeof(err.msg), "unknown method %s", path);
		gpr_free(path);
		call_finish(c, NULL, GRPC_STATUS_UNIMPLEMENTED, err.msg);
		return;
	}
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &bb;
	if (grpc_call_start_batch(c->call, &op, 1, TAG(TAG_RECV), NULL) != GRPC_CALL_OK ||
	    !call_wait(c, TAG_RECV)) {
		if (bb)
			grpc_byte_buffer_destroy(bb);
		call_finish(c, NULL, GRPC_STATUS_CANCELLED, "request not received");
		return;
	}
	req = rpc_unpack(m->req, bb, s->max_message, &err);
	if (bb)
		grpc_byte_buffer_destroy(bb);
	if (!req) {
		call_finish(c, NULL, GRPC_STATUS_INVALID_ARGUMENT, err.msg);
		return;
	}
	if (rpc_cancelled(c)) {
		/* its client left while it waited for a worker: nobody wants the work */
		protobuf_c_message_free_unpacked(req, NULL);
		call_finish(c, NULL, GRPC_STATUS_CANCELLED, "the client went away");
		return;
	}
	if (!(m->flags & (RPC_SERVER_STREAM | RPC_BIDI_STREAM)))
		resp = rpc_msg_new(c, m->resp);
	ret = call_handle(c, req, resp, &err);
	protobuf_c_message_free_unpacked(req, NULL);
	if (ret < 0) {
		int code = err.code ? err.code : -ret;

		log_debug("rpc: %s: %s", m->path, err.msg);
		call_finish(c, NULL, rpc_status_from_errno(code), err.msg);
	} else {
		call_finish(c, resp, GRPC_STATUS_OK, NULL);
	}
}

static void *stream_thread(void *arg)
{
	struct rpc_call *c = arg;
	struct rpc_server *s = c->srv;

	call_run(c);
	call_free(c);
	pthread_mutex_lock(&s->lock);
	s->streams--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* A worker of one pool: runs the pool's calls, oldest first, until the server stops and the
 * queue is empty. */
static void *worker_thread(void *arg)
{
	struct pool *p = arg;
	struct rpc_server *s = p->srv;

	for (;;) {
		struct rpc_call *c;

		pthread_mutex_lock(&s->lock);
		while (!p->head && !s->stopping)
			pthread_cond_wait(&p->cond, &s->lock);
		c = p->head;
		if (!c) {
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		p->head = c->next_job;
		if (!p->head)
			p->tail = NULL;
		p->queued--;
		pthread_mutex_unlock(&s->lock);
		call_run(c);
		call_free(c);
	}
}

/* Answers a call that will not run (no thread, a full queue) with status and msg, and frees
 * it. */
static void call_refuse(struct rpc_call *c, int status, const char *msg)
{
	if (call_watch_close(c) == 0)
		call_finish(c, NULL, status, msg);
	call_free(c);
}

/* Hands an arrived call to its method's pool, or to a thread of its own if it streams. Unknown
 * methods go to the first pool, which answers them UNIMPLEMENTED. */
static void dispatch(struct rpc_server *s, struct rpc_call *c)
{
	const struct rpc_method *m = method_find(s, c->details.method);
	struct pool *p;
	char msg[128];

	c->method = m;
	if (m && (m->flags & (RPC_SERVER_STREAM | RPC_BIDI_STREAM))) {
		pthread_t t;

		pthread_mutex_lock(&s->lock);
		s->streams++;
		pthread_mutex_unlock(&s->lock);
		if (pthread_create(&t, NULL, stream_thread, c) == 0) {
			pthread_detach(t);
			return;
		}
		pthread_mutex_lock(&s->lock);
		s->streams--;
		pthread_mutex_unlock(&s->lock);
		call_refuse(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "no thread for the stream");
		return;
	}
	p = &s->pools[m ? m->pool : 0];
	pthread_mutex_lock(&s->lock);
	if (s->stopping || p->queued >= p->max_queue) {
		int stopping = s->stopping;

		pthread_mutex_unlock(&s->lock);
		snprintf(msg, sizeof(msg), "%d calls already wait for the %s workers; try later",
			 p->max_queue, p->name);
		call_refuse(c, stopping ? GRPC_STATUS_UNAVAILABLE : GRPC_STATUS_RESOURCE_EXHAUSTED,
			    stopping ? "the server is stopping" : msg);
		return;
	}
	c->next_job = NULL;
	if (p->tail)
		p->tail->next_job = c;
	else
		p->head = c;
	p->tail = c;
	p->queued++;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&s->lock);
}

static void *acceptor_thread(void *arg)
{
	struct rpc_server *s = arg;

	for (;;) {
		grpc_event ev = grpc_completion_queue_next(
			s->notify_cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			return NULL;
		if (ev.type != GRPC_OP_COMPLETE || ev.tag == &shutdown_tag)
			continue;
		for (int i = 0; i < RPC_SLOTS; i++) {
			struct rpc_call *c = s->slots[i];

			if (c != ev.tag)
				continue;
			s->slots[i] = NULL;
			if (!ev.success || s->stopping) {
				call_free(c);
				break;
			}
			if (!s->stopping)
				slot_arm(s, i);
			dispatch(s, c);
			break;
		}
	}
}

static void grpc_log_to_ours(gpr_log_func_args *args)
{
	enum log_level l = args->severity == GPR_LOG_SEVERITY_ERROR ? LOG_WARN : LOG_DEBUG;

	log_msg(l, "grpc: %s:%d: %s", args->file, args->line, args->message);
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void do_init(void)
{
	gpr_set_log_function(grpc_log_to_ours);
	grpc_init();
}

void rpc_global_init(void)
{
	pthread_once(&init_once, do_init);
}

/* Checks that every unary method names a pool the config has. */
static int pools_check(const struct rpc_server_config *cfg, struct err *err)
{
	size_t n = cfg->n_pools ? cfg->n_pools : 1;

	if (cfg->n_pools > RPC_MAX_POOLS)
		return err_set(err, EINVAL, "%zu worker pools; at most %d", cfg->n_pools,
			       RPC_MAX_POOLS);
	for (size_t i = 0; i < cfg->n_methods; i++)
		if (cfg->methods[i].pool >= n)
			return err_set(err, EINVAL, "method %s: pool %u, but the server has %zu",
				       cfg->methods[i].path, cfg->methods[i].pool, n);
	return 0;
}

/* Sets up the pools' queues (their threads start with the server). */
static void pools_init(struct rpc_server *s, const struct rpc_server_config *cfg)
{
	s->n_pools = cfg->n_pools ? cfg->n_pools : 1;
	for (size_t i = 0; i < s->n_pools; i++) {
		const struct rpc_pool *c = cfg->n_pools ? &cfg->pools[i] : NULL;
		struct pool *p = &s->pools[i];
		int threads = c ? c->threads : cfg->workers;

		p->srv = s;
		snprintf(p->name, sizeof(p->name), "%s", c && c->name ? c->name : "default");
		p->n_threads = threads > 0 ? threads : RPC_DEFAULT_THREADS;
		p->max_queue = c && c->max_queue > 0 ? c->max_queue : RPC_DEFAULT_MAX_QUEUE;
		p->threads = xcalloc((size_t)p->n_threads, sizeof(pthread_t));
		pthread_cond_init(&p->cond, NULL);
	}
}

static void pools_start(struct rpc_server *s)
{
	for (size_t i = 0; i < s->n_pools; i++)
		for (int j = 0; j < s->pools[i].n_threads; j++)
			if (pthread_create(&s->pools[i].threads[j], NULL, worker_thread,
					   &s->pools[i]) != 0)
				abort();
}

/* Wakes every worker of a stopping server and waits for them (they finish the queues). */
static void pools_stop(struct rpc_server *s)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_pools; i++)
		pthread_cond_broadcast(&s->pools[i].cond);
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < s->n_pools; i++) {
		for (int j = 0; j < s->pools[i].n_threads; j++)
			pthread_join(s->pools[i].threads[j], NULL);
		pthread_cond_destroy(&s->pools[i].cond);
		free(s->pools[i].threads);
	}
}

int rpc_server_start(const struct rpc_server_config *cfg, struct rpc_server **out, struct err *err)
{
	struct rpc_server *s;
	grpc_arg args[3];
	grpc_channel_args cargs = { 3, args };
	grpc_server_credentials *creds;
	int port;

	if (pools_check(cfg, err) < 0)
		return -err->code;
	rpc_global_init();
	s = xcalloc(1, sizeof(*s));
	s->methods = cfg->methods;
	s->n_methods = cfg->n_methods;
	s->svc = cfg->svc;
	s->max_message = cfg->max_message ? cfg->max_message : 16u << 20;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	args[0].type = GRPC_ARG_INTEGER;
	args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	args[0].value.integer = (int)s->max_message;
	args[1].type = GRPC_ARG_INTEGER;
	args[1].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
	args[1].value.integer = (int)s->max_message;
	/* core sets SO_REUSEPORT on its listeners by default, so a second server on the same
	 * address and port binds as well and the kernel splits connections between the two (two
	 * agents of one cell each got calls meant for the other): here a second bind fails */
	args[2].type = GRPC_ARG_INTEGER;
	args[2].key = (char *)GRPC_ARG_ALLOW_REUSEPORT;
	args[2].value.integer = 0;
	s->server = grpc_server_create(&cargs, NULL);
	s->notify_cq = grpc_completion_queue_create_for_next(NULL);
	grpc_server_register_completion_queue(s->server, s->notify_cq, NULL);
	if (cfg->tls.ca_pem) {
		grpc_ssl_pem_key_cert_pair pair = { cfg->tls.key_pem, cfg->tls.cert_pem };

		s->peer_name = xstrdup(cfg->tls.peer_name ? cfg->tls.peer_name : "");
		creds = grpc_ssl_server_credentials_create_ex(
			cfg->tls.ca_pem, &pair, 1,
			GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY, NULL);
	} else {
		creds = grpc_insecure_server_credentials_create();
	}
	port = creds ? grpc_server_add_http2_port(s->server, cfg->address, creds) : 0;
	if (creds)
		grpc_server_credentials_release(creds);
	if (port == 0) {
		/* core aborts when destroying a server that was never started and shut down */
		grpc_server_start(s->server);
		grpc_server_shutdown_and_notify(s->server, s->notify_cq, &shutdown_tag);
		/* a queue made for next cannot be plucked (core calls a NULL function) */
		while (grpc_completion_queue_next(s->notify_cq, gpr_inf_future(GPR_CLOCK_REALTIME),
						  NULL)
			       .tag != &shutdown_tag)
			;
		grpc_server_destroy(s->server);
		grpc_completion_queue_shutdown(s->notify_cq);
		while (grpc_completion_queue_next(s->notify_cq, gpr_inf_future(GPR_CLOCK_REALTIME),
						  NULL)
			       .type != GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(s->notify_cq);
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->cond);
		free(s->peer_name);
		free(s);
		if (!creds)
			return err_set(err, EINVAL, "cannot make TLS credentials for %s",
				       cfg->address);
		return err_set(err, EADDRINUSE, "cannot listen on %s", cfg->address);
	}
	grpc_server_start(s->server);
	for (int i = 0; i < RPC_SLOTS; i++)
		slot_arm(s, i);
	pools_init(s, cfg);
	pools_start(s);
	pthread_create(&s->acceptor, NULL, acceptor_thread, s);
	*out = s;
	return 0;
}

void rpc_server_stop(struct rpc_server *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = 1;
	pthread_mutex_unlock(&s->lock);
	grpc_server_shutdown_and_notify(s->server, s->notify_cq, &shutdown_tag);
	grpc_server_cancel_all_calls(s->server);
	pools_stop(s);
	pthread_mutex_lock(&s->lock);
	while (s->streams > 0)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	grpc_completion_queue_shutdown(s->notify_cq);
	pthread_join(s->acceptor, NULL);
	for (int i = 0; i < RPC_SLOTS; i++)
		if (s->slots[i])
			call_free(s->slots[i]);
	grpc_server_destroy(s->server);
	grpc_completion_queue_destroy(s->notify_cq);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s->peer_name);
	free(s);
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
	case EADDRINUSE: /* a port another holds (a pod's hostPort) */
	case EXDEV:	 /* content that would escape where it must stay (a layer's entry) */
	case ELOOP:	 /* a loop in what was asked for (redirects, symbolic links) */
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
