/*
 * kiyot_fixture.c: a whole kiyot in the test process (see kiyot_fixture.h).
 */
#include "kiyot_fixture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cri/cri.h"
#include "fsutil.h"
#include "log.h"
#include "rpc.h"
#include "xalloc.h"

#define CALL_TIMEOUT_MS 30000

struct kfix *kfix_new(int boot_timeout_s)
{
	struct kfix *f = xcalloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/kiyot-unit.XXXXXX");
	if (!mkdtemp(f->dir))
		abort();
	f->sock = xasprintf("%s/kiyot.sock", f->dir);
	f->fa = fake_agent_new();
	f->fp = fake_provider_new(f->fa, 7443, boot_timeout_s);
	f->gc_interval_s = 3600;
	f->gc_grace_s = 120;
	return f;
}

static void set(char **dst, const char *v)
{
	free(*dst);
	*dst = xstrdup(v);
}

int kfix_open(struct kfix *f, struct err *err)
{
	struct kiyot *k = &f->k;
	struct rpc_server_config rc = { 0 };
	_cleanup_free_ char *addr = xasprintf("unix://%s", f->sock);
	const struct rpc_pool *pools;

	log_set_level(LOG_ERROR);
	memset(k, 0, sizeof(*k));
	kiyot_config_defaults(&k->cfg);
	if (f->config &&
	    kiyot_config_load_text(&k->cfg, f->config, strlen(f->config), "kfix.yaml", err) < 0)
		return -err->code;
	set(&k->cfg.state_dir, f->dir);
	set(&k->cfg.socket, f->sock);
	k->cfg.gc_interval_s = f->gc_interval_s;
	k->cfg.gc_grace_s = f->gc_grace_s;
	fake_provider_install(f->fp, &k->provider);
	k->agent = f->agent ? f->agent : fake_agent_client(f->fa);
	f->open = true;
	if (kiyot_open(k, err) < 0)
		return -err->code;
	rc.address = addr;
	rc.methods = cri_method_table(&rc.n_methods);
	rc.svc = k;
	pools = cri_pool_table(&rc.n_pools);
	memcpy(rc.pools, pools, rc.n_pools * sizeof(*pools));
	if (rpc_server_start(&rc, &f->srv, err) < 0)
		return -err->code;
	return rpc_channel_new(addr, &f->ch, err);
}

void kfix_close(struct kfix *f)
{
	if (!f->open)
		return;
	rpc_channel_free(f->ch);
	f->ch = NULL;
	if (f->srv)
		rpc_server_stop(f->srv);
	f->srv = NULL;
	kiyot_close(&f->k);
	kiyot_config_release(&f->k.cfg);
	f->open = false;
}

int kfix_restart(struct kfix *f, struct err *err)
{
	kfix_close(f);
	return kfix_open(f, err);
}

void kfix_free(struct kfix *f)
{
	struct err err = ERR_INIT;

	if (!f)
		return;
	kfix_close(f);
	fake_provider_free(f->fp);
	fake_agent_free(f->fa);
	fs_remove_tree(f->dir, &err);
	free(f->sock);
	free(f);
}

static int setup_with(void **state, int boot_timeout_s)
{
	struct kfix *f = kfix_new(boot_timeout_s);
	struct err err = ERR_INIT;

	if (kfix_open(f, &err) < 0) {
		fprintf(stderr, "kiyot_open: %s\n", err.msg);
		kfix_free(f);
		return -1;
	}
	*state = f;
	return 0;
}

int kfix_setup(void **state)
{
	return setup_with(state, 15);
}

int kfix_setup_boot_1s(void **state)
{
	return setup_with(state, 1);
}

int kfix_teardown(void **state)
{
	kfix_free(*state);
	return 0;
}

/* The CRI service a method belongs to. */
static const char *service_of(const char *method)
{
	static const char *const image_methods[] = { "ListImages", "ImageStatus", "PullImage",
						     "RemoveImage", "ImageFsInfo" };

	for (size_t i = 0; i < ARRAY_SIZE(image_methods); i++)
		if (strcmp(method, image_methods[i]) == 0)
			return "ImageService";
	return "RuntimeService";
}

int kfix_call(struct kfix *f, const char *method, const ProtobufCMessage *req,
	      const ProtobufCMessageDescriptor *resp_desc, void *resp, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("/runtime.v1.%s/%s", service_of(method), method);

	err_clear(err);
	return rpc_unary(f->ch, path, req, resp_desc, CALL_TIMEOUT_MS, resp, err);
}

