/*
 * netaddr.h: the numeric "ip:port" addresses kiyot and its agents speak of ("10.77.0.2:7443",
 * "[::1]:7443"), as socket addresses, and whether something accepts connections at one.
 * No name resolution: a cell's address is always numeric.
 */
#ifndef KIYOT_NETADDR_H
#define KIYOT_NETADDR_H

#include <stdbool.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "err.h"

/* target as a socket address: -EINVAL naming it when it is not a numeric ip:port. */
int netaddr_parse(const char *target, struct sockaddr_storage *ss, socklen_t *len, struct err *err);
/* Whether a TCP connect to target succeeds within timeout_ms (the connection is closed at
 * once). True for a target netaddr_parse does not take, so that the caller's real connection
 * says what is wrong with it. */
bool netaddr_listening(const char *target, int timeout_ms);
/* A TCP listener (non-blocking, close-on-exec, SO_REUSEADDR) on an IPv4 "ip:port" (port 0: a
 * free one); *bound gets the address it has. The descriptor, or -errno: EINVAL naming an
 * address that is no numeric IPv4 ip:port, bind's and listen's errno (EADDRINUSE...) else. */
int netaddr_listen_ipv4(const char *address, int backlog, struct sockaddr_in *bound,
			struct err *err);

#endif
