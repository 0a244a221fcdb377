/* Tests of the CRI log writer and parser. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "crilog.h"
#include "xalloc.h"

#define FIXED_NS 1795321800123456789LL /* 2026-11-22T04:30:00.123456789Z */

/* A fixed clock so records are comparable byte for byte. */
static int64_t fixed_now(void)
{
	return FIXED_NS;
}

/* Writes the chunks through a writer with max record max, closes both streams and returns
 * what reached the file. */
static char *run_writer(size_t max, const char *const *chunks, const int *streams)
{
	FILE *f = tmpfile();
	struct crilog_writer *w;
	struct err err = ERR_INIT;
	char *out = xcalloc(1, 65536);
	size_t n;

	assert_non_null(f);
	w = crilog_writer_new(fileno(f), max, fixed_now);
	for (size_t i = 0; chunks[i]; i++)
		assert_int_equal(crilog_write(w, streams[i], chunks[i], strlen(chunks[i]), &err),
				 0);
	assert_int_equal(crilog_close_stream(w, CRILOG_STDOUT, &err), 0);
	assert_int_equal(crilog_close_stream(w, CRILOG_STDERR, &err), 0);
	crilog_writer_free(w);
	rewind(f);
	n = fread(out, 1, 65535, f);
	out[n] = '\0';
	fclose(f);
	return out;
}

#define TS "2026-11-22T04:30:00.123456789Z "

struct split_case {
	const char *name;
	size_t max;
	const char *chunks[5];
	int streams[5];
	const char *want;
};

static const struct split_case split_cases[] = {
	{ "one line", 0, { "hello\n" }, { CRILOG_STDOUT }, TS "stdout F hello\n" },
	{ "empty line", 0, { "\n" }, { CRILOG_STDOUT }, TS "stdout F \n" },
	{ "line across writes",
	  0,
	  { "hel", "lo\nwor", "ld\n" },
	  { 0, 0, 0 },
	  TS "stdout F hello\n" TS "stdout F world\n" },
	{ "stderr tagged", 0, { "oops\n" }, { CRILOG_STDERR }, TS "stderr F oops\n" },
	{ "streams held apart",
	  0,
	  { "a", "b\n", "c\n" },
	  { 0, 1, 0 },
	  TS "stderr F b\n" TS "stdout F ac\n" },
	{ "long line split into P then F",
	  4,
	  { "abcdefghij\n" },
	  { 0 },
	  TS "stdout P abcd\n" TS "stdout P efgh\n" TS "stdout F ij\n" },
	{ "line of exactly max is one F", 4, { "abcd\n" }, { 0 }, TS "stdout F abcd\n" },
	{ "final chunk without newline stays P at close",
	  0,
	  { "a\nlast" },
	  { 0 },
	  TS "stdout F a\n" TS "stdout P last\n" },
	{ "output of printf DONE is one P record", 0, { "DONE" }, { 0 }, TS "stdout P DONE\n" },
	{ "long tail at close", 4, { "abcdef" }, { 0 }, TS "stdout P abcd\n" TS "stdout P ef\n" },
	{ "tail of exactly max at close", 4, { "abcd" }, { 0 }, TS "stdout P abcd\n" },
};

/* Lines are split and tagged as the kubelet expects. */
static void test_crilog__split_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(split_cases); i++) {
		const struct split_case *c = &split_cases[i];
		_cleanup_free_ char *got = run_writer(c->max, c->chunks, c->streams);

		if (strcmp(got, c->want) != 0)
			fail_msg("case %s: got\n%s\nwant\n%s", c->name, got, c->want);
	}
}

/* A default writer splits a 40000-byte line into 16 KiB P records and a final F. */
static void test_crilog__default_max_is_16k(void **state)
{
	_cleanup_free_ char *line = xmalloc(40002);
	const char *chunks[] = { line, NULL };
	int streams[] = { 0 };
	_cleanup_free_ char *got = NULL;
	struct crilog_record r;
	struct err err = ERR_INIT;
	char *p;

	(void)state;
	memset(line, 'x', 40000);
	line[40000] = '\n';
	line[40001] = '\0';
	got = run_writer(0, chunks, streams);
	p = strchr(got, '\n');
	assert_int_equal(crilog_parse(got, (size_t)(p - got + 1), &r, &err), 0);
	assert_true(r.partial);
	assert_int_equal(r.text_len, 16384);
	p = strrchr(got, '\n');
	*p = '\0';
	p = strrchr(got, '\n') + 1;
	assert_int_equal(crilog_parse(p, strlen(p), &r, &err), 0);
	assert_false(r.partial);
	assert_int_equal(r.text_len, 40000 - 2 * 16384);
}

struct parse_case {
	const char *line;
	int ret;
	int stream;
	bool partial;
	const char *text;
};

static const struct parse_case parse_cases[] = {
	{ TS "stdout F hello world\n", 0, CRILOG_STDOUT, false, "hello world" },
	{ TS "stderr P part", 0, CRILOG_STDERR, true, "part" },
	{ TS "stdout F \n", 0, CRILOG_STDOUT, false, "" },
	{ TS "stdout F", 0, CRILOG_STDOUT, false, "" },
	{ TS "stdout F  two spaces", 0, CRILOG_STDOUT, false, " two spaces" },
	{ "2026-11-22T04:30:00.1+01:00 stdout F tz", 0, CRILOG_STDOUT, false, "tz" },
	{ "hello world\n", -EINVAL, 0, false, NULL },
	{ TS "stdin F x\n", -EINVAL, 0, false, NULL },
	{ TS "stdout X x\n", -EINVAL, 0, false, NULL },
	{ TS "stdout Fx\n", -EINVAL, 0, false, NULL },
	{ "", -EINVAL, 0, false, NULL },
};

/* The parser returns the text of well-formed records and rejects everything else. */
static void test_crilog__parse_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(parse_cases); i++) {
		const struct parse_case *c = &parse_cases[i];
		struct crilog_record r;
		struct err err = ERR_INIT;
		int ret = crilog_parse(c->line, strlen(c->line), &r, &err);

		if (ret != c->ret)
			fail_msg("case %zu (%s): ret %d want %d", i, c->line, ret, c->ret);
		if (ret < 0) {
			assert_true(err.msg[0] != '\0');
			continue;
		}
		assert_int_equal(r.stream, c->stream);
		assert_int_equal(r.partial, c->partial);
		assert_int_equal(r.text_len, strlen(c->text));
		assert_memory_equal(r.text, c->text, r.text_len);
	}
}

/* A record formatted and parsed back keeps its text and time. */
static void test_crilog__format_round_trip(void **state)
{
	char out[128];
	struct crilog_record r;
	struct err err = ERR_INIT;
	int n;

	(void)state;
	n = crilog_format(out, sizeof(out), FIXED_NS, CRILOG_STDERR, true, "abc", 3);
	assert_true(n > 0);
	assert_int_equal(crilog_parse(out, (size_t)n, &r, &err), 0);
	assert_int_equal(r.time_len, strlen("2026-11-22T04:30:00.123456789Z"));
	assert_memory_equal(r.time, "2026-11-22T04:30:00.123456789Z", r.time_len);
	assert_true(r.partial);
	assert_int_equal(crilog_format(out, 10, FIXED_NS, CRILOG_STDERR, true, "abc", 3), -ENOBUFS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crilog__split_table),
		cmocka_unit_test(test_crilog__default_max_is_16k),
		cmocka_unit_test(test_crilog__parse_table),
		cmocka_unit_test(test_crilog__format_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
