/*
 * Unit tests for kiyot/stream/spdy: a SPDY/3.1 client written here (its own frame builder and
 * its own zlib contexts, primed with the dictionary in test/fixtures/spdy/dictionary.bin, the
 * 1423 bytes the SPDY/3 draft lists) drives a server session and reads back every frame the
 * session writes.
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
#include <zlib.h>

#include "stream/spdy.h"

#define BIG (1024 * 1024)
#define DICT_ADLER32 0xe3c6a7c2u /* the dictionary id every SPDY/3 header stream carries */

enum {
	SYN_STREAM = 1,
	SYN_REPLY,
	RST_STREAM,
	SETTINGS,
	PING = 6,
	GOAWAY,
	HEADERS,
	WINDOW_UPDATE
};

/* the test's client: its own compression contexts and a scratch buffer for frames */
struct client {
	z_stream def, inf;
	uint8_t dict[2048];
	size_t dict_len;
	uint8_t *frame; /* the frame being built */
	size_t len;
};

/* one frame read back from the session's output */
struct frame {
	bool control;
	uint16_t version, type;
	uint8_t flags;
	uint32_t len;
	uint32_t stream_id; /* DATA */
	uint8_t *p;	    /* payload */
};

/* what events told, copied out before the next feed */
struct seen {
	struct spdy_event ev;
	char streamtype[32];
	uint8_t *data;
	size_t data_len;
};

struct fixture {
	struct client c;
	struct spdy_session *s;
	struct seen seen[64];
	size_t nseen;
	uint8_t *data; /* all DATA payloads seen, in order */
	size_t data_len;
	struct err err;
	int feed_ret;
};

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void client_init(struct client *c)
{
	FILE *f = fopen("test/fixtures/spdy/dictionary.bin", "rb");

	assert_non_null(f);
	c->dict_len = fread(c->dict, 1, sizeof(c->dict), f);
	fclose(f);
	assert_int_equal(c->dict_len, 1423);
	memset(&c->def, 0, sizeof(c->def));
	memset(&c->inf, 0, sizeof(c->inf));
	assert_int_equal(deflateInit(&c->def, Z_BEST_COMPRESSION), Z_OK);
	assert_int_equal(deflateSetDictionary(&c->def, c->dict, (uInt)c->dict_len), Z_OK);
	assert_int_equal(inflateInit(&c->inf), Z_OK);
	c->frame = malloc(BIG);
}

static void client_release(struct client *c)
{
	deflateEnd(&c->def);
	inflateEnd(&c->inf);
	free(c->frame);
}

/* ---- frames the client writes ---- */

static void control_head(uint8_t *p, uint16_t version, uint16_t type, uint8_t flags, uint32_t len)
{
	p[0] = (uint8_t)(0x80 | version >> 8);
	p[1] = (uint8_t)version;
	p[2] = (uint8_t)(type >> 8);
	p[3] = (uint8_t)type;
	put32(p + 4, len);
	p[4] = flags;
}

/* A name/value block of pairs kv[0..2n), compressed by the client into out; returns its length. */
static size_t client_block(struct client *c, const char *const *kv, size_t n, uint8_t *out)
{
	size_t cap = 4 + 16 * n;
	uint8_t *raw;
	size_t off = 4, zlen;

	for (size_t i = 0; i < 2 * n; i++)
		cap += strlen(kv[i]);
	raw = malloc(cap);
	put32(raw, (uint32_t)n);
	for (size_t i = 0; i < 2 * n; i++) {
		size_t l = strlen(kv[i]);

		put32(raw + off, (uint32_t)l);
		memcpy(raw + off + 4, kv[i], l);
		off += 4 + l;
	}
	c->def.next_in = raw;
	c->def.avail_in = (uInt)off;
	c->def.next_out = out;
	c->def.avail_out = BIG / 2;
	assert_int_equal(deflate(&c->def, Z_SYNC_FLUSH), Z_OK);
	assert_int_equal(c->def.avail_in, 0);
	zlen = BIG / 2 - c->def.avail_out;
	free(raw);
	return zlen;
}

static void syn_stream_v(struct client *c, uint16_t version, uint32_t id, uint8_t flags,
			 const char *const *kv, size_t n)
{
	uint8_t *p = c->frame;
	size_t z = client_block(c, kv, n, p + 18);

	control_head(p, version, SYN_STREAM, flags, (uint32_t)(10 + z));
	put32(p + 8, id);
	put32(p + 12, 0);
	p[16] = 0;
	p[17] = 0;
	c->len = 18 + z;
}

static void syn_stream(struct client *c, uint32_t id, uint8_t flags, const char *const *kv,
		       size_t n)
{
	syn_stream_v(c, 3, id, flags, kv, n);
}

static void words(struct client *c, uint16_t type, uint8_t flags, const uint32_t *w, size_t n)
{
	control_head(c->frame, 3, type, flags, (uint32_t)(4 * n));
	for (size_t i = 0; i < n; i++)
		put32(c->frame + 8 + 4 * i, w[i]);
	c->len = 8 + 4 * n;
}

static void data_frame(struct client *c, uint32_t id, uint8_t flags, const void *d, size_t n)
{
	put32(c->frame, id);
	put32(c->frame + 4, (uint32_t)n);
	c->frame[4] = flags;
	memcpy(c->frame + 8, d, n);
	c->len = 8 + n;
}

