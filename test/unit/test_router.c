/*
 * Unit tests for kiyot/cri/router.c: kiyot beside a fallback CRI runtime. kiyot's CRI server
 * (crihost.h) and a fake fallback runtime, a second gRPC server of this process on a unix
 * socket, that records every call it is sent and answers with items of its own. A client
 * calls kiyot as the kubelet would and the test checks which runtime answered.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "clock.h"
#include "crihost.h"

#define FB_MAX_SEEN 128
#define FB_EVENTS_MAX 1000 /* events a fallback's stream sends at most, one every 10 ms */

/* The fake fallback runtime. */
struct fallback {
	char addr[160];
	struct rpc_method methods[64];
	struct rpc_server *srv;
	pthread_mutex_t lock;
	char seen[FB_MAX_SEEN][160]; /* "<Method> <id or image>" per call, in order */
	size_t n_seen;
	int no_events; /* serves no GetContainerEvents (containerd before 1.7) */
};

static struct fallback *fb_of(void *svc)
{
	return svc;
}

static void fb_record(struct fallback *fb, const char *what, const char *arg)
{
	pthread_mutex_lock(&fb->lock);
	if (fb->n_seen < FB_MAX_SEEN)
		snprintf(fb->seen[fb->n_seen++], sizeof(fb->seen[0]), "%s %s", what, arg);
	pthread_mutex_unlock(&fb->lock);
}

/* How many calls the fallback saw exactly as "<Method> <arg>". */
static int fb_saw(struct fallback *fb, const char *call)
{
	int n = 0;

	pthread_mutex_lock(&fb->lock);
	for (size_t i = 0; i < fb->n_seen; i++)
		n += strcmp(fb->seen[i], call) == 0;
	pthread_mutex_unlock(&fb->lock);
	return n;
}

/* How many calls the fallback saw, but the event relay's. */
static size_t fb_calls(struct fallback *fb)
{
	size_t n = 0;

	pthread_mutex_lock(&fb->lock);
	for (size_t i = 0; i < fb->n_seen; i++)
		n += strncmp(fb->seen[i], "GetContainerEvents", 18) != 0;
	pthread_mutex_unlock(&fb->lock);
	return n;
}

/* The string field name of m, or NULL when it has none. */
static const char *string_field(const ProtobufCMessage *m, const char *name)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);

	if (!f || f->type != PROTOBUF_C_TYPE_STRING)
		return NULL;
	return *(const char *const *)((const char *)m + f->offset);
}

/* Any method: recorded as "<Method> <container_id or pod_sandbox_id>", answered empty. */
static int fb_any(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		  ProtobufCMessage *resp, struct err *err)
{
	const char *name = req->descriptor->short_name; /* "<Method>Request" */
	const char *id = string_field(req, "container_id");
	char method[96];

	(void)call;
	(void)resp;
	(void)err;
	if (!id)
		id = string_field(req, "pod_sandbox_id");
	snprintf(method, sizeof(method), "%.*s", (int)(strlen(name) - strlen("Request")), name);
	fb_record(fb_of(svc), method, id ? id : "");
	return 0;
}

static int fb_run_pod_sandbox(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			      ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__RunPodSandboxRequest *r = (const void *)req;
	Runtime__V1__RunPodSandboxResponse *out = (void *)resp;
	char what[96];

	(void)call;
	(void)err;
	/* a field the fallback knows and kiyot does not would come as an unknown one: count */
	snprintf(what, sizeof(what), "%s unknown=%u", r->config->metadata->name,
		 req->n_unknown_fields);
	fb_record(fb_of(svc), "RunPodSandbox", what);
	out->pod_sandbox_id = "fb-pod-1";
	return 0;
}

static int fb_list_pod_sandbox(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			       ProtobufCMessage *resp, struct err *err)
{
	Runtime__V1__ListPodSandboxResponse *out = (void *)resp;

	(void)req;
	(void)err;
	fb_record(fb_of(svc), "ListPodSandbox", "");
	out->items = rpc_alloc(call, 2 * sizeof(*out->items));
	for (int i = 0; i < 2; i++) {
		out->items[i] = rpc_msg_new(call, &runtime__v1__pod_sandbox__descriptor);
		out->items[i]->id = i ? "fb-pod-2" : "fb-pod-1";
	}
	out->n_items = 2;
	return 0;
}

static int fb_list_containers(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			      ProtobufCMessage *resp, struct err *err)
{
	Runtime__V1__ListContainersResponse *out = (void *)resp;

	(void)req;
	(void)err;
	fb_record(fb_of(svc), "ListContainers", "");
	out->containers = rpc_alloc(call, sizeof(*out->containers));
	out->containers[0] = rpc_msg_new(call, &runtime__v1__container__descriptor);
	out->containers[0]->id = "fb-ctr-1";
	out->n_containers = 1;
	return 0;
}

static int fb_list_images(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			  ProtobufCMessage *resp, struct err *err)
{
	Runtime__V1__ListImagesResponse *out = (void *)resp;

	(void)req;
	(void)err;
	fb_record(fb_of(svc), "ListImages", "");
	out->images = rpc_alloc(call, sizeof(*out->images));
	out->images[0] = rpc_msg_new(call, &runtime__v1__image__descriptor);
	out->images[0]->id = "sha256:fbimage";
	out->n_images = 1;
	return 0;
}

static int fb_list_container_stats(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
				   ProtobufCMessage *resp, struct err *err)
{
	Runtime__V1__ListContainerStatsResponse *out = (void *)resp;

	(void)req;
	(void)err;
	fb_record(fb_of(svc), "ListContainerStats", "");
	out->stats = rpc_alloc(call, sizeof(*out->stats));
	out->stats[0] = rpc_msg_new(call, &runtime__v1__container_stats__descriptor);
	out->stats[0]->attributes =
		rpc_msg_new(call, &runtime__v1__container_attributes__descriptor);
	out->stats[0]->attributes->id = "fb-ctr-1";
	out->n_stats = 1;
	return 0;
}

static int fb_list_pod_sandbox_stats(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
				     ProtobufCMessage *resp, struct err *err)
{
	Runtime__V1__ListPodSandboxStatsResponse *out = (void *)resp;

	(void)req;
	(void)err;
	fb_record(fb_of(svc), "ListPodSandboxStats", "");
	out->stats = rpc_alloc(call, sizeof(*out->stats));
	out->stats[0] = rpc_msg_new(call, &runtime__v1__pod_sandbox_stats__descriptor);
	out->stats[0]->attributes =
		rpc_msg_new(call, &runtime__v1__pod_sandbox_attributes__descriptor);
	out->stats[0]->attributes->id = "fb-pod-1";
	out->n_stats = 1;
	return 0;
}

