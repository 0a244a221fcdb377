/*
 * daemon.c: kiyot's wiring: the one place that knows every part. It makes them at start-up in
 * the order they need each other (store and records, catalog, provider, node image store,
 * cells, warm pool, metrics, streaming server, events, collector, hostPorts, volume sync,
 * then the router, Cell object sync, Events and the CRI server) and tears them down in the
 * reverse order at stop.
 */
#include "daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cells/cells.h"
#include "cells/cellsync.h"
#include "cells/volsync.h"
#include "clock.h"
#include "cri/cri.h"
#include "cri/events.h"
#include "cri/router.h"
#include "fsutil.h"
#include "image.h"
#include "kube/events.h"
#include "kube/podobject.h"
#include "log.h"
#include "metrics/metrics.h"
#include "metrics/server.h"
#include "pool/pool.h"
#include "providers/local/cellguard.h"
#include "providers/local/cellnat.h"
#include "regconf.h"
#include "rpc.h"
#include "sizing/catalog.h"
#include "sizing/catalog_refresh.h"
#include "state/ctrlog.h"
#include "state/store.h"
#include "stream/server.h"
#include "xalloc.h"

/* The durable id of this installation, made once and kept in the store. */
static int load_cluster_id(struct kiyot *k, struct err *err)
{
	char *id = NULL;

	if (store_get_meta(k->store, "cluster_id", &id, err) < 0)
		return -err->code;
	if (!id) {
		char *full = kiyot_new_id();

		id = xstrndup(full, 16);
		free(full);
		if (store_put_meta(k->store, "cluster_id", id, err) < 0) {
			free(id);
			return -err->code;
		}
	}
	k->cluster_id = id;
	return 0;
}

/*
 * hostPort rules are the kernel's and outlive kiyot. At start, the rules of cells no sandbox
 * has any more go (a state directory wiped, a teardown a crash cut short), then the rules of
 * ready pods are made again where one is missing; rules already there stay as they are, so
 * connections through them go on.
 */
static void host_ports_restore(struct kiyot *k)
{
	_cleanup_free_ const char **keep = NULL;
	struct err err = ERR_INIT;
	struct sandbox **sbs;
	char **cell, **ip; /* each sandbox's cell and, when ready, its address: copies */
	size_t n = 0, nsb;
	int ret;

	if (!k->provider.ops->host_ports_prune)
		return;
	/* what the records say, copied under their lock; the rules (iptables runs) without it */
	records_lock(k->records);
	nsb = records_sandboxes(k->records, &sbs);
	cell = xcalloc(nsb + 1, sizeof(*cell));
	ip = xcalloc(nsb + 1, sizeof(*ip));
	keep = xcalloc(nsb + 1, sizeof(*keep));
	for (size_t i = 0; i < nsb; i++) {
		if (!sbs[i]->cell_id[0])
			continue;
		cell[i] = xstrdup(sbs[i]->cell_id);
		keep[n++] = cell[i];
		if (sbs[i]->state == SANDBOX_READY && sbs[i]->ip)
			ip[i] = xstrdup(sbs[i]->ip);
	}
	records_unlock(k->records);
	ret = k->provider.ops->host_ports_prune(k->provider.self, keep, n, &err);
	if (ret < 0)
		log_error("hostPorts: %s", err.msg);
	else if (ret > 0)
		log_info("hostPorts: removed %d rules of cells that are gone", ret);
	for (size_t i = 0; i < nsb; i++) {
		err_clear(&err);
		if (ip[i] && cri_sandbox_host_ports(k, sbs[i], cell[i], ip[i], &err) < 0)
			log_error("sandbox %s: hostPorts: %s", sbs[i]->id, err.msg);
		free(cell[i]);
		free(ip[i]);
	}
	free(cell);
	free(ip);
	sandboxes_put(sbs, nsb);
}

/* Writers for the containers loaded at start, from the marks they had. */
static void logs_attach_all(struct kiyot *k)
{
	struct container **cs;
	size_t n;

	records_lock(k->records);
	n = records_containers(k->records, NULL, &cs);
	for (size_t i = 0; i < n; i++)
		kiyot_log_attach(k, cs[i]);
	records_unlock(k->records);
	containers_put(cs, n);
}