/* The response descriptor of a RuntimeService or ImageService method. */
static const ProtobufCMessageDescriptor *resp_desc_of(const char *method)
{
	const ProtobufCServiceDescriptor *svcs[] = { &runtime__v1__runtime_service__descriptor,
						     &runtime__v1__image_service__descriptor };

	for (size_t s = 0; s < ARRAY_SIZE(svcs); s++)
		for (unsigned i = 0; i < svcs[s]->n_methods; i++)
			if (strcmp(svcs[s]->methods[i].name, method) == 0)
				return svcs[s]->methods[i].output;
	abort();
}

int kfix_call0(struct kfix *f, const char *method, const ProtobufCMessage *req, struct err *err)
{
	ProtobufCMessage *resp = NULL;
	int ret = kfix_call(f, method, req, resp_desc_of(method), &resp, err);

	if (ret == 0)
		protobuf_c_message_free_unpacked(resp, NULL);
	return ret;
}

Runtime__V1__PodSandboxConfig *kfix_pod_config(struct kfix *f, const char *name, const char *uid,
					       uint32_t attempt)
{
	Runtime__V1__PodSandboxConfig cfg = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
	Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
	Runtime__V1__PodSandboxConfig__LabelsEntry label =
		RUNTIME__V1__POD_SANDBOX_CONFIG__LABELS_ENTRY__INIT;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry note =
		RUNTIME__V1__POD_SANDBOX_CONFIG__ANNOTATIONS_ENTRY__INIT;
	Runtime__V1__PodSandboxConfig__LabelsEntry *labels[] = { &label };
	Runtime__V1__PodSandboxConfig__AnnotationsEntry *notes[] = { &note };
	_cleanup_free_ char *logs = xasprintf("%s/pods/%s", f->dir, uid);

	md.name = (char *)name;
	md.uid = (char *)uid;
	md.namespace_ = "default";
	md.attempt = attempt;
	cfg.metadata = &md;
	cfg.hostname = (char *)name;
	cfg.log_directory = logs;
	label.key = "app";
	label.value = (char *)name;
	cfg.labels = labels;
	cfg.n_labels = 1;
	note.key = "note";
	note.value = "n";
	cfg.annotations = notes;
	cfg.n_annotations = 1;
	return cri_msg_copy(&cfg.base);
}

int kfix_run_pod(struct kfix *f, const char *name, const char *uid, uint32_t attempt, char **id,
		 struct err *err)
{
	Runtime__V1__RunPodSandboxRequest req = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
	Runtime__V1__RunPodSandboxResponse *resp = NULL;
	int ret;

	req.config = kfix_pod_config(f, name, uid, attempt);
	ret = kfix_call(f, "RunPodSandbox", &req.base,
			&runtime__v1__run_pod_sandbox_response__descriptor, &resp, err);
	protobuf_c_message_free_unpacked(&req.config->base, NULL);
	if (ret < 0)
		return ret;
	*id = xstrdup(resp->pod_sandbox_id);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return 0;
}

static void *run_pod_thread(void *arg)
{
	struct kfix_runner *r = arg;

	r->ret = kfix_run_pod(r->f, r->name, r->uid, 0, &r->id, &r->err);
	return NULL;
}

void kfix_run_pod_start(struct kfix *f, struct kfix_runner *r, const char *name, const char *uid)
{
	*r = (struct kfix_runner){ .f = f, .name = name, .uid = uid, .err = ERR_INIT };
	if (pthread_create(&r->thread, NULL, run_pod_thread, r) != 0)
		abort();
}

int kfix_run_pod_wait(struct kfix_runner *r)
{
	pthread_join(r->thread, NULL);
	return r->ret;
}

int kfix_create_config(struct kfix *f, const char *sandbox_id,
		       const Runtime__V1__ContainerConfig *cfg, char **id, struct err *err)
{
	Runtime__V1__CreateContainerRequest req = RUNTIME__V1__CREATE_CONTAINER_REQUEST__INIT;
	Runtime__V1__CreateContainerResponse *resp = NULL;
	int ret;

	req.pod_sandbox_id = (char *)sandbox_id;
	req.config = (Runtime__V1__ContainerConfig *)cfg;
	ret = kfix_call(f, "CreateContainer", &req.base,
			&runtime__v1__create_container_response__descriptor, &resp, err);
	if (ret < 0)
		return ret;
	*id = xstrdup(resp->container_id);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return 0;
}

