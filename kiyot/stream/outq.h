/*
 * outq.h: the bytes a protocol session has produced and its caller has not yet written.
 *
 * Sessions append whole frames; the caller peeks at what is pending, writes what the socket
 * takes, and consumes that much. Appending aborts on out-of-memory like xmalloc; the queue has
 * no cap of its own: each session bounds what it appends (see spdy.h and ws.h).
 */
#ifndef KIYOT_STREAM_OUTQ_H
#define KIYOT_STREAM_OUTQ_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct outq {
	struct buf b;
	size_t off; /* b.data[0..off) was consumed */
};

void outq_init(struct outq *q);
void outq_release(struct outq *q);
void outq_put(struct outq *q, const void *p, size_t n);
/* The pending bytes and their count; NULL when none. Valid until the next put or consume. */
const uint8_t *outq_peek(const struct outq *q, size_t *len);
/* Drops the first n pending bytes (at most all of them). */
void outq_consume(struct outq *q, size_t n);
size_t outq_len(const struct outq *q);

#endif