static Runtime__V1__RuntimeCondition *fb_condition(struct rpc_call *call, const char *type,
						   int status, const char *reason,
						   const char *message)
{
	Runtime__V1__RuntimeCondition *c =
		rpc_msg_new(call, &runtime__v1__runtime_condition__descriptor);

	c->type = (char *)type;
	c->status = status;
	c->reason = (char *)reason;
	c->message = (char *)message;
	return c;
}

/* Runtime ready, network not (no CNI yet), and a condition of its own. */
static int fb_status(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		     ProtobufCMessage *resp, struct err *err)
{
	Runtime__V1__StatusResponse *out = (void *)resp;

	(void)req;
	(void)err;
	fb_record(fb_of(svc), "Status", "");
	out->status = rpc_msg_new(call, &runtime__v1__runtime_status__descriptor);
	out->status->conditions = rpc_alloc(call, 3 * sizeof(*out->status->conditions));
	out->status->conditions[0] = fb_condition(call, "RuntimeReady", 1, "", "");
	out->status->conditions[1] = fb_condition(call, "NetworkReady", 0, "NetworkPluginNotReady",
						  "cni config uninitialized");
	out->status->conditions[2] = fb_condition(call, "FallbackOnly", 1, "", "");
	out->status->n_conditions = 3;
	out->info = rpc_alloc(call, sizeof(*out->info));
	out->info[0] = rpc_msg_new(call, &runtime__v1__status_response__info_entry__descriptor);
	out->info[0]->key = "config";
	out->info[0]->value = "{\"cni\":1}";
	out->n_info = 1;
	return 0;
}

static int fb_runtime_config(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			     ProtobufCMessage *resp, struct err *err)
{
	Runtime__V1__RuntimeConfigResponse *out = (void *)resp;

	(void)req;
	(void)err;
	fb_record(fb_of(svc), "RuntimeConfig", "");
	out->linux = rpc_msg_new(call, &runtime__v1__linux_runtime_configuration__descriptor);
	out->linux->cgroup_driver = RUNTIME__V1__CGROUP_DRIVER__SYSTEMD;
	return 0;
}

static int fb_update_runtime_config(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
				    ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__UpdateRuntimeConfigRequest *r = (const void *)req;

	(void)call;
	(void)resp;
	(void)err;
	fb_record(fb_of(svc), "UpdateRuntimeConfig", r->runtime_config->network_config->pod_cidr);
	return 0;
}

static int fb_exec_sync(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ExecSyncRequest *r = (const void *)req;
	Runtime__V1__ExecSyncResponse *out = (void *)resp;

	(void)call;
	(void)err;
	fb_record(fb_of(svc), "ExecSync", r->container_id);
	out->stdout.data = (uint8_t *)"from fallback";
	out->stdout.len = strlen("from fallback");
	out->exit_code = 3;
	return 0;
}

static const char *image_of(const Runtime__V1__ImageSpec *spec)
{
	return spec ? spec->image : "";
}

static int fb_image_status(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			   ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ImageStatusRequest *r = (const void *)req;
	Runtime__V1__ImageStatusResponse *out = (void *)resp;

	(void)err;
	fb_record(fb_of(svc), "ImageStatus", image_of(r->image));
	out->image = rpc_msg_new(call, &runtime__v1__image__descriptor);
	out->image->id = "sha256:fbimage";
	return 0;
}

static int fb_pull_image(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			 ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__PullImageRequest *r = (const void *)req;
	Runtime__V1__PullImageResponse *out = (void *)resp;

	(void)call;
	(void)err;
	fb_record(fb_of(svc), "PullImage", image_of(r->image));
	out->image_ref = "sha256:fbpulled";
	return 0;
}

/* The fallback has every image but "absent". */
static int fb_remove_image(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			   ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__RemoveImageRequest *r = (const void *)req;

	(void)call;
	(void)resp;
	fb_record(fb_of(svc), "RemoveImage", image_of(r->image));
	if (strcmp(image_of(r->image), "absent") == 0)
		return err_set(err, ENOENT, "image \"absent\": not found");
	if (strcmp(image_of(r->image), "in-use") == 0)
		return err_set(err, EBUSY, "image \"in-use\" is used by a container");
	return 0;
}

static int fb_image_fs_info(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			    ProtobufCMessage *resp, struct err *err)
{
	Runtime__V1__ImageFsInfoResponse *out = (void *)resp;

	(void)req;
	(void)err;
	fb_record(fb_of(svc), "ImageFsInfo", "");
	out->image_filesystems = rpc_alloc(call, sizeof(*out->image_filesystems));
	out->image_filesystems[0] = rpc_msg_new(call, &runtime__v1__filesystem_usage__descriptor);
	out->image_filesystems[0]->fs_id =
		rpc_msg_new(call, &runtime__v1__filesystem_identifier__descriptor);
	out->image_filesystems[0]->fs_id->mountpoint = "/var/lib/containerd";
	out->n_image_filesystems = 1;
	return 0;
}

/* Container events of the fallback's own pods, one every 10 ms while the client listens. */
static int fb_events(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		     ProtobufCMessage *resp, struct err *err)
{
	(void)req;
	(void)resp;
	fb_record(fb_of(svc), "GetContainerEvents", "");
	for (int i = 0; i < FB_EVENTS_MAX && !rpc_cancelled(call); i++) {
		Runtime__V1__ContainerEventResponse ev =
			RUNTIME__V1__CONTAINER_EVENT_RESPONSE__INIT;
		Runtime__V1__PodSandboxStatus st = RUNTIME__V1__POD_SANDBOX_STATUS__INIT;

		ev.container_id = "fb-ctr-1";
		ev.container_event_type =
			RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STARTED_EVENT;
		st.id = "fb-pod-1";
		ev.pod_sandbox_status = &st;
		if (rpc_send(call, &ev.base, err) < 0)
			return -err->code;
		usleep(10000);
	}
	return 0;
}

