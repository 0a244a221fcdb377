/*
 * Unit tests for the cell manager (kiyot/cells/cells.c) and what kiyot does with what cells
 * report (kiyot/cri/cell_reports.c), in a whole kiyot with the fake provider and agent
 * (kiyot_fixture.h): enrollment, the bootstrap document, calls to agents and their errors,
 * the Watch stream and its resumption, streams, and a kiyot restarted on its state.
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
#include <grpc/status.h>
#include <jansson.h>
#include <pthread.h>

#include "cancel.h"
#include "cells/cells.h"
#include "kiyot_fixture.h"
#include "state/ctrlog.h"
#include "state/store.h"
#include "streamrec.h"
#include "rpc.h"
#include "version.h"
#include "xalloc.h"

/* The enrollment secret kiyot keeps for a cell, or NULL (caller frees). */
static char *stored_secret(struct kfix *f, const char *cell)
{
	_cleanup_free_ char *key = xasprintf("enroll_secret/%s", cell);
	struct err err = ERR_INIT;
	char *v = NULL;

	records_lock(f->k.records);
	if (store_get_meta(f->k.store, key, &v, &err) < 0)
		fail_msg("%s", err.msg);
	records_unlock(f->k.records);
	return v;
}

/* A launched cell boots from kiyot's document (its id, kiyot's cluster id and CA, the pod,
 * a one-time secret), enrolls with it, and kiyot forgets the secret once it did. */
static void test_cells__a_launch_enrolls_the_agent_and_forgets_its_secret(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *cell = NULL;
	_cleanup_free_ char *boot = NULL;
	_cleanup_free_ char *secret = NULL;
	json_t *doc;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	assert_true(fake_agent_enrolled(f->fa, cell));
	/* Enroll first (its request, then the certificate), Hello over TLS once enrolled: none
	 * tried before, whose failed handshake gRPC would log as a warning */
	assert_int_equal(fake_agent_calls(f->fa, FAKE_AGENT_ENROLL), 2);
	assert_int_equal(fake_agent_calls(f->fa, FAKE_AGENT_HELLO), 1);
	boot = fake_agent_bootstrap(f->fa, cell);
	doc = json_loads(boot, 0, NULL);
	assert_non_null(doc);
	assert_string_equal(json_string_value(json_object_get(doc, "cell_id")), cell);
	assert_string_equal(json_string_value(json_object_get(doc, "cluster_id")), f->k.cluster_id);
	assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "pod"), "uid")),
			    "uid-web");
	assert_int_equal(json_integer_value(json_object_get(doc, "agent_port")), 7443);
	assert_ptr_equal(strstr(json_string_value(json_object_get(doc, "ca")), "-----BEGIN"),
			 json_string_value(json_object_get(doc, "ca")));
	assert_int_equal(strlen(json_string_value(json_object_get(doc, "enroll_secret"))), 64);
	json_decref(doc);
	secret = stored_secret(f, cell);
	assert_null(secret);
}

/* The connection a new cell's agent answered Hello on is the one kiyot keeps for the cell:
 * the pod's first calls (CreateContainer, StartContainer) make no other, which would cost
 * them a TCP and TLS handshake with the agent. */
static void test_cells__the_pods_calls_use_the_connection_hello_answered_on(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *ctr = NULL;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	assert_int_equal(kfix_create(f, sb, "app", "busybox", &ctr, &err), 0);
	assert_int_equal(kfix_start(f, ctr, &err), 0);
	assert_int_equal(fake_agent_calls(f->fa, FAKE_AGENT_HELLO), 1);
	assert_int_equal(fake_agent_calls(f->fa, FAKE_AGENT_CONNECT), 1);
	assert_true(fake_agent_calls(f->fa, FAKE_AGENT_APPLY) >= 2);
}

/* A launch retried after kiyot restarted mid-launch finds the secret it stored for the cell
 * (the cell booted with it), not a new one. */
static void test_cells__a_retried_launch_boots_with_the_stored_secret(void **state)
{
	struct kfix *f = *state;
	struct cell_spec spec = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *ip = NULL;
	_cleanup_free_ char *boot = NULL;
	json_t *doc;

	records_lock(f->k.records);
	assert_int_equal(store_put_meta(f->k.store, "enroll_secret/cellsecret",
					"00112233445566778899aabbccddeeff", &err),
			 0);
	records_unlock(f->k.records);
	spec.cell_id = "cellsecret";
	spec.pod_uid = "uid-x";
	spec.pod_name = "x";
	spec.pod_namespace = "default";
	spec.instance_type = "t3.micro";
	assert_int_equal(cells_launch(f->k.cells, &spec, &ip, NULL, &err), 0);
	assert_ptr_equal(strstr(ip, "10.99."), ip);
	boot = fake_agent_bootstrap(f->fa, "cellsecret");
	doc = json_loads(boot, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(doc, "enroll_secret")),
			    "00112233445566778899aabbccddeeff");
	json_decref(doc);
	assert_true(fake_agent_enrolled(f->fa, "cellsecret"));
	assert_int_equal(cells_terminate(f->k.cells, "cellsecret", &err), 0);
}

/* A launch spec of cell id for these tests. */
static struct cell_spec launch_spec(const char *id)
{
	struct cell_spec spec = { 0 };

	spec.cell_id = id;
	spec.pod_uid = "uid-x";
	spec.pod_name = "x";
	spec.pod_namespace = "default";
	spec.instance_type = "t3.micro";
	return spec;
}

