/*
 * pause.c: the test image standing in for registry.k8s.io/pause. Sleeps in pause(2) for ever,
 * reaps children, and exits 0 on SIGTERM or SIGINT like the real one.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Exits on a stop signal. */
static void pause_on_stop(int sig)
{
	(void)sig;
	_exit(0);
}

/* Reaps any child handed to us as PID 1. */
static void pause_on_child(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = pause_on_stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = pause_on_child;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;)
		pause();
	return 0;
}
