/* test_agent_client: the real agents' client (kiyot/cells/agent_client.h) against a gRPC
 * agent of the test's own over TLS: a Watch comes over the cell feed when the agent serves
 * one, and over gRPC from an agent older than the feed (its feed port refused twice, Hello
 * answered), the next Watch trying the feed again; Exec, Attach and PortForward are
 * asynchronous gRPC calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cells/agent_client.h"
#include "feed.h"
#include "rpc.h"
#include "streamrec.h"
#include "testcert.h"
#include "xalloc.h"

/* The agent's Watch, either way: one STATUS event naming the transport, then nothing until
 * the client goes. */
static Kiyot__Cell__V1__WatchEvent event_via(const char *via)
{
	Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;

	ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__STATUS;
	ev.unit_id = (char *)via;
	return ev;
}

static int grpc_watch(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		      ProtobufCMessage *resp, struct err *err)
{
	Kiyot__Cell__V1__WatchEvent ev = event_via("grpc");

	(void)svc;
	(void)req;
	(void)resp;
	if (rpc_send(call, &ev.base, err) < 0)
		return -err->code;
	while (!rpc_cancelled(call))
		usleep(10 * 1000);
	return err_set(err, ECANCELED, "watch ended");
}

static int grpc_hello(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		      ProtobufCMessage *resp, struct err *err)
{
	(void)svc;
	(void)req;
	(void)err;
	((Kiyot__Cell__V1__HelloResponse *)resp)->cell_id = rpc_strdup(call, "cell-a");
	return 0;
}

/* PortForward as an echo: each message's bytes come back; its close is answered with closed,
 * then the call ends. */
static int grpc_port_forward(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			     ProtobufCMessage *resp, struct err *err)
{
	ProtobufCMessage *m = NULL;
	bool closed = false;
	int ret = 1;

	(void)svc;
	(void)resp;
	while (!closed && ret == 1) {
		const Kiyot__Cell__V1__PortForwardInput *in = m ? (const void *)m
								: (const void *)req;
		Kiyot__Cell__V1__PortForwardOutput o = KIYOT__CELL__V1__PORT_FORWARD_OUTPUT__INIT;

		o.data = in->data;
		o.closed = closed = in->close;
		ret = rpc_send(call, &o.base, err);
		if (m)
			protobuf_c_message_free_unpacked(m, NULL);
		m = NULL;
		if (ret < 0)
			return ret;
		if (!closed)
			ret = rpc_recv(call, &kiyot__cell__v1__port_forward_input__descriptor, &m,
				       err);
	}
	return closed ? 0 : ret < 0 ? ret : err_set(err, EPIPE, "the client closed first");
}

static const struct rpc_method methods[] = {
	{ "/kiyot.cell.v1.CellAgent/Hello", &kiyot__cell__v1__hello_request__descriptor,
	  &kiyot__cell__v1__hello_response__descriptor, grpc_hello, 0, 0 },
	{ "/kiyot.cell.v1.CellAgent/PortForward", &kiyot__cell__v1__port_forward_input__descriptor,
	  &kiyot__cell__v1__port_forward_output__descriptor, grpc_port_forward, RPC_BIDI_STREAM,
	  0 },
	{ "/kiyot.cell.v1.CellAgent/Watch", &kiyot__cell__v1__watch_request__descriptor,
	  &kiyot__cell__v1__watch_event__descriptor, grpc_watch, RPC_SERVER_STREAM, 0 },
};

static void feed_session(void *arg, struct feed_conn *c, const ProtobufCMessage *req)
{
	Kiyot__Cell__V1__WatchEvent ev = event_via("feed");
	struct err err = ERR_INIT;

	(void)arg;
	(void)req;
	if (feed_send(c, &ev.base, &err) < 0)
		return;
	while (!feed_gone(c))
		usleep(10 * 1000);
}

struct fix {
	char *ca, *ca_key;
	struct test_ident agent, kiyot;
	char target[64], feed_addr[64];
	struct rpc_server *grpc;
	struct feed_server *feed;
	struct agent_client client;
	struct agent_conn *conn;
};

/* A port P with P + 1 free too (the agent's gRPC and its feed), as far as one can tell. */
static int free_port_pair(void)
{
	for (int tries = 0; tries < 50; tries++) {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t len = sizeof(a);
		int fd = socket(AF_INET, SOCK_STREAM, 0), fd2 = socket(AF_INET, SOCK_STREAM, 0);
		int port = -1;

		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		    getsockname(fd, (struct sockaddr *)&a, &len) == 0 &&
		    ntohs(a.sin_port) < 65000) {
			port = ntohs(a.sin_port);
			a.sin_port = htons((uint16_t)(port + 1));
			if (bind(fd2, (struct sockaddr *)&a, sizeof(a)) != 0)
				port = -1;
		}
		close(fd);
		close(fd2);
		if (port > 0)
			return port;
	}
	fail_msg("no free pair of ports");
	return -1;
}

