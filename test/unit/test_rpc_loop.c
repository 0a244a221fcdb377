/* test_rpc_loop: server-streaming calls on a loop of two threads (rpc_loop.h), against the
 * gRPC server of common/rpc over a unix socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cellagent.pb-c.h"
#include "rpc.h"
#include "rpc_loop.h"

#define WATCHES 100
#define EVENTS 50

/* Watch: as many LOG events (offsets 0, 1, ...) as the first offset of the request says,
 * then, by the first offset's unit_id: "fail" ends with NOT_FOUND, "hold" waits until the
 * client goes away, anything else ends cleanly. */
static int watch(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		 ProtobufCMessage *resp, struct err *err)
{
	const Kiyot__Cell__V1__WatchRequest *r = (const Kiyot__Cell__V1__WatchRequest *)req;
	uint64_t n = r->n_offsets ? r->offsets[0]->offset : 0;
	const char *then = r->n_offsets ? r->offsets[0]->unit_id : "";

	(void)svc;
	(void)resp;
	for (uint64_t i = 0; i < n; i++) {
		Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;

		ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__LOG;
		ev.offset = i;
		if (rpc_send(call, &ev.base, err) < 0)
			return -err->code;
	}
	if (strcmp(then, "fail") == 0)
		return err_set(err, ENOENT, "no such cell");
	while (strcmp(then, "hold") == 0 && !rpc_cancelled(call))
		usleep(10 * 1000);
	return 0;
}

/* Answers a message the client cannot read as a WatchEvent: field 1 is a string here and an
 * enum there. */
static int garbage(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		   ProtobufCMessage *resp, struct err *err)
{
	Kiyot__Cell__V1__KeyValue kv = KIYOT__CELL__V1__KEY_VALUE__INIT;

	(void)svc;
	(void)req;
	(void)resp;
	kv.key = "not an enum";
	kv.value = "";
	return rpc_send(call, &kv.base, err);
}

static const struct rpc_method methods[] = {
	{ "/kiyot.cell.v1.CellAgent/Watch", &kiyot__cell__v1__watch_request__descriptor,
	  &kiyot__cell__v1__watch_event__descriptor, watch, RPC_SERVER_STREAM, 0 },
	{ "/kiyot.test.Garbage/Watch", &kiyot__cell__v1__watch_request__descriptor,
	  &kiyot__cell__v1__key_value__descriptor, garbage, RPC_SERVER_STREAM, 0 },
};

