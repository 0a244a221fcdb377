#include "spdy.h"

#include <errno.h>
#include <string.h>

#include "spdy_internal.h"
#include "xalloc.h"

/* -------- the stream table -------- */

struct spdy_stream *spdy_find(const struct spdy_session *s, uint32_t id)
{
	for (size_t i = 0; i < s->nstreams; i++) {
		if (s->streams[i].id == id)
			return &s->streams[i];
	}
	return NULL;
}

struct spdy_stream *spdy_add_stream(struct spdy_session *s, uint32_t id)
{
	struct spdy_stream *st = &s->streams[s->nstreams++];

	memset(st, 0, sizeof(*st));
	st->id = id;
	st->send_window = s->peer_initial_window;
	st->recv_window = SPDY_INITIAL_WINDOW;
	return st;
}

/* Removes a stream from the table (the last one takes its slot). */
void spdy_drop(struct spdy_session *s, struct spdy_stream *st)
{
	*st = s->streams[--s->nstreams];
}

void spdy_drop_if_done(struct spdy_session *s, struct spdy_stream *st)
{
	if (st->local_done && st->remote_done)
		spdy_drop(s, st);
}

bool spdy_peer_id(const struct spdy_session *s, uint32_t id)
{
	return (id & 1) == (s->opts.client ? 0u : 1u);
}

/* -------- receive windows -------- */

/*
 * Gives room back to the peer once half a window is owed, so updates stay few, and never
 * beyond the largest window SPDY allows.
 */
static void give_back(struct spdy_session *s, uint32_t id, int64_t *window, int64_t *owed)
{
	int64_t n = *owed < SPDY_MAX_WINDOW - *window ? *owed : SPDY_MAX_WINDOW - *window;

	if (*owed < SPDY_INITIAL_WINDOW / 2 || n <= 0)
		return;
	spdy_put_window_update(s, id, (uint32_t)n);
	*window += n;
	*owed -= n;
}

/* n bytes the caller is done with (or that were dropped) on the session and stream st. */
void spdy_owe(struct spdy_session *s, struct spdy_stream *st, size_t n)
{
	s->owed += (int64_t)n;
	give_back(s, 0, &s->recv_window, &s->owed);
	if (st && !st->remote_done) {
		st->owed += (int64_t)n;
		give_back(s, st->id, &st->recv_window, &st->owed);
	}
}

void spdy_consume(struct spdy_session *s, uint32_t id, size_t n)
{
	spdy_owe(s, spdy_find(s, id), n);
}

/* -------- the session -------- */

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

	uint32_t settings[3] = { 1, SPDY_SETTINGS_MAX_CONCURRENT_STREAMS, 0 };

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
	spdy_put_words(s, SPDY_SETTINGS, 0, settings, 3);
	spdy_put_window_update(s, 0, (uint32_t)(s->recv_window - SPDY_INITIAL_WINDOW));
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

bool spdy_stream_exists(const struct spdy_session *s, uint32_t id)
{
	return spdy_find(s, id) != NULL;
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
