/*
 * The cell-agent's unary API (cell-agent/api.c, watch.c) as kiyot calls it: the agent in
 * process on a unix socket (agent_fixture.h), units run by the fake runtime. Each test asserts
 * what a caller sees: answers, statuses with their codes and messages, Watch events. Needs
 * root (units mount their root file system). This binary is also the shim and the runtime.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "agent_fixture.h"
#include "fake_runtime.h"
#include "fsutil.h"
#include "interrupt.h"
#include "pki.h"
#include "rpc.h"
#include "testutil.h"
#include "xalloc.h"

#define RUNNING KIYOT__CELL__V1__UNIT_STATE__UNIT_RUNNING
#define EXITED KIYOT__CELL__V1__UNIT_STATE__UNIT_EXITED

/* Applies pod, failing the test on an error; the answer (caller frees). */
static Kiyot__Cell__V1__ApplyResponse *apply_ok(struct afix *f, const Kiyot__Cell__V1__Pod *pod)
{
	Kiyot__Cell__V1__ApplyResponse *r = NULL;
	struct err err = ERR_INIT;

	assert_ok(afix_apply(f, pod, &r, &err));
	return r;
}

static void free_msg(void *m)
{
	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
}

/* Waits for unit id to reach state, failing the test when it does not. */
static void wait_state(struct afix *f, const char *id, Kiyot__Cell__V1__UnitState state, int code)
{
	Kiyot__Cell__V1__WatchEvent *ev = afix_wait_state(f, id, state, code);

	if (!ev)
		fail_msg("unit %s never reached state %d (exit code %d)", id, state, code);
	afix_event_free(ev);
}

/* Waits until unit id's log holds text (a unit runs before its output is in its log); the
 * log (caller frees), or fails the test. */
static char *wait_log(struct afix *f, const char *id, const char *text)
{
	for (int i = 0; i < 2000; i++) {
		char *log = afix_log(f, id);

		if (strstr(log, text))
			return log;
		free(log);
		usleep(10000);
	}
	fail_msg("unit %s never logged \"%s\"", id, text);
	return NULL;
}

/* Hello: who the cell is, and which start of its agent answers. */
static void test_agent_api__hello_names_the_cell_its_pod_and_incarnation(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__HelloRequest req = KIYOT__CELL__V1__HELLO_REQUEST__INIT;
	Kiyot__Cell__V1__HelloResponse *r = NULL;
	struct err err = ERR_INIT;

	assert_ok(afix_call(f, "Hello", &req.base, &r, &err));
	assert_string_equal(r->cell_id, AFIX_CELL_ID);
	assert_string_equal(r->pod_uid, AFIX_POD_UID);
	assert_int_equal(r->incarnation, 3);
	assert_true(r->boot_time_ns > 0);
	assert_true(r->agent_version[0]);
	free_msg(r);
}

/* An Apply without a pod is the caller's mistake, named. */
static void test_agent_api__apply_without_a_pod_is_invalid_argument(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__ApplyRequest req = KIYOT__CELL__V1__APPLY_REQUEST__INIT;
	Kiyot__Cell__V1__ApplyResponse *r = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(afix_call(f, "Apply", &req.base, &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "pod: required"));
}

/* A unit added by Apply is created from its image and runs: the answer carries its status
 * with the image's digest and id, a Watch sees it running and its output as CRI log lines. */
static void test_agent_api__apply_adds_a_unit_that_runs_and_logs(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
	Kiyot__Cell__V1__ApplyResponse *r;
	const Kiyot__Cell__V1__UnitStatus *st;
	_cleanup_free_ char *log = NULL, *calls = NULL;

	afix_pod_unit(pod, "c1", "echo hello from c1; exec sleep 1000");
	r = apply_ok(f, pod);
	st = afix_status_of(r, "c1");
	assert_non_null(st);
	assert_true(st->state == RUNNING || st->state == KIYOT__CELL__V1__UNIT_STATE__UNIT_CREATED);
	assert_string_equal(st->image_ref, AFIX_IMAGE_DIGEST);
	assert_string_equal(st->image_id, AFIX_IMAGE_ID);
	assert_string_equal(st->reason, "");
	free_msg(r);
	wait_state(f, "c1", RUNNING, -1);
	log = wait_log(f, "c1", " stdout F hello from c1\n");
	calls = afix_runtime_calls(f);
	assert_non_null(strstr(calls, "run --bundle "));
	afix_pod_free(pod);
}

