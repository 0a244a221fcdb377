/*
 * cli_run.c: `kiyot run -f pod.yaml` makes the CRI calls a kubelet would (RunPodSandbox,
 * PullImage, CreateContainer, StartContainer, init containers first and in order), with the
 * pod's volumes made as the kubelet makes them.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "cli_security.h"
#include "clock.h"
#include "cri_api.pb-c.h"
#include "fsutil.h"
#include "kube/podspec.h"
#include "cells/provision.h"
#include "sizing/sizing.h"
#include "daemon/kiyot.h"
#include "xalloc.h"

/* A CRI map entry list from name/value pairs (all arrays in the arena). */
static void **kv_map(struct arena *a, const ProtobufCMessageDescriptor *d,
		     const struct podspec_kv *kv, size_t n, const char *const *extra, size_t *out_n)
{
	struct entry {
		ProtobufCMessage base;
		char *key;
		char *value;
	};
	size_t n_extra = 0;
	void **out;

	while (extra && extra[2 * n_extra])
		n_extra++;
	out = arena_alloc(a, (n + n_extra + 1) * sizeof(void *));
	*out_n = 0;
	for (size_t i = 0; i < n + n_extra; i++) {
		struct entry *e = arena_alloc(a, d->sizeof_message);

		d->message_init(&e->base);
		e->key = arena_strdup(a, i < n ? kv[i].name : extra[2 * (i - n)]);
		e->value = arena_strdup(a, i < n ? kv[i].value : extra[2 * (i - n) + 1]);
		out[(*out_n)++] = e;
	}
	return out;
}

static char *uuid_like(void)
{
	char *id = kiyot_new_id();
	char *u = xasprintf("%.8s-%.4s-%.4s-%.4s-%.12s", id, id + 8, id + 12, id + 16, id + 20);

	free(id);
	return u;
}

static Runtime__V1__PodSandboxConfig *sandbox_config(struct arena *a, const struct podspec *p,
						     const char *uid, struct err *err)
{
	Runtime__V1__PodSandboxConfig *cfg = arena_alloc(a, sizeof(*cfg));
	struct pod_demand d;
	char cpu[32], mem[32], gpu[32];
	const char *labels[] = { "io.kubernetes.pod.name",
				 p->name,
				 "io.kubernetes.pod.namespace",
				 p->namespace,
				 "io.kubernetes.pod.uid",
				 uid,
				 NULL };
	const char *ann[16];
	size_t na = 0;

	if (sizing_demand_from_podspec(p, &d, err) < 0)
		return NULL;
	runtime__v1__pod_sandbox_config__init(cfg);
	cfg->metadata = arena_alloc(a, sizeof(*cfg->metadata));
	runtime__v1__pod_sandbox_metadata__init(cfg->metadata);
	cfg->metadata->name = arena_strdup(a, p->name);
	cfg->metadata->namespace_ = arena_strdup(a, p->namespace);
	cfg->metadata->uid = arena_strdup(a, uid);
	cfg->hostname = arena_strdup(a, p->hostname ? p->hostname : p->name);
	/* no DNS config: a cell then uses its host's resolv.conf, for a local cell the node's,
	 * which is what the kubelet gives a pod without cluster DNS (and any hostNetwork pod) */
	cfg->linux = cli_security_sandbox(a, p);
	cfg->log_directory = arena_alloc(a, 512);
	snprintf(cfg->log_directory, 512, "/var/log/pods/%s_%s_%s", p->namespace, p->name, uid);
	/* the whole pod's demand, init containers included, for sizing the cell */
	snprintf(cpu, sizeof(cpu), "%lldm", (long long)d.cpu_milli);
	snprintf(mem, sizeof(mem), "%lld", (long long)d.memory_bytes);
	snprintf(gpu, sizeof(gpu), "%lld", (long long)d.gpus);
	/* a demand the manifest states in annotations stands (the last value of a key wins) */
	if (!podspec_annotation(p, ANN_CPU_REQUEST)) {
		ann[na++] = ANN_CPU_REQUEST;
		ann[na++] = cpu;
	}
	if (!podspec_annotation(p, ANN_MEMORY_REQUEST)) {
		ann[na++] = ANN_MEMORY_REQUEST;
		ann[na++] = mem;
	}
	if (d.gpus && !podspec_annotation(p, ANN_GPU_REQUEST)) {
		ann[na++] = ANN_GPU_REQUEST;
		ann[na++] = gpu;
	}
	ann[na++] = ANN_RESTART_POLICY;
	ann[na++] = podspec_restart_name(p->restart_policy);
	ann[na] = NULL;
	cfg->labels = (void *)kv_map(a, &runtime__v1__pod_sandbox_config__labels_entry__descriptor,
				     p->labels, p->n_labels, labels, &cfg->n_labels);
	cfg->annotations =
		(void *)kv_map(a, &runtime__v1__pod_sandbox_config__annotations_entry__descriptor,
			       p->annotations, p->n_annotations, ann, &cfg->n_annotations);
	return cfg;
}

