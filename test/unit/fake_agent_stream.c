/*
 * fake_agent_stream.c: the fake agent's streams (see fake_agent.h): Watch sends what the real
 * agent sends, Exec, Attach and PortForward echo their input.
 */
#include "fake_agent_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cri/cri.h"
#include "xalloc.h"

static struct agent_stream *stream_new(struct fake_agent *fa, enum stream_kind kind,
				       const char *cell_id)
{
	struct agent_stream *s = xcalloc(1, sizeof(*s));

	s->kind = kind;
	s->cell_id = xstrdup(cell_id);
	s->next = fa->streams;
	fa->streams = s;
	return s;
}

/* What the real agent sends first: every unit's status, each log past the offset asked for,
 * SYNCED, then the cell's usage if the request asks for it (the fake sends it again only when
 * told: fake_agent_push_stats). */
static void watch_backlog(struct fake_agent *fa, struct fake_cell *c, struct agent_stream *s,
			  const Kiyot__Cell__V1__WatchRequest *req)
{
	Kiyot__Cell__V1__WatchEvent synced = KIYOT__CELL__V1__WATCH_EVENT__INIT;

	for (size_t i = 0; i < c->n_units; i++) {
		Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;
		Kiyot__Cell__V1__UnitStatus w;

		fa_unit_wire(c->units[i], &w);
		ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__STATUS;
		ev.status = &w;
		ev.unit_id = c->units[i]->id;
		fa_stream_push(fa, s, cri_msg_copy(&ev.base));
	}
	for (size_t i = 0; i < c->n_units; i++) {
		struct fake_unit *u = c->units[i];
		uint64_t from = 0;

		for (size_t j = 0; j < req->n_offsets; j++)
			if (strcmp(req->offsets[j]->unit_id, u->id) == 0)
				from = req->offsets[j]->offset;
		if (fa->resend_logs)
			from = 0;
		if (from < u->log_len)
			fa_stream_push(fa, s, fa_log_event(u, (size_t)from));
	}
	synced.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__SYNCED;
	fa_stream_push(fa, s, cri_msg_copy(&synced.base));
	if (req->stats_interval_ms)
		fa_stream_push(fa, s, fa_stats_event(c));
}

Kiyot__Cell__V1__WatchEvent *fa_stats_event(const struct fake_cell *c)
{
	Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;
	Kiyot__Cell__V1__WatchEvent *out;

	ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__STATS;
	ev.stats = fa_stats_msg(c);
	out = cri_msg_copy(&ev.base);
	protobuf_c_message_free_unpacked(&ev.stats->base, NULL);
	return out;
}

/* The stream of a Watch, its backlog queued. */
static int watch_stream(struct fake_agent *fa, struct agent_conn *conn,
			const Kiyot__Cell__V1__WatchRequest *req, struct agent_stream **out,
			struct err *err)
{
	struct fake_cell *c;

	if (fa_op_enter(fa, FAKE_AGENT_WATCH, 0, err) < 0)
		return -err->code;
	pthread_mutex_lock(&fa->lock);
	c = fa_conn_cell(fa, conn, err);
	if (c) {
		if (c->last_watch)
			protobuf_c_message_free_unpacked(&c->last_watch->base, NULL);
		c->last_watch = cri_msg_copy(&req->base);
		c->watches++;
		*out = stream_new(fa, STREAM_WATCH, c->id);
		watch_backlog(fa, c, *out, req);
	}
	pthread_mutex_unlock(&fa->lock);
	return c ? 0 : -err->code;
}

/* A Watch as the real client runs it: its callbacks in order, on a thread (the fake's own,
 * one per Watch), the Watch freed once on_end returned. */
struct agent_watch {
	struct fake_agent *fa;
	struct agent_stream *s;
	agent_watch_event_fn *on_event;
	agent_watch_end_fn *on_end;
	void *arg;
};

