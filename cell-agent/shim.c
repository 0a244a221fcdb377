/*
 * shim.c: the process that owns one run of a unit (conmon's role), and the helpers the
 * supervisor uses to start shims and run OCI runtime commands.
 */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "buf.h"
#include "clock.h"
#include "crilog.h"
#include "fsutil.h"
#include "xalloc.h"

#define UNIFIED_CGROUP "/sys/fs/cgroup/unified"
#define MOUNTINFO_MAX (4 * 1024 * 1024)
#define MESSAGE_MAX 4096
#define DRAIN_AFTER_EXIT_NS (2 * 1000000000LL)

/* True when the cgroup2 hybrid mount is visible in this mount namespace. */
static bool unified_mounted(void)
{
	_cleanup_free_ char *info = NULL;
	struct err err = ERR_INIT;

	if (fs_read_file("/proc/self/mountinfo", MOUNTINFO_MAX, &info, NULL, &err) < 0)
		return false;
	return strstr(info, " " UNIFIED_CGROUP " ") != NULL;
}

/* See the header. */
int supervisor_private_cgroup_ns(struct err *err)
{
	if (!unified_mounted())
		return 0;
	if (unshare(CLONE_NEWNS) < 0)
		return err_errno(err, "unshare mount namespace");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return err_errno(err, "make / rprivate");
	if (umount2(UNIFIED_CGROUP, MNT_DETACH) < 0)
		return err_errno(err, "unmount %s", UNIFIED_CGROUP);
	return 0;
}

/* Sends stdin to /dev/null and closes every descriptor above 2 except keep. In a forked child:
 * async-signal-safe calls only. */
static void child_stdio(int out_fd, int err_fd)
{
	int null = open("/dev/null", O_RDWR);

	if (null >= 0)
		dup2(null, 0);
	dup2(out_fd >= 0 ? out_fd : null, 1);
	dup2(err_fd >= 0 ? err_fd : null, 2);
	close_range(3, ~0U, 0);
}

/* Starts the shim detached; see the header. */
int shim_spawn(const char *shim, const char *unit_dir, const char *runtime, const char *root,
	       const char *id, const char *cgroup, struct err *err)
{
	_cleanup_free_ char *shim_log = xasprintf("%s/shim.log", unit_dir);
	char *argv[] = {
		(char *)shim, "shim",	       (char *)"--unit-dir",	   (char *)unit_dir,
		"--runtime",  (char *)runtime, "--runtime-root",	   (char *)root,
		"--id",	      (char *)id,      cgroup ? "--cgroup" : NULL, (char *)cgroup,
		NULL
	};
	int logfd = open(shim_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	int status;
	pid_t pid;

	if (logfd < 0)
		return err_errno(err, "open %s", shim_log);
	pid = fork();
	if (pid < 0) {
		close(logfd);
		return err_errno(err, "fork shim");
	}
	if (pid == 0) {
		sigset_t all;

		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		setsid();
		if (fork() != 0)
			_exit(0);
		child_stdio(-1, logfd);
		execv(shim, argv);
		_exit(127);
	}
	close(logfd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return 0;
}

/* Reads what is available on fd into b up to cap (the rest is read and dropped); false on
 * EOF or error. */
static bool drain(int fd, struct buf *b, size_t cap)
{
	char tmp[16384];
	ssize_t n = read(fd, tmp, sizeof(tmp));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0)
		return false;
	if (b && b->len < cap)
		buf_append(b, tmp, (size_t)n > cap - b->len ? cap - b->len : (size_t)n, NULL);
	return true;
}

/* The exit code of a wait status: the code, or 128 + the signal. */
static int wait_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 255;
}

