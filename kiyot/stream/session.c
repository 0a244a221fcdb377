/*
 * session.c: an exec or attach session of the streaming server. The client's channels (stdin,
 * stdout, stderr, error, resize) arrive as SPDY streams named by their streamType header, or
 * as WebSocket channels 0-4; they are joined to the cell agent's Exec stream (a new command)
 * or Attach stream (the container's own stdio, held by its shim). Three threads: this one owns
 * the socket and the protocol; a reader takes the agent's output into a bounded queue; a
 * writer sends the client's input to the agent from another bounded queue. A full queue stops
 * its producer (TCP or gRPC flow control then holds the far end), so neither direction can
 * stall the other.
 *
 * The end of an exec: the command's exit code goes on the error channel as a Status (protocol
 * v4 and later: Success, or Failure with reason NonZeroExitCode and the code as an ExitCode
 * cause; earlier ones: text), every channel is closed and the connection with it. A client
 * that goes away cancels the agent's stream, which kills the command. The end of an attach,
 * when the container's run ended or its shim let the client go (its stdin ended), is a
 * Success as the kubelet's own server sends it; a client that goes away is let go and the
 * container runs on.
 */
#include "stream_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "cells/cells.h"
#include "clock.h"
#include "log.h"
#include "spdy.h"
#include "ws.h"
#include "xalloc.h"

/* Bytes queued each way before the producer waits. */
#define QUEUE_MAX (1024 * 1024)
/* How long a finished session waits for its client to close. */
#define LINGER_MS 2000
/* How long the client has to open the channels it asked for. */
#define CHANNELS_TIMEOUT_MS 30000
/* A resize message is a small JSON object. */
#define RESIZE_MAX 4096

enum chan {
	CH_STDIN,
	CH_STDOUT,
	CH_STDERR,
	CH_ERROR,
	CH_RESIZE,
	NCHAN
};

static const char *const chan_names[NCHAN] = { "stdin", "stdout", "stderr", "error", "resize" };

/* The remotecommand protocols, newest first. */
static const char *const spdy_protocols[] = { "v4.channel.k8s.io", "v3.channel.k8s.io",
					      "v2.channel.k8s.io", "channel.k8s.io", NULL };

struct msg {
	struct msg *next;
	enum chan ch;  /* output: CH_STDOUT/CH_STDERR; input: CH_STDIN or CH_RESIZE */
	bool end;      /* input: stdin closed; output: the command ended (code) */
	int code;      /* output with end: exit code */
	unsigned w, h; /* input resize */
	size_t len;
	uint8_t data[];
};

struct queue {
	struct msg *head, *tail;
	size_t bytes;
	bool closed; /* no more messages will come */
};

struct sess {
	struct cellmgr *cells;
	int fd;
	const struct stream_request *req;
	bool spdy, status_json;
	struct spdy_session *sp;
	struct ws_session *ws;
	uint32_t sid[NCHAN]; /* SPDY stream of each channel; 0 none */
	struct buf resize;   /* partial resize JSON */
	struct cell_stream *cs;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct queue out, in;
	char *agent_error; /* why the agent's stream ended, when it did not end well */
	int wake[2];	   /* the reader pokes the socket thread */
	bool gone;	   /* the client went away */
};

bool stream_write_all(int fd, const uint8_t *data, size_t len)
{
	while (len) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		data += n;
		len -= (size_t)n;
	}
	return true;
}

/* ---- queues ---- */

static struct msg *msg_new(enum chan ch, const void *data, size_t len)
{
	struct msg *m = xcalloc(1, sizeof(*m) + len);

	m->ch = ch;
	m->len = len;
	if (len)
		memcpy(m->data, data, len);
	return m;
}

/* Appends m, with wait while the queue is full (unless the session is gone: m is freed). The
 * socket loop never waits (it must keep seeing the client leave): it bounds the input queue by
 * reading the client only while there is room, one read past QUEUE_MAX at most. */
