/*
 * cellspawn.h: starting a daemon inside a local cell, and checking on it later.
 *
 * The process is started through a short-lived middle child into its own session (so it
 * outlives kiyot and is nobody's child to reap), joins the cell's cgroups and network namespace
 * with setns (never `ip netns exec`, which remounts /sys), gets /dev/null as stdin and a log
 * file as stdout and stderr, and no other descriptor. Both children are clone(CLONE_VM |
 * CLONE_VFORK) ones, as posix_spawn's: no copy of kiyot's memory is made. Safe to call from any
 * thread: the children only make async-signal-safe calls, on stacks of their own, with every
 * signal blocked until the last one resets them.
 */
#ifndef KIYOT_CELLSPAWN_H
#define KIYOT_CELLSPAWN_H

#include <stddef.h>
#include <sys/types.h>

#include "err.h"

struct cellspawn {
	char *const *argv;	   /* argv[0]: the program's absolute path */
	char *const *envp;	   /* the whole environment of the new process */
	char *const *cgroup_procs; /* cgroup.procs files to join (NULL entries are skipped) */
	size_t ncgroups;
	int ns_fd;	      /* network namespace to join; -1 to stay in kiyot's */
	const char *log_path; /* stdout and stderr are appended here (created 0600) */
};

/* Starts the process and returns its pid once exec has succeeded. A failure before exec
 * (joining a cgroup, the netns, exec itself) comes back as the errno of that step. */
pid_t cellspawn_start(const struct cellspawn *s, struct err *err);

#endif
