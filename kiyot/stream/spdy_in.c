#include "spdy.h"

#include <errno.h>
#include <string.h>

#include "spdy_internal.h"

/* -------- errors -------- */

/* A session error: GOAWAY with status, and no more input. Returns -EPROTO. */
static int session_error(struct spdy_session *s, enum spdy_goaway status, struct err *err)
{
	const uint32_t w[2] = { s->last_peer_id, status };

	spdy_put_words(s, SPDY_GOAWAY, 0, w, 2);
	s->goaway_sent = true;
	s->failed = true;
	err->code = EPROTO;
	err_wrap(err, "spdy");
	s->failure = *err;
	return -EPROTO;
}

/*
 * A stream error: RST_STREAM with status. A stream the caller knows about is dropped and an
 * event tells the caller so.
 */
static void stream_error(struct spdy_session *s, uint32_t id, enum spdy_rst status,
			 struct spdy_event *ev)
{
	struct spdy_stream *st = spdy_find(s, id);

	spdy_put_rst(s, id, status);
	if (!st)
		return;
	spdy_drop(s, st);
	ev->type = SPDY_EV_RESET;
	ev->stream_id = id;
	ev->status = status;
	ev->local = true;
}

/* -------- control frames received -------- */

/* The inflated headers of a SYN_STREAM, SYN_REPLY or HEADERS, into ev. */
static int take_headers(struct spdy_session *s, const uint8_t *block, size_t len, uint32_t id,
			bool *ok, struct spdy_event *ev, struct err *err)
{
	size_t n;
	int ret = spdy_zip_inflate(&s->zip, block, len, &n, err);
	struct err perr = ERR_INIT;

	if (ret == -EMSGSIZE)
		spdy_put_rst(s, id, SPDY_FRAME_TOO_LARGE);
	if (ret < 0)
		return session_error(s, SPDY_GOAWAY_PROTOCOL_ERROR, err);
	*ok = spdy_zip_parse(&s->zip, n, &perr) == 0;
	ev->headers = s->zip.hdrs;
	ev->nheaders = s->zip.nhdrs;
	return 0;
}

/* Marks the peer's side of a stream finished and queues SPDY_EV_END after the current event. */
static void remote_fin(struct spdy_session *s, struct spdy_stream *st)
{
	st->remote_done = true;
	s->pending.type = SPDY_EV_END;
	s->pending.stream_id = st->id;
	spdy_drop_if_done(s, st);
}

static int on_syn_stream(struct spdy_session *s, uint8_t flags, const uint8_t *p, size_t len,
			 struct spdy_event *ev, struct err *err)
{
	uint32_t id;
	bool ok;
	struct spdy_stream *st;
	int ret;

	if (len < 10)
		return err_set(err, EPROTO, "SYN_STREAM of %zu bytes", len);
	id = spdy_get32(p) & 0x7fffffff;
	ret = take_headers(s, p + 10, len - 10, id, &ok, ev, err);
	if (ret < 0)
		return ret;
	if (id == 0 || !spdy_peer_id(s, id) || id <= s->last_peer_id)
		return err_set(err, EPROTO, "SYN_STREAM with stream id %u after %u", id,
			       s->last_peer_id);
	s->last_peer_id = id;
	if (s->goaway_sent)
		return 0; /* ignored, as the peer was told */
	if (!ok || s->nstreams == s->opts.max_streams) {
		spdy_put_rst(s, id, ok ? SPDY_REFUSED_STREAM : SPDY_PROTOCOL_ERROR);
		return 0;
	}
	st = spdy_add_stream(s, id);
	st->local_done = flags & SPDY_FLAG_UNIDIRECTIONAL;
	ev->type = SPDY_EV_STREAM;
	ev->stream_id = id;
	if (flags & SPDY_FLAG_FIN)
		remote_fin(s, st);
	return 0;
}

