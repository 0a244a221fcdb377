/*
 * Unit tests for the pod sandbox half of CRI (kiyot/cri/cri_sandbox.c) in a whole kiyot with
 * the fake provider and agent (kiyot_fixture.h): what the kubelet relies on when it runs,
 * retries, stops and removes pods, whatever order its calls come in.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>

#include "cells/cells.h"
#include "cri/cri.h"
#include "clock.h"
#include "kiyot_fixture.h"
#include "xalloc.h"

#define READY RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY
#define NOTREADY RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_NOTREADY

static Runtime__V1__PodSandboxStatusResponse *pod_status(struct kfix *f, const char *id,
							 int verbose)
{
	Runtime__V1__PodSandboxStatusRequest req = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
	Runtime__V1__PodSandboxStatusResponse *resp = NULL;
	struct err err = ERR_INIT;

	req.pod_sandbox_id = (char *)id;
	req.verbose = verbose;
	if (kfix_call(f, "PodSandboxStatus", &req.base,
		      &runtime__v1__pod_sandbox_status_response__descriptor, &resp, &err) < 0)
		fail_msg("PodSandboxStatus %s: %s", id, err.msg);
	return resp;
}

/* A pod runs in a cell of its own: the sandbox is ready with the cell's address, the
 * provider launched one cell for it, and its agent enrolled. */
static void test_cri_sandbox__run_makes_a_ready_sandbox_in_a_new_cell(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__PodSandboxStatusResponse *st;
	struct err err = ERR_INIT;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *cell = NULL;
	_cleanup_free_ char *type = NULL;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &id, &err), 0);
	assert_int_equal(strlen(id), 64);
	cell = kfix_cell_of(f, id);
	assert_non_null(cell);
	assert_true(fake_provider_has(f->fp, cell));
	assert_int_equal(fake_provider_n_cells(f->fp), 1);
	assert_true(fake_agent_enrolled(f->fa, cell));
	/* sized with no demand: the cheapest type of the catalog */
	type = fake_provider_instance_type(f->fp, cell);
	assert_non_null(type);
	assert_true(type[0] != '\0');
	st = pod_status(f, id, 0);
	assert_int_equal(st->status->state, READY);
	assert_string_equal(st->status->id, id);
	assert_string_equal(st->status->metadata->name, "web");
	assert_string_equal(st->status->metadata->namespace_, "default");
	assert_string_equal(st->status->metadata->uid, "uid-web");
	assert_ptr_equal(strstr(st->status->network->ip, "10.99."), st->status->network->ip);
	assert_int_equal(st->status->n_labels, 1);
	assert_string_equal(st->status->labels[0]->value, "web");
	assert_int_equal(st->status->n_annotations, 1);
	assert_string_equal(st->status->annotations[0]->key, "note");
	assert_int_equal(st->n_info, 0);
	protobuf_c_message_free_unpacked(&st->base, NULL);
}

/* The verbose status says which cell, instance type and address the pod got. */
static void test_cri_sandbox__verbose_status_names_the_cell(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__PodSandboxStatusResponse *st;
	struct err err = ERR_INIT;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *cell = NULL;
	_cleanup_free_ char *type = NULL;
	json_t *info;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &id, &err), 0);
	cell = kfix_cell_of(f, id);
	type = fake_provider_instance_type(f->fp, cell);
	st = pod_status(f, id, 1);
	assert_int_equal(st->n_info, 1);
	assert_string_equal(st->info[0]->key, "info");
	info = json_loads(st->info[0]->value, 0, NULL);
	assert_non_null(info);
	assert_string_equal(json_string_value(json_object_get(info, "cellId")), cell);
	assert_string_equal(json_string_value(json_object_get(info, "instanceType")), type);
	assert_string_equal(json_string_value(json_object_get(info, "ip")),
			    st->status->network->ip);
	json_decref(info);
	protobuf_c_message_free_unpacked(&st->base, NULL);
}

/* A provider that fell back to another type for lack of capacity: the sandbox records the
 * type launched (what its Cell is priced by) and its sizing reason says what was tried, also
 * in the store a restarted kiyot reads. */
static void test_cri_sandbox__a_capacity_fallback_is_recorded(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *id = NULL;
	struct sandbox *sb;

	fake_provider_launch_as(f->fp, "m5.large",
				"t3.micro in subnet-a: InsufficientInstanceCapacity; launched "
				"m5.large in subnet-a");
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &id, &err), 0);
	assert_int_equal(kfix_restart(f, &err), 0);
	records_lock(f->k.records);
	sb = records_sandbox(f->k.records, id);
	assert_non_null(sb);
	assert_string_equal(sb->instance_type, "m5.large");
	assert_non_null(strstr(sb->sizing_reason,
			       "; t3.micro in subnet-a: "
			       "InsufficientInstanceCapacity; launched m5.large"));
	records_unlock(f->k.records);
}

/* The kubelet retries a RunPodSandbox whose answer it missed: the same pod and attempt gets
 * the same sandbox, and no second cell. */