int kfix_create(struct kfix *f, const char *sandbox_id, const char *name, const char *image,
		char **id, struct err *err)
{
	Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
	Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
	_cleanup_free_ char *log_path = xasprintf("%s.log", name);

	md.name = (char *)name;
	img.image = (char *)image;
	cfg.metadata = &md;
	cfg.image = &img;
	cfg.log_path = log_path;
	return kfix_create_config(f, sandbox_id, &cfg, id, err);
}

void kfix_pod_with_container(struct kfix *f, const char *name, char **sandbox_id,
			     char **container_id)
{
	_cleanup_free_ char *uid = xasprintf("uid-%s", name);
	struct err err = ERR_INIT;

	if (kfix_run_pod(f, name, uid, 0, sandbox_id, &err) < 0 ||
	    kfix_create(f, *sandbox_id, name, "registry.test/app:1", container_id, &err) < 0 ||
	    kfix_start(f, *container_id, &err) < 0) {
		fprintf(stderr, "pod %s: %s\n", name, err.msg);
		abort();
	}
}

int kfix_start(struct kfix *f, const char *container_id, struct err *err)
{
	Runtime__V1__StartContainerRequest req = RUNTIME__V1__START_CONTAINER_REQUEST__INIT;

	req.container_id = (char *)container_id;
	return kfix_call0(f, "StartContainer", &req.base, err);
}

int kfix_stop(struct kfix *f, const char *container_id, struct err *err)
{
	Runtime__V1__StopContainerRequest req = RUNTIME__V1__STOP_CONTAINER_REQUEST__INIT;

	req.container_id = (char *)container_id;
	return kfix_call0(f, "StopContainer", &req.base, err);
}

int kfix_remove(struct kfix *f, const char *container_id, struct err *err)
{
	Runtime__V1__RemoveContainerRequest req = RUNTIME__V1__REMOVE_CONTAINER_REQUEST__INIT;

	req.container_id = (char *)container_id;
	return kfix_call0(f, "RemoveContainer", &req.base, err);
}

int kfix_stop_pod(struct kfix *f, const char *sandbox_id, struct err *err)
{
	Runtime__V1__StopPodSandboxRequest req = RUNTIME__V1__STOP_POD_SANDBOX_REQUEST__INIT;

	req.pod_sandbox_id = (char *)sandbox_id;
	return kfix_call0(f, "StopPodSandbox", &req.base, err);
}

int kfix_remove_pod(struct kfix *f, const char *sandbox_id, struct err *err)
{
	Runtime__V1__RemovePodSandboxRequest req = RUNTIME__V1__REMOVE_POD_SANDBOX_REQUEST__INIT;

	req.pod_sandbox_id = (char *)sandbox_id;
	return kfix_call0(f, "RemovePodSandbox", &req.base, err);
}

int kfix_pod_state(struct kfix *f, const char *sandbox_id, struct err *err)
{
	Runtime__V1__PodSandboxStatusRequest req = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
	Runtime__V1__PodSandboxStatusResponse *resp = NULL;
	int state;

	req.pod_sandbox_id = (char *)sandbox_id;
	if (kfix_call(f, "PodSandboxStatus", &req.base,
		      &runtime__v1__pod_sandbox_status_response__descriptor, &resp, err) < 0)
		return -1;
	state = (int)resp->status->state;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return state;
}

int kfix_container_state(struct kfix *f, const char *container_id, struct err *err)
{
	Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
	Runtime__V1__ContainerStatusResponse *resp = NULL;
	int state;

	req.container_id = (char *)container_id;
	if (kfix_call(f, "ContainerStatus", &req.base,
		      &runtime__v1__container_status_response__descriptor, &resp, err) < 0)
		return -1;
	state = (int)resp->status->state;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return state;
}

char *kfix_cell_of(struct kfix *f, const char *sandbox_id)
{
	struct sandbox *sb;
	char *cell = NULL;

	records_lock(f->k.records);
	sb = records_sandbox(f->k.records, sandbox_id);
	if (sb)
		cell = xstrdup(sb->cell_id);
	records_unlock(f->k.records);
	return cell;
}

bool kfix_file_is(const char *path, const char *want)
{
	_cleanup_free_ char *text = NULL;
	struct err err = ERR_INIT;
	size_t len = 0;

	if (fs_read_file(path, 1 << 20, &text, &len, &err) < 0)
		return false;
	return len == strlen(want) && memcmp(text, want, len) == 0;
}