static const struct {
	const char *path;
	rpc_handler_fn fn;
} fb_special[] = {
	{ CRI_RT("RunPodSandbox"), fb_run_pod_sandbox },
	{ CRI_RT("ListPodSandbox"), fb_list_pod_sandbox },
	{ CRI_RT("ListContainers"), fb_list_containers },
	{ CRI_RT("ListContainerStats"), fb_list_container_stats },
	{ CRI_RT("ListPodSandboxStats"), fb_list_pod_sandbox_stats },
	{ CRI_RT("Status"), fb_status },
	{ CRI_RT("RuntimeConfig"), fb_runtime_config },
	{ CRI_RT("UpdateRuntimeConfig"), fb_update_runtime_config },
	{ CRI_RT("ExecSync"), fb_exec_sync },
	{ CRI_RT("GetContainerEvents"), fb_events },
	{ CRI_IMG("ListImages"), fb_list_images },
	{ CRI_IMG("ImageStatus"), fb_image_status },
	{ CRI_IMG("PullImage"), fb_pull_image },
	{ CRI_IMG("RemoveImage"), fb_remove_image },
	{ CRI_IMG("ImageFsInfo"), fb_image_fs_info },
};

/* Serves CRI at dir/fallback.sock: kiyot's own method table with the fake's handlers. */
static void fb_start(struct fallback *fb, const char *dir)
{
	struct rpc_server_config cfg = { 0 };
	struct err err = ERR_INIT;
	size_t n;
	const struct rpc_method *t = cri_method_table(&n);
	size_t kept = 0;

	pthread_mutex_init(&fb->lock, NULL);
	snprintf(fb->addr, sizeof(fb->addr), "unix://%s/fallback.sock", dir);
	assert_true(n <= ARRAY_SIZE(fb->methods));
	for (size_t i = 0; i < n; i++) {
		if (fb->no_events && strcmp(t[i].path, CRI_RT("GetContainerEvents")) == 0)
			continue;
		fb->methods[kept] = t[i];
		fb->methods[kept].handler = fb_any;
		fb->methods[kept].pool = 0;
		for (size_t j = 0; j < ARRAY_SIZE(fb_special); j++)
			if (strcmp(t[i].path, fb_special[j].path) == 0)
				fb->methods[kept].handler = fb_special[j].fn;
		kept++;
	}
	cfg.address = fb->addr;
	cfg.methods = fb->methods;
	cfg.n_methods = kept;
	cfg.svc = fb;
	if (rpc_server_start(&cfg, &fb->srv, &err) < 0)
		fail_msg("fallback: %s", err.msg);
}

static void fb_stop(struct fallback *fb)
{
	rpc_server_stop(fb->srv);
	fb->srv = NULL;
}

/* kiyot with a fallback runtime. */
struct fix {
	struct crihost h;
	struct fallback fb;
};

static int setup_common(void **state, int no_events)
{
	struct fix *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;

	if (crihost_start(&f->h) < 0)
		return -1;
	f->fb.no_events = no_events;
	fb_start(&f->fb, f->h.dir);
	if (router_open(&f->h.k, f->fb.addr, &err) < 0) {
		fprintf(stderr, "router_open: %s\n", err.msg);
		return -1;
	}
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_common(state, 0);
}

static int setup_no_events(void **state)
{
	return setup_common(state, 1);
}

static int teardown(void **state)
{
	struct fix *f = *state;

	crihost_stop(&f->h); /* closes the router before the fallback goes */
	if (f->fb.srv)
		fb_stop(&f->fb);
	pthread_mutex_destroy(&f->fb.lock);
	free(f);
	return 0;
}

/* kiyot alone: no fallback runtime configured. */
static int setup_alone(void **state)
{
	struct crihost *h = xcalloc(1, sizeof(*h));

	if (crihost_start(h) < 0)
		return -1;
	*state = h;
	return 0;
}

static int teardown_alone(void **state)
{
	crihost_stop(*state);
	free(*state);
	return 0;
}

#define KIYOT_SB "5a1d0000000000000000000000000000000000000000000000000000000000aa"
#define KIYOT_CTR "c0de0000000000000000000000000000000000000000000000000000000000bb"

/* A sandbox config for pod name, with the target-runtime annotation when kiyot is set. */
struct pod {
	Runtime__V1__PodSandboxConfig cfg;
	Runtime__V1__PodSandboxMetadata md;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry ann;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry *anns[1];
};

static void pod_init(struct pod *p, const char *name, int kiyot)
{
	runtime__v1__pod_sandbox_config__init(&p->cfg);
	runtime__v1__pod_sandbox_metadata__init(&p->md);
	runtime__v1__pod_sandbox_config__annotations_entry__init(&p->ann);
	p->md.name = (char *)name;
	p->md.namespace_ = "default";
	p->md.uid = "uid-web";
	p->cfg.metadata = &p->md;
	p->ann.key = ROUTER_ANNOTATION;
	p->ann.value = ROUTER_TARGET;
	p->anns[0] = &p->ann;
	if (kiyot) {
		p->cfg.annotations = p->anns;
		p->cfg.n_annotations = 1;
	}
}

static void test_router__open_takes_only_unix_endpoints(void **state)
{
	struct crihost *h = *state;
	struct err err = ERR_INIT;

	assert_int_equal(router_open(&h->k, "tcp://127.0.0.1:1234", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "\"tcp://127.0.0.1:1234\" is not a unix socket endpoint"));
	assert_non_null(strstr(err.msg, "unix:///run/containerd/containerd.sock"));
	assert_int_equal(router_open(&h->k, "unix:///", &err), -EINVAL);
	assert_null(h->k.router);
	router_close(&h->k); /* without a router: nothing to do */
}

static void test_router__wants_kiyot_only_for_the_annotation(void **state)
{
	struct pod p;

	(void)state;
	pod_init(&p, "web", 1);
	assert_true(router_wants_kiyot((void **)p.cfg.annotations, p.cfg.n_annotations));
	p.ann.value = "runc";
	assert_false(router_wants_kiyot((void **)p.cfg.annotations, p.cfg.n_annotations));
	p.ann.key = "kubernetes.io/target";
	p.ann.value = ROUTER_TARGET;
	assert_false(router_wants_kiyot((void **)p.cfg.annotations, p.cfg.n_annotations));
	assert_false(router_wants_kiyot(NULL, 0));
}

/* Without a fallback kiyot answers every method itself: its version, its cgroup driver, and
 * UNIMPLEMENTED for what it does not serve. */