/* Each emptyDir is a directory on the node, as the kubelet makes them. */
static char *volume_dir(const char *state_dir, const char *uid, const char *name)
{
	return xasprintf("%s/pods/%s/volumes/kubernetes.io~empty-dir/%s", state_dir, uid, name);
}

/* Marks the init containers `kiyot run` creates, so `kiyot get pods` counts readiness as
 * kubectl does (app containers only). */

/* What start_one hands container_config beyond the pod: the sandbox's uid and the node's
 * directories, and the image's user as the runtime reported it. */
struct run_ctx {
	const char *uid;
	const char *state_dir;
	const char *seccomp_root;
	const Runtime__V1__Image *image; /* NULL: the runtime knows no such image */
};

static Runtime__V1__ContainerConfig *container_config(struct arena *a, const struct podspec *p,
						      const struct podspec_container *ct,
						      const struct run_ctx *rc, int init)
{
	Runtime__V1__ContainerConfig *cfg = arena_alloc(a, sizeof(*cfg));
	const char *labels[] = { "io.kubernetes.container.name",
				 ct->name,
				 "io.kubernetes.pod.name",
				 p->name,
				 "io.kubernetes.pod.namespace",
				 p->namespace,
				 "io.kubernetes.pod.uid",
				 rc->uid,
				 init ? CLI_LABEL_INIT : NULL,
				 "true",
				 NULL };
	Runtime__V1__LinuxContainerResources *r;
	char logp[300];

	runtime__v1__container_config__init(cfg);
	cfg->metadata = arena_alloc(a, sizeof(*cfg->metadata));
	runtime__v1__container_metadata__init(cfg->metadata);
	cfg->metadata->name = arena_strdup(a, ct->name);
	cfg->image = arena_alloc(a, sizeof(*cfg->image));
	runtime__v1__image_spec__init(cfg->image);
	cfg->image->image = arena_strdup(a, ct->image);
	cfg->command = ct->command;
	cfg->n_command = ct->n_command;
	cfg->args = ct->args;
	cfg->n_args = ct->n_args;
	cfg->working_dir = arena_strdup(a, ct->working_dir ? ct->working_dir : "");
	cfg->envs = arena_alloc(a, (ct->n_env + 1) * sizeof(*cfg->envs));
	for (size_t i = 0; i < ct->n_env; i++) {
		Runtime__V1__KeyValue *kv = arena_alloc(a, sizeof(*kv));

		runtime__v1__key_value__init(kv);
		kv->key = ct->env[i].name;
		kv->value = ct->env[i].value;
		cfg->envs[cfg->n_envs++] = kv;
	}
	cfg->mounts = arena_alloc(a, (ct->n_mounts + 1) * sizeof(*cfg->mounts));
	for (size_t i = 0; i < ct->n_mounts; i++) {
		Runtime__V1__Mount *m = arena_alloc(a, sizeof(*m));
		char *dir = volume_dir(rc->state_dir, rc->uid, ct->mounts[i].name);

		runtime__v1__mount__init(m);
		m->container_path = ct->mounts[i].mount_path;
		m->host_path = arena_strdup(a, dir);
		m->readonly = ct->mounts[i].read_only;
		free(dir);
		cfg->mounts[cfg->n_mounts++] = m;
	}
	cfg->labels = (void *)kv_map(a, &runtime__v1__container_config__labels_entry__descriptor,
				     NULL, 0, labels, &cfg->n_labels);
	snprintf(logp, sizeof(logp), "%s/0.log", ct->name);
	cfg->log_path = arena_strdup(a, logp);
	cfg->linux = arena_alloc(a, sizeof(*cfg->linux));
	runtime__v1__linux_container_config__init(cfg->linux);
	r = cfg->linux->resources = arena_alloc(a, sizeof(*r));
	runtime__v1__linux_container_resources__init(r);
	if (ct->requests.has_cpu)
		r->cpu_shares = ct->requests.cpu_milli * 1024 / 1000;
	if (ct->limits.has_cpu) {
		r->cpu_period = 100000;
		r->cpu_quota = ct->limits.cpu_milli * 100;
	}
	if (ct->limits.has_memory)
		r->memory_limit_in_bytes = ct->limits.memory_bytes;
	cfg->linux->security_context =
		cli_security_container(a, p, ct, rc->image, rc->seccomp_root);
	return cfg;
}