static void start(struct fix *f, bool with_feed)
{
	struct rpc_server_config rc = { 0 };
	struct agent_tls tls;
	struct err err = ERR_INIT;
	int port = free_port_pair();

	if (pki_ca_new("kiyot-ca", 1, &f->ca, &f->ca_key, &err) < 0)
		fail_msg("%s", err.msg);
	test_ident_make(f->ca, f->ca_key, "cell-a", PKI_SERVER, &f->agent);
	test_ident_make(f->ca, f->ca_key, "kiyot", PKI_CLIENT, &f->kiyot);
	snprintf(f->target, sizeof(f->target), "127.0.0.1:%d", port);
	snprintf(f->feed_addr, sizeof(f->feed_addr), "127.0.0.1:%d", port + 1);
	rc.address = f->target;
	rc.methods = methods;
	rc.n_methods = sizeof(methods) / sizeof(methods[0]);
	rc.tls = (struct rpc_tls){ f->ca, f->agent.cert, f->agent.key, "kiyot" };
	if (rpc_server_start(&rc, &f->grpc, &err) < 0)
		fail_msg("%s", err.msg);
	if (with_feed) {
		struct feed_server_config fc = { 0 };

		if (pki_tls_ctx(f->ca, f->agent.cert, f->agent.key, PKI_SERVER, "kiyot", &fc.ctx,
				&err) < 0)
			fail_msg("%s", err.msg);
		fc.address = f->feed_addr;
		fc.req_desc = &kiyot__cell__v1__watch_request__descriptor;
		fc.max_request = 4096;
		fc.max_conns = 8;
		fc.session = feed_session;
		if (feed_server_start(&fc, &f->feed, &err) < 0)
			fail_msg("%s", err.msg);
		SSL_CTX_free(fc.ctx);
	}
	tls = (struct agent_tls){ f->ca, f->kiyot.cert, f->kiyot.key };
	if (agent_grpc_new(1, &f->client, &err) < 0 ||
	    f->client.ops->connect(f->client.self, &tls, "cell-a", f->target, &f->conn, &err) < 0)
		fail_msg("%s", err.msg);
}

static int teardown(void **state)
{
	struct fix *f = *state;

	f->client.ops->disconnect(f->client.self, f->conn);
	agent_grpc_free(&f->client);
	feed_server_stop(f->feed);
	rpc_server_stop(f->grpc);
	test_ident_release(&f->agent);
	test_ident_release(&f->kiyot);
	free(f->ca);
	free(f->ca_key);
	free(f);
	return 0;
}

static int setup(void **state)
{
	*state = xcalloc(1, sizeof(struct fix));
	return 0;
}

/* One Watch: what its first event named ("" if none), how it ended. */
struct run {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char via[16];
	bool ended;
	int ret;
};

static void on_event(void *arg, const Kiyot__Cell__V1__WatchEvent *ev)
{
	struct run *r = arg;

	pthread_mutex_lock(&r->lock);
	if (!r->via[0])
		snprintf(r->via, sizeof(r->via), "%s", ev->unit_id);
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static void on_end(void *arg, int ret, const struct err *err)
{
	struct run *r = arg;

	(void)err;
	pthread_mutex_lock(&r->lock);
	r->ended = true;
	r->ret = ret;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* Opens a Watch and waits for its first event or its end; a live one is cancelled. Returns
 * the transport its event named, or "" with *ret its end. */
static const char *watch_once(struct fix *f, struct run *r, int *ret)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	struct agent_watch *w = NULL;
	struct err err = ERR_INIT;

	memset(r->via, 0, sizeof(r->via));
	r->ended = false;
	if (f->client.ops->watch(f->client.self, f->conn, &req, on_event, on_end, r, &w, &err) < 0)
		fail_msg("%s", err.msg);
	pthread_mutex_lock(&r->lock);
	while (!r->via[0] && !r->ended)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
	if (r->via[0])
		f->client.ops->watch_cancel(f->client.self, w);
	pthread_mutex_lock(&r->lock);
	while (!r->ended)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
	*ret = r->ret;
	return r->via;
}

static void test_agent_client__a_watch_comes_over_the_feed(void **state)
{
	struct fix *f = *state;
	struct run r = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, "", false, 0 };
	int ret;

	start(f, true);
	for (int i = 0; i < 3; i++) {
		assert_string_equal(watch_once(f, &r, &ret), "feed");
		assert_int_equal(ret, -ECANCELED);
	}
}