/* A launch cancelled before it began asks the provider for nothing and ends ECANCELED. */
static void test_cells__a_launch_cancelled_before_it_began_makes_no_cell(void **state)
{
	struct kfix *f = *state;
	struct cell_spec spec = launch_spec("cellcancel");
	struct err err = ERR_INIT;
	char *ip = NULL;

	cells_launch_begin(f->k.cells, "cellcancel");
	assert_int_equal(cells_launch_cancel(f->k.cells, "cellcancel"), CELLS_LAUNCH_CANCELLED);
	assert_int_equal(cells_launch(f->k.cells, &spec, &ip, NULL, &err), -ECANCELED);
	assert_non_null(strstr(err.msg, "stopped while starting"));
	assert_null(ip);
	cells_launch_end(f->k.cells, "cellcancel");
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH), 0);
	assert_int_equal(cells_launch_cancel(f->k.cells, "cellcancel"), CELLS_LAUNCH_NONE);
}

struct gone_call {
	struct kfix *f;
	volatile bool gone;
	int ret;
	struct cell_launched launched;
	struct err err;
};

static bool caller_gone(void *ctx)
{
	return ((struct gone_call *)ctx)->gone;
}

static void *gone_thread(void *arg)
{
	struct gone_call *c = arg;
	struct cell_spec spec = launch_spec("cellgone");
	struct cancel_scope scope;
	char *ip = NULL;

	cancel_scope_enter(&scope, caller_gone, c);
	c->ret = cells_launch(c->f->k.cells, &spec, &ip, &c->launched, &c->err);
	cancel_scope_leave(&scope);
	free(ip);
	return NULL;
}

/* A launch whose caller goes away while it waits for the agent (kiyot stopping, the kubelet's
 * deadline) ends ECANCELED but keeps its cell, for the RunPodSandbox that resumes it; a stop
 * of its sandbox would have terminated it. */
static void test_cells__a_launch_whose_caller_left_keeps_its_cell(void **state)
{
	struct kfix *f = *state;
	struct gone_call c = { .f = f, .err = ERR_INIT };
	pthread_t t;

	fake_provider_dead_agents(f->fp, 1); /* the agent never answers: the wait goes on */
	cells_launch_begin(f->k.cells, "cellgone");
	assert_int_equal(pthread_create(&t, NULL, gone_thread, &c), 0);
	for (int i = 0; i < 500 && !fake_provider_has(f->fp, "cellgone"); i++)
		usleep(10000);
	assert_true(fake_provider_has(f->fp, "cellgone"));
	c.gone = true;
	pthread_join(t, NULL);
	cells_launch_end(f->k.cells, "cellgone");
	assert_int_equal(c.ret, -ECANCELED);
	assert_true(c.launched.kept);
	assert_true(fake_provider_has(f->fp, "cellgone"));
	assert_int_equal(fake_provider_terminated(f->fp, "cellgone"), 0);
	cell_launched_release(&c.launched);
}

struct launch_call {
	struct kfix *f;
	pthread_t thread;
	int ret;
	char *ip;
	struct err err;
};

static void *launch_thread(void *arg)
{
	struct launch_call *c = arg;
	struct cell_spec spec = launch_spec("cellrace");

	c->ret = cells_launch(c->f->k.cells, &spec, &c->ip, NULL, &c->err);
	return NULL;
}

/* A launch cancelled while the provider makes the cell, whose cell then comes up (its agent
 * answers at once), does not keep it: the launch ends ECANCELED and the cell is terminated. */
static void test_cells__a_launch_cancelled_as_its_cell_comes_up_leaves_no_cell(void **state)
{
	struct kfix *f = *state;
	struct launch_call c = { .f = f, .err = ERR_INIT };

	fake_provider_hold(f->fp, 1);
	if (pthread_create(&c.thread, NULL, launch_thread, &c) != 0)
		abort();
	assert_int_equal(fake_provider_wait_held(f->fp, 1, 10000), 0);
	assert_int_equal(cells_launch_cancel(f->k.cells, "cellrace"), CELLS_LAUNCH_CANCELLED);
	fake_provider_hold(f->fp, 0);
	pthread_join(c.thread, NULL);
	assert_int_equal(c.ret, -ECANCELED);
	assert_null(c.ip);
	assert_false(fake_provider_has(f->fp, "cellrace"));
	assert_true(fake_provider_terminated(f->fp, "cellrace") >= 1);
}

/* Once a launch's cell came up and is kept, a cancel is too late (the stop then stops the cell
 * as a running one); once the launch ended, nothing is known of it. */
static void test_cells__a_launch_done_is_not_cancelled(void **state)
{
	struct kfix *f = *state;
	struct cell_spec spec = launch_spec("celldone");
	struct err err = ERR_INIT;
	_cleanup_free_ char *ip = NULL;

	cells_launch_begin(f->k.cells, "celldone");
	assert_int_equal(cells_launch(f->k.cells, &spec, &ip, NULL, &err), 0);
	assert_int_equal(cells_launch_cancel(f->k.cells, "celldone"), CELLS_LAUNCH_DONE);
	assert_true(fake_provider_has(f->fp, "celldone"));
	cells_launch_end(f->k.cells, "celldone");
	assert_int_equal(cells_launch_cancel(f->k.cells, "celldone"), CELLS_LAUNCH_NONE);
	assert_int_equal(fake_provider_terminated(f->fp, "celldone"), 0);
	assert_int_equal(cells_terminate(f->k.cells, "celldone", &err), 0);
}

/* The bootstrap document carries the images to pre-pull, the pull bounds and the registries
 * configuration every agent needs. */
