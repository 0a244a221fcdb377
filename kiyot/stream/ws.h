/*
 * ws.h: the server side of a WebSocket connection (RFC 6455, framing by libwslay) carrying
 * Kubernetes' channel subprotocols, as a state machine: bytes in, events and bytes out.
 *
 * After the HTTP upgrade (http_answer_ws), the caller feeds what it reads and handles one
 * event at a time, sends with ws_send(), and writes out what ws_output() holds:
 *
 *	struct ws_session *w = ws_session_new(codec, err);
 *	size_t off = 0;
 *	do {
 *		ssize_t n = ws_feed(w, buf + off, len - off, &ev, err);
 *		if (n < 0)
 *			break;      the close frame saying why is in the output: write it, then close
 *		off += n;
 *		handle(&ev);        ev.type may be WS_EV_NONE
 *	} while (off < len || ev.type != WS_EV_NONE);
 *
 * The channel subprotocols put one channel per message (0 stdin, 1 stdout, 2 stderr, 3 the
 * error status, 4 terminal resizes; port-forward pairs data and error channels per port):
 *   WS_CODEC_BINARY  "channel.k8s.io", "v4.channel.k8s.io", "portforward.k8s.io", or none:
 *                    the first byte of a message is its channel, the rest its data.
 *   WS_CODEC_BASE64  "base64.channel.k8s.io", "v4.base64.channel.k8s.io": text messages,
 *                    an ASCII digit '0'..'9' for the channel, then the data in base64.
 *   WS_CODEC_V5      "v5.channel.k8s.io": binary, and a message on channel 255 whose one byte
 *                    names a channel the sender closes (the client's end of stdin).
 * Client frames must be masked; this side's are not. Pings are answered (no event); a close
 * from the peer is answered with the same code.
 *
 * Errors: a frame or message that breaks RFC 6455 or the subprotocol makes ws_feed() fail
 * with -EPROTO after queueing a close frame with the matching code (1002 protocol error, 1007
 * invalid data, 1009 too big; no code when a frame head cannot be parsed at all); the session
 * then takes no more input.
 *
 * Bounds: a message is at most WS_MAX_MESSAGE bytes, fragmented or not (a larger one is
 * refused with its first bytes, before any of it is buffered). ws_feed() takes at most
 * WS_FEED_CHUNK bytes a call, so the messages completed by one call are few; their copies live
 * until handed out. The output grows by what the caller sends plus the answers to pings and
 * closes: drain it after each feed.
 *
 * Not thread-safe: one session is driven by one thread at a time.
 */
#ifndef KIYOT_STREAM_WS_H
#define KIYOT_STREAM_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

#define WS_MAX_MESSAGE (16 * 1024 * 1024)
#define WS_FEED_CHUNK 4096
#define WS_CLOSE_CHANNEL 255

/* RFC 6455 close codes this side sends */
#define WS_CLOSE_NORMAL 1000
#define WS_CLOSE_PROTOCOL 1002
#define WS_CLOSE_INVALID_DATA 1007
#define WS_CLOSE_TOO_BIG 1009

enum ws_codec {
	WS_CODEC_BINARY,
	WS_CODEC_BASE64,
	WS_CODEC_V5,
};

/* The subprotocols ws_codec_of() knows, most capable first, NULL-terminated (http_negotiate). */
extern const char *const ws_subprotocols[];

/* The codec of a negotiated subprotocol (NULL or "": none, binary). -ENOENT if unknown. */
int ws_codec_of(const char *subprotocol, enum ws_codec *codec);

enum ws_event_type {
	WS_EV_NONE,
	WS_EV_DATA,	     /* data[0..len) on channel */
	WS_EV_CLOSE_CHANNEL, /* v5: the peer closed its end of channel */
	WS_EV_CLOSE,	     /* the peer closed the connection: code (0 if none), reason */
};

struct ws_event {
	enum ws_event_type type;
	uint8_t channel;
	const uint8_t *data; /* DATA: valid until the next ws_feed() */
	size_t len;
	uint16_t code;	    /* CLOSE */
	const char *reason; /* CLOSE: NUL-terminated, maybe ""; valid until the next ws_feed() */
};

struct ws_session *ws_session_new(enum ws_codec codec, struct err *err);
void ws_session_free(struct ws_session *w);

/*
 * Consumes bytes from data[0..len) (at most WS_FEED_CHUNK) and stores the next event in *ev
 * (WS_EV_NONE if there is none yet). Returns the bytes consumed, possibly 0 when events were
 * waiting. Call until all bytes are consumed and no event comes back. Once the peer's close
 * has arrived, further bytes are consumed and ignored. -EPROTO: see above.
 */
ssize_t ws_feed(struct ws_session *w, const void *data, size_t len, struct ws_event *ev,
		struct err *err);

/*
 * Sends data[0..len) on channel as one message. -EINVAL: a channel the codec cannot carry
 * (base64: above 9; v5: 255); -EMSGSIZE: the message would exceed WS_MAX_MESSAGE; -EPIPE: this
 * side has sent its close.
 */
int ws_send(struct ws_session *w, uint8_t channel, const void *data, size_t len, struct err *err);

/* v5 only: tells the peer this side will send no more on channel. */
int ws_close_channel(struct ws_session *w, uint8_t channel, struct err *err);

/* Starts the close handshake with code and a reason of at most 123 bytes. */
int ws_close(struct ws_session *w, uint16_t code, const char *reason, struct err *err);

/*
 * Whether the connection is finished: closes went both ways, or the session failed. Once its
 * output is written, the caller closes the socket.
 */
bool ws_done(const struct ws_session *w);

/* The bytes to write to the peer, NULL when none; then consume what was written. */
const uint8_t *ws_output(const struct ws_session *w, size_t *len);
void ws_output_consume(struct ws_session *w, size_t n);

#endif
