/* test_rpc_tls: the kiyot-agent channel's TLS both ways (rpc_tls), and the enrollment proof a
 * new cell answers with (pki_enroll_proof). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cellagent.pb-c.h"
#include "pki.h"
#include "testcert.h"
#include "rpc.h"

static int hello(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		 ProtobufCMessage *resp, struct err *err)
{
	(void)svc;
	(void)req;
	(void)err;
	((Kiyot__Cell__V1__HelloResponse *)resp)->cell_id = rpc_strdup(call, "cell-a");
	return 0;
}

/* One event, for a stream's caller to get when let in. */
static int watch(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		 ProtobufCMessage *resp, struct err *err)
{
	Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;

	(void)svc;
	(void)req;
	(void)resp;
	return rpc_send(call, &ev.base, err);
}

/* Answers the message it got: large ones cross TLS both ways. */
static int echo(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		ProtobufCMessage *resp, struct err *err)
{
	const Kiyot__Cell__V1__KeyValue *in = (const Kiyot__Cell__V1__KeyValue *)req;
	Kiyot__Cell__V1__KeyValue *out = (Kiyot__Cell__V1__KeyValue *)resp;

	(void)svc;
	(void)err;
	out->key = rpc_strdup(call, in->key);
	out->value = rpc_strdup(call, in->value);
	return 0;
}

static const struct rpc_method methods[] = {
	{ "/kiyot.test.Echo/Echo", &kiyot__cell__v1__key_value__descriptor,
	  &kiyot__cell__v1__key_value__descriptor, echo, 0, 0 },
	{ "/kiyot.cell.v1.CellAgent/Hello", &kiyot__cell__v1__hello_request__descriptor,
	  &kiyot__cell__v1__hello_response__descriptor, hello, 0, 0 },
	{ "/kiyot.cell.v1.CellAgent/Watch", &kiyot__cell__v1__watch_request__descriptor,
	  &kiyot__cell__v1__watch_event__descriptor, watch, RPC_SERVER_STREAM, 0 },
};

struct fix {
	char *ca, *ca_key, *other_ca, *other_ca_key;
	struct test_ident agent, kiyot, stranger, foreign;
	char path[128], addr[160];
	struct rpc_server *srv;
};

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct rpc_server_config cfg = { 0 };
	struct err err = ERR_INIT;

	if (pki_ca_new("kiyot-ca", 1, &f->ca, &f->ca_key, &err) < 0 ||
	    pki_ca_new("kiyot-ca", 1, &f->other_ca, &f->other_ca_key, &err) < 0)
		fail_msg("%s", err.msg);
	test_ident_make(f->ca, f->ca_key, "cell-a", PKI_SERVER, &f->agent);
	test_ident_make(f->ca, f->ca_key, "kiyot", PKI_CLIENT, &f->kiyot);
	test_ident_make(f->ca, f->ca_key, "cell-b", PKI_CLIENT, &f->stranger);
	test_ident_make(f->other_ca, f->other_ca_key, "kiyot", PKI_CLIENT, &f->foreign);
	snprintf(f->path, sizeof(f->path), "/tmp/kiyot-test-rpc-tls-%d.sock", (int)getpid());
	snprintf(f->addr, sizeof(f->addr), "unix://%s", f->path);
	cfg.address = f->addr;
	cfg.methods = methods;
	cfg.n_methods = sizeof(methods) / sizeof(methods[0]);
	cfg.tls = (struct rpc_tls){ f->ca, f->agent.cert, f->agent.key, "kiyot" };
	if (rpc_server_start(&cfg, &f->srv, &err) < 0)
		fail_msg("%s", err.msg);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	struct test_ident *ids[] = { &f->agent, &f->kiyot, &f->stranger, &f->foreign };

	rpc_server_stop(f->srv);
	unlink(f->path);
	for (size_t i = 0; i < 4; i++)
		test_ident_release(ids[i]);
	free(f->ca);
	free(f->ca_key);
	free(f->other_ca);
	free(f->other_ca_key);
	free(f);
	return 0;
}

/* Hello over a channel: 0, or the negative errno of the call's status (err says). */
static int call_hello(const char *addr, const struct rpc_tls *tls, struct err *err)
{
	Kiyot__Cell__V1__HelloRequest req = KIYOT__CELL__V1__HELLO_REQUEST__INIT;
	struct rpc_channel *ch = NULL;
	ProtobufCMessage *resp = NULL;
	int ret;

	ret = tls ? rpc_channel_new_tls(addr, tls, &ch, err) : rpc_channel_new(addr, &ch, err);
	if (ret < 0)
		return ret;
	ret = rpc_unary(ch, "/kiyot.cell.v1.CellAgent/Hello", &req.base,
			&kiyot__cell__v1__hello_response__descriptor, 2000, &resp, err);
	if (ret == 0) {
		assert_string_equal(((Kiyot__Cell__V1__HelloResponse *)resp)->cell_id, "cell-a");
		protobuf_c_message_free_unpacked(resp, NULL);
	}
	rpc_channel_free(ch);
	return ret;
}

