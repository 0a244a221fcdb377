/* test_clock: clock.h's deadlines and RFC 3339 times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "clock.h"

static int64_t ns_of(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A deadline is now plus ms on its clock, its nanoseconds always below a second: over two
 * seconds of offsets in odd steps, the carry into seconds is taken many times. */
static void test_clock__deadline_is_now_plus_ms_normalized(void **state)
{
	(void)state;
	for (int64_t ms = 0; ms < 2000; ms += 7) {
		int64_t before = clock_mono_ns();
		struct timespec ts = clock_deadline(CLOCK_MONOTONIC, ms);
		int64_t after = clock_mono_ns();

		assert_true(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
		assert_true(ns_of(ts) >= before + ms * 1000000LL);
		assert_true(ns_of(ts) <= after + ms * 1000000LL);
	}
	{
		int64_t before = clock_now_ns();
		struct timespec ts = clock_deadline(CLOCK_REALTIME, 1500);

		assert_true(ns_of(ts) >= before + 1500000000LL);
		assert_true(ns_of(ts) <= clock_now_ns() + 1500000000LL);
	}
}

static void test_clock__rfc3339nano_has_nine_digits(void **state)
{
	char out[40];

	(void)state;
	clock_rfc3339nano(1700000000000000042LL, out, sizeof(out));
	assert_string_equal(out, "2023-11-14T22:13:20.000000042Z");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clock__deadline_is_now_plus_ms_normalized),
		cmocka_unit_test(test_clock__rfc3339nano_has_nine_digits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