/* What one watch saw, filled by its callbacks. */
struct seen {
	uint64_t events;
	int in_order;
	int ended, ret, code;
	char msg[512];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

static void on_msg(void *arg, const ProtobufCMessage *msg)
{
	struct seen *s = arg;
	const Kiyot__Cell__V1__WatchEvent *ev = (const Kiyot__Cell__V1__WatchEvent *)msg;

	pthread_mutex_lock(&lock);
	if (ev->offset != s->events || s->ended)
		s->in_order = 0;
	s->events++;
	pthread_mutex_unlock(&lock);
}

static void on_end(void *arg, int ret, const struct err *err)
{
	struct seen *s = arg;

	pthread_mutex_lock(&lock);
	s->ended++;
	s->ret = ret;
	s->code = err->code;
	snprintf(s->msg, sizeof(s->msg), "%s", err->msg);
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

/* Waits up to 10 s for n watches to end; how many did. */
static int wait_ended(struct seen *s, int n)
{
	struct timespec until;
	int done = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&lock);
	for (;;) {
		done = 0;
		for (int i = 0; i < n; i++)
			done += s[i].ended > 0;
		if (done == n || pthread_cond_timedwait(&cond, &lock, &until) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&lock);
	return done;
}

struct fixture {
	char path[128];
	char addr[160];
	struct rpc_server *srv;
	struct rpc_channel *ch;
	struct rpc_loop *loop;
};

static int setup(void **state)
{
	static struct fixture f;
	struct rpc_server_config cfg = { 0 };
	struct err err = ERR_INIT;

	snprintf(f.path, sizeof(f.path), "/tmp/kiyot-test-rpc-loop-%d.sock", (int)getpid());
	snprintf(f.addr, sizeof(f.addr), "unix://%s", f.path);
	cfg.address = f.addr;
	cfg.methods = methods;
	cfg.n_methods = sizeof(methods) / sizeof(methods[0]);
	if (rpc_server_start(&cfg, &f.srv, &err) < 0 || rpc_channel_new(f.addr, &f.ch, &err) < 0 ||
	    rpc_loop_new(2, &f.loop, &err) < 0) {
		fprintf(stderr, "setup: %s\n", err.msg);
		return -1;
	}
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rpc_loop_free(f->loop);
	rpc_channel_free(f->ch);
	rpc_server_stop(f->srv);
	unlink(f->path);
	return 0;
}

/* Opens a Watch asking for n events, then `then` (see watch above). */
static int open_watch(struct fixture *f, const char *method, uint64_t n, const char *then,
		      struct seen *s, struct rpc_watch **w, struct err *err)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	Kiyot__Cell__V1__LogOffset off = KIYOT__CELL__V1__LOG_OFFSET__INIT;
	Kiyot__Cell__V1__LogOffset *offs[1] = { &off };

	off.unit_id = (char *)then;
	off.offset = n;
	req.offsets = offs;
	req.n_offsets = 1;
	s->in_order = 1;
	return rpc_watch_open(f->loop, f->ch, method, &req.base,
			      &kiyot__cell__v1__watch_event__descriptor, on_msg, on_end, s, w, err);
}

static void test_rpc_loop__many_watches_each_in_order_on_two_threads(void **state)
{
	struct fixture *f = *state;
	static struct seen s[WATCHES];
	struct err err = ERR_INIT;

	memset(s, 0, sizeof(s));
	for (int i = 0; i < WATCHES; i++) {
		struct rpc_watch *w = NULL;

		assert_int_equal(open_watch(f, "/kiyot.cell.v1.CellAgent/Watch", EVENTS, "", &s[i],
					    &w, &err),
				 0);
	}
	assert_int_equal(wait_ended(s, WATCHES), WATCHES);
	for (int i = 0; i < WATCHES; i++) {
		assert_int_equal(s[i].events, EVENTS);
		assert_true(s[i].in_order);
		assert_int_equal(s[i].ended, 1);
		assert_int_equal(s[i].ret, 0);
	}
}

static void test_rpc_loop__a_status_ends_the_watch_with_its_error(void **state)
{
	struct fixture *f = *state;
	struct seen s = { 0 };
	struct rpc_watch *w = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(open_watch(f, "/kiyot.cell.v1.CellAgent/Watch", 2, "fail", &s, &w, &err),
			 0);
	assert_int_equal(wait_ended(&s, 1), 1);
	assert_int_equal(s.events, 2);
	assert_int_equal(s.ret, -ENOENT);
	assert_non_null(strstr(s.msg, "no such cell"));
}

static void test_rpc_loop__cancel_ends_a_held_watch(void **state)
{
	struct fixture *f = *state;
	struct seen s = { 0 };
	struct rpc_watch *w = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(open_watch(f, "/kiyot.cell.v1.CellAgent/Watch", 1, "hold", &s, &w, &err),
			 0);
	for (int i = 0; i < 500; i++) { /* the event came: the server holds the stream */
		pthread_mutex_lock(&lock);
		i = s.events ? 500 : i;
		pthread_mutex_unlock(&lock);
		usleep(10 * 1000);
	}
	pthread_mutex_lock(&lock);
	assert_int_equal(s.events, 1);
	assert_int_equal(s.ended, 0);
	rpc_watch_cancel(w);
	pthread_mutex_unlock(&lock);
	assert_int_equal(wait_ended(&s, 1), 1);
	assert_int_equal(s.ret, -ECANCELED);
}

static void test_rpc_loop__a_message_that_does_not_parse_ends_the_watch(void **state)
{
	struct fixture *f = *state;
	struct seen s = { 0 };
	struct rpc_watch *w = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(open_watch(f, "/kiyot.test.Garbage/Watch", 0, "", &s, &w, &err), 0);
	assert_int_equal(wait_ended(&s, 1), 1);
	assert_int_equal(s.events, 0);
	assert_int_equal(s.ret, -EINVAL);
	assert_non_null(strstr(s.msg, "/kiyot.test.Garbage/Watch"));
}

static void test_rpc_loop__an_absent_server_ends_the_watch_refused(void **state)
{
	struct fixture *f = *state;
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	struct rpc_channel *ch = NULL;
	struct seen s = { 0 };
	struct rpc_watch *w = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(rpc_channel_new("unix:///tmp/kiyot-test-no-such.sock", &ch, &err), 0);
	assert_int_equal(rpc_watch_open(f->loop, ch, "/kiyot.cell.v1.CellAgent/Watch", &req.base,
					&kiyot__cell__v1__watch_event__descriptor, on_msg, on_end,
					&s, &w, &err),
			 0);
	assert_int_equal(wait_ended(&s, 1), 1);
	assert_int_equal(s.ret, -ECONNREFUSED);
	assert_non_null(strstr(s.msg, "kiyot-test-no-such.sock"));
	rpc_channel_free(ch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rpc_loop__many_watches_each_in_order_on_two_threads),
		cmocka_unit_test(test_rpc_loop__a_status_ends_the_watch_with_its_error),
		cmocka_unit_test(test_rpc_loop__cancel_ends_a_held_watch),
		cmocka_unit_test(test_rpc_loop__a_message_that_does_not_parse_ends_the_watch),
		cmocka_unit_test(test_rpc_loop__an_absent_server_ends_the_watch_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
