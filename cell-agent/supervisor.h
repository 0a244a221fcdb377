/*
 * supervisor.h: the units of a cell. Takes the whole desired pod (kiyot.cell.v1.Pod) and
 * converges to it: prepares one OCI bundle per unit (image root file system under an overlay,
 * config.json from the unit over the image config), runs init units in order before the
 * others, starts, restarts (policy Always/OnFailure/Never with back-off), stops (SIGTERM, the
 * grace period, SIGKILL) and removes units, and reports every change.
 *
 * Each unit runs under its own shim process (cell-agent shim, conmon's role) that owns the
 * OCI runtime process, writes the unit's output to the unit's log file in the CRI log format
 * and records the exit status; units therefore survive a restart of the agent, and a new
 * supervisor adopts them from the state directory.
 *
 * Thread safety: all functions may be called from any thread; callbacks run on the
 * supervisor's own thread and must not call back into the supervisor.
 */
#ifndef AGENT_SUPERVISOR_H
#define AGENT_SUPERVISOR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <stdint.h>

#include "cellagent.pb-c.h"
#include "err.h"

struct image_info;
struct image_store;
struct supervisor;

enum unit_state {
	UNIT_STATE_CREATED,
	UNIT_STATE_RUNNING,
	UNIT_STATE_EXITED,
	UNIT_STATE_UNKNOWN
};

/* A unit's status. Strings are owned by the struct (unit_status_release). */
struct unit_status {
	char *id;
	enum unit_state state;
	int64_t created_at_ns, started_at_ns, finished_at_ns;
	int32_t exit_code;
	char *reason;  /* "Completed", "Error", "OOMKilled", "StartError", ... or "" */
	char *message; /* detail for people, e.g. the runtime's error text; "" when none */
	uint32_t restart_count;
	char *image_ref;
	char *image_id;
	int32_t pid;
	char *termination_message; /* the unit's termination message file, once exited; "" */
	int error_code; /* with reason CreateContainerError: the failure's errno; else 0 */
};

struct supervisor_callbacks {
	/* A unit's status changed (created, started, exited, restarted, removed: state UNKNOWN). */
	void (*status)(void *ctx, const struct unit_status *st);
	/* New bytes in a unit's log: whole CRI log lines, starting at byte `offset` of the log. */
	void (*log)(void *ctx, const char *unit_id, uint64_t offset, const char *data, size_t len);
	void *ctx;
};

struct supervisor_config {
	const char *state_dir; /* units/<id>/{bundle,log,exit,...} live under it */
	/* OCI runtime binary: "crun" (searched in PATH) or its path; the agent's unit tests give
	 * it a stand-in that runs units on the host (test/unit/fake_runtime.h) */
	const char *runtime;
	const char *shim;	   /* path of the cell-agent binary, run as "<shim> shim ..." */
	const char *cgroup_parent; /* cgroup v1 path of the cell (e.g. "/kiyot/<cell>"), may be "" */
	int64_t backoff_base_ms;   /* restart back-off start (10 s by default), doubling to max */
	int64_t backoff_max_ms;	   /* 300 s by default */
	struct image_store *images;
	struct supervisor_callbacks cb;
	/* Optional: resolves an image reference to a pulled image (tests pass a fixed root file
	 * system). NULL: image_pull() on images with the unit's credentials. *out belongs to the
	 * supervisor (image_info_free). */
	int (*resolve_image)(void *ctx, const char *ref, struct image_info **out, struct err *err);
	void *resolve_ctx;
	/* Optional: the pod's IP for /etc/hosts; NULL or "" leaves the hostname out of it. */
	const char *pod_ip;
	/* Optional: the network namespace host-network units join (a path); NULL or "": the
	 * agent's own is the host's. */
	const char *host_netns;
	/* Optional: the node's image store (image_read), for units whose spec names the image
	 * id: their image is taken from there when present, else pulled. NULL or "": none. */
	const char *node_images;
	/* The host's mount namespace (an fd, hostmount.h) propagating mounts are cloned from;
	 * -1: the agent's own. Borrowed. */
	int host_mnt_ns;
};

/* Creates the supervisor and adopts units left by a previous agent in state_dir. */
int supervisor_new(const struct supervisor_config *cfg, struct supervisor **out, struct err *err);
/* Stops watching; units keep running (they belong to their shims). */
void supervisor_free(struct supervisor *s);

/* Replaces the desired pod and waits up to timeout_ms until every unit reached what it asks
 * (CREATED: bundle ready; RUNNING: started, or already exited; STOPPED: exited) or failed.
 * Units absent from pod are stopped and removed. Fills the statuses of the pod's units. */
int supervisor_apply(struct supervisor *s, const Kiyot__Cell__V1__Pod *pod, int64_t timeout_ms,
		     struct unit_status **out, size_t *n, struct err *err);
/* Current statuses of all units. */
int supervisor_list(struct supervisor *s, struct unit_status **out, size_t *n, struct err *err);
/*
 * Reads a unit's log from *offset, up to cap bytes of whole lines. A unit's log keeps its
 * newest UNIT_LOG_KEEP bytes or more: an offset before what is kept moves forward to the
 * oldest line kept (*offset says where the bytes start). -ENOENT for unknown units.
 */
int supervisor_log_read(struct supervisor *s, const char *unit_id, uint64_t *offset, char *buf,
			size_t cap, size_t *got, struct err *err);

/* What a cell keeps of each unit's log; the slack above it is freed at once. */
#define UNIT_LOG_KEEP (32ull << 20)
#define UNIT_LOG_SLACK (16ull << 20)
/* Runs cmd in a running unit (the runtime's exec), with a timeout; output capped at 16 MiB. */
int supervisor_exec_sync(struct supervisor *s, const char *unit_id, char *const *cmd,
			 int64_t timeout_s, char **out, size_t *out_len, char **errout,
			 size_t *err_len, int *exit_code, struct err *err);

