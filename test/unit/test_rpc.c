/* test_rpc: the gRPC server and client over a unix socket, with the cell-agent schema. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cellagent.pb-c.h"
#include "rpc.h"

static int hello(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		 ProtobufCMessage *resp, struct err *err)
{
	Kiyot__Cell__V1__HelloResponse *r = (Kiyot__Cell__V1__HelloResponse *)resp;

	(void)svc;
	(void)req;
	(void)err;
	r->cell_id = rpc_strdup(call, "cell-1");
	r->incarnation = 7;
	return 0;
}

static int exec_fails(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		      ProtobufCMessage *resp, struct err *err)
{
	const Kiyot__Cell__V1__ExecSyncRequest *r = (const Kiyot__Cell__V1__ExecSyncRequest *)req;

	(void)svc;
	(void)call;
	(void)resp;
	return err_set(err, ENOENT, "unit %s not found", r->unit_id);
}

/* Streams three LOG events whose offsets count up. */
static int watch(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		 ProtobufCMessage *resp, struct err *err)
{
	(void)svc;
	(void)req;
	(void)resp;
	for (int i = 0; i < 3; i++) {
		Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;

		ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__LOG;
		ev.offset = (uint64_t)i;
		if (rpc_send(call, &ev.base, err) < 0)
			return -err->code;
	}
	return 0;
}

/* Answers after slow_ms; slow_entered says a call is in its handler. */
static int slow_ms;
static volatile int slow_entered;

static int slow(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		ProtobufCMessage *resp, struct err *err)
{
	(void)svc;
	(void)call;
	(void)req;
	(void)resp;
	(void)err;
	__atomic_store_n(&slow_entered, 1, __ATOMIC_SEQ_CST);
	usleep((useconds_t)slow_ms * 1000);
	return 0;
}

static const struct rpc_method methods[] = {
	{ "/kiyot.cell.v1.CellAgent/Hello", &kiyot__cell__v1__hello_request__descriptor,
	  &kiyot__cell__v1__hello_response__descriptor, hello, 0, 0 },
	{ "/kiyot.cell.v1.CellAgent/ExecSync", &kiyot__cell__v1__exec_sync_request__descriptor,
	  &kiyot__cell__v1__exec_sync_response__descriptor, exec_fails, 0, 0 },
	{ "/kiyot.cell.v1.CellAgent/Watch", &kiyot__cell__v1__watch_request__descriptor,
	  &kiyot__cell__v1__watch_event__descriptor, watch, RPC_SERVER_STREAM, 0 },
	{ "/kiyot.cell.v1.CellAgent/Stats", &kiyot__cell__v1__stats_request__descriptor,
	  &kiyot__cell__v1__stats_response__descriptor, slow, 0, 0 },
};

struct fixture {
	char path[128];
	char addr[160];
	struct rpc_server *srv;
	struct rpc_channel *ch;
};

static int setup(void **state)
{
	static struct fixture f;
	struct rpc_server_config cfg = { 0 };
	struct err err = ERR_INIT;

	snprintf(f.path, sizeof(f.path), "/tmp/kiyot-test-rpc-%d.sock", (int)getpid());
	snprintf(f.addr, sizeof(f.addr), "unix://%s", f.path);
	cfg.address = f.addr;
	cfg.methods = methods;
	cfg.n_methods = sizeof(methods) / sizeof(methods[0]);
	if (rpc_server_start(&cfg, &f.srv, &err) < 0 || rpc_channel_new(f.addr, &f.ch, &err) < 0) {
		fprintf(stderr, "setup: %s\n", err.msg);
		return -1;
	}
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rpc_channel_free(f->ch);
	rpc_server_stop(f->srv);
	unlink(f->path);
	return 0;
}

