/*
 * cellnat.h: cells.masquerade, forwarding and NAT on the node for local cells (cellnat.c).
 */
#ifndef KIYOT_CELLNAT_H
#define KIYOT_CELLNAT_H

#include <stddef.h>

#include "err.h"

/* Turns on IPv4 forwarding and adds the cells' MASQUERADE and FORWARD rules (idempotent). */
int cellnat_setup(const char *bridge, const char *cidr, struct err *err);

/* One hostPort of a pod: host_port on the node's addresses (or host_ip) to the cell's
 * container_port. protocol: "tcp", "udp" or "sctp". */
struct cellnat_port {
	const char *protocol;
	int host_port, container_port;
	const char *host_ip; /* NULL, "" or "0.0.0.0": every address of the node */
};

/*
 * Makes the cell's hostPorts reachable on the node (DNAT in the nat chain KIYOT-HOSTPORTS,
 * jumped to from PREROUTING and OUTPUT for local destinations, so also from the node itself and
 * on 127.0.0.1 (route_localnet on the bridge, guarded, and a MASQUERADE for loopback sources, as
 * CNI's portmap does) and from cells of cidr, the cell itself included (hairpin MASQUERADE).
 * Every rule carries the comment "kiyot-hostport <cell_id> <owner>"; rules already there are
 * not added again, so this is idempotent. A port another cell holds (on an address this one
 * asks for) is -EADDRINUSE naming its owner. Calls of one process are serialised.
 */
int cellnat_hostports_set(const char *bridge, const char *cidr, const char *cell_id,
			  const char *owner, const char *cell_ip, const struct cellnat_port *ports,
			  size_t n, struct err *err);
/* Removes the cell's hostPort rules (none is fine). */
int cellnat_hostports_clear(const char *cell_id, struct err *err);
/* Removes the hostPort rules toward cells of cidr whose cell id is not in keep (cells that are
 * gone); rules toward other networks are another kiyot's. Returns how many went. */
int cellnat_hostports_prune(const char *cidr, const char *const *keep, size_t n_keep,
			    struct err *err);

/* One of kiyot's hostPort rules, as `iptables-save -t nat` prints it. */
struct cellnat_rule {
	char chain[32]; /* KIYOT-HOSTPORTS (the DNAT) or KIYOT-HOSTPORTS-SNAT (the hairpin) */
	char cell_id[64];
	char owner[256]; /* the pod, "namespace/name" */
	char protocol[8];
	int dport;
	char dst[16]; /* -d: the DNAT's host address ("" for every one), the hairpin's cell */
	char to[16];  /* the DNAT's target address */
	int to_port;
};

/* Parses one line of iptables-save: 0 and *out for a hostPort rule of kiyot's, -1 for any
 * other line. Pure, for tests. */
int cellnat_rule_parse(const char *line, struct cellnat_rule *out);

#endif
