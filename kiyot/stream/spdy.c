#include "spdy.h"

#include <errno.h>
#include <string.h>

#include "outq.h"
#include "spdy_internal.h"
#include "xalloc.h"

#define SPDY_VERSION 3
#define MAX_WINDOW 0x7fffffff

enum frame_type {
	SYN_STREAM = 1,
	SYN_REPLY = 2,
	RST_STREAM = 3,
	SETTINGS = 4,
	PING = 6,
	GOAWAY = 7,
	HEADERS = 8,
	WINDOW_UPDATE = 9,
};

#define FLAG_FIN 0x01
#define FLAG_UNIDIRECTIONAL 0x02
#define SETTINGS_MAX_CONCURRENT_STREAMS 4
#define SETTINGS_INITIAL_WINDOW_SIZE 7

struct stream {
	uint32_t id;
	bool local_done;  /* this side sent FIN */
	bool remote_done; /* the peer sent FIN */
	bool replied;	  /* SYN_REPLY sent (peer's streams) or received (ours) */
	int64_t send_window, recv_window;
	int64_t owed; /* consumed but not yet given back with WINDOW_UPDATE */
};

/* what the input is in the middle of */
enum in_state {
	IN_HEAD,    /* the 8 bytes every frame starts with */
	IN_CONTROL, /* a control frame's payload, gathered whole */
	IN_DATA,    /* a DATA frame's payload, handed out as it comes */
};

struct spdy_session {
	struct spdy_opts opts;
	struct spdy_zip zip;
	struct outq out;

	enum in_state in;
	uint8_t head[8];
	size_t head_len;
	uint8_t *ctrl; /* SPDY_MAX_CONTROL bytes */
	size_t ctrl_len, ctrl_need;
	uint32_t data_id, data_left;
	bool data_deliver, data_fin;

	struct stream *streams; /* opts.max_streams slots, the first nstreams used */
	size_t nstreams;
	uint32_t last_peer_id, next_id, next_ping;
	uint32_t peer_max_streams;
	int64_t peer_initial_window;
	int64_t send_window, recv_window; /* the session's, SPDY/3.1 */
	int64_t owed;

	bool goaway_sent, goaway_received, failed;
	struct err failure;
	struct spdy_event pending;
};

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* -------- frame writers -------- */

static void put_control_head(struct spdy_session *s, enum frame_type type, uint8_t flags,
			     uint32_t len)
{
	uint8_t h[8] = { 0x80, SPDY_VERSION, 0, (uint8_t)type };

	put32(h + 4, len);
	h[4] = flags;
	outq_put(&s->out, h, sizeof(h));
}

/* A control frame whose payload is 32-bit words. */
static void put_words(struct spdy_session *s, enum frame_type type, uint8_t flags,
		      const uint32_t *w, size_t n)
{
	uint8_t b[16];

	put_control_head(s, type, flags, (uint32_t)(4 * n));
	for (size_t i = 0; i < n; i++)
		put32(b + 4 * i, w[i]);
	outq_put(&s->out, b, 4 * n);
}

static void put_rst(struct spdy_session *s, uint32_t id, uint32_t status)
{
	const uint32_t w[2] = { id, status };

	put_words(s, RST_STREAM, 0, w, 2);
}

static void put_window_update(struct spdy_session *s, uint32_t id, uint32_t delta)
{
	const uint32_t w[2] = { id, delta };

	put_words(s, WINDOW_UPDATE, 0, w, 2);
}

static void put_data(struct spdy_session *s, uint32_t id, bool fin, const uint8_t *p, size_t n)
{
	uint8_t h[8];

	put32(h, id & 0x7fffffff);
	put32(h + 4, (uint32_t)n);
	h[4] = fin ? FLAG_FIN : 0;
	outq_put(&s->out, h, sizeof(h));
	outq_put(&s->out, p, n);
}

/* SYN_STREAM, SYN_REPLY or HEADERS: the fixed fields, then the compressed headers. */
static int put_headers_frame(struct spdy_session *s, enum frame_type type, uint8_t flags,
			     const uint8_t *fixed, size_t nfixed, const struct spdy_header *h,
			     size_t n, struct err *err)
{
	size_t zlen;
	int ret = spdy_zip_encode(&s->zip, h, n, &zlen, err);

	if (ret < 0)
		return ret;
	put_control_head(s, type, flags, (uint32_t)(nfixed + zlen));
	outq_put(&s->out, fixed, nfixed);
	outq_put(&s->out, s->zip.zout, zlen);
	return 0;
}