/* SYN_REPLY and HEADERS: headers on a stream that exists. */
static int on_stream_headers(struct spdy_session *s, enum spdy_frame_type type, uint8_t flags,
			     const uint8_t *p, size_t len, struct spdy_event *ev, struct err *err)
{
	enum spdy_rst status = 0;
	uint32_t id;
	struct spdy_stream *st;
	bool ok;
	int ret;

	if (len < 4)
		return err_set(err, EPROTO, "frame type %d of %zu bytes", type, len);
	id = spdy_get32(p) & 0x7fffffff;
	ret = take_headers(s, p + 4, len - 4, id, &ok, ev, err);
	if (ret < 0)
		return ret;
	st = spdy_find(s, id);
	if (!st) {
		spdy_put_rst(s, id, SPDY_INVALID_STREAM);
		return 0;
	}
	if (!ok || (type == SPDY_SYN_REPLY && spdy_peer_id(s, id)))
		status = SPDY_PROTOCOL_ERROR;
	else if (st->remote_done)
		status = SPDY_STREAM_ALREADY_CLOSED;
	else if (type == SPDY_SYN_REPLY && st->replied)
		status = SPDY_STREAM_IN_USE;
	if (status) {
		stream_error(s, id, status, ev);
		return 0;
	}
	st->replied |= type == SPDY_SYN_REPLY;
	ev->type = type == SPDY_SYN_REPLY ? SPDY_EV_REPLY : SPDY_EV_HEADERS;
	ev->stream_id = id;
	if (flags & SPDY_FLAG_FIN)
		remote_fin(s, st);
	return 0;
}

static int on_rst_stream(struct spdy_session *s, const uint8_t *p, size_t len,
			 struct spdy_event *ev, struct err *err)
{
	struct spdy_stream *st;

	if (len != 8)
		return err_set(err, EPROTO, "RST_STREAM of %zu bytes", len);
	st = spdy_find(s, spdy_get32(p) & 0x7fffffff);
	if (!st)
		return 0; /* never answer a reset with a reset */
	ev->type = SPDY_EV_RESET;
	ev->stream_id = st->id;
	ev->status = spdy_get32(p + 4);
	spdy_drop(s, st);
	return 0;
}

/* A new initial window applies to open streams as the difference (SPDY/3 section 2.6.8). */
static int apply_initial_window(struct spdy_session *s, uint32_t v, struct err *err)
{
	int64_t delta = (int64_t)v - s->peer_initial_window;

	if (v > SPDY_MAX_WINDOW)
		return err_set(err, EPROTO, "SETTINGS: initial window %u", v);
	for (size_t i = 0; i < s->nstreams; i++)
		s->streams[i].send_window += delta;
	s->peer_initial_window = v;
	return 0;
}

