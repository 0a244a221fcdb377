/*
 * fuzz_spdy: a SPDY/3.1 session fed untrusted bytes. The first byte picks the options (bit 0
 * strict windows, bit 1 the client side, bit 2 a limit of 2 streams) and how the rest is cut
 * into reads (bits 3-4: 1, 7 or 100 bytes, or all at once); the session is driven as a
 * streaming server drives it: it opens a stream of its own first (id 2, or 1 on the client
 * side), answers new streams, consumes and echoes data and headers, resets every third stream,
 * pings when answered and goes away when the peer does. Besides what the sanitizers catch, it
 * checks the session's promises: every call makes progress, events stay inside what was fed,
 * headers obey their bounds, the output is whole frames, and a session error is -EPROTO with a
 * message, for good.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stream/spdy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const size_t steps[] = { 1, 7, 100, SIZE_MAX };

/* The output must be whole frames: heads, then as many bytes as they announce. */
static void drain(struct spdy_session *s)
{
	size_t len, off = 0;
	const uint8_t *p = spdy_output(s, &len);

	while (off < len) {
		uint32_t flen;

		if (len - off < 8)
			abort();
		if ((p[off] & 0x80) && (p[off] != 0x80 || p[off + 1] != 3))
			abort(); /* a control frame of another version */
		flen = (uint32_t)p[off + 5] << 16 | (uint32_t)p[off + 6] << 8 | p[off + 7];
		if (len - off - 8 < flen)
			abort();
		off += 8 + flen;
	}
	spdy_output_consume(s, len);
}

static void check_headers(const struct spdy_event *ev)
{
	if (!ev->headers || ev->nheaders > SPDY_MAX_HEADERS)
		abort();
	for (size_t i = 0; i < ev->nheaders; i++) {
		const char *name = ev->headers[i].name;

		if (!name[0] || strpbrk(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
			abort();
		if (spdy_header_get(ev->headers, ev->nheaders, name) != ev->headers[i].value)
			abort(); /* a name given twice */
		if (ev->headers[i].value[ev->headers[i].value_len] != '\0')
			abort();
	}
}

/* What a streaming server does with each event. */
static void act(struct spdy_session *s, const struct spdy_event *ev, unsigned *nstreams)
{
	static const struct spdy_header reply[] = { { "x-kind", "reply", 0 } };
	struct err err = ERR_INIT;
	uint32_t ping;

	switch (ev->type) {
	case SPDY_EV_STREAM:
		check_headers(ev);
		if (++*nstreams % 3 == 0)
			spdy_reset(s, ev->stream_id, SPDY_CANCEL, &err);
		else
			spdy_reply(s, ev->stream_id, reply, 1, false, &err);
		break;
	case SPDY_EV_REPLY:
		check_headers(ev);
		break;
	case SPDY_EV_HEADERS:
		check_headers(ev);
		spdy_send_headers(s, ev->stream_id, reply, 1, false, &err);
		break;
	case SPDY_EV_DATA:
		if (ev->len == 0)
			abort();
		spdy_consume(s, ev->stream_id, ev->len);
		spdy_send(s, ev->stream_id, ev->data, ev->len, false, &err);
		break;
	case SPDY_EV_END:
		spdy_send(s, ev->stream_id, NULL, 0, true, &err);
		break;
	case SPDY_EV_PING:
		if (ev->answer)
			spdy_ping(s, &ping);
		break;
	case SPDY_EV_GOAWAY:
		spdy_goaway(s, SPDY_GOAWAY_OK);
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct spdy_opts o;
	struct spdy_session *s;
	struct spdy_event ev;
	struct err err = ERR_INIT;
	static const struct spdy_header own[] = { { "streamtype", "error", 0 } };
	size_t off = 1, step;
	unsigned nstreams = 0;
	uint32_t id;

	if (size < 1)
		return 0;
	o = (struct spdy_opts){ .strict_windows = data[0] & 1,
				.client = data[0] & 2,
				.max_streams = data[0] & 4 ? 2 : 0 };
	step = steps[(data[0] >> 3) & 3];
	s = spdy_session_new(&o, &err);
	if (!s || spdy_open(s, own, 1, false, &id, &err) < 0 || id != (o.client ? 1 : 2))
		abort();
	do {
		size_t end = size - off > step ? off + step : size;
		ssize_t n = spdy_feed(s, data + off, end - off, &ev, &err);

		if (n < 0) {
			if (n != -EPROTO || !err.msg[0] ||
			    spdy_feed(s, "", 0, &ev, &err) != -EPROTO)
				abort();
			break;
		}
		if ((size_t)n > end - off || (n == 0 && ev.type == SPDY_EV_NONE && end > off))
			abort(); /* took more than it was given, or stalled */
		if (ev.type == SPDY_EV_DATA &&
		    (ev.data < data + off || ev.data + ev.len > data + end))
			abort();
		off += (size_t)n;
		act(s, &ev, &nstreams);
		if (spdy_stream_count(s) > (o.max_streams ? o.max_streams : SPDY_MAX_STREAMS))
			abort();
		drain(s);
	} while (off < size || ev.type != SPDY_EV_NONE);
	drain(s);
	spdy_session_free(s);
	return 0;
}