/* ---- feeding the session and reading what it wrote ---- */

static void record(struct fixture *f, const struct spdy_event *ev)
{
	struct seen *sn;
	const char *t;

	assert_true(f->nseen < sizeof(f->seen) / sizeof(f->seen[0]));
	sn = &f->seen[f->nseen++];
	memset(sn, 0, sizeof(*sn));
	sn->ev = *ev;
	sn->ev.headers = NULL;
	sn->ev.data = NULL;
	t = ev->headers ? spdy_header_get(ev->headers, ev->nheaders, "streamtype") : NULL;
	if (t)
		snprintf(sn->streamtype, sizeof(sn->streamtype), "%s", t);
	if (ev->type == SPDY_EV_DATA) {
		memcpy(f->data + f->data_len, ev->data, ev->len);
		f->data_len += ev->len;
	}
}

/* Feeds bytes in pieces of at most step bytes, recording every event; keeps the last result. */
static void feed_in_steps(struct fixture *f, const uint8_t *p, size_t len, size_t step)
{
	size_t off = 0;
	struct spdy_event ev;

	f->feed_ret = 0;
	do {
		size_t end = len - off > step ? off + step : len;
		ssize_t n = spdy_feed(f->s, p + off, end - off, &ev, &f->err);

		if (n < 0) {
			f->feed_ret = (int)n;
			return;
		}
		off += (size_t)n;
		if (ev.type != SPDY_EV_NONE)
			record(f, &ev);
	} while (off < len || ev.type != SPDY_EV_NONE);
}

static void feed(struct fixture *f)
{
	feed_in_steps(f, f->c.frame, f->c.len, f->c.len);
}

/* Takes the next whole frame from the session's output; false when there is none. */
static bool next_frame(struct fixture *f, struct frame *fr)
{
	size_t len;
	const uint8_t *p = spdy_output(f->s, &len);
	static uint8_t payload[BIG];

	if (len < 8)
		return false;
	fr->control = p[0] & 0x80;
	fr->version = (uint16_t)((p[0] & 0x7f) << 8 | p[1]);
	fr->type = (uint16_t)(p[2] << 8 | p[3]);
	fr->stream_id = get32(p) & 0x7fffffff;
	fr->flags = p[4];
	fr->len = get32(p + 4) & 0xffffff;
	assert_true(len >= 8 + fr->len);
	memcpy(payload, p + 8, fr->len);
	fr->p = payload;
	spdy_output_consume(f->s, 8 + fr->len);
	return true;
}

static void expect_control(struct fixture *f, uint16_t type, struct frame *fr)
{
	assert_true(next_frame(f, fr));
	assert_true(fr->control);
	assert_int_equal(fr->version, 3);
	assert_int_equal(fr->type, type);
}

static void expect_rst(struct fixture *f, uint32_t id, uint32_t status)
{
	struct frame fr;

	expect_control(f, RST_STREAM, &fr);
	assert_int_equal(fr.len, 8);
	assert_int_equal(get32(fr.p), id);
	assert_int_equal(get32(fr.p + 4), status);
}

static void expect_goaway(struct fixture *f, uint32_t last, uint32_t status)
{
	struct frame fr;

	expect_control(f, GOAWAY, &fr);
	assert_int_equal(fr.len, 8);
	assert_int_equal(get32(fr.p), last);
	assert_int_equal(get32(fr.p + 4), status);
}

static void expect_window_update(struct fixture *f, uint32_t id, uint32_t delta)
{
	struct frame fr;

	expect_control(f, WINDOW_UPDATE, &fr);
	assert_int_equal(get32(fr.p), id);
	assert_int_equal(get32(fr.p + 4), delta);
}

static void expect_no_output(struct fixture *f)
{
	size_t len;

	assert_null(spdy_output(f->s, &len));
	assert_int_equal(len, 0);
}

/* Inflates a header block with the client's own context; returns the value of name or NULL. */
static char *client_header(struct fixture *f, const uint8_t *z, size_t zlen, const char *name)
{
	static uint8_t raw[128 * 1024];
	static char value[1024];
	z_stream *zs = &f->c.inf;
	uint32_t n, off = 4;
	int r;

	zs->next_in = (Bytef *)z;
	zs->avail_in = (uInt)zlen;
	zs->next_out = raw;
	zs->avail_out = sizeof(raw);
	r = inflate(zs, Z_SYNC_FLUSH);
	if (r == Z_NEED_DICT) {
		assert_int_equal(zs->adler, DICT_ADLER32);
		assert_int_equal(inflateSetDictionary(zs, f->c.dict, (uInt)f->c.dict_len), Z_OK);
		r = inflate(zs, Z_SYNC_FLUSH);
	}
	assert_int_equal(r, Z_OK);
	assert_int_equal(zs->avail_in, 0);
	n = get32(raw);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t nl = get32(raw + off), vl = get32(raw + off + 4 + nl);
		bool match = nl == strlen(name) && memcmp(raw + off + 4, name, nl) == 0;

		if (match && vl < sizeof(value)) {
			memcpy(value, raw + off + 8 + nl, vl);
			value[vl] = '\0';
			return value;
		}
		off += 8 + nl + vl;
	}
	return NULL;
}