static void test_cri_sandbox__a_retried_run_answers_the_same_sandbox(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *again = NULL;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &id, &err), 0);
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &again, &err), 0);
	assert_string_equal(again, id);
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH), 1);
	assert_int_equal(fake_provider_n_cells(f->fp), 1);
}

/* A new attempt of the same pod is a new sandbox in a new cell. */
static void test_cri_sandbox__a_new_attempt_gets_a_new_sandbox(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *first = NULL;
	_cleanup_free_ char *second = NULL;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &first, &err), 0);
	assert_int_equal(kfix_stop_pod(f, first, &err), 0);
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 1, &second, &err), 0);
	assert_string_not_equal(second, first);
	assert_int_equal(fake_provider_n_cells(f->fp), 1); /* the first one's went at stop */
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH), 2);
}

/* Running a stopped sandbox's pod and attempt again is refused, saying to remove it first. */
static void test_cri_sandbox__running_a_stopped_attempt_again_already_exists(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *again = NULL;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &id, &err), 0);
	assert_int_equal(kfix_stop_pod(f, id, &err), 0);
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &again, &err), -EEXIST);
	assert_non_null(strstr(err.msg, id));
	assert_non_null(strstr(err.msg, "remove it first"));
}

/* The only sandbox of the list, or NULL (the caller frees the response in *resp). */
static Runtime__V1__PodSandbox *only_sandbox(struct kfix *f,
					     Runtime__V1__ListPodSandboxResponse **resp)
{
	Runtime__V1__ListPodSandboxRequest req = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
	struct err err = ERR_INIT;

	if (kfix_call(f, "ListPodSandbox", &req.base,
		      &runtime__v1__list_pod_sandbox_response__descriptor, resp, &err) < 0)
		fail_msg("ListPodSandbox: %s", err.msg);
	return (*resp)->n_items == 1 ? (*resp)->items[0] : NULL;
}

/*
 * While its cell launches, a sandbox is listed not ready and a retried RunPodSandbox is
 * UNAVAILABLE, saying it is still starting (the kubelet retries), without disturbing the
 * launch, which then answers the sandbox, ready.
 */
static void test_cri_sandbox__calls_while_launching_are_unavailable(void **state)
{
	struct kfix *f = *state;
	struct kfix_runner r;
	Runtime__V1__ListPodSandboxResponse *list = NULL;
	Runtime__V1__PodSandbox *listed;
	struct err err = ERR_INIT;
	_cleanup_free_ char *listed_id = NULL;
	_cleanup_free_ char *again = NULL;
	_cleanup_free_ char *cell = NULL;

	fake_provider_hold(f->fp, 1);
	kfix_run_pod_start(f, &r, "slow", "uid-slow");
	assert_int_equal(fake_provider_wait_held(f->fp, 1, 10000), 0);

	listed = only_sandbox(f, &list);
	assert_non_null(listed);
	assert_int_equal(listed->state, NOTREADY);
	listed_id = xstrdup(listed->id);
	protobuf_c_message_free_unpacked(&list->base, NULL);
	assert_int_equal(kfix_run_pod(f, "slow", "uid-slow", 0, &again, &err), -ECONNREFUSED);
	assert_non_null(strstr(err.msg, "still starting"));
	cell = kfix_cell_of(f, listed_id);
	assert_int_equal(fake_provider_terminated(f->fp, cell), 0);

	fake_provider_hold(f->fp, 0);
	assert_int_equal(kfix_run_pod_wait(&r), 0);
	assert_string_equal(r.id, listed_id);
	assert_int_equal(kfix_pod_state(f, r.id, &err), READY);
	assert_int_equal(kfix_run_pod(f, "slow", "uid-slow", 0, &again, &err), 0);
	assert_string_equal(again, r.id);
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH), 1);
	free(r.id);
}

/* The id of the only sandbox listed (caller frees), or NULL. */
static char *only_sandbox_id(struct kfix *f)
{
	Runtime__V1__ListPodSandboxResponse *list = NULL;
	Runtime__V1__PodSandbox *sb = only_sandbox(f, &list);
	char *id = sb ? xstrdup(sb->id) : NULL;

	protobuf_c_message_free_unpacked(&list->base, NULL);
	return id;
}

/*
 * A RunPodSandbox whose store write fails once its cell launched undoes the launch while its
 * sandbox is still launching, and ends the launch once: a StopPodSandbox meanwhile waits for
 * the undo instead of running alongside it, and the undo cannot end that stop in its place.
 * The sandbox and its cell are gone after it.
 */
