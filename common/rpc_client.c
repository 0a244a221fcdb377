/*
 * rpc_client.c: blocking unary and server-streaming calls over gRPC core. Each call owns a
 * pluck completion queue, so any number of threads may call at once on one channel. A call made
 * on behalf of a served one (rpc_unary_for) is core's child of it: core cancels it when the
 * parent's client goes away and caps its deadline at the parent's, with no thread polling.
 */
#include "rpc.h"

#include <errno.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <string.h>

#include "rpc_internal.h"
#include "xalloc.h"

struct rpc_stream {
	grpc_call *call;
	grpc_completion_queue *cq;
	const ProtobufCMessageDescriptor *desc;
	grpc_metadata_array initial_md;
	int finished;
	int got_initial;
	char *target, *method; /* for errors */
};

/* A channel with creds (released here); override, when set, is the name the server's
 * certificate must carry. */
static int channel_new(const char *target, grpc_channel_credentials *creds, const char *override,
		       struct rpc_channel **out, struct err *err)
{
	struct rpc_channel *c;
	grpc_arg args[7];
	grpc_channel_args cargs = { 4, args };

	if (!creds)
		return err_set(err, EINVAL, "cannot make credentials for a channel to %s", target);
	args[0].type = GRPC_ARG_INTEGER;
	args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	args[0].value.integer = (int)RPC_CLIENT_MAX_MESSAGE;
	/* gRPC's default reconnect back-off starts at 1 s: a server that is just coming up (an
	 * agent in a new cell) would cost every caller a second. Peers here are local or in the
	 * same network, so retry soon, and cap the back-off at 2 s. */
	args[1].type = GRPC_ARG_INTEGER;
	args[1].key = (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;
	args[1].value.integer = 20;
	args[2].type = GRPC_ARG_INTEGER;
	args[2].key = (char *)GRPC_ARG_MIN_RECONNECT_BACKOFF_MS;
	args[2].value.integer = 20;
	args[3].type = GRPC_ARG_INTEGER;
	args[3].key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
	args[3].value.integer = 2000;
	if (override) {
		args[4].type = GRPC_ARG_STRING;
		args[4].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
		args[4].value.string = (char *) override;
		/* the TLS records this side writes: 4 KiB instead of 16 shrinks the buffer each
		 * connection keeps for them (183 -> 171 KB a connection with a stream open); a
		 * client here sends little (requests, a session's input) */
		args[5].type = GRPC_ARG_INTEGER;
		args[5].key = (char *)GRPC_ARG_TSI_MAX_FRAME_SIZE;
		args[5].value.integer = 4096;
		/* a TLS connection costs ~170 KB while open and ~10 once closed: one that carried
		 * no call for a few seconds closes, the next call connects again (a handshake) */
		args[6].type = GRPC_ARG_INTEGER;
		args[6].key = (char *)GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS;
		args[6].value.integer = RPC_CLIENT_IDLE_MS;
		cargs.num_args = 7;
	}
	c = xcalloc(1, sizeof(*c));
	c->ch = grpc_channel_create(target, creds, &cargs);
	grpc_channel_credentials_release(creds);
	if (!c->ch) {
		free(c);
		return err_set(err, EINVAL, "cannot create a channel to %s", target);
	}
	c->target = xstrdup(target);
	*out = c;
	return 0;
}

int rpc_channel_new(const char *target, struct rpc_channel **out, struct err *err)
{
	rpc_global_init();
	return channel_new(target, grpc_insecure_credentials_create(), NULL, out, err);
}

int rpc_channel_new_tls(const char *target, const struct rpc_tls *tls, struct rpc_channel **out,
			struct err *err)
{
	grpc_ssl_pem_key_cert_pair pair = { tls->key_pem, tls->cert_pem };

