/*
 * session.c: an exec or attach session of the streaming server. The client's channels (stdin,
 * stdout, stderr, error, resize) arrive as SPDY streams named by their streamType header, or
 * as WebSocket channels 0-4; they are joined to the cell agent's Exec stream (a new command)
 * or Attach stream (the container's own stdio, held by its shim). No thread of its own: the
 * session is a state machine on the streaming server's loop, driven by its connection and by
 * its agent stream's callbacks (stream_internal.h). Each direction is bounded: the agent's
 * next message is asked for only while the client's output is under CONN_OUT_HIGH, and the
 * client is read only while its input waiting for the agent is under QUEUE_MAX (TCP or gRPC
 * flow control then holds the far end), so neither direction can stall the other.
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
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cellagent.pb-c.h"
#include "chunkq.h"
#include "evloop.h"
#include "log.h"
#include "spdy.h"
#include "ws.h"
#include "xalloc.h"

/* The client's input held for the agent before the client is no longer read. */
#define QUEUE_MAX (1024 * 1024)
/* How long the client has to open the channels it asked for. */
#define CHANNELS_TIMEOUT_MS 30000
/* The most of the client's stdin joined into one message to the agent. */
#define IN_SEND_MAX (256 * 1024)
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

struct sess {
	struct stream_server *srv;
	struct conn *c; /* NULL once the client's side ended */
	struct stream_request *req;
	bool status_json;
	uint32_t sid[NCHAN]; /* SPDY stream of each channel; 0 none */
	struct buf resize;   /* partial resize JSON */
	struct astream as;
	struct chunkq in;	     /* stdin for the agent */
	unsigned resize_w, resize_h; /* the terminal's last size, */
	bool resize_pending;	     /* not yet sent */
	bool started;		     /* the agent's stream was opened */
	bool over;		     /* the end went to the client */
	bool stdin_ended;	     /* the client's stdin ended: nothing more of it is taken */
	bool agent_closed;	     /* the agent takes no more input */
	struct evloop_timer *channels_timer;
	int depth; /* calls into the session running */
};

static void sess_maybe_free(struct sess *s);

static struct sess *sess_enter(void *arg)
{
	struct sess *s = arg;

	s->depth++;
	return s;
}

static void sess_leave(struct sess *s)
{
	s->depth--;
	sess_maybe_free(s);
}

/* Frees the session once neither its client nor its agent stream is left, and no call into
 * it is still running (every way in holds it: sess_enter, sess_leave). */
static void sess_maybe_free(struct sess *s)
{
	if (s->depth || s->c || (s->started && !s->as.ended))
		return;
	evloop_timer_del(s->channels_timer);
	astream_free(&s->as);
	chunkq_drop(&s->in);
	buf_release(&s->resize);
	if (s->req)
		stream_session_done(s->srv, s->req);
	stream_release(s->srv);
	free(s);
}

/* ---- the agent's side ---- */

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

/* Sends one input message on the agent's stream: stdin bytes (and their end) when k, else the
 * terminal's size. */
static int agent_send(struct sess *s, const struct chunk *k, struct err *err)
{
	Kiyot__Cell__V1__TerminalSize size = KIYOT__CELL__V1__TERMINAL_SIZE__INIT;
	Kiyot__Cell__V1__TerminalSize *resize = NULL;
	ProtobufCBinaryData data = { 0, NULL };
	bool close = false;

	if (!k) {
		size.width = s->resize_w;
		size.height = s->resize_h;
		resize = &size;
	} else {
		data = (ProtobufCBinaryData){ k->len, (uint8_t *)k->data };
		close = k->end;
	}
	if (s->req->kind == STREAM_ATTACH) {
		Kiyot__Cell__V1__AttachInput in = KIYOT__CELL__V1__ATTACH_INPUT__INIT;

		in.resize = resize;
		in.stdin_data = data;
		in.stdin_close = close;
		return astream_send(&s->as, &in.base, err);
	} else {
		Kiyot__Cell__V1__ExecInput in = KIYOT__CELL__V1__EXEC_INPUT__INIT;

		in.resize = resize;
		in.stdin_data = data;
		in.stdin_close = close;
		return astream_send(&s->as, &in.base, err);
	}
}

