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
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fdpass.h"
#include "proc.h"
#include "shim_attach.h"
#include "console.h"
#include "supervisor_internal.h"
#include "cgroup.h"
#include "buf.h"
#include "clock.h"
#include "crilog.h"
#include "fsutil.h"
#include "xalloc.h"

#define UNIFIED_CGROUP "/sys/fs/cgroup/unified"
#define MOUNTINFO_MAX (4 * 1024 * 1024)
#define MESSAGE_MAX 4096
#define DRAIN_AFTER_EXIT_NS (2 * 1000000000LL)
/* How long attached callers get to take the last output when the run ended. */
#define ATTACH_FLUSH_MS 2000
/* Where the runtime finds the unit directory (for the console socket): whatever the
 * directory's length, "/proc/self/fd/3/console.sock" fits a socket address. */
#define SHIM_DIR_FD 3
#define CONSOLE_SOCK "console.sock"

/* True when the cgroup2 hybrid mount is visible in this mount namespace. */
static bool unified_mounted(void)
{
	_cleanup_free_ char *info = NULL;
	struct err err = ERR_INIT;

	if (fs_read_file("/proc/self/mountinfo", MOUNTINFO_MAX, &info, NULL, &err) < 0)
		return false;
	return strstr(info, " " UNIFIED_CGROUP " ") != NULL;
}

/* See the header. / becomes rslave, not rprivate: the host's mounts made later (the kubelet's
 * subPath binds under its rshared root directory, volumes it mounts after the cell started)
 * still reach the namespace, and nothing made in it, the unmount included, reaches the host. */
int supervisor_private_cgroup_ns(struct err *err)
{
	if (!unified_mounted())
		return 0;
	if (unshare(CLONE_NEWNS) < 0)
		return err_errno(err, "unshare mount namespace");
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return err_errno(err, "make / rslave");
	if (umount2(UNIFIED_CGROUP, MNT_DETACH) < 0)
		return err_errno(err, "unmount %s", UNIFIED_CGROUP);
	return 0;
}

/* Sets stdin (or /dev/null), stdout and stderr, puts dir_fd (when >= 0) at SHIM_DIR_FD without
 * close-on-exec, and closes every other descriptor above 2. In a forked child:
 * async-signal-safe calls only. */
static void child_stdio(int in_fd, int out_fd, int err_fd, int dir_fd)
{
	int null = open("/dev/null", O_RDWR);

	dup2(in_fd >= 0 ? in_fd : null, 0);
	dup2(out_fd >= 0 ? out_fd : null, 1);
	dup2(err_fd >= 0 ? err_fd : null, 2);
	if (dir_fd >= 0)
		dup2(dir_fd, SHIM_DIR_FD);
	close_range(dir_fd >= 0 ? SHIM_DIR_FD + 1 : 3, ~0U, 0);
}

/* Starts the shim detached; see the header. */
int shim_spawn(const char *shim, const char *unit_dir, const char *runtime, const char *root,
	       const char *id, const char *cgroup, const struct shim_stdio *io, struct err *err)
{
	_cleanup_free_ char *shim_log = xasprintf("%s/shim.log", unit_dir);
	char *argv[16] = { (char *)shim, "shim",	  "--unit-dir",	    (char *)unit_dir,
			   "--runtime",	 (char *)runtime, "--runtime-root", (char *)root,
			   "--id",	 (char *)id };
	size_t a = 10;
	int logfd = open(shim_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	int status;
	pid_t pid;

	if (cgroup) {
		argv[a++] = "--cgroup";
		argv[a++] = (char *)cgroup;
	}
	if (io && io->tty)
		argv[a++] = "--tty";
	if (io && io->stdin)
		argv[a++] = "--stdin";
	if (io && io->stdin_once)
		argv[a++] = "--stdin-once";
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
		child_stdio(-1, -1, logfd, -1);
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

		child_stdio(-1, po[1], pe[1], -1);
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
	struct shim_attach_config io;
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
		{ "tty", no_argument, NULL, 't' },
		{ "stdin", no_argument, NULL, 's' },
		{ "stdin-once", no_argument, NULL, 'o' },
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
		case 't':
			o->io.tty = true;
			break;
		case 's':
			o->io.stdin = true;
			break;
		case 'o':
			o->io.stdin_once = true;
			break;
		default:
			return err_set(
				err, EINVAL,
				"usage: shim --unit-dir DIR --runtime RUNTIME "
				"--runtime-root DIR --id ID [--cgroup PATH] [--tty] [--stdin] "
				"[--stdin-once]");
		}
	}
	if (!o->dir || !o->runtime || !o->root || !o->id)
		return err_set(err, EINVAL,
			       "usage: shim --unit-dir DIR --runtime RUNTIME --runtime-root DIR "
			       "--id ID [--cgroup PATH] [--tty] [--stdin] [--stdin-once]");
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

