/*
 * cellspawn.h: starting a daemon inside a local cell, and checking on it later.
 *
 * The process is double-forked into its own session (so it outlives kiyot and is nobody's
 * child to reap), joins the cell's cgroups and network namespace with setns (never
 * `ip netns exec`, which remounts /sys), gets /dev/null as stdin and a log file as stdout and
 * stderr, and no other descriptor. Safe to call from any thread: the forked child only makes
 * async-signal-safe calls.
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
