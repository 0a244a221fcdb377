/* Unit tests for kiyot/quantity: Kubernetes resource quantities. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kube/quantity.h"

struct qcase {
	const char *text;
	int64_t want;
};

/* CPU quantities as users write them, in milli-CPUs; fractions round up. */
static void test_quantity__milli_table(void **state)
{
	static const struct qcase cases[] = {
		{ "100m", 100 },
		{ "0.5", 500 },
		{ "2", 2000 },
		{ "+2", 2000 },
		{ ".5", 500 },
		{ "5.", 5000 },
		{ "1e3", 1000000 },
		{ "1E3", 1000000 },
		{ "1e-3", 1 },
		{ "0.0001", 1 },
		{ "1500u", 2 },
		{ "250000000n", 250 },
		{ "0", 0 },
		{ "-0", 0 },
		{ "0.000", 0 },
		{ "1k", 1000000 },
		{ "1Ki", 1024000 },
		{ "9223372036854775807m", INT64_MAX },
		{ "9223372036854775.807", INT64_MAX },
		{ "0000000000000000000000000000000000000000001", 1000 },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct err err = ERR_INIT;
		int64_t v = -1;

		if (quantity_parse_milli(cases[i].text, &v, &err) < 0)
			fail_msg("%s: %s", cases[i].text, err.msg);
		if (v != cases[i].want)
			fail_msg("%s: got %lld want %lld", cases[i].text, (long long)v,
				 (long long)cases[i].want);
	}
}

/* Memory quantities in bytes: binary and decimal suffixes, exponents, fractions rounding up. */
static void test_quantity__bytes_table(void **state)
{
	static const struct qcase cases[] = {
		{ "128Mi", 134217728 },
		{ "1Gi", 1073741824 },
		{ "1G", 1000000000 },
		{ "500M", 500000000 },
		{ "1e3", 1000 },
		{ "1.5Gi", 1610612736 },
		{ "0.4Gi", 429496730 },
		{ "400Mi", 419430400 },
		{ "1Ki", 1024 },
		{ "1k", 1000 },
		{ "1Ti", 1099511627776LL },
		{ "1Pi", 1125899906842624LL },
		{ "1Ei", 1152921504606846976LL },
		{ "7.5Ei", 8646911284551352320LL },
		{ "1E", 1000000000000000000LL },
		{ "9E", 9000000000000000000LL },
		{ "100m", 1 },
		{ "1001m", 2 },
		{ "1e-400", 1 },
		{ "0e400", 0 },
		{ "9223372036854775807", INT64_MAX },
		{ "123", 123 },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct err err = ERR_INIT;
		int64_t v = -1;

		if (quantity_parse_bytes(cases[i].text, &v, &err) < 0)
			fail_msg("%s: %s", cases[i].text, err.msg);
		if (v != cases[i].want)
			fail_msg("%s: got %lld want %lld", cases[i].text, (long long)v,
				 (long long)cases[i].want);
	}
}

struct qbad {
	const char *text;
	int milli; /* 1: parse as CPU, 0: as bytes */
	const char *msg;
};

/* The message of a value past INT64_MAX units. */
#define MAX64 "9223372036854775807"
#define RANGE(text, unit)                                                                          \
	"\"" text "\" is out of range: more than " MAX64 " " unit "; use a smaller value"

/* Every rejected input leaves the output alone, is -EINVAL whatever its fault (an overflow
 * too: the text is what is wrong, which CRI answers INVALID_ARGUMENT), and says what was wrong
 * with the text. */
