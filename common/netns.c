/*
 * netns.c: sockets made in another network namespace (see netns.h).
 */
#include "netns.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

struct netns_job {
	const char *path;
	int fd, error;
	const char *step;
};

/* On its own thread, which ends in the namespace it joined: nothing else ever runs there. */
static void *socket_in_netns(void *arg)
{
	struct netns_job *j = arg;
	int nfd = open(j->path, O_RDONLY | O_CLOEXEC);

	if (nfd < 0) {
		j->error = errno;
		j->step = "open";
		return NULL;
	}
	if (setns(nfd, CLONE_NEWNET) < 0) {
		j->error = errno;
		j->step = "join";
	} else if ((j->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		j->error = errno;
		j->step = "socket in";
	}
	close(nfd);
	return NULL;
}

int netns_tcp_socket(const char *netns_path, struct err *err)
{
	struct netns_job j = { netns_path, -1, 0, NULL };
	pthread_t t;
	int ret;

	if (!netns_path) {
		j.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		return j.fd >= 0 ? j.fd : err_errno(err, "socket");
	}
	ret = pthread_create(&t, NULL, socket_in_netns, &j);
	if (ret != 0)
		return err_set(err, ret, "a thread to join network namespace %s", netns_path);
	pthread_join(t, NULL);
	if (j.fd < 0) {
		errno = j.error;
		return err_errno(err, "%s network namespace %s", j.step, netns_path);
	}
	return j.fd;
}

int netns_connect_loopback(const char *netns_path, uint16_t port, struct err *err)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = netns_tcp_socket(netns_path, err);

	if (fd < 0)
		return fd;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return err_errno(err, "connect to port %u in the pod", port);
	}
	return fd;
}