/* Sends the client's input to the agent, one message in flight: the terminal's size first
 * when it changed, then the stdin bytes waiting, joined up to IN_SEND_MAX (each message costs
 * a round through gRPC). The client is read again once what waits is under the bound. */
static void pump(struct sess *s)
{
	struct err err = ERR_INIT;

	while (s->started && !s->agent_closed && !s->as.sending && !s->as.ended &&
	       (s->resize_pending || chunkq_head(&s->in))) {
		struct chunk *k = s->resize_pending ? NULL : chunkq_take(&s->in, IN_SEND_MAX);
		int ret = agent_send(s, k, &err);

		if (!k)
			s->resize_pending = false;
		if (ret == 0 && k && k->end)
			s->agent_closed = true;
		free(k);
		if (ret < 0) {
			log_debug("stream: %s", err.msg);
			s->agent_closed = true; /* the command's end says the rest */
		}
	}
	if (s->agent_closed)
		chunkq_drop(&s->in);
	if (s->c && s->in.bytes <= QUEUE_MAX)
		conn_pause(s->c, false);
}

/* ---- the client's side ---- */

/* Sends data on a channel (nothing if the client did not ask for it). */
static void send_chan(struct sess *s, enum chan ch, const void *data, size_t len, bool fin)
{
	struct err err = ERR_INIT;

	if (s->c->sp) {
		if (s->sid[ch])
			spdy_send(s->c->sp, s->sid[ch], data, len, fin, &err);
	} else if (len) {
		ws_send(s->c->ws, (uint8_t)ch, data, len, &err);
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
		if (!j)
			break;
		used += jerr.position;
		s->resize_w = (unsigned)json_integer_value(json_object_get(j, "Width"));
		s->resize_h = (unsigned)json_integer_value(json_object_get(j, "Height"));
		s->resize_pending = true;
		json_decref(j);
	}
	pump(s);
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
	if (ch == CH_STDIN && s->req->in && !s->stdin_ended && !s->agent_closed) {
		s->stdin_ended = end;
		chunkq_put(&s->in, data, len, end);
		if (s->in.bytes > QUEUE_MAX)
			conn_pause(s->c, true);
		pump(s);
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
			spdy_reset(s->c->sp, ev->stream_id, SPDY_REFUSED_STREAM, &err);
			return true;
		}
		s->sid[ch] = ev->stream_id;
		spdy_reply(s->c->sp, ev->stream_id, NULL, 0, false, &err);
		return true;
	}
	case SPDY_EV_DATA:
		ch = chan_of_stream(s, ev->stream_id);
		spdy_consume(s->c->sp, ev->stream_id, ev->len);
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

		if (s->c->sp) {
			struct spdy_event ev;

			n = spdy_feed(s->c->sp, data + off, len - off, &ev, &err);
			more = n >= 0 && spdy_event(s, &ev);
			if (n >= 0 && ev.type == SPDY_EV_NONE && off + (size_t)n >= len) {
				off += (size_t)n;
				break;
			}
		} else {
			struct ws_event ev;

			n = ws_feed(s->c->ws, data + off, len - off, &ev, &err);
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

	if (!s->c->sp)
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

/* The client's side ends: it learns the end at once (kubectl returns on it), its connection
 * closes once it read everything; the agent's stream is wound up after (its end frees the
 * session). */
static void finish(struct sess *s, int code, const char *failure)
{
	struct err err = ERR_INIT;

	s->over = true;
	evloop_timer_del(s->channels_timer);
	s->channels_timer = NULL;
	send_status(s, code, failure);
	for (int c = CH_STDOUT; c <= CH_ERROR; c++)
		send_chan(s, (enum chan)c, NULL, 0, true);
	if (s->c->sp)
		spdy_goaway(s->c->sp, SPDY_GOAWAY_OK);
	else
		ws_close(s->c->ws, WS_CLOSE_NORMAL, "", &err);
	conn_end(s->c, CONN_LINGER_MS);
	s->c = NULL;
	chunkq_drop(&s->in);
	if (s->started && !s->as.ended) {
		astream_close_send(&s->as);
		astream_read(&s->as); /* on to its end */
	}
}

/* The client is gone (or broke the protocol, or never opened its channels): an exec's
 * command is killed with its stream, an attached container runs on. */
static void client_gone(struct sess *s, const char *why, int linger_ms)
{
	log_info("stream %s: %s", s->req->kind == STREAM_ATTACH ? "attach" : "exec", why);
	evloop_timer_del(s->channels_timer);
	s->channels_timer = NULL;
	conn_end(s->c, linger_ms);
	s->c = NULL;
	chunkq_drop(&s->in);
	if (s->started && !s->as.ended)
		astream_cancel(&s->as);
}

static void agent_msg(void *owner, ProtobufCMessage *m)
{
	struct sess *s = sess_enter(owner);
	struct agent_out o;

	if (!s->c) { /* after the end: read on to the stream's end */
		protobuf_c_message_free_unpacked(m, NULL);
		astream_read(&s->as);
		sess_leave(s);
		return;
	}
	agent_out_of(s, m, &o);
	if (o.out.len)
		send_chan(s, CH_STDOUT, o.out.data, o.out.len, false);
	if (o.err.len)
		send_chan(s, CH_STDERR, o.err.data, o.err.len, false);
	if (o.end) {
		finish(s, o.code, NULL);
	} else {
		conn_flush(s->c);
		if (conn_pending(s->c) <= CONN_OUT_HIGH)
			astream_read(&s->as);
	}
	protobuf_c_message_free_unpacked(m, NULL);
	sess_leave(s);
}

static void agent_sent(void *owner, int ret)
{
	struct sess *s = sess_enter(owner);

	if (ret < 0)
		s->agent_closed = true;
	pump(s);
	sess_leave(s);
}

static void agent_end(void *owner, int ret, const char *error)
{
	struct sess *s = sess_enter(owner);

	(void)ret;
	if (s->c)
		finish(s, 0, error ? error : "the cell's agent ended the stream");
	sess_leave(s);
}

static const struct astream_ops agent_ops = { agent_msg, agent_sent, agent_end };

/* Opens the agent's stream: Exec with the command, or Attach to the container. */
static int agent_open(struct sess *s, struct err *err)
{
	const struct stream_request *r = s->req;

	if (r->kind == STREAM_ATTACH) {
		Kiyot__Cell__V1__AttachInput first = KIYOT__CELL__V1__ATTACH_INPUT__INIT;

		first.unit_id = (char *)r->unit_id;
		first.stdin = r->in;
		return astream_open(&s->as, s->c, r->cell_id, "Attach", &first.base,
				    &kiyot__cell__v1__attach_output__descriptor, &agent_ops, s,
				    err);
	} else {
		Kiyot__Cell__V1__ExecInput first = KIYOT__CELL__V1__EXEC_INPUT__INIT;

		first.unit_id = (char *)r->unit_id;
		first.cmd = (char **)r->cmd;
		first.n_cmd = r->n_cmd;
		first.tty = r->tty;
		first.stdin = r->in;
		return astream_open(&s->as, s->c, r->cell_id, "Exec", &first.base,
				    &kiyot__cell__v1__exec_output__descriptor, &agent_ops, s, err);
	}
}

/* Once the client opened the channels it asked for, the agent's stream. */
static void maybe_start(struct sess *s)
{
	struct err err = ERR_INIT;

	if (s->started || s->over || !s->c || !channels_ready(s))
		return;
	evloop_timer_del(s->channels_timer);
	s->channels_timer = NULL;
	if (agent_open(s, &err) < 0) {
		log_info("stream %s: %s", s->req->kind == STREAM_ATTACH ? "attach" : "exec",
			 err.msg);
		finish(s, 0, err.msg);
		return;
	}
	s->started = true;
	astream_read(&s->as);
	pump(s);
}

static void sess_input(void *arg, const uint8_t *data, size_t len)
{
	struct sess *s = sess_enter(arg);

	if (!feed(s, data, len)) {
		/* a protocol error's GOAWAY or close frame goes out before the end */
		client_gone(s, "the client ended the session or broke the protocol",
			    CONN_LINGER_MS);
	} else {
		maybe_start(s);
		if (s->c)
			conn_flush(s->c);
	}
	sess_leave(s);
}

static void sess_writable(void *arg)
{
	struct sess *s = sess_enter(arg);

	if (s->started && !s->over)
		astream_read(&s->as);
	sess_leave(s);
}

static void sess_gone(void *arg)
{
	struct sess *s = sess_enter(arg);

	client_gone(s, "the client went away", 0);
	sess_leave(s);
}

static const struct conn_ops sess_conn_ops = { sess_input, sess_writable, sess_gone };

static void channels_timeout(void *arg)
{
	struct sess *s = sess_enter(arg);

	s->channels_timer = NULL;
	client_gone(s, "the client did not open its channels", 0);
	sess_leave(s);
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
		ret = proto ? http_answer_spdy(&out, proto, err)
			    : err_set(err, EPROTO, "port-forward speaks portforward.k8s.io");
		if (!proto)
			http_answer_error(
				&out, 403,
				"X-Accepted-Stream-Protocol-Versions: portforward.k8s.io\r\n",
				"port-forward speaks portforward.k8s.io", err);
		if (ret == 0 && !(s->c->sp = spdy_session_new(NULL, err)))
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
		s->status_json = strcmp(proto, "v4.channel.k8s.io") == 0;
		ret = http_answer_spdy(&out, proto, err);
		if (ret == 0 && !(s->c->sp = spdy_session_new(NULL, err)))
			ret = -err->code;
	} else if (up == HTTP_UPGRADE_WS) {
		proto = http_negotiate(http, "Sec-WebSocket-Protocol", ws_subprotocols);
		if (proto && strcmp(proto, "portforward.k8s.io") == 0)
			proto = NULL;
		ws_codec_of(proto, &codec);
		s->status_json = proto && (strstr(proto, "v4.") || strstr(proto, "v5."));
		ret = http_answer_ws(&out, http, proto, err);
		if (ret == 0 && !(s->c->ws = ws_session_new(codec, err)))
			ret = -err->code;
	} else {
		http_answer_error(&out, 400, NULL,
				  "upgrade to SPDY/3.1 or websocket to use this stream", err);
		ret = err_set(err, EPROTO, "not an upgrade request");
	}
out:
	conn_put(s->c, out.data, out.len);
	buf_release(&out);
	return ret;
}

