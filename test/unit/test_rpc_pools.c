/*
 * test_rpc_pools: the server's worker pools and cancellation, over a unix socket. A "slow"
 * method (one worker) blocks until the test releases it or its caller goes away; "fast" and
 * "relay" (which calls "slow" on behalf of its own caller) run on a pool of their own. "park"
 * (on the slow pool) parks its call on its first run and answers on its second. "inline" (on
 * the slow pool, RPC_INLINE) answers where it ran: on the thread that took the call, or (asked
 * for unit "worker", or its request too large to read there) on the slow pool's worker.
 */
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

#include "cancel.h"
#include "cellagent.pb-c.h"
#include "clock.h"
#include "rpc.h"
#include "xalloc.h"

#define SLOW "/kiyot.cell.v1.CellAgent/Stats"
#define FAST "/kiyot.cell.v1.CellAgent/Hello"
#define RELAY "/kiyot.cell.v1.CellAgent/PullImage"
#define PARK "/kiyot.cell.v1.CellAgent/Apply"
#define INLINE "/kiyot.cell.v1.CellAgent/ExecSync"

enum {
	POOL_FAST,
	POOL_SLOW
};

/* What the slow handlers did, guarded by mu. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int runs;      /* handlers started */
	int running;   /* handlers not yet returned */
	int cancelled; /* handlers that saw their caller go away */
	bool released; /* the test lets every slow handler return */
} slow = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, false };

static struct rpc_channel *relay_ch; /* the channel "relay" calls "slow" on */

/* Waits until released or until its caller goes away (polling the thread's cancel scope). */
static int slow_handler(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			ProtobufCMessage *resp, struct err *err)
{
	bool gone = false;

	(void)svc;
	(void)call;
	(void)req;
	(void)resp;
	pthread_mutex_lock(&slow.mu);
	slow.runs++;
	slow.running++;
	pthread_cond_broadcast(&slow.cv);
	while (!slow.released && !gone) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 20 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&slow.cv, &slow.mu, &ts);
		gone = cancel_requested();
	}
	slow.cancelled += gone;
	slow.running--;
	pthread_cond_broadcast(&slow.cv);
	pthread_mutex_unlock(&slow.mu);
	return gone ? err_set(err, ECANCELED, "caller went away") : 0;
}

static int fast_handler(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			ProtobufCMessage *resp, struct err *err)
{
	(void)svc;
	(void)req;
	(void)err;
	assert_ptr_equal(rpc_current(), call);
	((Kiyot__Cell__V1__HelloResponse *)resp)->cell_id = rpc_strdup(call, "fast");
	return 0;
}

/* Calls "slow" for its own caller, with a deadline far longer than the caller's. */
static int relay_handler(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			 ProtobufCMessage *resp, struct err *err)
{
	Kiyot__Cell__V1__StatsRequest sreq = KIYOT__CELL__V1__STATS_REQUEST__INIT;
	ProtobufCMessage *sresp = NULL;
	int ret;

	(void)svc;
	(void)req;
	(void)resp;
	ret = rpc_unary_for(rpc_current(), relay_ch, SLOW, &sreq.base,
			    &kiyot__cell__v1__stats_response__descriptor, 60000, &sresp, err);
	if (sresp)
		protobuf_c_message_free_unpacked(sresp, NULL);
	(void)call;
	return ret;
}

/* The park handler's calls, guarded by slow.mu: those parked, and its runs. */
static struct {
	struct rpc_call *parked[8];
	int n_parked;
	int runs;
	bool at_once; /* unpark from within the handler, before it returns */
} park;

/* First run: parks the call (noting it); second run: answers. */
static int park_handler(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			ProtobufCMessage *resp, struct err *err)
{
	static int mark;

	(void)svc;
	(void)req;
	(void)resp;
	(void)err;
	pthread_mutex_lock(&slow.mu);
	park.runs++;
	pthread_cond_broadcast(&slow.cv);
	if (rpc_note(call) == &mark) {
		rpc_set_note(call, NULL);
		pthread_mutex_unlock(&slow.mu);
		return 0;
	}
	rpc_set_note(call, &mark);
	rpc_park(call);
	if (park.at_once)
		rpc_unpark(call);
	else
		park.parked[park.n_parked++] = call;
	pthread_mutex_unlock(&slow.mu);
	return RPC_PARKED;
}

/* The inline handler's runs, guarded by slow.mu. */
static struct {
	int runs;
	int inline_runs;
} inl;

