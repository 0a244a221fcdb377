#include "ws.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>
#include <wslay/wslay.h>

#include "outq.h"
#include "xalloc.h"

/* a decoded message waiting to be handed out */
struct item {
	enum ws_event_type type;
	uint8_t channel;
	uint16_t code;
	uint8_t *data; /* owned; NUL-terminated */
	size_t len;
};

struct ws_session {
	wslay_event_context_ptr ctx;
	enum ws_codec codec;
	struct outq out;

	const uint8_t *in; /* the bytes of the current ws_feed() call not yet read by wslay */
	size_t in_len;

	struct item *items;
	size_t nitems, head, cap;
	uint8_t *given; /* the data of the last event handed out */

	int reject;	      /* a close code this layer chose for a bad message, or 0 */
	char reject_why[128]; /* and why */
	bool failed;
	struct err failure;
};

const char *const ws_subprotocols[] = {
	"v5.channel.k8s.io",
	"v4.channel.k8s.io",
	"v4.base64.channel.k8s.io",
	"channel.k8s.io",
	"base64.channel.k8s.io",
	"portforward.k8s.io",
	NULL,
};

int ws_codec_of(const char *subprotocol, enum ws_codec *codec)
{
	static const struct {
		const char *name;
		enum ws_codec codec;
	} map[] = {
		{ "", WS_CODEC_BINARY },
		{ "channel.k8s.io", WS_CODEC_BINARY },
		{ "v4.channel.k8s.io", WS_CODEC_BINARY },
		{ "portforward.k8s.io", WS_CODEC_BINARY },
		{ "base64.channel.k8s.io", WS_CODEC_BASE64 },
		{ "v4.base64.channel.k8s.io", WS_CODEC_BASE64 },
		{ "v5.channel.k8s.io", WS_CODEC_V5 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
		if (strcmp(subprotocol ? subprotocol : "", map[i].name) == 0) {
			*codec = map[i].codec;
			return 0;
		}
	}
	return -ENOENT;
}

/* -------- events -------- */

static void push(struct ws_session *w, enum ws_event_type type, uint8_t channel, uint16_t code,
		 uint8_t *data, size_t len)
{
	if (w->head == w->nitems)
		w->head = w->nitems = 0;
	xgrow((void **)&w->items, &w->cap, w->nitems + 1, sizeof(*w->items));
	w->items[w->nitems++] = (struct item){ type, channel, code, data, len };
}

static bool pop(struct ws_session *w, struct ws_event *ev)
{
	struct item *it;

	if (w->head == w->nitems)
		return false;
	it = &w->items[w->head++];
	ev->type = it->type;
	ev->channel = it->channel;
	ev->data = it->data;
	ev->len = it->len;
	ev->code = it->code;
	ev->reason = it->type == WS_EV_CLOSE ? (const char *)it->data : NULL;
	w->given = it->data;
	return true;
}

static uint8_t *copy(const uint8_t *p, size_t n)
{
	uint8_t *d = xmalloc(n + 1);

	if (n)
		memcpy(d, p, n);
	d[n] = '\0';
	return d;
}

/* Refuses the message being decoded: close with code, and read no further. */
static void reject(struct ws_session *w, int code, const char *why)
{
	w->reject = code;
	snprintf(w->reject_why, sizeof(w->reject_why), "%s", why);
	wslay_event_queue_close(w->ctx, (uint16_t)code, NULL, 0);
	wslay_event_shutdown_read(w->ctx);
}

/* Standard base64 with padding; NULL if p[0..n) is not that. */
static uint8_t *base64_decode(const uint8_t *p, size_t n, size_t *out_len)
{
	size_t pad = 0;
	uint8_t *d;
	int r;

	for (size_t i = 0; i < n; i++) {
		if (!(p[i] == '+' || p[i] == '/' || p[i] == '=' || (p[i] >= '0' && p[i] <= '9') ||
		      ((p[i] | 0x20) >= 'a' && (p[i] | 0x20) <= 'z')))
			return NULL;
	}
	if (n % 4)
		return NULL;
	while (pad < 2 && pad < n && p[n - 1 - pad] == '=')
		pad++;
	if (memchr(p, '=', n - pad))
		return NULL;
	d = xmalloc(n / 4 * 3 + 1);
	r = n ? EVP_DecodeBlock(d, p, (int)n) : 0;
	if (r < 0) {
		free(d);
		return NULL;
	}
	*out_len = (size_t)r - pad;
	return d;
}

/* Queues the event for one message of a channel subprotocol; returns why it is bad, or NULL. */
static const char *channel_message(struct ws_session *w, const uint8_t *m, size_t n)
{
	uint8_t ch = m[0], *data;
	size_t len = n - 1;

	if (w->codec == WS_CODEC_V5 && ch == WS_CLOSE_CHANNEL) {
		if (n != 2)
			return "close-channel message of other than 1 byte";
		push(w, WS_EV_CLOSE_CHANNEL, m[1], 0, NULL, 0);
		return NULL;
	}
	if (w->codec != WS_CODEC_BASE64) {
		push(w, WS_EV_DATA, ch, 0, copy(m + 1, len), len);
		return NULL;
	}
	if (ch < '0' || ch > '9')
		return "base64 message whose channel is not a digit";
	data = base64_decode(m + 1, n - 1, &len);
	if (!data)
		return "base64 message whose data is not base64";
	data[len] = '\0';
	push(w, WS_EV_DATA, (uint8_t)(ch - '0'), 0, data, len);
	return NULL;
}

/* wslay hands over whole messages, reassembled and checked against RFC 6455. */
static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
		   void *user)
{
	struct ws_session *w = user;
	size_t rlen = arg->msg_length > 2 ? arg->msg_length - 2 : 0;
	const char *why;

	(void)ctx;
	switch (arg->opcode) {
	case WSLAY_TEXT_FRAME:
	case WSLAY_BINARY_FRAME:
		/* empty messages carry no channel; Kubernetes skips them too */
		why = arg->msg_length && !w->reject ? channel_message(w, arg->msg, arg->msg_length)
						    : NULL;
		if (why)
			reject(w, WS_CLOSE_INVALID_DATA, why);
		break;
	case WSLAY_CONNECTION_CLOSE:
		push(w, WS_EV_CLOSE, 0, arg->status_code, copy(rlen ? arg->msg + 2 : NULL, rlen),
		     rlen);
		break;
	default:
		break; /* pings are answered by wslay; pongs need nothing */
	}
}

