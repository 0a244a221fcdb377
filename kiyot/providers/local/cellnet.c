#include "cellnet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "xalloc.h"

/* Parses a dotted quad with inet_pton, which accepts nothing but four decimal octets. */
int cellnet_parse_ip(const char *s, uint32_t *out, struct err *err)
{
	struct in_addr a;

	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return err_set(err, EINVAL, "\"%s\" is not an IPv4 address (want a.b.c.d)",
			       s ? s : "");
	*out = ntohl(a.s_addr);
	return 0;
}

/* Parses "a.b.c.d/p" with a prefix that leaves room for a gateway and at least one cell. */
int cellnet_parse_cidr(const char *s, struct cellnet_cidr *out, struct err *err)
{
	char addr[CELLNET_IP_SIZE];
	const char *slash = s ? strchr(s, '/') : NULL;
	struct cellnet_cidr c;
	unsigned long prefix;
	char *end;
	uint32_t ip = 0;

	if (!slash || (size_t)(slash - s) >= sizeof(addr) || !slash[1])
		return err_set(err, EINVAL, "cell network \"%s\": want a CIDR like 10.77.0.0/16",
			       s ? s : "");
	memcpy(addr, s, (size_t)(slash - s));
	addr[slash - s] = '\0';
	if (cellnet_parse_ip(addr, &ip, err) < 0)
		return err_wrap(err, "cell network \"%s\"", s);
	errno = 0;
	prefix = strtoul(slash + 1, &end, 10);
	if (errno || *end || slash[1] < '0' || slash[1] > '9' || prefix < 8 || prefix > 30)
		return err_set(err, EINVAL,
			       "cell network \"%s\": prefix length must be 8..30 (e.g. /16)", s);
	c.prefix = (unsigned)prefix;
	c.network = ip;
	if (ip & ~cellnet_netmask(&c)) {
		char net[CELLNET_IP_SIZE];

		cellnet_ip_str(ip & cellnet_netmask(&c), net, sizeof(net));
		return err_set(err, EINVAL,
			       "cell network \"%s\": host bits are set; did you mean %s/%u?", s,
			       net, c.prefix);
	}
	*out = c;
	return 0;
}

/* Formats a host-order address as a dotted quad. */
void cellnet_ip_str(uint32_t ip, char *out, size_t size)
{
	snprintf(out, size, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 0xff, (ip >> 8) & 0xff,
		 ip & 0xff);
}

/* The network mask of c in host byte order. */
uint32_t cellnet_netmask(const struct cellnet_cidr *c)
{
	return c->prefix ? ~(uint32_t)0 << (32 - c->prefix) : 0;
}

/* The last address of the network. */
uint32_t cellnet_broadcast(const struct cellnet_cidr *c)
{
	return c->network | ~cellnet_netmask(c);
}

/* The bridge's address: network + 1. */
uint32_t cellnet_gateway(const struct cellnet_cidr *c)
{
	return c->network + 1;
}

/* Whether ip is a usable cell address of c. */
int cellnet_is_cell_ip(const struct cellnet_cidr *c, uint32_t ip)
{
	return (ip & cellnet_netmask(c)) == c->network && ip != c->network &&
	       ip != cellnet_gateway(c) && ip != cellnet_broadcast(c);
}

/* qsort/bsearch order for host-order addresses. */
static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Sorts a copy of used[] once, then walks the cell range from hint, wrapping once. */
int cellnet_pick_ip(const struct cellnet_cidr *c, const uint32_t *used, size_t n, uint32_t hint,
		    uint32_t *out, struct err *err)
{
	uint32_t first = c->network + 2, last = cellnet_broadcast(c) - 1;
	uint64_t span = (uint64_t)last - first + 1;
	uint32_t *sorted = NULL;
	uint32_t start;
	int ret = -ENOSPC;

	if (n) {
		sorted = xmalloc(n * sizeof(*sorted));
		memcpy(sorted, used, n * sizeof(*sorted));
		qsort(sorted, n, sizeof(*sorted), cmp_u32);
	}
	start = (hint >= first && hint <= last) ? hint : first;
	for (uint64_t i = 0; i < span; i++) {
		uint32_t ip = first + (uint32_t)(((uint64_t)(start - first) + i) % span);

		if (n && bsearch(&ip, sorted, n, sizeof(*sorted), cmp_u32))
			continue;
		*out = ip;
		ret = 0;
		break;
	}
	free(sorted);
	if (ret < 0) {
		char net[CELLNET_IP_SIZE];

		cellnet_ip_str(c->network, net, sizeof(net));
		return err_set(err, ENOSPC,
			       "cell network %s/%u is full (%llu cells); terminate cells or "
			       "configure a larger network",
			       net, c->prefix, (unsigned long long)span);
	}
	return 0;
}

/* 1..CELLNET_ID_MAX characters of [a-z0-9-]. */
int cellnet_id_valid(const char *id)
{
	size_t n = 0;

	if (!id)
		return 0;
	for (; id[n]; n++) {
		char ch = id[n];

		if (n >= CELLNET_ID_MAX)
			return 0;
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-'))
			return 0;
	}
	return n > 0;
}

/* FNV-1a 64 of the id; its low 48 bits as 12 hex digits after "kv". */
void cellnet_veth_name(const char *cell_id, char *out, size_t size)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (const unsigned char *p = (const unsigned char *)cell_id; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ULL;
	}
	snprintf(out, size, CELLNET_VETH_PREFIX "%012llx",
		 (unsigned long long)(h & 0xffffffffffffULL));
}

/* 02:6b, then the address in network order. */
void cellnet_mac(uint32_t ip, uint8_t mac[6])
{
	mac[0] = 0x02;
	mac[1] = 0x6b;
	mac[2] = (uint8_t)(ip >> 24);
	mac[3] = (uint8_t)(ip >> 16);
	mac[4] = (uint8_t)(ip >> 8);
	mac[5] = (uint8_t)ip;
}

void cellnet_mac_str(uint32_t ip, char *out, size_t size)
{
	uint8_t m[6];

	cellnet_mac(ip, m);
	snprintf(out, size, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

/* A decimal port, then nothing or "/tcp" or "/udp". */
int cellnet_parse_port(const char *s, struct cellnet_port *out, struct err *err)
{
	struct cellnet_port p = { 0, "tcp" };
	unsigned long n;
	char *end;

	if (!s || s[0] < '0' || s[0] > '9')
		goto bad;
	errno = 0;
	n = strtoul(s, &end, 10);
	if (errno || n < 1 || n > 65535)
		goto bad;
	if (*end == '/') {
		if (strcasecmp(end + 1, "tcp") != 0 && strcasecmp(end + 1, "udp") != 0)
			goto bad;
		p.protocol[0] = (char)(end[1] | 0x20);
		p.protocol[1] = (char)(end[2] | 0x20);
		p.protocol[2] = (char)(end[3] | 0x20);
	} else if (*end) {
		goto bad;
	}
	p.port = (int)n;
	*out = p;
	return 0;
bad:
	return err_set(err, EINVAL,
		       "\"%.64s\" is not a port: want PORT, PORT/tcp or PORT/udp (e.g. 5000/tcp, "
		       "53/udp), PORT 1-65535",
		       s ? s : "");
}
