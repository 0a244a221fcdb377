/*
 * rpc_loop.c: client calls whose batches complete on one completion queue (see rpc_loop.h).
 *
 * Every batch is tagged with a struct rpc_tag embedded in the call it belongs to: the loop's
 * threads run the tag's done, which finds its call from the tag's address.
 *
 * A watch has one batch outstanding at a time, so its callbacks never overlap: the first
 * batch sends the request and reads the first message, each message read starts the next
 * read, and a read that finds the stream ended asks for its status, whose completion ends the
 * watch.
 *
 * A bidirectional call may have a batch of each kind outstanding at once, which is all gRPC
 * core allows a call: a read, a send, the close of the client's side and the status. Its state
 * is under a mutex of its own (core wants a call's batches started one at a time, too), and a
 * batch counts as outstanding until its completion's callback returned. The status is asked
 * once the end is known (a read found it, a message did not parse, or the owner cancelled),
 * after which no batch starts; the completion that leaves none outstanding once the status
 * came calls on_end, so on_end follows every other callback and is the loop's last touch.
 */
#include "rpc_loop.h"

#include <errno.h>
#include <grpc/grpc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rpc.h"
#include "rpc_internal.h"
#include "xalloc.h"

/* What a batch is tagged with: the loop's threads call done with the batch's success. */
struct rpc_tag {
	void (*done)(struct rpc_tag *t, bool ok);
};

/* The struct of type that holds member at ptr. */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

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
	struct rpc_tag tag;	/* of every batch: they come one at a time */
	struct rpc_channel *ch; /* taken until the watch is freed */
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
	char *method;	/* for errors, with its channel's target */
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
	rpc_channel_give(w->ch);
	free(w->method);
	free(w);
}

/* How a call ended, as on_end tells it: a message that did not parse (bad), else the
 * server's status; 0 for OK. */
static int end_result(const struct err *bad, grpc_status_code status, grpc_slice details,
		      const char *target, const char *method, struct err *err)
{
	if (bad->code) {
		*err = *bad;
		return -err->code;
	}
	if (status == GRPC_STATUS_OK)
		return 0;
	return rpc_status_err(err, status, details, target, method);
}