static void skip_preface(struct fixture *f)
{
	struct frame fr;

	expect_control(f, SETTINGS, &fr);
	expect_control(f, WINDOW_UPDATE, &fr);
	expect_no_output(f);
}

static int setup_opts(void **state, bool strict, unsigned max_streams)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct spdy_opts o = { .strict_windows = strict, .max_streams = max_streams };
	struct err err = ERR_INIT;

	client_init(&f->c);
	f->s = spdy_session_new(&o, &err);
	assert_non_null(f->s);
	f->data = malloc(4 * BIG);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_opts(state, false, 0);
}

static int setup_strict(void **state)
{
	return setup_opts(state, true, 0);
}

static int setup_two_streams(void **state)
{
	return setup_opts(state, false, 2);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	spdy_session_free(f->s);
	client_release(&f->c);
	free(f->data);
	free(f);
	return 0;
}

static const char *const stdin_hdrs[] = { "streamtype", "stdin" };
static const char *const stdout_hdrs[] = { "streamtype", "stdout" };

/* ---- tests ---- */

/* The dictionary is SPDY/3's: its length and Adler-32 (the id peers check) match. */
static void test_spdy__dictionary_is_spdy3s(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(spdy_dictionary_len, 1423);
	assert_int_equal(adler32(1, (const Bytef *)spdy_dictionary, (uInt)spdy_dictionary_len),
			 DICT_ADLER32);
	assert_memory_equal(spdy_dictionary, f->c.dict, 1423);
}

/* A new session announces its stream limit and opens the session window for all streams. */
static void test_spdy__preface(void **state)
{
	struct fixture *f = *state;
	struct frame fr;

	expect_control(f, SETTINGS, &fr);
	assert_int_equal(fr.len, 12);
	assert_int_equal(get32(fr.p), 1);
	assert_int_equal(get32(fr.p + 4), 4); /* MAX_CONCURRENT_STREAMS */
	assert_int_equal(get32(fr.p + 8), SPDY_MAX_STREAMS);
	expect_window_update(f, 0, (SPDY_MAX_STREAMS - 1) * SPDY_INITIAL_WINDOW);
	expect_no_output(f);
}

/* kubectl's streams arrive with their headers; the reply inflates with the client's context. */
static void test_spdy__stream_headers_and_reply(void **state)
{
	struct fixture *f = *state;
	const char *kv[] = { "streamtype", "error", "requestid", "0", "port", "8080" };
	const struct spdy_header reply[] = { { "x-answer", "yes", 0 } };
	struct frame fr;

	skip_preface(f);
	syn_stream(&f->c, 1, 0, kv, 3);
	feed(f);
	assert_int_equal(f->feed_ret, 0);
	assert_int_equal(f->nseen, 1);
	assert_int_equal(f->seen[0].ev.type, SPDY_EV_STREAM);
	assert_int_equal(f->seen[0].ev.stream_id, 1);
	assert_int_equal(f->seen[0].ev.nheaders, 3);
	assert_string_equal(f->seen[0].streamtype, "error");

	assert_int_equal(spdy_reply(f->s, 1, reply, 1, false, &f->err), 0);
	expect_control(f, SYN_REPLY, &fr);
	assert_int_equal(get32(fr.p), 1);
	assert_string_equal(client_header(f, fr.p + 4, fr.len - 4, "x-answer"), "yes");
	assert_int_equal(spdy_reply(f->s, 1, reply, 1, false, &f->err), -EALREADY);

	/* a second stream's headers inflate against the first's: the contexts stay in step */
	syn_stream(&f->c, 3, 0, stdin_hdrs, 1);
	feed(f);
	assert_int_equal(f->seen[1].ev.type, SPDY_EV_STREAM);
	assert_string_equal(f->seen[1].streamtype, "stdin");
	assert_int_equal(spdy_reply(f->s, 3, reply, 1, false, &f->err), 0);
	expect_control(f, SYN_REPLY, &fr);
	assert_string_equal(client_header(f, fr.p + 4, fr.len - 4, "x-answer"), "yes");
	assert_int_equal(spdy_stream_count(f->s), 2);
}

/* Data in, fed one byte at a time, arrives whole and in order; FIN ends the peer's side. */
static void test_spdy__data_in_byte_by_byte(void **state)
{
	struct fixture *f = *state;
	uint8_t all[4096];
	size_t n = 0;

	skip_preface(f);
	syn_stream(&f->c, 1, 0, stdin_hdrs, 1);
	memcpy(all, f->c.frame, f->c.len);
	n = f->c.len;
	data_frame(&f->c, 1, 0, "hello ", 6);
	memcpy(all + n, f->c.frame, f->c.len);
	n += f->c.len;
	data_frame(&f->c, 1, 0x01, "world", 5);
	memcpy(all + n, f->c.frame, f->c.len);
	n += f->c.len;
	feed_in_steps(f, all, n, 1);

	assert_int_equal(f->feed_ret, 0);
	assert_int_equal(f->seen[0].ev.type, SPDY_EV_STREAM);
	assert_int_equal(f->seen[f->nseen - 1].ev.type, SPDY_EV_END);
	assert_int_equal(f->seen[f->nseen - 1].ev.stream_id, 1);
	assert_int_equal(f->data_len, 11);
	assert_memory_equal(f->data, "hello world", 11);
	assert_true(spdy_stream_exists(f->s, 1)); /* this side has not finished yet */
}

