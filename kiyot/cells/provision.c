/*
 * provision.c: the demand of a sandbox and the instance type for it. Where the demand comes
 * from, per resource, best first: the pod.elotl.co/cpu|memory|gpu annotations (written by
 * `kiyot run` from the whole Pod, init containers included), then the Pod object read from the
 * API server (its containers and init containers, exactly), then the sandbox's Linux resources
 * (CPU shares give the request, the memory limit the memory; lossy), then nothing (the
 * cheapest type). The choice's reason starts with where the demand came from.
 */
#include "provision.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sizing/catalog.h"
#include "cri/cri.h"
#include "state/kiyot.h"
#include "kube/quantity.h"
#include "providers/provider.h"
#include "sizing/sizing.h"
#include "xalloc.h"

static int ann_quantity(const Runtime__V1__PodSandboxConfig *cfg, const char *key, int milli,
			int64_t *out, struct err *err)
{
	const char *v = cri_map_get((void **)cfg->annotations, cfg->n_annotations, key);
	int ret;

	if (!v)
		return 0;
	ret = milli ? quantity_parse_milli(v, out, err) : quantity_parse_bytes(v, out, err);
	if (ret < 0)
		return err_wrap(err, "annotation %s", key);
	return 1;
}

int provision_demand(const Runtime__V1__PodSandboxConfig *cfg, const struct podspec *pod,
		     struct pod_demand *d, unsigned *from, struct err *err)
{
	const char *launch =
		cri_map_get((void **)cfg->annotations, cfg->n_annotations, ANN_LAUNCH_TYPE);
	const char *type =
		cri_map_get((void **)cfg->annotations, cfg->n_annotations, ANN_INSTANCE_TYPE);
	int64_t gpu_milli = 0;
	int has_cpu, has_mem, has_gpu;

	memset(d, 0, sizeof(*d));
	*from = 0;
	if (launch && strcmp(launch, "spot") != 0 && strcmp(launch, "on-demand") != 0)
		return err_set(err, EINVAL,
			       "annotation %s: \"%s\" is not a launch type; use spot or on-demand",
			       ANN_LAUNCH_TYPE, launch);
	d->spot = launch && strcmp(launch, "spot") == 0;
	d->instance_type = type && type[0] ? type : NULL;
	if ((has_cpu = ann_quantity(cfg, ANN_CPU_REQUEST, 1, &d->cpu_milli, err)) < 0 ||
	    (has_mem = ann_quantity(cfg, ANN_MEMORY_REQUEST, 0, &d->memory_bytes, err)) < 0 ||
	    (has_gpu = ann_quantity(cfg, ANN_GPU_REQUEST, 1, &gpu_milli, err)) < 0)
		return -err->code;
	d->gpus = gpu_milli / 1000 + (gpu_milli % 1000 != 0); /* up, without overflow */
	if (has_cpu || has_mem || has_gpu)
		*from |= PROVISION_FROM_ANNOTATIONS;
	if (pod) {
		struct pod_demand pd = { 0 };

		sizing_demand_from_pod(pod, &pd);
		if (!has_cpu)
			d->cpu_milli = pd.cpu_milli;
		if (!has_mem)
			d->memory_bytes = pd.memory_bytes;
		if (!has_gpu)
			d->gpus = pd.gpus;
		if (!has_cpu || !has_mem || !has_gpu)
			*from |= PROVISION_FROM_POD_OBJECT;
	} else if (cfg->linux && cfg->linux->resources) {
		const Runtime__V1__LinuxContainerResources *r = cfg->linux->resources;
		int64_t cpu = 0;

		/* the kubelet writes shares = milli * 1024 / 1000 (2 for no request) */
		if (r->cpu_shares > 2)
			cpu = r->cpu_shares * 1000 / 1024;
		if (r->cpu_quota > 0 && r->cpu_period > 0 &&
		    r->cpu_quota * 1000 / r->cpu_period > cpu)
			cpu = r->cpu_quota * 1000 / r->cpu_period;
		if (!has_cpu && cpu > 0) {
			d->cpu_milli = cpu;
			*from |= PROVISION_FROM_SANDBOX;
		}
		if (!has_mem && r->memory_limit_in_bytes > 0) {
			d->memory_bytes = r->memory_limit_in_bytes;
			*from |= PROVISION_FROM_SANDBOX;
		}
	}
	return 0;
}

