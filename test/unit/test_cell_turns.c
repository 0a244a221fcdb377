/*
 * test_cell_turns: calls into one cell under a flood of ExecSync (kiyot/cells/cells_calls.c,
 * kiyot/cri/cri_table.c's pools), through a whole kiyot (kiyot_fixture.h) whose fake agent
 * holds every exec into one container until the test lets them go. At most CELL_EXECS_MAX
 * reach the agent at once, the rest wait their turn without holding kiyot's workers, and
 * meanwhile the same cell's stats and status and another cell's execs answer. Stats asked
 * while the cell's figure is stale make one call to its agent for all of them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "cells/cells_internal.h"
#include "kiyot_fixture.h"
#include "rpc.h"
#include "xalloc.h"

#define FLOOD 40 /* more than kiyot's exec workers */
#define STATS_AT_ONCE 8

/* Execs of the held unit, guarded by mu: how many are in the fake agent now and at most,
 * and whether they may go on. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const char *unit;
	int in, max;
	bool open;
} held = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, false };

static struct agent_ops ops;		 /* the fake's, with exec_sync held */
static struct agent_client client;	 /* ops over the fake agent */
static const struct agent_ops *fake_ops; /* the fake's own */

static int held_exec_sync(void *self, struct agent_conn *c,
			  const Kiyot__Cell__V1__ExecSyncRequest *req, int64_t timeout_ms,
			  Kiyot__Cell__V1__ExecSyncResponse **resp, struct err *err)
{
	pthread_mutex_lock(&held.mu);
	if (held.unit && strcmp(req->unit_id, held.unit) == 0) {
		held.in++;
		if (held.in > held.max)
			held.max = held.in;
		pthread_cond_broadcast(&held.cv);
		while (!held.open)
			pthread_cond_wait(&held.cv, &held.mu);
		held.in--;
	}
	pthread_mutex_unlock(&held.mu);
	return fake_ops->exec_sync(self, c, req, timeout_ms, resp, err);
}

static void release(void)
{
	pthread_mutex_lock(&held.mu);
	held.open = true;
	pthread_cond_broadcast(&held.cv);
	pthread_mutex_unlock(&held.mu);
}

static int in_agent(void)
{
	int n;

	pthread_mutex_lock(&held.mu);
	n = held.in;
	pthread_mutex_unlock(&held.mu);
	return n;
}

