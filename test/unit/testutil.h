/*
 * testutil.h: what the unit tests share beside cmocka (include after <cmocka.h>).
 */
#ifndef KIYOT_TESTUTIL_H
#define KIYOT_TESTUTIL_H

/* Asserts that a call returned 0, printing the error it set in the caller's `err` otherwise. */
#define assert_ok(expr)                                                                            \
	do {                                                                                       \
		int r_ = (expr);                                                                   \
		if (r_ < 0)                                                                        \
			print_error("%s: %s\n", #expr, err.msg);                                   \
		assert_int_equal(r_, 0);                                                           \
	} while (0)

#endif
