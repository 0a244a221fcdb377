/*
 * rpc_server_internal.h: what rpc.c (the server: slots, pools, the acceptor) and rpc_call.c (a
 * served call's life) share; not for other modules.
 */
#ifndef KIYOT_RPC_SERVER_INTERNAL_H
#define KIYOT_RPC_SERVER_INTERNAL_H

#include <grpc/grpc.h>
#include <pthread.h>

#include "arena.h"
#include "rpc.h"

#define RPC_SLOTS 8

struct rpc_call {
	struct rpc_server *srv;
	grpc_call *call;
	grpc_completion_queue *cq;
	grpc_call_details details;
	grpc_metadata_array md;
	struct arena arena;
	ProtobufCMessage **adopted; /* rpc_adopt: freed with the arena */
	size_t n_adopted;
	/* How far the call is, so that the thread that took it (RPC_INLINE) may stop where it
	 * would wait and a worker go on from there. */
	enum {
		STAGE_NEW,	 /* nothing started */
		STAGE_RECEIVING, /* its close watched, its request being received into bb */
		STAGE_RECEIVED,	 /* bb holds the request */
		STAGE_READY,	 /* req holds it decoded: the handler runs next */
		STAGE_FINISHING	 /* its answer started: waiting for it to go and for the close */
	} stage;
	grpc_byte_buffer *bb;
	int watching;		   /* RECV_CLOSE_ON_SERVER started */
	int inline_run;		   /* its handler runs on the thread that took it (rpc_inline) */
	int handed;		   /* its inline handler asked for a worker (RPC_NEEDS_WORKER) */
	int sent;		   /* the answer's batch completed (and observe was told) */
	int status;		   /* the status sent, for observe */
	grpc_byte_buffer *send_bb; /* the answer's message and status details until sent */
	grpc_slice send_details;
	int close_done; /* RECV_CLOSE_ON_SERVER completed */
	int cancelled;	/* what it reported */
	int sent_initial;
	const struct rpc_method *method; /* NULL: unknown */
	int64_t arrived_ns;		 /* clock_mono_ns when the acceptor took it */
	struct rpc_call *next_job;
	/* Parking (rpc_park): the request kept while no thread holds the call, what its handler
	 * noted for its next run, and where the call is (guarded by the server's lock). */
	ProtobufCMessage *req;
	void *note;
	enum {
		CALL_RUNNING,
		CALL_PARKING,
		CALL_PARKED,
		CALL_UNPARKED
	} park;
};

/* One pool of unary workers and its queue (guarded by the server's lock). */
struct pool {
	struct rpc_server *srv;
	char name[32];
	pthread_t *threads;
	int n_threads;
	int max_queue;
	int queued;
	struct rpc_call *head, *tail;
	pthread_cond_t cond;
};

struct rpc_server {
	grpc_server *server;
	grpc_completion_queue *notify_cq;
	const struct rpc_method *methods;
	size_t n_methods;
	void *svc;
	size_t max_message;
	char *peer_name; /* TLS: the identity every caller's certificate must carry, or NULL */
	void (*observe)(void *arg, const char *method, int status, double seconds);
	void *observe_arg;
	struct rpc_call *slots[RPC_SLOTS];
	pthread_t acceptor;
	struct pool pools[RPC_MAX_POOLS];
	size_t n_pools;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* streams ending */
	int stopping;
	int shut_down; /* core said every call ended after the shutdown (its tag came) */
	int streams;   /* streaming calls in flight */
	int parked;    /* calls parked by their handler, not yet queued again */
};

/* Runs one call from where it is (its stage) to its status, on the thread that owns it;
 * RPC_PARKED when its handler parked it instead (the call is not freed then: rpc_call_parked). */
int rpc_call_run(struct rpc_call *c);
/* Runs an RPC_INLINE call as far as it goes without waiting, on the thread that took it: 0
 * once answered (the caller frees it), RPC_PARKED as above, or RPC_NEEDS_WORKER when the rest
 * is for a worker of its pool (rpc_call_run goes on from there): its request not in within
 * RPC_INLINE_RECV_WAIT_MS or
 * larger than RPC_INLINE_MAX_REQUEST, its handler asking for a worker, its answer not gone at
 * once. */
#define RPC_INLINE_MAX_REQUEST (64 * 1024)
/* How long the thread that took an RPC_INLINE call waits for its request to be handed over. */
#define RPC_INLINE_RECV_WAIT_MS 2
int rpc_call_run_inline(struct rpc_call *c);
/* The worker of a call whose handler returned RPC_PARKED lets it go: it waits without a
 * thread until rpc_unpark, or goes back to its pool at once when that came first. */
void rpc_call_parked(struct rpc_call *c);
/* Frees a call: its core call, its memory and its queue. */
void rpc_call_free(struct rpc_call *c);
/* Answers a call that will not run (no thread, a full queue) with status and msg, and frees
 * it. */
void rpc_call_refuse(struct rpc_call *c, int status, const char *msg);

#endif