static int setup(void **state)
{
	struct kfix *f = kfix_new(2);
	struct err err = ERR_INIT;

	fake_ops = fake_agent_client(f->fa)->ops;
	ops = *fake_ops;
	ops.exec_sync = held_exec_sync;
	client = *fake_agent_client(f->fa);
	client.ops = &ops;
	f->agent = &client;
	held.unit = NULL;
	held.in = held.max = 0;
	held.open = false;
	if (kfix_open(f, &err) < 0) {
		print_error("kfix_open: %s\n", err.msg);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	release();
	kfix_free(*state);
	return 0;
}

/* One CRI call with a deadline of its own. */
static int call(struct kfix *f, const char *method, const ProtobufCMessage *req,
		const ProtobufCMessageDescriptor *desc, int64_t ms, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("/runtime.v1.RuntimeService/%s", method);
	ProtobufCMessage *resp = NULL;
	int ret = rpc_unary(f->ch, path, req, desc, ms, &resp, err);

	if (ret == 0)
		protobuf_c_message_free_unpacked(resp, NULL);
	return ret;
}

struct exec_call {
	struct kfix *f;
	const char *container;
	pthread_t t;
	int ret;
	struct err err;
};

static void *exec_main(void *arg)
{
	struct exec_call *x = arg;
	Runtime__V1__ExecSyncRequest req = RUNTIME__V1__EXEC_SYNC_REQUEST__INIT;
	char *cmd[] = { "echo", "hi" };

	req.container_id = (char *)x->container;
	req.cmd = cmd;
	req.n_cmd = 2;
	x->ret = call(x->f, "ExecSync", &req.base, &runtime__v1__exec_sync_response__descriptor,
		      30000, &x->err);
	return NULL;
}

static int exec_in(struct kfix *f, const char *container, int64_t ms, struct err *err)
{
	Runtime__V1__ExecSyncRequest req = RUNTIME__V1__EXEC_SYNC_REQUEST__INIT;
	char *cmd[] = { "echo", "hi" };

	req.container_id = (char *)container;
	req.cmd = cmd;
	req.n_cmd = 2;
	return call(f, "ExecSync", &req.base, &runtime__v1__exec_sync_response__descriptor, ms,
		    err);
}

static int stats_of(struct kfix *f, const char *container, int64_t ms, struct err *err)
{
	Runtime__V1__ContainerStatsRequest req = RUNTIME__V1__CONTAINER_STATS_REQUEST__INIT;

	req.container_id = (char *)container;
	return call(f, "ContainerStats", &req.base,
		    &runtime__v1__container_stats_response__descriptor, ms, err);
}

static int status_of(struct kfix *f, const char *container, int64_t ms, struct err *err)
{
	Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;

	req.container_id = (char *)container;
	return call(f, "ContainerStatus", &req.base,
		    &runtime__v1__container_status_response__descriptor, ms, err);
}

/* FLOOD execs into one container, held in the agent: CELL_EXECS_MAX of them reach it and the
 * rest wait; meanwhile that container's stats and status answer, and so does an exec into
 * another pod's cell. Let go, every exec answers, none more than CELL_EXECS_MAX at once. */
static void test_cell_turns__a_flood_of_execs_holds_up_no_other_call(void **state)
{
	struct kfix *f = *state;
	_cleanup_free_ char *sa = NULL, *ca = NULL, *sb = NULL, *cb = NULL;
	struct exec_call *x = xcalloc(FLOOD, sizeof(*x));
	struct err err = ERR_INIT;

	kfix_pod_with_container(f, "a", &sa, &ca);
	kfix_pod_with_container(f, "b", &sb, &cb);
	held.unit = ca;
	for (int i = 0; i < FLOOD; i++) {
		x[i].f = f;
		x[i].container = ca;
		assert_int_equal(pthread_create(&x[i].t, NULL, exec_main, &x[i]), 0);
	}
	assert_true(KFIX_WAIT(in_agent() >= CELL_EXECS_MAX, 5000));
	usleep(300 * 1000); /* any more would have reached the agent by now */
	assert_int_equal(in_agent(), CELL_EXECS_MAX);

	assert_int_equal(stats_of(f, ca, 5000, &err), 0);
	assert_int_equal(status_of(f, ca, 5000, &err), 0);
	assert_int_equal(exec_in(f, cb, 5000, &err), 0);

	release();
	for (int i = 0; i < FLOOD; i++) {
		pthread_join(x[i].t, NULL);
		if (x[i].ret != 0)
			fail_msg("exec %d: %s", i, x[i].err.msg);
	}
	assert_int_equal(held.max, CELL_EXECS_MAX);
	free(x);
}

static void *close_main(void *arg)
{
	kfix_close(arg);
	return NULL;
}

/* kiyot stops while execs wait their turn, parked: the stop waits for them, and they end
 * (each exec its client sees answered or cancelled) once those in the agent return. */
static void test_cell_turns__kiyot_stops_with_execs_waiting_their_turn(void **state)
{
	struct kfix *f = *state;
	_cleanup_free_ char *sa = NULL, *ca = NULL;
	struct exec_call *x = xcalloc(FLOOD, sizeof(*x));
	pthread_t closer;

	kfix_pod_with_container(f, "a", &sa, &ca);
	held.unit = ca;
	for (int i = 0; i < FLOOD; i++) {
		x[i].f = f;
		x[i].container = ca;
		assert_int_equal(pthread_create(&x[i].t, NULL, exec_main, &x[i]), 0);
	}
	assert_true(KFIX_WAIT(in_agent() >= CELL_EXECS_MAX, 5000));
	usleep(300 * 1000); /* the others parked */
	assert_int_equal(pthread_create(&closer, NULL, close_main, f), 0);
	usleep(200 * 1000);
	release();
	pthread_join(closer, NULL);
	for (int i = 0; i < FLOOD; i++)
		pthread_join(x[i].t, NULL);
	assert_int_equal(held.max, CELL_EXECS_MAX);
	free(x);
}

struct stats_call {
	struct kfix *f;
	const char *container;
	pthread_t t;
	int ret;
	struct err err;
};

static void *stats_main(void *arg)
{
	struct stats_call *s = arg;

	s->ret = stats_of(s->f, s->container, 10000, &s->err);
	return NULL;
}

/* Stats of a cell whose figure is stale (a unit started since), asked by several at once
 * while the agent takes its time: one Stats call to the agent answers them all. Once the
 * Watch pushed a figure, stats answer from it with no call at all. */
static void test_cell_turns__stats_asked_at_once_make_one_call(void **state)
{
	struct kfix *f = *state;
	_cleanup_free_ char *sa = NULL, *ca = NULL, *cell = NULL;
	struct stats_call s[STATS_AT_ONCE];
	struct err err = ERR_INIT;
	unsigned before;

	kfix_pod_with_container(f, "a", &sa, &ca);
	cell = kfix_cell_of(f, sa);
	fake_agent_delay(f->fa, FAKE_AGENT_STATS, 500);
	before = fake_agent_calls(f->fa, FAKE_AGENT_STATS);
	for (int i = 0; i < STATS_AT_ONCE; i++) {
		s[i].f = f;
		s[i].container = ca;
		assert_int_equal(pthread_create(&s[i].t, NULL, stats_main, &s[i]), 0);
	}
	for (int i = 0; i < STATS_AT_ONCE; i++) {
		pthread_join(s[i].t, NULL);
		if (s[i].ret != 0)
			fail_msg("stats %d: %s", i, s[i].err.msg);
	}
	assert_int_equal(fake_agent_calls(f->fa, FAKE_AGENT_STATS) - before, 1);

	fake_agent_delay(f->fa, FAKE_AGENT_STATS, 0);
	assert_int_equal(fake_agent_push_stats(f->fa, cell), 0);
	usleep(100 * 1000); /* the Watch brings it */
	before = fake_agent_calls(f->fa, FAKE_AGENT_STATS);
	assert_int_equal(stats_of(f, ca, 5000, &err), 0);
	assert_int_equal(fake_agent_calls(f->fa, FAKE_AGENT_STATS), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_cell_turns__a_flood_of_execs_holds_up_no_other_call, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_cell_turns__kiyot_stops_with_execs_waiting_their_turn, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_cell_turns__stats_asked_at_once_make_one_call,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
