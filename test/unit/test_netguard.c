/* test_netguard.c: common/netguard.c, the kinds of addresses a guarded fetch must not reach. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "netguard.h"

/* ip (numeric, v4 or v6) and port as a socket address. */
static struct sockaddr_storage addr(const char *ip, int port)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		assert_int_equal(inet_pton(AF_INET6, ip, &a->sin6_addr), 1);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		assert_int_equal(inet_pton(AF_INET, ip, &a->sin_addr), 1);
	}
	return ss;
}

static enum netguard_kind kind(const char *ip)
{
	struct sockaddr_storage ss = addr(ip, 80);

	return netguard_kind_of((struct sockaddr *)&ss);
}

static void test_netguard__kinds_by_number(void **state)
{
	static const struct {
		const char *ip;
		enum netguard_kind want;
	} cases[] = {
		{ "127.0.0.1", NETGUARD_LOOPBACK },
		{ "127.45.6.7", NETGUARD_LOOPBACK },
		{ "::1", NETGUARD_LOOPBACK },
		{ "::ffff:127.0.0.1", NETGUARD_LOOPBACK }, /* IPv4-mapped */
		{ "169.254.169.254", NETGUARD_LINK_LOCAL },
		{ "::ffff:169.254.169.254", NETGUARD_LINK_LOCAL },
		{ "fe80::1", NETGUARD_LINK_LOCAL },
		{ "fd00:ec2::254", NETGUARD_METADATA },
		{ "224.0.0.1", NETGUARD_MULTICAST },
		{ "239.255.255.250", NETGUARD_MULTICAST },
		{ "ff02::1", NETGUARD_MULTICAST },
		{ "255.255.255.255", NETGUARD_BROADCAST },
		{ "0.0.0.0", NETGUARD_UNSPECIFIED },
		{ "0.1.2.3", NETGUARD_UNSPECIFIED },
		{ "::", NETGUARD_UNSPECIFIED },
		{ "192.0.2.10", NETGUARD_OUTSIDE }, /* TEST-NET-1: no host has it */
		{ "2001:db8::10", NETGUARD_OUTSIDE },
		{ "fd00:ec2::253", NETGUARD_OUTSIDE },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (kind(cases[i].ip) != cases[i].want)
			fail_msg("%s: kind %d, want %d", cases[i].ip, kind(cases[i].ip),
				 cases[i].want);
}

static void test_netguard__own_interface_addresses(void **state)
{
	struct ifaddrs *ifs = NULL;
	int seen = 0;

	(void)state;
	assert_int_equal(getifaddrs(&ifs), 0);
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		enum netguard_kind k;

		if (!i->ifa_addr ||
		    (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
			continue;
		k = netguard_kind_of(i->ifa_addr);
		/* every address of this host is refused, by its number or as the host's own */
		assert_int_not_equal(k, NETGUARD_OUTSIDE);
		seen++;
	}
	freeifaddrs(ifs);
	assert_true(seen > 0);
}

static void test_netguard__same_and_format(void **state)
{
	struct sockaddr_storage a = addr("127.0.0.1", 5000), b = addr("::ffff:127.0.0.1", 5000),
				c = addr("127.0.0.1", 5001), d = addr("::1", 443);
	char s[64];

	(void)state;
	assert_true(netguard_same((struct sockaddr *)&a, (struct sockaddr *)&b));
	assert_false(netguard_same((struct sockaddr *)&a, (struct sockaddr *)&c));
	netguard_format((struct sockaddr *)&b, s, sizeof(s));
	assert_string_equal(s, "127.0.0.1:5000");
	netguard_format((struct sockaddr *)&d, s, sizeof(s));
	assert_string_equal(s, "[::1]:443");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_netguard__kinds_by_number),
		cmocka_unit_test(test_netguard__own_interface_addresses),
		cmocka_unit_test(test_netguard__same_and_format),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