/* -------- streams -------- */

static struct stream *find(const struct spdy_session *s, uint32_t id)
{
	for (size_t i = 0; i < s->nstreams; i++) {
		if (s->streams[i].id == id)
			return &s->streams[i];
	}
	return NULL;
}

static struct stream *add_stream(struct spdy_session *s, uint32_t id)
{
	struct stream *st = &s->streams[s->nstreams++];

	memset(st, 0, sizeof(*st));
	st->id = id;
	st->send_window = s->peer_initial_window;
	st->recv_window = SPDY_INITIAL_WINDOW;
	return st;
}

/* Removes a stream from the table (the last one takes its slot). */
static void drop(struct spdy_session *s, struct stream *st)
{
	*st = s->streams[--s->nstreams];
}

static void drop_if_done(struct spdy_session *s, struct stream *st)
{
	if (st->local_done && st->remote_done)
		drop(s, st);
}

static bool peer_id(const struct spdy_session *s, uint32_t id)
{
	return (id & 1) == (s->opts.client ? 0u : 1u);
}

/* -------- errors -------- */

/* A session error: GOAWAY with status, and no more input. Returns -EPROTO. */
static int session_error(struct spdy_session *s, enum spdy_goaway status, struct err *err)
{
	const uint32_t w[2] = { s->last_peer_id, status };

	put_words(s, GOAWAY, 0, w, 2);
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
	struct stream *st = find(s, id);

	put_rst(s, id, status);
	if (!st)
		return;
	drop(s, st);
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
		put_rst(s, id, SPDY_FRAME_TOO_LARGE);
	if (ret < 0)
		return session_error(s, SPDY_GOAWAY_PROTOCOL_ERROR, err);
	*ok = spdy_zip_parse(&s->zip, n, &perr) == 0;
	ev->headers = s->zip.hdrs;
	ev->nheaders = s->zip.nhdrs;
	return 0;
}

/*
 * Gives room back to the peer once half a window is owed, so updates stay few, and never
 * beyond the largest window SPDY allows.
 */
static void give_back(struct spdy_session *s, uint32_t id, int64_t *window, int64_t *owed)
{
	int64_t n = *owed < MAX_WINDOW - *window ? *owed : MAX_WINDOW - *window;

	if (*owed < SPDY_INITIAL_WINDOW / 2 || n <= 0)
		return;
	put_window_update(s, id, (uint32_t)n);
	*window += n;
	*owed -= n;
}

/* n bytes the caller is done with (or that were dropped) on the session and stream st. */
static void owe(struct spdy_session *s, struct stream *st, size_t n)
{
	s->owed += (int64_t)n;
	give_back(s, 0, &s->recv_window, &s->owed);
	if (st && !st->remote_done) {
		st->owed += (int64_t)n;
		give_back(s, st->id, &st->recv_window, &st->owed);
	}
}

/* Marks the peer's side of a stream finished and queues SPDY_EV_END after the current event. */
static void remote_fin(struct spdy_session *s, struct stream *st)
{
	st->remote_done = true;
	s->pending.type = SPDY_EV_END;
	s->pending.stream_id = st->id;
	drop_if_done(s, st);
}

static int on_syn_stream(struct spdy_session *s, uint8_t flags, const uint8_t *p, size_t len,
			 struct spdy_event *ev, struct err *err)
{
	uint32_t id;
	bool ok;
	struct stream *st;
	int ret;