static void test_cri_sandbox__a_failed_store_write_after_a_launch_ends_it_once(void **state)
{
	struct kfix *f = *state;
	_cleanup_free_ char *db = xasprintf("%s/kiyot.db", f->k.cfg.state_dir);
	enum sandbox_phase phase = SANDBOX_IDLE;
	struct kfix_runner r;
	struct sandbox **sbs;
	sqlite3 *other = NULL;
	size_t n;

	fake_provider_hold(f->fp, 1);
	fake_provider_hold_terminate(f->fp, 1);
	kfix_run_pod_start(f, &r, "web", "uid-web");
	assert_int_equal(fake_provider_wait_held(f->fp, 1, 10000), 0);
	/* the sandboxes' table goes: the write that makes the sandbox ready fails */
	assert_int_equal(sqlite3_open(db, &other), SQLITE_OK);
	assert_int_equal(sqlite3_exec(other, "DROP TABLE sandboxes", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(other);
	fake_provider_hold(f->fp, 0);
	/* the undo terminates the cell: held there, what phase is the sandbox in? */
	for (int i = 0; i < 1000 && fake_provider_calls(f->fp, FAKE_PROVIDER_TERMINATE) == 0; i++)
		usleep(10000);
	assert_int_equal(fake_provider_wait_held(f->fp, 1, 10000), 0);
	records_lock(f->k.records);
	n = records_sandboxes(f->k.records, &sbs);
	if (n == 1)
		phase = sbs[0]->phase;
	records_unlock(f->k.records);
	sandboxes_put(sbs, n);
	fake_provider_hold_terminate(f->fp, 0);

	assert_true(kfix_run_pod_wait(&r) < 0);
	assert_int_equal(n, 1);
	assert_int_equal(phase, SANDBOX_LAUNCHING);
	assert_int_equal(fake_provider_n_cells(f->fp), 0);
	assert_null(only_sandbox_id(f));
	free(r.id);
}

/* Whether no sandbox is listed. */
static bool no_sandbox(struct kfix *f)
{
	Runtime__V1__ListPodSandboxResponse *list = NULL;
	bool none;

	only_sandbox(f, &list);
	none = list->n_items == 0;
	protobuf_c_message_free_unpacked(&list->base, NULL);
	return none;
}

/*
 * StopPodSandbox while the provider still makes the cell cancels the launch and terminates
 * the cell, and answers OK at once; the RunPodSandbox ends CANCELLED, "stopped while
 * starting", leaving neither a sandbox nor a cell. A RemovePodSandbox after it is OK too.
 */
static void test_cri_sandbox__a_stop_while_launching_cancels_the_launch(void **state)
{
	struct kfix *f = *state;
	struct kfix_runner r;
	struct err err = ERR_INIT;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *cell = NULL;

	fake_provider_hold(f->fp, 1);
	kfix_run_pod_start(f, &r, "slow", "uid-slow");
	assert_int_equal(fake_provider_wait_held(f->fp, 1, 10000), 0);
	id = only_sandbox_id(f);
	assert_non_null(id);
	cell = kfix_cell_of(f, id);

	assert_int_equal(kfix_stop_pod(f, id, &err), 0);
	assert_int_equal(fake_provider_terminated(f->fp, cell), 1);
	assert_false(fake_provider_has(f->fp, cell));
	assert_int_equal(kfix_remove_pod(f, id, &err), 0);

	fake_provider_hold(f->fp, 0);
	assert_int_equal(kfix_run_pod_wait(&r), -ECANCELED);
	assert_non_null(strstr(r.err.msg, "stopped while starting"));
	assert_true(no_sandbox(f));
	assert_int_equal(fake_provider_n_cells(f->fp), 0);
	/* and the pod's next attempt starts afresh */
	free(r.id);
	r.id = NULL;
	assert_int_equal(kfix_run_pod(f, "slow", "uid-slow", 0, &r.id, &err), 0);
	assert_int_equal(kfix_pod_state(f, r.id, &err), READY);
	free(r.id);
}

/*
 * RemovePodSandbox while the launch waits for a cell's agent that does not come up cancels it
 * (no wait for the boot timeout): OK, the cell terminated, and the RunPodSandbox ends
 * CANCELLED with nothing left.
 */
static void test_cri_sandbox__a_remove_while_waiting_for_the_agent_cancels_it(void **state)
{
	struct kfix *f = *state;
	struct kfix_runner r;
	struct err err = ERR_INIT;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *cell = NULL;

	f->k.cfg.boot_timeout_s = 600; /* cells.bootTimeoutSeconds; past the call's deadline */
	fake_provider_dead_agents(f->fp, 1);
	kfix_run_pod_start(f, &r, "web", "uid-web");
	assert_true(KFIX_WAIT(fake_provider_n_cells(f->fp) == 1, 10000));
	id = only_sandbox_id(f);
	assert_non_null(id);
	cell = kfix_cell_of(f, id);

	assert_int_equal(kfix_remove_pod(f, id, &err), 0);
	assert_true(fake_provider_terminated(f->fp, cell) >= 1);
	assert_int_equal(kfix_run_pod_wait(&r), -ECANCELED);
	assert_non_null(strstr(r.err.msg, "stopped while starting"));
	assert_true(no_sandbox(f));
	assert_int_equal(fake_provider_n_cells(f->fp), 0);
	free(r.id);
}

/*
 * A cell whose instance stops being pending or running while kiyot waits for its agent (a
 * spot instance reclaimed during its boot) ends the RunPodSandbox within the provider's next
 * look, not after the boot timeout: the error names the instance, what became of it and why,
 * and the cell and sandbox are gone.
 */
static void test_cri_sandbox__an_instance_terminated_during_boot_ends_the_launch(void **state)
{
	struct kfix *f = *state;
	struct kfix_runner r;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *cell = NULL;

	f->k.cfg.boot_timeout_s = 600;
	fake_provider_dead_agents(f->fp, 1);
	kfix_run_pod_start(f, &r, "web", "uid-web");
	assert_true(KFIX_WAIT(fake_provider_n_cells(f->fp) == 1, 10000));
	id = only_sandbox_id(f);
	assert_non_null(id);
	cell = kfix_cell_of(f, id);
	fake_provider_end_cell(f->fp, cell, CELL_TERMINATED,
			       "Server.SpotInstanceTermination: Spot instance termination");

	assert_int_equal(kfix_run_pod_wait(&r), -EIO);
	assert_non_null(strstr(r.err.msg, "was terminated during boot: "
					  "Server.SpotInstanceTermination: Spot instance "
					  "termination"));
	assert_true(fake_provider_calls(f->fp, FAKE_PROVIDER_STATE) >= 1);
	assert_true(no_sandbox(f));
	assert_int_equal(fake_provider_n_cells(f->fp), 0);
	free(r.id);
}

/* The cell's agent says what the instance metadata service said: kind, with a time secs from
 * now. */
static void push_interruption(struct kfix *f, const char *cell, int kind, int64_t secs)
{
	Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;
	Kiyot__Cell__V1__Interruption in = KIYOT__CELL__V1__INTERRUPTION__INIT;

	in.kind = kind;
	in.action = kind == KIYOT__CELL__V1__INTERRUPTION__KIND__NOTICE ? "terminate" : "";
	in.time_unix_ns = clock_now_ns() + secs * 1000000000LL;
	ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__INTERRUPTION;
	ev.interruption = &in;
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell), 10000));
	assert_int_equal(fake_agent_push_event(f->fa, cell, &ev), 0);
}

