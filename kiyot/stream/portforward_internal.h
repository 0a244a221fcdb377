/*
 * portforward_internal.h: what the two halves of a port-forward session share: the session
 * (portforward.c: the client's protocol, SPDY or WebSocket, on one socket thread) and its
 * pairs (portforward_pair.c: one connection each to the pod, with a reader and a writer
 * thread). pf->mu guards the queues and the flags marked so; the socket thread alone touches
 * the protocol sessions and pf->pairs.
 */
#ifndef KIYOT_PORTFORWARD_INTERNAL_H
#define KIYOT_PORTFORWARD_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cellmgr;
struct cell_stream;
struct spdy_session;
struct ws_session;

/* Bytes queued per direction and pair before the producer waits. */
#define PF_QUEUE_MAX (1024 * 1024)
/* The most of the client's bytes joined into one message to the agent. */
#define PF_SEND_MAX (256 * 1024)
/* The most of the pod's bytes read at once from a pair's own connection. */
#define PF_READ_MAX (128 * 1024)
/* After the pod's side ended its output, how long the connection lasts without a byte moving
 * from the client to the pod. */
#define PF_HALF_CLOSE_IDLE_NS (1000 * (int64_t)1000000)
/* Pairs at once (two streams each, within the SPDY session's bound). */
#define PF_MAX_PAIRS 32

struct pf_msg {
	struct pf_msg *next;
	struct pf_pair *pair;
	bool end;    /* to the client: the pod's side ended (error set if it failed) */
	bool fin;    /* to the client: the pod's output ended (it may still read) */
	char *error; /* to the client, with end */
	size_t len;
	uint8_t data[];
};

struct pf_pair {
	struct pf *pf;
	char *request_id;
	uint32_t port;
	uint32_t data_sid, error_sid; /* SPDY streams; over WebSocket, channels */
	struct cell_stream *cs;	      /* the pod side: the agent's stream, */
	int sock;		      /* or a connection of kiyot's own (-1 when none) */
	bool started, dropped;
	pthread_t reader, writer;
	/* client bytes for the agent; guarded by pf->mu */
	struct pf_msg *in_head, *in_tail;
	size_t in_bytes;
	bool in_closed;
	int64_t moved_ns; /* when the client's bytes last moved toward the pod */
	bool client_done; /* the client's end reached the pod */
	bool pod_failed;  /* the pod's side took no more of the client's bytes */
	size_t out_bytes; /* of this pair in pf->out */
};

struct pf {
	struct cellmgr *cells;
	const char *cell_id;
	bool host_network;
	int fd;
	struct spdy_session *sp; /* the client's protocol: one of the two */
	struct ws_session *ws;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct pf_msg *out_head, *out_tail; /* agent bytes for the client, all pairs */
	struct pf_pair *pairs[PF_MAX_PAIRS];
	int wake[2];
	bool gone;
	int live;  /* WebSocket: pairs whose connection has not ended */
	bool over; /* WebSocket: all ended, the close is sent */
};

/* A pair for a connection to port, its pod side not yet made. */
struct pf_pair *pair_new(struct pf *pf, const char *request_id, uint32_t port);
/* Makes the pair's pod side (its own connection, or else the agent's stream) once both its
 * streams are there, and starts its threads; a failure is queued for the client. */
void pair_start(struct pf_pair *p);
/* Whether the pair's pod side is there (its threads run). */
bool pair_live(const struct pf_pair *p);
/* The client's bytes (or their end) for the pod. */
void pair_input(struct pf_pair *p, const uint8_t *data, size_t len, bool end);
/* Ends a pair: its pod side stopped (at once when cancel), its threads joined, what it still
 * queued dropped, its slot free, the pair freed. On the socket thread. */
void pair_finish(struct pf *pf, struct pf_pair *p, bool cancel);

#endif
