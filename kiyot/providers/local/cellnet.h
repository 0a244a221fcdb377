/*
 * cellnet.h: the pure parts of a local cell's network: the cell network's CIDR, picking a free
 * address in it, the names derived from a cell id (host veth, netns), the Ethernet address
 * derived from a cell's IP, and the ports of the node cells may reach (cells.nodePorts).
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

/* What the host end of every cell's veth is named with. */
#define CELLNET_VETH_PREFIX "kv"

/* The host end of a cell's veth: "kv" + 12 hex digits of a hash of the cell id (14 chars), so
 * the name is stable across restarts and fits IFNAMSIZ. out needs CELLNET_IFNAME_SIZE bytes. */
void cellnet_veth_name(const char *cell_id, char *out, size_t size);

/* Room for "aa:bb:cc:dd:ee:ff" and its NUL. */
#define CELLNET_MAC_SIZE 18

/* A cell's Ethernet address: 02:6b (locally administered, unicast) and its four IP bytes, so
 * that the cell's anti-spoofing rules follow from its address alone and no two cells of a
 * bridge share one. */
void cellnet_mac(uint32_t ip, uint8_t mac[6]);
/* The same as "02:6b:0a:4d:00:05" (lower case, as ebtables-save prints it). */
void cellnet_mac_str(uint32_t ip, char *out, size_t size);

/* A port of the node that cells may reach (cells.nodePorts). */
struct cellnet_port {
	int port;	  /* 1..65535 */
	char protocol[4]; /* "tcp" or "udp" */
};

/* Parses "5000", "5000/tcp" or "53/udp" (the protocol in any case; tcp by default). -EINVAL
 * with a message showing the accepted forms. */
int cellnet_parse_port(const char *s, struct cellnet_port *out, struct err *err);

/* Netns names are "kiyot-<cell_id>", in /run/netns like `ip netns add` makes them. */
#define CELLNET_NETNS_DIR "/run/netns"
#define CELLNET_NETNS_PREFIX "kiyot-"

#endif
