/*
 * agent_client.h: how the cell manager (cells.c) reaches a cell's agent. Every call cells.c
 * makes of an agent goes through these operations: kiyot talks gRPC to the real agent
 * (agent_grpc_ops, the default), and a unit test puts a fake agent in its place
 * (test/unit/fake_agent.h) by setting struct kiyot's agent before kiyot_open.
 *
 * Messages are protobuf-c messages of proto/cellagent.proto. A response (*resp) belongs to the
 * caller, who frees it with protobuf_c_message_free_unpacked(resp, NULL); it is written only
 * on success. Errors are negative errno values with err filled, as rpc.h maps gRPC statuses:
 * -ECONNREFUSED when the agent does not serve (UNAVAILABLE), -ETIMEDOUT past the deadline,
 * -ECANCELED when the CRI call the thread serves went away, the agent's own code otherwise.
 *
 * Thread safety: every operation may be called from several threads at once, on one
 * connection too.
 */
#ifndef KIYOT_AGENT_CLIENT_H
#define KIYOT_AGENT_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "cellagent.pb-c.h"
#include "err.h"

/* kiyot's side of the TLS channel to an agent (PEM text, borrowed for the call): the cells'
 * CA, which the agent's certificate must be of, and kiyot's own certificate and key. */
struct agent_tls {
	const char *ca;
	const char *cert;
	const char *key;
};

/* A connection to one cell's agent, a streaming call on one and a Watch; the
 * implementation's. */
struct agent_conn;
struct agent_stream;
struct agent_watch;

/* A Watch's event (freed once the callback returns) and its end (ret 0 for a clean end, else
 * the error as above). */
typedef void agent_watch_event_fn(void *arg, const Kiyot__Cell__V1__WatchEvent *ev);
typedef void agent_watch_end_fn(void *arg, int ret, const struct err *err);

/* What a stream tells its caller (see open_stream): a message of the agent's, which the callee
 * owns (protobuf_c_message_free_unpacked); that a message of kiyot's left (ret 0) or never
 * will (-ECANCELED); the stream's end (ret 0 for a clean end, else the error as above). */
struct agent_stream_cbs {
	void (*on_msg)(void *arg, ProtobufCMessage *msg);
	void (*on_sent)(void *arg, int ret);
	void (*on_end)(void *arg, int ret, const struct err *err);
};

struct agent_ops {
	const char *name;
	/* A connection to the agent of cell_id listening at target ("ip:port"), over TLS with
	 * tls: an agent whose certificate does not name cell_id is never called. Connects
	 * lazily: the first call finds out whether the agent serves. */
	int (*connect)(void *self, const struct agent_tls *tls, const char *cell_id,
		       const char *target, struct agent_conn **out, struct err *err);
	/* Frees a connection; no stream or call may still use it. */
	void (*disconnect)(void *self, struct agent_conn *c);

	/* Whether anything accepts connections at target within timeout_ms: what a boot polls
	 * before it spends a channel on Enroll or Hello. */
	bool (*listening)(void *self, const char *target, int timeout_ms);
	/* Enroll, over plaintext at target: a new cell holds no certificate to talk TLS with
	 * yet (see cell-agent/enroll.h). */
	int (*enroll)(void *self, const char *target, const Kiyot__Cell__V1__EnrollRequest *req,
		      int64_t timeout_ms, Kiyot__Cell__V1__EnrollResponse **resp, struct err *err);
	/* Unary calls, each within timeout_ms. hello is made for kiyot itself; the others on
	 * behalf of the CRI call the calling thread serves, if any (rpc_current()), so that
	 * the kubelet giving up on it cancels the agent's work at once. */
	int (*hello)(void *self, struct agent_conn *c, int64_t timeout_ms,
		     Kiyot__Cell__V1__HelloResponse **resp, struct err *err);
	int (*apply)(void *self, struct agent_conn *c, const Kiyot__Cell__V1__ApplyRequest *req,
		     int64_t timeout_ms, Kiyot__Cell__V1__ApplyResponse **resp, struct err *err);
	int (*pull_image)(void *self, struct agent_conn *c,
			  const Kiyot__Cell__V1__PullImageRequest *req, int64_t timeout_ms,
			  Kiyot__Cell__V1__PullImageResponse **resp, struct err *err);
	int (*exec_sync)(void *self, struct agent_conn *c,
			 const Kiyot__Cell__V1__ExecSyncRequest *req, int64_t timeout_ms,
			 Kiyot__Cell__V1__ExecSyncResponse **resp, struct err *err);
	int (*stats)(void *self, struct agent_conn *c, int64_t timeout_ms,
		     Kiyot__Cell__V1__StatsResponse **resp, struct err *err);
	int (*write_volume)(void *self, struct agent_conn *c,
			    const Kiyot__Cell__V1__WriteVolumeRequest *req, int64_t timeout_ms,
			    Kiyot__Cell__V1__WriteVolumeResponse **resp, struct err *err);