static void test_rpc__unary_call_returns_the_handlers_response(void **state)
{
	struct fixture *f = *state;
	Kiyot__Cell__V1__HelloRequest req = KIYOT__CELL__V1__HELLO_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(rpc_unary(f->ch, "/kiyot.cell.v1.CellAgent/Hello", &req.base,
				   &kiyot__cell__v1__hello_response__descriptor, 5000, &resp, &err),
			 0);
	assert_string_equal(((Kiyot__Cell__V1__HelloResponse *)resp)->cell_id, "cell-1");
	assert_int_equal(((Kiyot__Cell__V1__HelloResponse *)resp)->incarnation, 7);
	protobuf_c_message_free_unpacked(resp, NULL);
}

struct slow_call {
	struct rpc_channel *ch;
	int ret;
	struct err err;
};

static void *slow_caller(void *arg)
{
	struct slow_call *sc = arg;
	Kiyot__Cell__V1__StatsRequest req = KIYOT__CELL__V1__STATS_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;

	sc->ret = rpc_unary(sc->ch, "/kiyot.cell.v1.CellAgent/Stats", &req.base,
			    &kiyot__cell__v1__stats_response__descriptor, 10000, &resp, &sc->err);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	return NULL;
}

/* A server of its own stopped while a call is in its handler (300 ms): within a grace the
 * call ends with its answer; without one it is cancelled. */
static int stop_during_a_call(int grace_ms, struct err *err)
{
	struct rpc_server_config cfg = { 0 };
	struct rpc_server *srv = NULL;
	struct slow_call sc = { .err = ERR_INIT };
	char path[128], addr[160];
	pthread_t t;

	snprintf(path, sizeof(path), "/tmp/kiyot-test-rpc-stop-%d.sock", (int)getpid());
	snprintf(addr, sizeof(addr), "unix://%s", path);
	cfg.address = addr;
	cfg.methods = methods;
	cfg.n_methods = sizeof(methods) / sizeof(methods[0]);
	assert_int_equal(rpc_server_start(&cfg, &srv, err), 0);
	assert_int_equal(rpc_channel_new(addr, &sc.ch, err), 0);
	slow_ms = 300;
	__atomic_store_n(&slow_entered, 0, __ATOMIC_SEQ_CST);
	assert_int_equal(pthread_create(&t, NULL, slow_caller, &sc), 0);
	while (!__atomic_load_n(&slow_entered, __ATOMIC_SEQ_CST))
		usleep(1000);
	rpc_server_stop_within(srv, grace_ms);
	pthread_join(t, NULL);
	rpc_channel_free(sc.ch);
	unlink(path);
	*err = sc.err;
	return sc.ret;
}

static void test_rpc__a_stop_with_a_grace_lets_the_call_in_flight_answer(void **state)
{
	struct err err = ERR_INIT;

	(void)state;
	if (stop_during_a_call(5000, &err) < 0)
		fail_msg("the call in flight failed: %s", err.msg);
	err_clear(&err);
	assert_int_not_equal(stop_during_a_call(0, &err), 0);
}

static void test_rpc__handler_error_reaches_client_as_status(void **state)
{
	struct fixture *f = *state;
	Kiyot__Cell__V1__ExecSyncRequest req = KIYOT__CELL__V1__EXEC_SYNC_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	struct err err = ERR_INIT;

	req.unit_id = "u9";
	assert_int_equal(rpc_unary(f->ch, "/kiyot.cell.v1.CellAgent/ExecSync", &req.base,
				   &kiyot__cell__v1__exec_sync_response__descriptor, 5000, &resp,
				   &err),
			 -ENOENT);
	assert_string_equal(err.msg, "unit u9 not found");
}

/* Content errors keep a precise status across the agent's hop and kiyot's: a digest mismatch
 * is DATA_LOSS (15) both ways; a layer entry that escapes its root (EXDEV) or a redirect loop
 * (ELOOP) is FAILED_PRECONDITION (9), which comes back as itself. */
