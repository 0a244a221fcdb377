/*
 * spdy_internal.h: SPDY/3 header blocks, shared by spdy.c and spdy_hdr.c only.
 *
 * A session keeps one inflate and one deflate context for its whole life, as SPDY/3 requires:
 * every block is compressed against all blocks before it. Decoding therefore always inflates a
 * whole block first (keeping the contexts in step) and only then judges its contents.
 */
#ifndef KIYOT_STREAM_SPDY_INTERNAL_H
#define KIYOT_STREAM_SPDY_INTERNAL_H

#include <zlib.h>

#include "spdy.h"

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

#endif
