/*
 * rpc.h: gRPC servers and clients over gRPC's C core, with protobuf-c messages.
 *
 * Only common/rpc*.c include <grpc/grpc.h>. Handlers take a decoded request and fill a
 * response; they never see gRPC types.
 *
 * Server model: one thread waits for new calls on a notification queue; every call then
 * belongs to one worker thread, which reads the request, runs the handler and sends the answer
 * on the call's own queue. Methods flagged RPC_INLINE are answered by the waiting thread
 * itself when that needs no wait (their request is in, their handler does not ask for a
 * worker, their answer goes out at once): on a busy CPU the wake-up of a worker costs more
 * than such a call. Unary methods run on worker pools: each method names its pool in the
 * table, and each pool has threads and a bounded queue of its own, so calls that may wait for
 * long (an image pull, a cell's launch) never hold the threads that answer fast ones (Version,
 * Status) however many of them are stuck. Streaming methods get a thread of their own for their
 * lifetime, since they live as long as the client listens. Unknown methods answer UNIMPLEMENTED
 * at once.
 *
 * Cancellation: while a handler runs, its thread is in a cancel scope (cancel.h) that reports
 * the client's going away (its cancel, its deadline, its disconnection), and rpc_current()
 * names the call, so work deep below (a registry transfer, a call to another server with
 * rpc_unary_for) stops with the call. A call whose client left while it waited in its pool's
 * queue is not run at all.
 *
 * Memory: the response and everything a handler hangs on it are allocated from the call's
 * arena (rpc_alloc, rpc_strdup, rpc_msg_new) and freed after the response is sent, so nothing
 * in a response may point at memory the handler frees itself; string literals are fine.
 *
 * Errors: a handler returns 0 or a negative errno with err filled; the errno picks the gRPC
 * status (ENOENT NOT_FOUND, EINVAL INVALID_ARGUMENT, EEXIST ALREADY_EXISTS, ENOSYS
 * UNIMPLEMENTED, ETIMEDOUT DEADLINE_EXCEEDED, ECONNREFUSED/EHOSTUNREACH/EAGAIN UNAVAILABLE,
 * EPERM PERMISSION_DENIED, EFBIG RESOURCE_EXHAUSTED, EBUSY FAILED_PRECONDITION, ECANCELED
 * CANCELLED, others UNKNOWN) and err->msg becomes the status message. Clients map statuses
 * back to the same errno values.
 */
#ifndef KIYOT_RPC_H
#define KIYOT_RPC_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct rpc_server;
struct rpc_call;

enum rpc_method_flags {
	RPC_SERVER_STREAM = 1 << 0, /* handler sends with rpc_send; resp is NULL */
	/* Also reads the client's later messages with rpc_recv (req is the first one); may send
	 * from one thread while it reads in another. */
	RPC_BIDI_STREAM = 1 << 1,
	/* Unary calls answered on the thread that took them (rpc_inline), without the hand-off
	 * to a worker of their pool, when their request came with them: cheap calls that only
	 * read what the process holds. Such a handler never waits: where it might (a lock other
	 * work holds, a call to another server, the disk), it returns RPC_NEEDS_WORKER first and
	 * runs again on its pool. */
	RPC_INLINE = 1 << 2,
};

/* A handler. svc is the server's context; req is never NULL (an absent message decodes as the
 * empty message). For unary methods resp is an initialised message of the method's response
 * type, allocated in the call's arena. */
typedef int rpc_handler(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			ProtobufCMessage *resp, struct err *err);
typedef rpc_handler *rpc_handler_fn;

struct rpc_method {
	const char *path; /* "/runtime.v1.RuntimeService/Version" */
	const ProtobufCMessageDescriptor *req;
	const ProtobufCMessageDescriptor *resp;
	rpc_handler_fn handler;
	unsigned flags;
	unsigned pool; /* unary methods: index into rpc_server_config.pools (0: the first) */
};

/* A pool of worker threads for unary calls. Calls wait in its queue, oldest first, while its
 * threads are busy; past max_queue waiting calls a new one is answered RESOURCE_EXHAUSTED at
 * once, naming the pool. */
struct rpc_pool {
	const char *name; /* for messages: "pull", "fast"; copied */
	int threads;	  /* 0 picks 8 */
	int max_queue;	  /* 0 picks 4096 */
};

#define RPC_MAX_POOLS 5

/* TLS both ways (PEM text, not copied: it must outlive the call it is passed to). A server
 * presents cert/key and takes only clients whose certificate the CA issued and whose identity
 * (its certificate's DNS name, or its common name without one) is peer_name; a client trusts
 * only servers the CA certified for peer_name (whatever the target's address), and presents
 * cert/key. A TLS client channel closes its connection once it carried no call for
 * RPC_CLIENT_IDLE_MS (gRPC's idle timer: closed 5-10 s after the last call, seen with ss);
 * the next call opens one again. */