/* Whether a new Watch's backlog (up to SYNCED) lists unit id. */
static bool watch_lists(struct afix *f, const char *id)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	Kiyot__Cell__V1__WatchEvent *ev;
	struct rpc_stream *w = NULL;
	struct err err = ERR_INIT;
	bool listed = false;

	assert_ok(afix_watch_open(f, &req, &w, &err));
	while ((ev = afix_watch_next(w, &err)) &&
	       ev->kind != KIYOT__CELL__V1__WATCH_EVENT__KIND__SYNCED) {
		listed |= ev->kind == KIYOT__CELL__V1__WATCH_EVENT__KIND__STATUS &&
			  strcmp(ev->unit_id, id) == 0;
		afix_event_free(ev);
	}
	assert_non_null(ev);
	afix_event_free(ev);
	rpc_stream_cancel(w);
	rpc_stream_free(w);
	return listed;
}

/* A unit left out of the next Apply is stopped (the runtime's TERM) and removed: the answer
 * no longer lists it, and soon no Watch does; a unit that stays keeps running. */
static void test_agent_api__apply_removes_a_unit_left_out(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
	Kiyot__Cell__V1__ApplyResponse *r;
	_cleanup_free_ char *calls = NULL;
	int tries = 0;

	afix_pod_unit(pod, "keep", "exec sleep 1000");
	afix_pod_unit(pod, "gone", "exec sleep 1000");
	free_msg(apply_ok(f, pod));
	wait_state(f, "gone", RUNNING, -1);
	assert_true(watch_lists(f, "gone"));
	afix_pod_drop(pod, "gone");
	r = apply_ok(f, pod);
	assert_null(afix_status_of(r, "gone"));
	assert_non_null(afix_status_of(r, "keep"));
	free_msg(r);
	while (watch_lists(f, "gone") && tries++ < 2000)
		usleep(10000);
	assert_false(watch_lists(f, "gone"));
	calls = afix_runtime_calls(f);
	assert_non_null(strstr(calls, "kill gone TERM"));
	assert_null(strstr(calls, "kill keep"));
	wait_state(f, "keep", RUNNING, -1);
	afix_pod_free(pod);
}

/* A unit whose spec changed is replaced: its new command runs. */
static void test_agent_api__apply_with_a_changed_unit_runs_the_new_spec(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
	Kiyot__Cell__V1__Unit *u = afix_pod_unit(pod, "c1", "exit 3");
	Kiyot__Cell__V1__WatchEvent *ev;

	free_msg(apply_ok(f, pod));
	ev = afix_wait_state(f, "c1", EXITED, 3);
	assert_non_null(ev);
	assert_string_equal(ev->status->reason, "Error");
	afix_event_free(ev);
	/* kiyot's StopContainer: the same unit, desired STOPPED */
	u->desired = KIYOT__CELL__V1__UNIT_DESIRED__STOPPED;
	free_msg(apply_ok(f, pod));
	wait_state(f, "c1", EXITED, 3);
	afix_pod_free(pod);
}

/* A unit that exits 0 under restart policy Never completes, reported with its reason. */
static void test_agent_api__a_unit_that_exits_is_reported_completed(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
	Kiyot__Cell__V1__WatchEvent *ev;

	afix_pod_unit(pod, "c1", "echo done");
	free_msg(apply_ok(f, pod));
	ev = afix_wait_state(f, "c1", EXITED, 0);
	assert_non_null(ev);
	assert_string_equal(ev->status->reason, "Completed");
	assert_true(ev->status->finished_at_ns >= ev->status->started_at_ns);
	afix_event_free(ev);
	afix_pod_free(pod);
}

/* A unit whose image cannot be had is not created: its status says CreateContainerError,
 * names the image, and carries the error's gRPC status. */
