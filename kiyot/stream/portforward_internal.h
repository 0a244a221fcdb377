/*
 * portforward_internal.h: what the two halves of a port-forward session share: the session
 * (portforward.c: the client's protocol, SPDY or WebSocket, on its connection) and its pairs
 * (portforward_pair.c: one connection each to the pod, a socket of kiyot's own on the loop or
 * the agent's PortForward stream). All of it runs on the streaming server's loop.
 */
#ifndef KIYOT_PORTFORWARD_INTERNAL_H
#define KIYOT_PORTFORWARD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chunkq.h"
#include "stream_internal.h"

/* The client's bytes held per pair for the pod before the client is no longer read. */
#define PF_QUEUE_MAX (1024 * 1024)
/* The most of the client's bytes joined into one message to the agent. */
#define PF_SEND_MAX (256 * 1024)
/* The most of the pod's bytes read at once from a pair's own connection. */
#define PF_READ_MAX (128 * 1024)
/* After the pod's side ended its output, how long the connection lasts without a byte moving
 * from the client to the pod. */
#define PF_HALF_CLOSE_IDLE_MS 1000
/* Pairs at once (two streams each, within the SPDY session's bound). */
#define PF_MAX_PAIRS 32

struct pf_pair {
	struct pf *pf;
	char *request_id;
	uint32_t port;
	uint32_t data_sid, error_sid; /* SPDY streams; over WebSocket, channels */
	/* the pod's side: the agent's stream (as.cs set) or a connection of kiyot's own */
	struct astream as;
	int sock;
	struct evloop_io *sio;
	bool started;
	/* toward the pod */
	struct chunkq in;
	int64_t moved_ns; /* when the client's bytes last moved toward the pod */
	bool client_done; /* the client's end reached the pod */
	bool end_queued;  /* the client's end is among the chunks */
	/* from the pod */
	bool out_ended; /* the pod's output ended (the client was told) */
	bool ended;	/* the pair's end was told to the client (or nobody is left to tell) */
	struct evloop_timer *idle;
	struct pf_pair *next_all; /* pf->all */
};

struct pf {
	struct stream_server *srv;
	struct conn *c; /* NULL once the client's side ended */
	struct stream_request *req;
	struct pf_pair *pairs[PF_MAX_PAIRS]; /* the pairs the client still addresses */
	struct pf_pair *all;		     /* every pair not yet freed */
	int depth;			     /* calls into the session running */
	bool out_paused;		     /* the client has too much to read: pods wait */
};

/* A pair for a connection to port, in a free slot (NULL when none is). */
struct pf_pair *pair_new(struct pf *pf, const char *request_id, uint32_t port);
/* Makes the pair's pod side: its own connection, or else the agent's stream; a failure is
 * told to the client and ends the pair. */
void pair_start(struct pf_pair *p);
/* Whether the pair's pod side is there and takes the client's bytes. */
bool pair_live(const struct pf_pair *p);
/* The client's bytes (or their end) for the pod. */
void pair_input(struct pf_pair *p, const uint8_t *data, size_t len, bool end);
/* The client reset the pair's streams or left: its pod side is dropped (the agent's stream
 * cancelled), nothing more is told. */
void pair_drop(struct pf_pair *p);
/* The client's room for output changed (pf->out_paused): the pod is read or not. */
void pair_output_update(struct pf_pair *p);
/* Whether the pair holds more of the client's bytes than PF_QUEUE_MAX. */
bool pair_full(const struct pf_pair *p);

/* Every way into a session (a callback of its connection, of a pair's socket, agent stream or
 * timer) holds it: nothing is freed until the last one leaves, which then frees the pairs
 * that are done and the session if it is. */
struct pf *pf_enter(struct pf *pf);
void pf_leave(struct pf *pf);
/* Frees the pairs that ended and whose pod side is gone. */
void pairs_sweep(struct pf *pf);

/* portforward.c's side, for the pairs: bytes of the pod on the pair's data stream; the pod's
 * output ended; the pair's end (told to the client with error, or NULL, when tell); a pair's
 * queue changed (the client is read while no pair is full). */
void pf_pod_data(struct pf *pf, struct pf_pair *p, const uint8_t *data, size_t len);
void pf_pod_output_ended(struct pf *pf, struct pf_pair *p);
void pf_pair_ended(struct pf *pf, struct pf_pair *p, const char *error, bool tell);
void pf_update_pause(struct pf *pf);

#endif