static void test_router__alone_kiyot_answers_everything(void **state)
{
	struct crihost *h = *state;
	Runtime__V1__VersionRequest vreq = RUNTIME__V1__VERSION_REQUEST__INIT;
	Runtime__V1__VersionResponse *v = NULL;
	Runtime__V1__RuntimeConfigRequest rcreq = RUNTIME__V1__RUNTIME_CONFIG_REQUEST__INIT;
	Runtime__V1__RuntimeConfigResponse *rc = NULL;
	Runtime__V1__ListMetricDescriptorsRequest mreq =
		RUNTIME__V1__LIST_METRIC_DESCRIPTORS_REQUEST__INIT;
	Runtime__V1__ListPodSandboxMetricsRequest pmreq =
		RUNTIME__V1__LIST_POD_SANDBOX_METRICS_REQUEST__INIT;
	Runtime__V1__CheckpointContainerRequest ckreq =
		RUNTIME__V1__CHECKPOINT_CONTAINER_REQUEST__INIT;
	ProtobufCMessage *none = NULL;
	struct err err;

	assert_int_equal(crihost_call(h, CRI_RT("Version"), &vreq.base,
				      &runtime__v1__version_response__descriptor, &v, &err),
			 0);
	assert_string_equal(v->runtime_name, "kiyot");
	assert_string_equal(v->runtime_api_version, "v1");
	protobuf_c_message_free_unpacked(&v->base, NULL);

	assert_int_equal(crihost_call(h, CRI_RT("RuntimeConfig"), &rcreq.base,
				      &runtime__v1__runtime_config_response__descriptor, &rc, &err),
			 0);
	assert_int_equal(rc->linux->cgroup_driver, RUNTIME__V1__CGROUP_DRIVER__CGROUPFS);
	protobuf_c_message_free_unpacked(&rc->base, NULL);

	assert_int_equal(crihost_call(h, CRI_RT("ListMetricDescriptors"), &mreq.base,
				      &runtime__v1__list_metric_descriptors_response__descriptor,
				      &none, &err),
			 -ENOSYS);
	assert_non_null(strstr(err.msg, "kiyot does not serve this method yet"));
	assert_int_equal(crihost_call(h, CRI_RT("ListPodSandboxMetrics"), &pmreq.base,
				      &runtime__v1__list_pod_sandbox_metrics_response__descriptor,
				      &none, &err),
			 -ENOSYS);
	ckreq.container_id = KIYOT_CTR;
	assert_int_equal(crihost_call(h, CRI_RT("CheckpointContainer"), &ckreq.base,
				      &runtime__v1__checkpoint_container_response__descriptor,
				      &none, &err),
			 -ENOSYS);
}

/* Status without a fallback: both conditions true; verbose adds kiyot's configuration. */
static void test_router__alone_status_is_kiyots(void **state)
{
	struct crihost *h = *state;
	Runtime__V1__StatusRequest req = RUNTIME__V1__STATUS_REQUEST__INIT;
	Runtime__V1__StatusResponse *st = NULL;
	struct err err;

	req.verbose = 1;
	assert_int_equal(crihost_call(h, CRI_RT("Status"), &req.base,
				      &runtime__v1__status_response__descriptor, &st, &err),
			 0);
	assert_int_equal(st->status->n_conditions, 2);
	assert_string_equal(st->status->conditions[0]->type, "RuntimeReady");
	assert_true(st->status->conditions[0]->status);
	assert_string_equal(st->status->conditions[1]->type, "NetworkReady");
	assert_true(st->status->conditions[1]->status);
	assert_int_equal(st->n_info, 2);
	assert_string_equal(st->info[0]->key, "config");
	assert_string_equal(st->info[0]->value,
			    "{\"provider\":\"local\",\"region\":\"us-east-1\",\"clusterId\":"
			    "\"cluster-test\",\"cellCidr\":\"10.77.0.0/16\"}");
	/* its cells, for kiyot get cells: none here */
	assert_string_equal(st->info[1]->key, "cells");
	assert_string_equal(st->info[1]->value, "[]");
	protobuf_c_message_free_unpacked(&st->base, NULL);
}

/* A pod without the annotation runs in the fallback, as the kubelet sent it (a field kiyot
 * does not know included); an annotated one is kiyot's (here: a retry of a sandbox kiyot has,
 * answered from its record). */
static void test_router__run_pod_sandbox_goes_by_the_annotation(void **state)
{
	struct fix *f = *state;
	Runtime__V1__RunPodSandboxRequest req = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
	Runtime__V1__RunPodSandboxResponse *resp = NULL;
	ProtobufCMessageUnknownField extra = { 0 };
	struct pod p;
	struct err err;

	pod_init(&p, "plain", 0);
	req.config = &p.cfg;
	extra.tag = 99;
	extra.wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
	extra.len = 4; /* protobuf-c keeps a length-prefixed field's data with its length */
	extra.data = (uint8_t *)"\x03new";
	req.base.unknown_fields = &extra;
	req.base.n_unknown_fields = 1;
	assert_int_equal(crihost_call(&f->h, CRI_RT("RunPodSandbox"), &req.base,
				      &runtime__v1__run_pod_sandbox_response__descriptor, &resp,
				      &err),
			 0);
	assert_string_equal(resp->pod_sandbox_id, "fb-pod-1");
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	assert_int_equal(fb_saw(&f->fb, "RunPodSandbox plain unknown=1"), 1);

	crihost_add_sandbox(&f->h, KIYOT_SB, "web", SANDBOX_READY, "cell-1");
	pod_init(&p, "web", 1);
	req.base.n_unknown_fields = 0;
	req.base.unknown_fields = NULL;
	assert_int_equal(crihost_call(&f->h, CRI_RT("RunPodSandbox"), &req.base,
				      &runtime__v1__run_pod_sandbox_response__descriptor, &resp,
				      &err),
			 0);
	assert_string_equal(resp->pod_sandbox_id, KIYOT_SB);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	assert_int_equal(fb_calls(&f->fb), 1);
}

/* Every method that names one sandbox or container: an id kiyot does not hold is the
 * fallback's, and the call reaches it with that id. */