static void test_agent_api__a_unit_whose_image_cannot_be_pulled_names_it(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
	Kiyot__Cell__V1__Unit *u = afix_pod_unit(pod, "c1", "true");
	Kiyot__Cell__V1__ApplyResponse *r;
	const Kiyot__Cell__V1__UnitStatus *st;

	free(u->image);
	u->image = xstrdup("127.0.0.1:1/nothing-here:1");
	r = apply_ok(f, pod);
	st = afix_status_of(r, "c1");
	assert_non_null(st);
	assert_string_equal(st->reason, "CreateContainerError");
	assert_non_null(strstr(st->message, "127.0.0.1:1/nothing-here:1"));
	assert_int_not_equal(st->error_status, 0);
	free_msg(r);
	afix_pod_free(pod);
}

/* The runtime refusing to run a unit is the unit's failure to start, with the runtime's
 * words, not the agent's. */
static void test_agent_api__a_unit_the_runtime_refuses_fails_with_its_message(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
	Kiyot__Cell__V1__WatchEvent *ev;

	fake_runtime_fail(f->runtime_root, "run", "cannot allocate a pony");
	afix_pod_unit(pod, "c1", "true");
	free_msg(apply_ok(f, pod));
	ev = afix_wait_state(f, "c1", EXITED, -1);
	assert_non_null(ev);
	assert_int_not_equal(ev->status->exit_code, 0);
	assert_non_null(strstr(ev->status->message, "cannot allocate a pony"));
	afix_event_free(ev);
	afix_pod_free(pod);
}

/* The path the bundle of unit id gives the runtime for its namespace type ("" when the
 * unit has a namespace of its own). */
static char *bundle_ns(struct afix *f, const char *id, const char *type)
{
	_cleanup_free_ char *path = xasprintf("%s/units/%s/bundle/config.json", f->state, id);
	json_t *cfg = json_load_file(path, 0, NULL), *ns;
	size_t i;
	char *out = NULL;

	assert_non_null(cfg);
	json_array_foreach (json_object_get(json_object_get(cfg, "linux"), "namespaces"), i, ns)
		if (strcmp(json_string_value(json_object_get(ns, "type")), type) == 0)
			out = xstrdup(json_string_value(json_object_get(ns, "path"))
					      ? json_string_value(json_object_get(ns, "path"))
					      : "");
	json_decref(cfg);
	assert_non_null(out);
	return out;
}

/* Units that share the pod's PID and IPC namespaces are given the same ones, those of one
 * holder process that outlives them; a unit of its own PID namespace is not. */
static void test_agent_api__units_sharing_the_pods_namespaces_get_the_same(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
	_cleanup_free_ char *pid1 = NULL, *pid2 = NULL, *pid3 = NULL, *ipc1 = NULL, *ipc3 = NULL;
	long holder = 0;

	pod->ipc_namespace = KIYOT__CELL__V1__NAMESPACE_MODE__POD;
	afix_pod_unit(pod, "a", "exec sleep 1000")->pid_namespace =
		KIYOT__CELL__V1__NAMESPACE_MODE__POD;
	afix_pod_unit(pod, "b", "exec sleep 1000")->pid_namespace =
		KIYOT__CELL__V1__NAMESPACE_MODE__POD;
	afix_pod_unit(pod, "own", "exec sleep 1000");
	free_msg(apply_ok(f, pod));
	wait_state(f, "a", RUNNING, -1);
	wait_state(f, "b", RUNNING, -1);
	wait_state(f, "own", RUNNING, -1);
	pid1 = bundle_ns(f, "a", "pid");
	pid2 = bundle_ns(f, "b", "pid");
	pid3 = bundle_ns(f, "own", "pid");
	ipc1 = bundle_ns(f, "a", "ipc");
	ipc3 = bundle_ns(f, "own", "ipc");
	assert_int_equal(sscanf(pid1, "/proc/%ld/ns/pid", &holder), 1);
	assert_string_equal(pid1, pid2);
	assert_string_equal(pid3, "");
	/* the pod's IPC namespace is every unit's */
	assert_string_equal(ipc1, ipc3);
	assert_int_equal(kill((pid_t)holder, 0), 0);
	afix_pod_free(pod);
}

