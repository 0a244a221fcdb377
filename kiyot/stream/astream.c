/*
 * astream.c: an agent stream seen from the streaming server's loop (see stream_internal.h).
 * The agent client calls back on its own threads; each call here becomes a function posted
 * to the loop, so a session's state is only ever touched there. The agent client's on_end
 * comes after every other callback returned, and posts run in order: the owner's `end` is
 * the last call for the stream.
 */
#include "stream_internal.h"

#include <errno.h>
#include <stdlib.h>

#include "cells/cells.h"
#include "evloop.h"
#include "xalloc.h"

enum aev_kind {
	AEV_MSG,
	AEV_SENT,
	AEV_END
};

struct aev {
	struct astream *a;
	enum aev_kind kind;
	ProtobufCMessage *msg;
	int ret;
	char *error;
};

static void aev_run(void *arg)
{
	struct aev *ev = arg;
	struct astream *a = ev->a;

	switch (ev->kind) {
	case AEV_MSG:
		a->reading = false;
		a->ops->msg(a->owner, ev->msg);
		break;
	case AEV_SENT:
		a->sending = false;
		a->ops->sent(a->owner, ev->ret);
		break;
	case AEV_END:
		stream_astream_track(a->srv, a, false);
		a->reading = false;
		a->sending = false;
		a->ended = true;
		a->ops->end(a->owner, ev->ret, ev->error);
		break;
	}
	free(ev->error);
	free(ev);
}

static void aev_post(struct astream *a, enum aev_kind kind, ProtobufCMessage *msg, int ret,
		     const char *error)
{
	struct aev *ev = xcalloc(1, sizeof(*ev));

	*ev = (struct aev){ a, kind, msg, ret, error ? xstrdup(error) : NULL };
	evloop_post(a->loop, aev_run, ev);
}

static void on_msg(void *arg, ProtobufCMessage *msg)
{
	aev_post(arg, AEV_MSG, msg, 0, NULL);
}

static void on_sent(void *arg, int ret)
{
	aev_post(arg, AEV_SENT, NULL, ret, NULL);
}

static void on_end(void *arg, int ret, const struct err *err)
{
	aev_post(arg, AEV_END, NULL, ret, ret < 0 ? err->msg : NULL);
}

static const struct agent_stream_cbs astream_cbs = { on_msg, on_sent, on_end };

int astream_open(struct astream *a, struct conn *c, const char *cell_id, const char *method,
		 const ProtobufCMessage *first, const ProtobufCMessageDescriptor *out_desc,
		 const struct astream_ops *ops, void *owner, struct err *err)
{
	*a = (struct astream){ .loop = c->loop, .srv = c->srv, .ops = ops, .owner = owner };
	if (stream_stopping(c->srv))
		return err_set(err, ESHUTDOWN, "the streaming server is stopping");
	if (cells_stream_open(c->cells, cell_id, method, first, out_desc, &astream_cbs, a, &a->cs,
			      err) < 0)
		return -err->code;
	a->sending = true; /* first */
	stream_astream_track(a->srv, a, true);
	return 0;
}

void astream_read(struct astream *a)
{
	if (!a->cs || a->reading || a->ended)
		return;
	a->reading = true;
	cells_stream_read(a->cs);
}

int astream_send(struct astream *a, const ProtobufCMessage *msg, struct err *err)
{
	int ret;

	if (!a->cs || a->ended)
		return err_set(err, ECANCELED, "the agent's stream ended");
	if (a->sending)
		return err_set(err, EBUSY, "a message to the agent is in flight");
	ret = cells_stream_send(a->cs, msg, err);
	if (ret == 0)
		a->sending = true;
	return ret;
}

void astream_close_send(struct astream *a)
{
	if (a->cs && !a->ended)
		cells_stream_close_send(a->cs);
}

void astream_cancel(struct astream *a)
{
	if (a->cs && !a->ended)
		cells_stream_cancel(a->cs);
}

void astream_free(struct astream *a)
{
	if (a->cs && !a->ended) /* not expected: an owner frees its stream after its end */
		stream_astream_track(a->srv, a, false);
	cells_stream_free(a->cs);
	a->cs = NULL;
}
