#include "cellspawn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fsutil.h"
#include "xalloc.h"

/* Where starting failed, as the grandchild reports it through the pipe. */
enum spawn_stage {
	SPAWN_FORK = 1,
	SPAWN_CGROUP,
	SPAWN_SETNS,
	SPAWN_STDIO,
	SPAWN_EXEC
};

static const char *const spawn_stage_names[] = {
	[SPAWN_FORK] = "fork",
	[SPAWN_CGROUP] = "join cgroup",
	[SPAWN_SETNS] = "join the cell netns",
	[SPAWN_STDIO] = "set up stdio",
	[SPAWN_EXEC] = "exec",
};

/* What the forked children use, all prepared before fork: after fork in a threaded process
 * only async-signal-safe calls are allowed, so the children allocate and format nothing. */
struct spawn_plan {
	const struct cellspawn *s;
	int null_fd;
	int log_fd;
	int report_fd;
};

/* Tells the parent what failed and exits; the parent reads {stage, errno}. */
static void __attribute__((noreturn)) spawn_fail(int fd, int stage)
{
	int msg[2] = { stage, errno };

	if (write(fd, msg, sizeof(msg)) < 0) {
		/* nobody left to tell */
	}
	_exit(127);
}

/* The grandchild: reports its pid, joins the cgroups and the netns, sets up stdio, and
 * execs. Signal dispositions and mask are reset: kiyot's ignored SIGPIPE must not leak. */
static void __attribute__((noreturn)) spawn_exec(const struct spawn_plan *sp)
{
	const struct cellspawn *s = sp->s;
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	pid_t self = getpid();
	int fd = sp->report_fd;
	sigset_t none;

	if (write(fd, &self, sizeof(self)) != sizeof(self))
		_exit(127);
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (size_t i = 0; i < s->ncgroups; i++) {
		int cg;

		if (!s->cgroup_procs[i])
			continue;
		cg = open(s->cgroup_procs[i], O_WRONLY | O_CLOEXEC);
		/* "0" is the writing process itself */
		if (cg < 0 || write(cg, "0", 1) != 1)
			spawn_fail(fd, SPAWN_CGROUP);
		close(cg);
	}
	if (s->ns_fd >= 0 && setns(s->ns_fd, CLONE_NEWNET) < 0)
		spawn_fail(fd, SPAWN_SETNS);
	if (dup2(sp->null_fd, 0) < 0 || dup2(sp->log_fd, 1) < 0 || dup2(sp->log_fd, 2) < 0)
		spawn_fail(fd, SPAWN_STDIO);
	if (fd != 3) {
		if (dup3(fd, 3, O_CLOEXEC) < 0)
			spawn_fail(fd, SPAWN_STDIO);
		fd = 3;
	}
	close_range(4, ~0U, 0);
	if (chdir("/") < 0)
		spawn_fail(fd, SPAWN_STDIO);
	umask(022);
	execve(s->argv[0], s->argv, s->envp);
	spawn_fail(fd, SPAWN_EXEC);
}

/* Reads exactly n bytes unless the pipe closes first; returns what was read. */
static ssize_t read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* Stack of each of the two children below: what spawn_exec and spawn_fail use, with room. */
#define SPAWN_STACK (64 * 1024)

/* What the middle child needs: the plan, and the grandchild's stack. */
struct spawn_middle {
	struct spawn_plan *sp;
	char *stack;
};

/* clone's entry for the grandchild. */
static int grandchild_main(void *arg)
{
	spawn_exec(arg);
}

/* clone's entry for the middle child: a session of its own, the grandchild, then gone. The
 * grandchild shares memory with kiyot until its exec (CLONE_VFORK holds the middle child until
 * then, and kiyot's calling thread until the middle child exits). */
static int middle_main(void *arg)
{
	struct spawn_middle *m = arg;

	setsid();
	if (clone(grandchild_main, m->stack + SPAWN_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD,
		  m->sp) < 0)
		spawn_fail(m->sp->report_fd, SPAWN_FORK);
	_exit(0);
}

/* Double spawn through a short-lived middle child that starts a session; the pipe (close on
 * exec) tells the pid first, then either closes (exec worked) or carries {stage, errno}. The
 * children are clone(CLONE_VM | CLONE_VFORK) ones, as posix_spawn makes, not forks: a fork
 * copies kiyot's page tables (tens of MB mapped, threads' stacks), twice, and makes kiyot's
 * pages copy-on-write meanwhile, which under CPU load cost a launch 10-30 ms. Every signal is
 * blocked around them so that none of kiyot's handlers runs on the children's stacks; the
 * grandchild puts dispositions and mask back to defaults before it execs. */
static pid_t spawn_run(struct spawn_plan *sp, struct err *err)
{
	_cleanup_free_ char *stacks = xmalloc(2 * SPAWN_STACK);
	struct spawn_middle m = { sp, stacks + SPAWN_STACK };
	int pfd[2], msg[2], status;
	sigset_t all, old;
	pid_t child, pid = -1;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return err_errno(err, "pipe");
	sp->report_fd = pfd[1];
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	child = clone(middle_main, stacks + SPAWN_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &m);
	if (child < 0)
		err_errno(err, "clone");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (child < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -err->code;
	}
	close(pfd[1]);
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (read_full(pfd[0], &pid, sizeof(pid)) != sizeof(pid))
		pid = -1;
	if (read_full(pfd[0], msg, sizeof(msg)) == sizeof(msg)) {
		close(pfd[0]);
		errno = msg[1];
		if (msg[0] < SPAWN_FORK || msg[0] > SPAWN_EXEC)
			msg[0] = SPAWN_EXEC;
		return err_errno(err, "start %s: %s", sp->s->argv[0], spawn_stage_names[msg[0]]);
	}
	close(pfd[0]);
	if (pid <= 0)
		return err_set(err, ECHILD, "start %s: the child died before reporting",
			       sp->s->argv[0]);
	return pid;
}

/* Opens stdin and the log in the parent (close on exec, so no other child inherits them). */
pid_t cellspawn_start(const struct cellspawn *s, struct err *err)
{
	_cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	_cleanup_close_ int log_fd = -1;
	struct spawn_plan sp = { s, -1, -1, -1 };

	if (null_fd < 0)
		return err_errno(err, "open /dev/null");
	log_fd = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (log_fd < 0)
		return err_errno(err, "create %s", s->log_path);
	sp.null_fd = null_fd;
	sp.log_fd = log_fd;
	return spawn_run(&sp, err);
}