	if (len < 10)
		return err_set(err, EPROTO, "SYN_STREAM of %zu bytes", len);
	id = get32(p) & 0x7fffffff;
	ret = take_headers(s, p + 10, len - 10, id, &ok, ev, err);
	if (ret < 0)
		return ret;
	if (id == 0 || !peer_id(s, id) || id <= s->last_peer_id)
		return err_set(err, EPROTO, "SYN_STREAM with stream id %u after %u", id,
			       s->last_peer_id);
	s->last_peer_id = id;
	if (s->goaway_sent)
		return 0; /* ignored, as the peer was told */
	if (!ok || s->nstreams == s->opts.max_streams) {
		put_rst(s, id, ok ? SPDY_REFUSED_STREAM : SPDY_PROTOCOL_ERROR);
		return 0;
	}
	st = add_stream(s, id);
	st->local_done = flags & FLAG_UNIDIRECTIONAL;
	ev->type = SPDY_EV_STREAM;
	ev->stream_id = id;
	if (flags & FLAG_FIN)
		remote_fin(s, st);
	return 0;
}

/* SYN_REPLY and HEADERS: headers on a stream that exists. */
static int on_stream_headers(struct spdy_session *s, enum frame_type type, uint8_t flags,
			     const uint8_t *p, size_t len, struct spdy_event *ev, struct err *err)
{
	enum spdy_rst status = 0;
	uint32_t id;
	struct stream *st;
	bool ok;
	int ret;

	if (len < 4)
		return err_set(err, EPROTO, "frame type %d of %zu bytes", type, len);
	id = get32(p) & 0x7fffffff;
	ret = take_headers(s, p + 4, len - 4, id, &ok, ev, err);
	if (ret < 0)
		return ret;
	st = find(s, id);
	if (!st) {
		put_rst(s, id, SPDY_INVALID_STREAM);
		return 0;
	}
	if (!ok || (type == SYN_REPLY && peer_id(s, id)))
		status = SPDY_PROTOCOL_ERROR;
	else if (st->remote_done)
		status = SPDY_STREAM_ALREADY_CLOSED;
	else if (type == SYN_REPLY && st->replied)
		status = SPDY_STREAM_IN_USE;
	if (status) {
		stream_error(s, id, status, ev);
		return 0;
	}
	st->replied |= type == SYN_REPLY;
	ev->type = type == SYN_REPLY ? SPDY_EV_REPLY : SPDY_EV_HEADERS;
	ev->stream_id = id;
	if (flags & FLAG_FIN)
		remote_fin(s, st);
	return 0;
}

static int on_rst_stream(struct spdy_session *s, const uint8_t *p, size_t len,
			 struct spdy_event *ev, struct err *err)
{
	struct stream *st;

	if (len != 8)
		return err_set(err, EPROTO, "RST_STREAM of %zu bytes", len);
	st = find(s, get32(p) & 0x7fffffff);
	if (!st)
		return 0; /* never answer a reset with a reset */
	ev->type = SPDY_EV_RESET;
	ev->stream_id = st->id;
	ev->status = get32(p + 4);
	drop(s, st);
	return 0;
}

/* A new initial window applies to open streams as the difference (SPDY/3 section 2.6.8). */
static int apply_initial_window(struct spdy_session *s, uint32_t v, struct err *err)
{
	int64_t delta = (int64_t)v - s->peer_initial_window;

	if (v > MAX_WINDOW)
		return err_set(err, EPROTO, "SETTINGS: initial window %u", v);
	for (size_t i = 0; i < s->nstreams; i++)
		s->streams[i].send_window += delta;
	s->peer_initial_window = v;
	return 0;
}

static int on_settings(struct spdy_session *s, const uint8_t *p, size_t len, struct err *err)
{
	uint32_t n = len >= 4 ? get32(p) : 0;

	if (len < 4 || (len - 4) % 8 || n != (len - 4) / 8)
		return err_set(err, EPROTO, "SETTINGS of %zu bytes", len);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t key = get32(p + 4 + 8 * i) & 0xffffff, v = get32(p + 8 + 8 * i);
		int ret = 0;

		if (key == SETTINGS_MAX_CONCURRENT_STREAMS)
			s->peer_max_streams = v;
		else if (key == SETTINGS_INITIAL_WINDOW_SIZE)
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
	id = get32(p);
	ev->type = SPDY_EV_PING;
	ev->id = id;
	ev->answer = !peer_id(s, id);
	if (!ev->answer)
		put_words(s, PING, 0, &id, 1);
	return 0;
}