/* Data out comes in frames of at most 16 KiB; FIN on the last one closes the stream. */
static void test_spdy__data_out_and_close(void **state)
{
	struct fixture *f = *state;
	static uint8_t big[40000];
	struct frame fr;
	size_t got = 0;

	skip_preface(f);
	memset(big, 'x', sizeof(big));
	syn_stream(&f->c, 1, 0x01, stdout_hdrs, 1); /* the client sends nothing on stdout */
	feed(f);
	assert_int_equal(f->seen[0].ev.type, SPDY_EV_STREAM);
	assert_int_equal(f->seen[1].ev.type, SPDY_EV_END);
	assert_int_equal(spdy_reply(f->s, 1, NULL, 0, false, &f->err), 0);
	expect_control(f, SYN_REPLY, &fr);
	assert_int_equal(spdy_send(f->s, 1, big, sizeof(big), true, &f->err), sizeof(big));
	while (next_frame(f, &fr)) {
		assert_false(fr.control);
		assert_int_equal(fr.stream_id, 1);
		assert_true(fr.len <= SPDY_DATA_CHUNK);
		got += fr.len;
		assert_int_equal(fr.flags, got == sizeof(big) ? 0x01 : 0);
	}
	assert_int_equal(got, sizeof(big));
	assert_false(spdy_stream_exists(f->s, 1)); /* both sides finished */
	assert_int_equal(spdy_send(f->s, 1, "x", 1, false, &f->err), -ENOENT);
}

/* Strict windows: sending stops at the peer's window and resumes after its WINDOW_UPDATEs. */
static void test_spdy__send_stalls_until_window_update(void **state)
{
	struct fixture *f = *state;
	static uint8_t big[100000];
	const uint32_t stream_update[] = { 1, 50000 };
	const uint32_t session_update[] = { 0, 50000 };
	struct frame fr;

	skip_preface(f);
	syn_stream(&f->c, 1, 0, stdout_hdrs, 1);
	feed(f);
	assert_int_equal(spdy_reply(f->s, 1, NULL, 0, false, &f->err), 0);
	expect_control(f, SYN_REPLY, &fr);

	assert_int_equal(spdy_send_window(f->s, 1), SPDY_INITIAL_WINDOW);
	assert_int_equal(spdy_send(f->s, 1, big, sizeof(big), true, &f->err), SPDY_INITIAL_WINDOW);
	assert_int_equal(spdy_send_window(f->s, 1), 0);
	assert_int_equal(spdy_send(f->s, 1, big, 10, true, &f->err), 0);
	while (next_frame(f, &fr))
		assert_int_equal(fr.flags, 0); /* no FIN: data is left */

	words(&f->c, WINDOW_UPDATE, 0, stream_update, 2);
	feed(f);
	assert_int_equal(f->seen[f->nseen - 1].ev.type, SPDY_EV_WINDOW);
	assert_int_equal(f->seen[f->nseen - 1].ev.stream_id, 1);
	assert_int_equal(spdy_send_window(f->s, 1), 0); /* the session window is still shut */
	words(&f->c, WINDOW_UPDATE, 0, session_update, 2);
	feed(f);
	assert_int_equal(f->seen[f->nseen - 1].ev.type, SPDY_EV_WINDOW);
	assert_int_equal(f->seen[f->nseen - 1].ev.stream_id, 0);
	assert_int_equal(spdy_send_window(f->s, 1), 50000);
	assert_int_equal(spdy_send(f->s, 1, big, 100000 - SPDY_INITIAL_WINDOW, true, &f->err),
			 100000 - SPDY_INITIAL_WINDOW);
	while (next_frame(f, &fr) && fr.flags == 0)
		;
	assert_int_equal(fr.flags, 0x01);
}

/* The peer's SETTINGS change the initial window of open streams by the difference. */
static void test_spdy__peer_initial_window(void **state)
{
	struct fixture *f = *state;
	const uint32_t settings[] = { 1, 7, 1000 }; /* INITIAL_WINDOW_SIZE */
	const uint32_t overflow[] = { 1, 0x7fffffff };

	skip_preface(f);
	syn_stream(&f->c, 1, 0, stdout_hdrs, 1);
	feed(f);
	assert_int_equal(spdy_send(f->s, 1, "abc", 3, false, &f->err), 3);
	words(&f->c, SETTINGS, 0, settings, 3);
	feed(f);
	assert_int_equal(spdy_send_window(f->s, 1), 997);
	while (next_frame(f, &(struct frame){ 0 }))
		;
	/* a window pushed past 2^31 - 1 is a flow-control error on that stream */
	words(&f->c, WINDOW_UPDATE, 0, overflow, 2);
	feed(f);
	assert_int_equal(f->seen[f->nseen - 1].ev.type, SPDY_EV_RESET);
	expect_rst(f, 1, SPDY_FLOW_CONTROL_ERROR);
}