void stream_session_start(struct conn *c, const struct http_req *http, struct stream_request *req,
			  const uint8_t *head_rest, size_t rest_len)
{
	struct sess *s;
	struct err err = ERR_INIT;

	if (req->kind == STREAM_PORTFORWARD && http_upgrade_of(http) == HTTP_UPGRADE_WS) {
		stream_port_forward_ws(c, http, req, head_rest, rest_len);
		return;
	}
	s = sess_enter(xcalloc(1, sizeof(*s)));
	s->srv = c->srv;
	s->c = c;
	s->req = req;
	stream_hold(s->srv);
	if (upgrade(s, http, &err) < 0) {
		log_info("stream: %s", err.msg);
		conn_end(c, CONN_LINGER_MS); /* the answer says why */
		s->c = NULL;
	} else if (req->kind == STREAM_PORTFORWARD) {
		s->req = NULL; /* the port-forward takes it */
		s->c = NULL;
		stream_port_forward(c, req, head_rest, rest_len);
	} else {
		conn_attach(c, &sess_conn_ops, s);
		s->channels_timer =
			evloop_timer_add(c->loop, CHANNELS_TIMEOUT_MS, channels_timeout, s);
		if (rest_len)
			sess_input(s, head_rest, rest_len);
		else
			maybe_start(s);
		if (s->c) /* the answer, and a SETTINGS frame */
			conn_flush(s->c);
	}
	sess_leave(s);
}
