/*
 * spdy.h: a SPDY/3.1 session as a state machine: bytes in, events and bytes out, no sockets.
 *
 * After the HTTP upgrade, the caller feeds what it reads from the connection and handles one
 * event at a time, calls spdy_reply/spdy_send/... to act, and writes out what spdy_output()
 * holds:
 *
 *	struct spdy_session *s = spdy_session_new(&opts, err);   the preface is in the output
 *	size_t off = 0;
 *	do {
 *		ssize_t n = spdy_feed(s, buf + off, len - off, &ev, err);
 *		if (n < 0)
 *			break;      session error: write out the GOAWAY in the output, then close
 *		off += n;
 *		handle(&ev);        ev.type may be SPDY_EV_NONE
 *	} while (off < len || ev.type != SPDY_EV_NONE);
 *	out = spdy_output(s, &olen); ... spdy_output_consume(s, written);
 *
 * Header blocks are zlib-compressed with the SPDY/3 dictionary, one inflate and one deflate
 * context per session. Stream ids are odd for the client's streams, even for the server's.
 *
 * Flow control (SPDY/3.1): each stream and the session start with a 64 KiB window each way.
 * Received DATA uses up the receive windows; spdy_consume() gives the room back, with
 * WINDOW_UPDATE frames once half a window is owed. With opts.strict_windows a peer that sends
 * beyond a window is answered with FLOW_CONTROL_ERROR (RST_STREAM for a stream's window, GOAWAY
 * for the session's), and spdy_send() sends no more than the peer's windows allow, reporting
 * how much it took. Without it (the default) windows are kept and updated but neither side is
 * held to them: Kubernetes' SPDY peers (moby/spdystream, used by kubectl, the kubelet and the
 * API server) ignore WINDOW_UPDATE and SETTINGS and never send them, so holding them to
 * windows would stall every stream after its first 64 KiB. Their only back-pressure is TCP's:
 * stop feeding and reading.
 *
 * Errors: a frame that breaks a stream's rules resets that stream (RST_STREAM in the output, a
 * SPDY_EV_RESET event if the caller knew the stream); a frame that breaks the session's rules
 * (bad framing, header compression out of step, stream ids going backwards, an unsupported
 * version) makes spdy_feed() fail with -EPROTO after queueing GOAWAY; the session then
 * accepts no more input.
 *
 * Bounds: control frames at most SPDY_MAX_CONTROL bytes, header blocks at most
 * SPDY_MAX_HEADER_BLOCK bytes once inflated with at most SPDY_MAX_HEADERS names, at most
 * opts.max_streams streams at once (SPDY_MAX_STREAMS by default). DATA payloads are never
 * buffered: they are handed out as they arrive. The output grows by what the caller sends plus
 * at most the size of the input fed (answers to PINGs, resets), so drain it after each feed.
 *
 * Not thread-safe: one session is driven by one thread at a time.
 */
#ifndef KIYOT_STREAM_SPDY_H
#define KIYOT_STREAM_SPDY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

#define SPDY_MAX_STREAMS 64
#define SPDY_MAX_STREAMS_LIMIT 1024
#define SPDY_INITIAL_WINDOW 65536
#define SPDY_MAX_HEADER_BLOCK (64 * 1024)
#define SPDY_MAX_HEADERS 128
#define SPDY_MAX_CONTROL (SPDY_MAX_HEADER_BLOCK + 1024)
#define SPDY_DATA_CHUNK 16384 /* the largest DATA frame this side writes */

/* RST_STREAM status codes */
enum spdy_rst {
	SPDY_PROTOCOL_ERROR = 1,
	SPDY_INVALID_STREAM = 2,
	SPDY_REFUSED_STREAM = 3,
	SPDY_UNSUPPORTED_VERSION = 4,
	SPDY_CANCEL = 5,
	SPDY_INTERNAL_ERROR = 6,
	SPDY_FLOW_CONTROL_ERROR = 7,
	SPDY_STREAM_IN_USE = 8,
	SPDY_STREAM_ALREADY_CLOSED = 9,
	SPDY_FRAME_TOO_LARGE = 11,
};

/* GOAWAY status codes */
enum spdy_goaway {
	SPDY_GOAWAY_OK = 0,
	SPDY_GOAWAY_PROTOCOL_ERROR = 1,
	SPDY_GOAWAY_INTERNAL_ERROR = 2,
};

struct spdy_header {
	const char *name;  /* lower case, NUL-terminated */
	const char *value; /* NUL-terminated after value_len bytes; NUL separates multiple values */
	size_t value_len;  /* when sending, 0 means strlen(value) */
};

enum spdy_event_type {
	SPDY_EV_NONE,
	SPDY_EV_STREAM,	 /* the peer opened stream_id, with headers */
	SPDY_EV_REPLY,	 /* the peer answered stream_id (one this side opened), with headers */
	SPDY_EV_HEADERS, /* more headers on stream_id */
	SPDY_EV_DATA,	 /* data[0..len) on stream_id; a frame may come in several events */
	SPDY_EV_END,	 /* the peer sends no more on stream_id (half-closed remote) */
	SPDY_EV_RESET,	 /* stream_id is gone: reset by the peer, or by this side if local */
	SPDY_EV_PING,	 /* a PING id: the peer's (answered already), or an answer to ours */
	SPDY_EV_GOAWAY,	 /* the peer goes away: id is its last good stream id, status why */
	SPDY_EV_WINDOW,	 /* the peer's window for stream_id (0: session) grew: send more */
};

