/*
 * provision.c: the demand of a sandbox and the instance type for it. Where the demand comes
 * from, best first: the pod.elotl.co/cpu|memory|gpu annotations (written by `kiyot run` from
 * the whole Pod, init containers included), then the sandbox's Linux resources (CPU shares
 * give the request, the memory limit the memory), then nothing (the cheapest type).
 */
#include "provision.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "cri.h"
#include "kiyot.h"
#include "quantity.h"
#include "sizing.h"
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

static int demand_of(const Runtime__V1__PodSandboxConfig *cfg, struct pod_demand *d,
		     struct err *err)
{
	const char *launch =
		cri_map_get((void **)cfg->annotations, cfg->n_annotations, ANN_LAUNCH_TYPE);
	const char *type =
		cri_map_get((void **)cfg->annotations, cfg->n_annotations, ANN_INSTANCE_TYPE);
	int64_t gpu_milli = 0;
	int has_cpu, has_mem;

	memset(d, 0, sizeof(*d));
	if (launch && strcmp(launch, "spot") != 0 && strcmp(launch, "on-demand") != 0)
		return err_set(err, EINVAL,
			       "annotation %s: \"%s\" is not a launch type; use spot or on-demand",
			       ANN_LAUNCH_TYPE, launch);
	d->spot = launch && strcmp(launch, "spot") == 0;
	d->instance_type = type && type[0] ? type : NULL;
	if ((has_cpu = ann_quantity(cfg, ANN_CPU_REQUEST, 1, &d->cpu_milli, err)) < 0 ||
	    (has_mem = ann_quantity(cfg, ANN_MEMORY_REQUEST, 0, &d->memory_bytes, err)) < 0 ||
	    ann_quantity(cfg, ANN_GPU_REQUEST, 1, &gpu_milli, err) < 0)
		return -err->code;
	d->gpus = (gpu_milli + 999) / 1000;
	if (cfg->linux && cfg->linux->resources) {
		const Runtime__V1__LinuxContainerResources *r = cfg->linux->resources;

		/* the kubelet writes shares = milli * 1024 / 1000 (2 for no request) */
		if (!has_cpu && r->cpu_shares > 2)
			d->cpu_milli = r->cpu_shares * 1000 / 1024;
		if (!has_cpu && r->cpu_quota > 0 && r->cpu_period > 0 &&
		    r->cpu_quota * 1000 / r->cpu_period > d->cpu_milli)
			d->cpu_milli = r->cpu_quota * 1000 / r->cpu_period;
		if (!has_mem && r->memory_limit_in_bytes > 0)
			d->memory_bytes = r->memory_limit_in_bytes;
	}
	return 0;
}

int provision_size(struct kiyot *k, const Runtime__V1__PodSandboxConfig *cfg,
		   struct size_choice *out, struct err *err)
{
	struct sizing_reserve reserve = { k->cfg.reserve_cpu_milli, k->cfg.reserve_memory_bytes };
	struct pod_demand d;
	struct sizing_choice ch;

	if (demand_of(cfg, &d, err) < 0)
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
	out->spot = ch.spot;
	out->reason = xstrdup(ch.reason);
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