/* Strict windows: data past a stream's window resets it; consumed data reopens the window. */
static void test_spdy__receive_window_enforced_and_reopened(void **state)
{
	struct fixture *f = *state;
	static uint8_t chunk[16384];

	skip_preface(f);
	syn_stream(&f->c, 1, 0, stdin_hdrs, 1);
	feed(f);
	for (int i = 0; i < 2; i++) {
		data_frame(&f->c, 1, 0, chunk, sizeof(chunk));
		feed(f);
	}
	assert_int_equal(f->data_len, 32768);
	spdy_consume(f->s, 1, 16384);
	expect_no_output(f); /* less than half a window owed */
	spdy_consume(f->s, 1, 16384);
	expect_window_update(f, 0, 32768);
	expect_window_update(f, 1, 32768);
	expect_no_output(f);

	for (int i = 0; i < 4; i++) {
		data_frame(&f->c, 1, 0, chunk, sizeof(chunk));
		feed(f);
	}
	expect_no_output(f); /* exactly the window */
	data_frame(&f->c, 1, 0, chunk, 1);
	feed(f);
	assert_int_equal(f->feed_ret, 0);
	assert_int_equal(f->seen[f->nseen - 1].ev.type, SPDY_EV_RESET);
	assert_true(f->seen[f->nseen - 1].ev.local);
	assert_int_equal(f->seen[f->nseen - 1].ev.status, SPDY_FLOW_CONTROL_ERROR);
	expect_rst(f, 1, SPDY_FLOW_CONTROL_ERROR);
	assert_false(spdy_stream_exists(f->s, 1));
}

/* Without strict windows (Kubernetes' peers), a peer that ignores windows is not held to them. */
static void test_spdy__lenient_windows(void **state)
{
	struct fixture *f = *state;
	static uint8_t chunk[60000];
	struct frame fr;
	size_t got = 0;

	skip_preface(f);
	syn_stream(&f->c, 1, 0, stdin_hdrs, 1);
	feed(f);
	for (int i = 0; i < 4; i++) {
		data_frame(&f->c, 1, 0, chunk, sizeof(chunk));
		feed(f);
	}
	assert_int_equal(f->feed_ret, 0);
	assert_int_equal(f->data_len, 240000);
	assert_true(spdy_stream_exists(f->s, 1));
	expect_no_output(f);
	assert_int_equal(spdy_reply(f->s, 1, NULL, 0, false, &f->err), 0);
	expect_control(f, SYN_REPLY, &fr);
	assert_int_equal(spdy_send(f->s, 1, f->data, 240000, false, &f->err), 240000);
	while (next_frame(f, &fr))
		got += fr.len;
	assert_int_equal(got, 240000);
}

/* RST_STREAM from the peer ends the stream; later data on it is refused with INVALID_STREAM. */
static void test_spdy__peer_reset(void **state)
{
	struct fixture *f = *state;
	const uint32_t rst[] = { 1, SPDY_CANCEL };

	skip_preface(f);
	syn_stream(&f->c, 1, 0, stdin_hdrs, 1);
	feed(f);
	words(&f->c, RST_STREAM, 0, rst, 2);
	feed(f);
	assert_int_equal(f->seen[1].ev.type, SPDY_EV_RESET);
	assert_int_equal(f->seen[1].ev.stream_id, 1);
	assert_int_equal(f->seen[1].ev.status, SPDY_CANCEL);
	assert_false(f->seen[1].ev.local);
	assert_false(spdy_stream_exists(f->s, 1));
	assert_int_equal(spdy_send(f->s, 1, "x", 1, false, &f->err), -ENOENT);
	expect_no_output(f); /* a reset is never answered with a reset */

	data_frame(&f->c, 1, 0, "late", 4);
	feed(f);
	assert_int_equal(f->nseen, 2);
	expect_rst(f, 1, SPDY_INVALID_STREAM);
	words(&f->c, RST_STREAM, 0, rst, 2);
	feed(f);
	expect_no_output(f);
}

/* The peer's pings are echoed; answers to ours are reported as answers. */
static void test_spdy__ping_echo(void **state)
{
	struct fixture *f = *state;
	const uint32_t ping = 7;
	struct frame fr;
	uint32_t id;

	skip_preface(f);
	words(&f->c, PING, 0, &ping, 1);
	feed(f);
	assert_int_equal(f->seen[0].ev.type, SPDY_EV_PING);
	assert_int_equal(f->seen[0].ev.id, 7);
	assert_false(f->seen[0].ev.answer);
	expect_control(f, PING, &fr);
	assert_int_equal(fr.len, 4);
	assert_int_equal(get32(fr.p), 7);

	spdy_ping(f->s, &id);
	assert_int_equal(id % 2, 0); /* a server's pings are even */
	expect_control(f, PING, &fr);
	assert_int_equal(get32(fr.p), id);
	words(&f->c, PING, 0, &id, 1);
	feed(f);
	assert_int_equal(f->seen[1].ev.type, SPDY_EV_PING);
	assert_true(f->seen[1].ev.answer);
	expect_no_output(f);
}

