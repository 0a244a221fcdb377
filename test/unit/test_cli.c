/*
 * Unit tests for kiyot/cli/: the client commands (run, get, logs, delete; the argument
 * handling of exec, attach and port-forward) against a fake CRI runtime served on a unix
 * socket in this process. The fake keeps pods and containers in memory and records every call,
 * so a test checks what the command asked the runtime for, in which order, and what it printed
 * (stdout and stderr are captured) and returned.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "clirun.h"
#include "cri/cri.h"
#include "fsutil.h"
#include "rpc.h"
#include "xalloc.h"

#define RT(m) "/runtime.v1.RuntimeService/" m
#define IMG(m) "/runtime.v1.ImageService/" m
#define MAX_PODS 8
#define MAX_CTRS 16
#define MAX_CALLS 64
#define LABEL_INIT "kiyot.elotl.co/init-container"
#define FIX "test/fixtures/cli/"

/* ---- the fake runtime ---- */

struct fpod {
	char id[32];
	Runtime__V1__PodSandboxConfig *cfg;
	int ready;
	int64_t created;
};

struct fctr {
	char id[32], sb[32];
	Runtime__V1__ContainerConfig *cfg;
	int state, exit_code;
	int64_t created;
};

struct fake {
	pthread_mutex_t lock;
	struct fpod pods[MAX_PODS];
	size_t n_pods;
	struct fctr ctrs[MAX_CTRS];
	size_t n_ctrs;
	char calls[MAX_CALLS][128];
	size_t n_calls;
	char exec_url[128]; /* what Exec and Attach answer */
};

static struct fake fake = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...)
{
	va_list ap;

	if (fake.n_calls == MAX_CALLS)
		return;
	va_start(ap, fmt);
	vsnprintf(fake.calls[fake.n_calls++], sizeof(fake.calls[0]), fmt, ap);
	va_end(ap);
}

static struct fpod *pod_by_id(const char *id)
{
	for (size_t i = 0; i < fake.n_pods; i++)
		if (strcmp(fake.pods[i].id, id) == 0)
			return &fake.pods[i];
	return NULL;
}

static struct fctr *ctr_by_id(const char *id)
{
	for (size_t i = 0; i < fake.n_ctrs; i++)
		if (strcmp(fake.ctrs[i].id, id) == 0)
			return &fake.ctrs[i];
	return NULL;
}

static int has_label(const Runtime__V1__ContainerConfig *cfg, const char *key)
{
	for (size_t i = 0; i < cfg->n_labels; i++)
		if (strcmp(cfg->labels[i]->key, key) == 0)
			return 1;
	return 0;
}

#define FAKE_HANDLER(name)                                                                         \
	static int fake_##name(void *svc, struct rpc_call *call, const ProtobufCMessage *req,      \
			       ProtobufCMessage *resp, struct err *err)

FAKE_HANDLER(run_pod_sandbox)
{
	const Runtime__V1__RunPodSandboxRequest *r = (const void *)req;
	Runtime__V1__RunPodSandboxResponse *out = (void *)resp;
	struct fpod *p = &fake.pods[fake.n_pods++];

	(void)svc;
	(void)err;
	snprintf(p->id, sizeof(p->id), "sb%02zu00000000000000", fake.n_pods);
	p->cfg = cri_msg_copy(&r->config->base);
	p->ready = 1;
	p->created = clock_now_ns();
	record("RunPodSandbox %s", r->config->metadata->name);
	out->pod_sandbox_id = rpc_strdup(call, p->id);
	return 0;
}

FAKE_HANDLER(pull_image)
{
	const Runtime__V1__PullImageRequest *r = (const void *)req;
	Runtime__V1__PullImageResponse *out = (void *)resp;

	(void)svc;
	(void)err;
	record("PullImage %s for %s", r->image->image,
	       r->sandbox_config ? r->sandbox_config->metadata->name : "-");
	out->image_ref = rpc_strdup(call, "sha256:feed");
	return 0;
}

/* busybox runs as root (uid 0), users:1 as a user named "app", anything else as uid 1000. */
FAKE_HANDLER(image_status)
{
	const Runtime__V1__ImageStatusRequest *r = (const void *)req;
	Runtime__V1__ImageStatusResponse *out = (void *)resp;

	(void)svc;
	(void)err;
	out->image = rpc_msg_new(call, &runtime__v1__image__descriptor);
	out->image->id = "sha256:feed";
	if (strcmp(r->image->image, "users:1") == 0) {
		out->image->username = "app";
	} else {
		out->image->uid = rpc_msg_new(call, &runtime__v1__int64_value__descriptor);
		out->image->uid->value = strncmp(r->image->image, "busybox", 7) == 0 ? 0 : 1000;
	}
	return 0;
}