/* Answers "inline" or "worker" as it runs; unit "worker" asks for a worker when inline. */
static int inline_handler(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			  ProtobufCMessage *resp, struct err *err)
{
	const Kiyot__Cell__V1__ExecSyncRequest *r = (const void *)req;
	Kiyot__Cell__V1__ExecSyncResponse *out = (void *)resp;
	const char *where = rpc_inline(call) ? "inline" : "worker";

	(void)svc;
	(void)err;
	assert_ptr_equal(rpc_current(), call);
	pthread_mutex_lock(&slow.mu);
	inl.runs++;
	inl.inline_runs += rpc_inline(call);
	pthread_mutex_unlock(&slow.mu);
	if (rpc_inline(call) && strcmp(r->unit_id, "worker") == 0)
		return RPC_NEEDS_WORKER;
	out->stdout.data = (uint8_t *)rpc_strdup(call, where);
	out->stdout.len = strlen(where);
	return 0;
}

static const struct rpc_method methods[] = {
	{ SLOW, &kiyot__cell__v1__stats_request__descriptor,
	  &kiyot__cell__v1__stats_response__descriptor, slow_handler, 0, POOL_SLOW },
	{ FAST, &kiyot__cell__v1__hello_request__descriptor,
	  &kiyot__cell__v1__hello_response__descriptor, fast_handler, 0, POOL_FAST },
	{ RELAY, &kiyot__cell__v1__pull_image_request__descriptor,
	  &kiyot__cell__v1__pull_image_response__descriptor, relay_handler, 0, POOL_FAST },
	{ PARK, &kiyot__cell__v1__apply_request__descriptor,
	  &kiyot__cell__v1__apply_response__descriptor, park_handler, 0, POOL_SLOW },
	{ INLINE, &kiyot__cell__v1__exec_sync_request__descriptor,
	  &kiyot__cell__v1__exec_sync_response__descriptor, inline_handler, RPC_INLINE, POOL_SLOW },
};

struct fixture {
	char path[128];
	char addr[160];
	struct rpc_server *srv;
	struct rpc_channel *ch;
};

/* The slow pool: one worker, and room for two calls waiting. */
static int setup(void **state)
{
	static struct fixture f;
	struct rpc_server_config cfg = { 0 };
	struct err err = ERR_INIT;

	snprintf(f.path, sizeof(f.path), "/tmp/kiyot-test-rpc-pools-%d.sock", (int)getpid());
	snprintf(f.addr, sizeof(f.addr), "unix://%s", f.path);
	cfg.address = f.addr;
	cfg.methods = methods;
	cfg.n_methods = sizeof(methods) / sizeof(methods[0]);
	cfg.pools[POOL_FAST] = (struct rpc_pool){ "fast", 2, 0 };
	cfg.pools[POOL_SLOW] = (struct rpc_pool){ "slow", 1, 2 };
	cfg.n_pools = 2;
	if (rpc_server_start(&cfg, &f.srv, &err) < 0 || rpc_channel_new(f.addr, &f.ch, &err) < 0 ||
	    rpc_channel_new(f.addr, &relay_ch, &err) < 0) {
		fprintf(stderr, "setup: %s\n", err.msg);
		return -1;
	}
	*state = &f;
	return 0;
}

/* Unparks the park handler's parked calls (also those a failed test left). */
static void unpark_all(void)
{
	pthread_mutex_lock(&slow.mu);
	for (int i = 0; i < park.n_parked; i++)
		if (park.parked[i])
			rpc_unpark(steal_ptr(park.parked[i]));
	pthread_mutex_unlock(&slow.mu);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	pthread_mutex_lock(&slow.mu);
	slow.released = true;
	pthread_cond_broadcast(&slow.cv);
	pthread_mutex_unlock(&slow.mu);
	unpark_all();
	rpc_channel_free(f->ch);
	rpc_channel_free(relay_ch);
	rpc_server_stop(f->srv);
	unlink(f->path);
	return 0;
}

/* Before each test: nothing running, counters at zero. */
static int reset(void **state)
{
	(void)state;
	unpark_all();
	pthread_mutex_lock(&slow.mu);
	slow.released = true;
	pthread_cond_broadcast(&slow.cv);
	while (slow.running)
		pthread_cond_wait(&slow.cv, &slow.mu);
	slow.runs = slow.cancelled = 0;
	slow.released = false;
	memset(&park, 0, sizeof(park));
	memset(&inl, 0, sizeof(inl));
	pthread_mutex_unlock(&slow.mu);
	return 0;
}