static void test_cells__the_bootstrap_carries_prepulls_and_pull_bounds(void **state)
{
	struct kfix *f = *state;
	const char *prepull[] = { "registry.test/a:1", "registry.test/b:2" };
	struct cell_spec spec = { 0 };
	_cleanup_free_ char *text = NULL;
	json_t *doc, *pulls;

	spec.cell_id = "c1";
	spec.pod_uid = "u";
	spec.pod_name = "n";
	spec.pod_namespace = "ns";
	spec.instance_type = "t3.micro";
	spec.prepull = prepull;
	spec.n_prepull = 2;
	f->k.cfg.registries = json_pack("{s:{s:b}}", "registry.test", "insecure", 1);
	text = cells_bootstrap(&f->k, &spec, "s3cret");
	json_decref(f->k.cfg.registries);
	f->k.cfg.registries = NULL;
	doc = json_loads(text, 0, NULL);
	assert_non_null(doc);
	assert_int_equal(json_integer_value(json_object_get(doc, "version")), 1);
	assert_string_equal(json_string_value(json_object_get(doc, "enroll_secret")), "s3cret");
	assert_string_equal(json_string_value(json_object_get(doc, "instance_type")), "t3.micro");
	assert_int_equal(json_array_size(json_object_get(doc, "prepull")), 2);
	assert_string_equal(json_string_value(json_array_get(json_object_get(doc, "prepull"), 1)),
			    "registry.test/b:2");
	pulls = json_object_get(doc, "pulls");
	assert_int_equal(json_integer_value(json_object_get(pulls, "max_transfers")),
			 f->k.cfg.pulls.max_transfers);
	assert_non_null(json_object_get(json_object_get(doc, "registries"), "registry.test"));
	json_decref(doc);
}

/* A stream of the cell manager's driven as a blocking reader would (streamrec.h). */
struct sync_stream {
	struct streamrec r;
	struct cell_stream *s;
};

static int sync_open(struct kfix *f, struct sync_stream *ss, const char *cell, const char *method,
		     const ProtobufCMessage *first, const ProtobufCMessageDescriptor *desc,
		     struct err *err)
{
	streamrec_init(&ss->r);
	return cells_stream_open(f->k.cells, cell, method, first, desc, &streamrec_cbs, &ss->r,
				 &ss->s, err);
}

/* Asks for the next message and waits: 1 with *m, or 0 / the error at the end. */
static int sync_next(struct sync_stream *ss, ProtobufCMessage **m)
{
	cells_stream_read(ss->s);
	return streamrec_take(&ss->r, m);
}

static void sync_free(struct sync_stream *ss)
{
	assert_true(ss->r.ended);
	assert_false(ss->r.late);
	cells_stream_free(ss->s);
}

/* Every call to a cell kiyot does not run is ENOENT, saying so. */
static void test_cells__calls_to_a_cell_that_is_not_running_are_enoent(void **state)
{
	struct kfix *f = *state;
	Kiyot__Cell__V1__ExecSyncRequest ex = KIYOT__CELL__V1__EXEC_SYNC_REQUEST__INIT;
	Kiyot__Cell__V1__ExecSyncResponse *er = NULL;
	Kiyot__Cell__V1__PullImageRequest pull = KIYOT__CELL__V1__PULL_IMAGE_REQUEST__INIT;
	Kiyot__Cell__V1__PullImageResponse *pr = NULL;
	Kiyot__Cell__V1__WriteVolumeRequest wv = KIYOT__CELL__V1__WRITE_VOLUME_REQUEST__INIT;
	Kiyot__Cell__V1__StatsResponse *sr = NULL;
	Kiyot__Cell__V1__AttachInput first = KIYOT__CELL__V1__ATTACH_INPUT__INIT;
	Kiyot__Cell__V1__Pod pod = KIYOT__CELL__V1__POD__INIT;
	Kiyot__Cell__V1__ApplyResponse *ar = NULL;
	struct cell_stream *s = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(cells_exec_sync(f->k.cells, "nosuch", &ex, &er, &err), -ENOENT);
	assert_string_equal(err.msg, "cell nosuch is not running");
	assert_int_equal(cells_pull_image(f->k.cells, "nosuch", &pull, &pr, &err), -ENOENT);
	assert_int_equal(cells_stats(f->k.cells, "nosuch", &sr, &err), -ENOENT);
	assert_int_equal(cells_write_volume(f->k.cells, "nosuch", &wv, &err), -ENOENT);
	assert_int_equal(cells_apply(f->k.cells, "nosuch", &pod, 1000, &ar, &err), -ENOENT);
	assert_int_equal(cells_stream_open(f->k.cells, "nosuch", "Attach", &first.base,
					   &kiyot__cell__v1__attach_output__descriptor,
					   &streamrec_cbs, NULL, &s, &err),
			 -ENOENT);
	assert_null(cells_apply_lock(f->k.cells, "nosuch"));
	cells_apply_unlock(f->k.cells, NULL);
	assert_null(er);
	assert_null(s);
}

/* A call to a cell whose agent does not answer fails UNAVAILABLE naming the cell; the agent
 * serving again, calls work again. */
static void test_cells__an_unreachable_agent_is_named(void **state)
{
	struct kfix *f = *state;
	Kiyot__Cell__V1__StatsResponse *sr = NULL;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *cell = NULL;
	_cleanup_free_ char *want = NULL;
	int ret = 0;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	fake_agent_set_serving(f->fa, cell, 0);
	/* the usage its Watch brought answers no more once the Watch ended */
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 0, 5000));
	for (int i = 0; i < 500 && (ret = cells_stats(f->k.cells, cell, &sr, &err)) == 0; i++) {
		protobuf_c_message_free_unpacked(&sr->base, NULL);
		usleep(10 * 1000);
	}
	assert_int_equal(ret, -ECONNREFUSED);
	want = xasprintf("cell %s: agent unreachable", cell);
	assert_ptr_equal(strstr(err.msg, want), err.msg);
	fake_agent_set_serving(f->fa, cell, 1);
	err_clear(&err);
	assert_int_equal(cells_stats(f->k.cells, cell, &sr, &err), 0);
	assert_int_equal(sr->cell->cpu_usage_ns, 1000000000);
	assert_int_equal(fake_agent_last_timeout(f->fa, FAKE_AGENT_STATS), 10000);
	protobuf_c_message_free_unpacked(&sr->base, NULL);
}

/* A Watch that ends is opened again; after three refused attempts kiyot asks the provider
 * to heal the cell's agent, and watches it again once it serves. */