static void test_router__unknown_ids_are_the_fallbacks(void **state)
{
	static const struct {
		const char *method;
		const char *field;
	} by_id[] = {
		{ "StopPodSandbox", "pod_sandbox_id" },
		{ "RemovePodSandbox", "pod_sandbox_id" },
		{ "PodSandboxStatus", "pod_sandbox_id" },
		{ "CreateContainer", "pod_sandbox_id" },
		{ "PodSandboxStats", "pod_sandbox_id" },
		{ "PortForward", "pod_sandbox_id" },
		{ "StartContainer", "container_id" },
		{ "StopContainer", "container_id" },
		{ "RemoveContainer", "container_id" },
		{ "ContainerStatus", "container_id" },
		{ "UpdateContainerResources", "container_id" },
		{ "ReopenContainerLog", "container_id" },
		{ "Exec", "container_id" },
		{ "Attach", "container_id" },
		{ "ContainerStats", "container_id" },
		{ "CheckpointContainer", "container_id" },
	};
	struct fix *f = *state;
	size_t n;
	const struct rpc_method *t = cri_method_table(&n);

	crihost_add_sandbox(&f->h, KIYOT_SB, "web", SANDBOX_READY, "cell-1");
	crihost_add_container(&f->h, KIYOT_CTR, KIYOT_SB, "app", "busybox", CTR_RUNNING);
	for (size_t i = 0; i < ARRAY_SIZE(by_id); i++) {
		_cleanup_free_ char *path = xasprintf(CRI_RT("%s"), by_id[i].method);
		_cleanup_free_ char *seen = xasprintf("%s fb-id-%zu", by_id[i].method, i);
		_cleanup_free_ char *id = xasprintf("fb-id-%zu", i);
		const struct rpc_method *m = NULL;
		union {
			ProtobufCMessage base;
			char bytes[1024];
		} req;
		const ProtobufCFieldDescriptor *fd;
		ProtobufCMessage *resp = NULL;
		struct err err;

		for (size_t j = 0; j < n; j++)
			if (strcmp(t[j].path, path) == 0)
				m = &t[j];
		assert_non_null(m);
		assert_true(m->req->sizeof_message <= sizeof(req.bytes));
		protobuf_c_message_init(m->req, &req);
		fd = protobuf_c_message_descriptor_get_field_by_name(m->req, by_id[i].field);
		assert_non_null(fd);
		*(char **)(req.bytes + fd->offset) = id;
		if (crihost_call(&f->h, path, &req.base, m->resp, &resp, &err) < 0)
			fail_msg("%s: %s", path, err.msg);
		protobuf_c_message_free_unpacked(resp, NULL);
		if (fb_saw(&f->fb, seen) != 1)
			fail_msg("%s did not reach the fallback as \"%s\"", path, seen);
	}
}

/* Ids kiyot holds, whole or a unique prefix, are answered by kiyot from its records. */
static void test_router__kiyots_ids_stay_with_kiyot(void **state)
{
	struct fix *f = *state;
	Runtime__V1__PodSandboxStatusRequest sreq = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
	Runtime__V1__PodSandboxStatusResponse *sresp = NULL;
	Runtime__V1__ContainerStatusRequest creq = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
	Runtime__V1__ContainerStatusResponse *cresp = NULL;
	size_t before;
	struct err err;

	crihost_add_sandbox(&f->h, KIYOT_SB, "web", SANDBOX_READY, "cell-1");
	crihost_add_container(&f->h, KIYOT_CTR, KIYOT_SB, "app", "busybox", CTR_CREATED);
	before = fb_calls(&f->fb);
	sreq.pod_sandbox_id = "5a1d"; /* a prefix, as crictl takes */
	assert_int_equal(crihost_call(&f->h, CRI_RT("PodSandboxStatus"), &sreq.base,
				      &runtime__v1__pod_sandbox_status_response__descriptor, &sresp,
				      &err),
			 0);
	assert_string_equal(sresp->status->id, KIYOT_SB);
	assert_string_equal(sresp->status->metadata->name, "web");
	assert_string_equal(sresp->status->network->ip, "10.77.0.2");
	protobuf_c_message_free_unpacked(&sresp->base, NULL);
	creq.container_id = KIYOT_CTR;
	assert_int_equal(crihost_call(&f->h, CRI_RT("ContainerStatus"), &creq.base,
				      &runtime__v1__container_status_response__descriptor, &cresp,
				      &err),
			 0);
	assert_string_equal(cresp->status->id, KIYOT_CTR);
	assert_int_equal(cresp->status->state, RUNTIME__V1__CONTAINER_STATE__CONTAINER_CREATED);
	protobuf_c_message_free_unpacked(&cresp->base, NULL);
	/* an empty id is kiyot's to refuse, not the fallback's */
	creq.container_id = "";
	assert_true(crihost_call(&f->h, CRI_RT("ContainerStatus"), &creq.base,
				 &runtime__v1__container_status_response__descriptor, &cresp,
				 &err) < 0);
	assert_int_equal(fb_calls(&f->fb), before);
}

/* ExecSync and StopContainer of the fallback's containers carry its answer back. */
static void test_router__exec_sync_of_a_fallback_container(void **state)
{
	struct fix *f = *state;
	Runtime__V1__ExecSyncRequest req = RUNTIME__V1__EXEC_SYNC_REQUEST__INIT;
	Runtime__V1__ExecSyncResponse *resp = NULL;
	Runtime__V1__StopContainerRequest sreq = RUNTIME__V1__STOP_CONTAINER_REQUEST__INIT;
	Runtime__V1__StopContainerResponse *sresp = NULL;
	char *cmd[] = { "true" };
	struct err err;

	req.container_id = "fb-ctr-1";
	req.cmd = cmd;
	req.n_cmd = 1;
	req.timeout = 5;
	assert_int_equal(crihost_call(&f->h, CRI_RT("ExecSync"), &req.base,
				      &runtime__v1__exec_sync_response__descriptor, &resp, &err),
			 0);
	assert_int_equal(resp->exit_code, 3);
	assert_memory_equal(resp->stdout.data, "from fallback", resp->stdout.len);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	req.timeout = 0; /* no timeout: runs as long as it takes */
	assert_int_equal(crihost_call(&f->h, CRI_RT("ExecSync"), &req.base,
				      &runtime__v1__exec_sync_response__descriptor, &resp, &err),
			 0);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	assert_int_equal(fb_saw(&f->fb, "ExecSync fb-ctr-1"), 2);
	sreq.container_id = "fb-ctr-1";
	sreq.timeout = 30;
	assert_int_equal(crihost_call(&f->h, CRI_RT("StopContainer"), &sreq.base,
				      &runtime__v1__stop_container_response__descriptor, &sresp,
				      &err),
			 0);
	protobuf_c_message_free_unpacked(&sresp->base, NULL);
	assert_int_equal(fb_saw(&f->fb, "StopContainer fb-ctr-1"), 1);
}