/* The grace kiyot gave a container's stop. */
static int64_t stop_grace(struct kfix *f, const char *ctr)
{
	struct container *c;
	int64_t grace;

	records_lock(f->k.records);
	c = records_container(f->k.records, ctr);
	grace = c ? c->stop_timeout_s : -1;
	records_unlock(f->k.records);
	return grace;
}

/*
 * A spot interruption notice from a cell's agent stops the pod's containers in the cell with
 * the pod's grace (Kubernetes' 30 s when the Pod object cannot be read), then makes the
 * sandbox not ready, so the kubelet gives the pod a new sandbox; the cell keeps the notice.
 */
static void test_cri_sandbox__a_spot_interruption_notice_stops_the_pod(void **state)
{
	struct kfix *f = *state;
	struct cell_interruption in;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *ctr = NULL;
	_cleanup_free_ char *cell = NULL;

	kfix_pod_with_container(f, "web", &sb, &ctr);
	cell = kfix_cell_of(f, sb);
	push_interruption(f, cell, KIYOT__CELL__V1__INTERRUPTION__KIND__NOTICE, 120);
	assert_true(KFIX_WAIT(kfix_pod_state(f, sb, &err) == NOTREADY, 10000));
	assert_int_equal(fake_agent_unit_desired(f->fa, cell, ctr),
			 KIYOT__CELL__V1__UNIT_DESIRED__STOPPED);
	assert_int_equal(stop_grace(f, ctr), 30);
	assert_int_equal(kfix_container_state(f, ctr, &err),
			 RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED);
	assert_int_equal(cells_interruption(f->k.cells, cell, &in), 0);
	assert_true(in.notice);
	assert_false(in.rebalance);
	assert_string_equal(in.action, "terminate");
}

/* A sandbox whose cell was lost has its containers exited for good: a status the cell's Watch
 * still brings afterwards (a RUNNING sent before the cell went) does not bring one back. */
static void test_cri_sandbox__a_late_status_does_not_revive_a_lost_pods_container(void **state)
{
	struct kfix *f = *state;
	Kiyot__Cell__V1__UnitStatus st = KIYOT__CELL__V1__UNIT_STATUS__INIT;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *ctr = NULL;
	_cleanup_free_ char *cell = NULL;
	struct sandbox *rec;

	kfix_pod_with_container(f, "web", &sb, &ctr);
	cell = kfix_cell_of(f, sb);
	records_lock(f->k.records);
	rec = records_sandbox_exact(f->k.records, sb);
	assert_non_null(rec);
	kiyot_sandbox_lost(&f->k, rec, "CellLost");
	records_unlock(f->k.records);
	assert_int_equal(kfix_container_state(f, ctr, &err),
			 RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED);
	st.id = ctr;
	st.state = KIYOT__CELL__V1__UNIT_STATE__UNIT_RUNNING;
	st.started_at_ns = clock_now_ns();
	st.pid = 4242;
	kiyot_on_unit_status(&f->k, cell, &st);
	assert_int_equal(kfix_container_state(f, ctr, &err),
			 RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED);
}

