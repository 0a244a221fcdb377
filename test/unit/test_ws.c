/*
 * Unit tests for kiyot/stream/ws: client frames written here by hand (masked, as RFC 6455
 * requires of clients) drive a server session; the frames it writes are parsed back here.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stream/ws.h"

#define OP_CONT 0x0
#define OP_TEXT 0x1
#define OP_BINARY 0x2
#define OP_CLOSE 0x8
#define OP_PING 0x9
#define OP_PONG 0xa

struct seen {
	enum ws_event_type type;
	uint8_t channel;
	uint16_t code;
	char data[256]; /* a copy, NUL-terminated */
	size_t len;
};

struct fixture {
	struct ws_session *w;
	uint8_t *in; /* client bytes to feed */
	size_t in_len;
	struct seen seen[256];
	size_t nseen;
	int feed_ret;
	struct err err;
};

/* a frame the server wrote */
struct sframe {
	bool fin, masked;
	uint8_t opcode;
	uint64_t len;
	uint8_t *p;
};

/* Appends a client frame (masked unless told otherwise) to the bytes to feed. */
static void client_frame_m(struct fixture *f, bool fin, uint8_t op, const void *data, size_t n,
			   bool mask)
{
	static const uint8_t key[4] = { 0x37, 0xfa, 0x21, 0x3d };
	uint8_t *p;
	size_t h = 2;

	f->in = realloc(f->in, f->in_len + n + 14);
	p = f->in + f->in_len;
	p[0] = (uint8_t)((fin ? 0x80 : 0) | op);
	if (n <= 125) {
		p[1] = (uint8_t)n;
	} else if (n <= 0xffff) {
		p[1] = 126;
		p[2] = (uint8_t)(n >> 8);
		p[3] = (uint8_t)n;
		h = 4;
	} else {
		p[1] = 127;
		for (int i = 0; i < 8; i++)
			p[2 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
		h = 10;
	}
	if (mask) {
		p[1] |= 0x80;
		memcpy(p + h, key, 4);
		h += 4;
	}
	for (size_t i = 0; i < n; i++)
		p[h + i] = (uint8_t)(((const uint8_t *)data)[i] ^ (mask ? key[i % 4] : 0));
	f->in_len += h + n;
}

static void client_frame(struct fixture *f, bool fin, uint8_t op, const void *data, size_t n)
{
	client_frame_m(f, fin, op, data, n, true);
}

/* Feeds the pending client bytes in pieces of at most step bytes, recording events. */
static void feed_in_steps(struct fixture *f, size_t step)
{
	size_t off = 0;
	struct ws_event ev;

	f->feed_ret = 0;
	do {
		size_t end = f->in_len - off > step ? off + step : f->in_len;
		ssize_t n = ws_feed(f->w, f->in + off, end - off, &ev, &f->err);

		if (n < 0) {
			f->feed_ret = (int)n;
			break;
		}
		off += (size_t)n;
		if (ev.type != WS_EV_NONE) {
			struct seen *s = &f->seen[f->nseen++];

			assert_true(f->nseen < sizeof(f->seen) / sizeof(f->seen[0]));
			s->type = ev.type;
			s->channel = ev.channel;
			s->code = ev.code;
			s->len = ev.len;
			if (ev.type == WS_EV_CLOSE)
				snprintf(s->data, sizeof(s->data), "%s", ev.reason);
			else if (ev.len && ev.len < sizeof(s->data)) /* no data: NULL */
				memcpy(s->data, ev.data, ev.len);
		}
	} while (off < f->in_len || ev.type != WS_EV_NONE);
	f->in_len = 0;
}

static void feed(struct fixture *f)
{
	feed_in_steps(f, SIZE_MAX);
}

/* Takes the next frame the server wrote; false when there is none. */
static bool server_frame(struct fixture *f, struct sframe *fr)
{
	static uint8_t payload[1 << 16];
	size_t len, h = 2;
	const uint8_t *p = ws_output(f->w, &len);

	if (len < 2)
		return false;
	fr->fin = p[0] & 0x80;
	fr->opcode = p[0] & 0x0f;
	fr->masked = p[1] & 0x80;
	fr->len = p[1] & 0x7f;
	if (fr->len == 126) {
		fr->len = (uint64_t)p[2] << 8 | p[3];
		h = 4;
	} else if (fr->len == 127) {
		fr->len = 0;
		for (int i = 0; i < 8; i++)
			fr->len = fr->len << 8 | p[2 + i];
		h = 10;
	}
	assert_true(fr->len < sizeof(payload));
	assert_true(len >= h + fr->len);
	memcpy(payload, p + h, fr->len);
	payload[fr->len] = 0;
	fr->p = payload;
	ws_output_consume(f->w, h + fr->len);
	return true;
}

static void expect_frame(struct fixture *f, uint8_t op, const void *payload, size_t n)
{
	struct sframe fr;

	assert_true(server_frame(f, &fr));
	assert_false(fr.masked); /* a server never masks */
	assert_true(fr.fin);
	assert_int_equal(fr.opcode, op);
	assert_int_equal(fr.len, n);
	assert_memory_equal(fr.p, payload, n);
}

static void expect_close(struct fixture *f, uint16_t code)
{
	struct sframe fr;

	assert_true(server_frame(f, &fr));
	assert_int_equal(fr.opcode, OP_CLOSE);
	assert_true(fr.len >= 2);
	assert_int_equal(fr.p[0] << 8 | fr.p[1], code);
}

static void expect_no_output(struct fixture *f)
{
	size_t len;

	assert_null(ws_output(f->w, &len));
}

static int setup_codec(void **state, enum ws_codec codec)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct err err = ERR_INIT;

	f->w = ws_session_new(codec, &err);
	assert_non_null(f->w);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_codec(state, WS_CODEC_BINARY);
}

