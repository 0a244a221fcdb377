/*
 * rpc_loop.h: streaming client calls without a thread each: server-streaming watches and
 * bidirectional calls (below). A loop owns one gRPC completion queue and a fixed number of
 * threads that read it; every call opened on the loop delivers its messages through callbacks
 * those threads run, so a process watching a thousand peers needs the loop's threads, not a
 * thousand.
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
/* Stops the loop's threads and frees it; every watch and bidirectional call opened on it must
 * have ended (its on_end returned). */
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

/* ---- bidirectional calls ----
 *
 * A call whose client sends messages while it reads the server's, neither side waiting on the
 * other: the client asks for each message (rpc_bidi_read) and sends one at a time
 * (rpc_bidi_send, on_sent when it left), so what it holds of either direction is bounded by
 * what it asked for.
 *
 *	rpc_bidi_open(loop, ch, "/pkg.Svc/Exec", &first.base, &out_desc, &cbs, arg, &b, &err);
 *	rpc_bidi_read(b);		  on_msg(arg, msg): take it, then rpc_bidi_read again
 *	rpc_bidi_send(b, &in.base, &err);  after on_sent for the one before
 *	rpc_bidi_close_send(b);
 *	...on_end(arg, ret, err)	  then rpc_bidi_free(b)
 *
 * The callbacks run on the loop's threads and may run at once (on_msg with on_sent); on_end
 * comes once, after every other callback returned, and is the last thing the loop does with
 * the call: from then on (in on_end too) its owner may free it. The on_msg calls come in the
 * stream's order, each after the rpc_bidi_read that asked for it, so an on_msg that reads again
 * before it returns may see the next one begin on another thread meanwhile; the same holds for
 * on_sent and rpc_bidi_send. The callbacks may call rpc_bidi_read, _send, _close_send and
 * _cancel.
 *
 * The end is learnt by reading: on_end comes once a read found the stream's end (the
 * server's status), or after rpc_bidi_cancel, never while the owner reads nothing; an owner
 * that stops reading before the end cancels to get it.
 */
struct rpc_bidi;

struct rpc_bidi_cbs {
	/* A message of the server's, which the callee owns (protobuf_c_message_free_unpacked). */
	void (*on_msg)(void *arg, ProtobufCMessage *msg);
	/* A message of the client's (the first one's too) left: ret 0, or -ECANCELED when the
	 * call ended first. */
	void (*on_sent)(void *arg, int ret);
	/* The call's end, as rpc_watch_end_fn says. */
	void (*on_end)(void *arg, int ret, const struct err *err);
};

/* Opens a bidirectional call of method on ch (without a deadline), sending first; the
 * server's messages are of msg_desc; cbs is copied, and its three callbacks must be set.
 * Returns at once; on success on_sent follows for first and on_end at the end; on failure
 * (-EIO: gRPC refused to start the call) no callback. *out is set before any callback runs
 * (on_sent may run before rpc_bidi_open returned), so callbacks may read it from where it
 * points. */
int rpc_bidi_open(struct rpc_loop *l, struct rpc_channel *ch, const char *method,
		  const ProtobufCMessage *first, const ProtobufCMessageDescriptor *msg_desc,
		  const struct rpc_bidi_cbs *cbs, void *arg, struct rpc_bidi **out,
		  struct err *err);
/* Asks for the server's next message: on_msg follows, or, when the stream ended, on_end. One
 * at a time: ask again once on_msg came (asking while a read is outstanding does nothing).
 * Does nothing once the end is known. */
void rpc_bidi_read(struct rpc_bidi *b);
/* Sends msg (packed at once: it stays the caller's): 0 and on_sent follows; -EBUSY while a
 * send is in flight (wait for its on_sent), -ECANCELED once the client's side was closed or
 * the end is known (a read found it, a message did not parse, rpc_bidi_cancel). */
int rpc_bidi_send(struct rpc_bidi *b, const ProtobufCMessage *msg, struct err *err);
/* Closes the client's side, once the send in flight (if any) left: the server sees the end of
 * the client's messages. No callback of its own; nothing once the end is known. */
void rpc_bidi_close_send(struct rpc_bidi *b);
/* Ends the call from any thread: on_end follows with -ECANCELED (or the status the call
 * already had), whether or not a read is asked; messages not yet read are dropped (a read that
 * completes after it brings no on_msg). A send in flight gets its on_sent first. */
void rpc_bidi_cancel(struct rpc_bidi *b);
/* Frees a call whose on_end came (in on_end, or after it on any thread). NULL is ignored. */
void rpc_bidi_free(struct rpc_bidi *b);

#endif