/* A unit mount of a host path that receives the host's mounts (HOST_TO_CONTAINER, as the
 * kubelet's volumes ask) is given to the runtime as the agent's clone of the host's mount, and
 * a mount the host makes under that path after the unit started reaches it. */
static void test_agent_api__a_host_mount_with_propagation_sees_later_host_mounts(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
	Kiyot__Cell__V1__Unit *u = afix_pod_unit(pod, "c1", "exec sleep 1000");
	Kiyot__Cell__V1__Mount *m = xmalloc(sizeof(*m));
	_cleanup_free_ char *host = xasprintf("%s/host", f->dir);
	_cleanup_free_ char *later = xasprintf("%s/later", host);
	_cleanup_free_ char *before = xasprintf("%s/before.txt", host);
	_cleanup_free_ char *staged = xasprintf("%s/units/c1/propagated/0", f->state);
	_cleanup_free_ char *seen_before = xasprintf("%s/before.txt", staged);
	_cleanup_free_ char *seen_later = xasprintf("%s/later/after.txt", staged);
	_cleanup_free_ char *after = xasprintf("%s/after.txt", later);
	_cleanup_free_ char *cfg = xasprintf("%s/units/c1/bundle/config.json", f->state);
	_cleanup_free_ char *text = NULL;
	struct err err = ERR_INIT;

	/* the host path is a shared mount, as the kubelet's root directory is */
	assert_ok(fs_mkdir_p(later, 0755, &err));
	assert_ok(fs_write_file(before, "1", 1, 0644, &err));
	assert_int_equal(mount(host, host, NULL, MS_BIND, NULL), 0);
	assert_int_equal(mount(NULL, host, NULL, MS_SHARED, NULL), 0);
	kiyot__cell__v1__mount__init(m);
	m->container_path = xstrdup("/data");
	m->host_path = xstrdup(host);
	m->propagation = KIYOT__CELL__V1__MOUNT__PROPAGATION__HOST_TO_CONTAINER;
	u->mounts = xcalloc(1, sizeof(*u->mounts));
	u->mounts[0] = m;
	u->n_mounts = 1;
	free_msg(apply_ok(f, pod));
	wait_state(f, "c1", RUNNING, -1);
	assert_int_equal(fs_read_file(cfg, 1 << 20, &text, NULL, &err), 0);
	assert_non_null(strstr(text, staged));
	assert_true(fs_exists(seen_before));
	assert_false(fs_exists(seen_later));
	assert_int_equal(mount("tmpfs", later, "tmpfs", 0, "size=64k"), 0);
	assert_ok(fs_write_file(after, "2", 1, 0644, &err));
	assert_true(fs_exists(seen_later));
	afix_pod_free(pod);
}

/* Under restart policy Always a unit that exits is started again, counted in its status. */
static void test_agent_api__a_unit_that_fails_is_restarted_under_always(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__ALWAYS);
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	Kiyot__Cell__V1__WatchEvent *ev;
	struct rpc_stream *w = NULL;
	struct err err = ERR_INIT;
	uint32_t restarts = 0;

	afix_pod_unit(pod, "c1", "echo try; exit 1");
	free_msg(apply_ok(f, pod));
	assert_ok(afix_watch_open(f, &req, &w, &err));
	while (restarts < 2 && (ev = afix_watch_next(w, &err))) {
		if (ev->kind == KIYOT__CELL__V1__WATCH_EVENT__KIND__STATUS &&
		    strcmp(ev->unit_id, "c1") == 0)
			restarts = ev->status->restart_count;
		afix_event_free(ev);
	}
	rpc_stream_cancel(w);
	rpc_stream_free(w);
	assert_true(restarts >= 2);
	afix_pod_free(pod);
}

/* PullImage: an image the cell holds answers its digest, id and size; the errors a caller
 * can make or meet are told apart by their codes. */