/* A notice with less time left than the pod's grace stops its containers within what is
 * left, less the margin its stop and the kubelet's StopPodSandbox need. */
static void test_cri_sandbox__an_interruption_shortens_the_grace_to_the_deadline(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *ctr = NULL;
	_cleanup_free_ char *cell = NULL;
	int64_t grace;

	kfix_pod_with_container(f, "web", &sb, &ctr);
	cell = kfix_cell_of(f, sb);
	push_interruption(f, cell, KIYOT__CELL__V1__INTERRUPTION__KIND__NOTICE, 40);
	assert_true(KFIX_WAIT(kfix_pod_state(f, sb, &err) == NOTREADY, 10000));
	grace = stop_grace(f, ctr);
	assert_true(grace <= 40 - 15);
	assert_true(grace >= 20);
}

/* A rebalance recommendation is kept for the cell (its Cell shows it) and changes nothing of
 * the pod. */
static void test_cri_sandbox__a_rebalance_recommendation_leaves_the_pod_running(void **state)
{
	struct kfix *f = *state;
	struct cell_interruption in;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *ctr = NULL;
	_cleanup_free_ char *cell = NULL;

	kfix_pod_with_container(f, "web", &sb, &ctr);
	cell = kfix_cell_of(f, sb);
	push_interruption(f, cell, KIYOT__CELL__V1__INTERRUPTION__KIND__REBALANCE, 0);
	assert_true(
		KFIX_WAIT(cells_interruption(f->k.cells, cell, &in) == 0 && in.rebalance, 10000));
	assert_false(in.notice);
	assert_int_equal(kfix_pod_state(f, sb, &err), READY);
	assert_int_equal(kfix_container_state(f, ctr, &err),
			 RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING);
}

struct stop_call {
	struct kfix *f;
	const char *id;
	pthread_t thread;
	int ret;
	int done; /* atomic */
	struct err err;
};

static void *stop_thread(void *arg)
{
	struct stop_call *c = arg;

	c->ret = kfix_stop_pod(c->f, c->id, &c->err);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void stop_start(struct stop_call *c, struct kfix *f, const char *id)
{
	*c = (struct stop_call){ .f = f, .id = id, .err = ERR_INIT };
	if (pthread_create(&c->thread, NULL, stop_thread, c) != 0)
		abort();
}

/* A second StopPodSandbox while the first still ends the cell waits for it, and answers as
 * it does: the cell is terminated once, and the pod is not ready. */
static void test_cri_sandbox__a_stop_during_a_stop_waits_for_it(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *cell = NULL;
	struct stop_call first, second;
	bool waited;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	fake_provider_hold_terminate(f->fp, 1);
	stop_start(&first, f, sb);
	assert_int_equal(fake_provider_wait_held(f->fp, 1, 10000), 0);
	stop_start(&second, f, sb);
	usleep(200 * 1000);
	waited = !__atomic_load_n(&second.done, __ATOMIC_ACQUIRE);
	fake_provider_hold_terminate(f->fp, 0);
	pthread_join(first.thread, NULL);
	pthread_join(second.thread, NULL);
	assert_true(waited);
	assert_int_equal(first.ret, 0);
	assert_int_equal(second.ret, 0);
	assert_int_equal(fake_provider_terminated(f->fp, cell), 1);
	assert_int_equal(kfix_pod_state(f, sb, &err), NOTREADY);
}

/* A launch the provider refuses leaves neither a sandbox nor a cell, and says why. */
static void test_cri_sandbox__a_failed_launch_leaves_nothing(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ListPodSandboxResponse *list = NULL;
	struct err err = ERR_INIT;
	_cleanup_free_ char *id = NULL;

	fake_provider_fail(f->fp, FAKE_PROVIDER_LAUNCH, ENOSPC, 1);
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &id, &err), -EFBIG);
	assert_non_null(strstr(err.msg, "pod default/web"));
	assert_non_null(strstr(err.msg, "fake provider: launch fails"));
	assert_null(only_sandbox(f, &list));
	assert_int_equal(list->n_items, 0);
	protobuf_c_message_free_unpacked(&list->base, NULL);
	assert_int_equal(fake_provider_n_cells(f->fp), 0);
	/* and the next try works */
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &id, &err), 0);
}

/* A cell whose agent never answers is terminated after the provider's boot timeout, and the
 * sandbox goes with it. */
static void test_cri_sandbox__a_cell_whose_agent_never_comes_up_is_undone(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ListPodSandboxResponse *list = NULL;
	struct err err = ERR_INIT;
	_cleanup_free_ char *id = NULL;

	fake_provider_dead_agents(f->fp, 1);
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &id, &err), -ECONNREFUSED);
	assert_non_null(strstr(err.msg, "agent did not come up within 1 s"));
	assert_int_equal(fake_provider_n_cells(f->fp), 0);
	assert_true(fake_provider_calls(f->fp, FAKE_PROVIDER_TERMINATE) >= 1);
	assert_null(only_sandbox(f, &list));
	protobuf_c_message_free_unpacked(&list->base, NULL);
}