static void test_rpc_tls__kiyot_reaches_the_cell_its_ca_certified(void **state)
{
	struct fix *f = *state;
	struct rpc_tls tls = { f->ca, f->kiyot.cert, f->kiyot.key, "cell-a" };
	struct err err = ERR_INIT;

	assert_int_equal(call_hello(f->addr, &tls, &err), 0);
}

/* A relay between a client and the server's socket that holds every chunk the server sends for
 * delay_ms before passing it on: a peer whose handshake is slow, as an agent on a busy node or
 * across a slow network is. One connection at a time; stopped by shutting its listener. */
struct slow_relay {
	char path[100], addr[120];
	int lfd, delay_ms;
	const char *server_path;
	pthread_t thread;
};

static int unix_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Copies what fd has to readable into to; 0 at the end of fd's stream. */
static ssize_t pass_on(int fd, int to)
{
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n > 0 && send(to, buf, (size_t)n, MSG_NOSIGNAL) != n)
		return -1;
	return n;
}

static void *slow_relay_run(void *arg)
{
	struct slow_relay *r = arg;
	int cfd;

	while ((cfd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		int sfd = unix_connect(r->server_path);
		struct pollfd p[2] = { { cfd, POLLIN, 0 }, { sfd, POLLIN, 0 } };

		while (poll(p, 2, -1) > 0) {
			if (p[1].revents) {
				struct timespec ts = { 0, r->delay_ms * 1000000L };

				nanosleep(&ts, NULL);
				if (pass_on(sfd, cfd) <= 0)
					break;
			}
			if (p[0].revents && pass_on(cfd, sfd) <= 0)
				break;
		}
		close(sfd);
		close(cfd);
	}
	return NULL;
}

/* The relay's socket path and gRPC address. */
static void slow_relay_name(struct slow_relay *r)
{
	snprintf(r->path, sizeof(r->path), "/tmp/kiyot-test-rpc-relay-%d.sock", (int)getpid());
	snprintf(r->addr, sizeof(r->addr), "unix://%s", r->path);
}

static void slow_relay_start(struct slow_relay *r, const char *server_path, int delay_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	slow_relay_name(r);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", r->path);
	unlink(r->path);
	r->server_path = server_path;
	r->delay_ms = delay_ms;
	r->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(r->lfd, 4), 0);
	assert_int_equal(pthread_create(&r->thread, NULL, slow_relay_run, r), 0);
}

static void slow_relay_stop(struct slow_relay *r)
{
	shutdown(r->lfd, SHUT_RDWR);
	pthread_join(r->thread, NULL);
	close(r->lfd);
	unlink(r->path);
}

/* A handshake that takes a few hundred milliseconds (a busy node, a slow link) still connects:
 * the connection attempt is given seconds, not the reconnect back-off's 20 ms. */
static void test_rpc_tls__a_slow_handshake_still_connects(void **state)
{
	struct fix *f = *state;
	struct rpc_tls tls = { f->ca, f->kiyot.cert, f->kiyot.key, "cell-a" };
	struct slow_relay relay;
	struct err err = ERR_INIT;
	int ret;

	slow_relay_start(&relay, f->path, 100);
	ret = call_hello(relay.addr, &tls, &err);
	if (ret < 0)
		print_message("%s\n", err.msg);
	assert_int_equal(ret, 0);
	slow_relay_stop(&relay);
}

/* Starts the relay of arg (its server_path set) 300 ms from now. */
static void *relay_start_later(void *arg)
{
	struct slow_relay *r = arg;
	struct timespec ts = { 0, 300 * 1000000L };

	nanosleep(&ts, NULL);
	slow_relay_start(r, r->server_path, 0);
	return NULL;
}

/* Hello as an idempotent call (or not) to the relay, which starts listening 300 ms after the
 * call is made. */
static int hello_while_the_peer_comes_up(struct fix *f, int idempotent, struct err *err)
{
	Kiyot__Cell__V1__HelloRequest req = KIYOT__CELL__V1__HELLO_REQUEST__INIT;
	struct rpc_tls tls = { f->ca, f->kiyot.cert, f->kiyot.key, "cell-a" };
	struct slow_relay relay = { .server_path = f->path };
	struct rpc_channel *ch = NULL;
	ProtobufCMessage *resp = NULL;
	pthread_t later;
	int ret;

	slow_relay_name(&relay);
	unlink(relay.path);
	assert_int_equal(rpc_channel_new_tls(relay.addr, &tls, &ch, err), 0);
	assert_int_equal(pthread_create(&later, NULL, relay_start_later, &relay), 0);
	if (idempotent)
		ret = rpc_unary_idempotent(NULL, ch, "/kiyot.cell.v1.CellAgent/Hello", &req.base,
					   &kiyot__cell__v1__hello_response__descriptor, 10000,
					   &resp, err);
	else
		ret = rpc_unary(ch, "/kiyot.cell.v1.CellAgent/Hello", &req.base,
				&kiyot__cell__v1__hello_response__descriptor, 10000, &resp, err);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	rpc_channel_free(ch);
	pthread_join(later, NULL);
	slow_relay_stop(&relay);
	return ret;
}