struct spdy_event {
	enum spdy_event_type type;
	uint32_t stream_id;
	const struct spdy_header *headers; /* STREAM, REPLY, HEADERS; valid until the next feed */
	size_t nheaders;
	const uint8_t *data; /* DATA: points into the bytes given to spdy_feed() */
	size_t len;
	uint32_t status; /* RESET: enum spdy_rst; GOAWAY: enum spdy_goaway */
	uint32_t id;	 /* PING: its id; GOAWAY: the last good stream id */
	bool local;	 /* RESET: this side reset the stream over a frame the peer sent */
	bool answer;	 /* PING: the peer answered a ping of ours */
};

struct spdy_opts {
	bool client;	      /* this side opens odd stream ids and pings with odd ids */
	bool strict_windows;  /* hold both sides to the flow-control windows (see above) */
	unsigned max_streams; /* streams open at once; 0: SPDY_MAX_STREAMS; at most ..._LIMIT */
};

/*
 * A new session; NULL opts means a server with the defaults. Its output starts with SETTINGS
 * (max concurrent streams) and a WINDOW_UPDATE opening the session window for all streams.
 * NULL, with err set to EINVAL, on a max_streams over the limit.
 */
struct spdy_session *spdy_session_new(const struct spdy_opts *opts, struct err *err);
void spdy_session_free(struct spdy_session *s);

/*
 * Consumes bytes from data[0..len) up to the end of the next event, which it stores in *ev
 * (SPDY_EV_NONE when the bytes ran out first, or a frame needed no event). Returns the bytes
 * consumed, possibly 0 when an event was pending. Call until all bytes are consumed and no
 * event comes back. Returns -EPROTO on a session error, and ever after.
 */
ssize_t spdy_feed(struct spdy_session *s, const void *data, size_t len, struct spdy_event *ev,
		  struct err *err);

/* The value of header name in h[0..n), or NULL. */
const char *spdy_header_get(const struct spdy_header *h, size_t n, const char *name);

/*
 * Opens a stream with headers (SYN_STREAM); fin: this side sends nothing more on it.
 * Stores its id in *id. Fails with -EINVAL on bad headers (empty or upper-case names, a block
 * over the bounds), -EAGAIN at the stream limit, -EPIPE after a GOAWAY either way.
 */
int spdy_open(struct spdy_session *s, const struct spdy_header *h, size_t n, bool fin, uint32_t *id,
	      struct err *err);

/* Answers a stream the peer opened (SYN_REPLY). -ENOENT: no such stream; -EALREADY: answered. */
int spdy_reply(struct spdy_session *s, uint32_t id, const struct spdy_header *h, size_t n, bool fin,
	       struct err *err);

/* Sends more headers on an open stream (HEADERS). */
int spdy_send_headers(struct spdy_session *s, uint32_t id, const struct spdy_header *h, size_t n,
		      bool fin, struct err *err);

/*
 * Sends data[0..len) on stream id in DATA frames of at most SPDY_DATA_CHUNK bytes; fin (with
 * the last of the data, or alone when len is 0) half-closes the stream. With strict windows,
 * sends at most spdy_send_window() bytes and sets fin only if everything was sent. Returns the
 * bytes sent; -ENOENT: no such stream; -EPIPE: this side already finished it.
 */
ssize_t spdy_send(struct spdy_session *s, uint32_t id, const void *data, size_t len, bool fin,
		  struct err *err);

/* How many bytes spdy_send() would take now on stream id (0 when it cannot send). */
size_t spdy_send_window(const struct spdy_session *s, uint32_t id);

/*
 * The caller is done with n bytes of stream id's data: the stream's and the session's receive
 * windows get the room back (WINDOW_UPDATE once half a window is owed). A stream that is gone
 * gives back only the session's room.
 */
void spdy_consume(struct spdy_session *s, uint32_t id, size_t n);

/* Resets stream id with status (RST_STREAM); the stream is gone. -ENOENT: no such stream. */
int spdy_reset(struct spdy_session *s, uint32_t id, enum spdy_rst status, struct err *err);

/* Sends a PING with a fresh id of this side's parity, stored in *id. */
void spdy_ping(struct spdy_session *s, uint32_t *id);

/* Sends GOAWAY: the peer may open no more streams; open ones carry on. Once per session. */
void spdy_goaway(struct spdy_session *s, enum spdy_goaway status);

/* Whether stream id is open in at least one direction. */
bool spdy_stream_exists(const struct spdy_session *s, uint32_t id);
size_t spdy_stream_count(const struct spdy_session *s);

/* The bytes to write to the peer, NULL when none; then consume what was written. */
const uint8_t *spdy_output(const struct spdy_session *s, size_t *len);
void spdy_output_consume(struct spdy_session *s, size_t n);

/* The SPDY/3 header compression dictionary (for peers written elsewhere, and tests). */
extern const char spdy_dictionary[];
extern const size_t spdy_dictionary_len;

#endif