/* Ids kiyot does not know are NOT_FOUND for the calls that read or change a sandbox;
 * removing one is not an error (removal is idempotent). */
static void test_cri_sandbox__unknown_ids_are_not_found(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__PodSandboxStatusRequest st = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
	Runtime__V1__PortForwardRequest pf = RUNTIME__V1__PORT_FORWARD_REQUEST__INIT;
	struct err err = ERR_INIT;

	st.pod_sandbox_id = "0123456789abcdef";
	assert_int_equal(kfix_call0(f, "PodSandboxStatus", &st.base, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "pod sandbox 0123456789abcdef not found"));
	st.pod_sandbox_id = "";
	assert_int_equal(kfix_call0(f, "PodSandboxStatus", &st.base, &err), -ENOENT);
	assert_int_equal(kfix_stop_pod(f, "0123456789abcdef", &err), -ENOENT);
	assert_int_equal(kfix_remove_pod(f, "0123456789abcdef", &err), 0);
	pf.pod_sandbox_id = "0123456789abcdef";
	assert_int_equal(kfix_call0(f, "PortForward", &pf.base, &err), -ENOENT);
}

/* Stop terminates the cell and leaves the sandbox not ready; stop and remove again are no
 * errors; after removal the sandbox is gone. */
static void test_cri_sandbox__stop_and_remove_are_idempotent(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *cell = NULL;
	_cleanup_free_ char *after = NULL;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &id, &err), 0);
	cell = kfix_cell_of(f, id);
	assert_int_equal(kfix_stop_pod(f, id, &err), 0);
	assert_int_equal(kfix_pod_state(f, id, &err), NOTREADY);
	assert_false(fake_provider_has(f->fp, cell));
	assert_false(fake_agent_has_cell(f->fa, cell));
	after = kfix_cell_of(f, id);
	assert_string_equal(after, ""); /* the sandbox owns no cell any more */
	assert_int_equal(kfix_stop_pod(f, id, &err), 0);
	assert_int_equal(fake_provider_terminated(f->fp, cell), 1);
	assert_int_equal(kfix_remove_pod(f, id, &err), 0);
	assert_int_equal(kfix_pod_state(f, id, &err), -1);
	assert_int_equal(err.code, ENOENT);
	assert_int_equal(kfix_remove_pod(f, id, &err), 0);
}

/* Removing a ready pod stops it first: the cell goes and so do its containers' records. */
static void test_cri_sandbox__remove_of_a_ready_pod_removes_cell_and_containers(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *ctr = NULL;
	_cleanup_free_ char *cell = NULL;

	kfix_pod_with_container(f, "web", &sb, &ctr);
	cell = kfix_cell_of(f, sb);
	assert_int_equal(kfix_remove_pod(f, sb, &err), 0);
	assert_false(fake_provider_has(f->fp, cell));
	assert_int_equal(kfix_container_state(f, ctr, &err), -1);
	assert_int_equal(err.code, ENOENT);
	assert_int_equal(kfix_pod_state(f, sb, &err), -1);
}

