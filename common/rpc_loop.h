/*
 * rpc_loop.h: server-streaming client calls without a thread each. A loop owns one gRPC
 * completion queue and a fixed number of threads that read it; every watch opened on the loop
 * delivers its messages through callbacks those threads run, so a process watching a thousand
 * peers needs the loop's threads, not a thousand.
 *
 * A watch's callbacks run one at a time and in order (a watch has at most one read
 * outstanding), on any of the loop's threads: on_msg for each message, then on_end exactly
 * once. The callbacks may block briefly (they hold up the loop's other watches meanwhile) and
 * must not free the loop.
 *
 *	rpc_loop_new(2, &loop, &err);
 *	rpc_watch_open(loop, ch, "/pkg.Svc/Watch", &req.base, &event_desc, on_msg, on_end,
 *		       arg, &w, &err);
 *	...
 *	rpc_watch_cancel(w);	   on_end follows soon with -ECANCELED
 *
 * The watch belongs to the loop, which frees it once on_end returned: the handle may be used
 * (rpc_watch_cancel) until then, and not after.
 */
#ifndef KIYOT_RPC_LOOP_H
#define KIYOT_RPC_LOOP_H

#include <protobuf-c/protobuf-c.h>

#include "err.h"

struct rpc_channel;
struct rpc_loop;
struct rpc_watch;

/* One message of the stream; it is freed when the callback returns. */
typedef void rpc_watch_msg_fn(void *arg, const ProtobufCMessage *msg);
/* The end of the stream: ret 0 for a clean end (the server's OK), else a negative errno with
 * err filled as rpc.h maps statuses (-ECONNREFUSED when the peer does not serve, -ECANCELED
 * after rpc_watch_cancel, -EINVAL for a message that does not parse). */
typedef void rpc_watch_end_fn(void *arg, int ret, const struct err *err);

/* A loop with `threads` threads (at least 1). */
int rpc_loop_new(int threads, struct rpc_loop **out, struct err *err);
/* Stops the loop's threads and frees it; every watch opened on it must have ended (its on_end
 * returned). */
void rpc_loop_free(struct rpc_loop *l);

/* Opens a server-streaming call of method on ch with req (without a deadline), whose messages
 * are of msg_desc. Returns at once: connecting, sending and every answer happen on the loop.
 * On success *out is the watch's handle and on_end will be called; on failure (-EIO: gRPC
 * refused to start the call) no callback is. */
int rpc_watch_open(struct rpc_loop *l, struct rpc_channel *ch, const char *method,
		   const ProtobufCMessage *req, const ProtobufCMessageDescriptor *msg_desc,
		   rpc_watch_msg_fn *on_msg, rpc_watch_end_fn *on_end, void *arg,
		   struct rpc_watch **out, struct err *err);
/* Ends the watch: a message being handled finishes, then on_end follows with -ECANCELED
 * (or the status it already had). From any thread, until on_end returned. */
void rpc_watch_cancel(struct rpc_watch *w);

#endif
