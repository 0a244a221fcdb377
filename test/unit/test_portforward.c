/*
 * Unit tests for the ports of a WebSocket port-forward URL (kiyot/stream/portforward.c,
 * stream_ports_of_query): read as the kubelet reads its "port" query parameters.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "stream/stream_internal.h"

struct parsed {
	int ret;
	int32_t ports[8];
	size_t n;
	struct err err;
};

static struct parsed parse(const char *target, size_t max)
{
	struct parsed p = { .err = ERR_INIT };

	p.ret = stream_ports_of_query(target, p.ports, max, &p.n, &p.err);
	return p;
}

static void test_portforward__every_port_parameter_and_list_in_order(void **state)
{
	struct parsed p = parse("/portforward/ab12?port=80&x=1&port=8080,9090", 8);

	(void)state;
	assert_int_equal(p.ret, 0);
	assert_int_equal(p.n, 3);
	assert_int_equal(p.ports[0], 80);
	assert_int_equal(p.ports[1], 8080);
	assert_int_equal(p.ports[2], 9090);
}

static void test_portforward__escapes_are_decoded(void **state)
{
	struct parsed p = parse("/portforward/ab12?po%72t=8%300%2C81", 8);

	(void)state;
	assert_int_equal(p.ret, 0);
	assert_int_equal(p.n, 2);
	assert_int_equal(p.ports[0], 800);
	assert_int_equal(p.ports[1], 81);
}

static void test_portforward__no_query_or_no_port_is_none(void **state)
{
	struct parsed p = parse("/portforward/ab12", 8);

	(void)state;
	assert_int_equal(p.ret, 0);
	assert_int_equal(p.n, 0);
	p = parse("/portforward/ab12?ports=80&%zz=1", 8);
	assert_int_equal(p.ret, 0);
	assert_int_equal(p.n, 0);
}

static void test_portforward__bad_ports_are_named(void **state)
{
	static const struct {
		const char *target, *want;
	} cases[] = {
		{ "/p/t?port=", "query parameter \"port\" cannot be empty" },
		{ "/p/t?port", "query parameter \"port\" cannot be empty" },
		{ "/p/t?port=65536", "unable to parse \"65536\" as a port" },
		{ "/p/t?port=80,", "unable to parse \"80,\" as a port" },
		{ "/p/t?port=-1", "unable to parse \"-1\" as a port" },
		{ "/p/t?port=+80", "unable to parse \" 80\" as a port" },
		{ "/p/t?port=0", "port \"0\" must be > 0" },
		{ "/p/t?port=8%", NULL }, /* a broken escape: skipped, as Go skips it */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct parsed p = parse(cases[i].target, 8);

		if (!cases[i].want) {
			assert_int_equal(p.ret, 0);
			assert_int_equal(p.n, 0);
			continue;
		}
		assert_int_equal(p.ret, -EINVAL);
		assert_string_equal(p.err.msg, cases[i].want);
	}
}

static void test_portforward__more_ports_than_room_is_refused(void **state)
{
	struct parsed p = parse("/p/t?port=1,2&port=3", 2);

	(void)state;
	assert_int_equal(p.ret, -E2BIG);
	assert_non_null(strstr(p.err.msg, "more than 2 ports"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_portforward__every_port_parameter_and_list_in_order),
		cmocka_unit_test(test_portforward__escapes_are_decoded),
		cmocka_unit_test(test_portforward__no_query_or_no_port_is_none),
		cmocka_unit_test(test_portforward__bad_ports_are_named),
		cmocka_unit_test(test_portforward__more_ports_than_room_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