static int on_goaway(struct spdy_session *s, const uint8_t *p, size_t len, struct spdy_event *ev,
		     struct err *err)
{
	if (len != 8)
		return err_set(err, EPROTO, "GOAWAY of %zu bytes", len);
	s->goaway_received = true;
	ev->type = SPDY_EV_GOAWAY;
	ev->id = get32(p) & 0x7fffffff;
	ev->status = get32(p + 4);
	return 0;
}

static int on_window_update(struct spdy_session *s, const uint8_t *p, size_t len,
			    struct spdy_event *ev, struct err *err)
{
	uint32_t id, delta;
	struct stream *st;

	if (len != 8)
		return err_set(err, EPROTO, "WINDOW_UPDATE of %zu bytes", len);
	id = get32(p) & 0x7fffffff;
	delta = get32(p + 4) & 0x7fffffff;
	if (id == 0 && (delta == 0 || s->send_window + delta > MAX_WINDOW))
		return err_set(err, EPROTO, "session WINDOW_UPDATE of %u", delta);
	st = id ? find(s, id) : NULL;
	if (id && !st)
		return 0; /* the stream may have just closed */
	if (st && (delta == 0 || st->send_window + delta > MAX_WINDOW)) {
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
		if (type == SYN_STREAM && len >= 4)
			put_rst(s, get32(p) & 0x7fffffff, SPDY_UNSUPPORTED_VERSION);
		return err_set(err, EPROTO, "control frame of version %u, not 3", version);
	}
	switch (type) {
	case SYN_STREAM:
		return on_syn_stream(s, flags, p, len, ev, err);
	case SYN_REPLY:
	case HEADERS:
		return on_stream_headers(s, type, flags, p, len, ev, err);
	case RST_STREAM:
		return on_rst_stream(s, p, len, ev, err);
	case SETTINGS:
		return on_settings(s, p, len, err);
	case PING:
		return on_ping(s, p, len, ev, err);
	case GOAWAY:
		return on_goaway(s, p, len, ev, err);
	case WINDOW_UPDATE:
		return on_window_update(s, p, len, ev, err);
	default:
		return 0; /* unknown control frames are ignored (section 2.2.1) */
	}
}

/* -------- DATA received -------- */

/* Decides, from a DATA frame's head, whether its payload reaches the caller. */
static int on_data_head(struct spdy_session *s, struct spdy_event *ev, struct err *err)
{
	uint32_t id = get32(s->head) & 0x7fffffff, len = get24(s->head + 5);
	struct stream *st = find(s, id);
	bool strict = s->opts.strict_windows;

	if (id == 0)
		return err_set(err, EPROTO, "DATA on stream 0");
	if (strict && len > s->recv_window)
		return err_set(err, EPROTO, "DATA beyond the session's window");
	s->data_id = id;
	s->data_left = len;
	s->data_fin = s->head[4] & FLAG_FIN;
	s->data_deliver = false;
	s->recv_window -= len;
	if (!st)
		put_rst(s, id, SPDY_INVALID_STREAM);
	else if (st->remote_done)
		stream_error(s, id, SPDY_STREAM_ALREADY_CLOSED, ev);
	else if (strict && len > st->recv_window)
		stream_error(s, id, SPDY_FLOW_CONTROL_ERROR, ev);
	else
		s->data_deliver = true;
	if (s->data_deliver)
		st->recv_window -= len;
	else
		owe(s, NULL, len); /* dropped data gives its session room back at once */
	return 0;
}

