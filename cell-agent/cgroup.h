/*
 * cgroup.h: where the files of a cell's cgroups are. A local cell runs on the node's cgroup
 * v1 hierarchies (one a controller: /sys/fs/cgroup/memory/kiyot/<cell>/...); an EC2 cell
 * boots Debian's default, the unified cgroup v2 hierarchy (/sys/fs/cgroup/kiyot/...), where
 * the agent makes the parent of its units itself (cgroup_units_parent).
 */
#ifndef AGENT_CGROUP_H
#define AGENT_CGROUP_H

#include <stdbool.h>

#include "err.h"

/* Whether the cgroup file system is the unified (v2) hierarchy. */
bool cgroup_v2(void);

/* The path of file in cgroup cg ("/kiyot/abc"; "" is the root) under controller ctrl's
 * hierarchy (v1; ignored on v2). Free it. */
char *cgroup_file(const char *ctrl, const char *cg, const char *file);

/* 0 when units may have cgroup v2 settings (linux.resources.unified): the hierarchy is v2;
 * else -EINVAL saying why not and what to do. */
int cgroup_unified_ok(struct err *err);

/* Writes value into file of v2 cgroup cg ("/kiyot/abc/unit"): 0, or -errno naming the file
 * (the kernel's EINVAL for a value it does not take, ENOENT for a file it does not have). */
int cgroup_write(const char *cg, const char *file, const char *value, struct err *err);

/* Whether cgroup cg exists (v1: under the memory controller). */
bool cgroup_exists(const char *cg);

/* The cgroup the units of this cell go under, made ready: on v1 the agent's own memory
 * cgroup (the local provider's cell cgroup; "" when none); on v2 "/kiyot", made with the cpu,
 * memory and pids controllers given to its children. Free it. */
char *cgroup_units_parent(struct err *err);

/* Tests: cgroups are under root, a v2 hierarchy or not; NULL: /sys/fs/cgroup, as it is. */
void cgroup_set_root(const char *root, bool v2);

#endif