/* Waits up to 5 s until *field reaches want; returns its value. */
static int wait_count(const int *field, int want)
{
	int64_t end = clock_mono_ns() + 5000000000LL;
	int v;

	pthread_mutex_lock(&slow.mu);
	while ((v = *field) < want && clock_mono_ns() < end) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&slow.cv, &slow.mu, &ts);
	}
	pthread_mutex_unlock(&slow.mu);
	return v;
}

struct bg_call {
	struct rpc_channel *ch;
	const char *method;
	int64_t timeout_ms;
	pthread_t t;
	int ret;
	struct err err;
};

static void *bg_main(void *arg)
{
	struct bg_call *b = arg;
	Kiyot__Cell__V1__StatsRequest req = KIYOT__CELL__V1__STATS_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;

	b->ret = rpc_unary(
		b->ch, b->method, &req.base,
		strcmp(b->method, SLOW) == 0   ? &kiyot__cell__v1__stats_response__descriptor
		: strcmp(b->method, PARK) == 0 ? &kiyot__cell__v1__apply_response__descriptor
					       : &kiyot__cell__v1__pull_image_response__descriptor,
		b->timeout_ms, &resp, &b->err);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	return NULL;
}

static void bg_start(struct bg_call *b, struct rpc_channel *ch, const char *method, int64_t ms)
{
	memset(b, 0, sizeof(*b));
	b->ch = ch;
	b->method = method;
	b->timeout_ms = ms;
	assert_int_equal(pthread_create(&b->t, NULL, bg_main, b), 0);
}

/* Milliseconds a call of FAST takes; it must succeed. */
static int64_t fast_ms(struct rpc_channel *ch)
{
	Kiyot__Cell__V1__HelloRequest req = KIYOT__CELL__V1__HELLO_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	struct err err = ERR_INIT;
	int64_t t0 = clock_mono_ns();

	assert_int_equal(rpc_unary(ch, FAST, &req.base,
				   &kiyot__cell__v1__hello_response__descriptor, 5000, &resp, &err),
			 0);
	assert_string_equal(((Kiyot__Cell__V1__HelloResponse *)resp)->cell_id, "fast");
	protobuf_c_message_free_unpacked(resp, NULL);
	return (clock_mono_ns() - t0) / 1000000;
}

/* With the slow pool's worker taken and its queue full, fast calls still answer at once, and
 * the next slow call is refused at once, naming the pool, instead of waiting. */
static void test_rpc_pools__fast_calls_answer_while_the_slow_pool_is_full(void **state)
{
	struct fixture *f = *state;
	struct bg_call b[3];
	struct bg_call extra;
	int64_t t0;

	bg_start(&b[0], f->ch, SLOW, 30000);
	assert_int_equal(wait_count(&slow.runs, 1), 1);
	for (int i = 1; i < 3; i++)
		bg_start(&b[i], f->ch, SLOW, 30000);
	usleep(200 * 1000); /* the two others reach the queue */
	for (int i = 0; i < 20; i++)
		assert_true(fast_ms(f->ch) < 1000);
	t0 = clock_mono_ns();
	bg_start(&extra, f->ch, SLOW, 30000);
	pthread_join(extra.t, NULL);
	assert_int_equal(extra.ret, -EFBIG); /* RESOURCE_EXHAUSTED */
	assert_non_null(strstr(extra.err.msg, "slow"));
	assert_true(clock_mono_ns() - t0 < 2000000000LL);
	/* the queued ones run once the worker is free */
	pthread_mutex_lock(&slow.mu);
	slow.released = true;
	pthread_cond_broadcast(&slow.cv);
	pthread_mutex_unlock(&slow.mu);
	for (int i = 0; i < 3; i++) {
		pthread_join(b[i].t, NULL);
		assert_int_equal(b[i].ret, 0);
	}
	assert_int_equal(slow.runs, 3);
}

/* A handler learns through its cancel scope that its client's deadline passed, and stops. */
static void test_rpc_pools__a_handler_sees_its_caller_go_away(void **state)
{
	struct fixture *f = *state;
	struct bg_call b;
	int64_t t0 = clock_mono_ns();

	bg_start(&b, f->ch, SLOW, 300);
	pthread_join(b.t, NULL);
	/* DEADLINE_EXCEEDED from the client's own timer, or CANCELLED when the server's answer to
	 * the cancelled handler arrives first (seen on a busy machine under ASan) */
	assert_true(b.ret == -ETIMEDOUT || b.ret == -ECANCELED);
	assert_int_equal(wait_count(&slow.cancelled, 1), 1);
	assert_true(clock_mono_ns() - t0 < 3000000000LL);
	assert_false(cancel_requested()); /* outside any handler nothing is cancelled */
}

