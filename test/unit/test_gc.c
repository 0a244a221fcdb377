/*
 * Unit tests for the garbage collector (kiyot/cells/gc.c) in a whole kiyot with the fake
 * provider and agent (kiyot_fixture.h): its verdicts on every cell the provider lists, at
 * start-up and in its periodic passes. Cells nobody owns go (at once at start-up, after the
 * grace period later); an interrupted launch is kept for the kubelet's retry, then goes; a
 * ready sandbox whose cell is gone is marked not ready.
 *
 * The collector's clock is a fake the tests move on (gc_set_clock), and they ask for its
 * passes (gc_pass_now) rather than wait for its interval: none waits on the real clock but
 * the test of the interval itself.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "cells/gc.h"
#include "cri/cri.h"
#include "kiyot_fixture.h"
#include "state/store.h"
#include "xalloc.h"

#define READY RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY
#define NOTREADY RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_NOTREADY

/* The collector's clock: real at the start of a test, then moved on only by the test. */
static int64_t fake_mono, fake_wall; /* atomic */

static int64_t fake_mono_ns(void *ctx)
{
	(void)ctx;
	return __atomic_load_n(&fake_mono, __ATOMIC_RELAXED);
}

static int64_t fake_wall_ns(void *ctx)
{
	(void)ctx;
	return __atomic_load_n(&fake_wall, __ATOMIC_RELAXED);
}

static const struct gc_clock fake_clock = { fake_mono_ns, fake_wall_ns, NULL };

static void advance_s(int64_t s)
{
	__atomic_add_fetch(&fake_mono, s * 1000000000LL, __ATOMIC_RELAXED);
	__atomic_add_fetch(&fake_wall, s * 1000000000LL, __ATOMIC_RELAXED);
}

/* A fixture not opened yet: tests set up the provider and the state first. */
static int setup_closed(void **state)
{
	__atomic_store_n(&fake_mono, clock_mono_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&fake_wall, clock_now_ns(), __ATOMIC_RELAXED);
	gc_set_clock(&fake_clock);
	*state = kfix_new(2);
	return 0;
}

static int teardown(void **state)
{
	kfix_teardown(state);
	gc_set_clock(NULL);
	return 0;
}

static void open_or_fail(struct kfix *f)
{
	struct err err = ERR_INIT;

	if (kfix_open(f, &err) < 0)
		fail_msg("kiyot_open: %s", err.msg);
}

/* Has the collector make a pass now and waits for its end. */
static void pass_now(struct kfix *f)
{
	assert_int_equal(gc_pass_now(f->k.gc, 10000), 0);
}

/*
 * What a kiyot killed in the middle of a RunPodSandbox leaves: the sandbox's record, not
 * ready, owning cell_id, created at created_ns (written to the state directory before kiyot
 * opens it).
 */
static void write_interrupted_launch(struct kfix *f, const char *id, const char *cell_id,
				     int64_t created_ns)
{
	_cleanup_free_ char *db = xasprintf("%s/kiyot.db", f->dir);
	struct sandbox sb = { 0 };
	struct store *st = NULL;
	struct err err = ERR_INIT;

	sb.id = (char *)id;
	sb.config = kfix_pod_config(f, "web", "uid-web", 0);
	sb.runtime_handler = "";
	sb.state = SANDBOX_NOTREADY;
	sb.created_ns = created_ns;
	sb.cell_id = (char *)cell_id;
	sb.ip = "";
	sb.instance_type = "t3.micro";
	sb.sizing_reason = "";
	if (store_open(db, &st, &err) < 0 || store_put_sandbox(st, &sb, &err) < 0)
		fail_msg("%s", err.msg);
	store_close(st);
	protobuf_c_message_free_unpacked(&sb.config->base, NULL);
}

/* At start-up a cell no sandbox owns is terminated at once: it was left by a kiyot that
 * never recorded it. */