#define RPC_CLIENT_IDLE_MS 5000
/* The least a client channel's connection attempt is given (connect, TLS handshake, the
 * peer's first HTTP/2 SETTINGS), whatever its reconnect back-off; a call's own deadline still
 * bounds its wait. A busy node or a slow link takes hundreds of milliseconds for a handshake. */
#define RPC_CONNECT_TIMEOUT_MS 10000
struct rpc_tls {
	const char *ca_pem;
	const char *cert_pem;
	const char *key_pem;
	const char *peer_name;
};

struct rpc_server_config {
	const char *address;		  /* "unix:///run/kiyot/kiyot.sock" or "10.77.0.2:7443" */
	const struct rpc_method *methods; /* the table; must outlive the server */
	size_t n_methods;
	void *svc; /* passed to every handler */
	/* The worker pools; every unary method's pool must be below n_pools. With n_pools 0 there
	 * is one pool of `workers` threads (0 picks 8). */
	struct rpc_pool pools[RPC_MAX_POOLS];
	size_t n_pools;
	int workers;
	size_t max_message; /* receive limit; 0 picks 16 MiB, like the kubelet */
	/* When tls.ca_pem is set, the server speaks TLS only and answers a call from any other
	 * peer than tls.peer_name UNAUTHENTICATED; plaintext otherwise. */
	struct rpc_tls tls;
	/* When set, called once for every call the server answers (refused ones included), on
	 * the thread that sent its status: method is the table's path (NULL for a method not in
	 * it), status the gRPC status code sent, seconds the time from the call's arrival to its
	 * status. It runs on the calls' threads: it must be quick and must not block. */
	void (*observe)(void *arg, const char *method, int status, double seconds);
	void *observe_arg;
};

/* Initialises gRPC once per process (safe to call many times) and routes its logs to log.h. */
void rpc_global_init(void);

/* Binds and starts serving. For a unix address the socket's parent directory must exist.
 * -EINVAL when a method names a pool the config lacks; -EADDRINUSE when the address cannot be
 * bound, as when another server (of this process or another) listens on the same TCP address
 * and port: listeners never share a port (no SO_REUSEPORT). */
int rpc_server_start(const struct rpc_server_config *cfg, struct rpc_server **out, struct err *err);
/* Stops accepting, cancels calls in flight, waits for workers and frees the server. */
void rpc_server_stop(struct rpc_server *s);
/* The same, but calls in flight get up to grace_ms to end on their own (their answers sent)
 * before the rest are cancelled: a server that stops right after a handler's answer (the
 * agent's plaintext one after Enroll) lets that answer go out, and waits no longer than it
 * takes. */
void rpc_server_stop_within(struct rpc_server *s, int grace_ms);

/* Call-arena allocation: zeroed memory freed after the response is sent. Never NULL. */
void *rpc_alloc(struct rpc_call *c, size_t n);
char *rpc_strdup(struct rpc_call *c, const char *s);
/* The call's arena itself (arena.h), for code that builds messages in any arena. */
struct arena *rpc_arena(struct rpc_call *c);
char *rpc_strndup(struct rpc_call *c, const char *s, size_t n);
/* A new initialised message of type desc in the arena. */
void *rpc_msg_new(struct rpc_call *c, const ProtobufCMessageDescriptor *desc);
/* Hands the call a message unpacked elsewhere (e.g. an rpc_unary answer), so the response may
 * point into it: it is freed with protobuf_c_message_free_unpacked with the arena. */
void rpc_adopt(struct rpc_call *c, ProtobufCMessage *msg);

/* Parking: a unary handler that has to wait for its turn (a bound on calls in flight to one
 * peer) gives its worker back rather than blocking it, so that calls queued behind it in its
 * pool, for other peers, still run. It calls rpc_park and returns RPC_PARKED; the call then
 * holds no thread until someone calls rpc_unpark, which puts it at the head of its pool's
 * queue, and a worker runs the handler again from the start with the same request (and a new
 * response). What the handler wants to find on that run it keeps with rpc_set_note (the note
 * is the call's until the handler clears it). Every parked call must be unparked exactly once,
 * also while the server stops: rpc_server_stop waits for parked calls, and a call's client
 * having gone away shows (rpc_cancelled) only once it runs again. rpc_unpark may come from any
 * thread at any time after rpc_park, even before the handler returned. */
#define RPC_PARKED 0x7061726b /* "park": no handler's count or errno */
/* An RPC_INLINE handler running inline that would have to wait returns RPC_NEEDS_WORKER
 * before it changed anything: the call goes to its pool, and a worker runs the handler again
 * from the start with the same request (and a new response). rpc_inline says where it runs. */
#define RPC_NEEDS_WORKER 0x776f726b /* "work" */
bool rpc_inline(struct rpc_call *c);
void rpc_park(struct rpc_call *c);
void rpc_unpark(struct rpc_call *c);
void rpc_set_note(struct rpc_call *c, void *note);
void *rpc_note(struct rpc_call *c);