static int on_settings(struct spdy_session *s, const uint8_t *p, size_t len, struct err *err)
{
	uint32_t n = len >= 4 ? spdy_get32(p) : 0;

	if (len < 4 || (len - 4) % 8 || n != (len - 4) / 8)
		return err_set(err, EPROTO, "SETTINGS of %zu bytes", len);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t key = spdy_get32(p + 4 + 8 * i) & 0xffffff, v = spdy_get32(p + 8 + 8 * i);
		int ret = 0;

		if (key == SPDY_SETTINGS_MAX_CONCURRENT_STREAMS)
			s->peer_max_streams = v;
		else if (key == SPDY_SETTINGS_INITIAL_WINDOW_SIZE)
			ret = apply_initial_window(s, v, err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int on_ping(struct spdy_session *s, const uint8_t *p, size_t len, struct spdy_event *ev,
		   struct err *err)
{
	uint32_t id;

	if (len != 4)
		return err_set(err, EPROTO, "PING of %zu bytes", len);
	id = spdy_get32(p);
	ev->type = SPDY_EV_PING;
	ev->id = id;
	ev->answer = !spdy_peer_id(s, id);
	if (!ev->answer)
		spdy_put_words(s, SPDY_PING, 0, &id, 1);
	return 0;
}

static int on_goaway(struct spdy_session *s, const uint8_t *p, size_t len, struct spdy_event *ev,
		     struct err *err)
{
	if (len != 8)
		return err_set(err, EPROTO, "GOAWAY of %zu bytes", len);
	s->goaway_received = true;
	ev->type = SPDY_EV_GOAWAY;
	ev->id = spdy_get32(p) & 0x7fffffff;
	ev->status = spdy_get32(p + 4);
	return 0;
}

static int on_window_update(struct spdy_session *s, const uint8_t *p, size_t len,
			    struct spdy_event *ev, struct err *err)
{
	uint32_t id, delta;
	struct spdy_stream *st;

	if (len != 8)
		return err_set(err, EPROTO, "WINDOW_UPDATE of %zu bytes", len);
	id = spdy_get32(p) & 0x7fffffff;
	delta = spdy_get32(p + 4) & 0x7fffffff;
	if (id == 0 && (delta == 0 || s->send_window + delta > SPDY_MAX_WINDOW))
		return err_set(err, EPROTO, "session WINDOW_UPDATE of %u", delta);
	st = id ? spdy_find(s, id) : NULL;
	if (id && !st)
		return 0; /* the stream may have just closed */
	if (st && (delta == 0 || st->send_window + delta > SPDY_MAX_WINDOW)) {
		stream_error(s, id, SPDY_FLOW_CONTROL_ERROR, ev);
		return 0;
	}
	if (st)
		st->send_window += delta;
	else
		s->send_window += delta;
	ev->type = SPDY_EV_WINDOW;
	ev->stream_id = id;
	return 0;
}

static int on_control(struct spdy_session *s, struct spdy_event *ev, struct err *err)
{
	uint16_t version = (uint16_t)((s->head[0] & 0x7f) << 8 | s->head[1]);
	uint16_t type = (uint16_t)(s->head[2] << 8 | s->head[3]);
	uint8_t flags = s->head[4];
	const uint8_t *p = s->ctrl;
	size_t len = s->ctrl_len;

	if (version != SPDY_VERSION) {
		if (type == SPDY_SYN_STREAM && len >= 4)
			spdy_put_rst(s, spdy_get32(p) & 0x7fffffff, SPDY_UNSUPPORTED_VERSION);
		return err_set(err, EPROTO, "control frame of version %u, not 3", version);
	}
	switch (type) {
	case SPDY_SYN_STREAM:
		return on_syn_stream(s, flags, p, len, ev, err);
	case SPDY_SYN_REPLY:
	case SPDY_HEADERS:
		return on_stream_headers(s, type, flags, p, len, ev, err);
	case SPDY_RST_STREAM:
		return on_rst_stream(s, p, len, ev, err);
	case SPDY_SETTINGS:
		return on_settings(s, p, len, err);
	case SPDY_PING:
		return on_ping(s, p, len, ev, err);
	case SPDY_GOAWAY:
		return on_goaway(s, p, len, ev, err);
	case SPDY_WINDOW_UPDATE:
		return on_window_update(s, p, len, ev, err);
	default:
		return 0; /* unknown control frames are ignored (section 2.2.1) */
	}
}

/* -------- DATA received -------- */

/* Decides, from a DATA frame's head, whether its payload reaches the caller. */
static int on_data_head(struct spdy_session *s, struct spdy_event *ev, struct err *err)
{
	uint32_t id = spdy_get32(s->head) & 0x7fffffff, len = spdy_get24(s->head + 5);
	struct spdy_stream *st = spdy_find(s, id);
	bool strict = s->opts.strict_windows;

	if (id == 0)
		return err_set(err, EPROTO, "DATA on stream 0");
	if (strict && len > s->recv_window)
		return err_set(err, EPROTO, "DATA beyond the session's window");
	s->data_id = id;
	s->data_left = len;
	s->data_fin = s->head[4] & SPDY_FLAG_FIN;
	s->data_deliver = false;
	s->recv_window -= len;
	if (!st)
		spdy_put_rst(s, id, SPDY_INVALID_STREAM);
	else if (st->remote_done)
		stream_error(s, id, SPDY_STREAM_ALREADY_CLOSED, ev);
	else if (strict && len > st->recv_window)
		stream_error(s, id, SPDY_FLOW_CONTROL_ERROR, ev);
	else
		s->data_deliver = true;
	if (s->data_deliver)
		st->recv_window -= len;
	else
		spdy_owe(s, NULL, len); /* dropped data gives its session room back at once */
	return 0;
}

/* The next part of a DATA payload; at its end, the FIN it may carry. */
static size_t on_data(struct spdy_session *s, const uint8_t *p, size_t len, struct spdy_event *ev)
{
	size_t n = len < s->data_left ? len : s->data_left;
	struct spdy_stream *st = s->data_deliver ? spdy_find(s, s->data_id) : NULL;

	if (!st && s->data_deliver) {
		spdy_owe(s, NULL, n); /* reset by the caller midway */
	} else if (st && n) {
		ev->type = SPDY_EV_DATA;
		ev->stream_id = st->id;
		ev->data = p;
		ev->len = n;
	}
	s->data_left -= (uint32_t)n;
	if (s->data_left == 0) {
		s->in = SPDY_IN_HEAD;
		if (st && s->data_fin) {
			remote_fin(s, st);
			if (ev->type == SPDY_EV_NONE) {
				*ev = s->pending;
				s->pending.type = SPDY_EV_NONE;
			}
		}
	}
	return n;
}

/* -------- input -------- */

/* With a frame's head complete: where its payload goes. */
static int on_head(struct spdy_session *s, struct spdy_event *ev, struct err *err)
{
	uint32_t len = spdy_get24(s->head + 5);

	if (!(s->head[0] & 0x80)) {
		s->in = SPDY_IN_DATA;
		return on_data_head(s, ev, err);
	}
	if (len > SPDY_MAX_CONTROL)
		return err_set(err, EPROTO, "control frame of %u bytes, more than %d", len,
			       SPDY_MAX_CONTROL);
	s->in = SPDY_IN_CONTROL;
	s->ctrl_len = 0;
	s->ctrl_need = len;
	return 0;
}

/* Feeds bytes to the frame in progress; returns how many it took, or a session error. */
static ssize_t step(struct spdy_session *s, const uint8_t *p, size_t len, struct spdy_event *ev,
		    struct err *err)
{
	size_t n;
	int ret = 0;

	switch (s->in) {
	case SPDY_IN_HEAD:
		n = len < 8 - s->head_len ? len : 8 - s->head_len;
		if (n)
			memcpy(s->head + s->head_len, p, n);
		s->head_len += n;
		if (s->head_len == 8) {
			s->head_len = 0;
			ret = on_head(s, ev, err);
		}
		break;
	case SPDY_IN_CONTROL:
		n = len < s->ctrl_need - s->ctrl_len ? len : s->ctrl_need - s->ctrl_len;
		if (n)
			memcpy(s->ctrl + s->ctrl_len, p, n);
		s->ctrl_len += n;
		if (s->ctrl_len == s->ctrl_need) {
			s->in = SPDY_IN_HEAD;
			ret = on_control(s, ev, err);
		}
		break;
	default:
		return (ssize_t)on_data(s, p, len, ev);
	}
	if (ret < 0)
		return s->failed ? ret : session_error(s, SPDY_GOAWAY_PROTOCOL_ERROR, err);
	return (ssize_t)n;
}

/* Whether the frame in progress is complete and waits only for step() to finish it. */
static bool frame_complete(const struct spdy_session *s)
{
	return (s->in == SPDY_IN_DATA && s->data_left == 0) ||
	       (s->in == SPDY_IN_CONTROL && s->ctrl_len == s->ctrl_need);
}

ssize_t spdy_feed(struct spdy_session *s, const void *data, size_t len, struct spdy_event *ev,
		  struct err *err)
{
	const uint8_t *p = data ? data : (const uint8_t *)"";
	size_t off = 0;

	memset(ev, 0, sizeof(*ev));
	if (s->failed) {
		*err = s->failure;
		return -EPROTO;
	}
	if (s->pending.type != SPDY_EV_NONE) {
		*ev = s->pending;
		memset(&s->pending, 0, sizeof(s->pending));
		return 0;
	}
	while (ev->type == SPDY_EV_NONE && (off < len || frame_complete(s))) {
		ssize_t n = step(s, p + off, len - off, ev, err);

		if (n < 0)
			return n;
		off += (size_t)n;
	}
	return (ssize_t)off;
}