	if (!tls->ca_pem || !tls->cert_pem || !tls->key_pem || !tls->peer_name)
		return err_set(err, EINVAL,
			       "a TLS channel to %s needs a CA, a certificate, its key "
			       "and the name the server's certificate carries",
			       target);
	rpc_global_init();
	return channel_new(target, grpc_ssl_credentials_create_ex(tls->ca_pem, &pair, NULL, NULL),
			   tls->peer_name, out, err);
}

void rpc_channel_free(struct rpc_channel *c)
{
	if (!c)
		return;
	grpc_channel_destroy(c->ch);
	free(c->target);
	free(c);
}

static gpr_timespec deadline_in(int64_t ms)
{
	if (ms <= 0)
		return gpr_inf_future(GPR_CLOCK_REALTIME);
	return gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

static void cq_drain_destroy(grpc_completion_queue *cq)
{
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
		       .type != GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
}

grpc_byte_buffer *rpc_pack(const ProtobufCMessage *msg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	grpc_slice sl = grpc_slice_malloc(n);
	grpc_byte_buffer *bb;

	protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(sl));
	bb = grpc_raw_byte_buffer_create(&sl, 1);
	grpc_slice_unref(sl);
	return bb;
}

int rpc_status_err(struct err *err, grpc_status_code st, grpc_slice details, const char *target,
		   const char *method)
{
	char *msg = grpc_slice_to_c_string(details);
	int ret = err_set(err, rpc_errno_from_status(st), "%s", msg[0] ? msg : "call failed");

	gpr_free(msg);
	if (st == GRPC_STATUS_UNAVAILABLE || st == GRPC_STATUS_DEADLINE_EXCEEDED)
		ret = err_wrap(err, "%s %s", target, method);
	return ret;
}

/* The send-initial-metadata op of a call (no metadata of its own: a channel's identity is its
 * TLS certificate). */
static void initial_metadata(grpc_op *op)
{
	op->op = GRPC_OP_SEND_INITIAL_METADATA;
}

int rpc_unary(struct rpc_channel *ch, const char *method, const ProtobufCMessage *req,
	      const ProtobufCMessageDescriptor *resp_desc, int64_t timeout_ms,
	      ProtobufCMessage **resp, struct err *err)
{
	return rpc_unary_for(NULL, ch, method, req, resp_desc, timeout_ms, resp, err);
}

int rpc_unary_for(struct rpc_call *parent, struct rpc_channel *ch, const char *method,
		  const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
		  int64_t timeout_ms, ProtobufCMessage **resp, struct err *err)
{
	grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
	grpc_slice mslice = grpc_slice_from_copied_string(method);
	grpc_metadata_array imd, tmd;
	grpc_byte_buffer *sendbb = rpc_pack(req), *recvbb = NULL;
	grpc_status_code st = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	grpc_op ops[6];
	grpc_call *call;
	grpc_event ev;
	int ret = 0;

	if (timeout_ms <= 0)
		timeout_ms = 120000;
	grpc_metadata_array_init(&imd);
	grpc_metadata_array_init(&tmd);
	call = grpc_channel_create_call(ch->ch, parent ? rpc_call_core(parent) : NULL,
					GRPC_PROPAGATE_DEFAULTS, cq, mslice, NULL,
					deadline_in(timeout_ms), NULL);
	memset(ops, 0, sizeof(ops));
	initial_metadata(&ops[0]);
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = sendbb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &imd;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &recvbb;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &tmd;
	ops[5].data.recv_status_on_client.status = &st;
	ops[5].data.recv_status_on_client.status_details = &details;
	if (grpc_call_start_batch(call, ops, 6, call, NULL) != GRPC_CALL_OK) {
		ret = err_set(err, EIO, "%s %s: cannot start the call", ch->target, method);
		goto out;
	}
	ev = grpc_completion_queue_pluck(cq, call, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	if (ev.type != GRPC_OP_COMPLETE) {
		ret = err_set(err, EIO, "%s %s: call did not complete", ch->target, method);
		goto out;
	}
	if (st != GRPC_STATUS_OK) {
		ret = rpc_status_err(err, st, details, ch->target, method);
		goto out;
	}
	*resp = rpc_unpack(resp_desc, recvbb, RPC_CLIENT_MAX_MESSAGE, err);
	if (!*resp)
		ret = err_wrap(err, "%s %s", ch->target, method);
out:
	if (recvbb)
		grpc_byte_buffer_destroy(recvbb);
	grpc_byte_buffer_destroy(sendbb);
	grpc_slice_unref(details);
	grpc_slice_unref(mslice);
	grpc_metadata_array_destroy(&imd);
	grpc_metadata_array_destroy(&tmd);
	grpc_call_unref(call);
	cq_drain_destroy(cq);
	return ret;
}

int rpc_stream_open(struct rpc_channel *ch, const char *method, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *msg_desc, int64_t timeout_ms,
		    struct rpc_stream **out, struct err *err)
{
	struct rpc_stream *s = xcalloc(1, sizeof(*s));
	grpc_slice mslice = grpc_slice_from_copied_string(method);
	grpc_byte_buffer *bb = rpc_pack(req);
	grpc_op ops[4];
	grpc_event ev;

	s->cq = grpc_completion_queue_create_for_pluck(NULL);
	s->desc = msg_desc;
	s->target = xstrdup(ch->target);
	s->method = xstrdup(method);
	grpc_metadata_array_init(&s->initial_md);
	s->call = grpc_channel_create_call(ch->ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq, mslice,
					   NULL, deadline_in(timeout_ms), NULL);
	grpc_slice_unref(mslice);
	memset(ops, 0, sizeof(ops));
	initial_metadata(&ops[0]);
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = bb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	if (grpc_call_start_batch(s->call, ops, 3, s, NULL) != GRPC_CALL_OK) {
		grpc_byte_buffer_destroy(bb);
		rpc_stream_free(s);
		return err_set(err, EIO, "%s %s: cannot start the stream", ch->target, method);
	}
	ev = grpc_completion_queue_pluck(s->cq, s, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	grpc_byte_buffer_destroy(bb);
	(void)ev; /* a failed send shows as the stream's status on the first read */
	*out = s;
	return 0;
}

int rpc_stream_next(struct rpc_stream *s, ProtobufCMessage **msg, struct err *err)
{
	grpc_byte_buffer *bb = NULL;
	grpc_op op[2];
	grpc_event ev;
	size_t n = 0;

	if (s->finished)
		return 0;
	memset(op, 0, sizeof(op));
	if (!s->got_initial) {
		op[n].op = GRPC_OP_RECV_INITIAL_METADATA;
		op[n++].data.recv_initial_metadata.recv_initial_metadata = &s->initial_md;
		s->got_initial = 1;
	}
	op[n].op = GRPC_OP_RECV_MESSAGE;
	op[n++].data.recv_message.recv_message = &bb;
	if (grpc_call_start_batch(s->call, op, n, s, NULL) != GRPC_CALL_OK)
		return err_set(err, EIO, "stream read failed");
	ev = grpc_completion_queue_pluck(s->cq, s, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	if (ev.type == GRPC_OP_COMPLETE && bb) {
		*msg = rpc_unpack(s->desc, bb, RPC_CLIENT_MAX_MESSAGE, err);
		grpc_byte_buffer_destroy(bb);
		return *msg ? 1 : -err->code;
	}
	/* the stream ended: collect the status */
	{
		grpc_metadata_array tmd;
		grpc_status_code st = GRPC_STATUS_UNKNOWN;
		grpc_slice details = grpc_empty_slice();
		int ret = 0;

		grpc_metadata_array_init(&tmd);
		memset(op, 0, sizeof(op));
		op[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
		op[0].data.recv_status_on_client.trailing_metadata = &tmd;
		op[0].data.recv_status_on_client.status = &st;
		op[0].data.recv_status_on_client.status_details = &details;
		if (grpc_call_start_batch(s->call, op, 1, s, NULL) == GRPC_CALL_OK)
			grpc_completion_queue_pluck(s->cq, s, gpr_inf_future(GPR_CLOCK_REALTIME),
						    NULL);
		s->finished = 1;
		if (st != GRPC_STATUS_OK)
			ret = rpc_status_err(err, st, details, s->target, s->method);
		grpc_slice_unref(details);
		grpc_metadata_array_destroy(&tmd);
		return ret;
	}
}

void rpc_stream_cancel(struct rpc_stream *s)
{
	grpc_call_cancel(s->call, NULL);
}

void rpc_stream_free(struct rpc_stream *s)
{
	if (!s)
		return;
	if (!s->finished)
		grpc_call_cancel(s->call, NULL);
	grpc_call_unref(s->call);
	grpc_metadata_array_destroy(&s->initial_md);
	cq_drain_destroy(s->cq);
	free(s->target);
	free(s->method);
	free(s);
}