/* A call that may be made twice is: a peer that refused the first try (an agent restarting,
 * its socket not there yet) answers the second, which waits for the connection. Any other
 * call fails at once. */
static void test_rpc_tls__an_idempotent_call_is_tried_again_once_the_peer_is_up(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	int ret;

	assert_int_equal(hello_while_the_peer_comes_up(f, 0, &err), -ECONNREFUSED);
	err_clear(&err);
	ret = hello_while_the_peer_comes_up(f, 1, &err);
	if (ret < 0)
		print_message("%s\n", err.msg);
	assert_int_equal(ret, 0);
}

/* A message of 1 MiB each way: kiyot writes TLS records of 4 KiB (rpc_client.c), the server
 * its own size; both arrive whole. */
static void test_rpc_tls__a_large_message_crosses_both_ways(void **state)
{
	struct fix *f = *state;
	struct rpc_tls tls = { f->ca, f->kiyot.cert, f->kiyot.key, "cell-a" };
	Kiyot__Cell__V1__KeyValue req = KIYOT__CELL__V1__KEY_VALUE__INIT;
	Kiyot__Cell__V1__KeyValue *resp = NULL;
	struct rpc_channel *ch = NULL;
	struct err err = ERR_INIT;
	size_t n = 1 << 20;
	char *big = malloc(n + 1);

	for (size_t i = 0; i < n; i++)
		big[i] = (char)('a' + (i * 7 + i / 4096) % 26);
	big[n] = '\0';
	req.key = "big";
	req.value = big;
	assert_int_equal(rpc_channel_new_tls(f->addr, &tls, &ch, &err), 0);
	assert_int_equal(rpc_unary(ch, "/kiyot.test.Echo/Echo", &req.base,
				   &kiyot__cell__v1__key_value__descriptor, 10000,
				   (ProtobufCMessage **)&resp, &err),
			 0);
	assert_string_equal(resp->key, "big");
	assert_int_equal(strlen(resp->value), n);
	assert_memory_equal(resp->value, big, n);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	rpc_channel_free(ch);
	free(big);
}

static void test_rpc_tls__a_server_naming_another_cell_is_refused_by_the_client(void **state)
{
	struct fix *f = *state;
	struct rpc_tls tls = { f->ca, f->kiyot.cert, f->kiyot.key, "cell-b" };
	struct err err = ERR_INIT;

	/* kiyot pointed at cell-a's address while it means cell-b: the handshake fails */
	assert_int_equal(call_hello(f->addr, &tls, &err), -ECONNREFUSED);
}

static void test_rpc_tls__a_server_of_another_ca_is_refused_by_the_client(void **state)
{
	struct fix *f = *state;
	struct rpc_tls tls = { f->other_ca, f->kiyot.cert, f->kiyot.key, "cell-a" };
	struct err err = ERR_INIT;

	assert_int_equal(call_hello(f->addr, &tls, &err), -ECONNREFUSED);
}

static void test_rpc_tls__plaintext_client_is_refused(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;

	assert_int_equal(call_hello(f->addr, NULL, &err), -ECONNREFUSED);
}

static void test_rpc_tls__client_certificate_of_another_ca_is_refused(void **state)
{
	struct fix *f = *state;
	struct rpc_tls tls = { f->ca, f->foreign.cert, f->foreign.key, "cell-a" };
	struct err err = ERR_INIT;

	assert_int_equal(call_hello(f->addr, &tls, &err), -ECONNREFUSED);
}

static void test_rpc_tls__client_named_other_than_the_peer_is_unauthenticated(void **state)
{
	struct fix *f = *state;
	struct rpc_tls tls = { f->ca, f->stranger.cert, f->stranger.key, "cell-a" };
	struct err err = ERR_INIT;

	/* a certificate of the right CA for another cell: the handshake passes, the call not */
	assert_int_equal(call_hello(f->addr, &tls, &err), -EACCES);
	assert_non_null(strstr(err.msg, "its own peer only"));
}

