/*
 * Unit tests for release numbers (common/version.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "version.h"

static void test_version__parse_takes_releases_only(void **state)
{
	static const char *const bad[] = { "",	     "1",	  "1.2",    "1.2.",
					   ".1.2",   "1..2",	  "a.b.c",  "1.2.3.4",
					   "1.2.3x", "65536.0.0", "-1.2.3", "1.2.3 " };
	struct version v;

	(void)state;
	assert_true(version_parse("0.1.0", &v));
	assert_int_equal(v.major, 0);
	assert_int_equal(v.minor, 1);
	assert_int_equal(v.patch, 0);
	assert_true(version_parse("12.34.65535-rc1", &v));
	assert_int_equal(v.major, 12);
	assert_int_equal(v.minor, 34);
	assert_int_equal(v.patch, 65535);
	assert_true(version_parse("1.2.3+dirty", &v));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(version_parse(bad[i], &v));
	assert_false(version_parse(NULL, &v));
}

static void test_version__order_is_numeric_part_by_part(void **state)
{
	static const char *const order[] = { "0.0.9",  "0.1.0", "0.1.1",  "0.2.0",
					     "0.10.0", "1.0.0", "1.0.10", "10.0.0" };
	size_t n = sizeof(order) / sizeof(order[0]);

	(void)state;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			assert_int_equal(version_at_least(order[i], order[j]), i >= j);
	assert_false(version_at_least("fake", "0.1.0"));
	assert_false(version_at_least("", "0.1.0"));
	assert_true(version_at_least(KIYOT_VERSION, KIYOT_AGENT_OLDEST));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version__parse_takes_releases_only),
		cmocka_unit_test(test_version__order_is_numeric_part_by_part),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