static void test_rpc__content_errors_have_precise_statuses(void **state)
{
	(void)state;
	assert_int_equal(rpc_status_from_errno(EBADMSG), 15);
	assert_int_equal(rpc_errno_from_status(15), EBADMSG);
	assert_int_equal(rpc_status_from_errno(EXDEV), 9);
	assert_int_equal(rpc_status_from_errno(ELOOP), 9);
	assert_int_equal(rpc_status_from_errno(EADDRINUSE), 9); /* a hostPort another pod holds */
	assert_int_equal(rpc_status_from_errno(rpc_errno_from_status(9)), 9);
}

static void test_rpc__unknown_method_is_unimplemented_not_a_hang(void **state)
{
	struct fixture *f = *state;
	Kiyot__Cell__V1__HelloRequest req = KIYOT__CELL__V1__HELLO_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(rpc_unary(f->ch, "/kiyot.cell.v1.CellAgent/Nope", &req.base,
				   &kiyot__cell__v1__hello_response__descriptor, 5000, &resp, &err),
			 -ENOSYS);
	assert_non_null(strstr(err.msg, "unknown method"));
}

/* Reads the test's Watch (three events, offsets 0, 1, 2, then the end) and frees it. */
static void read_watch_to_end(struct rpc_stream *s)
{
	ProtobufCMessage *m = NULL;
	struct err err = ERR_INIT;

	for (uint64_t i = 0; i < 3; i++) {
		assert_int_equal(rpc_stream_next(s, &m, &err), 1);
		assert_int_equal(((Kiyot__Cell__V1__WatchEvent *)m)->offset, i);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	assert_int_equal(rpc_stream_next(s, &m, &err), 0);
	rpc_stream_free(s);
}

static void test_rpc__server_stream_delivers_messages_in_order_then_ends(void **state)
{
	struct fixture *f = *state;
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	struct rpc_stream *s = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(rpc_stream_open(f->ch, "/kiyot.cell.v1.CellAgent/Watch", &req.base,
					 &kiyot__cell__v1__watch_event__descriptor, 5000, &s, &err),
			 0);
	read_watch_to_end(s);
}

static void test_rpc__unreachable_server_is_unavailable(void **state)
{
	Kiyot__Cell__V1__HelloRequest req = KIYOT__CELL__V1__HELLO_REQUEST__INIT;
	struct rpc_channel *ch = NULL;
	ProtobufCMessage *resp = NULL;
	struct err err = ERR_INIT;
	int ret;

	(void)state;
	assert_int_equal(rpc_channel_new("unix:///tmp/kiyot-test-no-such.sock", &ch, &err), 0);
	ret = rpc_unary(ch, "/kiyot.cell.v1.CellAgent/Hello", &req.base,
			&kiyot__cell__v1__hello_response__descriptor, 2000, &resp, &err);
	assert_true(ret == -ECONNREFUSED || ret == -ETIMEDOUT);
	rpc_channel_free(ch);
}

/* Whether ch holds gRPC's channel within 5 s (polled; the releaser looks once a second). */
static bool holds_within(struct rpc_channel *ch, bool want)
{
	for (int i = 0; i < 500; i++) {
		if (rpc_channel_holds(ch) == want)
			return true;
		usleep(10000);
	}
	return false;
}

static int hello_on(struct rpc_channel *ch)
{
	Kiyot__Cell__V1__HelloRequest req = KIYOT__CELL__V1__HELLO_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	struct err err = ERR_INIT;
	int ret = rpc_unary(ch, "/kiyot.cell.v1.CellAgent/Hello", &req.base,
			    &kiyot__cell__v1__hello_response__descriptor, 5000, &resp, &err);

	if (ret == 0)
		assert_string_equal(((Kiyot__Cell__V1__HelloResponse *)resp)->cell_id, "cell-1");
	protobuf_c_message_free_unpacked(resp, NULL);
	return ret;
}

/* An idle channel costs kiyot ~8 KB a cell: it lets gRPC's go, and the next call makes it
 * again. */
static void test_rpc__an_idle_channel_lets_go_and_the_next_call_makes_it_again(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(hello_on(f->ch), 0);
	assert_true(rpc_channel_holds(f->ch));
	rpc_channel_set_release_ms(f->ch, 50);
	assert_true(holds_within(f->ch, false));
	assert_int_equal(hello_on(f->ch), 0);
	assert_true(rpc_channel_holds(f->ch));
	assert_true(holds_within(f->ch, false));
	rpc_channel_set_release_ms(f->ch, RPC_CHANNEL_RELEASE_MS);
	assert_int_equal(hello_on(f->ch), 0);
}

/* A call in progress keeps its channel whatever the release time, and a channel its owner
 * frees while a stream is open lives until the stream is freed (ASan tells a leak or a use
 * after free). */
static void test_rpc__an_open_stream_keeps_its_channel_even_past_its_owner(void **state)
{
	struct fixture *f = *state;
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	struct rpc_channel *ch = NULL;
	struct rpc_stream *s = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(rpc_channel_new(f->addr, &ch, &err), 0);
	rpc_channel_set_release_ms(ch, 0);
	assert_int_equal(rpc_stream_open(ch, "/kiyot.cell.v1.CellAgent/Watch", &req.base,
					 &kiyot__cell__v1__watch_event__descriptor, 5000, &s, &err),
			 0);
	usleep((RPC_CHANNEL_TICK_MS + 500) * 1000);
	assert_true(rpc_channel_holds(ch));
	rpc_channel_free(ch);
	read_watch_to_end(s);
}

/* A TCP port of 127.0.0.1 that nothing listens on right now. */
static int free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* Two servers on one address and port would split the connections between them (two agents
 * of one cell each answering calls meant for the other): the second one must not bind. */
static void test_rpc__a_second_server_on_the_same_tcp_port_fails_to_bind(void **state)
{
	struct rpc_server_config cfg = { 0 };
	struct rpc_server *first = NULL, *second = NULL;
	struct rpc_channel *ch = NULL;
	Kiyot__Cell__V1__HelloRequest req = KIYOT__CELL__V1__HELLO_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	struct err err = ERR_INIT;
	char addr[64];

	(void)state;
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", free_port());
	cfg.address = addr;
	cfg.methods = methods;
	cfg.n_methods = sizeof(methods) / sizeof(methods[0]);
	assert_int_equal(rpc_server_start(&cfg, &first, &err), 0);
	assert_int_equal(rpc_server_start(&cfg, &second, &err), -EADDRINUSE);
	assert_null(second);
	assert_non_null(strstr(err.msg, addr));
	/* the first one still serves */
	assert_int_equal(rpc_channel_new(addr, &ch, &err), 0);
	assert_int_equal(rpc_unary(ch, "/kiyot.cell.v1.CellAgent/Hello", &req.base,
				   &kiyot__cell__v1__hello_response__descriptor, 5000, &resp, &err),
			 0);
	protobuf_c_message_free_unpacked(resp, NULL);
	rpc_channel_free(ch);
	rpc_server_stop(first);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rpc__unary_call_returns_the_handlers_response),
		cmocka_unit_test(test_rpc__handler_error_reaches_client_as_status),
		cmocka_unit_test(test_rpc__content_errors_have_precise_statuses),
		cmocka_unit_test(test_rpc__unknown_method_is_unimplemented_not_a_hang),
		cmocka_unit_test(test_rpc__server_stream_delivers_messages_in_order_then_ends),
		cmocka_unit_test(test_rpc__unreachable_server_is_unavailable),
		cmocka_unit_test(test_rpc__a_stop_with_a_grace_lets_the_call_in_flight_answer),
		cmocka_unit_test(test_rpc__a_second_server_on_the_same_tcp_port_fails_to_bind),
		cmocka_unit_test(
			test_rpc__an_idle_channel_lets_go_and_the_next_call_makes_it_again),
		cmocka_unit_test(test_rpc__an_open_stream_keeps_its_channel_even_past_its_owner),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
