/*
 * Unit tests for cell-agent/interrupt: what the instance metadata service's spot interruption
 * notice and rebalance recommendation say, as EC2 writes them, and answers that are not
 * theirs refused naming what is wrong.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "interrupt.h"

static int parse(enum interruption_kind kind, const char *body, struct interruption *out,
		 struct err *err)
{
	*err = (struct err)ERR_INIT;
	return interruption_parse(kind, body, strlen(body), out, err);
}

/* EC2's notice: the action and when it comes (2026-11-29T08:22:00Z is 1795940520 s). */
static void test_interrupt__a_notice_says_what_and_when(void **state)
{
	struct interruption in;
	struct err err;

	(void)state;
	assert_int_equal(parse(INTERRUPTION_NOTICE,
			       "{\"action\": \"terminate\", \"time\": \"2026-11-29T08:22:00Z\"}",
			       &in, &err),
			 0);
	assert_int_equal(in.kind, INTERRUPTION_NOTICE);
	assert_string_equal(in.action, "terminate");
	assert_int_equal(in.time_unix_ns, 1795940520LL * 1000000000LL);
	assert_int_equal(parse(INTERRUPTION_NOTICE,
			       "{\"action\": \"hibernate\", \"time\": \"2026-11-29T08:22:00.5Z\"}",
			       &in, &err),
			 0);
	assert_string_equal(in.action, "hibernate");
	assert_int_equal(in.time_unix_ns, 1795940520LL * 1000000000LL);
}

/* The recommendation: when EC2 noticed the risk; no action. */
static void test_interrupt__a_rebalance_recommendation_says_when(void **state)
{
	struct interruption in;
	struct err err;

	(void)state;
	assert_int_equal(parse(INTERRUPTION_REBALANCE, "{\"noticeTime\": \"2026-11-29T08:20:00Z\"}",
			       &in, &err),
			 0);
	assert_int_equal(in.kind, INTERRUPTION_REBALANCE);
	assert_string_equal(in.action, "");
	assert_int_equal(in.time_unix_ns, 1795940400LL * 1000000000LL);
}

/* Answers that are not the service's are refused, naming the path and the field. */
static void test_interrupt__other_answers_are_refused_naming_the_field(void **state)
{
	static const char *const notices[] = {
		"",
		"[]",
		"{\"action\": \"terminate\"}",
		"{\"action\": \"terminate\", \"time\": \"tomorrow\"}",
		"{\"action\": \"terminate\", \"time\": \"2026-11-29T08:22:00+02:00\"}",
		"{\"action\": \"explode\", \"time\": \"2026-11-29T08:22:00Z\"}",
		"{\"time\": \"2026-11-29T08:22:00Z\"}",
	};
	struct interruption in;
	struct err err;

	(void)state;
	for (size_t i = 0; i < sizeof(notices) / sizeof(notices[0]); i++) {
		assert_int_equal(parse(INTERRUPTION_NOTICE, notices[i], &in, &err), -EINVAL);
		assert_non_null(strstr(err.msg, "spot/instance-action"));
	}
	assert_int_equal(parse(INTERRUPTION_REBALANCE, "{\"time\": \"2026-11-29T08:22:00Z\"}", &in,
			       &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "\"noticeTime\""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_interrupt__a_notice_says_what_and_when),
		cmocka_unit_test(test_interrupt__a_rebalance_recommendation_says_when),
		cmocka_unit_test(test_interrupt__other_answers_are_refused_naming_the_field),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