static void test_gc__an_orphan_cell_is_terminated_at_start(void **state)
{
	struct kfix *f = *state;

	fake_provider_add_cell(f->fp, "orphan1", CELL_RUNNING);
	open_or_fail(f);
	assert_true(KFIX_WAIT(!fake_provider_has(f->fp, "orphan1"), 10000));
	assert_int_equal(fake_provider_terminated(f->fp, "orphan1"), 1);
}

/* Nothing is decided without the provider's list: a failed list terminates nothing. */
static void test_gc__nothing_goes_when_the_provider_cannot_list(void **state)
{
	struct kfix *f = *state;

	fake_provider_add_cell(f->fp, "orphan1", CELL_RUNNING);
	fake_provider_fail(f->fp, FAKE_PROVIDER_LIST, EIO, -1);
	open_or_fail(f);
	pass_now(f); /* the start-up pass or a later one, over */
	assert_true(fake_provider_calls(f->fp, FAKE_PROVIDER_LIST) >= 1);
	assert_true(fake_provider_has(f->fp, "orphan1"));
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_TERMINATE), 0);
	fake_provider_fail(f->fp, FAKE_PROVIDER_LIST, 0, 0);
}

struct opener {
	struct kfix *f;
	int done; /* atomic */
	int ret;
	struct err err;
};

static void *open_main(void *arg)
{
	struct opener *o = arg;

	o->ret = kfix_open(o->f, &o->err);
	__atomic_store_n(&o->done, 1, __ATOMIC_RELAXED);
	return NULL;
}

static void *close_main(void *arg)
{
	struct opener *o = arg;

	kfix_close(o->f);
	__atomic_store_n(&o->done, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* The first pass is off the start-up path: kiyot is open (and serves the CRI) while the
 * collector still terminates the orphans it found, many at once. */
static void test_gc__the_first_pass_is_off_the_start_up_path(void **state)
{
	struct kfix *f = *state;
	struct opener o = { f, 0, 0, ERR_INIT };
	pthread_t t;
	bool opened, together;

	for (int i = 0; i < 40; i++) {
		char id[32];

		snprintf(id, sizeof(id), "orphan-%02d", i);
		fake_provider_add_cell(f->fp, id, CELL_RUNNING);
	}
	fake_provider_hold_terminate(f->fp, 1);
	assert_int_equal(pthread_create(&t, NULL, open_main, &o), 0);
	opened = KFIX_WAIT(__atomic_load_n(&o.done, __ATOMIC_RELAXED), 10000);
	/* the terminations wait together, not one after the other */
	together = fake_provider_wait_held(f->fp, 40, 10000) == 0;
	fake_provider_hold_terminate(f->fp, 0); /* first: a failed check must not hang */
	pthread_join(t, NULL);
	assert_true(opened);
	assert_int_equal(o.ret, 0);
	assert_true(together);
	assert_true(KFIX_WAIT(fake_provider_n_cells(f->fp) == 0, 10000));
}

/* Stopping kiyot in the middle of a pass ends it at once: the terminations in flight are
 * cancelled, the others not begun, and their cells are left for the next kiyot. */
static void test_gc__stop_ends_a_pass_in_flight(void **state)
{
	struct kfix *f = *state;
	struct opener o = { f, 0, 0, ERR_INIT };
	pthread_t t;
	bool closed;

	for (int i = 0; i < 300; i++) {
		char id[32];

		snprintf(id, sizeof(id), "orphan-%03d", i);
		fake_provider_add_cell(f->fp, id, CELL_RUNNING);
	}
	fake_provider_hold_terminate(f->fp, 1);
	open_or_fail(f);
	assert_int_equal(fake_provider_wait_held(f->fp, 1, 10000), 0);
	assert_int_equal(pthread_create(&t, NULL, close_main, &o), 0);
	closed = KFIX_WAIT(__atomic_load_n(&o.done, __ATOMIC_RELAXED), 10000);
	fake_provider_hold_terminate(f->fp, 0); /* first: a failed check must not hang */
	pthread_join(t, NULL);
	assert_true(closed);
	assert_true(fake_provider_n_cells(f->fp) > 0);
	assert_true(fake_provider_calls(f->fp, FAKE_PROVIDER_TERMINATE) < 300);
}

/* A restarted kiyot serves its ready pods' cells before the first pass has listed the
 * provider's cells: they are resumed from their records (here the provider cannot list). */
static void test_gc__ready_cells_are_resumed_before_the_first_pass(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *pod = NULL;
	_cleanup_free_ char *ctr = NULL;

	open_or_fail(f);
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &pod, &err), 0);
	fake_provider_fail(f->fp, FAKE_PROVIDER_LIST, EIO, -1);
	if (kfix_restart(f, &err) < 0)
		fail_msg("%s", err.msg);
	if (kfix_create(f, pod, "app", "busybox:1", &ctr, &err) < 0)
		fail_msg("CreateContainer after the restart: %s", err.msg);
	fake_provider_fail(f->fp, FAKE_PROVIDER_LIST, 0, 0);
}

