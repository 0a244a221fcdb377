/*
 * cellnat.h: cells.masquerade, forwarding and NAT on the node for local cells (cellnat.c).
 */
#ifndef KIYOT_CELLNAT_H
#define KIYOT_CELLNAT_H

#include "err.h"

/* Turns on IPv4 forwarding and adds the cells' MASQUERADE and FORWARD rules (idempotent). */
int cellnat_setup(const char *bridge, const char *cidr, struct err *err);

/* One hostPort of a pod: host_port on the node's addresses (or host_ip) to the cell's
 * container_port. protocol: "tcp", "udp" or "sctp". */
struct cellnat_port {
	const char *protocol;
	int host_port, container_port;
	const char *host_ip; /* NULL or "": every address of the node */
};

/*
 * Makes the cell's hostPorts reachable on the node (DNAT in the nat chain KIYOT-HOSTPORTS,
 * jumped to from PREROUTING and OUTPUT for local destinations, so also from the node itself and
 * on 127.0.0.1 (route_localnet on the bridge and a MASQUERADE for loopback sources, as CNI's
 * portmap does) and from other cells (hairpin). Every rule carries the comment
 * "kiyot-hostport <cell_id> <owner>"; the cell's earlier rules go first, so this is idempotent.
 * A port another cell holds is -EADDRINUSE naming its owner.
 */
int cellnat_hostports_set(const char *bridge, const char *cell_id, const char *owner,
			  const char *cell_ip, const struct cellnat_port *ports, size_t n,
			  struct err *err);
/* Removes the cell's hostPort rules (none is fine). */
int cellnat_hostports_clear(const char *cell_id, struct err *err);

#endif