static void *watch_thread(void *arg)
{
	struct agent_watch *w = arg;
	struct fake_agent *fa = w->fa;
	struct err err = ERR_INIT;
	ProtobufCMessage *msg;
	int ret;

	while ((ret = fa_next(fa, w->s, &msg, &err)) == 1) {
		w->on_event(w->arg, (const Kiyot__Cell__V1__WatchEvent *)msg);
		protobuf_c_message_free_unpacked(msg, NULL);
	}
	w->on_end(w->arg, ret, &err);
	fa_stream_free(fa, w->s);
	free(w);
	pthread_mutex_lock(&fa->lock);
	fa->watch_threads--;
	pthread_cond_broadcast(&fa->cond);
	pthread_mutex_unlock(&fa->lock);
	return NULL;
}

int fa_watch(void *self, struct agent_conn *conn, const Kiyot__Cell__V1__WatchRequest *req,
	     agent_watch_event_fn *on_event, agent_watch_end_fn *on_end, void *arg,
	     struct agent_watch **out, struct err *err)
{
	struct fake_agent *fa = self;
	struct agent_watch *w;
	struct agent_stream *s = NULL;
	pthread_attr_t attr;
	pthread_t t;

	if (watch_stream(fa, conn, req, &s, err) < 0)
		return -err->code;
	w = xmalloc(sizeof(*w));
	*w = (struct agent_watch){ fa, s, on_event, on_end, arg };
	pthread_mutex_lock(&fa->lock);
	fa->watch_threads++;
	pthread_mutex_unlock(&fa->lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, watch_thread, w) != 0)
		abort();
	pthread_attr_destroy(&attr);
	*out = w; /* possibly ended already: the caller learns it from on_end */
	return 0;
}

void fa_watch_cancel(void *self, struct agent_watch *w)
{
	fa_cancel(self, w->s);
}

/* Exec, Attach and PortForward outputs (by the stream's kind), each a heap message. */
static void *exec_output(const void *out, size_t out_len, const char *errs, int exited,
			 int32_t code)
{
	Kiyot__Cell__V1__ExecOutput o = KIYOT__CELL__V1__EXEC_OUTPUT__INIT;

	o.stdout.data = (uint8_t *)out;
	o.stdout.len = out_len;
	o.stderr.data = (uint8_t *)errs;
	o.stderr.len = errs ? strlen(errs) : 0;
	o.exited = exited;
	o.exit_code = code;
	return cri_msg_copy(&o.base);
}

static void *attach_output(const void *out, size_t out_len, int first, int has_stdin, int detached)
{
	Kiyot__Cell__V1__AttachOutput o = KIYOT__CELL__V1__ATTACH_OUTPUT__INIT;

	o.stdout.data = (uint8_t *)out;
	o.stdout.len = out_len;
	o.attached = first;
	o.stdin = has_stdin;
	o.detached = detached;
	return cri_msg_copy(&o.base);
}

static void *portforward_output(const void *data, size_t len, int closed)
{
	Kiyot__Cell__V1__PortForwardOutput o = KIYOT__CELL__V1__PORT_FORWARD_OUTPUT__INIT;

	o.data.data = (uint8_t *)data;
	o.data.len = len;
	o.closed = closed;
	return cri_msg_copy(&o.base);
}

/* The start of an Exec: cat echoes its input until it closes, other commands run at once. */
static void exec_start(struct fake_agent *fa, struct agent_stream *s,
		       const Kiyot__Cell__V1__ExecInput *in)
{
	_cleanup_free_ char *out = NULL;
	_cleanup_free_ char *errs = NULL;
	int32_t code;

	if (in->n_cmd && strcmp(in->cmd[0], "cat") == 0) {
		s->cat = true;
		return;
	}
	code = in->n_cmd ? fa_run_command(in->cmd, in->n_cmd, &out, &errs) : 127;
	fa_stream_push(fa, s, exec_output(out, out ? strlen(out) : 0, errs, 1, code));
	s->end = 1;
}

