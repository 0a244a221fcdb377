/*
 * frame.h: protobuf messages on a byte stream, each as one frame: its length as 4 bytes,
 * big-endian, then that many bytes of the packed message. What the cell feed (feed.h) sends
 * both ways.
 *
 * A reader takes bytes as they come (from a socket or a TLS session, in any pieces) and hands
 * back whole frames. It is bounded: a frame longer than its max is an error the moment its
 * length is read, before anything is allocated for it. It holds no memory while it has no
 * partial frame (frame_reader_idle), so a quiet connection costs nothing here.
 *
 *	struct frame_reader r;
 *	frame_reader_init(&r, 1 << 20);
 *	room = frame_reader_room(&r, &n);    n bytes may be written at room
 *	frame_reader_wrote(&r, got);         got of them were
 *	while ((ret = frame_reader_next(&r, &frame, &len, err)) == 1)
 *		... frame[0, len) is valid until the next call on r ...
 *	frame_reader_release(&r);
 *
 * Not thread safe: a reader belongs to one thread at a time.
 */
#ifndef KIYOT_FRAME_H
#define KIYOT_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "err.h"

#define FRAME_HEADER 4

struct frame_reader {
	uint8_t *buf;
	size_t start, end, cap; /* unread bytes are buf[start, end) */
	size_t max;		/* the longest frame taken (its message; the header aside) */
};

void frame_reader_init(struct frame_reader *r, size_t max);
/* Where the next bytes go, and how many fit (*n >= 1): the rest of the frame being read when
 * its length is known, else a small read's worth. Never NULL. */
uint8_t *frame_reader_room(struct frame_reader *r, size_t *n);
/* n bytes were written at the room (n <= the room's size). */
void frame_reader_wrote(struct frame_reader *r, size_t n);
/* The next whole frame: 1 with *frame and *len set (valid until the next call on r), 0 when
 * none is whole yet, -EMSGSIZE (naming the length and max) when the next frame is longer
 * than max: the stream cannot be read on past that. */
int frame_reader_next(struct frame_reader *r, const uint8_t **frame, size_t *len, struct err *err);
/* Bytes held that no frame_reader_next has returned yet. */
size_t frame_reader_pending(const struct frame_reader *r);
/* Frees the buffer if it holds no byte of a frame yet to come. */
void frame_reader_idle(struct frame_reader *r);
void frame_reader_release(struct frame_reader *r);

/* msg packed as one frame, in a new buffer the caller frees: -EMSGSIZE past max. */
int frame_pack(const ProtobufCMessage *msg, size_t max, uint8_t **out, size_t *len,
	       struct err *err);
/* A frame's message, of desc: -EPROTO (naming what) when it does not parse. The caller frees
 * it with protobuf_c_message_free_unpacked(*msg, NULL). */
int frame_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *frame, size_t len,
		 ProtobufCMessage **msg, struct err *err);

#endif
