/*
 * podns.h: the pod's shared namespaces in a cell. A small holder process, pid 1 of a new PID
 * namespace and alone in a new IPC namespace, keeps them; units that share the pod's PID or
 * IPC namespace join them through /proc/<holder>/ns/. The holder reaps the orphans of its PID
 * namespace and lives as long as the cell (it outlives an agent restart and is found again by
 * the record in the agent's state directory, pid and start time, so a reused pid is never
 * taken for it).
 *
 * Thread safety: podns_ensure is called under the supervisor's apply lock; the rest is
 * reentrant.
 */
#ifndef AGENT_PODNS_H
#define AGENT_PODNS_H

#include <stdbool.h>

#include "err.h"

struct podns {
	long pid;		  /* the holder, as this agent sees it; 0: none */
	unsigned long long start; /* its start time (clock ticks since boot) */
};

/* The holder runs as `<agent binary> podns-holder`. */
#define PODNS_HOLDER_ARG "podns-holder"

/* Finds the holder recorded in <state_dir>/podns or starts a new one (and records it) from
 * the agent's binary at self. With self NULL the holder is a fork of the caller that never
 * execs: no program to load (an exec of the agent's binary costs some 20 ms of CPU), and it
 * shares the caller's pages until either writes them; only for a caller that has no other
 * thread yet (the forked holder runs on after fork) and little memory of its own. */
int podns_ensure(const char *state_dir, const char *self, struct podns *ns, struct err *err);
/* The process's arguments as the kernel laid them out (argv[0] to the end of argv[argc-1]),
 * which a holder forked without an exec overwrites to read `<agent binary> podns-holder` in
 * ps and /proc/PID/cmdline, as an exec'd one does, and not pass for a second agent. main()
 * gives them before podns_ensure(..., NULL, ...). */
void podns_set_args(int argc, char **argv);
/* The holder's body: main() calls it for PODNS_HOLDER_ARG; it never returns. */
void __attribute__((noreturn)) podns_holder_main(void);
/* True while the holder recorded in ns runs. */
bool podns_alive(const struct podns *ns);
/* "/proc/<pid>/ns/<type>" for type "pid" or "ipc". The caller frees. */
char *podns_path(const struct podns *ns, const char *type);

#endif