/* List calls answer both runtimes' items, kiyot's first. */
static void test_router__lists_merge_both_runtimes(void **state)
{
	struct fix *f = *state;
	Runtime__V1__ListPodSandboxRequest preq = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
	Runtime__V1__ListPodSandboxResponse *pods = NULL;
	Runtime__V1__ListContainersRequest creq = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
	Runtime__V1__ListContainersResponse *ctrs = NULL;
	Runtime__V1__ListImagesRequest ireq = RUNTIME__V1__LIST_IMAGES_REQUEST__INIT;
	Runtime__V1__ListImagesResponse *imgs = NULL;
	Runtime__V1__ListContainerStatsRequest csreq =
		RUNTIME__V1__LIST_CONTAINER_STATS_REQUEST__INIT;
	Runtime__V1__ListContainerStatsResponse *cstats = NULL;
	Runtime__V1__ListPodSandboxStatsRequest psreq =
		RUNTIME__V1__LIST_POD_SANDBOX_STATS_REQUEST__INIT;
	Runtime__V1__ListPodSandboxStatsResponse *pstats = NULL;
	struct err err;

	/* not ready, so the stats calls ask no cell */
	crihost_add_sandbox(&f->h, KIYOT_SB, "web", SANDBOX_NOTREADY, "");
	crihost_add_container(&f->h, KIYOT_CTR, KIYOT_SB, "app", "busybox", CTR_EXITED);
	crihost_add_image(&f->h, "sha256:kiyotimage", "docker.io/library/busybox:latest", "", 10,
			  "");
	assert_int_equal(crihost_call(&f->h, CRI_RT("ListPodSandbox"), &preq.base,
				      &runtime__v1__list_pod_sandbox_response__descriptor, &pods,
				      &err),
			 0);
	assert_int_equal(pods->n_items, 3);
	assert_string_equal(pods->items[0]->id, KIYOT_SB);
	assert_string_equal(pods->items[1]->id, "fb-pod-1");
	assert_string_equal(pods->items[2]->id, "fb-pod-2");
	protobuf_c_message_free_unpacked(&pods->base, NULL);
	assert_int_equal(crihost_call(&f->h, CRI_RT("ListContainers"), &creq.base,
				      &runtime__v1__list_containers_response__descriptor, &ctrs,
				      &err),
			 0);
	assert_int_equal(ctrs->n_containers, 2);
	assert_string_equal(ctrs->containers[0]->id, KIYOT_CTR);
	assert_string_equal(ctrs->containers[1]->id, "fb-ctr-1");
	protobuf_c_message_free_unpacked(&ctrs->base, NULL);
	assert_int_equal(crihost_call(&f->h, CRI_IMG("ListImages"), &ireq.base,
				      &runtime__v1__list_images_response__descriptor, &imgs, &err),
			 0);
	assert_int_equal(imgs->n_images, 2);
	assert_string_equal(imgs->images[0]->id, "sha256:kiyotimage");
	assert_string_equal(imgs->images[1]->id, "sha256:fbimage");
	protobuf_c_message_free_unpacked(&imgs->base, NULL);
	assert_int_equal(crihost_call(&f->h, CRI_RT("ListContainerStats"), &csreq.base,
				      &runtime__v1__list_container_stats_response__descriptor,
				      &cstats, &err),
			 0);
	assert_int_equal(cstats->n_stats, 1);
	assert_string_equal(cstats->stats[0]->attributes->id, "fb-ctr-1");
	protobuf_c_message_free_unpacked(&cstats->base, NULL);
	assert_int_equal(crihost_call(&f->h, CRI_RT("ListPodSandboxStats"), &psreq.base,
				      &runtime__v1__list_pod_sandbox_stats_response__descriptor,
				      &pstats, &err),
			 0);
	assert_int_equal(pstats->n_stats, 1);
	assert_string_equal(pstats->stats[0]->attributes->id, "fb-pod-1");
	protobuf_c_message_free_unpacked(&pstats->base, NULL);
}

/* With the fallback down, lists answer kiyot's items and no error (the kubelet keeps serving
 * kiyot's pods), Status says the node cannot run the fallback's pods, ImageFsInfo is kiyot's,
 * and a call for the fallback's pod is UNAVAILABLE naming it. */
static void test_router__fallback_down(void **state)
{
	struct fix *f = *state;
	Runtime__V1__ListPodSandboxRequest preq = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
	Runtime__V1__ListPodSandboxResponse *pods = NULL;
	Runtime__V1__StatusRequest sreq = RUNTIME__V1__STATUS_REQUEST__INIT;
	Runtime__V1__StatusResponse *st = NULL;
	Runtime__V1__ImageFsInfoRequest fsreq = RUNTIME__V1__IMAGE_FS_INFO_REQUEST__INIT;
	Runtime__V1__ImageFsInfoResponse *fs = NULL;
	Runtime__V1__RunPodSandboxRequest rreq = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
	Runtime__V1__RunPodSandboxResponse *run = NULL;
	_cleanup_free_ char *unavailable = NULL;
	struct pod p;
	struct err err;

	crihost_add_sandbox(&f->h, KIYOT_SB, "web", SANDBOX_READY, "cell-1");
	fb_stop(&f->fb);
	unavailable = xasprintf("fallback runtime %s: unavailable", f->fb.addr);
	for (int i = 0; i < 2; i++) { /* the second warning is held back, the answer is not */
		assert_int_equal(crihost_call(&f->h, CRI_RT("ListPodSandbox"), &preq.base,
					      &runtime__v1__list_pod_sandbox_response__descriptor,
					      &pods, &err),
				 0);
		assert_int_equal(pods->n_items, 1);
		assert_string_equal(pods->items[0]->id, KIYOT_SB);
		protobuf_c_message_free_unpacked(&pods->base, NULL);
	}
	assert_int_equal(crihost_call(&f->h, CRI_RT("Status"), &sreq.base,
				      &runtime__v1__status_response__descriptor, &st, &err),
			 0);
	assert_int_equal(st->status->n_conditions, 2);
	for (size_t i = 0; i < 2; i++) {
		assert_false(st->status->conditions[i]->status);
		assert_string_equal(st->status->conditions[i]->reason,
				    "FallbackRuntimeUnavailable");
		assert_non_null(strstr(st->status->conditions[i]->message, unavailable));
	}
	protobuf_c_message_free_unpacked(&st->base, NULL);
	assert_int_equal(crihost_call(&f->h, CRI_IMG("ImageFsInfo"), &fsreq.base,
				      &runtime__v1__image_fs_info_response__descriptor, &fs, &err),
			 0);
	assert_string_equal(fs->image_filesystems[0]->fs_id->mountpoint, f->h.dir);
	protobuf_c_message_free_unpacked(&fs->base, NULL);
	pod_init(&p, "plain", 0);
	rreq.config = &p.cfg;
	assert_int_equal(crihost_call(&f->h, CRI_RT("RunPodSandbox"), &rreq.base,
				      &runtime__v1__run_pod_sandbox_response__descriptor, &run,
				      &err),
			 -ECONNREFUSED);
	if (!strstr(err.msg, unavailable))
		fail_msg("\"%s\" does not say \"%s\"", err.msg, unavailable);
}