static int setup_base64(void **state)
{
	return setup_codec(state, WS_CODEC_BASE64);
}

static int setup_v5(void **state)
{
	return setup_codec(state, WS_CODEC_V5);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ws_session_free(f->w);
	free(f->in);
	free(f);
	return 0;
}

/* The subprotocols Kubernetes clients ask for map to their codecs; others are unknown. */
static void test_ws__codecs_of_subprotocols(void **state)
{
	enum ws_codec c;
	(void)state;

	assert_int_equal(ws_codec_of("v5.channel.k8s.io", &c), 0);
	assert_int_equal(c, WS_CODEC_V5);
	assert_int_equal(ws_codec_of("v4.channel.k8s.io", &c), 0);
	assert_int_equal(c, WS_CODEC_BINARY);
	assert_int_equal(ws_codec_of("base64.channel.k8s.io", &c), 0);
	assert_int_equal(c, WS_CODEC_BASE64);
	assert_int_equal(ws_codec_of(NULL, &c), 0);
	assert_int_equal(c, WS_CODEC_BINARY);
	assert_int_equal(ws_codec_of("v6.channel.k8s.io", &c), -ENOENT);
	for (const char *const *p = ws_subprotocols; *p; p++)
		assert_int_equal(ws_codec_of(*p, &c), 0);
}

/* A masked binary message: its first byte is the channel, the rest its data. */
static void test_ws__channel_prefix(void **state)
{
	struct fixture *f = *state;

	client_frame(f, true, OP_BINARY, "\0ls -l\n", 7);
	client_frame(f, true, OP_BINARY, "\4{\"Width\":80}", 13);
	feed(f);
	assert_int_equal(f->feed_ret, 0);
	assert_int_equal(f->nseen, 2);
	assert_int_equal(f->seen[0].type, WS_EV_DATA);
	assert_int_equal(f->seen[0].channel, 0);
	assert_int_equal(f->seen[0].len, 6);
	assert_string_equal(f->seen[0].data, "ls -l\n");
	assert_int_equal(f->seen[1].channel, 4);
	assert_string_equal(f->seen[1].data, "{\"Width\":80}");
	expect_no_output(f);

	assert_int_equal(ws_send(f->w, 1, "total 0\n", 8, &f->err), 0);
	expect_frame(f, OP_BINARY, "\1total 0\n", 9);
}

/* An unmasked client frame breaks RFC 6455: close 1002, and no more input. */
static void test_ws__unmasked_frame_refused(void **state)
{
	struct fixture *f = *state;
	struct ws_event ev;

	client_frame_m(f, true, OP_BINARY, "\0x", 2, false);
	feed(f);
	assert_int_equal(f->feed_ret, -EPROTO);
	assert_int_equal(f->nseen, 0);
	expect_close(f, 1002);
	assert_true(ws_done(f->w));
	assert_int_equal(ws_feed(f->w, "x", 1, &ev, &f->err), -EPROTO);
}