/* One message from kiyot on a bidirectional stream: its input echoes back. Needs fa->lock. */
static void stream_input(struct fake_agent *fa, struct agent_stream *s, const ProtobufCMessage *m)
{
	if (s->kind == STREAM_EXEC) {
		const Kiyot__Cell__V1__ExecInput *in = (const void *)m;

		if (in->stdin_data.len && s->cat)
			fa_stream_push(fa, s,
				       exec_output(in->stdin_data.data, in->stdin_data.len, NULL, 0,
						   0));
		if (in->stdin_close && s->cat) {
			fa_stream_push(fa, s, exec_output(NULL, 0, NULL, 1, 0));
			s->end = 1;
		}
	} else if (s->kind == STREAM_ATTACH) {
		const Kiyot__Cell__V1__AttachInput *in = (const void *)m;

		if (in->stdin_data.len)
			fa_stream_push(fa, s,
				       attach_output(in->stdin_data.data, in->stdin_data.len, 0, 0,
						     0));
		if (in->stdin_close) {
			fa_stream_push(fa, s, attach_output(NULL, 0, 0, 0, 1));
			s->end = 1;
		}
	} else if (s->kind == STREAM_PORTFORWARD) {
		const Kiyot__Cell__V1__PortForwardInput *in = (const void *)m;

		if (in->data.len)
			fa_stream_push(fa, s, portforward_output(in->data.data, in->data.len, 0));
		if (in->close) {
			fa_stream_push(fa, s, portforward_output(NULL, 0, 1));
			s->end = 1;
		}
	}
}

/* The thread of an Exec, Attach or PortForward: the callbacks as the real client makes them,
 * each message when asked for (s->asked), on_sent for each message taken, then on_end once
 * the end is asked for (or at once when cancelled), as the last use of s. */
static void *stream_thread(void *arg)
{
	struct agent_stream *s = arg;
	struct fake_agent *fa = s->fa;
	struct err err = ERR_INIT;
	int ret;

	pthread_mutex_lock(&fa->lock);
	for (;;) {
		ProtobufCMessage *m;

		if (s->unsent) {
			s->unsent--;
			pthread_mutex_unlock(&fa->lock);
			s->cbs.on_sent(s->arg, 0);
			pthread_mutex_lock(&fa->lock);
			continue;
		}
		if (s->cancelled) {
			ret = err_set(&err, ECANCELED, "the stream was cancelled");
			break;
		}
		if (s->asked && s->n) {
			s->asked--;
			m = s->q[s->head++];
			s->n--;
			pthread_mutex_unlock(&fa->lock);
			s->cbs.on_msg(s->arg, m);
			pthread_mutex_lock(&fa->lock);
			continue;
		}
		if (s->asked && s->end) {
			ret = s->end > 0 ? 0 : err_set(&err, -s->end, "the agent went away");
			break;
		}
		pthread_cond_wait(&fa->cond, &fa->lock);
	}
	fa->watch_threads--;
	pthread_cond_broadcast(&fa->cond);
	pthread_mutex_unlock(&fa->lock);
	s->cbs.on_end(s->arg, ret, &err);
	return NULL;
}

int fa_open_stream(void *self, struct agent_conn *conn, const char *method,
		   const ProtobufCMessage *first, const ProtobufCMessageDescriptor *out_desc,
		   const struct agent_stream_cbs *cbs, void *arg, struct agent_stream **out,
		   struct err *err)
{
	struct fake_agent *fa = self;
	struct agent_stream *s;
	enum stream_kind kind;
	pthread_attr_t attr;
	pthread_t t;