static int pull(struct cli *c, const char *image, Runtime__V1__PodSandboxConfig *sb,
		struct err *err)
{
	Runtime__V1__PullImageRequest req = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
	Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
	Runtime__V1__PullImageResponse *resp = NULL;

	spec.image = (char *)image;
	req.image = &spec;
	req.sandbox_config = sb;
	if (cli_call(c, CLI_IMG "PullImage", &req.base,
		     &runtime__v1__pull_image_response__descriptor, &resp, err) < 0)
		return -err->code;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return 0;
}

/* ImageStatus of an image, as the kubelet asks for the user an image runs as (the pod's
 * annotations go along, so a router sends the question where the image was pulled). *out is
 * NULL when the runtime knows no such image; otherwise the caller frees the response. */
static int image_status(struct cli *c, struct arena *a, const struct podspec *p, const char *image,
			Runtime__V1__ImageStatusResponse **out, struct err *err)
{
	Runtime__V1__ImageStatusRequest req = RUNTIME__V1__IMAGE_STATUS_REQUEST__INIT;
	Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;

	spec.image = (char *)image;
	spec.annotations =
		(void *)kv_map(a, &runtime__v1__image_spec__annotations_entry__descriptor,
			       p->annotations, p->n_annotations, NULL, &spec.n_annotations);
	req.image = &spec;
	if (cli_call(c, CLI_IMG "ImageStatus", &req.base,
		     &runtime__v1__image_status_response__descriptor, out, err) < 0)
		return -err->code;
	return 0;
}

/* Creates and starts one container; init containers are waited for until they exit. */
static int start_one(struct cli *c, struct arena *a, const struct podspec *p,
		     const struct podspec_container *ct, const char *sandbox_id,
		     Runtime__V1__PodSandboxConfig *sb, struct run_ctx *rc, int init,
		     struct err *err)
{
	Runtime__V1__CreateContainerRequest creq = RUNTIME__V1__CREATE_CONTAINER_REQUEST__INIT;
	Runtime__V1__CreateContainerResponse *cresp = NULL;
	Runtime__V1__StartContainerRequest sreq = RUNTIME__V1__START_CONTAINER_REQUEST__INIT;
	Runtime__V1__StartContainerResponse *sresp = NULL;
	const char *kind = init ? "initContainers" : "containers";
	Runtime__V1__ImageStatusResponse *img = NULL;
	char *id;
	int state, code, ret;

	if (pull(c, ct->image, sb, err) < 0 || image_status(c, a, p, ct->image, &img, err) < 0)
		return err_wrap(err, "%s %s", kind, ct->name);
	rc->image = img->image;
	ret = cli_security_check_image(p, ct, img->image, err);
	creq.pod_sandbox_id = (char *)sandbox_id;
	creq.config = container_config(a, p, ct, rc, init);
	creq.sandbox_config = sb;
	if (ret == 0)
		ret = cli_call(c, CLI_RT "CreateContainer", &creq.base,
			       &runtime__v1__create_container_response__descriptor, &cresp, err);
	rc->image = NULL;
	protobuf_c_message_free_unpacked(&img->base, NULL);
	if (ret < 0)
		return err_wrap(err, "%s %s", kind, ct->name);
	id = arena_strdup(a, cresp->container_id);
	protobuf_c_message_free_unpacked(&cresp->base, NULL);
	sreq.container_id = id;
	if (cli_call(c, CLI_RT "StartContainer", &sreq.base,
		     &runtime__v1__start_container_response__descriptor, &sresp, err) < 0)
		return err_wrap(err, "%s %s", kind, ct->name);
	protobuf_c_message_free_unpacked(&sresp->base, NULL);
	if (!init)
		return 0;
	for (;;) {
		if (cli_container_state(c, id, &state, &code, err) < 0)
			return err_wrap(err, "init container %s", ct->name);
		if (state == RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED)
			break;
		usleep(100 * 1000);
	}
	if (code != 0)
		return err_set(err, EIO,
			       "init container %s exited with code %d; see `kiyot logs %s -c %s`",
			       ct->name, code, p->name, ct->name);
	return 0;
}