FAKE_HANDLER(create_container)
{
	const Runtime__V1__CreateContainerRequest *r = (const void *)req;
	Runtime__V1__CreateContainerResponse *out = (void *)resp;
	struct fctr *c = &fake.ctrs[fake.n_ctrs++];

	(void)svc;
	(void)err;
	snprintf(c->id, sizeof(c->id), "ct%02zu00000000000000", fake.n_ctrs);
	snprintf(c->sb, sizeof(c->sb), "%s", r->pod_sandbox_id);
	c->cfg = cri_msg_copy(&r->config->base);
	c->state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_CREATED;
	c->created = clock_now_ns();
	record("CreateContainer %s%s", r->config->metadata->name,
	       has_label(r->config, LABEL_INIT) ? " (init)" : "");
	out->container_id = rpc_strdup(call, c->id);
	return 0;
}

/* App containers run; init containers run to their end at once: one whose name starts with
 * "fail" exits 1, the others 0. */
FAKE_HANDLER(start_container)
{
	const Runtime__V1__StartContainerRequest *r = (const void *)req;
	struct fctr *c = ctr_by_id(r->container_id);

	(void)svc;
	(void)call;
	(void)resp;
	if (!c)
		return err_set(err, ENOENT, "container %s not found", r->container_id);
	record("StartContainer %s", c->cfg->metadata->name);
	if (has_label(c->cfg, LABEL_INIT)) {
		c->state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED;
		c->exit_code = strncmp(c->cfg->metadata->name, "fail", 4) == 0;
	} else {
		c->state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING;
	}
	return 0;
}

FAKE_HANDLER(container_status)
{
	const Runtime__V1__ContainerStatusRequest *r = (const void *)req;
	Runtime__V1__ContainerStatusResponse *out = (void *)resp;
	struct fctr *c = ctr_by_id(r->container_id);
	struct fpod *p = c ? pod_by_id(c->sb) : NULL;

	(void)svc;
	if (!c || !p)
		return err_set(err, ENOENT, "container %s not found", r->container_id);
	out->status = rpc_msg_new(call, &runtime__v1__container_status__descriptor);
	out->status->id = rpc_strdup(call, c->id);
	out->status->state = c->state;
	out->status->exit_code = c->exit_code;
	if (c->cfg->log_path[0] == '/') {
		out->status->log_path = rpc_strdup(call, c->cfg->log_path);
	} else if (c->cfg->log_path[0]) {
		_cleanup_free_ char *lp =
			xasprintf("%s/%s", p->cfg->log_directory, c->cfg->log_path);

		out->status->log_path = rpc_strdup(call, lp);
	}
	return 0;
}

FAKE_HANDLER(list_pod_sandbox)
{
	Runtime__V1__ListPodSandboxResponse *out = (void *)resp;

	(void)svc;
	(void)req;
	(void)err;
	out->items = rpc_alloc(call, (fake.n_pods + 1) * sizeof(*out->items));
	for (size_t i = 0; i < fake.n_pods; i++) {
		Runtime__V1__PodSandbox *s =
			rpc_msg_new(call, &runtime__v1__pod_sandbox__descriptor);

		s->id = fake.pods[i].id;
		s->metadata = fake.pods[i].cfg->metadata;
		s->state = fake.pods[i].ready ? RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY
					      : RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_NOTREADY;
		s->created_at = fake.pods[i].created;
		out->items[out->n_items++] = s;
	}
	return 0;
}

FAKE_HANDLER(list_containers)
{
	const Runtime__V1__ListContainersRequest *r = (const void *)req;
	Runtime__V1__ListContainersResponse *out = (void *)resp;

	(void)svc;
	(void)err;
	out->containers = rpc_alloc(call, (fake.n_ctrs + 1) * sizeof(*out->containers));
	for (size_t i = 0; i < fake.n_ctrs; i++) {
		const struct fctr *c = &fake.ctrs[i];
		Runtime__V1__Container *o;

		if (r->filter && r->filter->pod_sandbox_id[0] &&
		    strcmp(r->filter->pod_sandbox_id, c->sb) != 0)
			continue;
		o = rpc_msg_new(call, &runtime__v1__container__descriptor);
		o->id = (char *)c->id;
		o->pod_sandbox_id = (char *)c->sb;
		o->metadata = c->cfg->metadata;
		o->state = c->state;
		o->created_at = c->created;
		o->labels = (void *)c->cfg->labels;
		o->n_labels = c->cfg->n_labels;
		out->containers[out->n_containers++] = o;
	}
	return 0;
}

/* The cell a pod runs in, as kiyot says in its verbose status. */
FAKE_HANDLER(pod_sandbox_status)
{
	const Runtime__V1__PodSandboxStatusRequest *r = (const void *)req;
	Runtime__V1__PodSandboxStatusResponse *out = (void *)resp;
	struct fpod *p = pod_by_id(r->pod_sandbox_id);

	(void)svc;
	if (!p)
		return err_set(err, ENOENT, "pod sandbox %s not found", r->pod_sandbox_id);
	out->status = rpc_msg_new(call, &runtime__v1__pod_sandbox_status__descriptor);
	out->status->id = p->id;
	out->status->network =
		rpc_msg_new(call, &runtime__v1__pod_sandbox_network_status__descriptor);
	out->status->network->ip = p->ready ? "10.77.0.5" : "";
	if (r->verbose) {
		out->info = rpc_alloc(call, sizeof(*out->info));
		out->info[0] = rpc_msg_new(
			call, &runtime__v1__pod_sandbox_status_response__info_entry__descriptor);
		out->info[0]->key = "info";
		out->info[0]->value = "{\"cellId\":\"cell-0abc\",\"instanceType\":\"t3.nano\","
				      "\"sizingReason\":\"cheapest that fits\"}";
		out->n_info = 1;
	}
	return 0;
}