/* A call made on behalf of a served call (rpc_unary_for) ends when that call's client goes
 * away, long before its own deadline (60 s). */
static void test_rpc_pools__a_call_made_for_a_caller_ends_with_it(void **state)
{
	struct fixture *f = *state;
	struct bg_call b;
	int64_t t0 = clock_mono_ns();

	bg_start(&b, f->ch, RELAY, 400);
	assert_int_equal(wait_count(&slow.runs, 1), 1);
	pthread_join(b.t, NULL);
	assert_int_equal(b.ret, -ETIMEDOUT);
	assert_int_equal(wait_count(&slow.cancelled, 1), 1);
	assert_true(clock_mono_ns() - t0 < 3000000000LL);
	assert_int_equal(wait_count(&slow.running, 0), 0);
}

/* A call whose client gave up while it waited for a worker is not run when one frees up. */
static void test_rpc_pools__calls_abandoned_in_the_queue_never_run(void **state)
{
	struct fixture *f = *state;
	struct bg_call busy, gone;

	bg_start(&busy, f->ch, SLOW, 30000);
	assert_int_equal(wait_count(&slow.runs, 1), 1);
	bg_start(&gone, f->ch, SLOW, 200);
	pthread_join(gone.t, NULL);
	assert_int_equal(gone.ret, -ETIMEDOUT);
	/* gRPC sends the deadline as time left: a server that took the call in late holds a
	 * later one than its client's, and a cancel it has not read yet is not seen; a second
	 * lets both reach it on a loaded machine */
	usleep(1000 * 1000);
	pthread_mutex_lock(&slow.mu);
	slow.released = true;
	pthread_cond_broadcast(&slow.cv);
	pthread_mutex_unlock(&slow.mu);
	pthread_join(busy.t, NULL);
	assert_int_equal(busy.ret, 0);
	usleep(300 * 1000);
	assert_int_equal(slow.runs, 1);
}

/* A parked call holds no worker: with the slow pool's one worker, three calls all reach their
 * handler and park, and a slow call still runs; unparked, each runs its handler again and
 * answers, in the order they were unparked. One unparked before its handler even returned
 * comes back too. */
static void test_rpc_pools__a_parked_call_gives_its_worker_back(void **state)
{
	struct fixture *f = *state;
	struct bg_call b[3], s, now;

	for (int i = 0; i < 3; i++) {
		bg_start(&b[i], f->ch, PARK, 30000);
		assert_int_equal(wait_count(&park.n_parked, i + 1), i + 1);
	}
	assert_int_equal(park.runs, 3);
	bg_start(&s, f->ch, SLOW, 30000);
	assert_int_equal(wait_count(&slow.runs, 1), 1);
	pthread_mutex_lock(&slow.mu);
	slow.released = true;
	pthread_cond_broadcast(&slow.cv);
	pthread_mutex_unlock(&slow.mu);
	pthread_join(s.t, NULL);
	assert_int_equal(s.ret, 0);
	unpark_all();
	for (int i = 0; i < 3; i++) {
		pthread_join(b[i].t, NULL);
		assert_int_equal(b[i].ret, 0);
	}
	assert_int_equal(park.runs, 6);
	park.at_once = true;
	bg_start(&now, f->ch, PARK, 30000);
	pthread_join(now.t, NULL);
	assert_int_equal(now.ret, 0);
	assert_int_equal(park.runs, 8);
}

/* One call of INLINE for unit (with cmd of pad bytes when pad > 0): 0 with where it was
 * answered in where[], or the error. */
static int inline_call(struct rpc_channel *ch, const char *unit, size_t pad, int64_t ms,
		       char where[16], struct err *err)
{
	Kiyot__Cell__V1__ExecSyncRequest req = KIYOT__CELL__V1__EXEC_SYNC_REQUEST__INIT;
	_cleanup_free_ char *big = NULL;
	char *cmd[1];
	ProtobufCMessage *resp = NULL;
	int ret;

	req.unit_id = (char *)unit;
	if (pad) {
		big = xmalloc(pad + 1);
		memset(big, 'x', pad);
		big[pad] = '\0';
		cmd[0] = big;
		req.cmd = cmd;
		req.n_cmd = 1;
	}
	ret = rpc_unary(ch, INLINE, &req.base, &kiyot__cell__v1__exec_sync_response__descriptor, ms,
			&resp, err);
	if (ret == 0) {
		const Kiyot__Cell__V1__ExecSyncResponse *r = (const void *)resp;

		snprintf(where, 16, "%.*s", (int)r->stdout.len, (const char *)r->stdout.data);
		protobuf_c_message_free_unpacked(resp, NULL);
	}
	return ret;
}

