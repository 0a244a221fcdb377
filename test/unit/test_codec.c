/* test_codec.c: base64, hex and percent-encoding (common/codec.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec.h"
#include "xalloc.h"

static void test_codec__base64_round_trips_every_length_and_padding(void **state)
{
	static const char *const want[] = { "", "YQ==", "YWI=", "YWJj", "YWJjZA==" };
	const char *text = "abcd";

	(void)state;
	for (size_t n = 0; n <= 4; n++) {
		_cleanup_free_ char *enc = b64_encode(text, n);
		_cleanup_free_ char *dec = NULL;
		struct err err = ERR_INIT;
		size_t len = 99;

		assert_string_equal(enc, want[n]);
		if (n == 0)
			continue;
		assert_int_equal(b64_decode(enc, &dec, &len, &err), 0);
		assert_int_equal(len, n);
		assert_memory_equal(dec, text, n);
		assert_int_equal(dec[len], '\0');
	}
}

static void test_codec__base64_binary_and_whitespace(void **state)
{
	unsigned char all[256];
	_cleanup_free_ char *enc = NULL;
	_cleanup_free_ char *spaced = NULL;
	_cleanup_free_ char *dec = NULL;
	struct err err = ERR_INIT;
	size_t len = 0, w = 0;

	(void)state;
	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	enc = b64_encode(all, sizeof(all));
	/* wrapped at 64 columns as PEM is, with a trailing newline */
	spaced = xmalloc(strlen(enc) * 2 + 2);
	for (size_t i = 0; enc[i]; i++) {
		spaced[w++] = enc[i];
		if (i % 64 == 63)
			spaced[w++] = '\n';
	}
	spaced[w++] = '\n';
	spaced[w] = '\0';
	assert_int_equal(b64_decode(spaced, &dec, &len, &err), 0);
	assert_int_equal(len, sizeof(all));
	assert_memory_equal(dec, all, sizeof(all));
}

static void test_codec__base64_refuses_what_is_not_base64_saying_why(void **state)
{
	static const struct {
		const char *in, *why;
	} bad[] = {
		{ "", "multiple of 4" },      { "YWJ", "multiple of 4" },
		{ "YW=j", "padding inside" }, { "YWJj!A==", "alphabet" },
		{ "=AAA", "padding inside" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct err err = ERR_INIT;
		char *out = NULL;
		size_t len = 0;

		assert_int_equal(b64_decode(bad[i].in, &out, &len, &err), -EINVAL);
		assert_null(out);
		if (!strstr(err.msg, bad[i].why))
			fail_msg("\"%s\": %s", bad[i].in, err.msg);
	}
}

static void test_codec__hex_is_lowercase_and_terminated(void **state)
{
	const unsigned char in[] = { 0x00, 0x0f, 0xa5, 0xff };
	char out[2 * sizeof(in) + 1];

	(void)state;
	memset(out, 'x', sizeof(out));
	hex_encode(in, sizeof(in), out);
	assert_string_equal(out, "000fa5ff");
	hex_encode(in, 0, out);
	assert_string_equal(out, "");
}

static void test_codec__percent_encoding_keeps_only_unreserved(void **state)
{
	_cleanup_free_ char *a = pct_encode("AZaz09-._~");
	_cleanup_free_ char *b = pct_encode("a b/c=d&e+f%\xc3\xa9");
	_cleanup_free_ char *c = pct_encode("");

	(void)state;
	assert_string_equal(a, "AZaz09-._~");
	assert_string_equal(b, "a%20b%2Fc%3Dd%26e%2Bf%25%C3%A9");
	assert_string_equal(c, "");
}

static void test_codec__percent_encoding_of_a_label_selector(void **state)
{
	_cleanup_free_ char *e = pct_encode("kiyot.elotl.co/cluster-id=ab12,x!=y z");

	(void)state;
	assert_string_equal(e, "kiyot.elotl.co%2Fcluster-id%3Dab12%2Cx%21%3Dy%20z");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codec__base64_round_trips_every_length_and_padding),
		cmocka_unit_test(test_codec__base64_binary_and_whitespace),
		cmocka_unit_test(test_codec__base64_refuses_what_is_not_base64_saying_why),
		cmocka_unit_test(test_codec__hex_is_lowercase_and_terminated),
		cmocka_unit_test(test_codec__percent_encoding_keeps_only_unreserved),
		cmocka_unit_test(test_codec__percent_encoding_of_a_label_selector),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