/* kiyot's verbose Status: its cells (the ready pods' and one standby cell) under "cells". */
FAKE_HANDLER(status)
{
	const Runtime__V1__StatusRequest *r = (const void *)req;
	Runtime__V1__StatusResponse *out = (void *)resp;
	json_t *cells = json_array();
	char *text;

	(void)svc;
	(void)err;
	out->status = rpc_msg_new(call, &runtime__v1__runtime_status__descriptor);
	if (!r->verbose)
		return 0;
	for (size_t i = 0; i < fake.n_pods; i++)
		if (fake.pods[i].ready)
			json_array_append_new(
				cells, json_pack("{s:s,s:s,s:s,s:s,s:s,s:f,s:s,s:I,s:s}", "cellId",
						 "cell-0abc", "namespace",
						 fake.pods[i].cfg->metadata->namespace_, "pod",
						 fake.pods[i].cfg->metadata->name, "phase",
						 "Running", "instanceType", "t3.nano",
						 "pricePerHour", 0.0052, "ip", "10.77.0.5",
						 "createdNs", (json_int_t)fake.pods[i].created,
						 "sizingReason", "cheapest that fits"));
	json_array_append_new(cells,
			      json_pack("{s:s,s:s,s:s,s:f,s:s,s:I}", "cellId", "sb-0def", "phase",
					"Standby", "instanceType", "t3.nano", "pricePerHour",
					0.0052, "ip", "10.77.0.9", "createdNs",
					(json_int_t)(clock_now_ns() - 120LL * 1000000000LL)));
	text = json_dumps(cells, JSON_COMPACT);
	json_decref(cells);
	out->info = rpc_alloc(call, sizeof(*out->info));
	out->info[0] = rpc_msg_new(call, &runtime__v1__status_response__info_entry__descriptor);
	out->info[0]->key = "cells";
	out->info[0]->value = rpc_strdup(call, text);
	out->n_info = 1;
	free(text);
	return 0;
}

FAKE_HANDLER(stop_container)
{
	const Runtime__V1__StopContainerRequest *r = (const void *)req;
	struct fctr *c = ctr_by_id(r->container_id);

	(void)svc;
	(void)call;
	(void)resp;
	if (!c)
		return err_set(err, ENOENT, "container %s not found", r->container_id);
	record("StopContainer %s timeout %lld", c->cfg->metadata->name, (long long)r->timeout);
	c->state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED;
	return 0;
}

FAKE_HANDLER(stop_pod_sandbox)
{
	const Runtime__V1__StopPodSandboxRequest *r = (const void *)req;
	struct fpod *p = pod_by_id(r->pod_sandbox_id);

	(void)svc;
	(void)call;
	(void)resp;
	(void)err;
	record("StopPodSandbox %s", p ? p->cfg->metadata->name : r->pod_sandbox_id);
	if (p)
		p->ready = 0;
	return 0;
}

FAKE_HANDLER(remove_pod_sandbox)
{
	const Runtime__V1__RemovePodSandboxRequest *r = (const void *)req;
	struct fpod *p = pod_by_id(r->pod_sandbox_id);

	(void)svc;
	(void)call;
	(void)resp;
	(void)err;
	record("RemovePodSandbox %s", p ? p->cfg->metadata->name : r->pod_sandbox_id);
	if (p)
		p->cfg->metadata->name[0] = '\0'; /* gone from lookups by name */
	return 0;
}

FAKE_HANDLER(exec)
{
	const Runtime__V1__ExecRequest *r = (const void *)req;
	Runtime__V1__ExecResponse *out = (void *)resp;

	(void)svc;
	(void)err;
	record("Exec %s %s stdin=%d tty=%d", r->container_id, r->n_cmd ? r->cmd[0] : "", r->stdin,
	       r->tty);
	out->url = rpc_strdup(call, fake.exec_url);
	return 0;
}

FAKE_HANDLER(attach)
{
	const Runtime__V1__AttachRequest *r = (const void *)req;
	Runtime__V1__AttachResponse *out = (void *)resp;

	(void)svc;
	(void)err;
	record("Attach %s", r->container_id);
	out->url = rpc_strdup(call, fake.exec_url);
	return 0;
}

#define M(path, type, fn)                                                                          \
	{                                                                                          \
		path, &runtime__v1__##type##_request__descriptor,                                  \
			&runtime__v1__##type##_response__descriptor, fake_##fn, 0, 0               \
	}