/* Status folds the fallback's conditions into kiyot's: one the fallback reports false is false
 * with its reason, its message naming the fallback; one only the fallback has is added; its
 * verbose info comes under "fallback.". */
static void test_router__status_folds_in_the_fallbacks(void **state)
{
	struct fix *f = *state;
	Runtime__V1__StatusRequest req = RUNTIME__V1__STATUS_REQUEST__INIT;
	Runtime__V1__StatusResponse *st = NULL;
	_cleanup_free_ char *msg = NULL;
	struct err err;

	req.verbose = 1;
	assert_int_equal(crihost_call(&f->h, CRI_RT("Status"), &req.base,
				      &runtime__v1__status_response__descriptor, &st, &err),
			 0);
	assert_int_equal(st->status->n_conditions, 3);
	assert_string_equal(st->status->conditions[0]->type, "RuntimeReady");
	assert_true(st->status->conditions[0]->status);
	assert_string_equal(st->status->conditions[1]->type, "NetworkReady");
	assert_false(st->status->conditions[1]->status);
	assert_string_equal(st->status->conditions[1]->reason, "NetworkPluginNotReady");
	msg = xasprintf("fallback runtime %s: cni config uninitialized", f->fb.addr);
	assert_string_equal(st->status->conditions[1]->message, msg);
	assert_string_equal(st->status->conditions[2]->type, "FallbackOnly");
	assert_true(st->status->conditions[2]->status);
	assert_int_equal(st->n_info, 3);
	assert_string_equal(st->info[0]->key, "config");
	assert_string_equal(st->info[1]->key, "cells");
	assert_string_equal(st->info[2]->key, "fallback.config");
	assert_string_equal(st->info[2]->value, "{\"cni\":1}");
	protobuf_c_message_free_unpacked(&st->base, NULL);
}

/* The cgroup driver is the fallback's; both runtimes learn the pod CIDR. */
static void test_router__runtime_config_from_the_fallback(void **state)
{
	struct fix *f = *state;
	Runtime__V1__RuntimeConfigRequest rcreq = RUNTIME__V1__RUNTIME_CONFIG_REQUEST__INIT;
	Runtime__V1__RuntimeConfigResponse *rc = NULL;
	Runtime__V1__UpdateRuntimeConfigRequest ureq =
		RUNTIME__V1__UPDATE_RUNTIME_CONFIG_REQUEST__INIT;
	Runtime__V1__RuntimeConfig cfg = RUNTIME__V1__RUNTIME_CONFIG__INIT;
	Runtime__V1__NetworkConfig net = RUNTIME__V1__NETWORK_CONFIG__INIT;
	ProtobufCMessage *none = NULL;
	struct err err;

	assert_int_equal(crihost_call(&f->h, CRI_RT("RuntimeConfig"), &rcreq.base,
				      &runtime__v1__runtime_config_response__descriptor, &rc, &err),
			 0);
	assert_int_equal(rc->linux->cgroup_driver, RUNTIME__V1__CGROUP_DRIVER__SYSTEMD);
	protobuf_c_message_free_unpacked(&rc->base, NULL);
	net.pod_cidr = "10.244.1.0/24";
	cfg.network_config = &net;
	ureq.runtime_config = &cfg;
	assert_int_equal(crihost_call(&f->h, CRI_RT("UpdateRuntimeConfig"), &ureq.base,
				      &runtime__v1__update_runtime_config_response__descriptor,
				      &none, &err),
			 0);
	protobuf_c_message_free_unpacked(none, NULL);
	assert_string_equal(f->h.k.runtime_config_cidr, "10.244.1.0/24");
	assert_int_equal(fb_saw(&f->fb, "UpdateRuntimeConfig 10.244.1.0/24"), 1);
}

/* Images: a pull for kiyot's pod is kiyot's, any other the node's (the fallback's); the
 * same for ImageStatus by the annotation of its ImageSpec; RemoveImage asks both, and an
 * image the fallback lacks is no error; ImageFsInfo is the node's disk. */
