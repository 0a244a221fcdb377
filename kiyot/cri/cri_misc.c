/*
 * cri_misc.c: Version, Status, UpdateRuntimeConfig, GetContainerEvents, and the methods kiyot
 * does not serve yet (they answer UNIMPLEMENTED with what to use instead).
 */
#include "cri.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cells/provision.h"
#include "events.h"
#include "pool/pool.h"
#include "sizing/catalog.h"
#include "state/records.h"
#include "xalloc.h"
#include "version.h"

int cri_version(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		ProtobufCMessage *resp, struct err *err)
{
	Runtime__V1__VersionResponse *out = (void *)resp;

	(void)svc;
	(void)call;
	(void)req;
	(void)err;
	out->version = "0.1.0"; /* the CRI's own API version, which the kubelet checks */
	out->runtime_name = "kiyot";
	out->runtime_version = KIYOT_VERSION;
	out->runtime_api_version = "v1";
	return 0;
}

static Runtime__V1__RuntimeCondition *condition(struct rpc_call *call, const char *type)
{
	Runtime__V1__RuntimeCondition *c =
		rpc_msg_new(call, &runtime__v1__runtime_condition__descriptor);

	c->type = rpc_strdup(call, type);
	c->status = 1;
	return c;
}

/* A price per hour as the Cell objects give it: rounded to the micro-dollar. */
static double price_of(const struct catalog *cat, const char *type, int spot)
{
	const struct catalog_type *t = cat && type ? catalog_find(cat, type) : NULL;
	double price = t ? (spot && t->spot_price > 0 ? t->spot_price : t->price) : 0;

	return (double)(int64_t)(price * 1e6 + 0.5) / 1e6;
}

/*
 * Status' verbose info "cells": every cell kiyot has, as `kiyot get cells` lists them: the
 * pods' (phase Running, or Pending while launching) and the pool's standby cells (phase
 * Standby, Pending while booting; no pod), each with its type, market, catalog price per hour,
 * address and creation time (Unix ns). A JSON array, as text (caller frees).
 */
static char *cells_info(struct kiyot *k)
{
	struct catalog *cat = k->catalog ? catalog_acquire(k->catalog) : NULL;
	json_t *a = json_array();
	struct pool_view *v = NULL;
	struct sandbox **sbs;
	size_t n;
	char *text;

	records_lock(k->records);
	n = records_sandboxes(k->records, &sbs);
	for (size_t i = 0; i < n; i++) {
		const struct sandbox *sb = sbs[i];
		const Runtime__V1__PodSandboxMetadata *md = sb->config->metadata;
		const char *lt = cri_map_get((void **)sb->config->annotations,
					     sb->config->n_annotations, ANN_LAUNCH_TYPE);
		int spot = lt && strcmp(lt, "spot") == 0;

		if (!sb->cell_id || !sb->cell_id[0] || sb->state == SANDBOX_NOTREADY)
			continue;
		json_array_append_new(
			a, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:f, s:s, s:I, s:s}",
				     "cellId", sb->cell_id, "phase", "Running", "namespace",
				     md->namespace_, "pod", md->name, "instanceType",
				     sb->instance_type, "launchType", spot ? "spot" : "on-demand",
				     "ip", sb->ip ? sb->ip : "", "pricePerHour",
				     price_of(cat, sb->instance_type, spot), "sizingReason",
				     sb->sizing_reason ? sb->sizing_reason : "", "createdNs",
				     (json_int_t)sb->created_ns, "sandboxId", sb->id));
	}
	sandboxes_put(sbs, n);
	records_unlock(k->records);
	n = pool_list(k->pool, &v);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
			a,
			json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:f, s:s, s:I, s:s}",
				  "cellId", v[i].cell_id, "phase",
				  v[i].ready ? "Standby" : "Pending", "namespace", "", "pod", "",
				  "instanceType", v[i].instance_type, "launchType",
				  v[i].spot ? "spot" : "on-demand", "ip", v[i].ip, "pricePerHour",
				  price_of(cat, v[i].instance_type, v[i].spot), "sizingReason",
				  "a standby cell of the warm pool (pool in kiyot's config)",
				  "createdNs", (json_int_t)v[i].created_ns, "sandboxId", ""));
	pool_views_free(v, n);
	catalog_release(cat);
	text = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	if (!text)
		abort();
	return text;
}