static const struct rpc_method fake_methods[] = {
	M(RT("RunPodSandbox"), run_pod_sandbox, run_pod_sandbox),
	M(IMG("PullImage"), pull_image, pull_image),
	M(IMG("ImageStatus"), image_status, image_status),
	M(RT("CreateContainer"), create_container, create_container),
	M(RT("StartContainer"), start_container, start_container),
	M(RT("ContainerStatus"), container_status, container_status),
	M(RT("ListPodSandbox"), list_pod_sandbox, list_pod_sandbox),
	M(RT("ListContainers"), list_containers, list_containers),
	M(RT("PodSandboxStatus"), pod_sandbox_status, pod_sandbox_status),
	M(RT("Status"), status, status),
	M(RT("StopContainer"), stop_container, stop_container),
	M(RT("StopPodSandbox"), stop_pod_sandbox, stop_pod_sandbox),
	M(RT("RemovePodSandbox"), remove_pod_sandbox, remove_pod_sandbox),
	M(RT("Exec"), exec, exec),
	M(RT("Attach"), attach, attach),
};

/* ---- fixture ---- */

struct fix {
	char dir[64];
	char sock[128];
	struct rpc_server *srv;
	struct clirun run; /* what the last command printed */
};

/* The fake's handlers run on one worker, so the tests' reads of its state need no lock
 * while no command runs. */