/* An RPC_INLINE method is answered by the thread that took the call: with its pool's one
 * worker held by a slow call, it still answers at once, and its handler knew it ran inline. */
static void test_rpc_pools__an_inline_method_needs_no_worker(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	struct bg_call s;
	char where[16];
	int answered = 0;

	bg_start(&s, f->ch, SLOW, 30000);
	assert_int_equal(wait_count(&slow.runs, 1), 1);
	/* one whose request core handed over too late for the thread that took it waits for
	 * the held worker (past its deadline, or refused once the pool's queue is full) */
	for (int i = 0; i < 20; i++) {
		if (inline_call(f->ch, "here", 0, 500, where, &err) != 0)
			continue;
		assert_string_equal(where, "inline");
		answered++;
	}
	assert_true(answered > 0);
	assert_int_equal(inl.inline_runs, answered);
	pthread_mutex_lock(&slow.mu);
	slow.released = true;
	pthread_cond_broadcast(&slow.cv);
	pthread_mutex_unlock(&slow.mu);
	pthread_join(s.t, NULL);
	assert_int_equal(s.ret, 0);
}

/* An inline handler that asks for a worker runs again on its pool with the same request and
 * answers from there, once the pool's worker is free; so does a request too large to decode
 * on the thread that took it. */
static void test_rpc_pools__an_inline_handler_may_ask_for_a_worker(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	struct bg_call s;
	char where[16];

	bg_start(&s, f->ch, SLOW, 30000);
	assert_int_equal(wait_count(&slow.runs, 1), 1);
	/* the worker is held: the call waits for it, past its deadline */
	assert_int_equal(inline_call(f->ch, "worker", 0, 300, where, &err), -ETIMEDOUT);
	assert_true(inl.runs <= 1);
	assert_int_equal(inl.inline_runs, inl.runs);
	pthread_mutex_lock(&slow.mu);
	slow.released = true;
	pthread_cond_broadcast(&slow.cv);
	pthread_mutex_unlock(&slow.mu);
	pthread_join(s.t, NULL);
	assert_int_equal(s.ret, 0);
	memset(&inl, 0, sizeof(inl));
	/* run once inline (unless its request came too late for that), then on the worker */
	assert_int_equal(inline_call(f->ch, "worker", 0, 5000, where, &err), 0);
	assert_string_equal(where, "worker");
	assert_int_equal(inl.runs - inl.inline_runs, 1);
	assert_true(inl.inline_runs <= 1);
	memset(&inl, 0, sizeof(inl));
	assert_int_equal(inline_call(f->ch, "big", 200 * 1024, 5000, where, &err), 0);
	assert_string_equal(where, "worker");
	assert_int_equal(inl.runs, 1);
	assert_int_equal(inl.inline_runs, 0);
}

/* A table naming a pool the server lacks is refused at start, naming the method. */
static void test_rpc_pools__a_method_on_a_missing_pool_is_refused(void **state)
{
	struct rpc_server_config cfg = { 0 };
	struct rpc_server *srv = NULL;
	struct err err = ERR_INIT;

	(void)state;
	cfg.address = "unix:///tmp/kiyot-test-rpc-pools-never.sock";
	cfg.methods = methods;
	cfg.n_methods = sizeof(methods) / sizeof(methods[0]);
	cfg.pools[0] = (struct rpc_pool){ "only", 1, 0 };
	cfg.n_pools = 1;
	assert_int_equal(rpc_server_start(&cfg, &srv, &err), -EINVAL);
	assert_non_null(strstr(err.msg, SLOW));
	assert_null(srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(
			test_rpc_pools__fast_calls_answer_while_the_slow_pool_is_full, reset),
		cmocka_unit_test_setup(test_rpc_pools__a_handler_sees_its_caller_go_away, reset),
		cmocka_unit_test_setup(test_rpc_pools__a_call_made_for_a_caller_ends_with_it,
				       reset),
		cmocka_unit_test_setup(test_rpc_pools__calls_abandoned_in_the_queue_never_run,
				       reset),
		cmocka_unit_test_setup(test_rpc_pools__a_parked_call_gives_its_worker_back, reset),
		cmocka_unit_test_setup(test_rpc_pools__an_inline_method_needs_no_worker, reset),
		cmocka_unit_test_setup(test_rpc_pools__an_inline_handler_may_ask_for_a_worker,
				       reset),
		cmocka_unit_test(test_rpc_pools__a_method_on_a_missing_pool_is_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