int cri_status(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
	       ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__StatusRequest *r = (const void *)req;
	Runtime__V1__StatusResponse *out = (void *)resp;
	struct kiyot *k = svc;

	(void)err;
	out->status = rpc_msg_new(call, &runtime__v1__runtime_status__descriptor);
	out->status->conditions = rpc_alloc(call, 2 * sizeof(*out->status->conditions));
	/* cells bring their own network: each pod gets its cell's address */
	out->status->conditions[0] = condition(call, "RuntimeReady");
	out->status->conditions[1] = condition(call, "NetworkReady");
	out->status->n_conditions = 2;
	if (r->verbose) {
		Runtime__V1__StatusResponse__InfoEntry *e =
			rpc_msg_new(call, &runtime__v1__status_response__info_entry__descriptor);
		Runtime__V1__StatusResponse__InfoEntry *ce =
			rpc_msg_new(call, &runtime__v1__status_response__info_entry__descriptor);
		char *info, *cells = cells_info(k);

		records_lock(k->records);
		info = xasprintf("{\"provider\":\"%s\",\"region\":\"%s\",\"clusterId\":\"%s\","
				 "\"cellCidr\":\"%s\"}",
				 k->cfg.provider, k->cfg.region, k->cluster_id, k->cfg.cell_cidr);
		records_unlock(k->records);
		e->key = "config";
		e->value = rpc_strdup(call, info);
		free(info);
		ce->key = "cells";
		ce->value = rpc_strdup(call, cells);
		free(cells);
		out->info = rpc_alloc(call, 2 * sizeof(*out->info));
		out->info[0] = e;
		out->info[1] = ce;
		out->n_info = 2;
	}
	return 0;
}

int cri_update_runtime_config(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			      ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__UpdateRuntimeConfigRequest *r = (const void *)req;
	struct kiyot *k = svc;

	(void)call;
	(void)resp;
	(void)err;
	/* the pod CIDR does not shape cells (they take addresses from the cell network), but it
	 * is kept and shown so an operator sees what the kubelet asked for */
	if (r->runtime_config && r->runtime_config->network_config) {
		records_lock(k->records);
		free(k->runtime_config_cidr);
		k->runtime_config_cidr = xstrdup(r->runtime_config->network_config->pod_cidr);
		records_unlock(k->records);
	}
	return 0;
}

int cri_get_container_events(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			     ProtobufCMessage *resp, struct err *err)
{
	struct kiyot *k = svc;
	struct events_sub *sub = events_subscribe(k->events);
	int ret = 0;

	(void)req;
	(void)resp;
	while (!rpc_cancelled(call)) {
		Runtime__V1__ContainerEventResponse ev =
			RUNTIME__V1__CONTAINER_EVENT_RESPONSE__INIT;
		struct event e;

		if (!events_next(k->events, sub, 1000, &e))
			continue;
		ev.container_id = e.container_id;
		ev.container_event_type = e.type;
		ev.created_at = e.created_ns;
		ret = rpc_send(call, &ev.base, err);
		event_release(&e);
		if (ret < 0)
			break;
	}
	events_unsubscribe(k->events, sub);
	return ret < 0 ? ret : err_set(err, ECANCELED, "client went away");
}

int cri_unimplemented(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		      ProtobufCMessage *resp, struct err *err)
{
	(void)svc;
	(void)call;
	(void)req;
	(void)resp;
	return err_set(err, ENOSYS,
		       "kiyot does not serve this method yet (checkpoints and metric "
		       "descriptors come later)");
}

int cri_runtime_config(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		       ProtobufCMessage *resp, struct err *err)
{
	Runtime__V1__RuntimeConfigResponse *out = (void *)resp;

	(void)svc;
	(void)req;
	(void)err;
	out->linux = rpc_msg_new(call, &runtime__v1__linux_runtime_configuration__descriptor);
	out->linux->cgroup_driver = RUNTIME__V1__CGROUP_DRIVER__CGROUPFS;
	return 0;
}
