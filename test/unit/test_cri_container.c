/*
 * Unit tests for the container half of CRI (kiyot/cri/cri_container.c, the desired pod of
 * cri_pod.c, the unit statuses and logs of cri/cell_reports.c) in a whole kiyot with the fake
 * provider and agent (kiyot_fixture.h): containers are units of their pod's cell, and every
 * answer the kubelet gets reflects what the cell did.
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

#include "fsutil.h"
#include "kiyot_fixture.h"
#include "xalloc.h"

#define CREATED RUNTIME__V1__CONTAINER_STATE__CONTAINER_CREATED
#define RUNNING RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING
#define EXITED RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED
#define UNIT_CREATED KIYOT__CELL__V1__UNIT_STATE__UNIT_CREATED
#define UNIT_RUNNING KIYOT__CELL__V1__UNIT_STATE__UNIT_RUNNING
#define UNIT_EXITED KIYOT__CELL__V1__UNIT_STATE__UNIT_EXITED

static Runtime__V1__ContainerStatus *container_status(struct kfix *f, const char *id,
						      Runtime__V1__ContainerStatusResponse **resp)
{
	Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
	struct err err = ERR_INIT;

	req.container_id = (char *)id;
	if (kfix_call(f, "ContainerStatus", &req.base,
		      &runtime__v1__container_status_response__descriptor, resp, &err) < 0)
		fail_msg("ContainerStatus %s: %s", id, err.msg);
	return (*resp)->status;
}

/* Create, start, stop and remove: each changes the unit in the cell and the state the
 * kubelet reads back. */
static void test_cri_container__lifecycle_follows_the_unit_in_the_cell(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ContainerStatusResponse *resp = NULL;
	Runtime__V1__ContainerStatus *st;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *cell = NULL;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	assert_int_equal(kfix_create(f, sb, "app", "registry.test/app:1", &id, &err), 0);
	assert_int_equal(strlen(id), 64);
	assert_int_equal(fake_agent_unit_state(f->fa, cell, id), UNIT_CREATED);
	assert_int_equal(kfix_container_state(f, id, &err), CREATED);

	assert_int_equal(kfix_start(f, id, &err), 0);
	assert_int_equal(fake_agent_unit_state(f->fa, cell, id), UNIT_RUNNING);
	st = container_status(f, id, &resp);
	assert_int_equal(st->state, RUNNING);
	assert_true(st->started_at > 0);
	assert_string_equal(st->metadata->name, "app");
	assert_string_equal(st->image->image, "registry.test/app:1");
	assert_string_equal(st->image_ref, "registry.test/app:1");
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	assert_int_equal(kfix_stop(f, id, &err), 0);
	assert_int_equal(fake_agent_unit_state(f->fa, cell, id), UNIT_EXITED);
	st = container_status(f, id, &resp);
	assert_int_equal(st->state, EXITED);
	assert_int_equal(st->exit_code, 0);
	assert_string_equal(st->reason, "Completed");
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	assert_int_equal(kfix_remove(f, id, &err), 0);
	assert_int_equal(fake_agent_n_units(f->fa, cell), 0);
	assert_int_equal(kfix_container_state(f, id, &err), -1);
	assert_int_equal(err.code, ENOENT);
}

/* A container goes in a ready sandbox kiyot knows, once per name and attempt. */
static void test_cri_container__create_needs_a_ready_sandbox_and_a_new_name(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *dup = NULL;
	char *none = NULL;

	assert_int_equal(kfix_create(f, "feedface", "app", "registry.test/app:1", &none, &err),
			 -ENOENT);
	assert_non_null(strstr(err.msg, "pod sandbox feedface not found"));
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	assert_int_equal(kfix_create(f, sb, "app", "registry.test/app:1", &id, &err), 0);
	assert_int_equal(kfix_create(f, sb, "app", "registry.test/app:1", &dup, &err), -EEXIST);
	assert_non_null(strstr(err.msg, id));
	assert_int_equal(kfix_create(f, sb, "", "registry.test/app:1", &dup, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "config.metadata.name"));
	assert_int_equal(kfix_create(f, sb, "other", "", &dup, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "config.image.image"));
	assert_int_equal(kfix_stop_pod(f, sb, &err), 0);
	assert_int_equal(kfix_create(f, sb, "late", "registry.test/app:1", &none, &err), -EBUSY);
	assert_non_null(strstr(err.msg, "not ready"));
	assert_null(none);
}

/* A unit the cell cannot create (its image does not pull) fails CreateContainer with the
 * cell's message, and leaves no container behind, in kiyot or in the cell. */