/* After start-up an unowned cell lives out the grace period (it may be one a launch is making
 * right now), counted from the pass that first saw it, then goes. */
static void test_gc__a_later_orphan_is_kept_for_the_grace_period(void **state)
{
	struct kfix *f = *state;

	f->gc_grace_s = 120;
	open_or_fail(f);
	/* the start-up pass, whose orphans go at once, runs on the collector's thread: after it */
	pass_now(f);
	fake_provider_add_cell(f->fp, "orphan2", CELL_RUNNING);
	pass_now(f); /* first seen */
	advance_s(119);
	pass_now(f);
	assert_true(fake_provider_has(f->fp, "orphan2"));
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_TERMINATE), 0);
	advance_s(1);
	pass_now(f);
	assert_false(fake_provider_has(f->fp, "orphan2"));
	assert_int_equal(fake_provider_terminated(f->fp, "orphan2"), 1);
}

/* Without being asked, the collector makes a pass every cells.gcIntervalSeconds (the one test
 * that waits on the real clock: a second). */
static void test_gc__passes_repeat_every_interval(void **state)
{
	struct kfix *f = *state;

	f->gc_interval_s = 1;
	open_or_fail(f);
	assert_true(KFIX_WAIT(fake_provider_calls(f->fp, FAKE_PROVIDER_LIST) >= 2, 10000));
}

/*
 * A launch a crash interrupted: at start-up its cell is kept for the kubelet's retry, and the
 * retried RunPodSandbox resumes it, answering the same sandbox in the same cell.
 */
static void test_gc__an_interrupted_launch_is_resumed_by_the_retry(void **state)
{
	struct kfix *f = *state;
	const char *id = "1111111111111111111111111111111111111111111111111111111111111111";
	struct err err = ERR_INIT;
	_cleanup_free_ char *again = NULL;
	_cleanup_free_ char *cell = NULL;

	write_interrupted_launch(f, id, "cellcrash", clock_now_ns());
	fake_provider_add_cell(f->fp, "cellcrash", CELL_RUNNING);
	open_or_fail(f);
	assert_true(fake_provider_has(f->fp, "cellcrash"));
	assert_int_equal(kfix_pod_state(f, id, &err), NOTREADY);

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &again, &err), 0);
	assert_string_equal(again, id);
	cell = kfix_cell_of(f, id);
	assert_string_equal(cell, "cellcrash");
	assert_int_equal(kfix_pod_state(f, id, &err), READY);
	assert_int_equal(fake_provider_n_cells(f->fp), 1);
}

/* An interrupted launch the kubelet does not retry within the grace period loses its cell;
 * the sandbox stays, not ready and owning no cell, for the kubelet to remove. */