/* The end: the callback, then the watch is gone. */
static void watch_end(struct rpc_watch *w)
{
	struct err err = ERR_INIT;
	int ret = end_result(&w->bad, w->status, w->details, rpc_channel_target(w->ch), w->method,
			     &err);

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
	if (grpc_call_start_batch(w->call, &op, 1, &w->tag, NULL) != GRPC_CALL_OK) {
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
	return grpc_call_start_batch(w->call, &op, 1, &w->tag, NULL) == GRPC_CALL_OK ? 0 : -1;
}

/* A batch of the watch completed (a failed one as well: its message is NULL, and the status
 * says why). */
static void watch_step(struct rpc_tag *t, bool ok)
{
	struct rpc_watch *w = container_of(t, struct rpc_watch, tag);
	ProtobufCMessage *msg;

	(void)ok;
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
		err_wrap(&w->bad, "%s %s", rpc_channel_target(w->ch), w->method);
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
		if (ev.type == GRPC_OP_COMPLETE) {
			struct rpc_tag *t = ev.tag;

			t->done(t, ev.success != 0);
		}
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
	grpc_channel *core = rpc_channel_take(ch, err);
	struct rpc_watch *w;
	grpc_slice mslice;
	grpc_op ops[5];

	if (!core)
		return -err->code;
	w = xcalloc(1, sizeof(*w));
	w->ch = ch;
	mslice = grpc_slice_from_copied_string(method);
	w->tag.done = watch_step;
	w->desc = msg_desc;
	w->on_msg = on_msg;
	w->on_end = on_end;
	w->arg = arg;
	w->phase = WATCH_READING;
	w->details = grpc_empty_slice();
	w->method = xstrdup(method);
	w->request = rpc_pack(req);
	grpc_metadata_array_init(&w->initial_md);
	grpc_metadata_array_init(&w->trailing_md);
	w->call = grpc_channel_create_call(core, NULL, GRPC_PROPAGATE_DEFAULTS, l->cq, mslice, NULL,
					   gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
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
	if (grpc_call_start_batch(w->call, ops, 5, &w->tag, NULL) != GRPC_CALL_OK) {
		err_set(err, EIO, "%s %s: cannot start the stream", rpc_channel_target(w->ch),
			method);
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

struct rpc_bidi {
	struct rpc_channel *ch; /* taken until the call is freed */
	grpc_call *call;
	const ProtobufCMessageDescriptor *desc;
	struct rpc_bidi_cbs cbs;
	void *arg;
	/* one of each kind of batch; the close's has no callback of the owner's */
	struct rpc_tag read_tag, send_tag, close_tag, status_tag;
	pthread_mutex_t lock; /* the state below, and the starting of batches */
	bool reading;	      /* a read is outstanding */
	bool sending;	      /* a send is outstanding (the first message's too) */
	bool close_wanted;    /* close once the send in flight left */
	bool closed;	      /* the client's side is closed (or its close was skipped) */
	bool got_initial;     /* the first read asked for the server's initial metadata */
	bool cancelled;	      /* by the owner: a message read after it is dropped */
	bool status_asked;    /* the end is known: no batch starts from then on */
	bool status_done;     /* the status came */
	bool ended;	      /* on_end is being called */
	int outstanding;      /* batches started whose completion's callback has not returned */
	/* each owned by the one batch of its kind outstanding, and the status's fields read
	 * only once it completed */
	grpc_byte_buffer *sending_bb, *recv;
	grpc_metadata_array initial_md, trailing_md;
	grpc_status_code status;
	grpc_slice details;
	struct err bad; /* a message that did not parse ends the call with it */
	char *method;	/* for errors, with its channel's target */
};

/* Starts a batch of b tagged t and counts it outstanding; b->lock held. -1 when gRPC refused
 * it (then nothing about the call changed). */
static int bidi_start(struct rpc_bidi *b, const grpc_op *ops, size_t n, struct rpc_tag *t)
{
	if (grpc_call_start_batch(b->call, ops, n, t, NULL) != GRPC_CALL_OK)
		return -1;
	b->outstanding++;
	return 0;
}

/* Asks for the status, which ends the call; b->lock held. When gRPC refuses the batch, the
 * status is INTERNAL and an empty batch, which core completes at once, takes its tag to the
 * loop anyway: the end still comes on a loop thread, after the other batches, and never
 * inside the owner's call of rpc_bidi_read or rpc_bidi_cancel. */
static void bidi_ask_status(struct rpc_bidi *b)
{
	grpc_op op;

	b->status_asked = true;
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	op.data.recv_status_on_client.trailing_metadata = &b->trailing_md;
	op.data.recv_status_on_client.status = &b->status;
	op.data.recv_status_on_client.status_details = &b->details;
	if (bidi_start(b, &op, 1, &b->status_tag) == 0)
		return;
	b->status = GRPC_STATUS_INTERNAL;
	if (bidi_start(b, NULL, 0, &b->status_tag) < 0)
		abort(); /* grpc.h: an empty batch is always taken; else the call could never end */
}

/* Starts a read; b->lock held. */
static void bidi_read(struct rpc_bidi *b)
{
	grpc_op ops[2];
	size_t n = 0;

	if (b->ended || b->status_asked || b->reading)
		return;
	memset(ops, 0, sizeof(ops));
	if (!b->got_initial) {
		ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
		ops[n++].data.recv_initial_metadata.recv_initial_metadata = &b->initial_md;
	}
	ops[n].op = GRPC_OP_RECV_MESSAGE;
	ops[n++].data.recv_message.recv_message = &b->recv;
	if (bidi_start(b, ops, n, &b->read_tag) < 0) {
		bidi_ask_status(b); /* core takes no read: the call is over, its status says how */
		return;
	}
	b->got_initial = true;
	b->reading = true;
}

/* Closes the client's side; b->lock held, no send outstanding. */
static void bidi_close(struct rpc_bidi *b)
{
	grpc_op op;

	b->close_wanted = false;
	if (b->closed)
		return;
	b->closed = true;
	if (b->status_asked) /* the call is ending: nobody reads what the client sends */
		return;
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	(void)bidi_start(b, &op, 1, &b->close_tag); /* refused: the call is over anyway */
}

/* The call's end: the owner's callback, after which b is the owner's alone. */
static void bidi_end(struct rpc_bidi *b)
{
	struct err err = ERR_INIT;
	int ret = end_result(&b->bad, b->status, b->details, rpc_channel_target(b->ch), b->method,
			     &err);

	b->cbs.on_end(b->arg, ret, &err);
}

/* A completion of b's was handled (its callback returned): one batch fewer outstanding, and
 * the status's, when it is this one. The last one once the status came ends the call. */
static void bidi_release(struct rpc_bidi *b, bool status)
{
	bool end;

	pthread_mutex_lock(&b->lock);
	if (status)
		b->status_done = true;
	b->outstanding--;
	end = b->status_done && b->outstanding == 0 && !b->ended;
	if (end)
		b->ended = true;
	pthread_mutex_unlock(&b->lock);
	if (end)
		bidi_end(b);
}

/* A read completed: a message for on_msg, or the end of the server's stream (a failed read
 * has no message either: the status says why). */
static void bidi_read_done(struct rpc_tag *t, bool ok)
{
	struct rpc_bidi *b = container_of(t, struct rpc_bidi, read_tag);
	ProtobufCMessage *msg = NULL;
	struct err bad = ERR_INIT;

	(void)ok;
	/* b->recv is this read's until it is asked again, which takes reading cleared below;
	 * unpacking outside the lock leaves a large message no hold on the call's sends */
	if (b->recv) {
		msg = rpc_unpack(b->desc, b->recv, RPC_CLIENT_MAX_MESSAGE, &bad);
		grpc_byte_buffer_destroy(b->recv);
		b->recv = NULL;
	}
	pthread_mutex_lock(&b->lock);
	b->reading = false;
	if (!msg && bad.code) {
		b->bad = bad;
		err_wrap(&b->bad, "%s %s", rpc_channel_target(b->ch), b->method);
		grpc_call_cancel(b->call, NULL);
	}
	if (msg && b->cancelled) {
		protobuf_c_message_free_unpacked(msg, NULL);
		msg = NULL;
	}
	if (!msg && !b->status_asked)
		bidi_ask_status(b);
	pthread_mutex_unlock(&b->lock);
	if (msg)
		b->cbs.on_msg(b->arg, msg);
	bidi_release(b, false);
}

/* A send completed: a close that waited for it starts, then on_sent. */
static void bidi_send_done(struct rpc_tag *t, bool ok)
{
	struct rpc_bidi *b = container_of(t, struct rpc_bidi, send_tag);

	pthread_mutex_lock(&b->lock);
	grpc_byte_buffer_destroy(b->sending_bb);
	b->sending_bb = NULL;
	b->sending = false;
	if (b->close_wanted)
		bidi_close(b);
	pthread_mutex_unlock(&b->lock);
	b->cbs.on_sent(b->arg, ok ? 0 : -ECANCELED);
	bidi_release(b, false);
}

static void bidi_close_done(struct rpc_tag *t, bool ok)
{
	(void)ok; /* a close that failed: the call ended, which its status tells */
	bidi_release(container_of(t, struct rpc_bidi, close_tag), false);
}

static void bidi_status_done(struct rpc_tag *t, bool ok)
{
	(void)ok; /* always true for a status; an empty batch's stands for a refused one */
	bidi_release(container_of(t, struct rpc_bidi, status_tag), true);
}

int rpc_bidi_open(struct rpc_loop *l, struct rpc_channel *ch, const char *method,
		  const ProtobufCMessage *first, const ProtobufCMessageDescriptor *msg_desc,
		  const struct rpc_bidi_cbs *cbs, void *arg, struct rpc_bidi **out, struct err *err)
{
	grpc_channel *core = rpc_channel_take(ch, err);
	struct rpc_bidi *b;
	grpc_slice mslice;
	grpc_op ops[2];
	int ret;

	if (!core)
		return -err->code;
	b = xcalloc(1, sizeof(*b));
	b->ch = ch;
	mslice = grpc_slice_from_copied_string(method);
	b->desc = msg_desc;
	b->cbs = *cbs;
	b->arg = arg;
	b->read_tag.done = bidi_read_done;
	b->send_tag.done = bidi_send_done;
	b->close_tag.done = bidi_close_done;
	b->status_tag.done = bidi_status_done;
	pthread_mutex_init(&b->lock, NULL);
	b->details = grpc_empty_slice();
	b->method = xstrdup(method);
	grpc_metadata_array_init(&b->initial_md);
	grpc_metadata_array_init(&b->trailing_md);
	b->call = grpc_channel_create_call(core, NULL, GRPC_PROPAGATE_DEFAULTS, l->cq, mslice, NULL,
					   gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	grpc_slice_unref(mslice);
	b->sending_bb = rpc_pack(first);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = b->sending_bb;
	/* *out is written under the lock the first send's completion takes before on_sent: a
	 * callback that finds the handle where *out pointed sees it set */
	pthread_mutex_lock(&b->lock);
	ret = bidi_start(b, ops, 2, &b->send_tag);
	if (ret == 0) {
		b->sending = true;
		*out = b;
	}
	pthread_mutex_unlock(&b->lock);
	if (ret < 0) {
		ret = err_set(err, EIO, "%s %s: cannot start the call", rpc_channel_target(b->ch),
			      method);
		rpc_bidi_free(b);
		return ret;
	}
	return 0;
}

void rpc_bidi_read(struct rpc_bidi *b)
{
	pthread_mutex_lock(&b->lock);
	bidi_read(b);
	pthread_mutex_unlock(&b->lock);
}

int rpc_bidi_send(struct rpc_bidi *b, const ProtobufCMessage *msg, struct err *err)
{
	grpc_op op;
	int ret = 0;

	pthread_mutex_lock(&b->lock);
	/* a closed side first: it is for good, while -EBUSY tells the caller to try again;
	 * status_asked covers ended and status_done, which come after it */
	if (b->close_wanted || b->closed || b->status_asked) {
		ret = err_set(err, ECANCELED, "%s %s: %s", rpc_channel_target(b->ch), b->method,
			      b->status_asked ? "the call ended" : "the client's side is closed");
		goto out;
	}
	if (b->sending) {
		ret = err_set(err, EBUSY, "%s %s: the message before is still being sent",
			      rpc_channel_target(b->ch), b->method);
		goto out;
	}
	b->sending_bb = rpc_pack(msg);
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_SEND_MESSAGE;
	op.data.send_message.send_message = b->sending_bb;
	if (bidi_start(b, &op, 1, &b->send_tag) < 0) {
		grpc_byte_buffer_destroy(b->sending_bb);
		b->sending_bb = NULL;
		ret = err_set(err, ECANCELED, "%s %s: the call takes no more messages",
			      rpc_channel_target(b->ch), b->method);
		goto out;
	}
	b->sending = true;
out:
	pthread_mutex_unlock(&b->lock);
	return ret;
}

void rpc_bidi_close_send(struct rpc_bidi *b)
{
	pthread_mutex_lock(&b->lock);
	if (b->sending)
		b->close_wanted = true; /* core takes one send-side op at a time */
	else
		bidi_close(b);
	pthread_mutex_unlock(&b->lock);
}

void rpc_bidi_cancel(struct rpc_bidi *b)
{
	pthread_mutex_lock(&b->lock);
	b->cancelled = true;
	grpc_call_cancel(b->call, NULL);
	/* a read outstanding completes (empty, the call being cancelled) and asks the status
	 * itself; without one, nothing else would */
	if (!b->reading && !b->status_asked)
		bidi_ask_status(b);
	pthread_mutex_unlock(&b->lock);
}

void rpc_bidi_free(struct rpc_bidi *b)
{
	if (!b)
		return;
	if (b->sending_bb)
		grpc_byte_buffer_destroy(b->sending_bb);
	if (b->recv)
		grpc_byte_buffer_destroy(b->recv);
	grpc_metadata_array_destroy(&b->initial_md);
	grpc_metadata_array_destroy(&b->trailing_md);
	grpc_slice_unref(b->details);
	grpc_call_unref(b->call);
	rpc_channel_give(b->ch);
	pthread_mutex_destroy(&b->lock);
	free(b->method);
	free(b);
}