static void test_quantity__errors_name_the_text(void **state)
{
	static const struct qbad cases[] = {
		{ "abc", 1, "\"abc\" is not a quantity (examples: 500m, 2, 128Mi, 1Gi)" },
		{ "", 1, "empty quantity (examples: 500m, 2, 128Mi, 1Gi)" },
		{ "1 Gi", 0, "\"1 Gi\" is not a quantity (examples: 500m, 2, 128Mi, 1Gi)" },
		{ " 1", 0, "\" 1\" is not a quantity (examples: 500m, 2, 128Mi, 1Gi)" },
		{ "1gi", 0, "\"1gi\" is not a quantity (examples: 500m, 2, 128Mi, 1Gi)" },
		{ "1.2.3", 1, "\"1.2.3\" is not a quantity (examples: 500m, 2, 128Mi, 1Gi)" },
		{ ".", 1, "\".\" is not a quantity (examples: 500m, 2, 128Mi, 1Gi)" },
		{ "1e", 1, "\"1e\" is not a quantity (examples: 500m, 2, 128Mi, 1Gi)" },
		{ "1e3Mi", 0, "\"1e3Mi\" is not a quantity (examples: 500m, 2, 128Mi, 1Gi)" },
		{ "1e1.5", 0, "\"1e1.5\" is not a quantity (examples: 500m, 2, 128Mi, 1Gi)" },
		{ "--1", 1, "\"--1\" is not a quantity (examples: 500m, 2, 128Mi, 1Gi)" },
		{ "Mi", 0, "\"Mi\" is not a quantity (examples: 500m, 2, 128Mi, 1Gi)" },
		{ "-1", 1, "\"-1\" must not be negative" },
		{ "-100Mi", 0, "\"-100Mi\" must not be negative" },
		{ "-1e400", 0, "\"-1e400\" must not be negative" },
		{ "1e30", 1, RANGE("1e30", "milli-units") },
		{ "1e400", 1, RANGE("1e400", "milli-units") },
		{ "1E400", 0, RANGE("1E400", "bytes") },
		{ "0.001e400", 1, RANGE("0.001e400", "milli-units") },
		{ "9223372036854775808", 0, RANGE("9223372036854775808", "bytes") },
		{ "9223372036854775807.1", 0, RANGE("9223372036854775807.1", "bytes") },
		{ "8Ei", 0, RANGE("8Ei", "bytes") },
		{ "10E", 0, RANGE("10E", "bytes") },
		{ "9223372036854775808m", 1, RANGE("9223372036854775808m", "milli-units") },
		{ "1e99999999999999999999", 0, RANGE("1e99999999999999999999", "bytes") },
		{ "99999999999999999999999999999999999999999999999999999999999999Ei", 0,
		  RANGE("99999999999999999999999999999999999999999999999999999999999999Ei",
			"bytes") },
		{ "11111111111111111111111111111111111111111111111111111111111111111", 0,
		  "quantity is longer than 64 characters" },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct err err = ERR_INIT;
		int64_t v = 42;
		int ret = cases[i].milli ? quantity_parse_milli(cases[i].text, &v, &err)
					 : quantity_parse_bytes(cases[i].text, &v, &err);

		if (ret >= 0)
			fail_msg("%s: accepted as %lld", cases[i].text, (long long)v);
		if (ret != -EINVAL || err.code != EINVAL)
			fail_msg("%s: %d (%s), not -EINVAL", cases[i].text, ret, err.msg);
		assert_int_equal(v, 42);
		if (strcmp(err.msg, cases[i].msg) != 0)
			fail_msg("%s: message %s", cases[i].text, err.msg);
	}
}

/* A NULL text is an empty quantity, not a crash. */
static void test_quantity__null_is_empty(void **state)
{
	struct err err = ERR_INIT;
	int64_t v = 0;
	(void)state;

	assert_true(quantity_parse_bytes(NULL, &v, &err) < 0);
	assert_string_equal(err.msg, "empty quantity (examples: 500m, 2, 128Mi, 1Gi)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantity__milli_table),
		cmocka_unit_test(test_quantity__bytes_table),
		cmocka_unit_test(test_quantity__errors_name_the_text),
		cmocka_unit_test(test_quantity__null_is_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