static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
	struct ws_session *w = user;
	size_t n = len < w->in_len ? len : w->in_len;

	(void)flags;
	if (n == 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	memcpy(buf, w->in, n);
	w->in += n;
	w->in_len -= n;
	return (ssize_t)n;
}

static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
		       void *user)
{
	struct ws_session *w = user;

	(void)ctx;
	(void)flags;
	outq_put(&w->out, data, len);
	return (ssize_t)len;
}

/* -------- session -------- */

struct ws_session *ws_session_new(enum ws_codec codec, struct err *err)
{
	static const struct wslay_event_callbacks cb = {
		.recv_callback = on_recv,
		.send_callback = on_send,
		.on_msg_recv_callback = on_msg,
	};
	struct ws_session *w = xcalloc(1, sizeof(*w));

	if (wslay_event_context_server_init(&w->ctx, &cb, w) != 0) {
		free(w);
		err_set(err, ENOMEM, "websocket: cannot set up a session");
		return NULL;
	}
	wslay_event_config_set_max_recv_msg_length(w->ctx, WS_MAX_MESSAGE);
	w->codec = codec;
	outq_init(&w->out);
	return w;
}

void ws_session_free(struct ws_session *w)
{
	if (!w)
		return;
	wslay_event_context_free(w->ctx);
	for (size_t i = w->head; i < w->nitems; i++)
		free(w->items[i].data);
	free(w->items);
	free(w->given);
	outq_release(&w->out);
	free(w);
}

/* Moves what wslay queued (answers, closes, messages) into the output; it never blocks. */
static void flush(struct ws_session *w)
{
	if (wslay_event_want_write(w->ctx))
		wslay_event_send(w->ctx);
}

static const char *why_closed(const struct ws_session *w)
{
	if (w->reject)
		return w->reject_why;
	switch (wslay_event_get_status_code_sent(w->ctx)) {
	case WS_CLOSE_TOO_BIG:
		return "message larger than 16 MiB";
	case WS_CLOSE_INVALID_DATA:
		return "text that is not UTF-8";
	default:
		return "frame breaks RFC 6455";
	}
}

static int fail(struct ws_session *w, struct err *err)
{
	w->failed = true;
	err_set(err, EPROTO, "websocket: %s", why_closed(w));
	w->failure = *err;
	return -EPROTO;
}

