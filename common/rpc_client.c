/*
 * rpc_client.c: blocking unary and server-streaming calls over gRPC core. Each call owns a
 * pluck completion queue, so any number of threads may call at once on one channel. A call made
 * on behalf of a served one (rpc_unary_for) is core's child of it: core cancels it when the
 * parent's client goes away and caps its deadline at the parent's, with no thread polling.
 *
 * Channels: an rpc_channel holds gRPC's channel only while calls use it. Every call (here and
 * in rpc_loop.c) takes it for its life and gives it back; a releaser thread, one for the
 * process, lets go of those no call took for their release time, and the next take makes one
 * again from the channel's target, name and shared credentials.
 */
#include "rpc.h"

#include <errno.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "rpc_internal.h"
#include "xalloc.h"

struct rpc_stream {
	struct rpc_channel *ch; /* taken until the stream is freed */
	grpc_call *call;
	grpc_completion_queue *cq;
	const ProtobufCMessageDescriptor *desc;
	grpc_metadata_array initial_md;
	int finished;
	int got_initial;
	char *method; /* for errors, with its channel's target */
};

/* Credentials, shared by the channels made from one CA, certificate and key (every channel a
 * kiyot opens to its cells presents its one certificate): gRPC keeps a copy of the PEM texts
 * in each, 1.5 KB. */
struct creds {
	struct creds *next;
	unsigned char id[SHA256_DIGEST_LENGTH]; /* of the texts; all zero for plaintext */
	unsigned refs;				/* channels using it */
	grpc_channel_credentials *core;
};

/* A channel: gRPC's channel while it is in use, and what it takes to make it again. */
struct rpc_channel {
	struct rpc_channel *prev, *next; /* every channel, for the releaser (chans.lock) */
	pthread_mutex_t lock;		 /* the fields below it; after chans.lock */
	grpc_channel *core;		 /* NULL once released, until the next call */
	unsigned calls;			 /* taken and not given back */
	bool freed;			 /* its owner let go: the last call's end frees it */
	int64_t idle_since;		 /* monotonic ns: the last call's end */
	int64_t release_ns;
	struct creds *creds;
	char *override; /* the name the server's certificate carries; NULL for plaintext */
	char *target;
};

static struct {
	pthread_mutex_t lock;
	pthread_once_t once;
	struct rpc_channel *head;
	struct creds *creds;
} chans = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_ONCE_INIT, NULL, NULL };

/* The credentials of id, a new reference; made by make (consumed) when none are kept. */
static struct creds *creds_get(const unsigned char id[SHA256_DIGEST_LENGTH],
			       grpc_channel_credentials *(*make)(const struct rpc_tls *),
			       const struct rpc_tls *tls)
{
	struct creds *c;

	pthread_mutex_lock(&chans.lock);
	for (c = chans.creds; c; c = c->next)
		if (memcmp(c->id, id, sizeof(c->id)) == 0)
			break;
	if (!c) {
		grpc_channel_credentials *core = make(tls);

		if (core) {
			c = xcalloc(1, sizeof(*c));
			memcpy(c->id, id, sizeof(c->id));
			c->core = core;
			c->next = chans.creds;
			chans.creds = c;
		}
	}
	if (c)
		c->refs++;
	pthread_mutex_unlock(&chans.lock);
	return c;
}

/* chans.lock held. */
static void creds_put(struct creds *c)
{
	struct creds **pp;

	if (--c->refs)
		return;
	for (pp = &chans.creds; *pp != c; pp = &(*pp)->next)
		;
	*pp = c->next;
	grpc_channel_credentials_release(c->core);
	free(c);
}