static int make_volumes(const struct podspec *p, const char *uid, const char *state_dir,
			struct err *err)
{
	for (size_t i = 0; i < p->n_volumes; i++) {
		_cleanup_free_ char *dir = volume_dir(state_dir, uid, p->volumes[i].name);

		if (fs_mkdir_p(dir, 0777, err) < 0)
			return err_wrap(err, "volume %s", p->volumes[i].name);
		chmod(dir, 0777);
	}
	return 0;
}

#define RUN_USAGE "usage: kiyot run -f POD.yaml [--seccomp-profile-root DIR]"

int cli_run(struct cli *c, int argc, char **argv)
{
	struct podspec *p = NULL;
	struct err err = ERR_INIT;
	struct arena a = ARENA_INIT;
	Runtime__V1__RunPodSandboxRequest req = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
	Runtime__V1__RunPodSandboxResponse *resp = NULL;
	static const struct option opts[] = {
		{ "filename", required_argument, NULL, 'f' },
		{ "seccomp-profile-root", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	const char *file = NULL;
	struct run_ctx rc = { .seccomp_root = CLI_SECCOMP_ROOT };
	_cleanup_free_ char *uid = NULL;
	char *sandbox_id;
	int opt, ret = 1;

	rc.state_dir = getenv("KIYOT_STATE_DIR") ? getenv("KIYOT_STATE_DIR") : "/var/lib/kiyot";
	optind = 1;
	while ((opt = getopt_long(argc, argv, "f:", opts, NULL)) != -1) {
		if (opt == 'f')
			file = optarg;
		else if (opt == 's')
			rc.seccomp_root = optarg;
		else
			return cli_fail(RUN_USAGE);
	}
	if (!file || optind < argc)
		return cli_fail(RUN_USAGE);
	if (rc.seccomp_root[0] != '/')
		return cli_fail(
			"--seccomp-profile-root: \"%s\" must be an absolute path (the kubelet's "
			"is %s)",
			rc.seccomp_root, CLI_SECCOMP_ROOT);
	if (podspec_from_yaml_file(file, &p, &err) < 0)
		return cli_fail("%s", err.msg);
	if (cli_security_check_pod(p, &err) < 0) {
		ret = cli_fail("%s: pod %s: %s", file, p->name, err.msg);
		podspec_free(p);
		return ret;
	}
	for (size_t i = 0; i < p->n_init_containers; i++)
		if (p->init_containers[i].sidecar) {
			ret = cli_fail(
				"%s: spec.initContainers[%zu] (%s): sidecar containers "
				"(restartPolicy: Always) are not supported by kiyot run; make it "
				"an app container, or run the pod through a kubelet",
				file, i, p->init_containers[i].name);
			podspec_free(p);
			return ret;
		}
	uid = p->uid ? xstrdup(p->uid) : uuid_like();
	rc.uid = uid;
	if (make_volumes(p, uid, rc.state_dir, &err) < 0)
		goto out;
	req.config = sandbox_config(&a, p, uid, &err);
	if (!req.config) {
		err_wrap(&err, "pod %s", p->name);
		goto out;
	}
	if (fs_mkdir_p(req.config->log_directory, 0755, &err) < 0)
		goto out;
	for (size_t i = 0; i < p->n_init_containers + p->n_containers; i++) {
		const struct podspec_container *ct =
			i < p->n_init_containers ? &p->init_containers[i]
						 : &p->containers[i - p->n_init_containers];
		_cleanup_free_ char *d = xasprintf("%s/%s", req.config->log_directory, ct->name);

		if (fs_mkdir_p(d, 0755, &err) < 0)
			goto out;
	}
	if (cli_call(c, CLI_RT "RunPodSandbox", &req.base,
		     &runtime__v1__run_pod_sandbox_response__descriptor, &resp, &err) < 0) {
		err_wrap(&err, "pod %s", p->name);
		goto out;
	}
	sandbox_id = arena_strdup(&a, resp->pod_sandbox_id);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	for (size_t i = 0; i < p->n_init_containers; i++)
		if (start_one(c, &a, p, &p->init_containers[i], sandbox_id, req.config, &rc, 1,
			      &err) < 0) {
			err_wrap(&err, "pod %s", p->name);
			goto out;
		}
	for (size_t i = 0; i < p->n_containers; i++)
		if (start_one(c, &a, p, &p->containers[i], sandbox_id, req.config, &rc, 0, &err) <
		    0) {
			err_wrap(&err, "pod %s", p->name);
			goto out;
		}
	printf("pod/%s created (sandbox %.13s)\n", p->name, sandbox_id);
	ret = 0;
out:
	if (ret)
		cli_fail("%s", err.msg);
	arena_release(&a);
	podspec_free(p);
	return ret;
}
