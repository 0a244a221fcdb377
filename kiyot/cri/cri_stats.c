/*
 * cri_stats.c: CRI's stats calls (kubectl top, the kubelet's summary API). Each cell's agent
 * reads its cgroups; one Stats call per cell serves every container in it.
 */
#include "cri.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cells/cells.h"
#include "xalloc.h"

/* The cells to ask: (sandbox id, cell id) of every ready sandbox matching the filter.
 * Needs the records' lock. */
struct target {
	char *sandbox_id;
	char *cell_id;
};

static size_t targets_of(struct kiyot *k, const char *sandbox_prefix, struct target **out)
{
	struct sandbox **v;
	size_t nv = records_sandboxes(k->records, &v), n = 0;

	*out = xcalloc(nv + 1, sizeof(**out));
	for (size_t i = 0; i < nv; i++) {
		const struct sandbox *sb = v[i];

		if (sb->state != SANDBOX_READY || !sb->cell_id[0])
			continue;
		if (sandbox_prefix && sandbox_prefix[0] &&
		    strncmp(sb->id, sandbox_prefix, strlen(sandbox_prefix)) != 0)
			continue;
		(*out)[n].sandbox_id = xstrdup(sb->id);
		(*out)[n].cell_id = xstrdup(sb->cell_id);
		n++;
	}
	sandboxes_put(v, nv);
	return n;
}

static void targets_free(struct target *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(t[i].sandbox_id);
		free(t[i].cell_id);
	}
	free(t);
}

static Runtime__V1__UInt64Value *u64(struct rpc_call *call, uint64_t v)
{
	Runtime__V1__UInt64Value *w = rpc_msg_new(call, &runtime__v1__uint64_value__descriptor);

	w->value = v;
	return w;
}

static Runtime__V1__CpuUsage *cpu_of(struct rpc_call *call, const Kiyot__Cell__V1__ResourceUsage *u)
{
	Runtime__V1__CpuUsage *c = rpc_msg_new(call, &runtime__v1__cpu_usage__descriptor);

	c->timestamp = u->timestamp_ns;
	c->usage_core_nano_seconds = u64(call, u->cpu_usage_ns);
	if (u->cpu_rate_known) /* the kubelet takes a pod's rate from here, and none is 0 */
		c->usage_nano_cores = u64(call, u->cpu_usage_nano_cores);
	return c;
}

static Runtime__V1__MemoryUsage *memory_of(struct rpc_call *call,
					   const Kiyot__Cell__V1__ResourceUsage *u)
{
	Runtime__V1__MemoryUsage *m = rpc_msg_new(call, &runtime__v1__memory_usage__descriptor);

	m->timestamp = u->timestamp_ns;
	m->working_set_bytes = u64(call, u->memory_working_set_bytes);
	m->usage_bytes = u64(call, u->memory_usage_bytes);
	m->rss_bytes = u64(call, u->memory_rss_bytes);
	m->page_faults = u64(call, u->memory_page_faults);
	m->major_page_faults = u64(call, u->memory_major_page_faults);
	if (u->memory_available_bytes)
		m->available_bytes = u64(call, u->memory_available_bytes);
	return m;
}

/* ContainerStats of one container from its unit's usage. Needs the records' lock. */
static Runtime__V1__ContainerStats *container_stats_of(struct rpc_call *call,
						       const struct container *c,
						       const Kiyot__Cell__V1__ResourceUsage *u)
{
	Runtime__V1__ContainerStats *s =
		rpc_msg_new(call, &runtime__v1__container_stats__descriptor);
	Runtime__V1__ContainerAttributes *a =
		rpc_msg_new(call, &runtime__v1__container_attributes__descriptor);
	Runtime__V1__FilesystemUsage *fs =
		rpc_msg_new(call, &runtime__v1__filesystem_usage__descriptor);

	a->id = rpc_strdup(call, c->id);
	a->metadata = rpc_msg_new(call, &runtime__v1__container_metadata__descriptor);
	a->metadata->name = rpc_strdup(call, c->config->metadata->name);
	a->metadata->attempt = c->config->metadata->attempt;
	a->n_labels = c->config->n_labels;
	a->labels = (void *)cri_map_dup(
		call, &runtime__v1__container_attributes__labels_entry__descriptor,
		(void **)c->config->labels, c->config->n_labels);
	a->n_annotations = c->config->n_annotations;
	a->annotations = (void *)cri_map_dup(
		call, &runtime__v1__container_attributes__annotations_entry__descriptor,
		(void **)c->config->annotations, c->config->n_annotations);
	s->attributes = a;
	s->cpu = cpu_of(call, u);
	s->memory = memory_of(call, u);
	fs->timestamp = u->timestamp_ns;
	fs->fs_id = rpc_msg_new(call, &runtime__v1__filesystem_identifier__descriptor);
	fs->fs_id->mountpoint = rpc_strdup(call, "/");
	fs->used_bytes = u64(call, u->writable_layer_bytes);
	fs->inodes_used = u64(call, u->writable_layer_inodes);
	s->writable_layer = fs;
	return s;
}