/* gRPC's channel for c. */
static grpc_channel *core_new(const struct rpc_channel *c)
{
	grpc_arg args[7];
	grpc_channel_args cargs = { 4, args };

	args[0].type = GRPC_ARG_INTEGER;
	args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	args[0].value.integer = (int)RPC_CLIENT_MAX_MESSAGE;
	/* gRPC's default reconnect back-off starts at 1 s: a server that is just coming up (an
	 * agent in a new cell) would cost every caller a second. Peers here are local or in the
	 * same network, so retry soon, and cap the back-off at 2 s. The minimum back-off is not
	 * back-off at all but the floor of a connection attempt's deadline (TCP, TLS handshake
	 * and the peer's first SETTINGS): it stays in seconds, or every handshake slower than it
	 * fails ("timed out before receiving SETTINGS frame"), as they do on a busy node. */
	args[1].type = GRPC_ARG_INTEGER;
	args[1].key = (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;
	args[1].value.integer = 20;
	args[2].type = GRPC_ARG_INTEGER;
	args[2].key = (char *)GRPC_ARG_MIN_RECONNECT_BACKOFF_MS;
	args[2].value.integer = RPC_CONNECT_TIMEOUT_MS;
	args[3].type = GRPC_ARG_INTEGER;
	args[3].key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
	args[3].value.integer = 2000;
	if (c->override) {
		args[4].type = GRPC_ARG_STRING;
		args[4].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
		args[4].value.string = c->override;
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
	return grpc_channel_create(c->target, c->creds->core, &cargs);
}

/* Lets go of the gRPC channels no call used for their release time; each tick of the
 * releaser's thread. */
static void release_idle(int64_t now)
{
	grpc_channel **gone = NULL;
	size_t n = 0, cap = 0;
	struct rpc_channel *c;

	pthread_mutex_lock(&chans.lock);
	for (c = chans.head; c; c = c->next) {
		pthread_mutex_lock(&c->lock);
		if (c->core && !c->calls && now - c->idle_since >= c->release_ns) {
			if (n == cap)
				gone = xrealloc(gone, (cap = cap ? 2 * cap : 16) * sizeof(*gone));
			gone[n++] = c->core;
			c->core = NULL;
		}
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&chans.lock);
	while (n)
		grpc_channel_destroy(gone[--n]);
	free(gone);
}

static void *releaser_main(void *unused)
{
	(void)unused;
	for (;;) {
		struct timespec ts = { RPC_CHANNEL_TICK_MS / 1000,
				       (RPC_CHANNEL_TICK_MS % 1000) * 1000000L };

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		release_idle(clock_mono_ns());
	}
	return NULL;
}

/* The releaser: one thread for the process, made with the first channel, with every signal
 * blocked (the process's own threads take them). */
static void releaser_start(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, releaser_main, NULL) != 0)
		log_warn("rpc: no thread to release idle channels; they stay until freed");
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static int channel_new(const char *target, struct creds *creds, const char *override,
		       struct rpc_channel **out, struct err *err)
{
	struct rpc_channel *c;

	if (!creds)
		return err_set(err, EINVAL, "cannot make credentials for a channel to %s", target);
	c = xcalloc(1, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	c->creds = creds;
	c->override = override ? xstrdup(override) : NULL;
	c->target = xstrdup(target);
	c->release_ns = RPC_CHANNEL_RELEASE_MS * 1000000LL;
	c->idle_since = clock_mono_ns();
	/* made now, so that a target gRPC cannot take fails here */
	c->core = core_new(c);
	if (!c->core) {
		pthread_mutex_lock(&chans.lock);
		creds_put(creds);
		pthread_mutex_unlock(&chans.lock);
		free(c->override);
		free(c->target);
		free(c);
		return err_set(err, EINVAL, "cannot create a channel to %s", target);
	}
	pthread_once(&chans.once, releaser_start);
	pthread_mutex_lock(&chans.lock);
	c->next = chans.head;
	if (c->next)
		c->next->prev = c;
	chans.head = c;
	pthread_mutex_unlock(&chans.lock);
	*out = c;
	return 0;
}

static grpc_channel_credentials *plain_creds(const struct rpc_tls *unused)
{
	(void)unused;
	return grpc_insecure_credentials_create();
}

static grpc_channel_credentials *tls_creds(const struct rpc_tls *tls)
{
	grpc_ssl_pem_key_cert_pair pair = { tls->key_pem, tls->cert_pem };

	return grpc_ssl_credentials_create_ex(tls->ca_pem, &pair, NULL, NULL);
}

int rpc_channel_new(const char *target, struct rpc_channel **out, struct err *err)
{
	static const unsigned char plain[SHA256_DIGEST_LENGTH];

	rpc_global_init();
	return channel_new(target, creds_get(plain, plain_creds, NULL), NULL, out, err);
}

int rpc_channel_new_tls(const char *target, const struct rpc_tls *tls, struct rpc_channel **out,
			struct err *err)
{
	unsigned char id[SHA256_DIGEST_LENGTH];
	EVP_MD_CTX *md;
	bool ok;

	if (!tls->ca_pem || !tls->cert_pem || !tls->key_pem || !tls->peer_name)
		return err_set(err, EINVAL,
			       "a TLS channel to %s needs a CA, a certificate, its key "
			       "and the name the server's certificate carries",
			       target);
	rpc_global_init();
	/* each text with its NUL, so that no two sets of texts run together the same */
	md = EVP_MD_CTX_new();
	ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) &&
	     EVP_DigestUpdate(md, tls->ca_pem, strlen(tls->ca_pem) + 1) &&
	     EVP_DigestUpdate(md, tls->cert_pem, strlen(tls->cert_pem) + 1) &&
	     EVP_DigestUpdate(md, tls->key_pem, strlen(tls->key_pem) + 1) &&
	     EVP_DigestFinal_ex(md, id, NULL);
	EVP_MD_CTX_free(md);
	if (!ok)
		return err_set(err, ENOMEM, "a TLS channel to %s: cannot digest its credentials",
			       target);
	return channel_new(target, creds_get(id, tls_creds, tls), tls->peer_name, out, err);
}

/* Frees c, which nothing reaches any more: off the releaser's list, freed by its owner, no
 * call taken. */
static void channel_destroy(struct rpc_channel *c)
{
	if (c->core)
		grpc_channel_destroy(c->core);
	pthread_mutex_lock(&chans.lock);
	creds_put(c->creds);
	pthread_mutex_unlock(&chans.lock);
	pthread_mutex_destroy(&c->lock);
	free(c->override);
	free(c->target);
	free(c);
}

void rpc_channel_free(struct rpc_channel *c)
{
	bool last;

	if (!c)
		return;
	pthread_mutex_lock(&chans.lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		chans.head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&chans.lock);
	pthread_mutex_lock(&c->lock);
	c->freed = true;
	last = c->calls == 0;
	pthread_mutex_unlock(&c->lock);
	if (last)
		channel_destroy(c);
}

grpc_channel *rpc_channel_take(struct rpc_channel *c, struct err *err)
{
	grpc_channel *core;

	pthread_mutex_lock(&c->lock);
	if (!c->core)
		c->core = core_new(c);
	core = c->core;
	if (core)
		c->calls++;
	pthread_mutex_unlock(&c->lock);
	if (!core)
		err_set(err, EINVAL, "cannot create a channel to %s", c->target);
	return core;
}

void rpc_channel_give(struct rpc_channel *c)
{
	bool last;

	pthread_mutex_lock(&c->lock);
	c->idle_since = clock_mono_ns();
	last = --c->calls == 0 && c->freed;
	pthread_mutex_unlock(&c->lock);
	if (last)
		channel_destroy(c);
}

const char *rpc_channel_target(const struct rpc_channel *c)
{
	return c->target;
}

void rpc_channel_set_release_ms(struct rpc_channel *c, int64_t ms)
{
	pthread_mutex_lock(&c->lock);
	c->release_ns = ms * 1000000LL;
	pthread_mutex_unlock(&c->lock);
}

bool rpc_channel_holds(struct rpc_channel *c)
{
	bool held;

	pthread_mutex_lock(&c->lock);
	held = c->core != NULL;
	pthread_mutex_unlock(&c->lock);
	return held;
}

static gpr_timespec deadline_in(int64_t ms)
{
	if (ms <= 0)
		return gpr_inf_future(GPR_CLOCK_REALTIME);
	return gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

void rpc_cq_drain_destroy(grpc_completion_queue *cq)
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

static int unary(struct rpc_call *parent, struct rpc_channel *ch, const char *method,
		 const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
		 int64_t timeout_ms, uint32_t flags, ProtobufCMessage **resp, struct err *err);

int rpc_unary_for(struct rpc_call *parent, struct rpc_channel *ch, const char *method,
		  const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
		  int64_t timeout_ms, ProtobufCMessage **resp, struct err *err)
{
	return unary(parent, ch, method, req, resp_desc, timeout_ms, 0, resp, err);
}

int rpc_unary_idempotent(struct rpc_call *parent, struct rpc_channel *ch, const char *method,
			 const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
			 int64_t timeout_ms, ProtobufCMessage **resp, struct err *err)
{
	int64_t start = clock_mono_ns(), left;
	int ret;

	if (timeout_ms <= 0)
		timeout_ms = 120000;
	ret = unary(parent, ch, method, req, resp_desc, timeout_ms, 0, resp, err);
	left = timeout_ms - (clock_mono_ns() - start) / 1000000;
	if (ret != -ECONNREFUSED || left <= 0)
		return ret;
	log_debug("%s %s: %s; trying once more", rpc_channel_target(ch), method, err->msg);
	err_clear(err);
	return unary(parent, ch, method, req, resp_desc,
		     left < RPC_RETRY_WAIT_MS ? left : RPC_RETRY_WAIT_MS,
		     GRPC_INITIAL_METADATA_WAIT_FOR_READY, resp, err);
}

/* One unary call with the initial metadata's flags. */
static int unary(struct rpc_call *parent, struct rpc_channel *ch, const char *method,
		 const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
		 int64_t timeout_ms, uint32_t flags, ProtobufCMessage **resp, struct err *err)
{
	grpc_channel *core = rpc_channel_take(ch, err);
	grpc_completion_queue *cq;
	grpc_slice mslice;
	grpc_metadata_array imd, tmd;
	grpc_byte_buffer *sendbb, *recvbb = NULL;
	grpc_status_code st = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	grpc_op ops[6];
	grpc_call *call;
	grpc_event ev;
	int ret = 0;

	if (!core)
		return -err->code;
	if (timeout_ms <= 0)
		timeout_ms = 120000;
	cq = grpc_completion_queue_create_for_pluck(NULL);
	mslice = grpc_slice_from_copied_string(method);
	sendbb = rpc_pack(req);
	grpc_metadata_array_init(&imd);
	grpc_metadata_array_init(&tmd);
	call = grpc_channel_create_call(core, parent ? rpc_call_core(parent) : NULL,
					GRPC_PROPAGATE_DEFAULTS, cq, mslice, NULL,
					deadline_in(timeout_ms), NULL);
	memset(ops, 0, sizeof(ops));
	initial_metadata(&ops[0]);
	ops[0].flags = flags;
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
		ret = err_set(err, EIO, "%s %s: cannot start the call", rpc_channel_target(ch),
			      method);
		goto out;
	}
	ev = grpc_completion_queue_pluck(cq, call, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	if (ev.type != GRPC_OP_COMPLETE) {
		ret = err_set(err, EIO, "%s %s: call did not complete", rpc_channel_target(ch),
			      method);
		goto out;
	}
	if (st != GRPC_STATUS_OK) {
		ret = rpc_status_err(err, st, details, rpc_channel_target(ch), method);
		goto out;
	}
	*resp = rpc_unpack(resp_desc, recvbb, RPC_CLIENT_MAX_MESSAGE, err);
	if (!*resp)
		ret = err_wrap(err, "%s %s", rpc_channel_target(ch), method);
out:
	if (recvbb)
		grpc_byte_buffer_destroy(recvbb);
	grpc_byte_buffer_destroy(sendbb);
	grpc_slice_unref(details);
	grpc_slice_unref(mslice);
	grpc_metadata_array_destroy(&imd);
	grpc_metadata_array_destroy(&tmd);
	grpc_call_unref(call);
	rpc_cq_drain_destroy(cq);
	rpc_channel_give(ch);
	return ret;
}

int rpc_stream_open(struct rpc_channel *ch, const char *method, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *msg_desc, int64_t timeout_ms,
		    struct rpc_stream **out, struct err *err)
{
	grpc_channel *core = rpc_channel_take(ch, err);
	struct rpc_stream *s;
	grpc_slice mslice;
	grpc_byte_buffer *bb;
	grpc_op ops[4];
	grpc_event ev;

	if (!core)
		return -err->code;
	s = xcalloc(1, sizeof(*s));
	s->ch = ch;
	mslice = grpc_slice_from_copied_string(method);
	bb = rpc_pack(req);
	s->cq = grpc_completion_queue_create_for_pluck(NULL);
	s->desc = msg_desc;
	s->method = xstrdup(method);
	grpc_metadata_array_init(&s->initial_md);
	s->call = grpc_channel_create_call(core, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq, mslice, NULL,
					   deadline_in(timeout_ms), NULL);
	grpc_slice_unref(mslice);
	memset(ops, 0, sizeof(ops));
	initial_metadata(&ops[0]);
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = bb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	if (grpc_call_start_batch(s->call, ops, 3, s, NULL) != GRPC_CALL_OK) {
		grpc_byte_buffer_destroy(bb);
		rpc_stream_free(s);
		return err_set(err, EIO, "%s %s: cannot start the stream", rpc_channel_target(ch),
			       method);
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
			ret = rpc_status_err(err, st, details, rpc_channel_target(s->ch),
					     s->method);
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
	rpc_cq_drain_destroy(s->cq);
	rpc_channel_give(s->ch);
	free(s->method);
	free(s);
}