static void test_cells__a_watch_that_ends_reconnects_and_heals_the_agent(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *cell = NULL;
	unsigned before;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 5000));
	before = fake_agent_watches(f->fa, cell);
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_HEAL), 0);
	fake_agent_set_serving(f->fa, cell, 0);
	assert_true(KFIX_WAIT(fake_provider_calls(f->fp, FAKE_PROVIDER_HEAL) == 1, 10000));
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 10000));
	assert_int_equal(fake_agent_watches(f->fa, cell), before + 1);
}

/* A Watch opened again asks for each unit's log from what kiyot already wrote, so no line is
 * written twice or lost. */
static void test_cells__a_reopened_watch_resumes_logs_where_they_stopped(void **state)
{
	struct kfix *f = *state;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *ctr = NULL;
	_cleanup_free_ char *cell = NULL;
	_cleanup_free_ char *path = xasprintf("%s/pods/uid-web/web.log", f->dir);
	const char *one = "2026-01-01T00:00:00Z stdout F one\n";
	const char *two = "2026-01-01T00:00:01Z stdout F two\n";
	_cleanup_free_ char *both = xasprintf("%s%s", one, two);
	uint64_t offset = 0;

	kfix_pod_with_container(f, "web", &sb, &ctr);
	cell = kfix_cell_of(f, sb);
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 5000));
	assert_int_equal(fake_agent_log(f->fa, cell, ctr, one), 0);
	assert_true(KFIX_WAIT(kfix_file_is(path, one), 5000));
	fake_agent_set_serving(f->fa, cell, 0);
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 0, 5000));
	fake_agent_set_serving(f->fa, cell, 1);
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 10000));
	assert_int_equal(fake_agent_watch_offset(f->fa, cell, ctr, &offset), 1);
	assert_int_equal(offset, strlen(one));
	assert_int_equal(fake_agent_log(f->fa, cell, ctr, two), 0);
	assert_true(KFIX_WAIT(kfix_file_is(path, both), 5000));
}

/* An agent that sends a unit's whole log again (it lost the offsets asked for) has what kiyot
 * already wrote skipped, even within a chunk: each byte reaches the file once. */
static void test_cells__log_bytes_sent_again_are_written_once(void **state)
{
	struct kfix *f = *state;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *ctr = NULL;
	_cleanup_free_ char *cell = NULL;
	_cleanup_free_ char *path = xasprintf("%s/pods/uid-web/web.log", f->dir);
	const char *one = "2026-01-01T00:00:00Z stdout F one\n";
	const char *two = "2026-01-01T00:00:01Z stdout F two\n";
	_cleanup_free_ char *both = xasprintf("%s%s", one, two);
	unsigned watches;

	fake_agent_resend_logs(f->fa, 1);
	kfix_pod_with_container(f, "web", &sb, &ctr);
	cell = kfix_cell_of(f, sb);
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 5000));
	assert_int_equal(fake_agent_log(f->fa, cell, ctr, one), 0);
	assert_true(KFIX_WAIT(kfix_file_is(path, one), 5000));
	/* the agent goes away, writes on, and comes back sending everything from the start */
	watches = fake_agent_watches(f->fa, cell);
	fake_agent_set_serving(f->fa, cell, 0);
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 0, 5000));
	assert_int_equal(fake_agent_log(f->fa, cell, ctr, two), 0);
	fake_agent_set_serving(f->fa, cell, 1);
	assert_true(KFIX_WAIT(fake_agent_watches(f->fa, cell) > watches, 10000));
	assert_true(KFIX_WAIT(kfix_file_is(path, both), 5000));
	/* and once more: nothing new, nothing written */
	fake_agent_set_serving(f->fa, cell, 0);
	fake_agent_set_serving(f->fa, cell, 1);
	assert_true(KFIX_WAIT(fake_agent_watches(f->fa, cell) > watches + 1, 10000));
	usleep(200 * 1000);
	assert_true(kfix_file_is(path, both));
}

/* Where the container's log stands in the store at path (its kiyot closed). */
static struct log_mark stored_mark(struct store *st, const char *ctr)
{
	struct store_contents got;
	struct err err = ERR_INIT;
	struct log_mark m = { 0 };
	bool found = false;

	assert_int_equal(store_load(st, &got, &err), 0);
	for (size_t i = 0; i < got.n_containers; i++)
		if (strcmp(got.containers[i]->id, ctr) == 0) {
			m = got.containers[i]->log_mark;
			found = true;
		}
	store_contents_release(&got);
	assert_true(found);
	return m;
}

/*
 * kiyot killed after a log line reached the file but before its position reached the store
 * (positions go in batches): started again, it finds the line in the file, so the Watch asks
 * for what comes after it, and the file has each line once.
 */
static void test_cells__a_lost_batch_of_log_positions_costs_no_line(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *ctr = NULL;
	_cleanup_free_ char *cell = NULL;
	_cleanup_free_ char *db = xasprintf("%s/kiyot.db", f->dir);
	_cleanup_free_ char *path = xasprintf("%s/pods/uid-web/web.log", f->dir);
	const char *one = "2026-01-01T00:00:00Z stdout F one\n";
	const char *two = "2026-01-01T00:00:01Z stdout F two\n";
	const char *three = "2026-01-01T00:00:02Z stdout F three\n";
	_cleanup_free_ char *all = xasprintf("%s%s%s", one, two, three);
	struct log_mark first;
	struct store *st = NULL;
	uint64_t offset = 0;

	kfix_pod_with_container(f, "web", &sb, &ctr);
	cell = kfix_cell_of(f, sb);
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 5000));
	assert_int_equal(fake_agent_log(f->fa, cell, ctr, one), 0);
	assert_true(KFIX_WAIT(kfix_file_is(path, one), 5000));
	ctrlogs_commit(f->k.logs);
	first = stored_mark(f->k.store, ctr);
	assert_int_equal(first.offset, strlen(one));
	assert_int_equal(fake_agent_log(f->fa, cell, ctr, two), 0);
	assert_true(KFIX_WAIT(ctrlog_offset(records_container(f->k.records, ctr)->log) ==
				      strlen(one) + strlen(two),
			      5000));

	/* the store as the kill left it: the batch with the second line never went */
	kfix_close(f);
	assert_int_equal(store_open(db, &st, &err), 0);
	assert_int_equal(store_put_log_mark(st, ctr, &first, &err), 0);
	store_close(st);
	assert_int_equal(kfix_open(f, &err), 0);

	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 5000));
	assert_int_equal(fake_agent_watch_offset(f->fa, cell, ctr, &offset), 1);
	assert_int_equal(offset, strlen(one) + strlen(two));
	assert_int_equal(fake_agent_log(f->fa, cell, ctr, three), 0);
	assert_true(KFIX_WAIT(kfix_file_is(path, all), 5000));
	usleep(100 * 1000);
	assert_true(kfix_file_is(path, all));
}