static void test_agent_api__pull_image_answers_or_says_what_is_wrong(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__PullImageRequest req = KIYOT__CELL__V1__PULL_IMAGE_REQUEST__INIT;
	Kiyot__Cell__V1__RegistryAuth auth = KIYOT__CELL__V1__REGISTRY_AUTH__INIT;
	Kiyot__Cell__V1__PullImageResponse *r = NULL;
	struct err err = ERR_INIT;

	req.image = AFIX_IMAGE;
	auth.username = "alice";
	auth.password = "s3cret";
	req.auth = &auth;
	assert_ok(afix_call(f, "PullImage", &req.base, &r, &err));
	assert_string_equal(r->repo_digest, AFIX_IMAGE_DIGEST);
	assert_string_equal(r->image_id, AFIX_IMAGE_ID);
	assert_int_equal(r->size, 4096);
	free_msg(r);

	req.auth = NULL;
	req.image = "";
	assert_int_equal(afix_call(f, "PullImage", &req.base, &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "image: required"));
	req.image = "Not A Reference";
	assert_int_equal(afix_call(f, "PullImage", &req.base, &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "Not A Reference"));
	req.image = "127.0.0.1:1/nothing-here:1";
	assert_true(afix_call(f, "PullImage", &req.base, &r, &err) < 0);
	assert_non_null(strstr(err.msg, "127.0.0.1:1/nothing-here:1"));
}

/* ExecSync: the command's output on both streams and its exit code. */
static void test_agent_api__exec_sync_answers_output_and_exit_code(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
	Kiyot__Cell__V1__ExecSyncRequest req = KIYOT__CELL__V1__EXEC_SYNC_REQUEST__INIT;
	Kiyot__Cell__V1__ExecSyncResponse *r = NULL;
	char *cmd[] = { "sh", "-c", "echo out; echo err >&2; exit 4" };
	char *missing[] = { "no-such-command-here" };
	struct err err = ERR_INIT;
	_cleanup_free_ char *calls = NULL;

	afix_pod_unit(pod, "c1", "exec sleep 1000");
	free_msg(apply_ok(f, pod));
	wait_state(f, "c1", RUNNING, -1);
	req.unit_id = "c1";
	req.cmd = cmd;
	req.n_cmd = 3;
	req.timeout_s = 10;
	assert_ok(afix_call(f, "ExecSync", &req.base, &r, &err));
	assert_int_equal(r->exit_code, 4);
	assert_int_equal(r->stdout.len, 4);
	assert_memory_equal(r->stdout.data, "out\n", 4);
	assert_int_equal(r->stderr.len, 4);
	assert_memory_equal(r->stderr.data, "err\n", 4);
	free_msg(r);
	calls = afix_runtime_calls(f);
	assert_non_null(strstr(calls, "exec --process "));

	/* a command the unit does not have: the shell's 127, as with crun */
	req.cmd = missing;
	req.n_cmd = 1;
	assert_ok(afix_call(f, "ExecSync", &req.base, &r, &err));
	assert_int_equal(r->exit_code, 127);
	free_msg(r);
	afix_pod_free(pod);
}

/* ExecSync's refusals: no command, a unit that does not exist, one that does not run, and a
 * command past its timeout, each with its own code. */