static const Kiyot__Cell__V1__ResourceUsage *usage_for(const Kiyot__Cell__V1__StatsResponse *r,
						       const char *unit)
{
	static const Kiyot__Cell__V1__ResourceUsage idle = KIYOT__CELL__V1__RESOURCE_USAGE__INIT;

	for (size_t i = 0; r && i < r->n_units; i++)
		if (strcmp(r->units[i]->unit_id, unit) == 0)
			return r->units[i];
	return &idle; /* created or exited: nothing running, nothing used */
}

static int container_filter_match(const struct container *c,
				  const Runtime__V1__ContainerStatsFilter *f)
{
	if (!f)
		return 1;
	if (f->id[0] && strncmp(c->id, f->id, strlen(f->id)) != 0)
		return 0;
	return cri_labels_match((void **)c->config->labels, c->config->n_labels,
				(void **)f->label_selector, f->n_label_selector);
}

int cri_list_container_stats(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			     ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ListContainerStatsRequest *r = (const void *)req;
	Runtime__V1__ListContainerStatsResponse *out = (void *)resp;
	struct kiyot *k = svc;
	struct target *t;
	size_t nt, cap = 0;

	(void)err;
	records_lock(k->records);
	nt = targets_of(k, r->filter ? r->filter->pod_sandbox_id : NULL, &t);
	records_unlock(k->records);
	for (size_t i = 0; i < nt; i++) {
		Kiyot__Cell__V1__StatsResponse *sr = NULL;
		struct err serr = ERR_INIT;

		/* a cell that cannot answer right now is left out, not an error for all */
		if (cells_stats(k->cells, t[i].cell_id, &sr, &serr) < 0)
			continue;
		struct container **cs;
		size_t n;

		records_lock(k->records);
		n = records_containers(k->records, t[i].sandbox_id, &cs);
		for (size_t j = 0; j < n; j++) {
			const struct container *c = cs[j];

			if (!container_filter_match(c, r->filter))
				continue;
			if (out->n_stats + 1 > cap) {
				size_t ncap = cap ? cap * 2 : 16;
				void *grown = rpc_alloc(call, ncap * sizeof(*out->stats));

				if (out->n_stats)
					memcpy(grown, out->stats,
					       out->n_stats * sizeof(*out->stats));
				out->stats = grown;
				cap = ncap;
			}
			out->stats[out->n_stats++] =
				container_stats_of(call, c, usage_for(sr, c->id));
		}
		records_unlock(k->records);
		containers_put(cs, n);
		protobuf_c_message_free_unpacked(&sr->base, NULL);
	}
	targets_free(t, nt);
	return 0;
}

int cri_container_stats(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ContainerStatsRequest *r = (const void *)req;
	Runtime__V1__ContainerStatsResponse *out = (void *)resp;
	Kiyot__Cell__V1__StatsResponse *sr = NULL;
	struct kiyot *k = svc;
	struct container *c;
	struct sandbox *sb;
	char *cell = NULL, *cid = NULL;

	records_lock(k->records);
	c = records_container(k->records, r->container_id);
	sb = c ? records_sandbox(k->records, c->sandbox_id) : NULL;
	if (c && sb && sb->cell_id[0]) {
		cell = xstrdup(sb->cell_id);
		cid = xstrdup(c->id);
	}
	records_unlock(k->records);
	if (!c)
		return err_set(err, ENOENT, "container %s not found", r->container_id);
	if (cell && cells_stats(k->cells, cell, &sr, err) < 0) {
		free(cell);
		free(cid);
		return err_wrap(err, "stats of container %s", r->container_id);
	}
	records_lock(k->records);
	c = cid ? records_container(k->records, cid)
		: records_container(k->records, r->container_id);
	if (c)
		out->stats = container_stats_of(call, c, usage_for(sr, c->id));
	records_unlock(k->records);
	if (sr)
		protobuf_c_message_free_unpacked(&sr->base, NULL);
	free(cell);
	free(cid);
	if (!c)
		return err_set(err, ENOENT, "container %s not found", r->container_id);
	return 0;
}

static Runtime__V1__NetworkUsage *network_of(struct rpc_call *call,
					     const Kiyot__Cell__V1__NetworkUsage *u)
{
	Runtime__V1__NetworkUsage *n = rpc_msg_new(call, &runtime__v1__network_usage__descriptor);
	Runtime__V1__NetworkInterfaceUsage *i =
		rpc_msg_new(call, &runtime__v1__network_interface_usage__descriptor);

	i->name = rpc_strdup(call, u->interface);
	i->rx_bytes = u64(call, u->rx_bytes);
	i->rx_errors = u64(call, u->rx_errors);
	i->tx_bytes = u64(call, u->tx_bytes);
	i->tx_errors = u64(call, u->tx_errors);
	n->timestamp = u->timestamp_ns;
	n->default_interface = i;
	return n;
}

