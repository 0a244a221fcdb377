/*
 * server.h: the CRI streaming server. Exec, Attach and PortForward do not stream over the
 * CRI itself: they answer a URL on this server, which the kubelet's proxy (or critest, or
 * any client) then opens with an HTTP upgrade to SPDY/3.1 or WebSocket and the Kubernetes
 * stream protocols. Each URL carries an unguessable single-use token (128 random bits) that
 * expires after STREAM_TOKEN_TTL_S; the request it stands for was checked when the URL was
 * made. The bytes go to the cell's agent (cells_stream_open) and back.
 *
 * Threads: one, an event loop (evloop.h) that accepts, reads and writes every connection and
 * runs every session, however many; the agents' streams are read and written from the agent
 * client's completion-queue loop (rpc_loop.h), whose callbacks come back to this loop. Each
 * session bounds what it holds either way and stops reading the side that is ahead.
 */
#ifndef KIYOT_STREAM_SERVER_H
#define KIYOT_STREAM_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* How long a URL stays good. */
#define STREAM_TOKEN_TTL_S 60
/* URLs not yet used that the server keeps, in number and in the bytes of their requests: past
 * either, the oldest URL is forgotten (it answers 404 like an expired one). */
#define STREAM_MAX_TOKENS 1024
#define STREAM_MAX_TOKEN_BYTES (32u << 20)

struct cellmgr;
struct stream_server;

/*
 * What the server serves at once, so that one pod's clients or one noisy client cannot take
 * every stream of the node. A connection counts from its accept to its close, its request
 * head not yet sent included; one over the node's bound is answered 503, one over its
 * client's 429, both with Retry-After and a body saying which bound and what to do. A session
 * counts for its pod (its cell) from its URL's use until its agent stream wound up; one over
 * the pod's bound is answered 429 and its URL stays good for a retry.
 *
 * The kubelet proxies every kubectl stream from one address, so the bound of a client is half
 * the node's, not less; that of a pod is the cell agent's own bound on its streams (64). The
 * config has no streaming section (only streamingAddress), so the defaults are these
 * constants; tests give smaller ones.
 */
struct stream_limits {
	int max_connections;	    /* the node's connections */
	int max_client_connections; /* from one peer address */
	int max_pod_sessions;	    /* open for one pod */
	int head_timeout_ms;	    /* for a client to send its request line and headers */
};
#define STREAM_MAX_CONNECTIONS 256
#define STREAM_MAX_CLIENT_CONNECTIONS 128
#define STREAM_MAX_POD_SESSIONS 64
/* Long enough for a client on a loaded node (a kubelet sends its request as soon as it
 * connected); short enough that connections that send nothing cannot hold the bounds. */
#define STREAM_HEAD_TIMEOUT_MS 5000

enum stream_kind {
	STREAM_EXEC,
	STREAM_PORTFORWARD,
	STREAM_ATTACH
};

/* What a URL stands for. Copied by stream_server_url. */
struct stream_request {
	enum stream_kind kind;
	const char *cell_id;
	const char *unit_id; /* exec, attach: the container */
	char *const *cmd;    /* exec */
	size_t n_cmd;
	bool tty, in, out, err; /* exec, attach: which streams the client asked for */
	bool host_network;	/* port-forward: the pod uses its host's network */
	const int32_t *ports;	/* port-forward: the CRI request's ports (WebSocket's default) */
	size_t n_ports;
};

/* Listens on address ("127.0.0.1:0" picks a free port; "0.0.0.0:PORT" every address of the
 * node) and serves connections within limits (NULL: the defaults above; copied). Logs the
 * address it listens on and the one its URLs carry. */
int stream_server_start(const char *address, struct cellmgr *cells,
			const struct stream_limits *limits, struct stream_server **out,
			struct err *err);
/* Closes the listener, ends every connection and waits for them. */
void stream_server_stop(struct stream_server *s);
/* A new single-use URL for req ("http://127.0.0.1:PORT/exec/TOKEN"); the caller frees it. Its
 * host is the address the server listens on, 127.0.0.1 when that is 0.0.0.0 (the kubelet runs
 * on the node). The token is good only on its kind's path: /exec/, /attach/ or /portforward/;
 * on another it is refused (404) and stays good for its own. */
char *stream_server_url(struct stream_server *s, const struct stream_request *req);

#endif