static int setup(void **state)
{
	struct fix *f = xcalloc(1, sizeof(*f));
	struct rpc_server_config cfg = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *addr = NULL;

	snprintf(f->dir, sizeof(f->dir), "/tmp/kiyot-cli.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->sock, sizeof(f->sock), "%s/kiyot.sock", f->dir);
	addr = xasprintf("unix://%s", f->sock);
	rpc_global_init();
	cfg.address = addr;
	cfg.methods = fake_methods;
	cfg.n_methods = ARRAY_SIZE(fake_methods);
	cfg.workers = 1;
	if (rpc_server_start(&cfg, &f->srv, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	setenv("KIYOT_SOCKET", f->sock, 1);
	setenv("KIYOT_STATE_DIR", f->dir, 1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;

	rpc_server_stop(f->srv);
	for (size_t i = 0; i < fake.n_pods; i++) {
		/* what `kiyot run` made for the pod's logs */
		if (fake.pods[i].cfg->log_directory[0] &&
		    strncmp(fake.pods[i].cfg->log_directory, "/var/log/pods/default_unit-", 27) ==
			    0)
			fs_remove_tree(fake.pods[i].cfg->log_directory, &err);
		protobuf_c_message_free_unpacked(&fake.pods[i].cfg->base, NULL);
	}
	for (size_t i = 0; i < fake.n_ctrs; i++)
		protobuf_c_message_free_unpacked(&fake.ctrs[i].cfg->base, NULL);
	fake.n_pods = fake.n_ctrs = fake.n_calls = 0;
	fs_remove_tree(f->dir, &err);
	clirun_release(&f->run);
	free(f);
	return 0;
}

/* Asserts the fake saw exactly these calls (NULL-terminated), in order. */
static void expect_calls(const char *first, ...)
{
	va_list ap;
	size_t i = 0;

	va_start(ap, first);
	for (const char *c = first; c; c = va_arg(ap, const char *), i++) {
		if (i >= fake.n_calls)
			fail_msg("call %zu: none, want \"%s\"", i, c);
		if (strcmp(fake.calls[i], c) != 0)
			fail_msg("call %zu: \"%s\", want \"%s\"", i, fake.calls[i], c);
	}
	va_end(ap);
	if (i != fake.n_calls)
		fail_msg("%zu calls, want %zu (the next: \"%s\")", fake.n_calls, i, fake.calls[i]);
}

static void expect_err(struct fix *f, const char *text)
{
	if (!strstr(f->run.err, text))
		fail_msg("stderr \"%s\" does not say \"%s\"", f->run.err, text);
}

/* A pod of fake records: containers (name, state, exit code) in a new sandbox. */
static struct fpod *add_pod(const char *name, const char *ns, int ready)
{
	Runtime__V1__PodSandboxConfig cfg = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
	Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
	struct fpod *p = &fake.pods[fake.n_pods++];

	md.name = (char *)name;
	md.namespace_ = (char *)ns;
	md.uid = "uid";
	cfg.metadata = &md;
	snprintf(p->id, sizeof(p->id), "sb%02zu00000000000000", fake.n_pods);
	p->cfg = cri_msg_copy(&cfg.base);
	p->ready = ready;
	p->created = clock_now_ns() - 3LL * 3600 * 1000000000LL;
	return p;
}

static struct fctr *add_ctr(struct fpod *p, const char *name, int state, int code,
			    const char *log_path)
{
	Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
	struct fctr *c = &fake.ctrs[fake.n_ctrs++];

	md.name = (char *)name;
	cfg.metadata = &md;
	cfg.log_path = (char *)log_path;
	snprintf(c->id, sizeof(c->id), "ct%02zu00000000000000", fake.n_ctrs);
	snprintf(c->sb, sizeof(c->sb), "%s", p->id);
	c->cfg = cri_msg_copy(&cfg.base);
	c->state = state;
	c->exit_code = code;
	c->created = clock_now_ns() + (int64_t)fake.n_ctrs; /* later ones are newer */
	return c;
}

/* ---- global handling ---- */

static void test_cli__without_a_command_or_socket_says_what_to_do(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *missing = xasprintf("%s/none.sock", f->dir);

	assert_int_equal(clirun(&f->run, NULL), 1);
	expect_err(f, "usage: kiyot <command> [options]");
	assert_int_equal(clirun(&f->run, "--socket", missing, "get", "pods", NULL), 1);
	expect_err(f, "cannot reach kiyot at");
	expect_err(f, "start it with `kiyot serve` or pass --socket");
	assert_int_equal(clirun(&f->run, "frobnicate", NULL), 1);
	expect_err(f, "unknown command \"frobnicate\"");
	assert_int_equal(fake.n_calls, 0);
}

/* ---- run ---- */

/* An init container first, run to its end, then the app containers: each pulled for the pod,
 * its user asked, created and started; the pod's demand and restart policy go in the
 * sandbox's annotations and emptyDirs become directories. */
static void test_cli__run_makes_the_calls_a_kubelet_makes(void **state)
{
	struct fix *f = *state;
	Runtime__V1__PodSandboxConfig *sb;
	_cleanup_free_ char *vol = NULL, *logs = NULL;
	const char *uid;

	if (clirun(&f->run, "run", "-f", FIX "unit-web.yaml", NULL) != 0)
		fail_msg("%s", f->run.err);
	assert_non_null(strstr(f->run.out, "pod/unit-web created (sandbox sb01000000000)"));
	expect_calls("RunPodSandbox unit-web", "PullImage busybox:1 for unit-web",
		     "CreateContainer setup (init)", "StartContainer setup",
		     "PullImage registry.test/hello:1 for unit-web", "CreateContainer web",
		     "StartContainer web", NULL);
	sb = fake.pods[0].cfg;
	assert_string_equal(sb->metadata->namespace_, "default");
	/* a manifest without a uid gets a new one, shaped as the API server's */
	uid = sb->metadata->uid;
	assert_int_equal(strlen(uid), 36);
	assert_true(uid[8] == '-' && uid[13] == '-' && uid[18] == '-' && uid[23] == '-');
	logs = xasprintf("/var/log/pods/default_unit-web_%s", uid);
	assert_string_equal(sb->log_directory, logs);
	assert_string_equal(cri_map_get((void **)sb->annotations, sb->n_annotations,
					"pod.elotl.co/restart-policy"),
			    "Always");
	assert_non_null(cri_map_get((void **)sb->labels, sb->n_labels, "io.kubernetes.pod.name"));
	/* the containers' settings from the manifest */
	assert_string_equal(fake.ctrs[1].cfg->metadata->name, "web");
	assert_string_equal(fake.ctrs[1].cfg->log_path, "web/0.log");
	assert_int_equal(fake.ctrs[1].cfg->n_envs, 1);
	assert_string_equal(fake.ctrs[1].cfg->envs[0]->key, "PORT");
	assert_string_equal(fake.ctrs[1].cfg->envs[0]->value, "8080");
	assert_int_equal(fake.ctrs[1].cfg->linux->resources->memory_limit_in_bytes, 64 << 20);
	assert_int_equal(fake.ctrs[1].cfg->linux->resources->cpu_quota, 50000);
	assert_int_equal(fake.ctrs[1].cfg->n_mounts, 1);
	vol = xasprintf("%s/pods/%s/volumes/kubernetes.io~empty-dir/share", f->dir, uid);
	assert_string_equal(fake.ctrs[1].cfg->mounts[0]->host_path, vol);
	assert_true(fs_exists(vol));
	assert_int_equal(fake.ctrs[1].state, RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING);
}

/* An init container that fails stops the pod there, saying how to see its logs. */
static void test_cli__run_stops_at_a_failed_init_container(void **state)
{
	struct fix *f = *state;

	assert_int_equal(clirun(&f->run, "run", "-f", FIX "unit-failinit.yaml", NULL), 1);
	expect_err(f, "pod unit-failinit: init container fail-first exited with code 1; see "
		      "`kiyot logs unit-failinit -c fail-first`");
	expect_calls("RunPodSandbox unit-failinit", "PullImage busybox:1 for unit-failinit",
		     "CreateContainer fail-first (init)", "StartContainer fail-first", NULL);
}

/* What is wrong with the command or the manifest is said before anything is created. */
static void test_cli__run_refuses_bad_input_before_any_call(void **state)
{
	struct fix *f = *state;

	assert_int_equal(clirun(&f->run, "run", NULL), 1);
	expect_err(f, "usage: kiyot run -f POD.yaml");
	assert_int_equal(clirun(&f->run, "run", "-f", FIX "unit-web.yaml", "extra", NULL), 1);
	expect_err(f, "usage: kiyot run -f POD.yaml");
	assert_int_equal(clirun(&f->run, "run", "-f", FIX "unit-web.yaml", "--seccomp-profile-root",
				"profiles", NULL),
			 1);
	expect_err(f, "--seccomp-profile-root: \"profiles\" must be an absolute path");
	assert_int_equal(clirun(&f->run, "run", "-f", FIX "unit-no-image.yaml", NULL), 1);
	expect_err(f, "image");
	assert_int_equal(clirun(&f->run, "run", "-f", FIX "unit-sidecar.yaml", NULL), 1);
	expect_err(f, "spec.initContainers[0] (proxy): sidecar containers (restartPolicy: Always) "
		      "are not supported by kiyot run");
	assert_int_equal(clirun(&f->run, "run", "-f", FIX "unit-nonroot-uid0.yaml", NULL), 1);
	expect_err(f, "runAsNonRoot");
	assert_int_equal(clirun(&f->run, "run", "-f", f->dir, NULL), 1);
	assert_int_equal(fake.n_calls, 0);
}

/* runAsNonRoot on an image that runs as root: the container is refused, as the kubelet
 * refuses it, after the image was asked about and before CreateContainer. */
static void test_cli__run_refuses_a_root_image_for_run_as_non_root(void **state)
{
	struct fix *f = *state;

	assert_int_equal(clirun(&f->run, "run", "-f", FIX "unit-nonroot.yaml", NULL), 1);
	expect_err(f, "containers app");
	expect_err(f, "runAsNonRoot");
	expect_calls("RunPodSandbox unit-nonroot", "PullImage busybox:1 for unit-nonroot", NULL);
}

/* ---- get ---- */

/* One line a pod: ready app containers of all (init containers not counted), its status as
 * kubectl would say it, its IP. */
static void test_cli__get_pods_summarises_each_pod(void **state)
{
	struct fix *f = *state;
	struct fpod *p;
	struct fctr *c;

	p = add_pod("running", "default", 1);
	c = add_ctr(p, "init", RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED, 0, "");
	c->cfg->labels = xcalloc(1, sizeof(*c->cfg->labels));
	c->cfg->labels[0] = xcalloc(1, sizeof(**c->cfg->labels));
	runtime__v1__container_config__labels_entry__init(c->cfg->labels[0]);
	c->cfg->labels[0]->key = xstrdup(LABEL_INIT);
	c->cfg->labels[0]->value = xstrdup("true");
	c->cfg->n_labels = 1;
	add_ctr(p, "app", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 0, "");
	p = add_pod("done", "default", 1);
	add_ctr(p, "app", RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED, 0, "");
	p = add_pod("broken", "default", 1);
	add_ctr(p, "app", RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED, 3, "");
	add_ctr(p, "side", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 0, "");
	p = add_pod("waiting", "default", 1);
	add_ctr(p, "app", RUNTIME__V1__CONTAINER_STATE__CONTAINER_CREATED, 0, "");
	add_pod("stopped", "other", 0);

	assert_int_equal(clirun(&f->run, "get", "pods", NULL), 0);
	assert_non_null(
		strstr(f->run.out, "NAME                     NAMESPACE        READY   STATUS"));
	assert_non_null(strstr(f->run.out,
			       "running                  default          1/1     Running"
			       "     10.77.0.5       3h\n"));
	assert_non_null(
		strstr(f->run.out, "done                     default          0/1     Completed"));
	assert_non_null(
		strstr(f->run.out, "broken                   default          1/2     Error"));
	assert_non_null(
		strstr(f->run.out, "waiting                  default          0/1     Pending"));
	assert_non_null(strstr(f->run.out,
			       "stopped                  other            0/0     Terminated"
			       "  <none>"));
	assert_int_equal(clirun(&f->run, "get", "things", NULL), 1);
	expect_err(f, "usage: kiyot get pods | kiyot get cells [-o wide]");
}

/* get cells: every cell kiyot's verbose Status lists, the running pods' and the standby ones,
 * with phase, type, price, address and age; wide adds why. */
static void test_cli__get_cells_names_each_pods_cell(void **state)
{
	struct fix *f = *state;

	add_pod("web", "default", 1);
	add_pod("stopped", "default", 0);
	assert_int_equal(clirun(&f->run, "get", "cells", NULL), 0);
	assert_non_null(strstr(f->run.out, "CELL                   NAMESPACE        POD"
					   "                      PHASE    INSTANCE-TYPE  $/H"));
	assert_non_null(strstr(f->run.out, "cell-0abc              default          web"
					   "                      Running  t3.nano        0.0052"
					   "    10.77.0.5       3h\n"));
	assert_non_null(strstr(f->run.out, "sb-0def                <none>           <none>"
					   "                   Standby  t3.nano        0.0052"
					   "    10.77.0.9       2m\n"));
	assert_null(strstr(f->run.out, "stopped"));
	assert_null(strstr(f->run.out, "WHY"));
	assert_int_equal(clirun(&f->run, "get", "cell", "-o", "wide", NULL), 0);
	assert_non_null(strstr(f->run.out, "   WHY\n"));
	assert_non_null(strstr(f->run.out, "3h   cheapest that fits\n"));
}

/* ---- logs ---- */

static void write_log(struct fix *f, const char *name, const char *text)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", f->dir, name);
	struct err err = ERR_INIT;

	assert_int_equal(fs_write_file(path, text, strlen(text), 0600, &err), 0);
}

/* logs prints a container's CRI log: each stream to its own, partial lines joined, a last
 * line without its newline left for later; -f ends once the container has. */
static void test_cli__logs_prints_the_containers_streams(void **state)
{
	struct fix *f = *state;
	struct fpod *p = add_pod("web", "default", 1);
	_cleanup_free_ char *log = xasprintf("%s/web.log", f->dir);

	write_log(f, "web.log",
		  "2026-01-01T00:00:00.000000001Z stdout F hello\n"
		  "2026-01-01T00:00:00.000000002Z stderr F oops\n"
		  "2026-01-01T00:00:00.000000003Z stdout P par\n"
		  "2026-01-01T00:00:00.000000004Z stdout F tial\n"
		  "not a record\n"
		  "2026-01-01T00:00:00.000000005Z stdout F unfinished");
	add_ctr(p, "web", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 0, log);
	if (clirun(&f->run, "logs", "web", NULL) != 0)
		fail_msg("%s", f->run.err);
	assert_string_equal(f->run.out, "hello\npartial\n");
	assert_string_equal(f->run.err, "oops\n");
	fake.ctrs[0].state = RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED;
	assert_int_equal(clirun(&f->run, "logs", "web", "-f", NULL), 0);
	assert_string_equal(f->run.out, "hello\npartial\n");
	assert_int_equal(clirun(&f->run, "logs", "web", "-c", "web", NULL), 0);
	assert_string_equal(f->run.out, "hello\npartial\n");
}

/* logs names what it cannot find: the pod, a container, one of several, the file. */
static void test_cli__logs_says_what_is_missing(void **state)
{
	struct fix *f = *state;
	struct fpod *p = add_pod("web", "default", 1);
	_cleanup_free_ char *gone = xasprintf("%s/gone.log", f->dir);

	assert_int_equal(clirun(&f->run, "logs", "db", NULL), 1);
	expect_err(f, "pod \"db\" not found in namespace default");
	assert_int_equal(clirun(&f->run, "logs", "web", NULL), 1);
	expect_err(f, "pod web has no container");
	add_ctr(p, "web", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 0, gone);
	add_ctr(p, "side", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 0, "");
	assert_int_equal(clirun(&f->run, "logs", "web", NULL), 1);
	expect_err(f, "pod web has several containers; name one with -c");
	assert_int_equal(clirun(&f->run, "logs", "web", "-c", "db", NULL), 1);
	expect_err(f, "pod web has no container named db");
	assert_int_equal(clirun(&f->run, "logs", "web", "-c", "web", NULL), 1);
	expect_err(f, "No such file or directory");
	assert_int_equal(clirun(&f->run, "logs", "web", "-c", "side", NULL), 1);
	expect_err(f, "has no log file");
	assert_int_equal(clirun(&f->run, "logs", NULL), 1);
	expect_err(f, "usage: kiyot logs POD [-c CONTAINER] [-f]");
	/* another namespace's pod of the same name is another pod */
	assert_int_equal(clirun(&f->run, "-n", "prod", "logs", "web", NULL), 1);
	expect_err(f, "pod \"web\" not found in namespace prod");
}

/* ---- delete ---- */

/* delete stops every container with its grace period, then the sandbox, then removes it. */
static void test_cli__delete_stops_then_removes(void **state)
{
	struct fix *f = *state;
	struct fpod *p = add_pod("web", "default", 1);

	add_ctr(p, "app", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 0, "");
	add_ctr(p, "side", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 0, "");
	add_pod("web", "other", 1);
	assert_int_equal(clirun(&f->run, "delete", "pod", "web", NULL), 0);
	assert_string_equal(f->run.out, "pod/web deleted\n");
	expect_calls("StopContainer app timeout 10", "StopContainer side timeout 10",
		     "StopPodSandbox web", "RemovePodSandbox web", NULL);
	assert_int_equal(fake.pods[1].ready, 1); /* the other namespace's is left */
	assert_int_equal(clirun(&f->run, "delete", "pod", "web", NULL), 1);
	expect_err(f, "pod \"web\" not found in namespace default");
	assert_int_equal(clirun(&f->run, "delete", "web", NULL), 1);
	expect_err(f, "usage: kiyot delete pod NAME");
}

/* ---- exec, attach, port-forward: what they ask before any stream ---- */

static void test_cli__exec_and_attach_arguments(void **state)
{
	struct fix *f = *state;
	struct fpod *p = add_pod("web", "default", 1);

	assert_int_equal(clirun(&f->run, "exec", NULL), 2);
	expect_err(f, "usage: kiyot exec [-i] [-t] POD [-c CONTAINER] -- COMMAND [ARG...]");
	assert_int_equal(clirun(&f->run, "exec", "web", NULL), 2);
	assert_int_equal(clirun(&f->run, "attach", "web", "extra", NULL), 2);
	expect_err(f, "usage: kiyot attach [-i] [-t] POD [-c CONTAINER]");
	assert_int_equal(clirun(&f->run, "exec", "--frob", "web", "--", "ls", NULL), 2);
	assert_int_equal(clirun(&f->run, "exec", "db", "--", "ls", NULL), 1);
	expect_err(f, "pod \"db\" not found in namespace default");
	assert_int_equal(clirun(&f->run, "exec", "web", "--", "ls", NULL), 1);
	expect_err(f, "pod web has no container");
	add_ctr(p, "app", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 0, "");
	add_ctr(p, "side", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 0, "");
	assert_int_equal(clirun(&f->run, "exec", "web", "--", "ls", NULL), 1);
	expect_err(f, "pod web has several containers; name one with -c");
	assert_int_equal(fake.n_calls, 0);
}

/* A streaming URL nobody serves: the command says it could not connect, and the sandbox id
 * names a pod as well as its name. */
static void test_cli__exec_to_a_dead_streaming_server(void **state)
{
	struct fix *f = *state;
	struct fpod *p = add_pod("web", "default", 1);
	struct fctr *c;

	c = add_ctr(p, "app", RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING, 0, "");
	snprintf(fake.exec_url, sizeof(fake.exec_url), "http://127.0.0.1:1/exec/token");
	assert_int_equal(
		clirun(&f->run, "exec", "-i", "-t", p->id, "-c", "app", "--", "ls", "-l", NULL), 1);
	assert_true(f->run.err[0] != '\0');
	assert_int_equal(fake.n_calls, 1);
	assert_int_equal(strncmp(fake.calls[0], "Exec ", 5), 0);
	assert_non_null(strstr(fake.calls[0], c->id));
	/* -t without a terminal on stdin is dropped, as kubectl does */
	assert_non_null(strstr(fake.calls[0], "ls stdin=1 tty=0"));
	assert_int_equal(clirun(&f->run, "attach", "web", NULL), 1);
	assert_string_equal(fake.calls[1], "Attach ct0100000000000000");
}

static void test_cli__port_forward_arguments(void **state)
{
	struct fix *f = *state;

	assert_int_equal(clirun(&f->run, "port-forward", "web", NULL), 2);
	expect_err(f, "usage: kiyot port-forward POD [LOCAL:]REMOTE...");
	assert_int_equal(clirun(&f->run, "port-forward", "web", "0", NULL), 2);
	expect_err(f, "\"0\": the pod's port must be 1-65535");
	assert_int_equal(clirun(&f->run, "port-forward", "web", "70000:80", NULL), 2);
	expect_err(f, "\"70000:80\": the local port must be 0-65535");
	assert_int_equal(clirun(&f->run, "port-forward", "web", "8080:http", NULL), 2);
	assert_int_equal(clirun(&f->run, "port-forward", "web", ":80", NULL), 1);
	expect_err(f, "pod \"web\" not found in namespace default");
	assert_int_equal(fake.n_calls, 0);
}

/* kiyot local-cell refuses what it cannot launch with before it touches the node. */
static void test_cli__local_cell_arguments(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *missing = xasprintf("%s/no-bootstrap.json", f->dir);

	assert_int_equal(clirun_localcell(&f->run, NULL), 2);
	expect_err(f, "usage: kiyot local-cell launch --state-dir D --id ID --bootstrap FILE");
	assert_int_equal(clirun_localcell(&f->run, "start", NULL), 2);
	assert_int_equal(clirun_localcell(&f->run, "launch", "--id", "c1", NULL), 2);
	assert_int_equal(clirun_localcell(&f->run, "terminate", "--state-dir", f->dir, NULL), 2);
	assert_int_equal(clirun_localcell(&f->run, "launch", "--frob", NULL), 2);
	assert_int_equal(clirun_localcell(&f->run, "launch", "--cpus", "zero", NULL), 2);
	expect_err(f, "--cpus: \"zero\" is not a positive number");
	assert_int_equal(clirun_localcell(&f->run, "launch", "--memory", "-5", NULL), 2);
	expect_err(f, "--memory: \"-5\" is not a byte count");
	assert_int_equal(clirun_localcell(&f->run, "launch", "--state-dir", f->dir, "--id", "c1",
					  "--bootstrap", missing, "--instance-type", "t3.nano",
					  "--bridge", "kiyot9", "--cidr", "10.99.0.0/16", "--agent",
					  "/bin/true", "--cluster-id", "x", "--cpus", "0.5",
					  "--memory", "1048576", NULL),
			 1);
	expect_err(f, "bootstrap: ");
	expect_err(f, "no-bootstrap.json");
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(test_cli__##name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(without_a_command_or_socket_says_what_to_do),
		T(run_makes_the_calls_a_kubelet_makes),
		T(run_stops_at_a_failed_init_container),
		T(run_refuses_bad_input_before_any_call),
		T(run_refuses_a_root_image_for_run_as_non_root),
		T(get_pods_summarises_each_pod),
		T(get_cells_names_each_pods_cell),
		T(logs_prints_the_containers_streams),
		T(logs_says_what_is_missing),
		T(delete_stops_then_removes),
		T(exec_and_attach_arguments),
		T(exec_to_a_dead_streaming_server),
		T(port_forward_arguments),
		T(local_cell_arguments),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
