/*
 * netlink.h: the little of rtnetlink a local cell needs, spoken from C (the `ip` tool costs
 * tens of milliseconds per cell, netlink a few): links (bridge, veth, up, master, delete,
 * move to a netns), IPv4 addresses and routes, and named network namespaces made like
 * `ip netns add` makes them (a bind mount of a namespace on /run/netns/<name>).
 *
 *	int nl = nl_open(-1, err);                     a socket in this thread's netns
 *	nl_veth_create(nl, "kv1234", "eth0", ns_fd, err);
 *	close(nl);
 *
 * A socket works in the netns it was opened in, whatever the thread does later. Calls are
 * synchronous (request, then ack). Not thread-safe per socket: use one socket per thread.
 * Functions that change the calling thread's netns always restore it before returning.
 */
#ifndef KIYOT_NETLINK_H
#define KIYOT_NETLINK_H

#include <stdint.h>

#include "err.h"

/* Opens an rtnetlink socket in the netns ns_fd refers to (-1: the calling thread's). Returns
 * the fd (the caller closes it) or a negative errno. */
int nl_open(int ns_fd, struct err *err);

/* The index of link name, -ENODEV if there is none. */
int nl_link_index(int nl, const char *name, struct err *err);

/* Creates a bridge and sets it up; -EEXIST if a link of that name exists. */
int nl_bridge_create(int nl, const char *name, struct err *err);

/* Creates a veth pair: host end `name` in the socket's netns (up, enslaved to master_index
 * unless that is 0), the peer `peer` (down: set it up
 * with nl_link_up) in the netns peer_ns_fd refers to (-1: same netns).
 * -EEXIST if a link of either name exists. */
int nl_veth_create(int nl, const char *name, int master_index, const char *peer, int peer_ns_fd,
		   struct err *err);

/* Sets a link up. */
int nl_link_up(int nl, int index, struct err *err);

/* Sets a link's Ethernet address (6 bytes). */
int nl_link_set_mac(int nl, int index, const uint8_t mac[6], struct err *err);

/* Reads a link's Ethernet address into mac (6 bytes); -ENODATA if it has none of that size. */
int nl_link_mac(int nl, int index, uint8_t mac[6], struct err *err);

/* Moves a link into the netns ns_fd refers to, renaming it to new_name (NULL: keep). */
int nl_link_set_netns(int nl, int index, int ns_fd, const char *new_name, struct err *err);

/* Deletes a link by name; a missing link is not an error (returns 0). Deleting either end of
 * a veth deletes both. */
int nl_link_delete(int nl, const char *name, struct err *err);

/* Adds an IPv4 address (host byte order) with its prefix; -EEXIST if it is there already. */
int nl_addr_add(int nl, int index, uint32_t ip, unsigned prefix, struct err *err);

/* Adds the default route via gw (host byte order) out of link index; -EEXIST if a default
 * route exists. */
int nl_route_add_default(int nl, int index, uint32_t gw, struct err *err);

/* Creates a named netns at path (e.g. /run/netns/kiyot-x): a fresh network namespace bind
 * mounted on an empty file, the parent directory made a shared mount like `ip netns` does.
 * Returns an O_CLOEXEC fd of the new namespace (the caller closes it). -EEXIST if path exists. */
int nl_netns_create(const char *path, struct err *err);

/* Names the calling thread's netns at path (bind mounted like nl_netns_create's); a path
 * that already names it is left alone. */
int nl_netns_name_self(const char *path, struct err *err);
/* Unmounts and removes a named netns; a missing one is not an error. */
int nl_netns_delete(const char *path, struct err *err);

/* Whether path is a mounted network namespace (1), or not (0). */
int nl_netns_is_mounted(const char *path);

#endif
