/*
 * podns.c: the holder of the pod's PID and IPC namespaces (see podns.h).
 */
#include "podns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fsutil.h"
#include "proc.h"
#include "xalloc.h"

/* The holder: pid 1 of the pod's PID namespace. It reaps whatever is reparented to it and
 * otherwise sleeps; as a namespace's init it gets only the signals it handles, and it
 * handles none but SIGCHLD (waited for, not delivered). Async-signal-safe calls only. */
void podns_holder_main(void)
{
	sigset_t set;
	int sig;

	prctl(PR_SET_NAME, "kiyot-pod-ns", 0, 0, 0);
	sigfillset(&set);
	sigprocmask(SIG_SETMASK, &set, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (;;) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		sigwait(&set, &sig);
	}
}

/* The process's argument area (podns_set_args), for a holder forked without an exec. */
static char *args_start;
static size_t args_size;

void podns_set_args(int argc, char **argv)
{
	if (argc < 1)
		return;
	args_start = argv[0];
	args_size = (size_t)(argv[argc - 1] + strlen(argv[argc - 1]) + 1 - argv[0]);
}

/* In a holder forked without an exec: its arguments read `<argv[0]> podns-holder`, the
 * rest of the area zeroed (what ps shows, and how tests and operators tell it from the
 * agent). */
static void holder_retitle(void)
{
	size_t n;

	if (!args_start)
		return;
	n = strlen(args_start) + 1;
	if (n + sizeof(PODNS_HOLDER_ARG) > args_size)
		return;
	memset(args_start + n, 0, args_size - n);
	memcpy(args_start + n, PODNS_HOLDER_ARG, sizeof(PODNS_HOLDER_ARG));
}

/* Forks the holder: a child makes the namespaces and forks the holder into them, reports
 * its pid and exits, so the holder belongs to no one's session and is reparented. The holder
 * runs self, or with self NULL goes on in this process's image (see podns_ensure). */
static int holder_start(const char *self, struct podns *ns, struct err *err)
{
	char *argv[] = { (char *)self, (char *)PODNS_HOLDER_ARG, NULL };
	char *envp[] = { NULL };
	int p[2], st = 0;
	long pid = 0;
	pid_t child;

	if (pipe2(p, O_CLOEXEC) < 0)
		return err_errno(err, "pipe");
	child = fork();
	if (child == 0) {
		pid_t h;

		close(p[0]);
		setsid();
		if (unshare(CLONE_NEWPID | CLONE_NEWIPC) < 0)
			_exit(1);
		h = fork();
		if (h == 0) {
			close_range(0, ~0U, 0);
			if (!self) {
				holder_retitle();
				podns_holder_main();
			}
			execve(self, argv, envp);
			_exit(127);
		}
		if (h > 0) {
			long v = h;

			if (write(p[1], &v, sizeof(v)) != sizeof(v))
				_exit(3);
		}
		_exit(h > 0 ? 0 : 2);
	}
	close(p[1]);
	if (child < 0) {
		close(p[0]);
		return err_errno(err, "fork the pod's namespace holder");
	}
	if (read(p[0], &pid, sizeof(pid)) != sizeof(pid))
		pid = 0;
	close(p[0]);
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	if (pid <= 0)
		return err_set(err, EIO,
			       "could not make the pod's PID and IPC namespaces (unshare: the "
			       "agent needs CAP_SYS_ADMIN)");
	ns->pid = pid;
	if (proc_stat(pid, &(char){ 0 }, &ns->start) < 0)
		return err_set(err, EIO, "the pod's namespace holder (pid %ld) exited at once",
			       pid);
	return 0;
}

bool podns_alive(const struct podns *ns)
{
	return ns->pid > 0 && proc_alive(ns->pid, ns->start) == 1;
}

char *podns_path(const struct podns *ns, const char *type)
{
	return xasprintf("/proc/%ld/ns/%s", ns->pid, type);
}

int podns_ensure(const char *state_dir, const char *self, struct podns *ns, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/podns", state_dir), *text = NULL;
	char buf[64];
	int ret;

	if (podns_alive(ns))
		return 0;
	if (fs_read_file(path, sizeof(buf), &text, NULL, err) == 0 &&
	    sscanf(text, "%ld %llu", &ns->pid, &ns->start) == 2 && podns_alive(ns))
		return 0;
	err_clear(err);
	*ns = (struct podns){ 0 };
	ret = holder_start(self, ns, err);
	if (ret < 0)
		return ret;
	snprintf(buf, sizeof(buf), "%ld %llu\n", ns->pid, ns->start);
	return fs_replace_file(path, buf, strlen(buf), 0600, err);
}