ssize_t ws_feed(struct ws_session *w, const void *data, size_t len, struct ws_event *ev,
		struct err *err)
{
	size_t n = len < WS_FEED_CHUNK ? len : WS_FEED_CHUNK;
	int r;

	memset(ev, 0, sizeof(*ev));
	free(w->given);
	w->given = NULL;
	if (w->failed) {
		*err = w->failure;
		return -EPROTO;
	}
	if (pop(w, ev))
		return 0;
	if (!wslay_event_get_read_enabled(w->ctx))
		return (ssize_t)len; /* the peer's close came: the rest is ignored */
	w->in = data;
	w->in_len = n;
	r = wslay_event_recv(w->ctx);
	flush(w);
	if (r != 0 || w->reject ||
	    (!wslay_event_get_read_enabled(w->ctx) && !wslay_event_get_close_received(w->ctx)))
		return fail(w, err);
	pop(w, ev);
	return (ssize_t)(n - w->in_len);
}

/* Queues one message and moves it to the output. */
static int queue(struct ws_session *w, uint8_t opcode, const uint8_t *m, size_t n, struct err *err)
{
	struct wslay_event_msg msg = { opcode, m, n };
	int r = wslay_event_queue_msg(w->ctx, &msg);

	if (r == WSLAY_ERR_NO_MORE_MSG)
		return err_set(err, EPIPE, "websocket: closing, no more messages");
	if (r != 0)
		return err_set(err, EIO, "websocket: cannot queue a message (%d)", r);
	flush(w);
	return 0;
}

static int send_base64(struct ws_session *w, uint8_t channel, const void *data, size_t len,
		       struct err *err)
{
	size_t n = 4 * ((len + 2) / 3);
	_cleanup_free_ uint8_t *m = NULL;

	if (channel > 9)
		return err_set(err, EINVAL, "websocket: channel %u in base64", channel);
	if (n + 1 > WS_MAX_MESSAGE)
		return err_set(err, EMSGSIZE, "websocket: %zu bytes in one message", len);
	m = xmalloc(n + 2);
	m[0] = (uint8_t)('0' + channel);
	if (len)
		EVP_EncodeBlock(m + 1, data, (int)len);
	return queue(w, WSLAY_TEXT_FRAME, m, n + 1, err);
}

int ws_send(struct ws_session *w, uint8_t channel, const void *data, size_t len, struct err *err)
{
	_cleanup_free_ uint8_t *m = NULL;

	if (w->codec == WS_CODEC_BASE64)
		return send_base64(w, channel, data, len, err);
	if (w->codec == WS_CODEC_V5 && channel == WS_CLOSE_CHANNEL)
		return err_set(err, EINVAL, "websocket: channel 255 is for closing channels");
	if (len + 1 > WS_MAX_MESSAGE)
		return err_set(err, EMSGSIZE, "websocket: %zu bytes in one message", len);
	m = xmalloc(len + 1);
	m[0] = channel;
	if (len)
		memcpy(m + 1, data, len);
	return queue(w, WSLAY_BINARY_FRAME, m, len + 1, err);
}

int ws_close_channel(struct ws_session *w, uint8_t channel, struct err *err)
{
	const uint8_t m[2] = { WS_CLOSE_CHANNEL, channel };

	if (w->codec != WS_CODEC_V5)
		return err_set(err, EINVAL, "websocket: closing a channel needs v5.channel.k8s.io");
	return queue(w, WSLAY_BINARY_FRAME, m, sizeof(m), err);
}

int ws_close(struct ws_session *w, uint16_t code, const char *reason, struct err *err)
{
	size_t rlen = reason ? strlen(reason) : 0;
	int r;

	if (rlen > 123)
		return err_set(err, EINVAL, "websocket: close reason longer than 123 bytes");
	r = wslay_event_queue_close(w->ctx, code, (const uint8_t *)reason, rlen);
	if (r == WSLAY_ERR_NO_MORE_MSG)
		return err_set(err, EPIPE, "websocket: already closing");
	if (r != 0)
		return err_set(err, EINVAL, "websocket: cannot close with code %u", code);
	flush(w);
	return 0;
}

bool ws_done(const struct ws_session *w)
{
	return w->failed ||
	       (wslay_event_get_close_sent(w->ctx) && wslay_event_get_close_received(w->ctx));
}

const uint8_t *ws_output(const struct ws_session *w, size_t *len)
{
	return outq_peek(&w->out, len);
}

void ws_output_consume(struct ws_session *w, size_t n)
{
	outq_consume(&w->out, n);
}