/* Fragments are reassembled into one message, with a ping answered between them. */
static void test_ws__fragmented_message(void **state)
{
	struct fixture *f = *state;

	client_frame(f, false, OP_BINARY, "\1hel", 4);
	client_frame(f, true, OP_PING, "are you there", 13);
	client_frame(f, false, OP_CONT, "lo ", 3);
	client_frame(f, true, OP_CONT, "world", 5);
	feed_in_steps(f, 3);
	assert_int_equal(f->feed_ret, 0);
	assert_int_equal(f->nseen, 1);
	assert_int_equal(f->seen[0].channel, 1);
	assert_string_equal(f->seen[0].data, "hello world");
	expect_frame(f, OP_PONG, "are you there", 13);
	expect_no_output(f);
}

/* A message announced larger than 16 MiB is refused with its first bytes: close 1009. */
static void test_ws__oversized_message_refused(void **state)
{
	struct fixture *f = *state;
	uint8_t head[18] = { 0x82, 0x80 | 127, 0, 0, 0, 0, 0x01, 0, 0, 1, 1, 2, 3, 4, 'a' };

	f->in = malloc(sizeof(head));
	memcpy(f->in, head, sizeof(head)); /* 16 MiB + 1 announced, 4 bytes sent */
	f->in_len = sizeof(head);
	feed(f);
	assert_int_equal(f->feed_ret, -EPROTO);
	assert_string_equal(f->err.msg, "websocket: message larger than 16 MiB");
	expect_close(f, 1009);
}

/* Fragments adding up past 16 MiB are refused when the one crossing the bound is announced. */
static void test_ws__oversized_fragments_refused(void **state)
{
	struct fixture *f = *state;
	size_t first = WS_MAX_MESSAGE - 10;
	uint8_t *big = calloc(1, first);

	client_frame(f, false, OP_BINARY, big, first);
	free(big);
	client_frame(f, true, OP_CONT, "0123456789x", 11);
	feed(f);
	assert_int_equal(f->feed_ret, -EPROTO);
	assert_int_equal(f->nseen, 0);
	expect_close(f, 1009);
}

/* An empty message has no channel byte; it is skipped, as Kubernetes does. */
static void test_ws__empty_message_skipped(void **state)
{
	struct fixture *f = *state;

	client_frame(f, true, OP_BINARY, "", 0);
	client_frame(f, true, OP_BINARY, "\2e", 2);
	feed(f);
	assert_int_equal(f->nseen, 1);
	assert_int_equal(f->seen[0].channel, 2);
}

/* base64.channel.k8s.io: an ASCII channel digit, then base64, both ways. */
static void test_ws__base64_protocol(void **state)
{
	struct fixture *f = *state;

	client_frame(f, true, OP_TEXT, "0Zm9vCg==", 9);
	client_frame(f, true, OP_TEXT, "4", 1);
	feed(f);
	assert_int_equal(f->feed_ret, 0);
	assert_int_equal(f->nseen, 2);
	assert_int_equal(f->seen[0].channel, 0);
	assert_int_equal(f->seen[0].len, 4);
	assert_string_equal(f->seen[0].data, "foo\n");
	assert_int_equal(f->seen[1].channel, 4);
	assert_int_equal(f->seen[1].len, 0);

	assert_int_equal(ws_send(f->w, 1, "\n", 1, &f->err), 0);
	expect_frame(f, OP_TEXT, "1Cg==", 5);
	assert_int_equal(ws_send(f->w, 2, "", 0, &f->err), 0);
	expect_frame(f, OP_TEXT, "2", 1);
	assert_int_equal(ws_send(f->w, 10, "x", 1, &f->err), -EINVAL);
}

static void test_ws__base64_bad_data(void **state)
{
	struct fixture *f = *state;

	client_frame(f, true, OP_TEXT, "0Zm9vC", 6);
	feed(f);
	assert_int_equal(f->feed_ret, -EPROTO);
	assert_string_equal(f->err.msg, "websocket: base64 message whose data is not base64");
	expect_close(f, 1007);
}

static void test_ws__base64_bad_channel(void **state)
{
	struct fixture *f = *state;

	client_frame(f, true, OP_TEXT, "xZm9v", 5);
	feed(f);
	assert_int_equal(f->feed_ret, -EPROTO);
	expect_close(f, 1007);
}