/*
 * kiyot killed and started again on its state directory: the same sandboxes and containers
 * load, the cells are resumed (a Watch from the stored log offsets), and calls reach them as
 * before.
 */
static void test_cells__a_restarted_kiyot_resumes_its_cells(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ExecSyncRequest ex = RUNTIME__V1__EXEC_SYNC_REQUEST__INIT;
	Runtime__V1__ExecSyncResponse *er = NULL;
	char *cmd[] = { "echo", "after" };
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *ctr = NULL;
	_cleanup_free_ char *cell = NULL;
	_cleanup_free_ char *cluster = NULL;
	_cleanup_free_ char *path = xasprintf("%s/pods/uid-web/web.log", f->dir);
	const char *one = "2026-01-01T00:00:00Z stdout F before\n";
	const char *two = "2026-01-01T00:00:01Z stdout F after\n";
	_cleanup_free_ char *both = xasprintf("%s%s", one, two);
	uint64_t offset = 0;

	kfix_pod_with_container(f, "web", &sb, &ctr);
	cell = kfix_cell_of(f, sb);
	cluster = xstrdup(f->k.cluster_id);
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 5000));
	assert_int_equal(fake_agent_log(f->fa, cell, ctr, one), 0);
	assert_true(KFIX_WAIT(kfix_file_is(path, one), 5000));

	assert_int_equal(kfix_restart(f, &err), 0);
	assert_string_equal(f->k.cluster_id, cluster);
	assert_int_equal(kfix_pod_state(f, sb, &err),
			 RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY);
	assert_int_equal(kfix_container_state(f, ctr, &err),
			 RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING);
	assert_true(fake_provider_has(f->fp, cell)); /* resumed, not taken for an orphan */
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 5000));
	assert_int_equal(fake_agent_watch_offset(f->fa, cell, ctr, &offset), 1);
	assert_int_equal(offset, strlen(one));

	assert_int_equal(fake_agent_log(f->fa, cell, ctr, two), 0);
	assert_int_equal(fake_agent_unit_exit(f->fa, cell, ctr, 0, "Completed"), 0);
	assert_true(KFIX_WAIT(kfix_container_state(f, ctr, &err) ==
				      RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED,
			      5000));
	assert_true(KFIX_WAIT(kfix_file_is(path, both), 5000));
	/* a new container after the restart runs in the same cell */
	free(ctr);
	ctr = NULL;
	assert_int_equal(kfix_create(f, sb, "second", "registry.test/app:1", &ctr, &err), 0);
	assert_int_equal(kfix_start(f, ctr, &err), 0);
	ex.container_id = ctr;
	ex.cmd = cmd;
	ex.n_cmd = 2;
	assert_int_equal(kfix_call(f, "ExecSync", &ex.base,
				   &runtime__v1__exec_sync_response__descriptor, &er, &err),
			 0);
	assert_memory_equal(er->stdout.data, "after\n", 6);
	protobuf_c_message_free_unpacked(&er->base, NULL);
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH), 1);
}

/* An agent older than the oldest release kiyot works with is refused at launch, the error
 * naming both releases, and its cell is not kept; one that says no release at all likewise. */
static void test_cells__an_agent_older_than_kiyot_works_with_is_refused_at_launch(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *want = xasprintf("from %s on", KIYOT_AGENT_OLDEST);

	fake_agent_set_version(f->fa, "0.0.9");
	assert_int_equal(rpc_status_from_errno(-kfix_run_pod(f, "old", "uid-old", 0, &sb, &err)),
			 GRPC_STATUS_FAILED_PRECONDITION);
	assert_non_null(strstr(err.msg, "its agent is release \"0.0.9\""));
	assert_non_null(strstr(err.msg, want));
	assert_non_null(strstr(err.msg, KIYOT_VERSION));
	assert_int_equal(fake_provider_n_cells(f->fp), 0);

	fake_agent_set_version(f->fa, "");
	err_clear(&err);
	assert_int_equal(rpc_status_from_errno(-kfix_run_pod(f, "none", "uid-none", 0, &sb, &err)),
			 GRPC_STATUS_FAILED_PRECONDITION);
	assert_non_null(strstr(err.msg, "its agent is release \"\""));

	fake_agent_set_version(f->fa, KIYOT_AGENT_OLDEST);
	err_clear(&err);
	assert_int_equal(kfix_run_pod(f, "oldest", "uid-oldest", 0, &sb, &err), 0);
}

/* CreateContainer of a container with a cgroup v2 setting (linux.resources.unified), expecting
 * the status want. */