/* Stopping a pod ends its containers: a running one exits 137, as killed. */
static void test_cri_sandbox__stop_exits_the_containers(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
	Runtime__V1__ContainerStatusResponse *resp = NULL;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *ctr = NULL;

	kfix_pod_with_container(f, "web", &sb, &ctr);
	assert_int_equal(kfix_stop_pod(f, sb, &err), 0);
	req.container_id = ctr;
	assert_int_equal(kfix_call(f, "ContainerStatus", &req.base,
				   &runtime__v1__container_status_response__descriptor, &resp,
				   &err),
			 0);
	assert_int_equal(resp->status->state, RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED);
	assert_int_equal(resp->status->exit_code, 137);
	assert_string_equal(resp->status->reason, "PodSandboxStopped");
	assert_true(resp->status->finished_at > 0);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

/* ListPodSandbox's filters: id prefix, state, labels; no filter lists all. */
static void test_cri_sandbox__list_filters_by_id_state_and_labels(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ListPodSandboxRequest req = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
	Runtime__V1__PodSandboxFilter filter = RUNTIME__V1__POD_SANDBOX_FILTER__INIT;
	Runtime__V1__PodSandboxStateValue sv = RUNTIME__V1__POD_SANDBOX_STATE_VALUE__INIT;
	Runtime__V1__PodSandboxFilter__LabelSelectorEntry sel =
		RUNTIME__V1__POD_SANDBOX_FILTER__LABEL_SELECTOR_ENTRY__INIT;
	Runtime__V1__PodSandboxFilter__LabelSelectorEntry *sels[] = { &sel };
	Runtime__V1__ListPodSandboxResponse *resp = NULL;
	struct err err = ERR_INIT;
	_cleanup_free_ char *a = NULL;
	_cleanup_free_ char *b = NULL;
	_cleanup_free_ char *prefix = NULL;

	assert_int_equal(kfix_run_pod(f, "a", "uid-a", 0, &a, &err), 0);
	assert_int_equal(kfix_run_pod(f, "b", "uid-b", 0, &b, &err), 0);
	assert_int_equal(kfix_stop_pod(f, b, &err), 0);

	assert_int_equal(kfix_call(f, "ListPodSandbox", &req.base,
				   &runtime__v1__list_pod_sandbox_response__descriptor, &resp,
				   &err),
			 0);
	assert_int_equal(resp->n_items, 2);
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	req.filter = &filter;
	prefix = xstrndup(a, 12);
	filter.id = prefix;
	assert_int_equal(kfix_call(f, "ListPodSandbox", &req.base,
				   &runtime__v1__list_pod_sandbox_response__descriptor, &resp,
				   &err),
			 0);
	assert_int_equal(resp->n_items, 1);
	assert_string_equal(resp->items[0]->id, a);
	assert_string_equal(resp->items[0]->metadata->name, "a");
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	filter.id = "";
	sv.state = NOTREADY;
	filter.state = &sv;
	assert_int_equal(kfix_call(f, "ListPodSandbox", &req.base,
				   &runtime__v1__list_pod_sandbox_response__descriptor, &resp,
				   &err),
			 0);
	assert_int_equal(resp->n_items, 1);
	assert_string_equal(resp->items[0]->id, b);
	assert_int_equal(resp->items[0]->state, NOTREADY);
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	filter.state = NULL;
	sel.key = "app";
	sel.value = "a";
	filter.label_selector = sels;
	filter.n_label_selector = 1;
	assert_int_equal(kfix_call(f, "ListPodSandbox", &req.base,
				   &runtime__v1__list_pod_sandbox_response__descriptor, &resp,
				   &err),
			 0);
	assert_int_equal(resp->n_items, 1);
	assert_string_equal(resp->items[0]->id, a);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	sel.value = "nobody";
	assert_int_equal(kfix_call(f, "ListPodSandbox", &req.base,
				   &runtime__v1__list_pod_sandbox_response__descriptor, &resp,
				   &err),
			 0);
	assert_int_equal(resp->n_items, 0);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

/* A sandbox answers to a unique prefix of its id, as crictl allows. */
static void test_cri_sandbox__a_unique_id_prefix_names_the_sandbox(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__PodSandboxStatusResponse *st;
	struct err err = ERR_INIT;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *prefix = NULL;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &id, &err), 0);
	prefix = xstrndup(id, 8);
	st = pod_status(f, prefix, 0);
	assert_string_equal(st->status->id, id);
	protobuf_c_message_free_unpacked(&st->base, NULL);
}

static int run_with(struct kfix *f, Runtime__V1__PodSandboxConfig *cfg, const char *handler,
		    struct err *err)
{
	Runtime__V1__RunPodSandboxRequest req = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;

	req.config = cfg;
	req.runtime_handler = (char *)handler;
	return kfix_call0(f, "RunPodSandbox", &req.base, err);
}

/* What a sandbox config must carry is checked before anything is launched; errors name the
 * field. */
static void test_cri_sandbox__invalid_configs_are_refused_naming_the_field(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__PodSandboxConfig *cfg = kfix_pod_config(f, "web", "uid-web", 0);
	Runtime__V1__PortMapping pm = RUNTIME__V1__PORT_MAPPING__INIT;
	Runtime__V1__PortMapping *pms[] = { &pm };
	Runtime__V1__PodSandboxMetadata *md = cfg->metadata;
	struct err err = ERR_INIT;

	assert_int_equal(run_with(f, cfg, "runc", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "runtime_handler \"runc\""));
	cfg->metadata = NULL;
	assert_int_equal(run_with(f, cfg, "", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "config.metadata"));
	cfg->metadata = md;
	pm.host_port = 8080;
	pm.container_port = 80;
	pm.host_ip = "::1";
	cfg->port_mappings = pms;
	cfg->n_port_mappings = 1;
	assert_int_equal(run_with(f, cfg, "", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "port_mappings[0].host_ip"));
	pm.host_ip = "";
	pm.container_port = 0;
	assert_int_equal(run_with(f, cfg, "", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "port_mappings[0].container_port"));
	cfg->port_mappings = NULL;
	cfg->n_port_mappings = 0;
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH), 0);
	assert_int_equal(run_with(f, cfg, "kiyot", &err), 0);
	protobuf_c_message_free_unpacked(&cfg->base, NULL);
}

/* A demand annotation too large for a quantity ("1e400" CPUs) is the caller's fault:
 * INVALID_ARGUMENT saying it is out of range, and no cell is launched for it. */
