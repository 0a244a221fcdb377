/*
 * supervisor_session.c: a running unit's stdio streamed. A command in the unit (kubectl exec):
 * the runtime's exec runs the unit's own process (exec_process_file) with pipes, or with a
 * terminal whose master it hands back over a console socket. The unit's own stdio (kubectl
 * attach): through its shim's attach socket (shim_attach.h).
 */
#include "supervisor_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "console.h"
#include "fdpass.h"
#include "shim_attach.h"
#include "xalloc.h"

/* How long the runtime may take to hand over the terminal. */
#define CONSOLE_WAIT_MS 10000
/* How long a unit's shim may take to answer an attach. */
#define ATTACH_WAIT_MS 10000

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The runtime's view of the console socket: through the unit directory it inherits as fd 3,
 * since a unit directory's own path may be longer than a socket address holds. */
#define CONSOLE_DIR_FD 3

/* Waits for the runtime to connect and send the terminal's master. */
static int console_accept(int lfd, pid_t runtime, struct err *err)
{
	struct pollfd p = { lfd, POLLIN, 0 };
	int c, fd;

	if (poll(&p, 1, CONSOLE_WAIT_MS) <= 0) {
		kill(runtime, SIGKILL);
		return err_set(err, ETIMEDOUT, "the runtime did not hand over the terminal");
	}
	c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		return err_errno(err, "accept the runtime's console");
	fd = fdpass_recv(c);
	close(c);
	if (fd < 0)
		return err_set(err, EIO, "the runtime sent no terminal");
	return fd;
}

/* In the child: stdio from the pipes (or /dev/null), then the runtime. Only async-signal-safe
 * calls after fork. */
static void __attribute__((noreturn))
exec_child(char *const *argv, int in, int out, int errfd, int dirfd)
{
	int null = open("/dev/null", O_RDWR);

	dup2(in >= 0 ? in : null, 0);
	dup2(out >= 0 ? out : null, 1);
	dup2(errfd >= 0 ? errfd : null, 2);
	if (dirfd >= 0)
		dup2(dirfd, CONSOLE_DIR_FD); /* without close-on-exec: the runtime keeps it */
	close_range(dirfd >= 0 ? CONSOLE_DIR_FD + 1 : 3, ~0U, 0);
	execvp(argv[0], argv);
	_exit(127);
}

/* The pipes of a session without a terminal: [0] the child's end, [1] ours, per stream. */
struct exec_pipes {
	int in[2], out[2], err[2];
};

static void swap_ends(int q[2])
{
	int t = q[0];

	q[0] = q[1];
	q[1] = t;
}

static int make_pipes(struct exec_pipes *p, bool with_stdin, struct err *err)
{
	if (pipe2(p->out, O_CLOEXEC) < 0 || pipe2(p->err, O_CLOEXEC) < 0 ||
	    (with_stdin && pipe2(p->in, O_CLOEXEC) < 0))
		return err_errno(err, "pipe");
	/* the child writes stdout and stderr: their write ends are the child's [0] */
	swap_ends(p->out);
	swap_ends(p->err);
	return 0;
}

static void close_pipes(struct exec_pipes *p)
{
	int *all[] = { &p->in[0], &p->in[1], &p->out[0], &p->out[1], &p->err[0], &p->err[1] };

	for (size_t i = 0; i < ARRAY_SIZE(all); i++)
		close_fd(all[i]);
}

int supervisor_exec_start(struct supervisor *s, const char *unit_id, char *const *cmd, bool tty,
			  bool with_stdin, unsigned width, unsigned height, struct exec_session *x,
			  struct err *err)
{
	static atomic_uint seq;
	struct exec_pipes p = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
	_cleanup_free_ char *dir = NULL;
	bool running = false;
	unsigned n = atomic_fetch_add(&seq, 1);
	int lfd = -1, dirfd = -1, ret;
	char console[32], console_via[64];

