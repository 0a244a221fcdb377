/*
 * cgroup.h: cgroup v1 helpers for local cells: one directory per controller
 * (/sys/fs/cgroup/<controller>/<rel>), limits written as files, processes joined through
 * cgroup.procs, and a teardown that kills everything inside and removes the subtree.
 *
 * `rel` is a path relative to the controller's mount, e.g. "kiyot/<cell_id>". Nothing here
 * keeps state; every call is thread-safe.
 */
#ifndef KIYOT_CGROUP_H
#define KIYOT_CGROUP_H

#include <sys/types.h>

#include "err.h"

#define CGROUP_V1_ROOT "/sys/fs/cgroup"

/* A newly allocated "/sys/fs/cgroup/<ctrl>/<rel>[/<file>]" (file may be NULL). */
char *cgroup_path(const char *ctrl, const char *rel, const char *file);

/* Whether controller ctrl has a v1 hierarchy mounted (1) or not (0). */
int cgroup_controller_mounted(const char *ctrl);

/* Creates the cgroup and its parents. -ENOENT when the controller is not mounted. */
int cgroup_create(const char *ctrl, const char *rel, struct err *err);

/* Writes value to one control file, e.g. ("memory", "kiyot/c1", "memory.limit_in_bytes",
 * "536870912"). The kernel's errno is returned when it refuses the value. */
int cgroup_write(const char *ctrl, const char *rel, const char *file, const char *value,
		 struct err *err);

/* Reads a control file (at most 64 KiB) into *out, which the caller frees. */
int cgroup_read(const char *ctrl, const char *rel, const char *file, char **out, struct err *err);

/* Sends SIGKILL to every process in the cgroup and its descendants, again and again until all
 * are empty or timeout_ms has passed (-EBUSY then); each round thaws rel's freezer tree first
 * (cgroup_thaw_tree). A missing cgroup is not an error. */
int cgroup_kill_tree(const char *ctrl, const char *rel, int timeout_ms, struct err *err);
/* Thaws every cgroup of the freezer hierarchy at rel and below: a process frozen there (an OCI
 * runtime killed while it froze a container to kill it) cannot die of SIGKILL until then. */
int cgroup_thaw_tree(const char *rel, struct err *err);

/* Removes the cgroup and its descendants, deepest first. A missing cgroup is not an error;
 * -EBUSY when one still holds processes. */
int cgroup_remove_tree(const char *ctrl, const char *rel, struct err *err);

#endif
