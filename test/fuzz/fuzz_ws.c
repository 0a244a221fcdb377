/*
 * fuzz_ws: a WebSocket server session fed untrusted client bytes. The first byte picks the
 * codec (bits 0-1: binary, base64, v5) and how the rest is cut into reads (bits 2-3: 1, 7 or
 * 100 bytes, or all at once); the session echoes each message on its channel and closes the
 * channels the peer closes. Besides what the sanitizers catch, it checks the session's
 * promises: every call makes progress, events obey the codec, the output is whole unmasked
 * frames, and a failure is -EPROTO with a message, for good.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stream/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const size_t steps[] = { 1, 7, 100, SIZE_MAX };

/* The output must be whole frames from a server: unmasked, lengths that add up. */
static void drain(struct ws_session *w)
{
	size_t len, off = 0;
	const uint8_t *p = ws_output(w, &len);

	while (off < len) {
		uint64_t flen;
		size_t h = 2;

		if (len - off < 2 || (p[off + 1] & 0x80))
			abort();
		flen = p[off + 1] & 0x7f;
		if (flen == 126) {
			h = 4;
			flen = (uint64_t)p[off + 2] << 8 | p[off + 3];
		} else if (flen == 127) {
			h = 10;
			flen = 0;
			for (int i = 0; i < 8; i++)
				flen = flen << 8 | p[off + 2 + i];
		}
		if (len - off < h || len - off - h < flen)
			abort();
		off += h + flen;
	}
	ws_output_consume(w, len);
}

static void act(struct ws_session *w, enum ws_codec codec, const struct ws_event *ev)
{
	struct err err = ERR_INIT;

	switch (ev->type) {
	case WS_EV_DATA:
		if (ev->len > WS_MAX_MESSAGE || (ev->len && !ev->data))
			abort();
		if (codec == WS_CODEC_BASE64 && ev->channel > 9)
			abort();
		if (codec == WS_CODEC_V5 && ev->channel == WS_CLOSE_CHANNEL)
			abort();
		ws_send(w, ev->channel, ev->data, ev->len, &err);
		break;
	case WS_EV_CLOSE_CHANNEL:
		if (codec != WS_CODEC_V5 || ws_close_channel(w, ev->channel, &err) == -EINVAL)
			abort();
		break;
	case WS_EV_CLOSE:
		if (!ev->reason || strlen(ev->reason) > 123)
			abort();
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ws_session *w;
	struct ws_event ev;
	struct err err = ERR_INIT;
	enum ws_codec codec;
	size_t off = 1, step;

	if (size < 1 || (data[0] & 3) == 3)
		return 0;
	codec = (enum ws_codec)(data[0] & 3);
	step = steps[(data[0] >> 2) & 3];
	w = ws_session_new(codec, &err);
	if (!w)
		abort();
	do {
		size_t end = size - off > step ? off + step : size;
		ssize_t n = ws_feed(w, data + off, end - off, &ev, &err);

		if (n < 0) {
			if (n != -EPROTO || !err.msg[0] || !ws_done(w) ||
			    ws_feed(w, "", 0, &ev, &err) != -EPROTO)
				abort();
			break;
		}
		if ((size_t)n > end - off || (n == 0 && ev.type == WS_EV_NONE && end > off))
			abort(); /* took more than it was given, or stalled */
		off += (size_t)n;
		act(w, codec, &ev);
		drain(w);
	} while (off < size || ev.type != WS_EV_NONE);
	drain(w);
	ws_session_free(w);
	return 0;
}