	*x = (struct exec_session){
		.runtime_pid = -1, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .tty = tty
	};
	ret = unit_dir_of(s, unit_id, &dir, &running, err);
	if (ret < 0)
		return ret;
	if (!running)
		return err_set(err, EBUSY, "unit %s is not running", unit_id);
	if (!cmd || !cmd[0])
		return err_set(err, EINVAL, "exec in unit %s: empty command", unit_id);
	x->proc_path = xasprintf("%s/exec-s%u.json", dir, n);
	x->pid_path = xasprintf("%s/exec-s%u.pid", dir, n);
	x->console_path = xasprintf("%s/exec-s%u.sock", dir, n);
	x->log_path = xasprintf("%s/exec-s%u.log", dir, n);
	snprintf(console, sizeof(console), "exec-s%u.sock", n);
	snprintf(console_via, sizeof(console_via), "/proc/self/fd/%d/%s", CONSOLE_DIR_FD, console);
	ret = exec_process_file(dir, cmd, tty, tty ? width : 0, tty ? height : 0, x->proc_path,
				err);
	if (ret == 0 && tty) {
		dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		ret = dirfd < 0 ? err_errno(err, "open %s", dir) : 0;
	}
	if (ret == 0 && tty)
		ret = lfd = console_listen(dirfd, console, err);
	else if (ret == 0)
		ret = make_pipes(&p, with_stdin, err);
	if (ret < 0)
		goto fail;
	{
		char *argv[18] = { s->runtime,	    "--log",	x->log_path, "--root",
				   s->runtime_root, "exec",	"--process", x->proc_path,
				   "--pid-file",    x->pid_path };
		size_t a = 10;

		if (tty) {
			argv[a++] = "--tty";
			argv[a++] = "--console-socket";
			argv[a++] = console_via;
		}
		argv[a++] = (char *)unit_id;
		x->runtime_pid = fork();
		if (x->runtime_pid == 0)
			exec_child(argv, tty ? -1 : p.in[0], tty ? -1 : p.out[0],
				   tty ? -1 : p.err[0], dirfd);
	}
	if (x->runtime_pid < 0) {
		ret = err_errno(err, "fork %s", s->runtime);
		goto fail;
	}
	if (tty) {
		ret = x->stdout_fd = console_accept(lfd, x->runtime_pid, err);
		if (ret < 0)
			goto fail;
		x->stdin_fd = with_stdin ? dup(x->stdout_fd) : -1;
	} else {
		x->stdin_fd = p.in[1];
		x->stdout_fd = p.out[1];
		x->stderr_fd = p.err[1];
		p.in[1] = p.out[1] = p.err[1] = -1;
	}
	close_pipes(&p);
	close_fd(&lfd);
	close_fd(&dirfd);
	return 0;
fail:
	close_pipes(&p);
	close_fd(&lfd);
	close_fd(&dirfd);
	if (x->runtime_pid > 0)
		exec_session_wait(x);
	exec_session_close(x);
	return err_wrap(err, "exec in unit %s", unit_id);
}

int exec_session_resize(struct exec_session *x, unsigned width, unsigned height)
{
	struct winsize ws = { .ws_row = (unsigned short)height, .ws_col = (unsigned short)width };

	if (!x->tty || x->stdout_fd < 0)
		return -EINVAL;
	if (width > 0xffff || height > 0xffff)
		return -ERANGE;
	return ioctl(x->stdout_fd, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

void exec_session_kill(struct exec_session *x)
{
	if (x->pid_path)
		exec_kill_leftover(x->pid_path);
	if (x->runtime_pid > 0)
		kill(x->runtime_pid, SIGKILL);
}

int exec_session_wait(struct exec_session *x)
{
	int st = 0;

	if (x->runtime_pid <= 0)
		return -1;
	while (waitpid(x->runtime_pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	x->runtime_pid = -1;
	if (WIFEXITED(st))
		return exec_status_of(x->log_path, WEXITSTATUS(st));
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

void exec_session_close(struct exec_session *x)
{
	char **files[] = { &x->proc_path, &x->pid_path, &x->console_path, &x->log_path };

	close_fd(&x->stdin_fd);
	close_fd(&x->stdout_fd);
	close_fd(&x->stderr_fd);
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		if (*files[i])
			unlink(*files[i]);
		free(*files[i]);
		*files[i] = NULL;
	}
}

int supervisor_attach(struct supervisor *s, const char *unit_id, bool want_stdin,
		      struct attach_conn *c, struct err *err)
{
	_cleanup_free_ char *dir = NULL;
	bool running = false;
	int ret = unit_dir_of(s, unit_id, &dir, &running, err);

	*c = (struct attach_conn){ .fd = -1 };
	if (ret < 0)
		return ret;
	if (!running)
		return err_set(err, EBUSY, "unit %s is not running", unit_id);
	ret = attach_conn_open(dir, want_stdin, ATTACH_WAIT_MS, c, err);
	if (ret == -ECONNREFUSED) { /* it ended between the look and the connection */
		err->code = EBUSY;
		ret = -EBUSY;
	}
	if (ret < 0)
		return err_wrap(err, "attach to unit %s", unit_id);
	return 0;
}
