/*
 * rpc_loop.c: server-streaming calls read from one completion queue (see rpc_loop.h).
 *
 * A watch has one batch outstanding at a time, so its callbacks never overlap: the first
 * batch sends the request and reads the first message, each message read starts the next
 * read, and a read that finds the stream ended asks for its status, whose completion ends the
 * watch.
 */
#include "rpc_loop.h"

#include <errno.h>
#include <grpc/grpc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <string.h>

#include "rpc.h"
#include "rpc_internal.h"
#include "xalloc.h"

struct rpc_loop {
	grpc_completion_queue *cq;
	pthread_t *threads;
	int n;
};

enum watch_phase {
	WATCH_READING, /* a message read is outstanding (the first batch's included) */
	WATCH_ENDING   /* the status is asked for */
};

struct rpc_watch {
	grpc_call *call;
	const ProtobufCMessageDescriptor *desc;
	rpc_watch_msg_fn *on_msg;
	rpc_watch_end_fn *on_end;
	void *arg;
	enum watch_phase phase;
	grpc_byte_buffer *request; /* until the first batch completed */
	grpc_byte_buffer *recv;
	grpc_metadata_array initial_md, trailing_md;
	grpc_status_code status;
	grpc_slice details;
	struct err bad; /* a message that did not parse ends the watch with it */
	char *target, *method;
};

static void watch_free(struct rpc_watch *w)
{
	if (w->request)
		grpc_byte_buffer_destroy(w->request);
	if (w->recv)
		grpc_byte_buffer_destroy(w->recv);
	grpc_metadata_array_destroy(&w->initial_md);
	grpc_metadata_array_destroy(&w->trailing_md);
	grpc_slice_unref(w->details);
	grpc_call_unref(w->call);
	free(w->target);
	free(w->method);
	free(w);
}

/* The end: the callback, then the watch is gone. */
static void watch_end(struct rpc_watch *w)
{
	struct err err = ERR_INIT;
	int ret = 0;

	if (w->bad.code) {
		err = w->bad;
		ret = -err.code;
	} else if (w->status != GRPC_STATUS_OK) {
		ret = rpc_status_err(&err, w->status, w->details, w->target, w->method);
	}
	w->on_end(w->arg, ret, &err);
	watch_free(w);
}

/* Asks for the status; the watch ends at once when gRPC cannot take the batch. */
static void watch_ask_status(struct rpc_watch *w)
{
	grpc_op op;

	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	op.data.recv_status_on_client.trailing_metadata = &w->trailing_md;
	op.data.recv_status_on_client.status = &w->status;
	op.data.recv_status_on_client.status_details = &w->details;
	w->phase = WATCH_ENDING;
	if (grpc_call_start_batch(w->call, &op, 1, w, NULL) != GRPC_CALL_OK) {
		w->status = GRPC_STATUS_INTERNAL;
		watch_end(w);
	}
}

static int watch_read(struct rpc_watch *w)
{
	grpc_op op;

	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &w->recv;
	return grpc_call_start_batch(w->call, &op, 1, w, NULL) == GRPC_CALL_OK ? 0 : -1;
}

/* A batch of w completed. */
static void watch_step(struct rpc_watch *w)
{
	ProtobufCMessage *msg;

	if (w->phase == WATCH_ENDING) {
		watch_end(w);
		return;
	}
	if (w->request) {
		grpc_byte_buffer_destroy(w->request);
		w->request = NULL;
	}
	if (!w->recv) { /* the stream ended (or never started): its status says how */
		watch_ask_status(w);
		return;
	}
	msg = rpc_unpack(w->desc, w->recv, RPC_CLIENT_MAX_MESSAGE, &w->bad);
	grpc_byte_buffer_destroy(w->recv);
	w->recv = NULL;
	if (!msg) {
		err_wrap(&w->bad, "%s %s", w->target, w->method);
		grpc_call_cancel(w->call, NULL);
		watch_ask_status(w);
		return;
	}
	w->on_msg(w->arg, msg);
	protobuf_c_message_free_unpacked(msg, NULL);
	if (watch_read(w) < 0)
		watch_ask_status(w);
}

static void *loop_main(void *arg)
{
	struct rpc_loop *l = arg;

	for (;;) {
		grpc_event ev =
			grpc_completion_queue_next(l->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			return NULL;
		if (ev.type == GRPC_OP_COMPLETE)
			watch_step(ev.tag);
	}
}

int rpc_loop_new(int threads, struct rpc_loop **out, struct err *err)
{
	struct rpc_loop *l = xcalloc(1, sizeof(*l));

	if (threads < 1)
		threads = 1;
	rpc_global_init();
	l->cq = grpc_completion_queue_create_for_next(NULL);
	l->threads = xcalloc((size_t)threads, sizeof(*l->threads));
	for (int i = 0; i < threads; i++) {
		int rc = pthread_create(&l->threads[i], NULL, loop_main, l);

		if (rc != 0) {
			rpc_loop_free(l);
			return err_set(err, rc, "rpc loop: cannot start a thread: %s",
				       strerror(rc));
		}
		l->n++;
	}
	*out = l;
	return 0;
}

void rpc_loop_free(struct rpc_loop *l)
{
	if (!l)
		return;
	grpc_completion_queue_shutdown(l->cq);
	for (int i = 0; i < l->n; i++)
		pthread_join(l->threads[i], NULL);
	grpc_completion_queue_destroy(l->cq);
	free(l->threads);
	free(l);
}

int rpc_watch_open(struct rpc_loop *l, struct rpc_channel *ch, const char *method,
		   const ProtobufCMessage *req, const ProtobufCMessageDescriptor *msg_desc,
		   rpc_watch_msg_fn *on_msg, rpc_watch_end_fn *on_end, void *arg,
		   struct rpc_watch **out, struct err *err)
{
	struct rpc_watch *w = xcalloc(1, sizeof(*w));
	grpc_slice mslice = grpc_slice_from_copied_string(method);
	grpc_op ops[5];

	w->desc = msg_desc;
	w->on_msg = on_msg;
	w->on_end = on_end;
	w->arg = arg;
	w->phase = WATCH_READING;
	w->details = grpc_empty_slice();
	w->target = xstrdup(ch->target);
	w->method = xstrdup(method);
	w->request = rpc_pack(req);
	grpc_metadata_array_init(&w->initial_md);
	grpc_metadata_array_init(&w->trailing_md);
	w->call = grpc_channel_create_call(ch->ch, NULL, GRPC_PROPAGATE_DEFAULTS, l->cq, mslice,
					   NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	grpc_slice_unref(mslice);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = w->request;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &w->initial_md;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &w->recv;
	if (grpc_call_start_batch(w->call, ops, 5, w, NULL) != GRPC_CALL_OK) {
		err_set(err, EIO, "%s %s: cannot start the stream", w->target, method);
		watch_free(w);
		return -EIO;
	}
	/* w may be gone already: the first batch can complete on a loop thread at once, which
	 * the caller tells from its on_end */
	*out = w;
	return 0;
}

void rpc_watch_cancel(struct rpc_watch *w)
{
	grpc_call_cancel(w->call, NULL);
}
