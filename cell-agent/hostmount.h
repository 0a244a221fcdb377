/*
 * hostmount.h: the host's mounts a unit shares with propagation. The agent may live in a mount
 * namespace of its own (made at start; see supervisor_private_cgroup_ns), a slave of the
 * host's: a host path mounted on the host after that reaches it only under a mount the host
 * shares, and a mount made in it never reaches the host. For a unit mount that asks for
 * propagation (HOST_TO_CONTAINER, BIDIRECTIONAL), the agent clones the host path's mount tree
 * from the host's mount namespace (open_tree in a child that joined it) and attaches the
 * clone in its unit directory: a clone of a shared mount is a peer of it, so the host's later
 * mounts under it reach the unit (rslave) and, for rshared, the unit's reach the host.
 *
 * Thread safety: reentrant; hostmount_stage forks (the child makes only system calls).
 */
#ifndef AGENT_HOSTMOUNT_H
#define AGENT_HOSTMOUNT_H

#include "err.h"

/* Opens the calling process's mount namespace, to be kept as the host's before the agent
 * leaves it; -1 with err set when it cannot. */
int hostmount_open_ns(struct err *err);

/* Attaches a clone of host_path's mount tree in host_ns (an fd of hostmount_open_ns, or -1:
 * the caller's own namespace) at target (created, a directory or file like the source),
 * unless target already holds a mount. */
int hostmount_stage(int host_ns, const char *host_path, const char *target, struct err *err);

/* Detaches every mount at or under dir (lazily); missing dir is not an error. */
int hostmount_release(const char *dir, struct err *err);

#endif