/* Watch over a channel with tls: what rpc_stream_next answers first (1: an event). */
static int first_event(const char *addr, const struct rpc_tls *tls, struct err *err)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	struct rpc_channel *ch = NULL;
	struct rpc_stream *st = NULL;
	ProtobufCMessage *msg = NULL;
	int ret;

	assert_int_equal(rpc_channel_new_tls(addr, tls, &ch, err), 0);
	ret = rpc_stream_open(ch, "/kiyot.cell.v1.CellAgent/Watch", &req.base,
			      &kiyot__cell__v1__watch_event__descriptor, 5000, &st, err);
	if (ret == 0)
		ret = rpc_stream_next(st, &msg, err);
	if (msg)
		protobuf_c_message_free_unpacked(msg, NULL);
	rpc_stream_free(st);
	rpc_channel_free(ch);
	return ret;
}

static void test_rpc_tls__streams_check_the_peer_too(void **state)
{
	struct fix *f = *state;
	struct rpc_tls kiyot = { f->ca, f->kiyot.cert, f->kiyot.key, "cell-a" };
	struct rpc_tls stranger = { f->ca, f->stranger.cert, f->stranger.key, "cell-a" };
	struct err err = ERR_INIT;

	assert_int_equal(first_event(f->addr, &kiyot, &err), 1);
	assert_int_equal(first_event(f->addr, &stranger, &err), -EACCES);
}

static void test_rpc_tls__incomplete_client_identity_is_invalid(void **state)
{
	struct fix *f = *state;
	struct rpc_tls tls = { f->ca, NULL, f->kiyot.key, "cell-a" };
	struct rpc_channel *ch = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(rpc_channel_new_tls(f->addr, &tls, &ch, &err), -EINVAL);
	assert_null(ch);
}

static void test_rpc_tls__enroll_proof_binds_secret_cell_and_key(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	char *key2 = NULL, *csr = NULL, *csr2 = NULL;
	char proof[65], p2[65];

	if (pki_csr_new(f->agent.key, "cell-a", &csr, &err) < 0 || pki_key_new(&key2, &err) < 0 ||
	    pki_csr_new(key2, "cell-a", &csr2, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(pki_enroll_proof("s3cret", "cell-a", csr, proof, &err), 0);
	assert_int_equal(strlen(proof), 64);
	assert_int_equal(pki_enroll_check("s3cret", "cell-a", csr, proof, &err), 0);
	/* the same request and secret give the same proof */
	assert_int_equal(pki_enroll_proof("s3cret", "cell-a", csr, p2, &err), 0);
	assert_string_equal(proof, p2);
	/* another secret, another cell, another key: refused */
	assert_int_equal(pki_enroll_check("s3cret!", "cell-a", csr, proof, &err), -EKEYREJECTED);
	assert_non_null(strstr(err.msg, "cell cell-a"));
	assert_int_equal(pki_enroll_check("s3cret", "cell-b", csr, proof, &err), -EKEYREJECTED);
	assert_int_equal(pki_enroll_check("s3cret", "cell-a", csr2, proof, &err), -EKEYREJECTED);
	/* a truncated or missing proof, an empty secret */
	proof[63] = '\0';
	assert_int_equal(pki_enroll_check("s3cret", "cell-a", csr, proof, &err), -EKEYREJECTED);
	assert_int_equal(pki_enroll_check("s3cret", "cell-a", csr, NULL, &err), -EKEYREJECTED);
	assert_int_equal(pki_enroll_proof("", "cell-a", csr, p2, &err), -EINVAL);
	assert_int_equal(pki_enroll_proof("s3cret", "Cell A", csr, p2, &err), -EINVAL);
	assert_int_equal(pki_enroll_proof("s3cret", "cell-a", "junk", p2, &err), -EINVAL);
	free(csr);
	free(csr2);
	free(key2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rpc_tls__kiyot_reaches_the_cell_its_ca_certified),
		cmocka_unit_test(test_rpc_tls__a_large_message_crosses_both_ways),
		cmocka_unit_test(test_rpc_tls__a_slow_handshake_still_connects),
		cmocka_unit_test(
			test_rpc_tls__an_idempotent_call_is_tried_again_once_the_peer_is_up),
		cmocka_unit_test(
			test_rpc_tls__a_server_naming_another_cell_is_refused_by_the_client),
		cmocka_unit_test(test_rpc_tls__a_server_of_another_ca_is_refused_by_the_client),
		cmocka_unit_test(test_rpc_tls__plaintext_client_is_refused),
		cmocka_unit_test(test_rpc_tls__client_certificate_of_another_ca_is_refused),
		cmocka_unit_test(test_rpc_tls__client_named_other_than_the_peer_is_unauthenticated),
		cmocka_unit_test(test_rpc_tls__streams_check_the_peer_too),
		cmocka_unit_test(test_rpc_tls__incomplete_client_identity_is_invalid),
		cmocka_unit_test(test_rpc_tls__enroll_proof_binds_secret_cell_and_key),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
