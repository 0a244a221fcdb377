/*
 * fdpass.c: file descriptors over unix sockets (see fdpass.h).
 */
#include "fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

int fdpass_send(int sock, int fd)
{
	char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)
	};
	struct cmsghdr *c;

	memset(ctl, 0, sizeof(ctl));
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

int fdpass_send_errno(int sock, int code)
{
	return send(sock, &code, sizeof(code), MSG_NOSIGNAL) == (ssize_t)sizeof(code) ? 0 : -1;
}

int fdpass_recv(int sock)
{
	char ctl[CMSG_SPACE(sizeof(int))], data[64];
	struct iovec iov = { data, sizeof(data) };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)
	};
	struct cmsghdr *c;
	int fd = -1, code = 0;
	ssize_t n;

	memset(ctl, 0, sizeof(ctl));
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -EIO;
	c = CMSG_FIRSTHDR(&msg);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
		return fd;
	}
	if (n == (ssize_t)sizeof(code)) {
		memcpy(&code, data, sizeof(code));
		if (code > 0)
			return -code;
	}
	return -EIO;
}
