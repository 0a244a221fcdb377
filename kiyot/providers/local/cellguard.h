/*
 * cellguard.h: what a local cell may not do on the node's network (cellguard.c): reach the
 * node's own services, and send as another cell.
 *
 * The node's services: everything a cell sends to an address of the node (the bridge's, eth0's,
 * any other) passes kiyot's chain first, which lets through only what a pod needs:
 *
 *	-t filter INPUT -i BRIDGE -j KIYOT-NODE-BRIDGE        (inserted first)
 *	KIYOT-NODE-BRIDGE -m conntrack --ctstate RELATED,ESTABLISHED,DNAT -j RETURN
 *	KIYOT-NODE-BRIDGE ! -d 127.0.0.0/8 -p tcp|udp --dport PORT -j RETURN   (cells.nodePorts)
 *	KIYOT-NODE-BRIDGE -j DROP
 *
 * Answers to the node's own connections (kiyot's calls to the agents, exec, port-forward), the
 * node's ICMP errors, and connections the node translated (hostPorts, Services of the node's
 * kube-proxy whose endpoint is the node) pass, as do the ports the operator lists; the kubelet,
 * kiyot's streaming server, sshd and anything else listening on the node do not answer a cell.
 * What passes goes on through the node's own INPUT rules (RETURN, not ACCEPT): kiyot takes away,
 * it never opens what the node's firewall closes.
 *
 * Spoofing: every frame a cell sends enters the bridge through the host end of its veth, and
 * the bridge's nat PREROUTING hook (ebtables, before the bridge learns the sender or hands
 * anything to IP) keeps only the cell's own: IPv4 from its address and Ethernet address, ARP
 * that tells the truth about both, nothing else (no IPv6, no other protocols):
 *
 *	-t nat PREROUTING -i kv+ -j KIYOT-CELLS-A.B.C.D-P       (the cells' network; first)
 *	KIYOT-CELLS-A.B.C.D-P -i VETH -j KIYOT-CELL-VETH        (one per cell)
 *	KIYOT-CELL-VETH -p IPv4 -s MAC --ip-src IP -j RETURN
 *	KIYOT-CELL-VETH -p ARP -s MAC --arp-mac-src MAC --arp-ip-src IP -j RETURN
 *	KIYOT-CELL-VETH -j DROP
 *
 * MAC is the cell's, derived from its IP (cellnet_mac). At start the chains are written whole
 * from the cells a provider holds, read against what the node has (ebtables-save, then one
 * ebtables-restore transaction), so writing them again is harmless, a missing one comes back,
 * and a cell's chain goes when it is no longer among them. A cell launched or gone afterwards
 * changes only its own chain and the network's (one ebtables-restore, nothing read: a launch
 * costs one process, not two, and no rewrite of every cell's chain); when that finds the
 * node's rules not as written (a firewall reload took them) it fails whole, and everything is
 * written again as at start. With no cells left the network's chain stays, empty, and its
 * jump with it, until kiyot starts again with none.
 * Chains of another network (another kiyot, or the EC2 test endpoint, on the same bridge) are
 * left alone. Rules stay when kiyot stops: cells outlive it.
 */
#ifndef KIYOT_CELLGUARD_H
#define KIYOT_CELLGUARD_H

#include <stddef.h>
#include <stdint.h>

#include "cellnet.h"
#include "err.h"

/* The node guard's chain for bridge as iptables-restore reads it (the caller frees). Pure. */
char *cellguard_node_rules(const char *bridge, const struct cellnet_port *ports, size_t n);

/* Writes the node guard's chain (replacing what it held, at once) and the jump to it from
 * INPUT (idempotent). -ENOENT saying what to install when iptables is missing. */
int cellguard_node_setup(const char *bridge, const struct cellnet_port *ports, size_t n,
			 struct err *err);

/* One cell on the bridge: the host end of its veth and its address. */
struct cellguard_cell {
	char veth[CELLNET_IFNAME_SIZE];
	uint32_t ip;
};

/*
 * The ebtables-restore text that leaves the anti-spoofing rules of cidr's cells exactly those
 * of cells[], given what `ebtables-save -t nat` printed (saved): the network's chain and each
 * cell's written whole, the chains of cells no longer there removed (unless another network's
 * chain jumps to them), the jump from PREROUTING made once. With no cells, everything of the
 * network's goes. NULL when there is nothing to change. Pure; the caller frees.
 */
char *cellguard_spoof_rules(const struct cellnet_cidr *cidr, const struct cellguard_cell *cells,
			    size_t n, const char *saved);

/* Reads the node's rules and applies cellguard_spoof_rules. Calls must not interleave for one
 * network (the caller serialises them). */
int cellguard_spoof_sync(const struct cellnet_cidr *cidr, const struct cellguard_cell *cells,
			 size_t n, struct err *err);

/*
 * The ebtables-restore text of one cell come (add) or gone (gone: the host end of its veth),
 * written without reading the node's rules: the network's chain written whole with the jumps
 * to cells[] (the cells whose chains exist and stay; add and gone are left out of them) and
 * add's, add's chain written whole, gone's emptied and removed, and PREROUTING's jump to the
 * network made first again. It needs what an earlier cellguard_spoof_sync made: the network's
 * jump from PREROUTING, and the chain of each of cells[] (and of gone); when one is missing
 * the restore fails and changes nothing, and the caller writes everything with
 * cellguard_spoof_sync instead. Either may be NULL. Pure; the caller frees.
 */
char *cellguard_spoof_update_rules(const struct cellnet_cidr *cidr,
				   const struct cellguard_cell *cells, size_t n,
				   const struct cellguard_cell *add, const char *gone);

/* Applies cellguard_spoof_update_rules in one ebtables-restore (one process, where
 * cellguard_spoof_sync runs two and rewrites every cell's chain). Same serialisation. */
int cellguard_spoof_update(const struct cellnet_cidr *cidr, const struct cellguard_cell *cells,
			   size_t n, const struct cellguard_cell *add, const char *gone,
			   struct err *err);

#endif