/* v5.channel.k8s.io: channel 255 carries the channel the peer closes. */
static void test_ws__v5_close_channel(void **state)
{
	struct fixture *f = *state;

	client_frame(f, true, OP_BINARY, "\0last", 5);
	client_frame(f, true, OP_BINARY, "\xff\0", 2);
	feed(f);
	assert_int_equal(f->nseen, 2);
	assert_int_equal(f->seen[1].type, WS_EV_CLOSE_CHANNEL);
	assert_int_equal(f->seen[1].channel, 0);
	assert_int_equal(ws_close_channel(f->w, 1, &f->err), 0);
	expect_frame(f, OP_BINARY, "\xff\1", 2);
	assert_int_equal(ws_send(f->w, 255, "x", 1, &f->err), -EINVAL);

	client_frame(f, true, OP_BINARY, "\xff\1\2", 3);
	feed(f);
	assert_int_equal(f->feed_ret, -EPROTO);
	expect_close(f, 1007);
}

/* Closing a channel needs v5; channel 255 is data in older protocols. */
static void test_ws__close_channel_needs_v5(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(ws_close_channel(f->w, 0, &f->err), -EINVAL);
	client_frame(f, true, OP_BINARY, "\xff\0", 2);
	feed(f);
	assert_int_equal(f->seen[0].type, WS_EV_DATA);
	assert_int_equal(f->seen[0].channel, 255);
}

/* The peer's close is reported and echoed; what follows it is ignored. */
static void test_ws__close_from_peer(void **state)
{
	struct fixture *f = *state;

	client_frame(f, true, OP_CLOSE,
		     "\x03\xe8"
		     "bye",
		     5);
	client_frame(f, true, OP_BINARY, "\1late", 5);
	feed(f);
	assert_int_equal(f->feed_ret, 0);
	assert_int_equal(f->nseen, 1);
	assert_int_equal(f->seen[0].type, WS_EV_CLOSE);
	assert_int_equal(f->seen[0].code, 1000);
	assert_string_equal(f->seen[0].data, "bye");
	expect_close(f, 1000);
	assert_true(ws_done(f->w));
	assert_int_equal(ws_send(f->w, 1, "x", 1, &f->err), -EPIPE);
}

/* Our close waits for the peer's before the connection is done. */
static void test_ws__close_from_server(void **state)
{
	struct fixture *f = *state;
	struct sframe fr;

	assert_int_equal(ws_close(f->w, 1000, "done", &f->err), 0);
	assert_true(server_frame(f, &fr));
	assert_int_equal(fr.opcode, OP_CLOSE);
	assert_memory_equal(fr.p,
			    "\x03\xe8"
			    "done",
			    6);
	assert_false(ws_done(f->w));
	assert_int_equal(ws_send(f->w, 1, "x", 1, &f->err), -EPIPE);
	client_frame(f, true, OP_CLOSE, "\x03\xe8", 2);
	feed(f);
	assert_int_equal(f->seen[0].type, WS_EV_CLOSE);
	assert_true(ws_done(f->w));
	expect_no_output(f); /* the close was already sent */
}

/* Many messages in one read come out one event at a time, none lost. */
static void test_ws__many_messages_in_one_read(void **state)
{
	struct fixture *f = *state;
	char m[3] = { 1, 'a', 0 };

	for (int i = 0; i < 200; i++) {
		m[1] = (char)('a' + i % 26);
		client_frame(f, true, OP_BINARY, m, 2);
	}
	feed(f);
	assert_int_equal(f->feed_ret, 0);
	assert_int_equal(f->nseen, 200);
	for (int i = 0; i < 200; i++)
		assert_int_equal(f->seen[i].data[0], 'a' + i % 26);
}

/* Text that is not UTF-8 is refused with 1007, as RFC 6455 asks. */
static void test_ws__invalid_utf8_text(void **state)
{
	struct fixture *f = *state;

	client_frame(f, true, OP_TEXT, "0\xc3\x28", 3);
	feed(f);
	assert_int_equal(f->feed_ret, -EPROTO);
	expect_close(f, 1007);
}

#define T(name) cmocka_unit_test_setup_teardown(test_ws__##name, setup, teardown)
#define T_B64(name) cmocka_unit_test_setup_teardown(test_ws__##name, setup_base64, teardown)
#define T_V5(name) cmocka_unit_test_setup_teardown(test_ws__##name, setup_v5, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ws__codecs_of_subprotocols),
		T(channel_prefix),
		T(unmasked_frame_refused),
		T(fragmented_message),
		T(oversized_message_refused),
		T(oversized_fragments_refused),
		T(empty_message_skipped),
		T_B64(base64_protocol),
		T_B64(base64_bad_data),
		T_B64(base64_bad_channel),
		T_V5(v5_close_channel),
		T(close_channel_needs_v5),
		T(close_from_peer),
		T(close_from_server),
		T(many_messages_in_one_read),
		T_B64(invalid_utf8_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