static void test_router__images_go_by_the_annotation(void **state)
{
	struct fix *f = *state;
	Runtime__V1__PullImageRequest preq = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
	Runtime__V1__PullImageResponse *pull = NULL;
	Runtime__V1__ImageStatusRequest sreq = RUNTIME__V1__IMAGE_STATUS_REQUEST__INIT;
	Runtime__V1__ImageStatusResponse *st = NULL;
	Runtime__V1__RemoveImageRequest rreq = RUNTIME__V1__REMOVE_IMAGE_REQUEST__INIT;
	Runtime__V1__ImageFsInfoRequest fsreq = RUNTIME__V1__IMAGE_FS_INFO_REQUEST__INIT;
	Runtime__V1__ImageFsInfoResponse *fs = NULL;
	Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
	Runtime__V1__ImageSpec__AnnotationsEntry ann =
		RUNTIME__V1__IMAGE_SPEC__ANNOTATIONS_ENTRY__INIT;
	Runtime__V1__ImageSpec__AnnotationsEntry *anns[] = { &ann };
	ProtobufCMessage *none = NULL;
	struct pod p;
	struct err err;

	spec.image = "nginx:1.25";
	preq.image = &spec;
	assert_int_equal(crihost_call(&f->h, CRI_IMG("PullImage"), &preq.base,
				      &runtime__v1__pull_image_response__descriptor, &pull, &err),
			 0);
	assert_string_equal(pull->image_ref, "sha256:fbpulled");
	protobuf_c_message_free_unpacked(&pull->base, NULL);
	assert_int_equal(fb_saw(&f->fb, "PullImage nginx:1.25"), 1);
	/* kiyot's pod: checked by kiyot, which refuses an image name with a space */
	pod_init(&p, "web", 1);
	preq.sandbox_config = &p.cfg;
	spec.image = "bad name";
	assert_int_equal(crihost_call(&f->h, CRI_IMG("PullImage"), &preq.base,
				      &runtime__v1__pull_image_response__descriptor, &pull, &err),
			 -EINVAL);
	assert_int_equal(fb_saw(&f->fb, "PullImage bad name"), 0);

	spec.image = "nginx:1.25";
	sreq.image = &spec;
	assert_int_equal(crihost_call(&f->h, CRI_IMG("ImageStatus"), &sreq.base,
				      &runtime__v1__image_status_response__descriptor, &st, &err),
			 0);
	assert_string_equal(st->image->id, "sha256:fbimage");
	protobuf_c_message_free_unpacked(&st->base, NULL);
	ann.key = ROUTER_ANNOTATION;
	ann.value = ROUTER_TARGET;
	spec.annotations = anns;
	spec.n_annotations = 1;
	assert_int_equal(crihost_call(&f->h, CRI_IMG("ImageStatus"), &sreq.base,
				      &runtime__v1__image_status_response__descriptor, &st, &err),
			 0);
	assert_null(st->image); /* kiyot has no such image: an empty answer */
	protobuf_c_message_free_unpacked(&st->base, NULL);
	assert_int_equal(fb_saw(&f->fb, "ImageStatus nginx:1.25"), 1);

	crihost_add_image(&f->h, "sha256:abc", "docker.io/library/nginx:1.25", "", 1, "");
	spec.annotations = NULL;
	spec.n_annotations = 0;
	spec.image = "nginx:1.25";
	rreq.image = &spec;
	assert_int_equal(crihost_call(&f->h, CRI_IMG("RemoveImage"), &rreq.base,
				      &runtime__v1__remove_image_response__descriptor, &none, &err),
			 0);
	protobuf_c_message_free_unpacked(none, NULL);
	records_lock(f->h.k.records);
	assert_null(records_image_exact(f->h.k.records, "sha256:abc"));
	records_unlock(f->h.k.records);
	assert_int_equal(fb_saw(&f->fb, "RemoveImage nginx:1.25"), 1);
	spec.image = "absent";
	assert_int_equal(crihost_call(&f->h, CRI_IMG("RemoveImage"), &rreq.base,
				      &runtime__v1__remove_image_response__descriptor, &none, &err),
			 0);
	protobuf_c_message_free_unpacked(none, NULL);
	assert_int_equal(fb_saw(&f->fb, "RemoveImage absent"), 1);
	/* any other failure of the fallback is the answer */
	spec.image = "in-use";
	assert_int_equal(crihost_call(&f->h, CRI_IMG("RemoveImage"), &rreq.base,
				      &runtime__v1__remove_image_response__descriptor, &none, &err),
			 -EBUSY);
	assert_non_null(strstr(err.msg, "is used by a container"));

	assert_int_equal(crihost_call(&f->h, CRI_IMG("ImageFsInfo"), &fsreq.base,
				      &runtime__v1__image_fs_info_response__descriptor, &fs, &err),
			 0);
	assert_string_equal(fs->image_filesystems[0]->fs_id->mountpoint, "/var/lib/containerd");
	protobuf_c_message_free_unpacked(&fs->base, NULL);
}

/* The fallback's container events reach kiyot's GetContainerEvents stream. */
static void test_router__fallback_events_are_relayed(void **state)
{
	struct fix *f = *state;
	Runtime__V1__GetEventsRequest req = RUNTIME__V1__GET_EVENTS_REQUEST__INIT;
	struct rpc_stream *s = NULL;
	ProtobufCMessage *msg = NULL;
	Runtime__V1__ContainerEventResponse *ev;
	struct err err = ERR_INIT;

	if (rpc_stream_open(f->h.ch, CRI_RT("GetContainerEvents"), &req.base,
			    &runtime__v1__container_event_response__descriptor, 10000, &s,
			    &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(rpc_stream_next(s, &msg, &err), 1);
	ev = (void *)msg;
	assert_string_equal(ev->container_id, "fb-ctr-1");
	assert_int_equal(ev->container_event_type,
			 RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STARTED_EVENT);
	assert_true(ev->created_at > 0);
	protobuf_c_message_free_unpacked(msg, NULL);
	rpc_stream_cancel(s);
	rpc_stream_free(s);
}

/* A fallback without an event stream (containerd 1.6) is retried only every few minutes, and
 * closing the router does not wait for that. */
static void test_router__close_does_not_wait_for_the_relay(void **state)
{
	struct fix *f = *state;
	int64_t t0;

	/* the relay asked once and was told UNIMPLEMENTED */
	for (int i = 0; i < 200 && !fb_saw(&f->fb, "GetContainerEvents "); i++)
		usleep(10000);
	usleep(100000);
	t0 = clock_mono_ns();
	router_close(&f->h.k);
	assert_null(f->h.k.router);
	assert_true(clock_mono_ns() - t0 < 2000LL * 1000 * 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_router__open_takes_only_unix_endpoints,
						setup_alone, teardown_alone),
		cmocka_unit_test(test_router__wants_kiyot_only_for_the_annotation),
		cmocka_unit_test_setup_teardown(test_router__alone_kiyot_answers_everything,
						setup_alone, teardown_alone),
		cmocka_unit_test_setup_teardown(test_router__alone_status_is_kiyots, setup_alone,
						teardown_alone),
		cmocka_unit_test_setup_teardown(test_router__run_pod_sandbox_goes_by_the_annotation,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_router__unknown_ids_are_the_fallbacks, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_router__kiyots_ids_stay_with_kiyot, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_router__exec_sync_of_a_fallback_container,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_router__lists_merge_both_runtimes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_router__fallback_down, setup, teardown),
		cmocka_unit_test_setup_teardown(test_router__status_folds_in_the_fallbacks, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_router__runtime_config_from_the_fallback,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_router__images_go_by_the_annotation, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_router__fallback_events_are_relayed, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_router__close_does_not_wait_for_the_relay,
						setup_no_events, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