static void test_cri_container__a_unit_the_cell_cannot_create_leaves_nothing(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ListContainersRequest req = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
	Runtime__V1__ListContainersResponse *resp = NULL;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *cell = NULL;
	char *id = NULL;

	fake_agent_refuse_image(f->fa, "registry.test/missing:1", "manifest unknown");
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	assert_int_equal(kfix_create(f, sb, "app", "registry.test/missing:1", &id, &err), -EIO);
	assert_non_null(strstr(err.msg, "manifest unknown"));
	assert_non_null(strstr(err.msg, "create container app"));
	assert_null(id);
	assert_int_equal(fake_agent_n_units(f->fa, cell), 0);
	assert_int_equal(kfix_call(f, "ListContainers", &req.base,
				   &runtime__v1__list_containers_response__descriptor, &resp, &err),
			 0);
	assert_int_equal(resp->n_containers, 0);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

/* Calls on a container kiyot does not know: NOT_FOUND, except removal (idempotent). */
static void test_cri_container__unknown_ids_are_not_found(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ExecSyncRequest ex = RUNTIME__V1__EXEC_SYNC_REQUEST__INIT;
	Runtime__V1__ReopenContainerLogRequest reopen =
		RUNTIME__V1__REOPEN_CONTAINER_LOG_REQUEST__INIT;
	char *cmd[] = { "echo", "hi" };
	struct err err = ERR_INIT;

	assert_int_equal(kfix_start(f, "abc123", &err), -ENOENT);
	assert_non_null(strstr(err.msg, "container abc123 not found"));
	assert_int_equal(kfix_stop(f, "abc123", &err), -ENOENT);
	assert_int_equal(kfix_container_state(f, "abc123", &err), -1);
	assert_int_equal(err.code, ENOENT);
	assert_int_equal(kfix_remove(f, "abc123", &err), 0);
	ex.container_id = "abc123";
	ex.cmd = cmd;
	ex.n_cmd = 2;
	assert_int_equal(kfix_call0(f, "ExecSync", &ex.base, &err), -ENOENT);
	reopen.container_id = "abc123";
	assert_int_equal(kfix_call0(f, "ReopenContainerLog", &reopen.base, &err), -ENOENT);
}

/* Start twice: the second is FAILED_PRECONDITION; stop and remove twice are no errors. */
static void test_cri_container__stop_and_remove_are_idempotent(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;
	unsigned applies;

	kfix_pod_with_container(f, "web", &sb, &id);
	assert_int_equal(kfix_start(f, id, &err), -EBUSY);
	assert_non_null(strstr(err.msg, "not in the created state"));
	assert_int_equal(kfix_stop(f, id, &err), 0);
	applies = fake_agent_calls(f->fa, FAKE_AGENT_APPLY);
	assert_int_equal(kfix_stop(f, id, &err), 0);
	/* already stopped: the cell is not asked again */
	assert_int_equal(fake_agent_calls(f->fa, FAKE_AGENT_APPLY), applies);
	assert_int_equal(kfix_remove(f, id, &err), 0);
	assert_int_equal(kfix_remove(f, id, &err), 0);
}

/* Containers of a pod whose cell is gone can still be stopped and removed. */
static void test_cri_container__stop_and_remove_work_without_the_cell(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *cell = NULL;

	kfix_pod_with_container(f, "web", &sb, &id);
	cell = kfix_cell_of(f, sb);
	/* kiyot stops the pod's cell; the container record stays exited */
	assert_int_equal(kfix_stop_pod(f, sb, &err), 0);
	assert_int_equal(kfix_stop(f, id, &err), 0);
	assert_int_equal(kfix_remove(f, id, &err), 0);
	assert_int_equal(kfix_container_state(f, id, &err), -1);
}

/* A unit that exits in the cell is reported exited, with its exit code and reason, through
 * the cell's Watch stream. */
static void test_cri_container__a_unit_exiting_in_the_cell_is_reported(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ContainerStatusResponse *resp = NULL;
	Runtime__V1__ContainerStatus *st;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *cell = NULL;

	kfix_pod_with_container(f, "web", &sb, &id);
	cell = kfix_cell_of(f, sb);
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 5000));
	assert_int_equal(fake_agent_unit_exit(f->fa, cell, id, 3, "Error"), 0);
	assert_true(KFIX_WAIT(kfix_container_state(f, id, &err) == EXITED, 5000));
	st = container_status(f, id, &resp);
	assert_int_equal(st->exit_code, 3);
	assert_string_equal(st->reason, "Error");
	assert_true(st->finished_at >= st->started_at);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

static char *log_file(struct kfix *f, const char *uid, const char *name)
{
	return xasprintf("%s/pods/%s/%s.log", f->dir, uid, name);
}

/* A unit's log lines reach the file the kubelet reads (log_directory/log_path), which exists
 * from CreateContainer on, empty. */
static void test_cri_container__logs_reach_the_kubelets_file(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *cell = NULL;
	_cleanup_free_ char *path = log_file(f, "uid-web", "web");
	const char *line1 = "2026-01-01T00:00:00Z stdout F hello\n";
	const char *line2 = "2026-01-01T00:00:01Z stderr F world\n";
	_cleanup_free_ char *both = xasprintf("%s%s", line1, line2);

	kfix_pod_with_container(f, "web", &sb, &id);
	cell = kfix_cell_of(f, sb);
	assert_true(kfix_file_is(path, ""));
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 5000));
	assert_int_equal(fake_agent_log(f->fa, cell, id, line1), 0);
	assert_int_equal(fake_agent_log(f->fa, cell, id, line2), 0);
	assert_true(KFIX_WAIT(kfix_file_is(path, both), 5000));
	(void)err;
}