/* GOAWAY from the peer stops new streams; ours stops the peer's new streams. */
static void test_spdy__goaway(void **state)
{
	struct fixture *f = *state;
	const uint32_t goaway[] = { 0, SPDY_GOAWAY_OK };
	const struct spdy_header h[] = { { "streamtype", "data", 0 } };
	uint32_t id;

	skip_preface(f);
	syn_stream(&f->c, 1, 0, stdin_hdrs, 1);
	feed(f);
	spdy_goaway(f->s, SPDY_GOAWAY_OK);
	expect_goaway(f, 1, SPDY_GOAWAY_OK);
	spdy_goaway(f->s, SPDY_GOAWAY_OK);
	expect_no_output(f); /* once per session */

	syn_stream(&f->c, 3, 0, stdin_hdrs, 1);
	feed(f);
	assert_int_equal(f->feed_ret, 0);
	assert_int_equal(f->nseen, 1); /* ignored */
	assert_false(spdy_stream_exists(f->s, 3));
	data_frame(&f->c, 1, 0x01, "bye", 3); /* the open stream carries on */
	feed(f);
	assert_int_equal(f->seen[1].ev.type, SPDY_EV_DATA);
	assert_int_equal(f->seen[2].ev.type, SPDY_EV_END);

	words(&f->c, GOAWAY, 0, goaway, 2);
	feed(f);
	assert_int_equal(f->seen[3].ev.type, SPDY_EV_GOAWAY);
	assert_int_equal(f->seen[3].ev.status, SPDY_GOAWAY_OK);
	assert_int_equal(spdy_open(f->s, h, 1, false, &id, &f->err), -EPIPE);
}

/* A session error: GOAWAY PROTOCOL_ERROR naming the last good stream, and no more input. */
static void expect_session_error(struct fixture *f, uint32_t last)
{
	struct spdy_event ev;

	assert_int_equal(f->feed_ret, -EPROTO);
	expect_goaway(f, last, SPDY_GOAWAY_PROTOCOL_ERROR);
	expect_no_output(f);
	assert_int_equal(spdy_feed(f->s, "x", 1, &ev, &f->err), -EPROTO);
}

static void test_spdy__bad_lengths(void **state)
{
	struct fixture *f = *state;
	const uint32_t ping[] = { 1, 2 };

	skip_preface(f);
	words(&f->c, PING, 0, ping, 2);
	feed(f);
	expect_session_error(f, 0);
	assert_string_equal(f->err.msg, "spdy: PING of 8 bytes");
}

/* A frame with an empty payload is judged as soon as its head is in, not at the next read. */
static void test_spdy__empty_ping_judged_at_once(void **state)
{
	struct fixture *f = *state;

	skip_preface(f);
	control_head(f->c.frame, 3, PING, 0, 0);
	f->c.len = 8;
	feed(f);
	expect_session_error(f, 0);
	assert_string_equal(f->err.msg, "spdy: PING of 0 bytes");
}

static void test_spdy__bad_settings_length(void **state)
{
	struct fixture *f = *state;
	const uint32_t settings[] = { 5, 4, 1 }; /* says 5 entries, holds 1 */

	skip_preface(f);
	words(&f->c, SETTINGS, 0, settings, 3);
	feed(f);
	expect_session_error(f, 0);
}

/* A control frame over the bound is refused from its head, before it is buffered. */
static void test_spdy__oversized_control_frame(void **state)
{
	struct fixture *f = *state;

	skip_preface(f);
	control_head(f->c.frame, 3, SYN_STREAM, 0, 0xffffff);
	f->c.len = 8;
	feed(f);
	expect_session_error(f, 0);
}

/* Another SPDY version: the stream is refused as UNSUPPORTED_VERSION and the session ends. */
static void test_spdy__unknown_version(void **state)
{
	struct fixture *f = *state;

	skip_preface(f);
	syn_stream_v(&f->c, 2, 1, 0, stdin_hdrs, 1);
	feed(f);
	assert_int_equal(f->feed_ret, -EPROTO);
	expect_rst(f, 1, SPDY_UNSUPPORTED_VERSION);
	expect_goaway(f, 0, SPDY_GOAWAY_PROTOCOL_ERROR);
	assert_int_equal(f->nseen, 0);
}

/* A header block that inflates past 64 KiB is cut off, not inflated whole: FRAME_TOO_LARGE. */
static void test_spdy__header_bomb(void **state)
{
	struct fixture *f = *state;
	char *huge = malloc(BIG / 4 + 1);
	const char *kv[2] = { "x", huge };
	size_t z;

	skip_preface(f);
	memset(huge, 'a', BIG / 4);
	huge[BIG / 4] = '\0';
	z = client_block(&f->c, kv, 1, f->c.frame + 18);
	assert_true(z < 2048); /* 256 KiB of headers in a small frame */
	control_head(f->c.frame, 3, SYN_STREAM, 0, (uint32_t)(10 + z));
	put32(f->c.frame + 8, 1);
	memset(f->c.frame + 12, 0, 6);
	f->c.len = 18 + z;
	feed(f);
	free(huge);
	assert_int_equal(f->feed_ret, -EPROTO);
	assert_non_null(strstr(f->err.msg, "inflates beyond 65536 bytes"));
	expect_rst(f, 1, SPDY_FRAME_TOO_LARGE);
	expect_goaway(f, 0, SPDY_GOAWAY_PROTOCOL_ERROR);
	assert_int_equal(f->nseen, 0);
}

