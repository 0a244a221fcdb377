/*
 * spdy_internal.h: what the files of the SPDY session share, and no one else.
 *
 *	spdy.c       the session, its stream table and receive windows
 *	spdy_in.c    frames received: parsing, checks, events
 *	spdy_out.c   frames this side sends: the caller's actions
 *	spdy_hdr.c   header blocks and their compression
 *
 * A session keeps one inflate and one deflate context for its whole life, as SPDY/3 requires:
 * every header block is compressed against all blocks before it. Decoding therefore always
 * inflates a whole block first (keeping the contexts in step) and only then judges its
 * contents.
 */
#ifndef KIYOT_STREAM_SPDY_INTERNAL_H
#define KIYOT_STREAM_SPDY_INTERNAL_H

#include <zlib.h>

#include "outq.h"
#include "spdy.h"

#define SPDY_VERSION 3
#define SPDY_MAX_WINDOW 0x7fffffff

enum spdy_frame_type {
	SPDY_SYN_STREAM = 1,
	SPDY_SYN_REPLY = 2,
	SPDY_RST_STREAM = 3,
	SPDY_SETTINGS = 4,
	SPDY_PING = 6,
	SPDY_GOAWAY = 7,
	SPDY_HEADERS = 8,
	SPDY_WINDOW_UPDATE = 9,
};

#define SPDY_FLAG_FIN 0x01
#define SPDY_FLAG_UNIDIRECTIONAL 0x02
#define SPDY_SETTINGS_MAX_CONCURRENT_STREAMS 4
#define SPDY_SETTINGS_INITIAL_WINDOW_SIZE 7

struct spdy_zip {
	z_stream in, out;
	bool in_ready, out_ready;
	uint8_t *block; /* an inflated block: SPDY_MAX_HEADER_BLOCK + 1 bytes */
	char *store;	/* its names and values, NUL-terminated: SPDY_MAX_HEADER_BLOCK bytes */
	struct spdy_header hdrs[SPDY_MAX_HEADERS];
	size_t nhdrs;
	uint8_t *raw;  /* a block to deflate: SPDY_MAX_HEADER_BLOCK bytes */
	uint8_t *zout; /* its compressed form: SPDY_MAX_CONTROL bytes */
};

int spdy_zip_init(struct spdy_zip *z, struct err *err);
void spdy_zip_release(struct spdy_zip *z);

/*
 * Inflates a compressed block into z->block; stores its length in *n. -EPROTO when the block is
 * not valid zlib for this stream of blocks, -EMSGSIZE when it inflates beyond
 * SPDY_MAX_HEADER_BLOCK. Either leaves the inflate context out of step (a session error).
 */
int spdy_zip_inflate(struct spdy_zip *z, const uint8_t *in, size_t len, size_t *n, struct err *err);

/*
 * Parses the name/value block z->block[0..n) into z->hdrs. -EBADMSG on a malformed block:
 * lengths past its end, bytes after the last pair, more than SPDY_MAX_HEADERS pairs, an empty
 * or upper-case name, a name given twice.
 */
int spdy_zip_parse(struct spdy_zip *z, size_t n, struct err *err);

/*
 * Encodes and compresses h[0..n) into z->zout; stores the compressed length in *len. -EINVAL on
 * headers SPDY could not carry (checked before the deflate context is touched).
 */
int spdy_zip_encode(struct spdy_zip *z, const struct spdy_header *h, size_t n, size_t *len,
		    struct err *err);

static inline uint32_t spdy_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint32_t spdy_get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static inline void spdy_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

struct spdy_stream {
	uint32_t id;
	bool local_done;  /* this side sent FIN */
	bool remote_done; /* the peer sent FIN */
	bool replied;	  /* SYN_REPLY sent (peer's streams) or received (ours) */
	int64_t send_window, recv_window;
	int64_t owed; /* consumed but not yet given back with WINDOW_UPDATE */
};

/* what the input is in the middle of */
enum spdy_in_state {
	SPDY_IN_HEAD,	 /* the 8 bytes every frame starts with */
	SPDY_IN_CONTROL, /* a control frame's payload, gathered whole */
	SPDY_IN_DATA,	 /* a DATA frame's payload, handed out as it comes */
};

struct spdy_session {
	struct spdy_opts opts;
	struct spdy_zip zip;
	struct outq out;

	enum spdy_in_state in;
	uint8_t head[8];
	size_t head_len;
	uint8_t *ctrl; /* SPDY_MAX_CONTROL bytes */
	size_t ctrl_len, ctrl_need;
	uint32_t data_id, data_left;
	bool data_deliver, data_fin;

	struct spdy_stream *streams; /* opts.max_streams slots, the first nstreams used */
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

/* the stream table (spdy.c) */
struct spdy_stream *spdy_find(const struct spdy_session *s, uint32_t id);
struct spdy_stream *spdy_add_stream(struct spdy_session *s, uint32_t id);
void spdy_drop(struct spdy_session *s, struct spdy_stream *st);
void spdy_drop_if_done(struct spdy_session *s, struct spdy_stream *st);
bool spdy_peer_id(const struct spdy_session *s, uint32_t id);
void spdy_owe(struct spdy_session *s, struct spdy_stream *st, size_t n);

/* frame writers (spdy_out.c) */
void spdy_put_words(struct spdy_session *s, enum spdy_frame_type type, uint8_t flags,
		    const uint32_t *w, size_t n);
void spdy_put_rst(struct spdy_session *s, uint32_t id, uint32_t status);
void spdy_put_window_update(struct spdy_session *s, uint32_t id, uint32_t delta);

#endif
