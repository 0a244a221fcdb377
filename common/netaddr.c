/*
 * netaddr.c: numeric "ip:port" addresses (see netaddr.h).
 */
#include "netaddr.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int netaddr_parse(const char *target, struct sockaddr_storage *ss, socklen_t *len, struct err *err)
{
	const char *colon = target ? strrchr(target, ':') : NULL;
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	const char *host = target;
	char buf[64];
	size_t n;

	if (!colon || colon == target || !colon[1])
		return err_set(err, EINVAL, "address \"%s\": want ip:port", target ? target : "");
	/* getaddrinfo takes a port past 65535 (and wraps it) */
	if (strspn(colon + 1, "0123456789") != strlen(colon + 1) || strlen(colon + 1) > 5 ||
	    strtol(colon + 1, NULL, 10) > 65535)
		return err_set(err, EINVAL, "address \"%s\": the port must be 0 to 65535", target);
	n = (size_t)(colon - target);
	if (target[0] == '[' && n >= 2 && target[n - 1] == ']') {
		host++;
		n -= 2;
	}
	if (n >= sizeof(buf))
		return err_set(err, EINVAL, "address \"%s\": want ip:port", target);
	memcpy(buf, host, n);
	buf[n] = '\0';
	if (getaddrinfo(buf, colon + 1, &hints, &ai) != 0 || !ai) {
		if (ai)
			freeaddrinfo(ai);
		return err_set(err, EINVAL, "address \"%s\": want a numeric ip:port", target);
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

bool netaddr_listening(const char *target, int timeout_ms)
{
	struct sockaddr_storage ss;
	struct pollfd p = { .events = POLLOUT };
	struct err err = ERR_INIT;
	socklen_t len;
	int e = 0;
	bool up = false;

	if (netaddr_parse(target, &ss, &len, &err) < 0)
		return true;
	p.fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p.fd < 0)
		return true;
	if (connect(p.fd, (struct sockaddr *)&ss, len) == 0) {
		up = true;
	} else if (errno == EINPROGRESS && poll(&p, 1, timeout_ms) == 1) {
		len = sizeof(e);
		up = getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 && e == 0;
	}
	close(p.fd);
	return up;
}

int netaddr_listen_ipv4(const char *address, int backlog, struct sockaddr_in *bound,
			struct err *err)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd, one = 1;

	if (netaddr_parse(address, &ss, &len, err) < 0)
		return -err->code;
	if (ss.ss_family != AF_INET)
		return err_set(err, EINVAL, "address \"%s\": want an IPv4 ip:port", address);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return err_errno(err, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	len = sizeof(*bound);
	if (bind(fd, (struct sockaddr *)&ss, sizeof(struct sockaddr_in)) < 0 ||
	    listen(fd, backlog) < 0 || getsockname(fd, (struct sockaddr *)bound, &len) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return err_errno(err, "listening on %s", address);
	}
	return fd;
}
