/*
 * feed.h: the cell feed, the channel an agent pushes its cell's news to kiyot on (unit
 * statuses, log lines, resource usage), kept lean because kiyot holds one per live cell.
 *
 * The protocol. kiyot connects to the agent's feed port over TCP and speaks TLS 1.3 with the
 * certificates of the gRPC channel (pki.h): the agent takes only a client certificate naming
 * kiyot, kiyot only a server certificate naming the cell it means; both offer the ALPN
 * protocol "kiyot-feed/1" and nothing else. kiyot then sends one frame (frame.h), the
 * request; the agent answers with frames until either side closes the connection, and reads
 * nothing more (bytes from kiyot after the request end the feed). Frames are protobuf
 * messages; which ones is the caller's (the agent's Watch: a WatchRequest, then WatchEvents).
 *
 * Why not a gRPC stream: libgrpc's client keeps about 170 KB for each TLS connection with a
 * stream open (BIO pairs, record and frame buffers, a TLS context per channel). A feed here is
 * a socket and an SSL session that drops its buffers while idle (SSL_MODE_RELEASE_BUFFERS),
 * one TLS context for all, and read by a few threads with epoll.
 *
 * The client (kiyot): a loop of a fixed number of threads, each with an epoll set; every
 * feed is connected, handshaken and read without blocking on one of them, so its callbacks
 * run in order and never overlap. The server (an agent): a thread for each connection (an
 * agent has one client), blocking I/O with time limits.
 */
#ifndef KIYOT_FEED_H
#define KIYOT_FEED_H

#include <openssl/ssl.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define FEED_ALPN "kiyot-feed/1"
/* An agent serves its feed on the port after its gRPC one. */
#define FEED_PORT(grpc_port) ((grpc_port) + 1)
/* A TCP connect and the TLS handshake, and on the server the request, within this. */
#define FEED_HANDSHAKE_MS 10000
#define FEED_PENDING_PER_PEER 4

/* The feed's "ip:port" for an agent's gRPC "ip:port" (port 1-65534); *out is the caller's. */
int feed_address(const char *grpc_target, char **out, struct err *err);

/* ---- client ---- */

struct feed_loop;
struct feed_watch;

/* A message (freed when the callback returns) and the feed's end: ret 0 when the server
 * closed it, else a negative errno with err: -ECONNREFUSED when the server cannot be reached
 * or its TLS fails (a certificate that does not verify or names another peer), -ETIMEDOUT
 * when the connection or handshake took too long or the peer stopped answering TCP,
 * -ECANCELED after feed_cancel, -EMSGSIZE/-EPROTO for a frame too long or one that does
 * not parse. */
typedef void feed_msg_fn(void *arg, const ProtobufCMessage *msg);
typedef void feed_end_fn(void *arg, int ret, const struct err *err);

int feed_loop_new(int threads, struct feed_loop **out, struct err *err);
/* Frees the loop; every feed must have ended (its end callback returned). */
void feed_loop_free(struct feed_loop *l);

struct feed_open_args {
	SSL_CTX *ctx;	       /* pki_tls_ctx(PKI_CLIENT); each feed holds a reference */
	const char *target;    /* "ip:port" */
	const char *peer_name; /* what the server's certificate must name */
	const ProtobufCMessage *request;
	const ProtobufCMessageDescriptor *msg_desc; /* what the server sends */
	size_t max_frame;			    /* the longest message taken */
	int handshake_ms; /* the connect and the handshake within this; 0: FEED_HANDSHAKE_MS */
	feed_msg_fn *on_msg;
	feed_end_fn *on_end;
	void *arg;
};

/* Starts a feed: returns at once; on failure (a bad target, no socket) no callback comes.
 * Otherwise on_msg for each message, then on_end once, on one of the loop's threads, none of
 * the caller's locks held. The handle may be given to feed_cancel until on_end returned; the
 * loop frees it after. */
int feed_open(struct feed_loop *l, const struct feed_open_args *a, struct feed_watch **out,
	      struct err *err);
/* Ends a feed from any thread; on_end follows (-ECANCELED) unless it is already on its way. */
void feed_cancel(struct feed_watch *w);

/* ---- server ---- */

struct feed_server;
struct feed_conn;

/* A session: serves one client's request (of the config's req_desc) until the client goes
 * (feed_gone) or a send fails; the server closes the connection when it returns. */
typedef void feed_session_fn(void *arg, struct feed_conn *c, const ProtobufCMessage *req);

struct feed_server_config {
	const char *address; /* "ip:port" */
	SSL_CTX *ctx;	     /* pki_tls_ctx(PKI_SERVER, the client's name); the server's ref */
	const ProtobufCMessageDescriptor *req_desc;
	size_t max_request;
	int max_conns; /* connections served at once; more are closed at accept */
	/* Connections one address may have open before they become a session (handshaking,
	 * or sending nothing): more are closed at accept, so a neighbour holding handshakes
	 * open cannot keep kiyot out. 0: FEED_PENDING_PER_PEER. */
	int max_pending_per_peer;
	/* Sessions at once; 0: no limit. Past it a new session ends the oldest (most likely
	 * one whose kiyot went away without its connection closing). */
	int max_sessions;
	feed_session_fn *session;
	void *arg;
};

/* Binds and starts accepting: -EADDRINUSE when the address is taken. */
int feed_server_start(const struct feed_server_config *cfg, struct feed_server **out,
		      struct err *err);
/* The port the server listens on (what port 0 in the address picked). */
int feed_server_port(const struct feed_server *s);
/* Stops accepting, ends every session (their sends fail, feed_gone turns true), waits for
 * them and frees the server and its reference to the context. */
void feed_server_stop(struct feed_server *s);

/* Sends msg as one frame; blocks while the client reads slowly, and fails (-ETIMEDOUT) when
 * it reads nothing for 30 s, or (-EPIPE) once it is gone. */
int feed_send(struct feed_conn *c, const ProtobufCMessage *msg, struct err *err);
/* Whether the client closed (or sent anything after its request), or the server stops. */
bool feed_gone(struct feed_conn *c);

#endif
