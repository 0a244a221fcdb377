/*
 * netguard.c: the kinds of addresses a guarded fetch must not reach (see netguard.h).
 */
#include "netguard.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* An address reduced to what is compared: IPv4-mapped IPv6 addresses become IPv4. */
struct ng_addr {
	int family; /* AF_INET, AF_INET6, or 0 when sa is neither */
	unsigned char a[16];
	uint16_t port; /* host order */
};

static const unsigned char v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
/* AWS's instance metadata service over IPv6 */
static const unsigned char aws_imds_v6[16] = { 0xfd, 0, 0x0e, 0xc2, 0, 0, 0,	0,
					       0,    0, 0,    0,    0, 0, 0x02, 0x54 };

static struct ng_addr ng_reduce(const struct sockaddr *sa)
{
	struct ng_addr r = { 0 };

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		r.family = AF_INET;
		memcpy(r.a, &in->sin_addr, 4);
		r.port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		r.port = ntohs(in6->sin6_port);
		if (memcmp(in6->sin6_addr.s6_addr, v4_mapped, 12) == 0) {
			r.family = AF_INET;
			memcpy(r.a, in6->sin6_addr.s6_addr + 12, 4);
		} else {
			r.family = AF_INET6;
			memcpy(r.a, in6->sin6_addr.s6_addr, 16);
		}
	}
	return r;
}

/* The kind an address has by its number alone. */
static enum netguard_kind ng_kind_fixed(const struct ng_addr *r)
{
	static const unsigned char zero[16];
	const unsigned char *a = r->a;

	if (r->family == AF_INET) {
		if (a[0] == 0)
			return NETGUARD_UNSPECIFIED;
		if (a[0] == 127)
			return NETGUARD_LOOPBACK;
		if (a[0] == 169 && a[1] == 254)
			return NETGUARD_LINK_LOCAL;
		if ((a[0] & 0xf0) == 224)
			return NETGUARD_MULTICAST;
		if (a[0] == 255 && a[1] == 255 && a[2] == 255 && a[3] == 255)
			return NETGUARD_BROADCAST;
		return NETGUARD_OUTSIDE;
	}
	if (r->family != AF_INET6)
		return NETGUARD_UNSPECIFIED;
	if (memcmp(a, zero, 16) == 0)
		return NETGUARD_UNSPECIFIED;
	if (memcmp(a, zero, 15) == 0 && a[15] == 1)
		return NETGUARD_LOOPBACK;
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
		return NETGUARD_LINK_LOCAL;
	if (a[0] == 0xff)
		return NETGUARD_MULTICAST;
	if (memcmp(a, aws_imds_v6, 16) == 0)
		return NETGUARD_METADATA;
	return NETGUARD_OUTSIDE;
}

/* Whether r is the address of one of this host's interfaces. */
static bool ng_is_own(const struct ng_addr *r)
{
	struct ifaddrs *ifs = NULL;
	bool own = false;

	if (getifaddrs(&ifs) < 0)
		return false;
	for (const struct ifaddrs *i = ifs; i && !own; i = i->ifa_next) {
		struct ng_addr x;

		if (!i->ifa_addr)
			continue;
		x = ng_reduce(i->ifa_addr);
		own = x.family == r->family &&
		      memcmp(x.a, r->a, r->family == AF_INET ? 4 : 16) == 0;
	}
	freeifaddrs(ifs);
	return own;
}

enum netguard_kind netguard_kind_of(const struct sockaddr *sa)
{
	struct ng_addr r = ng_reduce(sa);
	enum netguard_kind k = ng_kind_fixed(&r);

	if (k == NETGUARD_OUTSIDE && ng_is_own(&r))
		return NETGUARD_OWN;
	return k;
}

const char *netguard_kind_name(enum netguard_kind k)
{
	switch (k) {
	case NETGUARD_OUTSIDE:
		return "another host's address";
	case NETGUARD_LOOPBACK:
		return "a loopback address";
	case NETGUARD_LINK_LOCAL:
		return "a link-local address (where the instance metadata service answers)";
	case NETGUARD_METADATA:
		return "the instance metadata service";
	case NETGUARD_MULTICAST:
		return "a multicast address";
	case NETGUARD_BROADCAST:
		return "the broadcast address";
	case NETGUARD_UNSPECIFIED:
		return "the unspecified address (it reaches this host)";
	case NETGUARD_OWN:
		return "an address of this host";
	}
	return "an address of an unknown kind";
}

bool netguard_same(const struct sockaddr *a, const struct sockaddr *b)
{
	struct ng_addr x = ng_reduce(a), y = ng_reduce(b);

	return x.family && x.family == y.family && x.port == y.port &&
	       memcmp(x.a, y.a, x.family == AF_INET ? 4 : 16) == 0;
}

void netguard_format(const struct sockaddr *sa, char *out, size_t size)
{
	struct ng_addr r = ng_reduce(sa);
	char ip[INET6_ADDRSTRLEN] = "?";

	if (r.family)
		inet_ntop(r.family, r.a, ip, sizeof(ip));
	snprintf(out, size, r.family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip, (unsigned)r.port);
}
