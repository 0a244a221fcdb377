/*
 * netns.h: TCP connections into another network namespace. A socket belongs to the network
 * namespace it was made in, whatever thread uses it later; so the socket is made on a
 * short-lived thread that joins the namespace (setns changes only the calling thread), and
 * the caller's threads never leave their own.
 *
 * Thread safety: reentrant.
 */
#ifndef KIYOT_NETNS_H
#define KIYOT_NETNS_H

#include <stdint.h>

#include "err.h"

/* A TCP socket (close-on-exec) in the network namespace at netns_path (a /run/netns or
 * /proc/PID/ns/net path), or in the caller's own when netns_path is NULL; the fd or -errno. */
int netns_tcp_socket(const char *netns_path, struct err *err);

/* Connects to 127.0.0.1:port in that namespace (NULL: the caller's); the connected socket or
 * -errno, the error naming the port ("connect to port 8080 in the pod: Connection refused"). */
int netns_connect_loopback(const char *netns_path, uint16_t port, struct err *err);

#endif