	/* The cell's Watch (WatchEvent messages: unit statuses and log chunks, from req's
	 * offsets on), without a thread of the caller's: on_event for each event, then on_end
	 * once, run in order on the implementation's threads (the real one's: the feed loop's), with
	 * none of the caller's locks held. Returns at once; on failure no callback comes. The
	 * handle may be given to watch_cancel until on_end returned; the implementation frees
	 * it after. */
	int (*watch)(void *self, struct agent_conn *c, const Kiyot__Cell__V1__WatchRequest *req,
		     agent_watch_event_fn *on_event, agent_watch_end_fn *on_end, void *arg,
		     struct agent_watch **out, struct err *err);
	/* Ends a watch: on_end follows (-ECANCELED). From any thread. */
	void (*watch_cancel)(void *self, struct agent_watch *w);

	/* Exec, Attach and PortForward: bidirectional streams without a deadline and without a
	 * thread of the caller's (method "Exec", "Attach" or "PortForward"), started with first,
	 * whose messages are of out_desc. The caller asks for each message (stream_read: one at
	 * a time) and sends one at a time (stream_send, then wait for on_sent), so what is in
	 * flight either way is what it asked for. cbs run on the implementation's threads, with
	 * none of the caller's locks held, and may run at once (on_msg with on_sent); on_end
	 * comes once, after every other callback returned, and is the implementation's last use
	 * of the stream: the caller may stream_free it from then on. Returns at once; on success
	 * on_sent follows for first; on failure no callback comes. */
	int (*open_stream)(void *self, struct agent_conn *c, const char *method,
			   const ProtobufCMessage *first,
			   const ProtobufCMessageDescriptor *out_desc,
			   const struct agent_stream_cbs *cbs, void *arg, struct agent_stream **out,
			   struct err *err);
	/* Asks for the next message (on_msg), or the end (on_end) once the stream ended. */
	void (*stream_read)(void *self, struct agent_stream *s);
	/* One more message: 0 and on_sent follows; -EBUSY while one is in flight, -ECANCELED
	 * once kiyot's side closed or the stream ended. */
	int (*stream_send)(void *self, struct agent_stream *s, const ProtobufCMessage *msg,
			   struct err *err);
	/* Closes kiyot's side, after the message in flight. */
	void (*stream_close_send)(void *self, struct agent_stream *s);
	/* Ends the stream from any thread: on_end follows (-ECANCELED), asked for or not. */
	void (*stream_cancel)(void *self, struct agent_stream *s);
	/* Frees a stream whose on_end came. */
	void (*stream_free)(void *self, struct agent_stream *s);
};

/* An implementation and its state, as struct provider pairs provider_ops with theirs. */
struct agent_client {
	const struct agent_ops *ops;
	void *self;
};

/* The real agents': calls over gRPC (common/rpc.h), Watches over the cell feed (common/feed.h)
 * on the port after the agent's. agent_grpc_new makes its feed loop with `threads` threads;
 * agent_grpc_free frees it once no watch is left. */
extern const struct agent_ops agent_grpc_ops;
int agent_grpc_new(int threads, struct agent_client *out, struct err *err);
void agent_grpc_free(struct agent_client *c);

#endif