static void create_unified(struct kfix *f, const char *sb, const char *name, char **id,
			   grpc_status_code want, struct err *err)
{
	Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
	Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
	Runtime__V1__LinuxContainerConfig lin = RUNTIME__V1__LINUX_CONTAINER_CONFIG__INIT;
	Runtime__V1__LinuxContainerResources res = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;
	Runtime__V1__LinuxContainerResources__UnifiedEntry e =
		RUNTIME__V1__LINUX_CONTAINER_RESOURCES__UNIFIED_ENTRY__INIT;
	Runtime__V1__LinuxContainerResources__UnifiedEntry *es[] = { &e };

	md.name = (char *)name;
	img.image = "registry.test/app:1";
	e.key = "memory.high";
	e.value = "50000000";
	res.unified = es;
	res.n_unified = 1;
	lin.resources = &res;
	cfg.metadata = &md;
	cfg.image = &img;
	cfg.linux = &lin;
	cfg.log_path = (char *)name;
	int ret = kfix_create_config(f, sb, &cfg, id, err);

	if (want == GRPC_STATUS_OK)
		assert_int_equal(ret, 0);
	else
		assert_int_equal(rpc_status_from_errno(-ret), want);
}

/* The unit of the container named in the cell's pod, or NULL. */
static const Kiyot__Cell__V1__Unit *unit_named(const Kiyot__Cell__V1__Pod *pod, const char *id)
{
	for (size_t i = 0; pod && i < pod->n_units; i++)
		if (strcmp(pod->units[i]->id, id) == 0)
			return pod->units[i];
	return NULL;
}

/* PodSandboxStatus' verbose info: the release of the agent of the sandbox's cell. */
static void assert_agent_version(struct kfix *f, const char *sb, const char *want)
{
	Runtime__V1__PodSandboxStatusRequest req = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
	Runtime__V1__PodSandboxStatusResponse *resp = NULL;
	struct err err = ERR_INIT;
	_cleanup_free_ char *frag = xasprintf("\"agentVersion\":\"%s\"", want);

	req.pod_sandbox_id = (char *)sb;
	req.verbose = 1;
	assert_int_equal(kfix_call(f, "PodSandboxStatus", &req.base,
				   &runtime__v1__pod_sandbox_status_response__descriptor, &resp,
				   &err),
			 0);
	assert_int_equal(resp->n_info, 1);
	if (!strstr(resp->info[0]->value, frag))
		fail_msg("want %s in %s", frag, resp->info[0]->value);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

/* cgroup v2 settings go to an agent that can apply them; an agent of the first release
 * (which would ignore the field) is refused the container and the update with
 * FAILED_PRECONDITION naming both releases, and its other containers still run; after a
 * restart kiyot asks an adopted cell's agent which release it is. */
static void test_cells__an_old_agent_is_refused_only_what_it_cannot_do(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__UpdateContainerResourcesRequest up =
		RUNTIME__V1__UPDATE_CONTAINER_RESOURCES_REQUEST__INIT;
	Runtime__V1__LinuxContainerResources res = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;
	Runtime__V1__LinuxContainerResources__UnifiedEntry e =
		RUNTIME__V1__LINUX_CONTAINER_RESOURCES__UNIFIED_ENTRY__INIT;
	Runtime__V1__LinuxContainerResources__UnifiedEntry *es[] = { &e };
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL, *cell = NULL, *plain = NULL, *tuned = NULL;
	_cleanup_free_ char *nsb = NULL, *ncell = NULL, *ntuned = NULL;
	Kiyot__Cell__V1__Pod *pod;
	const Kiyot__Cell__V1__Unit *u;
	unsigned hellos;

	fake_agent_set_version(f->fa, "0.1.0");
	assert_int_equal(kfix_run_pod(f, "old", "uid-old", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	create_unified(f, sb, "tuned", &tuned, GRPC_STATUS_FAILED_PRECONDITION, &err);
	assert_non_null(strstr(err.msg, "is release 0.1.0, which cannot apply "
					"linux.resources.unified"));
	assert_non_null(strstr(err.msg, "agents from 0.2.0 on can"));
	assert_int_equal(kfix_create(f, sb, "plain", "registry.test/app:1", &plain, &err), 0);
	assert_int_equal(kfix_start(f, plain, &err), 0);
	e.key = "pids.max";
	e.value = "64";
	res.unified = es;
	res.n_unified = 1;
	up.container_id = plain;
	up.linux = &res;
	err_clear(&err);
	assert_int_equal(
		rpc_status_from_errno(-kfix_call0(f, "UpdateContainerResources", &up.base, &err)),
		GRPC_STATUS_FAILED_PRECONDITION);
	assert_non_null(strstr(err.msg, "cannot apply linux.resources.unified"));
	pod = fake_agent_pod(f->fa, cell);
	u = unit_named(pod, plain);
	assert_non_null(u);
	assert_int_equal(u->n_unified, 0);
	kiyot__cell__v1__pod__free_unpacked(pod, NULL);
	/* after a restart the release is asked again, once */
	assert_int_equal(kfix_restart(f, &err), 0);
	hellos = fake_agent_calls(f->fa, FAKE_AGENT_HELLO);
	create_unified(f, sb, "tuned", &tuned, GRPC_STATUS_FAILED_PRECONDITION, &err);
	create_unified(f, sb, "tuned", &tuned, GRPC_STATUS_FAILED_PRECONDITION, &err);
	assert_int_equal(fake_agent_calls(f->fa, FAKE_AGENT_HELLO), hellos + 1);
	assert_agent_version(f, sb, "0.1.0"); /* what an operator sees: crictl inspectp */

	/* a cell of this release takes them, and the unit carries them */
	fake_agent_set_version(f->fa, NULL);
	err_clear(&err);
	if (kfix_run_pod(f, "new", "uid-new", 0, &nsb, &err) < 0)
		fail_msg("%s", err.msg);
	ncell = kfix_cell_of(f, nsb);
	create_unified(f, nsb, "tuned", &ntuned, GRPC_STATUS_OK, &err);
	pod = fake_agent_pod(f->fa, ncell);
	u = unit_named(pod, ntuned);
	assert_non_null(u);
	assert_int_equal(u->n_unified, 1);
	assert_string_equal(u->unified[0]->key, "memory.high");
	assert_string_equal(u->unified[0]->value, "50000000");
	kiyot__cell__v1__pod__free_unpacked(pod, NULL);
	assert_agent_version(f, nsb, KIYOT_VERSION);
}

/* Terminating a cell stops its Watch and the provider's cell; terminating it again is no
 * error. */
static void test_cells__terminate_is_idempotent(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *cell = NULL;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 5000));
	assert_int_equal(cells_terminate(f->k.cells, cell, &err), 0);
	assert_int_equal(fake_agent_watching(f->fa, cell), 0);
	assert_false(fake_provider_has(f->fp, cell));
	assert_int_equal(cells_terminate(f->k.cells, cell, &err), 0);
	assert_int_equal(fake_provider_terminated(f->fp, cell), 2);
	fake_provider_fail(f->fp, FAKE_PROVIDER_TERMINATE, EIO, 1);
	assert_int_equal(cells_terminate(f->k.cells, cell, &err), -EIO);
}

/* A cell the provider reports failed at launch gets its agent healed, and the pod runs. */
static void test_cells__a_cell_failed_at_launch_is_healed(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;

	fake_provider_launch_failed(f->fp, 1);
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_HEAL), 1);
	fake_provider_fail(f->fp, FAKE_PROVIDER_HEAL, EIO, 1);
	free(sb);
	sb = NULL;
	assert_int_equal(kfix_run_pod(f, "two", "uid-two", 0, &sb, &err), -EIO);
	assert_non_null(strstr(err.msg, "its agent cannot be restarted"));
}