/* The next part of a DATA payload; at its end, the FIN it may carry. */
static size_t on_data(struct spdy_session *s, const uint8_t *p, size_t len, struct spdy_event *ev)
{
	size_t n = len < s->data_left ? len : s->data_left;
	struct stream *st = s->data_deliver ? find(s, s->data_id) : NULL;

	if (!st && s->data_deliver) {
		owe(s, NULL, n); /* reset by the caller midway */
	} else if (st && n) {
		ev->type = SPDY_EV_DATA;
		ev->stream_id = st->id;
		ev->data = p;
		ev->len = n;
	}
	s->data_left -= (uint32_t)n;
	if (s->data_left == 0) {
		s->in = IN_HEAD;
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
	uint32_t len = get24(s->head + 5);

	if (!(s->head[0] & 0x80)) {
		s->in = IN_DATA;
		return on_data_head(s, ev, err);
	}
	if (len > SPDY_MAX_CONTROL)
		return err_set(err, EPROTO, "control frame of %u bytes, more than %d", len,
			       SPDY_MAX_CONTROL);
	s->in = IN_CONTROL;
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
	case IN_HEAD:
		n = len < 8 - s->head_len ? len : 8 - s->head_len;
		if (n)
			memcpy(s->head + s->head_len, p, n);
		s->head_len += n;
		if (s->head_len == 8) {
			s->head_len = 0;
			ret = on_head(s, ev, err);
		}
		break;
	case IN_CONTROL:
		n = len < s->ctrl_need - s->ctrl_len ? len : s->ctrl_need - s->ctrl_len;
		if (n)
			memcpy(s->ctrl + s->ctrl_len, p, n);
		s->ctrl_len += n;
		if (s->ctrl_len == s->ctrl_need) {
			s->in = IN_HEAD;
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
	return (s->in == IN_DATA && s->data_left == 0) ||
	       (s->in == IN_CONTROL && s->ctrl_len == s->ctrl_need);
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

/* -------- the caller's actions -------- */

const char *spdy_header_get(const struct spdy_header *h, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(h[i].name, name) == 0)
			return h[i].value;
	}
	return NULL;
}

struct spdy_session *spdy_session_new(const struct spdy_opts *opts, struct err *err)
{
	struct spdy_opts o = opts ? *opts : (struct spdy_opts){ 0 };
	struct spdy_session *s;

	uint32_t settings[3] = { 1, SETTINGS_MAX_CONCURRENT_STREAMS, 0 };

	if (o.max_streams > SPDY_MAX_STREAMS_LIMIT) {
		err_set(err, EINVAL, "spdy: %u streams, more than %d", o.max_streams,
			SPDY_MAX_STREAMS_LIMIT);
		return NULL;
	}
	if (o.max_streams == 0)
		o.max_streams = SPDY_MAX_STREAMS;
	s = xcalloc(1, sizeof(*s));
	if (spdy_zip_init(&s->zip, err) < 0) {
		free(s);
		return NULL;
	}
	s->opts = o;
	outq_init(&s->out);
	s->ctrl = xmalloc(SPDY_MAX_CONTROL);
	s->streams = xcalloc(o.max_streams, sizeof(*s->streams));
	s->next_id = s->next_ping = o.client ? 1 : 2;
	s->peer_max_streams = UINT32_MAX;
	s->peer_initial_window = SPDY_INITIAL_WINDOW;
	s->send_window = SPDY_INITIAL_WINDOW;
	s->recv_window = (int64_t)o.max_streams * SPDY_INITIAL_WINDOW;
	settings[2] = o.max_streams;
	put_words(s, SETTINGS, 0, settings, 3);
	put_window_update(s, 0, (uint32_t)(s->recv_window - SPDY_INITIAL_WINDOW));
	return s;
}

void spdy_session_free(struct spdy_session *s)
{
	if (!s)
		return;
	spdy_zip_release(&s->zip);
	outq_release(&s->out);
	free(s->ctrl);
	free(s->streams);
	free(s);
}

int spdy_open(struct spdy_session *s, const struct spdy_header *h, size_t n, bool fin, uint32_t *id,
	      struct err *err)
{
	uint8_t fixed[10] = { 0 };
	int ret;

	if (s->goaway_sent || s->goaway_received || s->failed)
		return err_set(err, EPIPE, "spdy: the session is going away");
	if (s->nstreams == s->opts.max_streams || s->nstreams >= s->peer_max_streams)
		return err_set(err, EAGAIN, "spdy: %zu streams open, no more allowed", s->nstreams);
	if (s->next_id > 0x7fffffff)
		return err_set(err, EPIPE, "spdy: stream ids used up");
	put32(fixed, s->next_id);
	ret = put_headers_frame(s, SYN_STREAM, fin ? FLAG_FIN : 0, fixed, sizeof(fixed), h, n, err);
	if (ret < 0)
		return err_wrap(err, "spdy: SYN_STREAM");
	add_stream(s, s->next_id)->local_done = fin;
	*id = s->next_id;
	s->next_id += 2;
	return 0;
}

/* The stream id names, if this side may still send on it. */
static struct stream *sendable(struct spdy_session *s, uint32_t id, struct err *err)
{
	struct stream *st = find(s, id);

	if (!st)
		return err_set(err, ENOENT, "spdy: no stream %u", id), NULL;
	if (st->local_done)
		return err_set(err, EPIPE, "spdy: stream %u already finished", id), NULL;
	return st;
}

static int send_headers(struct spdy_session *s, enum frame_type type, uint32_t id,
			const struct spdy_header *h, size_t n, bool fin, struct err *err)
{
	struct stream *st = sendable(s, id, err);
	uint8_t fixed[4];
	int ret;

	if (!st)
		return -err->code;
	if (type == SYN_REPLY && (!peer_id(s, id) || st->replied))
		return err_set(err, EALREADY, "spdy: stream %u needs no reply", id);
	put32(fixed, id);
	ret = put_headers_frame(s, type, fin ? FLAG_FIN : 0, fixed, sizeof(fixed), h, n, err);
	if (ret < 0)
		return err_wrap(err, "spdy: stream %u", id);
	st->replied |= type == SYN_REPLY;
	st->local_done = fin;
	drop_if_done(s, st);
	return 0;
}

int spdy_reply(struct spdy_session *s, uint32_t id, const struct spdy_header *h, size_t n, bool fin,
	       struct err *err)
{
	return send_headers(s, SYN_REPLY, id, h, n, fin, err);
}

int spdy_send_headers(struct spdy_session *s, uint32_t id, const struct spdy_header *h, size_t n,
		      bool fin, struct err *err)
{
	return send_headers(s, HEADERS, id, h, n, fin, err);
}

size_t spdy_send_window(const struct spdy_session *s, uint32_t id)
{
	const struct stream *st = find(s, id);
	int64_t w;

	if (!st || st->local_done)
		return 0;
	if (!s->opts.strict_windows)
		return SIZE_MAX;
	w = st->send_window < s->send_window ? st->send_window : s->send_window;
	return w > 0 ? (size_t)w : 0;
}

ssize_t spdy_send(struct spdy_session *s, uint32_t id, const void *data, size_t len, bool fin,
		  struct err *err)
{
	struct stream *st = sendable(s, id, err);
	const uint8_t *p = data;
	size_t n, off = 0, room;
	bool end;

	if (!st)
		return -err->code;
	room = spdy_send_window(s, id);
	n = len < room ? len : room;
	end = fin && n == len;
	if (n == 0 && !end)
		return 0;
	do {
		size_t chunk = n - off < SPDY_DATA_CHUNK ? n - off : SPDY_DATA_CHUNK;

		put_data(s, id, end && off + chunk == n, chunk ? p + off : NULL, chunk);
		off += chunk;
	} while (off < n);
	st->local_done = end;
	st->send_window -= (int64_t)n;
	s->send_window -= (int64_t)n;
	drop_if_done(s, st);
	return (ssize_t)n;
}

void spdy_consume(struct spdy_session *s, uint32_t id, size_t n)
{
	owe(s, find(s, id), n);
}

int spdy_reset(struct spdy_session *s, uint32_t id, enum spdy_rst status, struct err *err)
{
	struct stream *st = find(s, id);

	if (!st)
		return err_set(err, ENOENT, "spdy: no stream %u", id);
	put_rst(s, id, status);
	drop(s, st);
	return 0;
}

void spdy_ping(struct spdy_session *s, uint32_t *id)
{
	*id = s->next_ping;
	s->next_ping += 2;
	put_words(s, PING, 0, id, 1);
}

void spdy_goaway(struct spdy_session *s, enum spdy_goaway status)
{
	const uint32_t w[2] = { s->last_peer_id, status };

	if (s->goaway_sent)
		return;
	put_words(s, GOAWAY, 0, w, 2);
	s->goaway_sent = true;
}

bool spdy_stream_exists(const struct spdy_session *s, uint32_t id)
{
	return find(s, id) != NULL;
}

size_t spdy_stream_count(const struct spdy_session *s)
{
	return s->nstreams;
}

const uint8_t *spdy_output(const struct spdy_session *s, size_t *len)
{
	return outq_peek(&s->out, len);
}

void spdy_output_consume(struct spdy_session *s, size_t n)
{
	outq_consume(&s->out, n);
}
