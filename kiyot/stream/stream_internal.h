/*
 * stream_internal.h: what the streaming server's parts share: the server (server.c), a client
 * connection (conn.c), and the sessions on one (session.c: exec and attach; portforward.c and
 * portforward_pair.c: port-forward).
 *
 * Everything here runs on the server's one event loop (evloop.h), and only there: a session is
 * a state machine driven by its connection's callbacks and by what its agent streams report
 * (agent_client.h's callbacks come on other threads; a session posts them to the loop).
 */
#ifndef KIYOT_STREAM_INTERNAL_H
#define KIYOT_STREAM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "err.h"
#include "http.h"
#include "outq.h"
#include "server.h"

struct astream;
struct cellmgr;
struct evloop;
struct spdy_session;
struct ws_session;

/* Output a connection holds for its client before its session stops producing more (reading
 * its agent or pods), and where it starts again. */
#define CONN_OUT_HIGH (1024 * 1024)
#define CONN_OUT_LOW (256 * 1024)
/* How long a finished session waits for its client to close, reading what it still sends. */
#define CONN_LINGER_MS 2000

/* What a connection tells its session (none of them after conn_end). */
struct conn_ops {
	/* Bytes from the client, for the session's protocol. */
	void (*input)(void *sess, const uint8_t *data, size_t len);
	/* The output fell under CONN_OUT_LOW after being over CONN_OUT_HIGH. */
	void (*writable)(void *sess);
	/* The client went away (it closed, reset, or a write failed); the session must end the
	 * connection (conn_end) and whatever it serves it. */
	void (*gone)(void *sess);
};

/* One client's connection, the socket non-blocking on the loop. Its output is what conn_put
 * queued, then what its protocol session (sp or ws) holds. */
struct conn {
	struct stream_server *srv;
	struct evloop *loop;
	struct cellmgr *cells;
	int fd;
	uint32_t peer; /* the client's IPv4 address (network order): its bound's key */
	struct evloop_io *io;
	struct spdy_session *sp; /* the protocol, once upgraded: one of the two, the conn's */
	struct ws_session *ws;
	const struct conn_ops *ops;
	void *sess;
	/* conn.c's own */
	struct outq raw;
	struct conn *prev, *next; /* the server's list */
	struct evloop_timer *timer, *wake;
	int depth; /* conn.c's callbacks running: a connection ended in one is freed after */
	bool paused, high, ending, dead;
};

/* A connection for the accepted socket fd (taken) of the client at peer; it counts toward the
 * server's work and its bounds. */
struct conn *conn_new(struct stream_server *srv, int fd, uint32_t peer);
/* Hands the connection's events to a session. */
void conn_attach(struct conn *c, const struct conn_ops *ops, void *sess);
/* Queues raw bytes (an HTTP answer) ahead of the protocol's output. */
void conn_put(struct conn *c, const void *data, size_t len);
/* Writes what the socket takes of the queued output now; the rest goes when it can. */
void conn_flush(struct conn *c);
/* Output queued and not yet written. */
size_t conn_pending(const struct conn *c);
/* Stops (true) or resumes reading the client; a paused connection still sees it leave. */
void conn_pause(struct conn *c, bool paused);
/* The session is done with the client: the output still queued goes out, the socket's write
 * side is shut, and what the client still sends is read for at most linger_ms (a close with
 * unread input would reset the connection and lose the client what it has not read); then the
 * connection closes and frees itself. linger_ms 0: closed at once, output dropped. No callback
 * comes after; the session must not use c again. */
void conn_end(struct conn *c, int linger_ms);
/* An HTTP error answer saying text (http_answer_error's statuses), then conn_end. */
void conn_fail(struct conn *c, int status, const char *text);

/* The server's count of work in progress (connections and sessions, which may outlive their
 * connection while an agent stream winds up): stream_server_stop waits for none. */
void stream_hold(struct stream_server *s);
void stream_release(struct stream_server *s);
/* Adds a live connection to the server's list (live) or takes it off: a stop ends them all. */
void stream_conn_track(struct stream_server *s, struct conn *c, bool live);
/* Adds an agent stream to the server's open ones or takes it off (on the loop). Its stop
 * cancels every one still open, whether or not its session still has a client: a session
 * whose client is gone waits for its stream's end, and only the stop can hurry that. */
void stream_astream_track(struct stream_server *s, struct astream *a, bool open);
/* Whether the server's stop began (on the loop): nothing new is opened to an agent then. */
bool stream_stopping(const struct stream_server *s);
struct evloop *stream_loop(const struct stream_server *s);
struct cellmgr *stream_cells(const struct stream_server *s);

/* An agent stream (cells.h) whose callbacks come to the loop: its owner's ops run there, on_end
 * last. reading and sending say what is in flight; ended, that `end` came (the owner then
 * frees it with astream_free). */
struct astream_ops {
	void (*msg)(void *owner, ProtobufCMessage *msg); /* the owner frees msg */
	void (*sent)(void *owner, int ret);
	void (*end)(void *owner, int ret, const char *error); /* error: NULL when ret is 0 */
};

struct astream {
	struct cell_stream *cs;
	struct evloop *loop;
	struct stream_server *srv;
	const struct astream_ops *ops;
	void *owner;
	bool reading, sending, ended;
	struct astream *prev, *next; /* the server's open streams, which its stop cancels */
};

/* Opens method on the cell's agent with first (see cells_stream_open); on success `sent`
 * follows for first. */
int astream_open(struct astream *a, struct conn *c, const char *cell_id, const char *method,
		 const ProtobufCMessage *first, const ProtobufCMessageDescriptor *out_desc,
		 const struct astream_ops *ops, void *owner, struct err *err);
/* Asks for the next message unless one is asked for or the stream ended. */
void astream_read(struct astream *a);
/* Sends msg: 0 (then `sent`), -EBUSY while one is in flight, -ECANCELED once it cannot. */
int astream_send(struct astream *a, const ProtobufCMessage *msg, struct err *err);
void astream_close_send(struct astream *a);
void astream_cancel(struct astream *a);
/* Frees an open stream whose `end` came; a stream never opened is ignored. */
void astream_free(struct astream *a);

/* Serves an upgrade request for req (owned by the session from here on, freed with
 * stream_request_free): answers the upgrade (or an HTTP error) and runs the session of req's
 * kind. head_rest is what the client sent after its request head. */
void stream_session_start(struct conn *c, const struct http_req *http, struct stream_request *req,
			  const uint8_t *head_rest, size_t rest_len);
/* The port-forward sessions: on an upgraded SPDY connection (c->sp set), or over WebSocket
 * (answering the upgrade of http itself). */
void stream_port_forward(struct conn *c, struct stream_request *req, const uint8_t *rest,
			 size_t rest_len);
void stream_port_forward_ws(struct conn *c, const struct http_req *http, struct stream_request *req,
			    const uint8_t *rest, size_t rest_len);
/* Frees a request the server made for a URL, its copies with it; NULL is ignored. */
void stream_request_free(struct stream_request *r);
/* A session's end: its request, which the server handed to a session (stream_session_start),
 * stops counting toward its pod's bound and is freed. */
void stream_session_done(struct stream_server *s, struct stream_request *req);

/*
 * The ports a port-forward URL's query names, as the kubelet reads them: every "port"
 * parameter (escapes decoded), each a comma-separated list of ports 1-65535, into
 * ports[0..max), their count in *n (0 when none). -EINVAL saying which value is bad, -E2BIG
 * past max ports.
 */
int stream_ports_of_query(const char *target, int32_t *ports, size_t max, size_t *n,
			  struct err *err);

#endif
