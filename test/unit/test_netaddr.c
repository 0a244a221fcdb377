/*
 * Unit tests for common/netaddr.c's listener: the address kiyot's streaming and metrics
 * servers listen on is a numeric IPv4 ip:port (port 0 picks one), and what it cannot take is
 * refused naming it, with bind's own errno where bind failed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <unistd.h>

#include "netaddr.h"

static void test_netaddr__a_listener_gets_a_free_port_and_refuses_what_is_not_ipv4(void **state)
{
	static const char *const bad[] = { "nonsense",	   "127.0.0.1", "127.0.0.1:",	  ":80",
					   "localhost:80", "[::1]:0",	"127.0.0.1:99999" };
	struct sockaddr_in sa = { 0 };
	struct err err = ERR_INIT;
	char again[32];
	int fd, fd2;
	(void)state;

	fd = netaddr_listen_ipv4("127.0.0.1:0", 16, &sa, &err);
	assert_true(fd >= 0);
	assert_int_equal(sa.sin_family, AF_INET);
	assert_int_equal(ntohl(sa.sin_addr.s_addr), INADDR_LOOPBACK);
	assert_true(ntohs(sa.sin_port) > 0);
	/* the same port again: bind's errno, for the caller to say what to do */
	snprintf(again, sizeof(again), "127.0.0.1:%d", ntohs(sa.sin_port));
	fd2 = netaddr_listen_ipv4(again, 16, &sa, &err);
	assert_int_equal(fd2, -EADDRINUSE);
	assert_non_null(strstr(err.msg, again));
	close(fd);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = (struct err)ERR_INIT;
		if (netaddr_listen_ipv4(bad[i], 16, &sa, &err) != -EINVAL)
			fail_msg("%s was taken", bad[i]);
		assert_non_null(strstr(err.msg, bad[i]));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_netaddr__a_listener_gets_a_free_port_and_refuses_what_is_not_ipv4),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