static void test_gc__an_interrupted_launch_not_retried_loses_its_cell(void **state)
{
	struct kfix *f = *state;
	const char *id = "2222222222222222222222222222222222222222222222222222222222222222";
	struct err err = ERR_INIT;
	_cleanup_free_ char *cell = NULL;

	f->gc_grace_s = 120;
	write_interrupted_launch(f, id, "cellold", fake_wall_ns(NULL) - 60 * 1000000000LL);
	fake_provider_add_cell(f->fp, "cellold", CELL_RUNNING);
	open_or_fail(f);
	pass_now(f);
	assert_true(fake_provider_has(f->fp, "cellold")); /* start-up, then the grace keep it */
	advance_s(60);
	pass_now(f);
	assert_false(fake_provider_has(f->fp, "cellold"));
	assert_true(KFIX_WAIT((free(cell), cell = kfix_cell_of(f, id)) && !cell[0], 5000));
	assert_int_equal(kfix_pod_state(f, id, &err), NOTREADY);
	assert_int_equal(kfix_remove_pod(f, id, &err), 0);
	assert_int_equal(kfix_pod_state(f, id, &err), -1);
}

/* A retry of an interrupted launch that comes while the collector ends its cell is
 * UNAVAILABLE (stopping: the kubelet retries) and launches nothing; once the cell is gone,
 * the retry finds the sandbox stopped. */
static void test_gc__a_retry_while_the_collector_ends_the_launch_waits(void **state)
{
	struct kfix *f = *state;
	const char *id = "4444444444444444444444444444444444444444444444444444444444444444";
	struct err err = ERR_INIT;
	_cleanup_free_ char *again = NULL;
	_cleanup_free_ char *cell = NULL;
	int ret;

	f->gc_grace_s = 1;
	write_interrupted_launch(f, id, "cellold", fake_wall_ns(NULL) - 3600 * 1000000000LL);
	fake_provider_add_cell(f->fp, "cellold", CELL_RUNNING);
	fake_provider_hold_terminate(f->fp, 1);
	open_or_fail(f);
	/* the start-up pass keeps it for a retry; the next ends it (not waited for: held) */
	assert_true(KFIX_WAIT(gc_passes_ended(f->k.gc) >= 1, 10000));
	assert_int_equal(gc_pass_now(f->k.gc, 0), 0);
	assert_int_equal(fake_provider_wait_held(f->fp, 1, 10000), 0);
	ret = kfix_run_pod(f, "web", "uid-web", 0, &again, &err);
	fake_provider_hold_terminate(f->fp, 0); /* first: a failed check must not hang the gc */
	assert_int_equal(ret, -ECONNREFUSED);
	assert_non_null(strstr(err.msg, "stopping"));
	assert_true(KFIX_WAIT((free(cell), cell = kfix_cell_of(f, id)) && !cell[0], 10000));
	assert_false(fake_provider_has(f->fp, "cellold"));
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH), 0);
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &again, &err), -EEXIST);
}

/* Within the grace period an interrupted launch keeps its cell through the periodic passes. */
static void test_gc__an_interrupted_launch_is_kept_within_the_grace_period(void **state)
{
	struct kfix *f = *state;
	const char *id = "3333333333333333333333333333333333333333333333333333333333333333";
	_cleanup_free_ char *cell = NULL;

	f->gc_grace_s = 3600;
	write_interrupted_launch(f, id, "cellnew", fake_wall_ns(NULL));
	fake_provider_add_cell(f->fp, "cellnew", CELL_RUNNING);
	open_or_fail(f);
	pass_now(f);
	advance_s(3599);
	pass_now(f);
	assert_true(fake_provider_has(f->fp, "cellnew"));
	cell = kfix_cell_of(f, id);
	assert_string_equal(cell, "cellnew");
}

/* A ready sandbox whose cell the provider no longer has is marked not ready, and its running
 * containers exited (137, CellLost). */