/* Exec, Attach and PortForward streams reach the cell's agent and come back, each message
 * when asked for; a cancelled stream ends without a read; nothing comes after the end. */
static void test_cells__streams_reach_the_agent_and_back(void **state)
{
	struct kfix *f = *state;
	Kiyot__Cell__V1__ExecInput ex = KIYOT__CELL__V1__EXEC_INPUT__INIT;
	Kiyot__Cell__V1__PortForwardInput pf = KIYOT__CELL__V1__PORT_FORWARD_INPUT__INIT;
	Kiyot__Cell__V1__ExecOutput *eo;
	Kiyot__Cell__V1__PortForwardOutput *po;
	ProtobufCMessage *m = NULL;
	char *echo[] = { "echo", "hi" };
	char *cat[] = { "cat" };
	static struct sync_stream ss, ss2, ss3, ss4; /* their callbacks may still return */
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *ctr = NULL;
	_cleanup_free_ char *cell = NULL;

	kfix_pod_with_container(f, "web", &sb, &ctr);
	cell = kfix_cell_of(f, sb);
	ex.unit_id = ctr;
	ex.cmd = echo;
	ex.n_cmd = 2;
	assert_int_equal(sync_open(f, &ss, cell, "Exec", &ex.base,
				   &kiyot__cell__v1__exec_output__descriptor, &err),
			 0);
	assert_int_equal(streamrec_wait_sent(&ss.r, 1), 1); /* the first message */
	assert_int_equal(sync_next(&ss, &m), 1);
	eo = (Kiyot__Cell__V1__ExecOutput *)m;
	assert_memory_equal(eo->stdout.data, "hi\n", 3);
	assert_true(eo->exited);
	protobuf_c_message_free_unpacked(m, NULL);
	assert_int_equal(sync_next(&ss, &m), 0);
	sync_free(&ss);

	pf.port = 80;
	pf.data.data = (uint8_t *)"ping";
	pf.data.len = 4;
	assert_int_equal(sync_open(f, &ss2, cell, "PortForward", &pf.base,
				   &kiyot__cell__v1__port_forward_output__descriptor, &err),
			 0);
	assert_int_equal(sync_next(&ss2, &m), 1);
	po = (Kiyot__Cell__V1__PortForwardOutput *)m;
	assert_memory_equal(po->data.data, "ping", 4);
	protobuf_c_message_free_unpacked(m, NULL);
	assert_int_equal(streamrec_wait_sent(&ss2.r, 1), 1);
	pf.data.len = 0;
	pf.close = 1;
	assert_int_equal(cells_stream_send(ss2.s, &pf.base, &err), 0);
	assert_int_equal(streamrec_wait_sent(&ss2.r, 2), 2);
	cells_stream_close_send(ss2.s);
	assert_int_equal(sync_next(&ss2, &m), 1);
	assert_true(((Kiyot__Cell__V1__PortForwardOutput *)m)->closed);
	protobuf_c_message_free_unpacked(m, NULL);
	assert_int_equal(sync_next(&ss2, &m), 0);
	assert_int_equal(cells_stream_send(ss2.s, &pf.base, &err), -ECANCELED);
	sync_free(&ss2);

	ex.cmd = cat;
	ex.n_cmd = 1;
	assert_int_equal(sync_open(f, &ss3, cell, "Exec", &ex.base,
				   &kiyot__cell__v1__exec_output__descriptor, &err),
			 0);
	cells_stream_cancel(ss3.s); /* no read asked: the end comes all the same */
	assert_int_equal(streamrec_wait_end(&ss3.r), -ECANCELED);
	sync_free(&ss3);

	fake_agent_fail(f->fa, FAKE_AGENT_STREAM, ECONNREFUSED, 1);
	assert_int_equal(sync_open(f, &ss4, cell, "Exec", &ex.base,
				   &kiyot__cell__v1__exec_output__descriptor, &err),
			 -ECONNREFUSED);
	assert_non_null(strstr(err.msg, cell));
}

/* PullImage for a pod that runs pulls in the pod's cell (within 15 minutes) and remembers
 * the image by tag and digest; a pull the cell fails says why. */