const char *provision_demand_source(unsigned from)
{
	switch (from) {
	case PROVISION_FROM_ANNOTATIONS:
		return "demand from the pod.elotl.co annotations";
	case PROVISION_FROM_POD_OBJECT:
		return "demand from the Pod object";
	case PROVISION_FROM_SANDBOX:
		return "demand from the sandbox's resources";
	case PROVISION_FROM_ANNOTATIONS | PROVISION_FROM_POD_OBJECT:
		return "demand from the pod.elotl.co annotations and the Pod object";
	case PROVISION_FROM_ANNOTATIONS | PROVISION_FROM_SANDBOX:
		return "demand from the pod.elotl.co annotations and the sandbox's resources";
	default:
		return "no demand stated";
	}
}

/* Whether a spot pod may run on demand when spot has no capacity: 1 with
 * pod.elotl.co/spot-fallback: on-demand, 0 without it, EINVAL for another value. */
static int spot_fallback(const Runtime__V1__PodSandboxConfig *cfg, struct err *err)
{
	const char *v =
		cri_map_get((void **)cfg->annotations, cfg->n_annotations, ANN_SPOT_FALLBACK);

	if (!v)
		return 0;
	if (strcmp(v, "on-demand") == 0)
		return 1;
	return err_set(err, EINVAL,
		       "annotation %s: \"%s\" is not a fallback; use on-demand (or leave it out "
		       "to run on spot only)",
		       ANN_SPOT_FALLBACK, v);
}

int provision_size(struct kiyot *k, const Runtime__V1__PodSandboxConfig *cfg,
		   struct size_choice *out, struct err *err)
{
	return provision_size_pod(k, cfg, NULL, out, err);
}

int provision_size_pod(struct kiyot *k, const Runtime__V1__PodSandboxConfig *cfg,
		       const struct podspec *pod, struct size_choice *out, struct err *err)
{
	struct sizing_reserve reserve = { k->cfg.reserve_cpu_milli, k->cfg.reserve_memory_bytes };
	struct pod_demand d;
	struct sizing_choice ch;
	unsigned from;
	int fallback;

	if (provision_demand(cfg, pod, &d, &from, err) < 0 ||
	    (fallback = spot_fallback(cfg, err)) < 0)
		return err_wrap(err, "pod \"%s\"", cfg->metadata->name);
	if (!d.instance_type && k->cfg.default_instance_type[0] && !d.cpu_milli &&
	    !d.memory_bytes && !d.gpus)
		d.instance_type = k->cfg.default_instance_type;
	{
		/* the current catalog, held while sizing reads it (a refresh may publish a newer one) */
		struct catalog *cat = catalog_acquire(k->catalog);
		int ret = sizing_pick(cat, &d, &reserve, &ch, err);

		catalog_release(cat);
		if (ret < 0)
			return err_wrap(err, "pod \"%s\"", cfg->metadata->name);
	}
	out->instance_type = xstrdup(ch.instance_type);
	out->cpus = ch.cpu;
	out->memory_bytes = ch.memory_bytes;
	out->price = ch.price;
	out->spot = ch.spot ? (fallback ? CELL_SPOT_OR_ON_DEMAND : CELL_SPOT) : 0;
	out->reason = xasprintf("%s; %s", provision_demand_source(from), ch.reason);
	out->n_alternatives = 0;
	for (size_t i = 0; i < ch.n_runners_up && i < ARRAY_SIZE(out->alternatives); i++)
		out->alternatives[out->n_alternatives++] = xstrdup(ch.runners_up[i].instance_type);
	return 0;
}

void size_choice_release(struct size_choice *c)
{
	free(c->instance_type);
	free(c->reason);
	c->instance_type = c->reason = NULL;
	for (size_t i = 0; i < c->n_alternatives; i++)
		free(c->alternatives[i]);
	c->n_alternatives = 0;
}
