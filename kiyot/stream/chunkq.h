/*
 * chunkq.h: bytes a client sent that wait for the far side (an agent stream, a pod's socket),
 * in the chunks they came in, with the end of the client's side as a mark after the last.
 *
 * A socket takes bytes as it can (chunkq_head, chunkq_advance); an agent stream takes them as
 * messages, several chunks joined into one (chunkq_take) since each message costs a round
 * through gRPC. The queue has no bound of its own: its owner stops reading the client while
 * chunkq_bytes is over its own bound.
 */
#ifndef KIYOT_STREAM_CHUNKQ_H
#define KIYOT_STREAM_CHUNKQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct chunk {
	struct chunk *next;
	bool end;	 /* the client's side ended after these bytes */
	size_t len, off; /* data[off..len) is still to go */
	uint8_t data[];
};

struct chunkq {
	struct chunk *head, *tail;
	size_t bytes; /* still to go, in all */
};

/* Appends a copy of data (and the end, when end). */
void chunkq_put(struct chunkq *q, const void *data, size_t len, bool end);
/* Takes the first chunks as one, joined up to max bytes (the first whatever its size), up to
 * and with the end; NULL when empty. The caller frees it. */
struct chunk *chunkq_take(struct chunkq *q, size_t max);
/* The first chunk, NULL when none: its data[off..len) goes next. */
struct chunk *chunkq_head(const struct chunkq *q);
/* n of the first chunk's bytes went: chunks done leave the queue; true when the one that left
 * carried the end. */
bool chunkq_advance(struct chunkq *q, size_t n);
void chunkq_drop(struct chunkq *q);

#endif