int kiyot_open(struct kiyot *k, struct err *err)
{
	_cleanup_free_ char *db = xasprintf("%s/kiyot.db", k->cfg.state_dir);
	_cleanup_free_ char *cells_dir = xasprintf("%s/cells", k->cfg.state_dir);
	_cleanup_free_ char *node_images = xasprintf("%s/images", k->cfg.state_dir);
	struct local_provider_config lc = { 0 };
	struct cells_hooks hooks;
	unsigned loosened = 0;

	if (store_dir_prepare(k->cfg.state_dir, &loosened, err) < 0 ||
	    fs_mkdir_p(cells_dir, 0700, err) < 0)
		return -err->code;
	if (loosened)
		log_warn("state directory %s was %04o, open to other users (it holds the key of "
			 "the cells' CA): now 0700",
			 k->cfg.state_dir, loosened);
	if (store_open(db, &k->store, err) < 0)
		return -err->code;
	k->records = records_new(k->store);
	if (records_load(k->records, err) < 0)
		return -err->code;
	k->logs = ctrlogs_new(k->store);
	logs_attach_all(k);
	if (load_cluster_id(k, err) < 0)
		return -err->code;
	if (regconf_from_json(k->cfg.registries, &k->regconf, err) < 0)
		return err_wrap(err, "config: registries");
	if (catalog_load(k->cfg.region, &k->catalog, err) < 0)
		return err_wrap(err, "instance catalog");
	if (k->provider.ops) {
		/* set by the caller (a test's fake) */
	} else if (strcmp(k->cfg.provider, "ec2") == 0) {
		struct ec2_provider_config ec = { 0 };
		_cleanup_free_ char *node = kiyot_node_name(&k->cfg);

		ec.cluster_id = k->cluster_id;
		ec.node = node;
		ec.region = k->cfg.ec2.region ? k->cfg.ec2.region : k->cfg.region;
		ec.endpoint = k->cfg.ec2.endpoint;
		ec.image_id = k->cfg.ec2.image_id;
		ec.image_id_arm64 = k->cfg.ec2.image_id_arm64;
		ec.subnet_id = k->cfg.ec2.subnet_id;
		ec.subnet_ids = (const char *const *)k->cfg.ec2.subnet_ids;
		ec.n_subnet_ids = k->cfg.ec2.n_subnet_ids;
		ec.security_group_ids = (const char *const *)k->cfg.ec2.security_group_ids;
		ec.n_security_group_ids = k->cfg.ec2.n_security_group_ids;
		ec.instance_profile = k->cfg.ec2.instance_profile;
		ec.profile = k->cfg.ec2.profile;
		ec.credentials_file = k->cfg.ec2.credentials_file;
		ec.no_imds = k->cfg.ec2.no_imds;
		ec.launch_timeout_s = k->cfg.ec2.launch_timeout_s;
		if (provider_ec2_new(&ec, &k->provider, err) < 0)
			return err_wrap(err, "ec2 cell provider");
		/* in the background: start-up does not wait for EC2 */
		if (catalog_refresh_start_config(k->catalog, provider_ec2_client(&k->provider),
						 &(struct catalog_refresh_config){
							 .price_list = !k->cfg.ec2.price_list_off,
							 .price_list_endpoint =
								 k->cfg.ec2.price_list_endpoint },
						 err) < 0)
			return -err->code;
	} else if (strcmp(k->cfg.provider, "local") == 0) {
		lc.state_dir = cells_dir;
		lc.bridge = k->cfg.bridge;
		lc.cidr = k->cfg.cell_cidr;
		lc.agent_path = k->cfg.agent_path;
		lc.cgroup_root = "kiyot";
		lc.cluster_id = k->cluster_id;
		lc.node_images = node_images;
		lc.restore_network = 1;
		if (provider_local_new(&lc, &k->provider, err) < 0)
			return err_wrap(err, "local cell provider");
		if (cellguard_node_setup(k->cfg.bridge, k->cfg.node_ports, k->cfg.n_node_ports,
					 err) < 0)
			return -err->code;
		if (k->cfg.masquerade && cellnat_setup(k->cfg.bridge, k->cfg.cell_cidr, err) < 0)
			return -err->code;
	} else {
		return err_set(err, EINVAL,
			       "cells.provider: \"%s\" is not a provider; use local or ec2",
			       k->cfg.provider);
	}
	/* cells that see the node's files take their images from one store of the node */
	if (!k->provider.ops->remote_files &&
	    image_store_new(node_images, k->regconf, &k->node_images, err) < 0)
		return err_wrap(err, "node image store");
	cri_cells_hooks(k, &hooks);
	if (cells_new(k, &hooks, &k->cells, err) < 0)
		return -err->code;
	/* its standby cells adopted before the collector's first pass judges them */
	if (pool_new(k, &k->pool, err) < 0)
		return -err->code;
	/* before the streaming server, whose free port then is not the one metrics asks for */
	if (k->cfg.metrics_listen && k->cfg.metrics_listen[0]) {
		metrics_figures_init();
		k->metrics_cells = metrics_cells_add(k);
		if (metrics_server_start(k->cfg.metrics_listen, metrics_default(), NULL,
					 &k->metrics, err) < 0)
			return err_wrap(err, "metrics.listen");
	}
	if (stream_server_start(k->cfg.streaming_address, k->cells, NULL, &k->stream, err) < 0)
		return err_wrap(err, "streaming.address");
	k->events = events_new();
	k->gc = gc_start(k);
	pool_start(k->pool);
	host_ports_restore(k);
	if (k->provider.ops->remote_files)
		k->volsync = volsync_start(k);
	return 0;
}