/* Exec, Attach and PortForward go over gRPC bidirectional calls on the client's completion
 * queue: each message when asked for, one sent at a time, the end after everything; a
 * cancelled stream ends without a read. */
static void test_agent_client__streams_are_asynchronous_grpc_calls(void **state)
{
	struct fix *f = *state;
	static struct streamrec b, c; /* their callbacks may still return */
	Kiyot__Cell__V1__PortForwardInput in = KIYOT__CELL__V1__PORT_FORWARD_INPUT__INIT;
	const struct agent_ops *ops;
	struct agent_stream *s = NULL;
	struct err err = ERR_INIT;
	ProtobufCMessage *m = NULL;
	char got[64];
	size_t got_len = 0;
	bool closed = false;
	int ret;

	start(f, true);
	ops = f->client.ops;
	streamrec_init(&b);
	in.port = 80;
	in.data = (ProtobufCBinaryData){ 5, (uint8_t *)"ping " };
	assert_int_equal(ops->open_stream(f->client.self, f->conn, "PortForward", &in.base,
					  &kiyot__cell__v1__port_forward_output__descriptor,
					  &streamrec_cbs, &b, &s, &err),
			 0);
	assert_int_equal(streamrec_wait_sent(&b, 1), 1);
	in.data = (ProtobufCBinaryData){ 4, (uint8_t *)"pong" };
	assert_int_equal(ops->stream_send(f->client.self, s, &in.base, &err), 0);
	assert_int_equal(streamrec_wait_sent(&b, 2), 2);
	in.data.len = 0;
	in.close = 1;
	assert_int_equal(ops->stream_send(f->client.self, s, &in.base, &err), 0);
	ops->stream_close_send(f->client.self, s);
	assert_int_equal(ops->stream_send(f->client.self, s, &in.base, &err), -ECANCELED);
	/* each message when asked for, then the end */
	for (;;) {
		const Kiyot__Cell__V1__PortForwardOutput *o;

		ops->stream_read(f->client.self, s);
		if ((ret = streamrec_take(&b, &m)) != 1)
			break;
		o = (const void *)m;
		assert_true(got_len + o->data.len <= sizeof(got));
		if (o->data.len) /* an empty message's data is NULL */
			memcpy(got + got_len, o->data.data, o->data.len);
		got_len += o->data.len;
		closed |= o->closed;
		protobuf_c_message_free_unpacked(m, NULL);
	}
	assert_int_equal(ret, 0);
	assert_true(closed);
	assert_int_equal(got_len, 9);
	assert_memory_equal(got, "ping pong", 9);
	assert_false(b.late);
	ops->stream_free(f->client.self, s);

	streamrec_init(&c);
	in.close = 0;
	assert_int_equal(ops->open_stream(f->client.self, f->conn, "PortForward", &in.base,
					  &kiyot__cell__v1__port_forward_output__descriptor,
					  &streamrec_cbs, &c, &s, &err),
			 0);
	ops->stream_cancel(f->client.self, s); /* no read asked: the end comes all the same */
	assert_int_equal(streamrec_wait_end(&c), -ECANCELED);
	assert_false(c.late);
	ops->stream_free(f->client.self, s);
}

static void test_agent_client__an_agent_without_a_feed_is_watched_over_grpc(void **state)
{
	struct fix *f = *state;
	struct run r = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, "", false, 0 };
	int ret;

	start(f, false);
	/* the feed refused twice, as an agent that is down would refuse it */
	for (int i = 0; i < 2; i++) {
		assert_string_equal(watch_once(f, &r, &ret), "");
		assert_int_equal(ret, -ECONNREFUSED);
	}
	/* then Hello over gRPC answers: the Watch goes over gRPC */
	assert_string_equal(watch_once(f, &r, &ret), "grpc");
	assert_int_equal(ret, -ECANCELED);
	/* the next one tries the feed first again */
	assert_string_equal(watch_once(f, &r, &ret), "");
	assert_int_equal(ret, -ECONNREFUSED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_agent_client__a_watch_comes_over_the_feed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_agent_client__an_agent_without_a_feed_is_watched_over_grpc, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_agent_client__streams_are_asynchronous_grpc_calls, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
