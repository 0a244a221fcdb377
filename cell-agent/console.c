/*
 * console.c: the socket a runtime hands a container's terminal over (see console.h).
 */
#include "console.h"

#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int console_listen(int dirfd, const char *name, struct err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dirfd, name);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(err, "socket");
	unlinkat(dirfd, name, 0);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1) < 0) {
		close(fd);
		return err_errno(err, "listen for the runtime's console");
	}
	return fd;
}