static void test_cells__pull_for_a_running_pod_pulls_in_its_cell(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__PullImageRequest req = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
	Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
	Runtime__V1__PullImageResponse *resp = NULL;
	Runtime__V1__ImageStatusRequest sreq = RUNTIME__V1__IMAGE_STATUS_REQUEST__INIT;
	Runtime__V1__ImageStatusResponse *sresp = NULL;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	req.sandbox_config = kfix_pod_config(f, "web", "uid-web", 0);
	spec.image = "registry.test/app:1";
	req.image = &spec;
	assert_int_equal(kfix_call(f, "PullImage", &req.base,
				   &runtime__v1__pull_image_response__descriptor, &resp, &err),
			 0);
	assert_ptr_equal(strstr(resp->image_ref, "sha256:"), resp->image_ref);
	assert_int_equal(fake_agent_calls(f->fa, FAKE_AGENT_PULL), 1);
	assert_int_equal(fake_agent_last_timeout(f->fa, FAKE_AGENT_PULL), 15 * 60 * 1000);
	sreq.image = &spec;
	assert_int_equal(kfix_call(f, "ImageStatus", &sreq.base,
				   &runtime__v1__image_status_response__descriptor, &sresp, &err),
			 0);
	assert_non_null(sresp->image);
	assert_string_equal(sresp->image->id, resp->image_ref);
	assert_int_equal(sresp->image->n_repo_tags, 1);
	assert_string_equal(sresp->image->repo_tags[0], "registry.test/app:1");
	assert_int_equal(sresp->image->n_repo_digests, 1);
	assert_ptr_equal(strstr(sresp->image->repo_digests[0], "registry.test/app@sha256:"),
			 sresp->image->repo_digests[0]);
	protobuf_c_message_free_unpacked(&sresp->base, NULL);
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	fake_agent_refuse_image(f->fa, "registry.test/gone:1", "manifest unknown");
	spec.image = "registry.test/gone:1";
	assert_int_equal(kfix_call0(f, "PullImage", &req.base, &err), -EIO);
	assert_non_null(strstr(err.msg, "manifest unknown"));
	protobuf_c_message_free_unpacked(&req.sandbox_config->base, NULL);
}

/* What the cell was asked for its units survives a restart of kiyot: the first Apply after
 * it asks for the same (a running container was asked for CREATED before, so its cell no
 * longer restarted it by the pod's policy). */
static void test_cells__a_restarted_kiyot_asks_the_cell_for_the_same_units(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *run = NULL;
	_cleanup_free_ char *stopped = NULL;
	_cleanup_free_ char *fresh = NULL;
	_cleanup_free_ char *cell = NULL;

	kfix_pod_with_container(f, "web", &sb, &run);
	cell = kfix_cell_of(f, sb);
	assert_int_equal(kfix_create(f, sb, "stopped", "registry.test/app:1", &stopped, &err), 0);
	assert_int_equal(kfix_start(f, stopped, &err), 0);
	assert_int_equal(kfix_stop(f, stopped, &err), 0);
	assert_int_equal(fake_agent_unit_desired(f->fa, cell, run),
			 KIYOT__CELL__V1__UNIT_DESIRED__RUNNING);
	assert_int_equal(fake_agent_unit_desired(f->fa, cell, stopped),
			 KIYOT__CELL__V1__UNIT_DESIRED__STOPPED);

	assert_int_equal(kfix_restart(f, &err), 0);
	assert_int_equal(kfix_create(f, sb, "fresh", "registry.test/app:1", &fresh, &err), 0);
	assert_int_equal(fake_agent_unit_desired(f->fa, cell, run),
			 KIYOT__CELL__V1__UNIT_DESIRED__RUNNING);
	assert_int_equal(fake_agent_unit_desired(f->fa, cell, stopped),
			 KIYOT__CELL__V1__UNIT_DESIRED__STOPPED);
	assert_int_equal(fake_agent_unit_desired(f->fa, cell, fresh),
			 KIYOT__CELL__V1__UNIT_DESIRED__CREATED);
}

#define TEST(name) cmocka_unit_test_setup_teardown(name, kfix_setup, kfix_teardown)

static const struct CMUnitTest tests[] = {
	TEST(test_cells__a_launch_enrolls_the_agent_and_forgets_its_secret),
	TEST(test_cells__the_pods_calls_use_the_connection_hello_answered_on),
	TEST(test_cells__a_retried_launch_boots_with_the_stored_secret),
	TEST(test_cells__the_bootstrap_carries_prepulls_and_pull_bounds),
	TEST(test_cells__a_launch_cancelled_before_it_began_makes_no_cell),
	TEST(test_cells__a_launch_cancelled_as_its_cell_comes_up_leaves_no_cell),
	TEST(test_cells__a_launch_done_is_not_cancelled),
	TEST(test_cells__a_launch_whose_caller_left_keeps_its_cell),
	TEST(test_cells__calls_to_a_cell_that_is_not_running_are_enoent),
	TEST(test_cells__an_unreachable_agent_is_named),
	TEST(test_cells__a_watch_that_ends_reconnects_and_heals_the_agent),
	TEST(test_cells__a_reopened_watch_resumes_logs_where_they_stopped),
	TEST(test_cells__log_bytes_sent_again_are_written_once),
	TEST(test_cells__a_restarted_kiyot_resumes_its_cells),
	TEST(test_cells__a_restarted_kiyot_asks_the_cell_for_the_same_units),
	TEST(test_cells__a_lost_batch_of_log_positions_costs_no_line),
	TEST(test_cells__terminate_is_idempotent),
	TEST(test_cells__an_agent_older_than_kiyot_works_with_is_refused_at_launch),
	TEST(test_cells__an_old_agent_is_refused_only_what_it_cannot_do),
	TEST(test_cells__a_cell_failed_at_launch_is_healed),
	TEST(test_cells__streams_reach_the_agent_and_back),
	TEST(test_cells__pull_for_a_running_pod_pulls_in_its_cell),
};

int main(void)
{
	return cmocka_run_group_tests(tests, NULL, NULL);
}
