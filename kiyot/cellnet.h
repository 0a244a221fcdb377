/*
 * cellnet.h: the pure parts of a local cell's network: the cell network's CIDR, picking a free
 * address in it, and the names derived from a cell id (host veth, netns).
 *
 * Addresses are IPv4 in host byte order. Nothing here touches the kernel, so it is unit-tested
 * on its own.
 */
#ifndef KIYOT_CELLNET_H
#define KIYOT_CELLNET_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* A parsed cell network: "10.77.0.0/16" -> network 10.77.0.0, prefix 16. */
struct cellnet_cidr {
	uint32_t network; /* host bits cleared */
	unsigned prefix;  /* 8..30: room for at least the gateway and one cell */
};

/* Longest cell id accepted (provider.h: [a-z0-9-], at most 40 chars). */
#define CELLNET_ID_MAX 40
/* Room for an interface name: IFNAMSIZ (15 chars + NUL). */
#define CELLNET_IFNAME_SIZE 16
/* Room for a dotted quad and its NUL. */
#define CELLNET_IP_SIZE 16

/* Parses "a.b.c.d/p". Host bits set in the address are an error (the caller probably meant
 * another network). -EINVAL with a message saying what is accepted. */
int cellnet_parse_cidr(const char *s, struct cellnet_cidr *out, struct err *err);

/* Parses a dotted quad into host byte order; -EINVAL on anything else. */
int cellnet_parse_ip(const char *s, uint32_t *out, struct err *err);

/* Formats a host-order address as a dotted quad into out (CELLNET_IP_SIZE bytes). */
void cellnet_ip_str(uint32_t ip, char *out, size_t size);

uint32_t cellnet_netmask(const struct cellnet_cidr *c);
uint32_t cellnet_broadcast(const struct cellnet_cidr *c);
/* The host (bridge) address: the first address of the network. */
uint32_t cellnet_gateway(const struct cellnet_cidr *c);
/* Whether ip may be given to a cell: inside the network, not network, gateway or broadcast. */
int cellnet_is_cell_ip(const struct cellnet_cidr *c, uint32_t ip);

/* Picks a cell address not in used[] (n entries, any order), searching upwards from hint
 * (wrapping around) so that a released address is not handed out again at once. Writes it to
 * *out. -ENOSPC when every address is taken. */
int cellnet_pick_ip(const struct cellnet_cidr *c, const uint32_t *used, size_t n, uint32_t hint,
		    uint32_t *out, struct err *err);

/* Whether id is a valid cell id: 1..CELLNET_ID_MAX chars of [a-z0-9-]. Cell ids end up in paths
 * and interface names, so anything else is refused. */
int cellnet_id_valid(const char *id);

/* The host end of a cell's veth: "kv" + 12 hex digits of a hash of the cell id (14 chars), so
 * the name is stable across restarts and fits IFNAMSIZ. out needs CELLNET_IFNAME_SIZE bytes. */
void cellnet_veth_name(const char *cell_id, char *out, size_t size);

/* Netns names are "kiyot-<cell_id>", in /run/netns like `ip netns add` makes them. */
#define CELLNET_NETNS_DIR "/run/netns"
#define CELLNET_NETNS_PREFIX "kiyot-"

#endif