static void queue_put(struct sess *s, struct queue *q, struct msg *m, bool wait)
{
	pthread_mutex_lock(&s->mu);
	while (wait && q->bytes > QUEUE_MAX && !s->gone)
		pthread_cond_wait(&s->cond, &s->mu);
	if (s->gone) {
		pthread_mutex_unlock(&s->mu);
		free(m);
		return;
	}
	if (q->tail)
		q->tail->next = m;
	else
		q->head = m;
	q->tail = m;
	q->bytes += m->len;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

/* Takes the first message; NULL when empty (wait: until one comes or the queue closes). */
static struct msg *queue_take(struct sess *s, struct queue *q, bool wait)
{
	struct msg *m;

	pthread_mutex_lock(&s->mu);
	while (wait && !q->head && !q->closed && !s->gone)
		pthread_cond_wait(&s->cond, &s->mu);
	m = q->head;
	if (m) {
		q->head = m->next;
		if (!q->head)
			q->tail = NULL;
		q->bytes -= m->len;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->mu);
	return m;
}

static void queue_close(struct sess *s, struct queue *q)
{
	pthread_mutex_lock(&s->mu);
	q->closed = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

static void queue_drop(struct queue *q)
{
	while (q->head) {
		struct msg *m = q->head;

		q->head = m->next;
		free(m);
	}
	q->tail = NULL;
	q->bytes = 0;
}

/* ---- the agent's side ---- */

static void poke(struct sess *s)
{
	if (write(s->wake[1], "x", 1) < 0) {
		/* the pipe is full: the socket thread is awake anyway */
	}
}

/* What one message of the agent's stream says, whichever the call. */
struct agent_out {
	ProtobufCBinaryData out, err;
	bool end;
	int code;
};

static void agent_out_of(const struct sess *s, const ProtobufCMessage *m, struct agent_out *o)
{
	if (s->req->kind == STREAM_ATTACH) {
		const Kiyot__Cell__V1__AttachOutput *a = (const void *)m;

		/* an attach ends with Success whatever the container's exit code */
		*o = (struct agent_out){ a->stdout, a->stderr, a->exited || a->detached, 0 };
	} else {
		const Kiyot__Cell__V1__ExecOutput *x = (const void *)m;

		*o = (struct agent_out){ x->stdout, x->stderr, x->exited, x->exit_code };
	}
}

/* The agent's output into the out queue, then its end (with the exit code or an error). */
static void *reader_thread(void *arg)
{
	struct sess *s = arg;
	struct err err = ERR_INIT;
	ProtobufCMessage *m = NULL;
	int ret;

	while ((ret = cells_stream_next(s->cs, &m, &err)) == 1) {
		struct agent_out o;

		agent_out_of(s, m, &o);
		if (o.out.len)
			queue_put(s, &s->out, msg_new(CH_STDOUT, o.out.data, o.out.len), true);
		if (o.err.len)
			queue_put(s, &s->out, msg_new(CH_STDERR, o.err.data, o.err.len), true);
		if (o.end) {
			struct msg *e = msg_new(CH_ERROR, NULL, 0);

			e->end = true;
			e->code = o.code;
			queue_put(s, &s->out, e, true);
		}
		protobuf_c_message_free_unpacked(m, NULL);
		poke(s);
	}
	pthread_mutex_lock(&s->mu);
	if (ret < 0 && !s->agent_error)
		s->agent_error = xstrdup(err.msg);
	pthread_mutex_unlock(&s->mu);
	queue_close(s, &s->out);
	poke(s);
	return NULL;
}

/* Sends one input message (stdin bytes or their end, or a size) on the agent's stream. */
static int agent_send(struct sess *s, const struct msg *m, struct err *err)
{
	Kiyot__Cell__V1__TerminalSize size = KIYOT__CELL__V1__TERMINAL_SIZE__INIT;
	Kiyot__Cell__V1__TerminalSize *resize = NULL;
	ProtobufCBinaryData data = { 0, NULL };
	bool close = false;

	if (m->ch == CH_RESIZE) {
		size.width = m->w;
		size.height = m->h;
		resize = &size;
	} else {
		data = (ProtobufCBinaryData){ m->len, (uint8_t *)m->data };
		close = m->end;
	}
	if (s->req->kind == STREAM_ATTACH) {
		Kiyot__Cell__V1__AttachInput in = KIYOT__CELL__V1__ATTACH_INPUT__INIT;

		in.resize = resize;
		in.stdin_data = data;
		in.stdin_close = close;
		return cells_stream_send(s->cs, &in.base, err);
	} else {
		Kiyot__Cell__V1__ExecInput in = KIYOT__CELL__V1__EXEC_INPUT__INIT;

		in.resize = resize;
		in.stdin_data = data;
		in.stdin_close = close;
		return cells_stream_send(s->cs, &in.base, err);
	}
}

/* The client's input to the agent, in order, until stdin ends or the session does. */
static void *writer_thread(void *arg)
{
	struct sess *s = arg;
	struct err err = ERR_INIT;
	struct msg *m;

	while ((m = queue_take(s, &s->in, true))) {
		bool was_full;
		int ret;

		/* the socket loop stops reading the client while the queue is full: wake it once
		 * there is room, whether or not the command says anything */
		pthread_mutex_lock(&s->mu);
		was_full = s->in.bytes + m->len > QUEUE_MAX;
		pthread_mutex_unlock(&s->mu);
		if (was_full)
			poke(s);
		ret = agent_send(s, m, &err);
		free(m);
		if (ret < 0)
			break;
	}
	return NULL;
}

/* Opens the agent's stream: Exec with the command, or Attach to the container. */
static int agent_open(struct sess *s, struct err *err)
{
	const struct stream_request *r = s->req;

	if (r->kind == STREAM_ATTACH) {
		Kiyot__Cell__V1__AttachInput first = KIYOT__CELL__V1__ATTACH_INPUT__INIT;

		first.unit_id = (char *)r->unit_id;
		first.stdin = r->in;
		return cells_stream_open(s->cells, r->cell_id, "Attach", &first.base,
					 &kiyot__cell__v1__attach_output__descriptor, &s->cs, err);
	} else {
		Kiyot__Cell__V1__ExecInput first = KIYOT__CELL__V1__EXEC_INPUT__INIT;

		first.unit_id = (char *)r->unit_id;
		first.cmd = (char **)r->cmd;
		first.n_cmd = r->n_cmd;
		first.tty = r->tty;
		first.stdin = r->in;
		return cells_stream_open(s->cells, r->cell_id, "Exec", &first.base,
					 &kiyot__cell__v1__exec_output__descriptor, &s->cs, err);
	}
}

/* ---- the client's side ---- */

/* Writes out what the protocol has queued; false when the client is gone. */
static bool flush(struct sess *s)
{
	const uint8_t *p;
	size_t n;

	if (s->spdy) {
		while ((p = spdy_output(s->sp, &n)) && n) {
			if (!stream_write_all(s->fd, p, n))
				return false;
			spdy_output_consume(s->sp, n);
		}
	} else {
		while ((p = ws_output(s->ws, &n)) && n) {
			if (!stream_write_all(s->fd, p, n))
				return false;
			ws_output_consume(s->ws, n);
		}
	}
	return true;
}

/* Sends data on a channel (nothing if the client did not ask for it). */
static void send_chan(struct sess *s, enum chan ch, const void *data, size_t len, bool fin)
{
	struct err err = ERR_INIT;

	if (s->spdy) {
		if (s->sid[ch])
			spdy_send(s->sp, s->sid[ch], data, len, fin, &err);
	} else if (len) {
		ws_send(s->ws, (uint8_t)ch, data, len, &err);
	}
}

/* Parses complete {"Width":w,"Height":h} objects out of the resize bytes. */
static void resize_input(struct sess *s, const uint8_t *data, size_t len)
{
	struct err err = ERR_INIT;
	size_t used = 0;

	if (buf_append(&s->resize, data, len, &err) < 0 || s->resize.len > RESIZE_MAX) {
		buf_reset(&s->resize);
		return;
	}
	for (;;) {
		json_error_t jerr;
		json_t *j = json_loadb(s->resize.data + used, s->resize.len - used,
				       JSON_DISABLE_EOF_CHECK, &jerr);
		struct msg *m;

		if (!j)
			break;
		used += jerr.position;
		m = msg_new(CH_RESIZE, NULL, 0);
		m->w = (unsigned)json_integer_value(json_object_get(j, "Width"));
		m->h = (unsigned)json_integer_value(json_object_get(j, "Height"));
		json_decref(j);
		queue_put(s, &s->in, m, false);
	}
	if (used) {
		char *rest = xstrndup(s->resize.data + used, s->resize.len - used);

		buf_reset(&s->resize);
		buf_append(&s->resize, rest, strlen(rest), &err);
		free(rest);
	}
}

/* One input event from the client: stdin bytes or its end, or a resize. */
static void client_input(struct sess *s, enum chan ch, const uint8_t *data, size_t len, bool end)
{
	if (ch == CH_STDIN && s->req->in) {
		struct msg *m = msg_new(CH_STDIN, data, len);

		m->end = end;
		queue_put(s, &s->in, m, false);
	} else if (ch == CH_RESIZE && len) {
		resize_input(s, data, len);
	}
}

static enum chan chan_of_stream(struct sess *s, uint32_t id)
{
	for (int c = 0; c < NCHAN; c++)
		if (s->sid[c] == id)
			return (enum chan)c;
	return NCHAN;
}

/* Handles one SPDY event; false when the session is over for the client. */
static bool spdy_event(struct sess *s, const struct spdy_event *ev)
{
	struct err err = ERR_INIT;
	enum chan ch;

	switch (ev->type) {
	case SPDY_EV_STREAM: {
		const char *type = spdy_header_get(ev->headers, ev->nheaders, "streamtype");

		for (ch = 0; ch < NCHAN && (!type || strcmp(type, chan_names[ch]) != 0); ch++)
			;
		if (ch == NCHAN || s->sid[ch]) {
			spdy_reset(s->sp, ev->stream_id, SPDY_REFUSED_STREAM, &err);
			return true;
		}
		s->sid[ch] = ev->stream_id;
		spdy_reply(s->sp, ev->stream_id, NULL, 0, false, &err);
		return true;
	}
	case SPDY_EV_DATA:
		ch = chan_of_stream(s, ev->stream_id);
		spdy_consume(s->sp, ev->stream_id, ev->len);
		if (ch != NCHAN)
			client_input(s, ch, ev->data, ev->len, false);
		return true;
	case SPDY_EV_END:
		if (chan_of_stream(s, ev->stream_id) == CH_STDIN)
			client_input(s, CH_STDIN, NULL, 0, true);
		return true;
	case SPDY_EV_RESET:
		return chan_of_stream(s, ev->stream_id) == NCHAN ||
		       chan_of_stream(s, ev->stream_id) == CH_RESIZE;
	case SPDY_EV_GOAWAY:
		return false;
	default:
		return true;
	}
}

static bool ws_event(struct sess *s, const struct ws_event *ev)
{
	switch (ev->type) {
	case WS_EV_DATA:
		if (ev->channel < NCHAN)
			client_input(s, (enum chan)ev->channel, ev->data, ev->len, false);
		return true;
	case WS_EV_CLOSE_CHANNEL:
		if (ev->channel == CH_STDIN)
			client_input(s, CH_STDIN, NULL, 0, true);
		return true;
	case WS_EV_CLOSE:
		return false;
	default:
		return true;
	}
}

/* Feeds bytes from the client; false when it ended the session or broke the protocol. */
static bool feed(struct sess *s, const uint8_t *data, size_t len)
{
	struct err err = ERR_INIT;
	size_t off = 0;

	for (;;) {
		ssize_t n;
		bool more;

		if (s->spdy) {
			struct spdy_event ev;

			n = spdy_feed(s->sp, data + off, len - off, &ev, &err);
			more = n >= 0 && spdy_event(s, &ev);
			if (n >= 0 && ev.type == SPDY_EV_NONE && off + (size_t)n >= len) {
				off += (size_t)n;
				break;
			}
		} else {
			struct ws_event ev;

			n = ws_feed(s->ws, data + off, len - off, &ev, &err);
			more = n >= 0 && ws_event(s, &ev);
			if (n >= 0 && ev.type == WS_EV_NONE && off + (size_t)n >= len) {
				off += (size_t)n;
				break;
			}
		}
		if (n < 0 || !more) {
			if (n < 0)
				log_debug("stream: %s", err.msg);
			return false;
		}
		off += (size_t)n;
	}
	return true;
}

/* The channels the client asked for, as the kubelet's server expects them. */
static bool channels_ready(const struct sess *s)
{
	const struct stream_request *r = s->req;

	if (!s->spdy)
		return true;
	return s->sid[CH_ERROR] && (!r->in || s->sid[CH_STDIN]) && (!r->out || s->sid[CH_STDOUT]) &&
	       (r->tty || !r->err || s->sid[CH_STDERR]);
}

/* The end on the error channel: a Status (v4) or text (older protocols). */
static void send_status(struct sess *s, int code, const char *failure)
{
	json_t *st;
	char *text;

	if (!failure && code == 0) {
		st = json_pack("{s:{},s:s}", "metadata", "status", "Success");
	} else if (!failure) {
		_cleanup_free_ char *msg = xasprintf("command terminated with non-zero exit code: "
						     "exit status %d",
						     code);
		_cleanup_free_ char *scode = xasprintf("%d", code);

		st = json_pack("{s:{},s:s,s:s,s:s,s:{s:[{s:s,s:s}]}}", "metadata", "status",
			       "Failure", "message", msg, "reason", "NonZeroExitCode", "details",
			       "causes", "reason", "ExitCode", "message", scode);
	} else {
		st = json_pack("{s:{},s:s,s:s,s:s}", "metadata", "status", "Failure", "message",
			       failure, "reason", "InternalError");
	}
	if (!s->status_json) {
		_cleanup_free_ char *t = failure ? xstrdup(failure)
						 : xasprintf("command terminated with non-zero "
							     "exit code: exit status %d",
							     code);

		if (failure || code)
			send_chan(s, CH_ERROR, t, strlen(t), false);
		json_decref(st);
		return;
	}
	text = json_dumps(st, JSON_COMPACT);
	json_decref(st);
	send_chan(s, CH_ERROR, text, strlen(text), false);
	free(text);
}

/* Sends what the agent queued; true once the command ended and all was sent. */
static bool drain_output(struct sess *s, bool *over)
{
	struct msg *m;

	while ((m = queue_take(s, &s->out, false))) {
		if (m->end) {
			send_status(s, m->code, NULL);
			*over = true;
		} else {
			send_chan(s, m->ch, m->data, m->len, false);
		}
		free(m);
		if (!flush(s))
			return false;
	}
	pthread_mutex_lock(&s->mu);
	if (s->out.closed && !s->out.head && !*over) {
		send_status(s, 0,
			    s->agent_error ? s->agent_error
					   : "the cell's agent ended the "
					     "stream");
		*over = true;
	}
	pthread_mutex_unlock(&s->mu);
	return flush(s);
}

/* Reads what the client still sends until it closes (at most LINGER_MS): a socket closed with
 * unread input is reset, and a reset makes the client's kernel drop output it has not read. */
static void linger_drain(int fd)
{
	int64_t deadline = clock_mono_ns() + (int64_t)LINGER_MS * 1000000;
	uint8_t buf[4096];

	for (;;) {
		int64_t left = (deadline - clock_mono_ns()) / 1000000;
		struct pollfd p = { fd, POLLIN, 0 };

		if (left <= 0 || poll(&p, 1, (int)left) <= 0 || read(fd, buf, sizeof(buf)) <= 0)
			return;
	}
}

/* The socket loop: client bytes in, agent output out, until the command ends. */
static int run(struct sess *s, const uint8_t *rest, size_t rest_len, struct err *err)
{
	int64_t channels_deadline = clock_mono_ns() + (int64_t)CHANNELS_TIMEOUT_MS * 1000000;
	bool started = false, over = false;
	pthread_t rt, wt;
	uint8_t buf[16384];

	if ((rest_len && !feed(s, rest, rest_len)) || !flush(s))
		return err_set(err, EPIPE, "the client went away");
	while (!over) {
		struct pollfd p[2] = { { s->fd, POLLIN, 0 }, { s->wake[0], POLLIN, 0 } };
		bool room;

		if (!started && channels_ready(s)) {
			if (agent_open(s, err) < 0) {
				send_status(s, 0, err->msg);
				flush(s);
				return -err->code;
			}
			pthread_create(&rt, NULL, reader_thread, s);
			pthread_create(&wt, NULL, writer_thread, s);
			started = true;
		}
		if (!started && clock_mono_ns() > channels_deadline)
			return err_set(err, ETIMEDOUT, "the client did not open its channels");
		pthread_mutex_lock(&s->mu);
		room = s->in.bytes <= QUEUE_MAX;
		pthread_mutex_unlock(&s->mu);
		/* with no room, still see the client hang up (it would go unseen while the command
		 * is quiet, holding the session and the command) */
		p[0].events = room ? POLLIN : POLLRDHUP;
		if (poll(p, 2, started ? -1 : 1000) < 0 && errno != EINTR)
			break;
		if (p[1].revents) {
			char drain[64];

			if (read(s->wake[0], drain, sizeof(drain)) < 0) {
				/* nothing to drain */
			}
			if (!drain_output(s, &over))
				break;
		}
		if (p[0].revents) {
			ssize_t n = room ? read(s->fd, buf, sizeof(buf)) : 0;

			bool ok = n > 0 && feed(s, buf, (size_t)n);

			/* a protocol error's GOAWAY or close frame goes out before the end */
			if (!flush(s) || !ok) {
				pthread_mutex_lock(&s->mu);
				s->gone = true;
				pthread_cond_broadcast(&s->cond);
				pthread_mutex_unlock(&s->mu);
				break;
			}
		}
	}
	if (over) {
		/* the client learns the end at once (kubectl returns on it); the agent's call is
		 * wound up after */
		for (int c = CH_STDOUT; c <= CH_ERROR; c++)
			send_chan(s, (enum chan)c, NULL, 0, true);
		if (s->spdy)
			spdy_goaway(s->sp, SPDY_GOAWAY_OK);
		else
			ws_close(s->ws, WS_CLOSE_NORMAL, "", err);
		flush(s);
		shutdown(s->fd, SHUT_WR); /* the connection's end follows them */
	}
	if (started) {
		if (!over)
			cells_stream_cancel(s->cs); /* the client left: a command is killed */
		queue_close(s, &s->in);
		pthread_join(wt, NULL);
		if (over)
			cells_stream_close_send(s->cs, err);
		pthread_join(rt, NULL);
	}
	if (over)
		linger_drain(s->fd);
	return over ? 0 : err_set(err, EPIPE, "the client went away");
}

/* Answers the upgrade: SPDY/3.1 with a remotecommand protocol, or WebSocket with a channel
 * subprotocol; an HTTP error (with the versions this side speaks) otherwise. */
static int upgrade(struct sess *s, const struct http_req *http, struct err *err)
{
	struct buf out = BUF_INIT;
	enum http_upgrade up = http_upgrade_of(http);
	const char *proto;
	enum ws_codec codec = WS_CODEC_BINARY;
	int ret;

	if (up == HTTP_UPGRADE_SPDY && s->req->kind == STREAM_PORTFORWARD) {
		static const char *const pf_protocols[] = { "portforward.k8s.io", NULL };

		proto = http_negotiate(http, "X-Stream-Protocol-Version", pf_protocols);
		s->spdy = true;
		ret = proto ? http_answer_spdy(&out, proto, err)
			    : err_set(err, EPROTO, "port-forward speaks portforward.k8s.io");
		if (!proto)
			http_answer_error(
				&out, 403,
				"X-Accepted-Stream-Protocol-Versions: portforward.k8s.io\r\n",
				"port-forward speaks portforward.k8s.io", err);
		if (ret == 0 && !(s->sp = spdy_session_new(NULL, err)))
			ret = -err->code;
	} else if (up == HTTP_UPGRADE_SPDY) {
		proto = http_negotiate(http, "X-Stream-Protocol-Version", spdy_protocols);
		if (!proto) {
			http_answer_error(
				&out, 403,
				"X-Accepted-Stream-Protocol-Versions: v4.channel.k8s.io, "
				"v3.channel.k8s.io, v2.channel.k8s.io, channel.k8s.io\r\n",
				"no stream protocol in common", err);
			ret = err_set(err, EPROTO, "no stream protocol in common");
			goto out;
		}
		s->spdy = true;
		s->status_json = strcmp(proto, "v4.channel.k8s.io") == 0;
		ret = http_answer_spdy(&out, proto, err);
		if (ret == 0 && !(s->sp = spdy_session_new(NULL, err)))
			ret = -err->code;
	} else if (up == HTTP_UPGRADE_WS) {
		proto = http_negotiate(http, "Sec-WebSocket-Protocol", ws_subprotocols);
		if (proto && strcmp(proto, "portforward.k8s.io") == 0)
			proto = NULL;
		ws_codec_of(proto, &codec);
		s->status_json = proto && (strstr(proto, "v4.") || strstr(proto, "v5."));
		ret = http_answer_ws(&out, http, proto, err);
		if (ret == 0 && !(s->ws = ws_session_new(codec, err)))
			ret = -err->code;
	} else {
		http_answer_error(&out, 400, NULL,
				  "upgrade to SPDY/3.1 or websocket to use this stream", err);
		ret = err_set(err, EPROTO, "not an upgrade request");
	}
out:
	if (!stream_write_all(s->fd, (const uint8_t *)out.data, out.len) && ret == 0)
		ret = err_set(err, EPIPE, "the client went away");
	buf_release(&out);
	return ret;
}

int stream_session(struct cellmgr *cells, int fd, const struct http_req *http,
		   const struct stream_request *req, const uint8_t *head_rest, size_t rest_len,
		   struct err *err)
{
	struct sess s = { .cells = cells, .fd = fd, .req = req, .wake = { -1, -1 } };
	int ret;

	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cond, NULL);
	ret = upgrade(&s, http, err);
	if (ret == 0 && pipe2(s.wake, O_CLOEXEC | O_NONBLOCK) < 0)
		ret = err_errno(err, "pipe");
	if (ret == 0 && req->kind == STREAM_PORTFORWARD && s.spdy)
		ret = stream_port_forward(cells, fd, req, s.sp, head_rest, rest_len, err);
	else if (req->kind == STREAM_PORTFORWARD && ret == 0)
		ret = err_set(err, ENOSYS, "port-forward over WebSocket is not served yet");
	else if (ret == 0)
		ret = run(&s, head_rest, rest_len, err);
	cells_stream_free(s.cs);
	queue_drop(&s.out);
	queue_drop(&s.in);
	buf_release(&s.resize);
	free(s.agent_error);
	if (s.wake[0] >= 0) {
		close(s.wake[0]);
		close(s.wake[1]);
	}
	spdy_session_free(s.sp);
	ws_session_free(s.ws);
	pthread_mutex_destroy(&s.mu);
	pthread_cond_destroy(&s.cond);
	return ret;
}