static Runtime__V1__ListContainersResponse *list(struct kfix *f, Runtime__V1__ContainerFilter *flt)
{
	Runtime__V1__ListContainersRequest req = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
	Runtime__V1__ListContainersResponse *resp = NULL;
	struct err err = ERR_INIT;

	req.filter = flt;
	if (kfix_call(f, "ListContainers", &req.base,
		      &runtime__v1__list_containers_response__descriptor, &resp, &err) < 0)
		fail_msg("ListContainers: %s", err.msg);
	return resp;
}

/* ListContainers' filters: id prefix, state, sandbox; no filter lists all. */
static void test_cri_container__list_filters_by_id_state_and_sandbox(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ContainerFilter flt = RUNTIME__V1__CONTAINER_FILTER__INIT;
	Runtime__V1__ContainerStateValue sv = RUNTIME__V1__CONTAINER_STATE_VALUE__INIT;
	Runtime__V1__ListContainersResponse *resp;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb1 = NULL;
	_cleanup_free_ char *c1 = NULL;
	_cleanup_free_ char *sb2 = NULL;
	_cleanup_free_ char *c2 = NULL;
	_cleanup_free_ char *prefix = NULL;

	kfix_pod_with_container(f, "one", &sb1, &c1);
	assert_int_equal(kfix_run_pod(f, "two", "uid-two", 0, &sb2, &err), 0);
	assert_int_equal(kfix_create(f, sb2, "two", "registry.test/app:1", &c2, &err), 0);

	resp = list(f, NULL);
	assert_int_equal(resp->n_containers, 2);
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	prefix = xstrndup(c2, 10);
	flt.id = prefix;
	resp = list(f, &flt);
	assert_int_equal(resp->n_containers, 1);
	assert_string_equal(resp->containers[0]->id, c2);
	assert_string_equal(resp->containers[0]->pod_sandbox_id, sb2);
	assert_string_equal(resp->containers[0]->metadata->name, "two");
	assert_int_equal(resp->containers[0]->state, CREATED);
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	flt.id = "";
	sv.state = RUNNING;
	flt.state = &sv;
	resp = list(f, &flt);
	assert_int_equal(resp->n_containers, 1);
	assert_string_equal(resp->containers[0]->id, c1);
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	flt.state = NULL;
	flt.pod_sandbox_id = sb2;
	resp = list(f, &flt);
	assert_int_equal(resp->n_containers, 1);
	assert_string_equal(resp->containers[0]->id, c2);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

static Runtime__V1__ExecSyncResponse *exec_sync(struct kfix *f, const char *id, char **cmd,
						size_t n, int64_t timeout, struct err *err)
{
	Runtime__V1__ExecSyncRequest req = RUNTIME__V1__EXEC_SYNC_REQUEST__INIT;
	Runtime__V1__ExecSyncResponse *resp = NULL;

	req.container_id = (char *)id;
	req.cmd = cmd;
	req.n_cmd = n;
	req.timeout = timeout;
	if (kfix_call(f, "ExecSync", &req.base, &runtime__v1__exec_sync_response__descriptor, &resp,
		      err) < 0)
		return NULL;
	return resp;
}

/* ExecSync runs the command in the container's unit and answers its output and exit code;
 * the call to the agent outlasts the command's own timeout by 10 s. */
static void test_cri_container__exec_sync_answers_output_and_exit_code(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ExecSyncResponse *r;
	char *echo[] = { "echo", "hello", "there" };
	char *fail[] = { "exit", "3" };
	char *nope[] = { "nosuch" };
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;

	kfix_pod_with_container(f, "web", &sb, &id);
	r = exec_sync(f, id, echo, 3, 5, &err);
	assert_non_null(r);
	assert_int_equal(r->exit_code, 0);
	assert_int_equal(r->stdout.len, strlen("hello there\n"));
	assert_memory_equal(r->stdout.data, "hello there\n", r->stdout.len);
	assert_int_equal(r->stderr.len, 0);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	assert_int_equal(fake_agent_last_timeout(f->fa, FAKE_AGENT_EXEC), 5000 + 10000);

	r = exec_sync(f, id, fail, 2, 0, &err);
	assert_non_null(r);
	assert_int_equal(r->exit_code, 3);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	/* no timeout: the agent's day at most */
	assert_int_equal(fake_agent_last_timeout(f->fa, FAKE_AGENT_EXEC),
			 24LL * 3600 * 1000 + 10000);

	r = exec_sync(f, id, nope, 1, 1, &err);
	assert_non_null(r);
	assert_int_equal(r->exit_code, 127);
	assert_non_null(memmem(r->stderr.data, r->stderr.len, "not found", 9));
	protobuf_c_message_free_unpacked(&r->base, NULL);

	assert_null(exec_sync(f, id, echo, 0, 1, &err));
	assert_int_equal(err.code, EINVAL);
	assert_non_null(strstr(err.msg, "cmd"));
}

/* ExecSync needs a running container, and says when its cell's agent is unreachable or the
 * agent fails the call. */
static void test_cri_container__exec_sync_errors_say_what_failed(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ExecSyncResponse *r;
	char *echo[] = { "echo", "x" };
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *created = NULL;
	_cleanup_free_ char *cell = NULL;

	kfix_pod_with_container(f, "web", &sb, &id);
	cell = kfix_cell_of(f, sb);
	assert_int_equal(kfix_create(f, sb, "idle", "registry.test/app:1", &created, &err), 0);
	assert_null(exec_sync(f, created, echo, 2, 1, &err));
	assert_int_equal(err.code, EBUSY);
	assert_non_null(strstr(err.msg, "is not running"));

	fake_agent_fail(f->fa, FAKE_AGENT_EXEC, ETIMEDOUT, 1);
	assert_null(exec_sync(f, id, echo, 2, 1, &err));
	assert_int_equal(err.code, ETIMEDOUT);
	assert_non_null(strstr(err.msg, "exec in container"));

	fake_agent_set_serving(f->fa, cell, 0);
	assert_null(exec_sync(f, id, echo, 2, 1, &err));
	assert_int_equal(err.code, ECONNREFUSED);
	assert_non_null(strstr(err.msg, "agent unreachable"));
	fake_agent_set_serving(f->fa, cell, 1);
	r = exec_sync(f, id, echo, 2, 1, &err);
	assert_non_null(r);
	protobuf_c_message_free_unpacked(&r->base, NULL);
}

/* ContainerStatus carries what the container was created with: labels, annotations,
 * mounts, and the log path the kubelet reads. */
static void test_cri_container__status_carries_the_config(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
	Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
	Runtime__V1__ContainerConfig__LabelsEntry label =
		RUNTIME__V1__CONTAINER_CONFIG__LABELS_ENTRY__INIT;
	Runtime__V1__ContainerConfig__LabelsEntry *labels[] = { &label };
	Runtime__V1__Mount mount = RUNTIME__V1__MOUNT__INIT;
	Runtime__V1__Mount *mounts[] = { &mount };
	Runtime__V1__ContainerStatusResponse *resp = NULL;
	Runtime__V1__ContainerStatus *st;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *want_log = NULL;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	md.name = "app";
	md.attempt = 2;
	img.image = "registry.test/app:1";
	label.key = "tier";
	label.value = "front";
	mount.container_path = "/data";
	mount.host_path = "/var/lib/kubelet/pods/uid-web/volumes/kubernetes.io~empty-dir/data";
	mount.readonly = 1;
	cfg.metadata = &md;
	cfg.image = &img;
	cfg.labels = labels;
	cfg.n_labels = 1;
	cfg.mounts = mounts;
	cfg.n_mounts = 1;
	cfg.log_path = "app/2.log";
	assert_int_equal(kfix_create_config(f, sb, &cfg, &id, &err), 0);
	st = container_status(f, id, &resp);
	assert_int_equal(st->metadata->attempt, 2);
	assert_int_equal(st->n_labels, 1);
	assert_string_equal(st->labels[0]->key, "tier");
	assert_int_equal(st->n_mounts, 1);
	assert_string_equal(st->mounts[0]->container_path, "/data");
	assert_true(st->mounts[0]->readonly);
	want_log = xasprintf("%s/pods/uid-web/app/2.log", f->dir);
	assert_string_equal(st->log_path, want_log);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

/* New limits that fit the pod's cell are kept and applied; larger ones are refused, saying a
 * larger pod needs a new cell. */
static void test_cri_container__update_resources_must_fit_the_cell(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__UpdateContainerResourcesRequest req =
		RUNTIME__V1__UPDATE_CONTAINER_RESOURCES_REQUEST__INIT;
	Runtime__V1__LinuxContainerResources res = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;
	unsigned applies;

	kfix_pod_with_container(f, "web", &sb, &id);
	req.container_id = id;
	assert_int_equal(kfix_call0(f, "UpdateContainerResources", &req.base, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "linux: required"));
	req.linux = &res;
	res.cpu_period = 100000;
	res.cpu_quota = 10000;
	res.memory_limit_in_bytes = 32 << 20;
	applies = fake_agent_calls(f->fa, FAKE_AGENT_APPLY);
	assert_int_equal(kfix_call0(f, "UpdateContainerResources", &req.base, &err), 0);
	assert_int_equal(fake_agent_calls(f->fa, FAKE_AGENT_APPLY), applies + 1);
	res.cpu_quota = 100000 * 1024;
	assert_int_equal(kfix_call0(f, "UpdateContainerResources", &req.base, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "do not fit the pod's cell"));
	req.container_id = "nosuch";
	assert_int_equal(kfix_call0(f, "UpdateContainerResources", &req.base, &err), -ENOENT);
}

/* ReopenContainerLog makes the log file anew for a running container (after the kubelet's
 * rotation renamed it) and is refused for one that is not running. */
static void test_cri_container__reopen_log_recreates_the_file(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ReopenContainerLogRequest req =
		RUNTIME__V1__REOPEN_CONTAINER_LOG_REQUEST__INIT;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *path = log_file(f, "uid-web", "web");
	_cleanup_free_ char *rotated = xasprintf("%s.1", path);

	kfix_pod_with_container(f, "web", &sb, &id);
	assert_int_equal(rename(path, rotated), 0);
	req.container_id = id;
	assert_int_equal(kfix_call0(f, "ReopenContainerLog", &req.base, &err), 0);
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(kfix_stop(f, id, &err), 0);
	assert_int_equal(kfix_call0(f, "ReopenContainerLog", &req.base, &err), -EBUSY);
}

/* Exec and Attach answer URLs of the streaming server for a running container, after the
 * checks the kubelet's streaming server makes. */
static void test_cri_container__exec_and_attach_answer_urls(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ExecRequest ex = RUNTIME__V1__EXEC_REQUEST__INIT;
	Runtime__V1__AttachRequest at = RUNTIME__V1__ATTACH_REQUEST__INIT;
	Runtime__V1__ExecResponse *er = NULL;
	Runtime__V1__AttachResponse *ar = NULL;
	char *cmd[] = { "sh" };
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;

	kfix_pod_with_container(f, "web", &sb, &id);
	ex.container_id = id;
	ex.cmd = cmd;
	ex.n_cmd = 1;
	ex.stdout = 1;
	assert_int_equal(kfix_call(f, "Exec", &ex.base, &runtime__v1__exec_response__descriptor,
				   &er, &err),
			 0);
	assert_ptr_equal(strstr(er->url, "http://127.0.0.1:"), er->url);
	protobuf_c_message_free_unpacked(&er->base, NULL);
	ex.tty = 1;
	ex.stderr = 1;
	assert_int_equal(kfix_call0(f, "Exec", &ex.base, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "tty and stderr"));

	at.container_id = id;
	at.stdout = 1;
	assert_int_equal(kfix_call(f, "Attach", &at.base, &runtime__v1__attach_response__descriptor,
				   &ar, &err),
			 0);
	assert_ptr_equal(strstr(ar->url, "http://127.0.0.1:"), ar->url);
	protobuf_c_message_free_unpacked(&ar->base, NULL);
	at.stdin = 1;
	assert_int_equal(kfix_call0(f, "Attach", &at.base, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not created with stdin"));

	assert_int_equal(kfix_stop(f, id, &err), 0);
	at.stdin = 0;
	assert_int_equal(kfix_call0(f, "Attach", &at.base, &err), -EBUSY);
	ex.tty = 0;
	ex.stderr = 0;
	ex.container_id = "nosuch";
	assert_int_equal(kfix_call0(f, "Exec", &ex.base, &err), -ENOENT);
}

/* A file of the node under the state directory, made with its directory. */
static char *node_file(struct kfix *f, const char *rel, const char *text)
{
	char *path = xasprintf("%s/%s", f->dir, rel);
	_cleanup_free_ char *dir = xstrdup(path);
	struct err err = ERR_INIT;

	*strrchr(dir, '/') = '\0';
	if (fs_mkdir_p(dir, 0755, &err) < 0 ||
	    fs_write_file(path, text, strlen(text), 0644, &err) < 0)
		fail_msg("%s", err.msg);
	return path;
}

/* A sandbox of pod "dns" with DNS settings and the restart policy Always. */
static char *run_dns_pod(struct kfix *f)
{
	Runtime__V1__RunPodSandboxRequest req = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
	Runtime__V1__PodSandboxConfig cfg = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
	Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
	Runtime__V1__DNSConfig dns = RUNTIME__V1__DNSCONFIG__INIT;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry policy =
		RUNTIME__V1__POD_SANDBOX_CONFIG__ANNOTATIONS_ENTRY__INIT;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry *anns[] = { &policy };
	Runtime__V1__RunPodSandboxResponse *resp = NULL;
	char *servers[] = { "10.96.0.10" };
	char *searches[] = { "default.svc.cluster.local" };
	struct err err = ERR_INIT;
	char *id;

	md.name = "dns";
	md.uid = "uid-dns";
	md.namespace_ = "default";
	cfg.metadata = &md;
	dns.servers = servers;
	dns.n_servers = 1;
	dns.searches = searches;
	dns.n_searches = 1;
	cfg.dns_config = &dns;
	policy.key = "pod.elotl.co/restart-policy";
	policy.value = "Always";
	cfg.annotations = anns;
	cfg.n_annotations = 1;
	req.config = &cfg;
	if (kfix_call(f, "RunPodSandbox", &req.base,
		      &runtime__v1__run_pod_sandbox_response__descriptor, &resp, &err) < 0)
		fail_msg("RunPodSandbox: %s", err.msg);
	id = xstrdup(resp->pod_sandbox_id);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return id;
}

static int create_with_mounts(struct kfix *f, const char *sb, const char *name,
			      Runtime__V1__Mount **mounts, size_t n, char **id, struct err *err)
{
	Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
	Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;

	md.name = (char *)name;
	img.image = "registry.test/app:1";
	cfg.metadata = &md;
	cfg.image = &img;
	cfg.mounts = mounts;
	cfg.n_mounts = n;
	return kfix_create_config(f, sb, &cfg, id, err);
}

static const Kiyot__Cell__V1__Unit *unit_named(const Kiyot__Cell__V1__Pod *p, const char *name)
{
	for (size_t i = 0; i < p->n_units; i++)
		if (strcmp(p->units[i]->name, name) == 0)
			return p->units[i];
	fail_msg("the pod has no unit %s", name);
	return NULL;
}

static const Kiyot__Cell__V1__Volume *volume_named(const Kiyot__Cell__V1__Pod *p, const char *name)
{
	for (size_t i = 0; i < p->n_volumes; i++)
		if (strcmp(p->volumes[i]->name, name) == 0)
			return p->volumes[i];
	fail_msg("the pod has no volume %s", name);
	return NULL;
}

/*
 * The desired pod a cell gets: the pod's DNS settings and restart policy; each mount as a
 * volume of the cell (an emptyDir made there, a configMap's files shipped before the pod is
 * applied); and the cell's kube-proxy unit, privileged, with its kubeconfig shipped. A
 * hostPath the cell cannot see is refused, saying so.
 */
static void test_cri_container__the_cell_gets_volumes_dns_and_kube_proxy(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__Mount empty = RUNTIME__V1__MOUNT__INIT;
	Runtime__V1__Mount config = RUNTIME__V1__MOUNT__INIT;
	Runtime__V1__Mount *mounts[] = { &empty, &config };
	const Kiyot__Cell__V1__Unit *app, *proxy;
	const Kiyot__Cell__V1__Volume *v;
	Kiyot__Cell__V1__Pod *pod;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = run_dns_pod(f);
	_cleanup_free_ char *cell = kfix_cell_of(f, sb);
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *other = NULL;
	_cleanup_free_ char *kubeconfig = node_file(f, "kube-proxy.conf", "apiVersion: v1\n");
	_cleanup_free_ char *key =
		node_file(f, "pods/uid-dns/volumes/kubernetes.io~configmap/cfg/key", "value");
	_cleanup_free_ char *data =
		xasprintf("%s/pods/uid-dns/volumes/kubernetes.io~empty-dir/data", f->dir);

	f->k.cfg.kube_proxy.image = xstrdup("registry.test/kube-proxy:1");
	f->k.cfg.kube_proxy.kubeconfig = xstrdup(kubeconfig);
	empty.container_path = "/data";
	empty.host_path = data;
	config.container_path = "/etc/cfg";
	*strrchr(key, '/') = '\0';
	config.host_path = key;
	config.readonly = 1;
	assert_int_equal(create_with_mounts(f, sb, "app", mounts, 2, &id, &err), 0);
	assert_int_equal(kfix_start(f, id, &err), 0);

	pod = fake_agent_pod(f->fa, cell);
	assert_non_null(pod);
	assert_int_equal(pod->restart_policy, KIYOT__CELL__V1__RESTART_POLICY__ALWAYS);
	assert_int_equal(pod->n_dns_servers, 1);
	assert_string_equal(pod->dns_servers[0], "10.96.0.10");
	assert_string_equal(pod->dns_searches[0], "default.svc.cluster.local");
	assert_int_equal(pod->n_units, 2);
	app = unit_named(pod, "app");
	assert_int_equal(app->n_mounts, 2);
	assert_string_equal(app->mounts[0]->volume, "ed-data");
	assert_string_equal(app->mounts[0]->host_path, "");
	v = volume_named(pod, "ed-data");
	assert_int_equal(v->kind, KIYOT__CELL__V1__VOLUME__KIND__EMPTY_DIR);
	v = volume_named(pod, app->mounts[1]->volume);
	assert_int_equal(v->kind, KIYOT__CELL__V1__VOLUME__KIND__SHIPPED);
	assert_int_equal(fake_agent_volume_entries(f->fa, cell, v->name), 2); /* root and key */
	proxy = unit_named(pod, "kube-proxy");
	assert_true(proxy->system);
	assert_true(proxy->privileged);
	assert_string_equal(proxy->image, "registry.test/kube-proxy:1");
	assert_string_equal(proxy->args[0], "--kubeconfig=/var/lib/kube-proxy/kubeconfig");
	assert_int_equal(proxy->n_mounts, 1);
	v = volume_named(pod, proxy->mounts[0]->volume);
	assert_int_equal(v->kind, KIYOT__CELL__V1__VOLUME__KIND__SHIPPED);
	assert_int_equal(fake_agent_volume_entries(f->fa, cell, v->name), 1);
	protobuf_c_message_free_unpacked(&pod->base, NULL);

	empty.host_path = "/var/log";
	assert_int_equal(create_with_mounts(f, sb, "logs", mounts, 1, &other, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "/var/log is a path on the node"));
}

/* A unit of a remote cell that exits with a termination message: kiyot writes it to the node
 * file the kubelet reads (the mount at the container's terminationMessagePath). */
static void test_cri_container__a_termination_message_reaches_the_node(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
	Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
	Runtime__V1__ContainerConfig__AnnotationsEntry ann =
		RUNTIME__V1__CONTAINER_CONFIG__ANNOTATIONS_ENTRY__INIT;
	Runtime__V1__ContainerConfig__AnnotationsEntry *anns[] = { &ann };
	Runtime__V1__Mount log = RUNTIME__V1__MOUNT__INIT;
	Runtime__V1__Mount *mounts[] = { &log };
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *cell = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *host = node_file(f, "pods/uid-web/containers/app/0a1b2c3d", "");

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	md.name = "app";
	img.image = "registry.test/app:1";
	ann.key = "io.kubernetes.container.terminationMessagePath";
	ann.value = "/dev/termination-log";
	log.container_path = "/dev/termination-log";
	log.host_path = host;
	cfg.metadata = &md;
	cfg.image = &img;
	cfg.annotations = anns;
	cfg.n_annotations = 1;
	cfg.mounts = mounts;
	cfg.n_mounts = 1;
	assert_int_equal(kfix_create_config(f, sb, &cfg, &id, &err), 0);
	assert_int_equal(kfix_start(f, id, &err), 0);
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cell) == 1, 5000));
	assert_int_equal(fake_agent_unit_exit_message(f->fa, cell, id, 1, "Error", "disk full\n"),
			 0);
	assert_true(KFIX_WAIT(kfix_file_is(host, "disk full\n"), 5000));
}

/* An image the node pulled for a pod is named as containerd names it: ContainerStatus's
 * image_ref is its repo digest (the kubelet's containerStatuses[].imageID) and its image the
 * tag, whether the container was created by tag or, as the kubelet does, by the image id
 * PullImage answered; ListContainers' image_ref is the image's id (what image GC matches). */
static void test_cri_container__status_names_the_image_by_digest(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__PullImageRequest pull = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
	Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
	Runtime__V1__PullImageResponse *pulled = NULL;
	Runtime__V1__ContainerStatusResponse *resp = NULL;
	Runtime__V1__ListContainersResponse *lresp;
	Runtime__V1__ContainerStatus *st;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *by_tag = NULL;
	_cleanup_free_ char *by_id = NULL;
	const char *ids[2];

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	pull.sandbox_config = kfix_pod_config(f, "web", "uid-web", 0);
	spec.image = "registry.test/app:1";
	pull.image = &spec;
	assert_int_equal(kfix_call(f, "PullImage", &pull.base,
				   &runtime__v1__pull_image_response__descriptor, &pulled, &err),
			 0);
	protobuf_c_message_free_unpacked(&pull.sandbox_config->base, NULL);
	assert_int_equal(kfix_create(f, sb, "tag", "registry.test/app:1", &by_tag, &err), 0);
	assert_int_equal(kfix_create(f, sb, "id", pulled->image_ref, &by_id, &err), 0);
	assert_int_equal(kfix_start(f, by_id, &err), 0);
	ids[0] = by_tag;
	ids[1] = by_id;
	for (size_t i = 0; i < 2; i++) {
		st = container_status(f, ids[i], &resp);
		if (strncmp(st->image_ref, "registry.test/app@sha256:", 25) != 0)
			fail_msg("%s: image_ref %s is no repo digest", ids[i], st->image_ref);
		assert_int_equal(strlen(st->image_ref), 25 + 64);
		assert_string_equal(st->image->image, "registry.test/app:1");
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	}
	lresp = list(f, NULL);
	assert_int_equal(lresp->n_containers, 2);
	for (size_t i = 0; i < 2; i++)
		assert_string_equal(lresp->containers[i]->image_ref, pulled->image_ref);
	protobuf_c_message_free_unpacked(&lresp->base, NULL);
	protobuf_c_message_free_unpacked(&pulled->base, NULL);
}

/* ContainerStatus's resources are the container's: CreateContainer's linux.resources, then
 * each UpdateContainerResources, which changes what it names and keeps the rest (crictl
 * update --memory keeps the CPU quota). */
static void test_cri_container__status_carries_the_resources(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
	Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
	Runtime__V1__LinuxContainerConfig lc = RUNTIME__V1__LINUX_CONTAINER_CONFIG__INIT;
	Runtime__V1__LinuxContainerResources res = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;
	Runtime__V1__UpdateContainerResourcesRequest up =
		RUNTIME__V1__UPDATE_CONTAINER_RESOURCES_REQUEST__INIT;
	Runtime__V1__LinuxContainerResources more = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;
	Runtime__V1__ContainerStatusResponse *resp = NULL;
	const Runtime__V1__LinuxContainerResources *got;
	Runtime__V1__ContainerStatus *st;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	md.name = "app";
	img.image = "registry.test/app:1";
	res.cpu_period = 100000;
	res.cpu_quota = 50000;
	res.cpu_shares = 512;
	res.memory_limit_in_bytes = 64 << 20;
	res.oom_score_adj = 999;
	res.cpuset_cpus = "0";
	lc.resources = &res;
	cfg.metadata = &md;
	cfg.image = &img;
	cfg.linux = &lc;
	assert_int_equal(kfix_create_config(f, sb, &cfg, &id, &err), 0);
	st = container_status(f, id, &resp);
	assert_non_null(st->resources);
	got = st->resources->linux;
	assert_non_null(got);
	assert_int_equal(got->cpu_period, 100000);
	assert_int_equal(got->cpu_quota, 50000);
	assert_int_equal(got->cpu_shares, 512);
	assert_int_equal(got->memory_limit_in_bytes, 64 << 20);
	assert_int_equal(got->oom_score_adj, 999);
	assert_string_equal(got->cpuset_cpus, "0");
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	up.container_id = id;
	more.memory_limit_in_bytes = 32 << 20;
	up.linux = &more;
	assert_int_equal(kfix_call0(f, "UpdateContainerResources", &up.base, &err), 0);
	got = container_status(f, id, &resp)->resources->linux;
	assert_int_equal(got->memory_limit_in_bytes, 32 << 20);
	assert_int_equal(got->cpu_quota, 50000);
	assert_int_equal(got->cpu_period, 100000);
	assert_int_equal(got->cpu_shares, 512);
	assert_int_equal(got->oom_score_adj, 999);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

/* ContainerStatus with verbose answers info["info"] as containerd does, which crictl inspect
 * templates read: the sandbox, the process's pid while it runs, the container's config and a
 * runtime spec with its command, environment, mounts and resources. Without verbose, none. */
static void test_cri_container__verbose_status_carries_info(void **state)
{
	struct kfix *f = *state;
	Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
	Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
	Runtime__V1__KeyValue env = RUNTIME__V1__KEY_VALUE__INIT;
	Runtime__V1__KeyValue *envs[] = { &env };
	Runtime__V1__LinuxContainerConfig lc = RUNTIME__V1__LINUX_CONTAINER_CONFIG__INIT;
	Runtime__V1__LinuxContainerResources res = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;
	Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
	Runtime__V1__ContainerStatusResponse *resp = NULL;
	char *cmd[] = { "sleep", "1000" };
	struct err err = ERR_INIT;
	_cleanup_free_ char *sb = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *cell = NULL;
	json_t *j, *spec;
	json_error_t jerr;

	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	md.name = "app";
	img.image = "registry.test/app:1";
	env.key = "MODE";
	env.value = "fast";
	res.memory_limit_in_bytes = 64 << 20;
	lc.resources = &res;
	cfg.metadata = &md;
	cfg.image = &img;
	cfg.command = cmd;
	cfg.n_command = 2;
	cfg.envs = envs;
	cfg.n_envs = 1;
	cfg.linux = &lc;
	assert_int_equal(kfix_create_config(f, sb, &cfg, &id, &err), 0);
	assert_int_equal(kfix_start(f, id, &err), 0);
	req.container_id = id;
	assert_int_equal(kfix_call(f, "ContainerStatus", &req.base,
				   &runtime__v1__container_status_response__descriptor, &resp,
				   &err),
			 0);
	assert_int_equal(resp->n_info, 0);
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	req.verbose = 1;
	assert_int_equal(kfix_call(f, "ContainerStatus", &req.base,
				   &runtime__v1__container_status_response__descriptor, &resp,
				   &err),
			 0);
	assert_int_equal(resp->n_info, 1);
	assert_string_equal(resp->info[0]->key, "info");
	j = json_loads(resp->info[0]->value, 0, &jerr);
	if (!j)
		fail_msg("info is no JSON (%s): %s", jerr.text, resp->info[0]->value);
	assert_string_equal(json_string_value(json_object_get(j, "sandboxID")), sb);
	assert_int_equal(json_integer_value(json_object_get(j, "pid")),
			 fake_agent_unit_pid(f->fa, cell, id));
	assert_true(json_integer_value(json_object_get(j, "pid")) > 0);
	assert_string_equal(
		json_string_value(json_object_get(
			json_object_get(json_object_get(j, "config"), "metadata"), "name")),
		"app");
	assert_string_equal(
		json_string_value(json_object_get(
			json_object_get(json_object_get(j, "config"), "image"), "image")),
		"registry.test/app:1");
	spec = json_object_get(j, "runtimeSpec");
	assert_non_null(spec);
	assert_string_equal(json_string_value(json_array_get(
				    json_object_get(json_object_get(spec, "process"), "args"), 1)),
			    "1000");
	assert_string_equal(json_string_value(json_array_get(
				    json_object_get(json_object_get(spec, "process"), "env"), 0)),
			    "MODE=fast");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(json_object_get(json_object_get(spec, "linux"),
								 "resources"),
						 "memory"),
				 "limit")),
			 64 << 20);
	json_decref(j);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