/* Runs a command and collects its output; see the header. */
int shim_run_capture(char *const *argv, int64_t timeout_ms, size_t cap, char **out, size_t *out_len,
		     char **errout, size_t *err_len, int *status, struct err *err)
{
	int po[2], pe[2], wst = 0;
	struct buf bo = BUF_INIT, be = BUF_INIT;
	int64_t deadline = clock_mono_ns() + timeout_ms * 1000000LL;
	bool open_o = true, open_e = true, timed_out = false;
	pid_t pid;

	if (pipe2(po, O_CLOEXEC) < 0)
		return err_errno(err, "pipe");
	if (pipe2(pe, O_CLOEXEC) < 0) {
		close(po[0]);
		close(po[1]);
		return err_errno(err, "pipe");
	}
	pid = fork();
	if (pid == 0) {
		struct err cerr = ERR_INIT;

		child_stdio(po[1], pe[1]);
		if (supervisor_private_cgroup_ns(&cerr) < 0)
			_exit(126);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	if (pid < 0) {
		close(po[0]);
		close(pe[0]);
		return err_errno(err, "fork %s", argv[0]);
	}
	while (open_o || open_e) {
		struct pollfd p[2] = { { open_o ? po[0] : -1, POLLIN, 0 },
				       { open_e ? pe[0] : -1, POLLIN, 0 } };
		int64_t left = (deadline - clock_mono_ns()) / 1000000LL;

		if (left <= 0) {
			timed_out = true;
			kill(pid, SIGKILL);
			break;
		}
		if (poll(p, 2, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR)
			break;
		if (p[0].revents && !drain(po[0], &bo, cap))
			open_o = false;
		if (p[1].revents && !drain(pe[0], &be, cap))
			open_e = false;
	}
	close(po[0]);
	close(pe[0]);
	while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
		;
	if (timed_out) {
		buf_release(&bo);
		buf_release(&be);
		return err_set(err, ETIMEDOUT, "%s: no answer within %lld ms", argv[0],
			       (long long)timeout_ms);
	}
	*status = wait_code(wst);
	if (out)
		*out = buf_detach(&bo, out_len);
	if (errout)
		*errout = buf_detach(&be, err_len);
	buf_release(&bo);
	buf_release(&be);
	return 0;
}

/* The shim's options. */
struct shim_opts {
	const char *dir, *runtime, *root, *id, *cgroup;
};

/* Parses the shim's command line; -EINVAL with usage on errors. */
static int shim_parse(int argc, char **argv, struct shim_opts *o, struct err *err)
{
	static const struct option longopts[] = {
		{ "unit-dir", required_argument, NULL, 'd' },
		{ "runtime", required_argument, NULL, 'r' },
		{ "runtime-root", required_argument, NULL, 'R' },
		{ "id", required_argument, NULL, 'i' },
		{ "cgroup", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o->dir = optarg;
			break;
		case 'r':
			o->runtime = optarg;
			break;
		case 'R':
			o->root = optarg;
			break;
		case 'i':
			o->id = optarg;
			break;
		case 'c':
			o->cgroup = optarg;
			break;
		default:
			return err_set(err, EINVAL,
				       "usage: shim --unit-dir DIR --runtime RUNTIME "
				       "--runtime-root DIR --id ID [--cgroup PATH]");
		}
	}
	if (!o->dir || !o->runtime || !o->root || !o->id)
		return err_set(err, EINVAL,
			       "usage: shim --unit-dir DIR --runtime RUNTIME --runtime-root DIR "
			       "--id ID [--cgroup PATH]");
	return 0;
}

/* The start time of pid (clock ticks since boot), 0 if it is gone. */
static unsigned long long proc_start_time(pid_t pid)
{
	unsigned long long start = 0;
	char state;

	if (proc_stat(pid, &state, &start) < 0)
		return 0;
	return start;
}

/* The OOM kill counter ("oom_kill N") of a memory cgroup, or -1 when unreadable. */
static long long oom_kills(const char *cgroup)
{
	_cleanup_free_ char *path = xasprintf("/sys/fs/cgroup/memory%s/memory.oom_control", cgroup);
	_cleanup_free_ char *text = NULL;
	struct err err = ERR_INIT;
	char *p;

	if (fs_read_file(path, 4096, &text, NULL, &err) < 0)
		return -1;
	p = strstr(text, "oom_kill ");
	if (p)
		return strtoll(p + 9, NULL, 10);
	/* Kernels without the counter: a kill under OOM shows as under_oom or failures. */
	return strstr(text, "under_oom 1") ? 1 : 0;
}

/* Registers an eventfd for OOM notifications of the cgroup; -1 when not possible. */
static int oom_eventfd(const char *cgroup)
{
	_cleanup_free_ char *ctl = xasprintf("/sys/fs/cgroup/memory%s/memory.oom_control", cgroup);
	_cleanup_free_ char *ev = xasprintf("/sys/fs/cgroup/memory%s/cgroup.event_control", cgroup);
	_cleanup_close_ int cfd = open(ctl, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int evfd = open(ev, O_WRONLY | O_CLOEXEC);
	int efd;
	char line[64];

	if (cfd < 0 || evfd < 0)
		return -1;
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (efd < 0)
		return -1;
	snprintf(line, sizeof(line), "%d %d", efd, cfd);
	if (write(evfd, line, strlen(line)) < 0) {
		close(efd);
		return -1;
	}
	return efd;
}

/* The state of one run, as the shim observes it. */
struct shim_run {
	pid_t runtime_pid;
	int64_t spawned_ns, started_ns;
	bool started, oom;
	int oom_fd;
};

/* Starts the runtime with the output on pipes. */
static int start_runtime(const struct shim_opts *o, int po[2], int pe[2], struct shim_run *r,
			 struct err *err)
{
	_cleanup_free_ char *rtlog = xasprintf("%s/runtime.log", o->dir);
	_cleanup_free_ char *bundle = xasprintf("%s/bundle", o->dir);
	_cleanup_free_ char *pidf = xasprintf("%s/container.pid", o->dir);
	char *argv[] = {
		(char *)o->runtime, "--root", (char *)o->root, "--log", rtlog,	       "run",
		"--bundle",	    bundle,   "--pid-file",    pidf,	(char *)o->id, NULL
	};

	unlink(rtlog);
	unlink(pidf);
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)
		return err_errno(err, "pipe");
	r->spawned_ns = clock_now_ns();
	r->runtime_pid = fork();
	if (r->runtime_pid < 0)
		return err_errno(err, "fork %s", o->runtime);
	if (r->runtime_pid == 0) {
		child_stdio(po[1], pe[1]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	return 0;
}

/* Writes DIR/pid: the shim's pid, the runtime's pid and the shim's start time. */
static void write_pid_file(const struct shim_opts *o, pid_t runtime_pid)
{
	_cleanup_free_ char *path = xasprintf("%s/pid", o->dir);
	_cleanup_free_ char *text = xasprintf("%d %d %llu\n", (int)getpid(), (int)runtime_pid,
					      proc_start_time(getpid()));
	struct err err = ERR_INIT;

	if (fs_write_file(path, text, strlen(text), 0644, &err) < 0)
		fprintf(stderr, "shim %s: %s\n", o->id, err.msg);
}

/* Notices the container's start (its pid file) and OOM events. */
static void watch_container(const struct shim_opts *o, struct shim_run *r)
{
	if (!r->started) {
		_cleanup_free_ char *pidf = xasprintf("%s/container.pid", o->dir);

		if (fs_exists(pidf)) {
			r->started = true;
			r->started_ns = clock_now_ns();
			if (o->cgroup)
				r->oom_fd = oom_eventfd(o->cgroup);
		}
	}
	/* read the counter only without an OOM eventfd (and once at the end, by the caller) */
	if (o->cgroup && r->started && !r->oom && r->oom_fd < 0 && oom_kills(o->cgroup) > 0)
		r->oom = true;
}

/* Copies the output of the runtime into the CRI log until it exits and the pipes close. */
static int pump(const struct shim_opts *o, int po, int pe, struct crilog_writer *w,
		struct shim_run *r, int *wstatus, struct err *err)
{
	bool open_o = true, open_e = true, exited = false;
	int64_t exited_at = 0;
	char tmp[16384];

	for (;;) {
		struct pollfd p[3] = { { open_o ? po : -1, POLLIN, 0 },
				       { open_e ? pe : -1, POLLIN, 0 },
				       { r->oom_fd, POLLIN, 0 } };
		int fds[2] = { po, pe };

		if (poll(p, 3, 100) < 0 && errno != EINTR)
			return err_errno(err, "poll");
		if (p[2].revents) {
			uint64_t v;

			if (read(r->oom_fd, &v, sizeof(v)) > 0 && oom_kills(o->cgroup) >= 0)
				r->oom = true;
		}
		for (int i = 0; i < 2; i++) {
			ssize_t n;

			if (!p[i].revents)
				continue;
			n = read(fds[i], tmp, sizeof(tmp));
			if (n < 0 && errno == EINTR)
				continue;
			if (n > 0) {
				crilog_write(w, i ? CRILOG_STDERR : CRILOG_STDOUT, tmp, (size_t)n,
					     err);
				continue;
			}
			crilog_close_stream(w, i ? CRILOG_STDERR : CRILOG_STDOUT, err);
			if (i)
				open_e = false;
			else
				open_o = false;
		}
		watch_container(o, r);
		if (!exited && waitpid(r->runtime_pid, wstatus, WNOHANG) == r->runtime_pid) {
			exited = true;
			exited_at = clock_mono_ns();
		}
		if (exited &&
		    ((!open_o && !open_e) || clock_mono_ns() - exited_at > DRAIN_AFTER_EXIT_NS))
			break;
	}
	crilog_close_stream(w, CRILOG_STDOUT, err);
	crilog_close_stream(w, CRILOG_STDERR, err);
	return 0;
}

/* The runtime's own error text (its --log file), trimmed and bounded. */
static char *runtime_message(const struct shim_opts *o)
{
	_cleanup_free_ char *path = xasprintf("%s/runtime.log", o->dir);
	_cleanup_free_ char *text = NULL;
	struct err err = ERR_INIT;
	size_t len = 0;

	if (fs_read_file(path, 1024 * 1024, &text, &len, &err) < 0 || len == 0)
		return xstrdup("the OCI runtime failed before the container started");
	while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
		text[--len] = '\0';
	if (len > MESSAGE_MAX)
		return xstrdup(text + len - MESSAGE_MAX);
	return steal_ptr(text);
}

/* Writes exit.json atomically. */
static int write_exit(const struct shim_opts *o, const struct shim_run *r, int code,
		      struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/exit.json", o->dir);
	_cleanup_free_ char *message = NULL;
	const char *reason;
	json_t *j;
	char *text;
	int ret;

	if (!r->started && code != 0) {
		reason = "StartError";
		message = runtime_message(o);
		code = 128;
	} else if (r->oom && code != 0) {
		reason = "OOMKilled";
	} else {
		reason = code == 0 ? "Completed" : "Error";
	}
	j = json_pack("{s:i,s:I,s:I,s:s,s:s}", "exit_code", code, "started_ns",
		      (json_int_t)(r->started ? r->started_ns : r->spawned_ns), "finished_ns",
		      (json_int_t)clock_now_ns(), "reason", reason, "message",
		      message ? message : "");
	if (!j)
		return err_set(err, EINVAL, "exit status: message is not valid UTF-8");
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	ret = fs_write_file(path, text, strlen(text), 0644, err);
	free(text);
	return ret;
}

/* Runs one unit to its end; see the header. */
int shim_main(int argc, char **argv)
{
	struct shim_opts o;
	struct shim_run r = { .oom_fd = -1 };
	struct err err = ERR_INIT;
	struct crilog_writer *w;
	_cleanup_free_ char *logpath = NULL;
	_cleanup_close_ int logfd = -1;
	int po[2] = { -1, -1 }, pe[2] = { -1, -1 }, wst = 0, st;

	signal(SIGPIPE, SIG_IGN);
	if (shim_parse(argc, argv, &o, &err) < 0 || supervisor_private_cgroup_ns(&err) < 0) {
		fprintf(stderr, "shim: %s\n", err.msg);
		return 2;
	}
	logpath = xasprintf("%s/log", o.dir);
	logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (logfd < 0) {
		fprintf(stderr, "shim %s: open %s: %s\n", o.id, logpath, strerror(errno));
		return 1;
	}
	if (start_runtime(&o, po, pe, &r, &err) < 0) {
		fprintf(stderr, "shim %s: %s\n", o.id, err.msg);
		write_exit(&o, &r, 127, &err);
		return 1;
	}
	write_pid_file(&o, r.runtime_pid);
	w = crilog_writer_new(logfd, 0, NULL);
	if (pump(&o, po[0], pe[0], w, &r, &wst, &err) < 0)
		fprintf(stderr, "shim %s: %s\n", o.id, err.msg);
	crilog_writer_free(w);
	close(po[0]);
	close(pe[0]);
	watch_container(&o, &r);
	/* an OOM kill whose event was not read before the pipes closed */
	if (o.cgroup && r.started && !r.oom && oom_kills(o.cgroup) > 0)
		r.oom = true;
	if (write_exit(&o, &r, wait_code(wst), &err) < 0)
		fprintf(stderr, "shim %s: %s\n", o.id, err.msg);
	{
		char *del[] = { (char *)o.runtime, "--root", (char *)o.root, "delete", "-f",
				(char *)o.id,	   NULL };

		shim_run_capture(del, 30000, 4096, NULL, NULL, NULL, NULL, &st, &err);
	}
	if (r.oom_fd >= 0)
		close(r.oom_fd);
	return 0;
}

/* Checks the shim recorded in unit_dir; see the header. */
int shim_alive(const char *unit_dir)
{
	_cleanup_free_ char *path = xasprintf("%s/pid", unit_dir), *text = NULL;
	struct err err = ERR_INIT;
	unsigned long long start = 0;
	int pid = 0, rpid = 0;

	if (fs_read_file(path, 256, &text, NULL, &err) < 0)
		return -1;
	if (sscanf(text, "%d %d %llu", &pid, &rpid, &start) != 3 || pid <= 0)
		return -1;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 0;
	if (proc_start_time(pid) != start)
		return 0;
	/* A shim whose parent does not reap it lingers as a zombie: that is gone too. */
	free(path);
	free(text);
	text = NULL;
	path = xasprintf("/proc/%d/stat", pid);
	if (fs_read_file(path, 4096, &text, NULL, &err) < 0)
		return 0;
	{
		const char *p = strrchr(text, ')');

		return p && (p[2] == 'Z' || p[2] == 'X') ? 0 : 1;
	}
}
