/*
 * streamrec.h: an agent stream's callbacks (agent_client.h's agent_stream_cbs) recorded under
 * a lock, so that a test drives an asynchronous stream as a blocking reader would: ask for a
 * message, then take it; send, then wait for its on_sent; cancel, then wait for the end.
 *
 *	struct streamrec r;
 *	streamrec_init(&r);
 *	ops->open_stream(..., &streamrec_cbs, &r, &s, &err);
 *	ops->stream_read(self, s);  ret = streamrec_take(&r, &m);   1 with m, else the end's
 *	streamrec_wait_end(&r);  r.late says whether a callback came after on_end
 *
 * A record must outlive the stream's last callback: tests keep theirs static.
 */
#ifndef KIYOT_TEST_STREAMREC_H
#define KIYOT_TEST_STREAMREC_H

#include <pthread.h>
#include <stdbool.h>

#include "cells/agent_client.h"

struct streamrec {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	ProtobufCMessage *msg; /* the message asked for, until taken */
	int sent;	       /* on_sent calls that said 0 */
	bool ended;
	int ret;   /* on_end's */
	bool late; /* a callback came after on_end */
};

extern const struct agent_stream_cbs streamrec_cbs;

void streamrec_init(struct streamrec *r);
/* Waits for the message asked for (1, *m the caller's to free) or the end (0 or its error). */
int streamrec_take(struct streamrec *r, ProtobufCMessage **m);
/* Waits until n on_sent calls said 0, or the end; returns how many did. */
int streamrec_wait_sent(struct streamrec *r, int n);
/* Waits for on_end; returns its ret. */
int streamrec_wait_end(struct streamrec *r);

#endif