/* PodSandboxStats of one sandbox from its cell's usage. Needs the records' lock. */
static Runtime__V1__PodSandboxStats *sandbox_stats_of(struct kiyot *k, struct rpc_call *call,
						      const struct sandbox *sb,
						      const Kiyot__Cell__V1__StatsResponse *sr)
{
	static const Kiyot__Cell__V1__ResourceUsage idle = KIYOT__CELL__V1__RESOURCE_USAGE__INIT;
	Runtime__V1__PodSandboxStats *s =
		rpc_msg_new(call, &runtime__v1__pod_sandbox_stats__descriptor);
	Runtime__V1__PodSandboxAttributes *a =
		rpc_msg_new(call, &runtime__v1__pod_sandbox_attributes__descriptor);
	const Kiyot__Cell__V1__ResourceUsage *cell = sr && sr->cell ? sr->cell : &idle;
	struct container **cs;
	size_t n;

	a->id = rpc_strdup(call, sb->id);
	a->metadata = rpc_msg_new(call, &runtime__v1__pod_sandbox_metadata__descriptor);
	a->metadata->name = rpc_strdup(call, sb->config->metadata->name);
	a->metadata->uid = rpc_strdup(call, sb->config->metadata->uid);
	a->metadata->namespace_ = rpc_strdup(call, sb->config->metadata->namespace_);
	a->metadata->attempt = sb->config->metadata->attempt;
	a->n_labels = sb->config->n_labels;
	a->labels = (void *)cri_map_dup(
		call, &runtime__v1__pod_sandbox_attributes__labels_entry__descriptor,
		(void **)sb->config->labels, sb->config->n_labels);
	a->n_annotations = sb->config->n_annotations;
	a->annotations = (void *)cri_map_dup(
		call, &runtime__v1__pod_sandbox_attributes__annotations_entry__descriptor,
		(void **)sb->config->annotations, sb->config->n_annotations);
	s->attributes = a;
	s->linux = rpc_msg_new(call, &runtime__v1__linux_pod_sandbox_stats__descriptor);
	s->linux->cpu = cpu_of(call, cell);
	s->linux->memory = memory_of(call, cell);
	if (sr && sr->network && sr->network->interface[0])
		s->linux->network = network_of(call, sr->network);
	n = records_containers(k->records, sb->id, &cs);
	s->linux->containers = rpc_alloc(call, (n + 1) * sizeof(*s->linux->containers));
	for (size_t i = 0; i < n; i++)
		s->linux->containers[s->linux->n_containers++] =
			container_stats_of(call, cs[i], usage_for(sr, cs[i]->id));
	containers_put(cs, n);
	return s;
}

int cri_pod_sandbox_stats(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			  ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__PodSandboxStatsRequest *r = (const void *)req;
	Runtime__V1__PodSandboxStatsResponse *out = (void *)resp;
	Kiyot__Cell__V1__StatsResponse *sr = NULL;
	struct kiyot *k = svc;
	struct sandbox *sb;
	char *cell = NULL;

	records_lock(k->records);
	sb = records_sandbox(k->records, r->pod_sandbox_id);
	if (sb && sb->state == SANDBOX_READY && sb->cell_id[0])
		cell = xstrdup(sb->cell_id);
	records_unlock(k->records);
	if (!sb)
		return err_set(err, ENOENT, "pod sandbox %s not found", r->pod_sandbox_id);
	if (cell && cells_stats(k->cells, cell, &sr, err) < 0) {
		free(cell);
		return err_wrap(err, "stats of pod sandbox %s", r->pod_sandbox_id);
	}
	free(cell);
	records_lock(k->records);
	sb = records_sandbox(k->records, r->pod_sandbox_id);
	if (sb)
		out->stats = sandbox_stats_of(k, call, sb, sr);
	records_unlock(k->records);
	if (sr)
		protobuf_c_message_free_unpacked(&sr->base, NULL);
	return sb ? 0 : err_set(err, ENOENT, "pod sandbox %s not found", r->pod_sandbox_id);
}

int cri_list_pod_sandbox_stats(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			       ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ListPodSandboxStatsRequest *r = (const void *)req;
	Runtime__V1__ListPodSandboxStatsResponse *out = (void *)resp;
	struct kiyot *k = svc;
	struct target *t;
	size_t nt;

	(void)err;
	records_lock(k->records);
	nt = targets_of(k, r->filter ? r->filter->id : NULL, &t);
	records_unlock(k->records);
	out->stats = rpc_alloc(call, (nt + 1) * sizeof(*out->stats));
	for (size_t i = 0; i < nt; i++) {
		Kiyot__Cell__V1__StatsResponse *sr = NULL;
		struct err serr = ERR_INIT;
		struct sandbox *sb;

		if (cells_stats(k->cells, t[i].cell_id, &sr, &serr) < 0)
			continue;
		records_lock(k->records);
		sb = records_sandbox(k->records, t[i].sandbox_id);
		if (sb && (!r->filter ||
			   cri_labels_match((void **)sb->config->labels, sb->config->n_labels,
					    (void **)r->filter->label_selector,
					    r->filter->n_label_selector)))
			out->stats[out->n_stats++] = sandbox_stats_of(k, call, sb, sr);
		records_unlock(k->records);
		protobuf_c_message_free_unpacked(&sr->base, NULL);
	}
	targets_free(t, nt);
	return 0;
}
