#include "spdy.h"

#include <errno.h>
#include <string.h>

#include "spdy_internal.h"

/* -------- frame writers -------- */

static void put_control_head(struct spdy_session *s, enum spdy_frame_type type, uint8_t flags,
			     uint32_t len)
{
	uint8_t h[8] = { 0x80, SPDY_VERSION, 0, (uint8_t)type };

	spdy_put32(h + 4, len);
	h[4] = flags;
	outq_put(&s->out, h, sizeof(h));
}

/* A control frame whose payload is 32-bit words. */
void spdy_put_words(struct spdy_session *s, enum spdy_frame_type type, uint8_t flags,
		    const uint32_t *w, size_t n)
{
	uint8_t b[16];

	put_control_head(s, type, flags, (uint32_t)(4 * n));
	for (size_t i = 0; i < n; i++)
		spdy_put32(b + 4 * i, w[i]);
	outq_put(&s->out, b, 4 * n);
}

void spdy_put_rst(struct spdy_session *s, uint32_t id, uint32_t status)
{
	const uint32_t w[2] = { id, status };

	spdy_put_words(s, SPDY_RST_STREAM, 0, w, 2);
}

void spdy_put_window_update(struct spdy_session *s, uint32_t id, uint32_t delta)
{
	const uint32_t w[2] = { id, delta };

	spdy_put_words(s, SPDY_WINDOW_UPDATE, 0, w, 2);
}

static void put_data(struct spdy_session *s, uint32_t id, bool fin, const uint8_t *p, size_t n)
{
	uint8_t h[8];

	spdy_put32(h, id & 0x7fffffff);
	spdy_put32(h + 4, (uint32_t)n);
	h[4] = fin ? SPDY_FLAG_FIN : 0;
	outq_put(&s->out, h, sizeof(h));
	outq_put(&s->out, p, n);
}

/* SYN_STREAM, SYN_REPLY or HEADERS: the fixed fields, then the compressed headers. */
static int put_headers_frame(struct spdy_session *s, enum spdy_frame_type type, uint8_t flags,
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

/* -------- the caller's actions -------- */

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
	spdy_put32(fixed, s->next_id);
	ret = put_headers_frame(s, SPDY_SYN_STREAM, fin ? SPDY_FLAG_FIN : 0, fixed, sizeof(fixed),
				h, n, err);
	if (ret < 0)
		return err_wrap(err, "spdy: SYN_STREAM");
	spdy_add_stream(s, s->next_id)->local_done = fin;
	*id = s->next_id;
	s->next_id += 2;
	return 0;
}

/* The stream id names, if this side may still send on it. */
static struct spdy_stream *sendable(struct spdy_session *s, uint32_t id, struct err *err)
{
	struct spdy_stream *st = spdy_find(s, id);

	if (!st)
		return err_set(err, ENOENT, "spdy: no stream %u", id), NULL;
	if (st->local_done)
		return err_set(err, EPIPE, "spdy: stream %u already finished", id), NULL;
	return st;
}

static int send_headers(struct spdy_session *s, enum spdy_frame_type type, uint32_t id,
			const struct spdy_header *h, size_t n, bool fin, struct err *err)
{
	struct spdy_stream *st = sendable(s, id, err);
	uint8_t fixed[4];
	int ret;

	if (!st)
		return -err->code;
	if (type == SPDY_SYN_REPLY && (!spdy_peer_id(s, id) || st->replied))
		return err_set(err, EALREADY, "spdy: stream %u needs no reply", id);
	spdy_put32(fixed, id);
	ret = put_headers_frame(s, type, fin ? SPDY_FLAG_FIN : 0, fixed, sizeof(fixed), h, n, err);
	if (ret < 0)
		return err_wrap(err, "spdy: stream %u", id);
	st->replied |= type == SPDY_SYN_REPLY;
	st->local_done = fin;
	spdy_drop_if_done(s, st);
	return 0;
}

int spdy_reply(struct spdy_session *s, uint32_t id, const struct spdy_header *h, size_t n, bool fin,
	       struct err *err)
{
	return send_headers(s, SPDY_SYN_REPLY, id, h, n, fin, err);
}

int spdy_send_headers(struct spdy_session *s, uint32_t id, const struct spdy_header *h, size_t n,
		      bool fin, struct err *err)
{
	return send_headers(s, SPDY_HEADERS, id, h, n, fin, err);
}

size_t spdy_send_window(const struct spdy_session *s, uint32_t id)
{
	const struct spdy_stream *st = spdy_find(s, id);
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
	struct spdy_stream *st = sendable(s, id, err);
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
	spdy_drop_if_done(s, st);
	return (ssize_t)n;
}

int spdy_reset(struct spdy_session *s, uint32_t id, enum spdy_rst status, struct err *err)
{
	struct spdy_stream *st = spdy_find(s, id);

	if (!st)
		return err_set(err, ENOENT, "spdy: no stream %u", id);
	spdy_put_rst(s, id, status);
	spdy_drop(s, st);
	return 0;
}

void spdy_ping(struct spdy_session *s, uint32_t *id)
{
	*id = s->next_ping;
	s->next_ping += 2;
	spdy_put_words(s, SPDY_PING, 0, id, 1);
}

void spdy_goaway(struct spdy_session *s, enum spdy_goaway status)
{
	const uint32_t w[2] = { s->last_peer_id, status };

	if (s->goaway_sent)
		return;
	spdy_put_words(s, SPDY_GOAWAY, 0, w, 2);
	s->goaway_sent = true;
}