/* Bytes that are not zlib where a header block should be end the session. */
static void test_spdy__garbage_header_block(void **state)
{
	struct fixture *f = *state;

	skip_preface(f);
	control_head(f->c.frame, 3, SYN_STREAM, 0, 10 + 6);
	put32(f->c.frame + 8, 1);
	memset(f->c.frame + 12, 0, 6);
	memcpy(f->c.frame + 18, "\xff\xfe\xfd\xfc\xfb\xfa", 6);
	f->c.len = 24;
	feed(f);
	expect_session_error(f, 0);
}

/* Stream ids must grow: a repeated one ends the session. */
static void test_spdy__duplicate_stream_id(void **state)
{
	struct fixture *f = *state;

	skip_preface(f);
	syn_stream(&f->c, 1, 0, stdin_hdrs, 1);
	feed(f);
	syn_stream(&f->c, 1, 0, stdin_hdrs, 1);
	feed(f);
	expect_session_error(f, 1);
	assert_int_equal(f->nseen, 1);
}

/* A client may not open an even (server) stream id. */
static void test_spdy__wrong_parity(void **state)
{
	struct fixture *f = *state;

	skip_preface(f);
	syn_stream(&f->c, 2, 0, stdin_hdrs, 1);
	feed(f);
	expect_session_error(f, 0);
}

/* Past the stream limit, new streams are refused; the session and its streams carry on. */
static void test_spdy__too_many_streams(void **state)
{
	struct fixture *f = *state;

	skip_preface(f);
	for (uint32_t id = 1; id <= 5; id += 2) {
		syn_stream(&f->c, id, 0, stdin_hdrs, 1);
		feed(f);
		assert_int_equal(f->feed_ret, 0);
	}
	assert_int_equal(f->nseen, 2);
	expect_rst(f, 5, SPDY_REFUSED_STREAM);
	assert_int_equal(spdy_stream_count(f->s), 2);

	/* a freed slot takes a new stream, whose headers still inflate (contexts in step) */
	assert_int_equal(spdy_reset(f->s, 1, SPDY_CANCEL, &f->err), 0);
	expect_rst(f, 1, SPDY_CANCEL);
	syn_stream(&f->c, 7, 0, stdout_hdrs, 1);
	feed(f);
	assert_int_equal(f->seen[2].ev.type, SPDY_EV_STREAM);
	assert_string_equal(f->seen[2].streamtype, "stdout");
}

/* Malformed names (upper case, twice) refuse that stream only; the next one works. */
static void test_spdy__bad_header_names(void **state)
{
	struct fixture *f = *state;
	const char *upper[] = { "StreamType", "stdin" };
	const char *twice[] = { "streamtype", "stdin", "streamtype", "stdout" };
	const char *empty[] = { "", "x" };

	skip_preface(f);
	syn_stream(&f->c, 1, 0, upper, 1);
	feed(f);
	expect_rst(f, 1, SPDY_PROTOCOL_ERROR);
	syn_stream(&f->c, 3, 0, twice, 2);
	feed(f);
	expect_rst(f, 3, SPDY_PROTOCOL_ERROR);
	syn_stream(&f->c, 5, 0, empty, 1);
	feed(f);
	expect_rst(f, 5, SPDY_PROTOCOL_ERROR);
	assert_int_equal(f->nseen, 0);
	syn_stream(&f->c, 7, 0, stdin_hdrs, 1);
	feed(f);
	assert_int_equal(f->feed_ret, 0);
	assert_int_equal(f->seen[0].ev.type, SPDY_EV_STREAM);
	assert_string_equal(f->seen[0].streamtype, "stdin");
}

/* DATA on stream 0 is a session error; on a stream the peer finished, a stream error. */
static void test_spdy__data_where_none_may_be(void **state)
{
	struct fixture *f = *state;

	skip_preface(f);
	syn_stream(&f->c, 1, 0x01, stdin_hdrs, 1);
	feed(f);
	data_frame(&f->c, 1, 0, "x", 1);
	feed(f);
	assert_int_equal(f->feed_ret, 0);
	assert_int_equal(f->seen[2].ev.type, SPDY_EV_RESET);
	assert_int_equal(f->seen[2].ev.status, SPDY_STREAM_ALREADY_CLOSED);
	expect_rst(f, 1, SPDY_STREAM_ALREADY_CLOSED);
	data_frame(&f->c, 0, 0, "x", 1);
	feed(f);
	expect_session_error(f, 1);
}

/* Unknown control frames are skipped (SPDY/3 section 2.2.1). */
static void test_spdy__unknown_control_type_ignored(void **state)
{
	struct fixture *f = *state;
	const uint32_t w[] = { 1, 2, 3 };

	skip_preface(f);
	words(&f->c, 10, 0, w, 3);
	feed(f);
	assert_int_equal(f->feed_ret, 0);
	assert_int_equal(f->nseen, 0);
	expect_no_output(f);
	syn_stream(&f->c, 1, 0, stdin_hdrs, 1);
	feed(f);
	assert_int_equal(f->seen[0].ev.type, SPDY_EV_STREAM);
}