#define TEST(name) cmocka_unit_test_setup_teardown(name, kfix_setup, kfix_teardown)

static const struct CMUnitTest tests[] = {
	TEST(test_cri_container__lifecycle_follows_the_unit_in_the_cell),
	TEST(test_cri_container__create_needs_a_ready_sandbox_and_a_new_name),
	TEST(test_cri_container__a_unit_the_cell_cannot_create_leaves_nothing),
	TEST(test_cri_container__unknown_ids_are_not_found),
	TEST(test_cri_container__stop_and_remove_are_idempotent),
	TEST(test_cri_container__stop_and_remove_work_without_the_cell),
	TEST(test_cri_container__a_unit_exiting_in_the_cell_is_reported),
	TEST(test_cri_container__logs_reach_the_kubelets_file),
	TEST(test_cri_container__list_filters_by_id_state_and_sandbox),
	TEST(test_cri_container__exec_sync_answers_output_and_exit_code),
	TEST(test_cri_container__exec_sync_errors_say_what_failed),
	TEST(test_cri_container__status_carries_the_config),
	TEST(test_cri_container__update_resources_must_fit_the_cell),
	TEST(test_cri_container__reopen_log_recreates_the_file),
	TEST(test_cri_container__exec_and_attach_answer_urls),
	TEST(test_cri_container__the_cell_gets_volumes_dns_and_kube_proxy),
	TEST(test_cri_container__a_termination_message_reaches_the_node),
	TEST(test_cri_container__status_names_the_image_by_digest),
	TEST(test_cri_container__status_carries_the_resources),
	TEST(test_cri_container__verbose_status_carries_info),
};

int main(void)
{
	return cmocka_run_group_tests(tests, NULL, NULL);
}