/* The host's network namespace (a path) when it is not the agent's own (a local cell's
 * node); NULL otherwise. The caller frees it. */
char *supervisor_host_netns(struct supervisor *s);

/* A command started in a running unit with supervisor_exec_start, its stdio open. */
struct exec_session {
	pid_t runtime_pid; /* the runtime's exec, whose exit status is the command's */
	int stdin_fd;	   /* -1 when stdin is not read; with a terminal, its master */
	int stdout_fd;	   /* with a terminal, its master (stdout and stderr both) */
	int stderr_fd;	   /* -1 with a terminal */
	bool tty;
	/* the runtime's files in the unit directory */
	char *proc_path, *pid_path, *console_path, *log_path;
};

/* Starts cmd in a running unit as its own process (exec_process_file), with pipes or, for tty,
 * a terminal whose master the runtime hands back, width x height from its start when both are
 * given (the runtime sizes it before the command runs, so a command that reads its size at
 * once reads it). The caller reads and writes the fds, then calls exec_session_wait and
 * exec_session_close. */
int supervisor_exec_start(struct supervisor *s, const char *unit_id, char *const *cmd, bool tty,
			  bool with_stdin, unsigned width, unsigned height, struct exec_session *x,
			  struct err *err);
/* Sets the terminal's size (a session with a terminal); 0 or -errno. */
int exec_session_resize(struct exec_session *x, unsigned width, unsigned height);
/* Kills the command and what it started (SIGKILL), e.g. when the caller went away. */
void exec_session_kill(struct exec_session *x);
/* Waits for the runtime: the command's exit code (128 + n for signal n; -1 if unknown). */
int exec_session_wait(struct exec_session *x);
/* Closes what is still open and removes the runtime's files. */
void exec_session_close(struct exec_session *x);

/* A caller attached to a running unit's own stdio (kubectl attach), through its shim. */
struct attach_conn;
/* Attaches to the unit: its output from now on, and when want_stdin its input (the unit must
 * have been created with stdin: -EINVAL otherwise; a stdin_once unit whose stdin was closed
 * attaches without input: c->stdin_open says). -ENOENT for unknown units, -EBUSY for units
 * that are not running. Use and close c with attach_conn_* (shim_attach.h). */
int supervisor_attach(struct supervisor *s, const char *unit_id, bool want_stdin,
		      struct attach_conn *c, struct err *err);

void unit_status_release(struct unit_status *st);
void unit_status_array_free(struct unit_status *a, size_t n);

/*
 * The shim: "<shim> shim --unit-dir DIR --runtime RUNTIME --id ID [--cgroup PATH] [--tty]
 * [--stdin] [--stdin-once]". It runs "RUNTIME --log DIR/runtime.log run --bundle DIR/bundle
 * --pid-file DIR/container.pid ID" with stdin on /dev/null, or on a pipe it holds open for the
 * whole run (--stdin), or with a terminal whose master the runtime hands it (--tty, through
 * DIR/console.sock); writes the output to DIR/log in the CRI log format, serves attaches on
 * DIR/attach.sock (shim_attach.h), writes its pid, the runtime's pid and its own start time
 * to DIR/pid, and on exit DIR/exit.json (exit_code, started_ns, finished_ns, reason, message;
 * atomically), then runs "RUNTIME delete -f ID". PATH is the unit's cgroup (v1, relative to
 * the memory hierarchy) for OOM detection.
 */

/* How a unit's shim sets up its stdio (the unit's tty, stdin and stdin_once). */
struct shim_stdio {
	bool tty, stdin, stdin_once;
};

/* Entry point of "cell-agent shim ...": argv[0] is the word "shim". Returns the exit code. */
int shim_main(int argc, char **argv);

/* Starts a shim for the unit in unit_dir, detached (setsid, double fork) so it outlives the
 * agent. shim is the agent binary; root the runtime's state directory; cgroup and io may be
 * NULL (no stdin, no terminal). */
int shim_spawn(const char *shim, const char *unit_dir, const char *runtime, const char *root,
	       const char *id, const char *cgroup, const struct shim_stdio *io, struct err *err);

/* 1 when the shim recorded in <unit_dir>/pid is still running (same pid, same start time),
 * 0 when it is gone, -1 when it has not written its pid file yet. */
int shim_alive(const char *unit_dir);

/* Runs argv (argv[0] searched in PATH) with stdin on /dev/null, collecting stdout and stderr
 * up to cap bytes each (more is dropped), killing it after timeout_ms (then -ETIMEDOUT).
 * *out and *errout (may be NULL to discard) are NUL-terminated and belong to the caller.
 * *status is the exit code, or 128 + signal. Runs in a private cgroup-fixed mount namespace
 * when the OCI runtime needs it (see supervisor_private_cgroup_ns). */
int shim_run_capture(char *const *argv, int64_t timeout_ms, size_t cap, char **out, size_t *out_len,
		     char **errout, size_t *err_len, int *status, struct err *err);

/* Debian's crun 1.8 refuses the cgroup v1 hybrid layout while /sys/fs/cgroup/unified is
 * mounted: when it is, enter a mount namespace of its own and unmount it there. / is made
 * rslave in it, so what the host mounts later under its shared mounts (the kubelet's rshared
 * root directory: subPath binds, volumes) still appears in it, while the host's mounts do not
 * change. Call once at start-up in the agent; the shim and the runtime commands do it
 * themselves when needed. */
int supervisor_private_cgroup_ns(struct err *err);

#endif