/* Headers this side could not send are refused before they touch the deflate context. */
static void test_spdy__bad_headers_to_send(void **state)
{
	struct fixture *f = *state;
	const struct spdy_header upper[] = { { "Port", "80", 0 } };
	const struct spdy_header twice[] = { { "port", "80", 0 }, { "port", "81", 0 } };
	const struct spdy_header good[] = { { "port", "80", 0 } };
	struct frame fr;
	uint32_t id;

	skip_preface(f);
	assert_int_equal(spdy_open(f->s, upper, 1, false, &id, &f->err), -EINVAL);
	assert_int_equal(spdy_open(f->s, twice, 2, false, &id, &f->err), -EINVAL);
	expect_no_output(f);
	assert_int_equal(spdy_open(f->s, good, 1, false, &id, &f->err), 0);
	assert_int_equal(id, 2);
	expect_control(f, SYN_STREAM, &fr);
	assert_int_equal(get32(fr.p), 2);
	assert_string_equal(client_header(f, fr.p + 10, fr.len - 10, "port"), "80");
}

/* Moves one session's output into the other, recording events (window updates aside). */
static void pump(struct spdy_session *from, struct spdy_session *to, struct seen *seen,
		 size_t *nseen)
{
	size_t len, off = 0;
	const uint8_t *p = spdy_output(from, &len);
	struct spdy_event ev;
	struct err err = ERR_INIT;

	do {
		ssize_t n = spdy_feed(to, p + off, len - off, &ev, &err);

		assert_true(n >= 0);
		off += (size_t)n;
		if (ev.type != SPDY_EV_NONE && ev.type != SPDY_EV_WINDOW)
			seen[(*nseen)++].ev = ev;
	} while (off < len || ev.type != SPDY_EV_NONE);
	spdy_output_consume(from, len);
}

/* Two sessions, client and server, talk to each other: open, reply, data, half-closes. */
static void test_spdy__client_and_server_sessions(void **state)
{
	struct spdy_opts co = { .client = true, .strict_windows = true };
	struct spdy_opts so = { .strict_windows = true };
	struct err err = ERR_INIT;
	struct spdy_session *c = spdy_session_new(&co, &err), *s = spdy_session_new(&so, &err);
	const struct spdy_header h[] = { { "streamtype", "stdin", 0 } };
	struct seen *seen = calloc(16, sizeof(*seen));
	size_t nseen = 0;
	uint32_t id;
	(void)state;

	assert_int_equal(spdy_open(c, h, 1, false, &id, &err), 0);
	assert_int_equal(id, 1);
	assert_int_equal(spdy_send(c, id, "abc", 3, true, &err), 3);
	pump(c, s, seen, &nseen);
	assert_int_equal(nseen, 3);
	assert_int_equal(seen[0].ev.type, SPDY_EV_STREAM);
	assert_int_equal(seen[1].ev.type, SPDY_EV_DATA);
	assert_int_equal(seen[2].ev.type, SPDY_EV_END);
	assert_int_equal(spdy_reply(s, 1, NULL, 0, false, &err), 0);
	assert_int_equal(spdy_send(s, 1, "de", 2, true, &err), 2);
	nseen = 0;
	pump(s, c, seen, &nseen);
	assert_int_equal(seen[nseen - 3].ev.type, SPDY_EV_REPLY);
	assert_int_equal(seen[nseen - 2].ev.type, SPDY_EV_DATA);
	assert_int_equal(seen[nseen - 1].ev.type, SPDY_EV_END);
	assert_int_equal(spdy_stream_count(c), 0);
	assert_int_equal(spdy_stream_count(s), 0);
	free(seen);
	spdy_session_free(c);
	spdy_session_free(s);
}

/* A stream limit over the hard limit is refused. */
static void test_spdy__max_streams_bounded(void **state)
{
	struct spdy_opts o = { .max_streams = SPDY_MAX_STREAMS_LIMIT + 1 };
	struct err err = ERR_INIT;
	(void)state;

	assert_null(spdy_session_new(&o, &err));
	assert_int_equal(err.code, EINVAL);
}

#define T(name) cmocka_unit_test_setup_teardown(test_spdy__##name, setup, teardown)
#define T_STRICT(name) cmocka_unit_test_setup_teardown(test_spdy__##name, setup_strict, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(dictionary_is_spdy3s),
		T(preface),
		T(stream_headers_and_reply),
		T(data_in_byte_by_byte),
		T(data_out_and_close),
		T_STRICT(send_stalls_until_window_update),
		T_STRICT(receive_window_enforced_and_reopened),
		T_STRICT(peer_initial_window),
		T(lenient_windows),
		T(peer_reset),
		T(ping_echo),
		T(goaway),
		T(bad_lengths),
		T(empty_ping_judged_at_once),
		T(bad_settings_length),
		T(oversized_control_frame),
		T(unknown_version),
		T(header_bomb),
		T(garbage_header_block),
		T(duplicate_stream_id),
		T(wrong_parity),
		cmocka_unit_test_setup_teardown(test_spdy__too_many_streams, setup_two_streams,
						teardown),
		T(bad_header_names),
		T(data_where_none_may_be),
		T(unknown_control_type_ignored),
		T(bad_headers_to_send),
		cmocka_unit_test(test_spdy__client_and_server_sessions),
		cmocka_unit_test(test_spdy__max_streams_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