static void test_agent_api__exec_sync_errors_have_their_codes(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
	Kiyot__Cell__V1__ExecSyncRequest req = KIYOT__CELL__V1__EXEC_SYNC_REQUEST__INIT;
	Kiyot__Cell__V1__ExecSyncResponse *r = NULL;
	char *cmd[] = { "sleep", "30" };
	struct err err = ERR_INIT;

	afix_pod_unit(pod, "up", "exec sleep 1000");
	afix_pod_unit(pod, "done", "true");
	free_msg(apply_ok(f, pod));
	wait_state(f, "up", RUNNING, -1);
	wait_state(f, "done", EXITED, 0);

	req.unit_id = "up";
	assert_int_equal(afix_call(f, "ExecSync", &req.base, &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "cmd: required"));
	req.cmd = cmd;
	req.n_cmd = 2;
	req.unit_id = "nobody";
	assert_int_equal(afix_call(f, "ExecSync", &req.base, &r, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "nobody"));
	req.unit_id = "done";
	assert_int_equal(afix_call(f, "ExecSync", &req.base, &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not running"));
	req.unit_id = "up";
	req.timeout_s = 1;
	assert_int_equal(afix_call(f, "ExecSync", &req.base, &r, &err), -ETIMEDOUT);
	assert_non_null(strstr(err.msg, "timed out after 1 s"));
	afix_pod_free(pod);
}

/* Stats: the cell's usage, and the network of its default route when it has one. */
static void test_agent_api__stats_answers_the_cells_usage(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__StatsRequest req = KIYOT__CELL__V1__STATS_REQUEST__INIT;
	Kiyot__Cell__V1__StatsResponse *r = NULL;
	struct err err = ERR_INIT;

	assert_ok(afix_call(f, "Stats", &req.base, &r, &err));
	assert_non_null(r->cell);
	assert_string_equal(r->cell->unit_id, "");
	assert_true(r->cell->timestamp_ns > 0);
	assert_int_equal(r->n_units, 0);
	free_msg(r);
}

/* WriteVolume: the volume becomes what the request lists, counted; a bad request writes
 * nothing and says which entry is wrong. */
static void test_agent_api__write_volume_writes_removes_and_refuses(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__WriteVolumeRequest req = KIYOT__CELL__V1__WRITE_VOLUME_REQUEST__INIT;
	Kiyot__Cell__V1__WriteVolumeResponse *r = NULL;
	Kiyot__Cell__V1__FileEntry root = KIYOT__CELL__V1__FILE_ENTRY__INIT;
	Kiyot__Cell__V1__FileEntry file = KIYOT__CELL__V1__FILE_ENTRY__INIT;
	Kiyot__Cell__V1__FileEntry *entries[] = { &root, &file };
	_cleanup_free_ char *path = xasprintf("%s/volumes/config/app.conf", f->state);
	_cleanup_free_ char *text = NULL;
	struct err err = ERR_INIT;

	root.path = "";
	root.type = KIYOT__CELL__V1__FILE_ENTRY__TYPE__DIR;
	root.mode = 0755;
	root.uid = root.gid = -1;
	file.path = "app.conf";
	file.type = KIYOT__CELL__V1__FILE_ENTRY__TYPE__FILE;
	file.mode = 0644;
	file.uid = file.gid = -1;
	file.data.data = (uint8_t *)"level=debug\n";
	file.data.len = 12;
	req.volume = "config";
	req.entries = entries;
	req.n_entries = 2;
	assert_ok(afix_call(f, "WriteVolume", &req.base, &r, &err));
	assert_int_equal(r->written, 2);
	assert_int_equal(r->removed, 0);
	free_msg(r);
	assert_int_equal(fs_read_file(path, 64, &text, NULL, &err), 0);
	assert_string_equal(text, "level=debug\n");

	req.n_entries = 1;
	assert_ok(afix_call(f, "WriteVolume", &req.base, &r, &err));
	assert_int_equal(r->removed, 1);
	free_msg(r);
	assert_false(fs_exists(path));

	req.volume = "../escape";
	assert_int_equal(afix_call(f, "WriteVolume", &req.base, &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "escape"));
}

/* A Watch: the backlog (each unit's status, its log), SYNCED, then what happens as it
 * happens, and the cell's usage at the pace asked; a Watch resuming at an offset gets only the
 * log bytes past it. */
static void test_agent_api__watch_sends_backlog_synced_news_and_stats(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	Kiyot__Cell__V1__LogOffset off = KIYOT__CELL__V1__LOG_OFFSET__INIT;
	Kiyot__Cell__V1__LogOffset *offs[] = { &off };
	Kiyot__Cell__V1__WatchEvent *ev;
	struct rpc_stream *w = NULL;
	struct err err = ERR_INIT;
	_cleanup_free_ char *log = NULL;
	bool synced = false, stats = false, news = false, old_log = false;

	afix_pod_unit(pod, "c1", "echo one; exec sleep 1000");
	free_msg(apply_ok(f, pod));
	wait_state(f, "c1", RUNNING, -1);
	log = wait_log(f, "c1", "one\n");

	/* resumed past what it has: no old bytes; the usage; then a new unit's news */
	off.unit_id = "c1";
	off.offset = strlen(log);
	req.offsets = offs;
	req.n_offsets = 1;
	req.stats_interval_ms = 100;
	assert_ok(afix_watch_open(f, &req, &w, &err));
	while (!(synced && stats && news) && (ev = afix_watch_next(w, &err))) {
		switch (ev->kind) {
		case KIYOT__CELL__V1__WATCH_EVENT__KIND__SYNCED:
			synced = true;
			afix_pod_unit(pod, "c2", "echo two");
			free_msg(apply_ok(f, pod));
			break;
		case KIYOT__CELL__V1__WATCH_EVENT__KIND__STATS:
			stats = ev->stats && ev->stats->cell;
			break;
		case KIYOT__CELL__V1__WATCH_EVENT__KIND__LOG:
			old_log |= strcmp(ev->unit_id, "c1") == 0;
			news |= synced && strcmp(ev->unit_id, "c2") == 0 &&
				memmem(ev->data.data, ev->data.len, "two", 3);
			break;
		default:
			break;
		}
		afix_event_free(ev);
	}
	rpc_stream_cancel(w);
	rpc_stream_free(w);
	assert_true(synced);
	assert_true(stats);
	assert_true(news);
	assert_false(old_log);
	afix_pod_free(pod);
}

/* A stand-in for EC2's instance metadata service on 127.0.0.1: a token for PUT
 * /latest/api/token, a spot interruption notice, 404 for anything else; a connection each. */
struct imds {
	int lfd, port;
	pthread_t thread;
};

static void *imds_main(void *arg)
{
	struct imds *m = arg;
	int fd;

	while ((fd = accept(m->lfd, NULL, NULL)) >= 0) {
		static const char notice[] = "{\"action\": \"terminate\", \"time\": "
					     "\"2030-01-02T03:04:05Z\"}";
		char req[4096];
		size_t len = 0;
		ssize_t n;
		const char *body = NULL;
		char *head;

		while (len < sizeof(req) - 1 &&
		       (n = read(fd, req + len, sizeof(req) - 1 - len)) > 0) {
			len += (size_t)n;
			req[len] = '\0';
			if (strstr(req, "\r\n\r\n"))
				break;
		}
		req[len] = '\0';
		if (strncmp(req, "PUT /latest/api/token ", 22) == 0)
			body = "token-1";
		else if (strncmp(req, "GET " INTERRUPT_PATH_NOTICE " ",
				 5 + strlen(INTERRUPT_PATH_NOTICE)) == 0)
			body = notice;
		head = body ? xasprintf("HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: "
					"close\r\n\r\n%s",
					strlen(body), body)
			    : xstrdup("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: "
				      "close\r\n\r\n");
		if (write(fd, head, strlen(head)) < 0)
			perror("imds stand-in");
		free(head);
		close(fd);
	}
	return NULL;
}

/* On EC2 the agent polls the metadata service: a spot interruption notice goes to a Watch as
 * an INTERRUPTION event with EC2's action and time, and to a Watch that starts later too. */
static void test_agent_api__a_spot_notice_reaches_watches(void **state)
{
	struct afix *f = *state;
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t salen = sizeof(sa);
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	Kiyot__Cell__V1__WatchEvent *ev = NULL;
	struct interrupt_watch *iw;
	struct imds m;
	struct err err = ERR_INIT;
	_cleanup_free_ char *endpoint = NULL;

	m.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(m.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(m.lfd, 8), 0);
	assert_int_equal(getsockname(m.lfd, (struct sockaddr *)&sa, &salen), 0);
	m.port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&m.thread, NULL, imds_main, &m), 0);
	endpoint = xasprintf("http://127.0.0.1:%d", m.port);
	iw = interrupt_watch_start(f->a.hub, endpoint);
	assert_non_null(iw);
	for (int round = 0; round < 2; round++) {
		struct rpc_stream *w = NULL;

		assert_ok(afix_watch_open(f, &req, &w, &err));
		while ((ev = afix_watch_next(w, &err)) &&
		       ev->kind != KIYOT__CELL__V1__WATCH_EVENT__KIND__INTERRUPTION)
			afix_event_free(ev);
		rpc_stream_cancel(w);
		rpc_stream_free(w);
		assert_non_null(ev);
		assert_int_equal(ev->interruption->kind,
				 KIYOT__CELL__V1__INTERRUPTION__KIND__NOTICE);
		assert_string_equal(ev->interruption->action, "terminate");
		assert_int_equal(ev->interruption->time_unix_ns, 1893553445LL * 1000000000LL);
		afix_event_free(ev);
	}
	interrupt_watch_stop(iw);
	shutdown(m.lfd, SHUT_RDWR);
	close(m.lfd);
	pthread_join(m.thread, NULL);
}