	(void)out_desc;
	if (fa_op_enter(fa, FAKE_AGENT_STREAM, 0, err) < 0)
		return -err->code;
	if (strcmp(method, "Exec") == 0)
		kind = STREAM_EXEC;
	else if (strcmp(method, "Attach") == 0)
		kind = STREAM_ATTACH;
	else if (strcmp(method, "PortForward") == 0)
		kind = STREAM_PORTFORWARD;
	else
		return err_set(err, ENOSYS, "method %s is not served", method);
	pthread_mutex_lock(&fa->lock);
	if (!fa_conn_cell(fa, conn, err)) {
		pthread_mutex_unlock(&fa->lock);
		return -err->code;
	}
	s = stream_new(fa, kind, conn->cell_id);
	s->fa = fa;
	s->cbs = *cbs;
	s->arg = arg;
	s->unsent = 1; /* first */
	if (kind == STREAM_EXEC) {
		exec_start(fa, s, (const void *)first);
	} else if (kind == STREAM_ATTACH) {
		const Kiyot__Cell__V1__AttachInput *in = (const void *)first;

		fa_stream_push(fa, s, attach_output(NULL, 0, 1, in->stdin, 0));
	}
	stream_input(fa, s, first);
	fa->watch_threads++;
	pthread_mutex_unlock(&fa->lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, stream_thread, s) != 0)
		abort();
	pthread_attr_destroy(&attr);
	*out = s;
	return 0;
}

void fa_stream_read(void *self, struct agent_stream *s)
{
	struct fake_agent *fa = self;

	pthread_mutex_lock(&fa->lock);
	s->asked++;
	pthread_cond_broadcast(&fa->cond);
	pthread_mutex_unlock(&fa->lock);
}

int fa_stream_send(void *self, struct agent_stream *s, const ProtobufCMessage *msg, struct err *err)
{
	struct fake_agent *fa = self;
	int ret = 0;

	pthread_mutex_lock(&fa->lock);
	if (s->cancelled || s->closed)
		ret = err_set(err, ECANCELED, "the stream ended");
	else if (s->unsent)
		ret = err_set(err, EBUSY, "a message is in flight");
	else if (s->end)
		ret = err_set(err, ECANCELED, "the stream ended");
	else
		stream_input(fa, s, msg);
	if (ret == 0)
		s->unsent++;
	pthread_cond_broadcast(&fa->cond);
	pthread_mutex_unlock(&fa->lock);
	return ret;
}

void fa_stream_close_send(void *self, struct agent_stream *s)
{
	struct fake_agent *fa = self;

	pthread_mutex_lock(&fa->lock);
	s->closed = true;
	if (!s->end)
		s->end = 1;
	pthread_cond_broadcast(&fa->cond);
	pthread_mutex_unlock(&fa->lock);
}

/* Watches' own reading, as their thread does it. */
int fa_next(void *self, struct agent_stream *s, ProtobufCMessage **msg, struct err *err)
{
	struct fake_agent *fa = self;
	int ret;

	pthread_mutex_lock(&fa->lock);
	for (;;) {
		if (s->cancelled) {
			ret = err_set(err, ECANCELED, "the stream was cancelled");
			break;
		}
		if (s->n) {
			*msg = s->q[s->head++];
			s->n--;
			ret = 1;
			break;
		}
		if (s->end) {
			ret = s->end > 0 ? 0 : err_set(err, -s->end, "the agent went away");
			break;
		}
		pthread_cond_wait(&fa->cond, &fa->lock);
	}
	pthread_mutex_unlock(&fa->lock);
	return ret;
}

void fa_cancel(void *self, struct agent_stream *s)
{
	struct fake_agent *fa = self;

	pthread_mutex_lock(&fa->lock);
	s->cancelled = true;
	pthread_cond_broadcast(&fa->cond);
	pthread_mutex_unlock(&fa->lock);
}

void fa_stream_release(struct agent_stream *s)
{
	for (size_t i = 0; i < s->n; i++)
		protobuf_c_message_free_unpacked(s->q[s->head + i], NULL);
	free(s->q);
	free(s->cell_id);
	free(s);
}

void fa_stream_free(void *self, struct agent_stream *s)
{
	struct fake_agent *fa = self;

	if (!s)
		return;
	pthread_mutex_lock(&fa->lock);
	for (struct agent_stream **pp = &fa->streams; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&fa->lock);
	fa_stream_release(s);
}
