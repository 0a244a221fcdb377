/*
 * imdsguard.h: keeps a cell's units away from the instance metadata service.
 *
 * On EC2 the units share the instance's network namespace (a cell is the pod's machine), so
 * without a guard any container could ask 169.254.169.254 for the instance role's
 * credentials and the cell's bootstrap document. The agent reads the metadata service itself
 * (its bootstrap, spot interruption notices); its units must not. The guard is a cgroup BPF
 * program on connect(2), attached to the units' parent cgroup (cgroup v2): a unit's TCP or UDP
 * connect to 169.254.169.254, fd00:ec2::254 (the IPv6 endpoint) or ::ffff:169.254.169.254
 * fails with EPERM, whatever its port. Everything else, Amazon's DNS (169.254.169.253) and time
 * (169.254.169.123) servers included, is let through. The kernel keeps the programs attached
 * as long as the cgroup lives, after the agent exits; attaching again (an agent restarted)
 * replaces them rather than adding a second copy.
 *
 *	if (imdsguard_attach("/sys/fs/cgroup/kiyot", &err) < 0)
 *		die("%s", err.msg);
 */
#ifndef AGENT_IMDSGUARD_H
#define AGENT_IMDSGUARD_H

#include "err.h"

/* Attaches the guard to the cgroup v2 directory dir (its descendants included). */
int imdsguard_attach(const char *dir, struct err *err);

#endif