/* Enroll: a new cell answers its request and the proof of its bootstrap's secret, takes the
 * certificate kiyot's CA made of it, and then refuses to enroll again. */
static void test_agent_api__enroll_takes_one_certificate_then_refuses(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__EnrollRequest req = KIYOT__CELL__V1__ENROLL_REQUEST__INIT;
	Kiyot__Cell__V1__EnrollResponse *r = NULL;
	_cleanup_free_ char *cert = NULL;
	struct err err = ERR_INIT;

	assert_ok(afix_call(f, "Enroll", &req.base, &r, &err));
	assert_string_equal(r->cell_id, AFIX_CELL_ID);
	assert_int_equal(r->enrolled, 0);
	assert_ok(pki_enroll_check(AFIX_SECRET, AFIX_CELL_ID, r->csr, r->proof, &err));
	assert_ok(pki_sign(f->ca, f->ca_key, r->csr, AFIX_CELL_ID, PKI_SERVER, 1, &cert, &err));
	free_msg(r);

	req.certificate = "not a certificate";
	assert_true(afix_call(f, "Enroll", &req.base, &r, &err) < 0);
	assert_int_equal(f->enrolled, 0);
	req.certificate = cert;
	assert_ok(afix_call(f, "Enroll", &req.base, &r, &err));
	assert_int_equal(r->enrolled, 1);
	assert_int_equal(f->enrolled, 1);
	free_msg(r);
	req.certificate = "";
	assert_int_equal(afix_call(f, "Enroll", &req.base, &r, &err), -EBUSY);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, afix_setup, afix_teardown)
		T(test_agent_api__hello_names_the_cell_its_pod_and_incarnation),
		T(test_agent_api__apply_without_a_pod_is_invalid_argument),
		T(test_agent_api__apply_adds_a_unit_that_runs_and_logs),
		T(test_agent_api__apply_removes_a_unit_left_out),
		T(test_agent_api__apply_with_a_changed_unit_runs_the_new_spec),
		T(test_agent_api__a_unit_that_exits_is_reported_completed),
		T(test_agent_api__a_unit_whose_image_cannot_be_pulled_names_it),
		T(test_agent_api__a_unit_the_runtime_refuses_fails_with_its_message),
		T(test_agent_api__units_sharing_the_pods_namespaces_get_the_same),
		T(test_agent_api__a_unit_that_fails_is_restarted_under_always),
		T(test_agent_api__a_host_mount_with_propagation_sees_later_host_mounts),
		T(test_agent_api__pull_image_answers_or_says_what_is_wrong),
		T(test_agent_api__exec_sync_answers_output_and_exit_code),
		T(test_agent_api__exec_sync_errors_have_their_codes),
		T(test_agent_api__stats_answers_the_cells_usage),
		T(test_agent_api__write_volume_writes_removes_and_refuses),
		T(test_agent_api__watch_sends_backlog_synced_news_and_stats),
		T(test_agent_api__enroll_takes_one_certificate_then_refuses),
		T(test_agent_api__a_spot_notice_reaches_watches),
#undef T
	};
	int ret = afix_main(argc, argv);

	if (ret >= 0)
		return ret;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
