/*
 * supervisor_internal.h: what the supervisor's files share (supervisor.c, supervisor_loop.c,
 * supervisor_state.c, supervisor_exec.c); not for other modules.
 *
 * Locking: functions marked "mu held" must be called with supervisor.mu locked.
 */
#ifndef AGENT_SUPERVISOR_INTERNAL_H
#define AGENT_SUPERVISOR_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cellagent.pb-c.h"
#include "err.h"
#include "podns.h"
#include "supervisor.h"

/* Largest status.json or exit.json read back. */
#define STATUS_FILE_MAX (256 * 1024)
/* Under a unit's directory: the host mounts it shares with propagation (hostmount.h). */
#define UNIT_PROPAGATED_DIR "propagated"

/* One unit and everything the supervisor knows of it. Guarded by supervisor.mu. */
struct unit {
	struct unit *next;
	char *id, *dir;
	Kiyot__Cell__V1__Unit *spec; /* deep copy; NULL when adopted without a pod */
	struct unit_status st;
	char *image_rootfs; /* overlay lower directory */
	struct podns podns; /* the pod namespaces its bundle joins (pid 0: none) */
	char *prep_error;   /* why the bundle could not be made */
	bool prepared, removing, exit_pending;
	bool starting; /* shim spawned: RUNNING once the container has a pid */
	bool resize;   /* new CPU or memory limits for the running container (runtime update) */
	int wd;
	int kill_stage; /* 0 none, 1 TERM sent, 2 KILL sent */
	int64_t stop_deadline, next_kill, restart_at, spawn_mono;
	uint32_t backoff_n;
	uint64_t log_sent;
	uint64_t log_start; /* bytes of the log before it are freed (a hole): see unit_log_trim */
};

struct supervisor {
	struct supervisor_config cfg;
	char *state_dir, *runtime, *shim, *cgroup_parent, *pod_ip, *etc_dir, *volumes_dir;
	/* the OCI runtime's state (--root): the cell's own, so it goes with the cell */
	char *runtime_root;
	char *host_netns;  /* "" when the agent's network namespace is the host's */
	char *node_images; /* the node's image store, "" when the cell has none */
	int host_mnt_ns;   /* hostmount.h; -1: the agent's own */
	pthread_mutex_t mu, apply_mu;
	pthread_cond_t cond;
	struct unit *units;
	/* removed units whose files the watcher thread deletes outside mu (unit_remove): those
	 * waiting, and those it deletes now */
	struct unit *gone, *deleting;
	Kiyot__Cell__V1__Pod *pod;
	struct unit_status *ev; /* status events waiting for delivery */
	size_t nev, cap_ev;
	pthread_t thread;
	struct podns podns; /* the pod's PID and IPC namespaces; under apply_mu */
	int ino, wake[2];
	bool quit;
};

/* supervisor_exec.c */

/* The exit status of an exec whose runtime logged to log_path: 127 when the runtime could not
 * find the command, 126 when it could not run it (as other runtimes report), else status. */
int exec_status_of(const char *log_path, int status);

/* Writes to path the process an exec runs: the unit's own (user, groups, capabilities,
 * no_new_privs, env, cwd, rlimits, as its config.json has them) with cmd as its arguments and
 * a terminal when tty, of width x height columns and rows from its start when both are given
 * (the process's consoleSize). The runtime applies the container's seccomp filter and
 * namespaces. */
int exec_process_file(const char *unit_dir, char *const *cmd, bool tty, unsigned width,
		      unsigned height, const char *path, struct err *err);
/* Kills the process recorded in pid_path by the runtime and its process group, and waits a
 * bounded time until they are gone. */
void exec_kill_leftover(const char *pid_path);

/* supervisor.c: unit records and helpers */

/* Deep copy of a status into dst (released with unit_status_release). */
void unit_status_copy(struct unit_status *dst, const struct unit_status *src);
/* Replaces the heap string *dst with a copy of v ("" for NULL). */
void unit_set_str(char **dst, const char *v);
/* True for ids safe as directory names: 1-128 of [A-Za-z0-9_.-], not "." or "..". */
bool unit_id_valid(const char *id);
/* Deep copy of a unit spec; the caller frees it with kiyot__cell__v1__unit__free_unpacked. */
Kiyot__Cell__V1__Unit *unit_spec_copy(const Kiyot__Cell__V1__Unit *u);
/* Persists u and queues a status event for the watcher thread. mu held. */
void unit_changed(struct supervisor *s, struct unit *u);
/* The unit with that id, or NULL. mu held. */
struct unit *unit_find(struct supervisor *s, const char *id);
/* Creates the record and directory of a unit, watches it and appends it to s->units; NULL
 * with err set when the directory cannot be made. mu held. */
struct unit *unit_add(struct supervisor *s, const char *id, struct err *err);
/* Frees a unit record (not its directory); the caller unlinks it from s->units. */
void unit_free(struct unit *u);
/* Copies the directory of a known unit into *dir (the caller frees) and says whether it runs;
 * -ENOENT for unknown ids. Takes mu. */
int unit_dir_of(struct supervisor *s, const char *id, char **dir, bool *running, struct err *err);
/* Reads whole lines of the log at path from offset into buf (at most cap bytes); returns the
 * bytes put in buf, cap when a single line fills it, 0 when there is nothing new. */
size_t unit_log_read_lines(const char *path, uint64_t offset, char *buf, size_t cap);
/* Frees the oldest part of a unit's log when it holds more than UNIT_LOG_KEEP + UNIT_LOG_SLACK
 * bytes. Needs mu. */
void unit_log_trim(struct unit *u);
int unit_runtime_update(struct supervisor *s, const char *id, const char *mem, const char *quota,
			const char *period, struct err *err);

/* supervisor_loop.c: the watcher thread */

/* The watcher thread's body; arg is the supervisor. Returns when s->quit is set. */
void *supervisor_watch_thread(void *arg);
/* Schedules a restart with back-off if the pod's restart policy asks for one. mu held. */
void unit_schedule_restart(struct supervisor *s, struct unit *u);
/* True when an init unit ahead of u failed for good (no restart coming). mu held. */
bool unit_init_failed(struct supervisor *s, struct unit *u);

/* supervisor_state.c: persistence and adoption */

/* Writes the packed desired pod to state_dir/pod.pb. */
int supervisor_save_pod(struct supervisor *s, const uint8_t *packed, size_t len, struct err *err);
/* Writes u's status.json (atomically); failures are logged. mu held. */
void unit_persist(struct unit *u);
/* Loads the saved pod and adopts the unit directories of state_dir/units. Called before the
 * watcher thread starts. */
int supervisor_adopt(struct supervisor *s, struct err *err);

/* supervisor_exec.c: OCI runtime commands */

/* Runs "<runtime> kill <id> <sig>"; 0 when the runtime accepted it. */
int unit_runtime_kill(struct supervisor *s, struct unit *u, const char *sig);

#endif