int64_t kiyot_stop_step(const char *what, int64_t since)
{
	int64_t now = clock_mono_ns();

	if (now - since >= (int64_t)KIYOT_SLOW_STOP_MS * 1000000)
		log_warn("stopping: %s took %.1f s", what, (double)(now - since) / 1e9);
	else
		log_debug("stopping: %s done in %.1f ms", what, (double)(now - since) / 1e6);
	return now;
}

void kiyot_close(struct kiyot *k)
{
	int64_t t = clock_mono_ns();

	metrics_server_stop(k->metrics);
	k->metrics = NULL;
	metrics_cells_remove(k->metrics_cells);
	k->metrics_cells = NULL;
	volsync_stop(k->volsync);
	t = kiyot_stop_step("volume sync", t);
	gc_stop(k->gc);
	t = kiyot_stop_step("the garbage collector", t);
	pool_free(k->pool); /* after the collector, which asks it */
	k->pool = NULL;
	t = kiyot_stop_step("the warm pool", t);
	podobject_reader_free(k->pod_reader);
	k->pod_reader = NULL;
	stream_server_stop(k->stream);
	k->stream = NULL;
	t = kiyot_stop_step("the streaming server (its sessions' ends)", t);
	cells_free(k->cells);
	t = kiyot_stop_step("the cells' Watches and calls", t);
	/* the Watches have ended: the last log marks go to the store */
	ctrlogs_free(k->logs);
	k->logs = NULL;
	events_free(k->events);
	catalog_refresh_stop(k->catalog); /* before the provider frees its EC2 client */
	if (k->provider.ops)
		k->provider.ops->destroy(k->provider.self);
	catalog_free(k->catalog);
	kiyot_auths_free(k);
	t = kiyot_stop_step("the provider", t);
	/* (no records: kiyot_open failed before any pre-pull could start) */
	if (!k->records ||
	    kiyot_node_prepulls_stop(k, 30000) == 0) /* else a thread still uses the store */
		image_store_free(k->node_images);
	kiyot_stop_step("the node's image pre-pulls", t);
	k->node_images = NULL;
	records_free(k->records); /* the last user of their lock is gone */
	k->records = NULL;
	regconf_free(k->regconf);
	store_close(k->store);
	free(k->cluster_id);
	free(k->runtime_config_cidr);
}

int daemon_start(struct kiyot *k, struct rpc_server **srv, struct err *err)
{
	struct rpc_server_config rc = { 0 };
	_cleanup_free_ char *addr = xasprintf("unix://%s", k->cfg.socket);
	const struct rpc_pool *pools;
	char *node;

	if (kiyot_open(k, err) < 0)
		return -err->code;
	if (k->cfg.fallback_runtime_endpoint[0] &&
	    router_open(k, k->cfg.fallback_runtime_endpoint, err) < 0)
		return err_wrap(err, "--fallback-runtime-endpoint");
	k->cellsync = cellsync_start_configured(k);
	node = kiyot_node_name(&k->cfg);
	k->kube_events = kube_recorder_start_configured(k->cfg.kubeconfig, node);
	free(node);
	rc.address = addr;
	rc.methods = cri_method_table(&rc.n_methods);
	rc.svc = k;
	/* a pool per kind of call, so that stalled pulls or slow launches never hold up the
	 * kubelet's status calls (cri_table.c) */
	pools = cri_pool_table(&rc.n_pools);
	memcpy(rc.pools, pools, rc.n_pools * sizeof(*pools));
	rc.observe = metrics_cri_observe; /* kiyot_cri_requests_total and their durations */
	umask(0077);
	return rpc_server_start(&rc, srv, err);
}

void daemon_stop(struct kiyot *k, struct rpc_server *srv)
{
	int64_t t = clock_mono_ns();

	rpc_server_stop(srv);
	t = kiyot_stop_step("the CRI server (the calls in progress)", t);
	cellsync_stop(k->cellsync);
	t = kiyot_stop_step("Cell object sync", t);
	kube_recorder_free(k->kube_events); /* what is queued gets a second */
	k->kube_events = NULL;
	t = kiyot_stop_step("Events", t);
	router_close(k);
	kiyot_stop_step("the fallback runtime's connection", t);
	kiyot_close(k);
	cellsync_free(k->cellsync);
	k->cellsync = NULL;
}