static void test_cri_sandbox__out_of_range_demand_is_invalid_argument(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__PodSandboxConfig *cfg = kfix_pod_config(f, "huge", "uid-huge", 0);
	Runtime__V1__PodSandboxConfig__AnnotationsEntry ann =
		RUNTIME__V1__POD_SANDBOX_CONFIG__ANNOTATIONS_ENTRY__INIT;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry *anns[] = { &ann };
	Runtime__V1__PodSandboxConfig__AnnotationsEntry **own = cfg->annotations;
	size_t n_own = cfg->n_annotations;
	static const char *const values[] = { "1e400", "1e99999999999", "9223372036854776" };
	struct err err = ERR_INIT;

	ann.key = "pod.elotl.co/cpu";
	cfg->annotations = anns;
	cfg->n_annotations = 1;
	for (size_t i = 0; i < ARRAY_SIZE(values); i++) {
		ann.value = (char *)values[i];
		if (run_with(f, cfg, "", &err) != -EINVAL)
			fail_msg("%s: %s (%d), not INVALID_ARGUMENT", values[i], err.msg, err.code);
		assert_non_null(strstr(err.msg, "pod.elotl.co/cpu"));
		assert_non_null(strstr(err.msg, values[i]));
		assert_non_null(strstr(err.msg, "out of range"));
	}
	ann.key = "pod.elotl.co/memory";
	ann.value = "8Ei";
	assert_int_equal(run_with(f, cfg, "", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "out of range"));
	ann.value = "1e400";
	assert_int_equal(run_with(f, cfg, "", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "out of range"));
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH), 0);
	cfg->annotations = own;
	cfg->n_annotations = n_own;
	protobuf_c_message_free_unpacked(&cfg->base, NULL);
}

/* PortForward answers a URL of the streaming server for a ready pod; a pod that is not ready
 * is FAILED_PRECONDITION and a port out of range INVALID_ARGUMENT. */
static void test_cri_sandbox__port_forward_needs_a_ready_pod(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__PortForwardRequest req = RUNTIME__V1__PORT_FORWARD_REQUEST__INIT;
	Runtime__V1__PortForwardResponse *resp = NULL;
	int32_t ports[] = { 80 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *id = NULL;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &id, &err), 0);
	req.pod_sandbox_id = id;
	req.port = ports;
	req.n_port = 1;
	assert_int_equal(kfix_call(f, "PortForward", &req.base,
				   &runtime__v1__port_forward_response__descriptor, &resp, &err),
			 0);
	assert_ptr_equal(strstr(resp->url, "http://127.0.0.1:"), resp->url);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	ports[0] = 70000;
	assert_int_equal(kfix_call0(f, "PortForward", &req.base, &err), -EINVAL);
	ports[0] = 80;
	assert_int_equal(kfix_stop_pod(f, id, &err), 0);
	assert_int_equal(kfix_call0(f, "PortForward", &req.base, &err), -EBUSY);
	assert_non_null(strstr(err.msg, "not ready"));
}

#define TEST(name) cmocka_unit_test_setup_teardown(name, kfix_setup, kfix_teardown)

static const struct CMUnitTest tests[] = {
	TEST(test_cri_sandbox__run_makes_a_ready_sandbox_in_a_new_cell),
	TEST(test_cri_sandbox__verbose_status_names_the_cell),
	TEST(test_cri_sandbox__a_capacity_fallback_is_recorded),
	TEST(test_cri_sandbox__a_retried_run_answers_the_same_sandbox),
	TEST(test_cri_sandbox__a_new_attempt_gets_a_new_sandbox),
	TEST(test_cri_sandbox__running_a_stopped_attempt_again_already_exists),
	TEST(test_cri_sandbox__calls_while_launching_are_unavailable),
	TEST(test_cri_sandbox__a_failed_store_write_after_a_launch_ends_it_once),
	TEST(test_cri_sandbox__a_stop_while_launching_cancels_the_launch),
	TEST(test_cri_sandbox__a_remove_while_waiting_for_the_agent_cancels_it),
	TEST(test_cri_sandbox__an_instance_terminated_during_boot_ends_the_launch),
	TEST(test_cri_sandbox__a_spot_interruption_notice_stops_the_pod),
	TEST(test_cri_sandbox__a_late_status_does_not_revive_a_lost_pods_container),
	TEST(test_cri_sandbox__an_interruption_shortens_the_grace_to_the_deadline),
	TEST(test_cri_sandbox__a_rebalance_recommendation_leaves_the_pod_running),
	TEST(test_cri_sandbox__a_stop_during_a_stop_waits_for_it),
	TEST(test_cri_sandbox__a_failed_launch_leaves_nothing),
	cmocka_unit_test_setup_teardown(
		test_cri_sandbox__a_cell_whose_agent_never_comes_up_is_undone, kfix_setup_boot_1s,
		kfix_teardown),
	TEST(test_cri_sandbox__unknown_ids_are_not_found),
	TEST(test_cri_sandbox__stop_and_remove_are_idempotent),
	TEST(test_cri_sandbox__remove_of_a_ready_pod_removes_cell_and_containers),
	TEST(test_cri_sandbox__stop_exits_the_containers),
	TEST(test_cri_sandbox__list_filters_by_id_state_and_labels),
	TEST(test_cri_sandbox__a_unique_id_prefix_names_the_sandbox),
	TEST(test_cri_sandbox__invalid_configs_are_refused_naming_the_field),
	TEST(test_cri_sandbox__port_forward_needs_a_ready_pod),
	TEST(test_cri_sandbox__out_of_range_demand_is_invalid_argument),
};

int main(void)
{
	return cmocka_run_group_tests(tests, NULL, NULL);
}
