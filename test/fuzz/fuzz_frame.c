/*
 * fuzz_frame: the cell feed's framing (common/frame.h) fed untrusted bytes, as kiyot reads
 * what an agent sends. The first byte picks how the rest is cut into reads (bits 0-1: 1, 3 or
 * 100 bytes, or as much as the reader offers), the largest frame taken (bit 2: 64 bytes or
 * 1 MiB) and whether the reader drops its buffer whenever it may (bit 3). Each whole frame is
 * unpacked as a WatchEvent (what kiyot does with it), and one that parses is packed again and
 * read back, as kiyot keeps a cell's usage (the read may fail: protobuf-c keeps unknown fields
 * whose tags it writes back in a form it then refuses, and kiyot asks the agent then). Besides what the sanitizers catch, the frames read must be exactly those
 * a one-pass reading of the input finds, up to the first one over the limit, which must fail
 * -EMSGSIZE and end the stream.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cellagent.pb-c.h"
#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const size_t steps[] = { 1, 3, 100, SIZE_MAX };

/* The frame at *off of the one-pass reading: 1 (frame at *at, *len), 0 at the end of whole
 * frames, -1 for one over max. */
static int reference_next(const uint8_t *p, size_t n, size_t *off, size_t max, size_t *at,
			  size_t *len)
{
	size_t l;

	if (n - *off < FRAME_HEADER)
		return 0;
	l = (size_t)p[*off] << 24 | (size_t)p[*off + 1] << 16 | (size_t)p[*off + 2] << 8 |
	    p[*off + 3];
	if (l > max)
		return -1;
	if (n - *off - FRAME_HEADER < l)
		return 0;
	*at = *off + FRAME_HEADER;
	*len = l;
	*off += FRAME_HEADER + l;
	return 1;
}

static void use(const uint8_t *frame, size_t len)
{
	ProtobufCMessage *msg = NULL;
	ProtobufCMessage *again = NULL;
	struct err err = ERR_INIT;
	uint8_t *packed = NULL;
	size_t plen = 0;

	if (frame_unpack(&kiyot__cell__v1__watch_event__descriptor, frame, len, &msg, &err) < 0) {
		if (err.code != EPROTO || !err.msg[0])
			abort();
		return;
	}
	if (frame_pack(msg, SIZE_MAX, &packed, &plen, &err) < 0)
		abort();
	if (frame_unpack(&kiyot__cell__v1__watch_event__descriptor, packed + FRAME_HEADER,
			 plen - FRAME_HEADER, &again, &err) == 0)
		protobuf_c_message_free_unpacked(again, NULL);
	protobuf_c_message_free_unpacked(msg, NULL);
	free(packed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frame_reader r;
	size_t step, max, off = 1, ref_off = 1;
	int idle, failed = 0;

	if (size < 1)
		return 0;
	step = steps[data[0] & 3];
	max = data[0] & 4 ? 1u << 20 : 64;
	idle = data[0] & 8;
	frame_reader_init(&r, max);
	while (off < size && !failed) {
		size_t room, n;
		uint8_t *p = frame_reader_room(&r, &room);
		const uint8_t *frame;
		size_t len;
		int ret;
		struct err err = ERR_INIT;

		if (room < 1)
			abort();
		n = size - off < room ? size - off : room;
		if (n > step)
			n = step;
		memcpy(p, data + off, n);
		frame_reader_wrote(&r, n);
		off += n;
		while ((ret = frame_reader_next(&r, &frame, &len, &err)) == 1) {
			size_t at = 0, rlen = 0;

			if (reference_next(data, size, &ref_off, max, &at, &rlen) != 1 ||
			    rlen != len || memcmp(data + at, frame, len) != 0)
				abort();
			use(frame, len);
		}
		if (ret < 0) {
			size_t at, rlen;

			if (ret != -EMSGSIZE || !err.msg[0] ||
			    reference_next(data, size, &ref_off, max, &at, &rlen) != -1)
				abort();
			failed = 1;
		}
		if (idle)
			frame_reader_idle(&r);
	}
	if (!failed) {
		size_t at, rlen;

		/* every whole frame of the input was read: what is left is a partial one */
		if (reference_next(data, size, &ref_off, max, &at, &rlen) != 0 ||
		    frame_reader_pending(&r) != size - ref_off)
			abort();
	}
	frame_reader_release(&r);
	return 0;
}