/* The OOM kill counter ("oom_kill N") of a memory cgroup (v1 memory.oom_control, v2
 * memory.events), or -1 when unreadable. */
static long long oom_kills(const char *cgroup)
{
	_cleanup_free_ char *path =
		cgroup_file("memory", cgroup, cgroup_v2() ? "memory.events" : "memory.oom_control");
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

/* A descriptor that turns readable on the cgroup's OOM events (v1: an eventfd registered for
 * them; v2: an inotify watch of memory.events, which changes on other events too, so the
 * caller reads the counter); -1 when not possible. */
static int oom_eventfd(const char *cgroup)
{
	if (cgroup_v2()) {
		_cleanup_free_ char *events = cgroup_file("memory", cgroup, "memory.events");
		int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);

		if (fd >= 0 && inotify_add_watch(fd, events, IN_MODIFY) < 0) {
			close(fd);
			fd = -1;
		}
		return fd;
	}
	_cleanup_free_ char *ctl = cgroup_file("memory", cgroup, "memory.oom_control");
	_cleanup_free_ char *ev = cgroup_file("memory", cgroup, "cgroup.event_control");
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

/* The unit's stdio as the shim holds it: the runtime's output pipes, the terminal's master
 * once the runtime handed it over, the unit's stdin (a pipe's write end) until the attach
 * socket takes it, and the attach socket. */
enum {
	OUT_STDOUT,
	OUT_STDERR,
	OUT_TERM,
	NOUT
};

struct shim_io {
	int out[NOUT];		    /* -1 once closed (the master: until it came) */
	int stdin_w;		    /* the unit's stdin pipe, while nothing else holds it */
	int console;		    /* listening for the terminal's master; -1 */
	int dirfd;		    /* the unit directory */
	struct shim_attach *attach; /* NULL if it could not be made (the unit still runs) */
};

/* Starts the runtime: its output on pipes, stdin from a pipe the shim keeps (a unit with
 * stdin) and, with a terminal, the master sent to a console socket in the unit directory. */
static int start_runtime(const struct shim_opts *o, struct shim_io *io, struct shim_run *r,
			 struct err *err)
{
	_cleanup_free_ char *rtlog = xasprintf("%s/runtime.log", o->dir);
	_cleanup_free_ char *bundle = xasprintf("%s/bundle", o->dir);
	_cleanup_free_ char *pidf = xasprintf("%s/container.pid", o->dir);
	char console[64];
	char *argv[16] = { (char *)o->runtime, "--root", (char *)o->root, "--log", rtlog, "run",
			   "--bundle",	       bundle,	 "--pid-file",	  pidf };
	int po[2] = { -1, -1 }, pe[2] = { -1, -1 }, pi[2] = { -1, -1 };
	size_t a = 10;

	snprintf(console, sizeof(console), "/proc/self/fd/%d/%s", SHIM_DIR_FD, CONSOLE_SOCK);
	unlink(rtlog);
	unlink(pidf);
	if (o->io.tty) {
		io->console = console_listen(io->dirfd, CONSOLE_SOCK, err);
		if (io->console < 0)
			return io->console;
		argv[a++] = "--console-socket";
		argv[a++] = console;
	}
	argv[a++] = (char *)o->id;
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 ||
	    (o->io.stdin && !o->io.tty && pipe2(pi, O_CLOEXEC) < 0))
		return err_errno(err, "pipe");
	r->spawned_ns = clock_now_ns();
	r->runtime_pid = fork();
	if (r->runtime_pid < 0)
		return err_errno(err, "fork %s", o->runtime);
	if (r->runtime_pid == 0) {
		child_stdio(pi[0], po[1], pe[1], o->io.tty ? io->dirfd : -1);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	if (pi[0] >= 0)
		close(pi[0]);
	io->out[OUT_STDOUT] = po[0];
	io->out[OUT_STDERR] = pe[0];
	io->stdin_w = pi[1];
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

/* Takes the terminal's master from the runtime (the console socket). */
static void take_terminal(struct shim_io *io)
{
	int c = accept4(io->console, NULL, NULL, SOCK_CLOEXEC);
	int master = c < 0 ? -1 : fdpass_recv(c);

	if (c >= 0)
		close(c);
	if (c < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	close(io->console);
	io->console = -1;
	unlinkat(io->dirfd, CONSOLE_SOCK, 0);
	if (master < 0) {
		fprintf(stderr, "shim: the runtime sent no terminal\n");
		return;
	}
	io->out[OUT_TERM] = master;
	if (io->attach)
		shim_attach_set_terminal(io->attach, master);
}

/* Reads one output stream into the CRI log and to attached callers; false at its end. */
static bool take_output(struct shim_io *io, int i, struct crilog_writer *w, struct err *err)
{
	enum crilog_stream cs = i == OUT_STDERR ? CRILOG_STDERR : CRILOG_STDOUT;
	char tmp[16384];
	ssize_t n = read(io->out[i], tmp, sizeof(tmp));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0) { /* EOF, or EIO from a terminal whose every process left */
		crilog_close_stream(w, cs, err);
		return false;
	}
	crilog_write(w, cs, tmp, (size_t)n, err);
	if (io->attach)
		shim_attach_output(io->attach,
				   i == OUT_STDERR ? ATTACH_PKT_STDERR : ATTACH_PKT_STDOUT, tmp,
				   (size_t)n);
	return true;
}

/* Copies the unit's output into the CRI log and to attached callers, and their input into
 * the unit, until the runtime exits and the output ends. */
static int pump(const struct shim_opts *o, struct shim_io *io, struct crilog_writer *w,
		struct shim_run *r, int *wstatus, struct err *err)
{
	bool exited = false;
	int64_t exited_at = 0;

	for (;;) {
		struct pollfd p[NOUT + 2 + SHIM_ATTACH_NPOLL];
		bool room = !io->attach || shim_attach_output_room(io->attach, clock_mono_ns());
		size_t n = 0, na = 0;

		for (int i = 0; i < NOUT; i++)
			p[n++] = (struct pollfd){ room ? io->out[i] : -1, POLLIN, 0 };
		p[n++] = (struct pollfd){ r->oom_fd, POLLIN, 0 };
		p[n++] = (struct pollfd){ io->console, POLLIN, 0 };
		if (io->attach)
			na = shim_attach_poll(io->attach, p + n);
		if (poll(p, n + na, 100) < 0 && errno != EINTR)
			return err_errno(err, "poll");
		if (p[NOUT].revents) {
			char ev[512] __attribute__((aligned(8))); /* a count, or inotify events */

			if (read(r->oom_fd, ev, sizeof(ev)) > 0 &&
			    oom_kills(o->cgroup) > (cgroup_v2() ? 0 : -1))
				r->oom = true;
		}
		if (p[NOUT + 1].revents)
			take_terminal(io);
		for (int i = 0; i < NOUT; i++) {
			if (p[i].fd >= 0 && p[i].revents && !take_output(io, i, w, err)) {
				close(io->out[i]);
				io->out[i] = -1;
			}
		}
		if (io->attach)
			shim_attach_handle(io->attach, p + n, na);
		watch_container(o, r);
		if (!exited && waitpid(r->runtime_pid, wstatus, WNOHANG) == r->runtime_pid) {
			exited = true;
			exited_at = clock_mono_ns();
		}
		if (exited && ((io->out[OUT_STDOUT] < 0 && io->out[OUT_STDERR] < 0 &&
				io->out[OUT_TERM] < 0) ||
			       clock_mono_ns() - exited_at > DRAIN_AFTER_EXIT_NS))
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

/* Opens the attach socket; a unit whose socket cannot be made still runs, unattachable. */
static void open_attach(const struct shim_opts *o, struct shim_io *io)
{
	struct err err = ERR_INIT;

	if (shim_attach_new(io->dirfd, &o->io, io->stdin_w, &io->attach, &err) < 0) {
		fprintf(stderr, "shim %s: attach: %s\n", o->id, err.msg);
		return;
	}
	io->stdin_w = -1; /* the attach socket holds it */
}

static void shim_io_close(struct shim_io *io)
{
	shim_attach_free(io->attach);
	for (int i = 0; i < NOUT; i++)
		if (io->out[i] >= 0)
			close(io->out[i]);
	if (io->console >= 0) {
		close(io->console);
		unlinkat(io->dirfd, CONSOLE_SOCK, 0);
	}
	if (io->stdin_w >= 0)
		close(io->stdin_w);
	if (io->dirfd >= 0)
		close(io->dirfd);
}

/* Runs one unit to its end; see the header. */
int shim_main(int argc, char **argv)
{
	struct shim_opts o;
	struct shim_run r = { .oom_fd = -1 };
	struct shim_io io = { { -1, -1, -1 }, -1, -1, -1, NULL };
	struct err err = ERR_INIT;
	struct crilog_writer *w;
	_cleanup_free_ char *logpath = NULL;
	_cleanup_close_ int logfd = -1;
	int wst = 0, st, code;

	signal(SIGPIPE, SIG_IGN);
	if (shim_parse(argc, argv, &o, &err) < 0 || supervisor_private_cgroup_ns(&err) < 0) {
		fprintf(stderr, "shim: %s\n", err.msg);
		return 2;
	}
	logpath = xasprintf("%s/log", o.dir);
	logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	io.dirfd = open(o.dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (logfd < 0 || io.dirfd < 0) {
		fprintf(stderr, "shim %s: open %s: %s\n", o.id, logfd < 0 ? logpath : o.dir,
			strerror(errno));
		shim_io_close(&io);
		return 1;
	}
	if (start_runtime(&o, &io, &r, &err) < 0) {
		fprintf(stderr, "shim %s: %s\n", o.id, err.msg);
		write_exit(&o, &r, 127, &err);
		shim_io_close(&io);
		return 1;
	}
	open_attach(&o, &io);
	write_pid_file(&o, r.runtime_pid);
	w = crilog_writer_new(logfd, 0, NULL);
	if (pump(&o, &io, w, &r, &wst, &err) < 0)
		fprintf(stderr, "shim %s: %s\n", o.id, err.msg);
	crilog_writer_free(w);
	watch_container(&o, &r);
	/* an OOM kill whose event was not read before the pipes closed */
	if (o.cgroup && r.started && !r.oom && oom_kills(o.cgroup) > 0)
		r.oom = true;
	code = wait_code(wst);
	if (write_exit(&o, &r, code, &err) < 0)
		fprintf(stderr, "shim %s: %s\n", o.id, err.msg);
	if (io.attach)
		shim_attach_finish(io.attach, code, ATTACH_FLUSH_MS);
	shim_io_close(&io);
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