static void test_gc__a_ready_sandbox_whose_cell_vanished_is_not_ready(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
	Runtime__V1__ContainerStatusResponse *resp = NULL;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *ctr = NULL;
	_cleanup_free_ char *cell = NULL;
	_cleanup_free_ char *log = xasprintf("%s/pods/uid-web/web.log", f->dir);
	const char *line = "2026-01-01T00:00:00Z stdout F up\n";

	open_or_fail(f);
	kfix_pod_with_container(f, "web", &sb, &ctr);
	cell = kfix_cell_of(f, sb);
	/* The cell's Watch still carries the container's RUNNING status after StartContainer
	 * answered; applied after the pass below, it would make the container running again. A
	 * line of its log behind it on the same Watch, once in the file, says it was applied. */
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 10000));
	assert_int_equal(fake_agent_log(f->fa, cell, ctr, line), 0);
	assert_true(KFIX_WAIT(kfix_file_is(log, line), 10000));
	pass_now(f);
	assert_int_equal(kfix_pod_state(f, sb, &err), READY);
	fake_provider_vanish(f->fp, cell);
	pass_now(f);
	assert_int_equal(kfix_pod_state(f, sb, &err), NOTREADY);
	req.container_id = ctr;
	assert_int_equal(kfix_call(f, "ContainerStatus", &req.base,
				   &runtime__v1__container_status_response__descriptor, &resp,
				   &err),
			 0);
	assert_int_equal(resp->status->state, RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED);
	assert_int_equal(resp->status->exit_code, 137);
	assert_string_equal(resp->status->reason, "CellLost");
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

/* A ready sandbox's cell the provider reports failed gets its agent healed, and stays. */
static void test_gc__a_ready_sandboxs_failed_cell_is_healed(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *cell = NULL;

	open_or_fail(f);
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	fake_provider_set_phase(f->fp, cell, CELL_FAILED);
	pass_now(f);
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_HEAL), 1);
	pass_now(f);
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_HEAL), 1); /* healed: RUNNING */
	assert_true(fake_provider_has(f->fp, cell));
	assert_int_equal(kfix_pod_state(f, sb, &err), READY);
}

/* A cell whose sandbox is still launching is never taken, even with no grace at all. */
static void test_gc__a_launching_sandboxs_cell_is_kept(void **state)
{
	struct kfix *f = *state;
	struct kfix_runner r;
	struct err err = ERR_INIT;

	f->gc_grace_s = 0;
	open_or_fail(f);
	fake_provider_hold(f->fp, 1);
	kfix_run_pod_start(f, &r, "slow", "uid-slow");
	assert_int_equal(fake_provider_wait_held(f->fp, 1, 10000), 0);
	pass_now(f);
	advance_s(3600);
	pass_now(f);
	assert_int_equal(fake_provider_n_cells(f->fp), 1);
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_TERMINATE), 0);
	fake_provider_hold(f->fp, 0);
	assert_int_equal(kfix_run_pod_wait(&r), 0);
	assert_int_equal(kfix_pod_state(f, r.id, &err), READY);
	free(r.id);
}

#define TEST(name) cmocka_unit_test_setup_teardown(name, setup_closed, teardown)

static const struct CMUnitTest tests[] = {
	TEST(test_gc__an_orphan_cell_is_terminated_at_start),
	TEST(test_gc__nothing_goes_when_the_provider_cannot_list),
	TEST(test_gc__a_later_orphan_is_kept_for_the_grace_period),
	TEST(test_gc__passes_repeat_every_interval),
	TEST(test_gc__the_first_pass_is_off_the_start_up_path),
	TEST(test_gc__ready_cells_are_resumed_before_the_first_pass),
	TEST(test_gc__stop_ends_a_pass_in_flight),
	TEST(test_gc__an_interrupted_launch_is_resumed_by_the_retry),
	TEST(test_gc__an_interrupted_launch_not_retried_loses_its_cell),
	TEST(test_gc__an_interrupted_launch_is_kept_within_the_grace_period),
	TEST(test_gc__a_retry_while_the_collector_ends_the_launch_waits),
	TEST(test_gc__a_ready_sandbox_whose_cell_vanished_is_not_ready),
	TEST(test_gc__a_ready_sandboxs_failed_cell_is_healed),
	TEST(test_gc__a_launching_sandboxs_cell_is_kept),
};

int main(void)
{
	return cmocka_run_group_tests(tests, NULL, NULL);
}