/* Streaming handlers: send one message, blocking until gRPC took it. Fails with -ECANCELED
 * once the client went away. */
int rpc_send(struct rpc_call *c, const ProtobufCMessage *msg, struct err *err);
/* Non-zero once the client cancelled, disconnected or passed its deadline (cheap; safe to poll
 * from one thread). */
int rpc_cancelled(struct rpc_call *c);
/* The call whose handler runs on this thread; NULL on any other thread (a handler's helper
 * threads, a server's own background threads). */
struct rpc_call *rpc_current(void);
/* Ends the call at once with CANCELLED: a blocked rpc_recv or rpc_send in another thread of
 * the handler returns. For a caller that does not close its side when it should. */
void rpc_call_cancel(struct rpc_call *c);
/* Bidirectional handlers: waits for the client's next message: 1 with *msg set (the caller
 * frees it with protobuf_c_message_free_unpacked), 0 once the client closed its side, -ECANCELED
 * when it went away, -EFBIG/-EINVAL for a message too large or malformed. */
int rpc_recv(struct rpc_call *c, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg,
	     struct err *err);

/* ---- clients ----
 * Blocking calls here; calls that many threads' worth of peers keep open (watches,
 * bidirectional calls) run on a completion-queue loop instead: rpc_loop.h. */
struct rpc_channel;
struct rpc_stream;

/* target: "unix:///path" or "host:port"; plaintext. */
int rpc_channel_new(const char *target, struct rpc_channel **out, struct err *err);
/* The same over TLS (struct rpc_tls): a server that cannot show a certificate of tls->ca_pem
 * naming tls->peer_name is never sent a call; calls fail UNAVAILABLE. */
int rpc_channel_new_tls(const char *target, const struct rpc_tls *tls, struct rpc_channel **out,
			struct err *err);
void rpc_channel_free(struct rpc_channel *ch);

/* A channel holds gRPC's channel (~8 KB: its resolver, balancer, subchannel and filters, kept
 * after the connection closed) only while it is used: once no call used it for
 * RPC_CHANNEL_RELEASE_MS it lets it go, and the next call makes it again. A thread of the
 * process looks every RPC_CHANNEL_TICK_MS. Channels made from one CA, certificate and key
 * share their credentials. */
#define RPC_CHANNEL_RELEASE_MS 15000
#define RPC_CHANNEL_TICK_MS 1000
/* For tests: ch's release time, and whether it holds gRPC's channel now. */
void rpc_channel_set_release_ms(struct rpc_channel *ch, int64_t ms);
bool rpc_channel_holds(struct rpc_channel *ch);

/* One unary call. On success *resp is a message of resp_desc the caller frees with
 * protobuf_c_message_free_unpacked(*resp, NULL). timeout_ms <= 0 means 2 minutes. */
int rpc_unary(struct rpc_channel *ch, const char *method, const ProtobufCMessage *req,
	      const ProtobufCMessageDescriptor *resp_desc, int64_t timeout_ms,
	      ProtobufCMessage **resp, struct err *err);

/* rpc_unary made on behalf of parent, a call this process serves (usually rpc_current()): it
 * ends with -ECANCELED as soon as parent's client goes away, and its deadline is never later
 * than parent's. With parent NULL it is rpc_unary. Call it from parent's handler thread. */
int rpc_unary_for(struct rpc_call *parent, struct rpc_channel *ch, const char *method,
		  const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
		  int64_t timeout_ms, ProtobufCMessage **resp, struct err *err);

/* rpc_unary_for for a call that may be made twice (it asks for a state, or sets one whole):
 * when the first try fails UNAVAILABLE (no connection could be made or the connection broke:
 * a busy peer, a restarted one) it is tried once more within what is left of timeout_ms,
 * waiting at most RPC_RETRY_WAIT_MS for the channel to connect instead of failing at once. */
#define RPC_RETRY_WAIT_MS 3000
int rpc_unary_idempotent(struct rpc_call *parent, struct rpc_channel *ch, const char *method,
			 const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
			 int64_t timeout_ms, ProtobufCMessage **resp, struct err *err);

/* A server-streaming call. timeout_ms <= 0: no deadline. */
int rpc_stream_open(struct rpc_channel *ch, const char *method, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *msg_desc, int64_t timeout_ms,
		    struct rpc_stream **out, struct err *err);
/* Waits for the next message: 1 with *msg set (free as above), 0 at a clean end, <0 on error
 * (the server's status, or -ECANCELED after rpc_stream_cancel). */
int rpc_stream_next(struct rpc_stream *s, ProtobufCMessage **msg, struct err *err);
/* Makes a blocked rpc_stream_next return; safe from any thread. */
void rpc_stream_cancel(struct rpc_stream *s);
void rpc_stream_free(struct rpc_stream *s);

/* errno <-> gRPC status code mapping used by both sides (exposed for tests). */
int rpc_status_from_errno(int code);
int rpc_errno_from_status(int status);

#endif
