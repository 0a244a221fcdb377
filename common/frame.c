/*
 * frame.c: length-prefixed protobuf frames (see frame.h).
 */
#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

/* What a read asks for while no frame's length is known: a header and a small message. */
#define FRAME_READ_MIN 512

void frame_reader_init(struct frame_reader *r, size_t max)
{
	*r = (struct frame_reader){ .max = max };
}

static size_t header_len(const uint8_t *p)
{
	return (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
}

/* How many bytes the buffer should hold from start: the frame in progress whole when its
 * length is known (and allowed), else a small read's worth. */
static size_t want(const struct frame_reader *r)
{
	size_t have = r->end - r->start;

	if (have >= FRAME_HEADER) {
		size_t len = header_len(r->buf + r->start);

		if (len <= r->max && FRAME_HEADER + len > have)
			return FRAME_HEADER + len;
	}
	return have + FRAME_READ_MIN;
}

uint8_t *frame_reader_room(struct frame_reader *r, size_t *n)
{
	size_t need = want(r);

	if (r->start && r->cap - r->start < need) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
	}
	if (r->cap - r->start < need) {
		r->cap = r->start + need;
		r->buf = xrealloc(r->buf, r->cap);
	}
	*n = r->cap - r->end;
	return r->buf + r->end;
}

void frame_reader_wrote(struct frame_reader *r, size_t n)
{
	r->end += n;
}

int frame_reader_next(struct frame_reader *r, const uint8_t **frame, size_t *len, struct err *err)
{
	size_t have = r->end - r->start, n;

	if (have < FRAME_HEADER)
		return 0;
	n = header_len(r->buf + r->start);
	if (n > r->max)
		return err_set(err, EMSGSIZE, "a frame of %zu bytes, over the %zu bytes allowed", n,
			       r->max);
	if (have - FRAME_HEADER < n)
		return 0;
	*frame = r->buf + r->start + FRAME_HEADER;
	*len = n;
	r->start += FRAME_HEADER + n;
	if (r->start == r->end)
		r->start = r->end = 0; /* the frame stays where it is until the next call */
	return 1;
}

size_t frame_reader_pending(const struct frame_reader *r)
{
	return r->end - r->start;
}

void frame_reader_idle(struct frame_reader *r)
{
	if (r->end == r->start) {
		free(r->buf);
		r->buf = NULL;
		r->start = r->end = r->cap = 0;
	}
}

void frame_reader_release(struct frame_reader *r)
{
	free(r->buf);
	*r = (struct frame_reader){ .max = r->max };
}

int frame_pack(const ProtobufCMessage *msg, size_t max, uint8_t **out, size_t *len, struct err *err)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	uint8_t *p;

	if (n > max || n > UINT32_MAX)
		return err_set(err, EMSGSIZE, "a %s of %zu bytes, over the %zu bytes a frame takes",
			       msg->descriptor->short_name, n, max);
	p = xmalloc(FRAME_HEADER + n);
	p[0] = (uint8_t)(n >> 24);
	p[1] = (uint8_t)(n >> 16);
	p[2] = (uint8_t)(n >> 8);
	p[3] = (uint8_t)n;
	protobuf_c_message_pack(msg, p + FRAME_HEADER);
	*out = p;
	*len = FRAME_HEADER + n;
	return 0;
}

int frame_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *frame, size_t len,
		 ProtobufCMessage **msg, struct err *err)
{
	ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, frame);

	if (!m)
		return err_set(err, EPROTO, "a frame of %zu bytes is not a %s", len,
			       desc->short_name);
	*msg = m;
	return 0;
}
