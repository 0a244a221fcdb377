/*
 * server.h: the HTTP server Prometheus scrapes: GET /metrics answers a registry's exposition
 * (metrics.h), any other path 404, any other method 405, and every answer closes its
 * connection (Connection: close).
 *
 * Threads: one event loop (evloop.h) accepts, reads, renders and writes every connection.
 * Bounds (struct metrics_limits): a request head of at most max_head bytes (a longer one is
 * answered 431), sent within head_timeout_ms of the connection (else it is closed after a
 * 408); at most max_connections at once (one more is answered 503 and closed); an answer
 * the client does not read within the same time is dropped.
 */
#ifndef KIYOT_METRICS_SERVER_H
#define KIYOT_METRICS_SERVER_H

#include <stddef.h>

#include "err.h"

struct metrics_registry;
struct metrics_server;

struct metrics_limits {
	size_t max_head;
	int head_timeout_ms;
	int max_connections;
};
#define METRICS_MAX_HEAD (8 * 1024)
#define METRICS_HEAD_TIMEOUT_MS 5000
#define METRICS_MAX_CONNECTIONS 16

/* Listens on address ("IPv4:PORT"; port 0 picks a free one) and serves r (borrowed: it must
 * outlive the server) within limits (NULL: the defaults above; copied). -EADDRINUSE naming
 * the address when it is taken. */
int metrics_server_start(const char *address, struct metrics_registry *r,
			 const struct metrics_limits *limits, struct metrics_server **out,
			 struct err *err);
/* The port it listens on. */
int metrics_server_port(const struct metrics_server *s);
/* Closes the listener and every connection, and frees the server. NULL is ignored. */
void metrics_server_stop(struct metrics_server *s);

#endif
