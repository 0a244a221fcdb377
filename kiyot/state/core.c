/*
 * core.c: kiyot's records in memory, their loading and reconciliation at start, and what the
 * cells report back (unit status changes and log bytes).
 */
#include "kiyot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "sizing/catalog.h"
#include "sizing/catalog_refresh.h"
#include "providers/local/cellguard.h"
#include "providers/local/cellnat.h"
#include "cells/cells.h"
#include "clock.h"
#include "ctrlog.h"
#include "codec.h"
#include "cri/cri.h"
#include "cri/events.h"
#include "fsutil.h"
#include "image.h"
#include "log.h"
#include "metrics/metrics.h"
#include "metrics/server.h"
#include "kube/podobject.h"
#include "pool/pool.h"
#include "regconf.h"
#include "store.h"
#include "stream/server.h"
#include "cells/volsync.h"
#include "xalloc.h"

/* A random id of 64 hex digits, like other runtimes use. */
char *kiyot_new_id(void)
{
	unsigned char raw[32];
	char *id = xmalloc(65);

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		for (size_t i = 0; i < sizeof(raw); i++)
			raw[i] = (unsigned char)(rand() & 0xff);
	}
	hex_encode(raw, sizeof(raw), id);
	return id;
}

static enum container_state state_from_unit(Kiyot__Cell__V1__UnitState s)
{
	switch (s) {
	case KIYOT__CELL__V1__UNIT_STATE__UNIT_CREATED:
		return CTR_CREATED;
	case KIYOT__CELL__V1__UNIT_STATE__UNIT_RUNNING:
		return CTR_RUNNING;
	case KIYOT__CELL__V1__UNIT_STATE__UNIT_EXITED:
		return CTR_EXITED;
	default:
		return CTR_UNKNOWN;
	}
}

static void set_str(char **dst, const char *src)
{
	if (src && strcmp(*dst ? *dst : "", src) != 0) {
		free(*dst);
		*dst = xstrdup(src);
	}
}

/*
 * A remote cell's unit exited with a termination message: it goes into the node file the
 * kubelet reads (the mount at the container's terminationMessagePath). Local cells write
 * that file themselves.
 */
static void write_termination_message(struct kiyot *k, const struct container *c, const char *msg)
{
	const char *path = cri_map_get((void **)c->config->annotations, c->config->n_annotations,
				       ANN_TERMINATION_MESSAGE_PATH);
	struct err err = ERR_INIT;

	if (!k->provider.ops->remote_files || !path || !msg[0])
		return;
	for (size_t i = 0; i < c->config->n_mounts; i++) {
		const Runtime__V1__Mount *m = c->config->mounts[i];

		if (strcmp(m->container_path, path) != 0 || m->host_path[0] != '/')
			continue;
		if (fs_write_file(m->host_path, msg, strlen(msg), 0644, &err) < 0)
			log_warn("container %s: termination message: %s", c->id, err.msg);
		return;
	}
}

/* Applies a unit status to its container record; returns non-zero if anything changed.
 * Call with k->lock held. */
int kiyot_apply_unit_status(struct kiyot *k, struct container *c,
			    const Kiyot__Cell__V1__UnitStatus *st)
{
	enum container_state ns = state_from_unit(st->state);
	int changed = 0;
	struct err err = ERR_INIT;

	if (ns == CTR_UNKNOWN)
		return 0; /* the unit is gone from the cell; the record stays as it was */
	if (c->state != ns || c->started_ns != st->started_at_ns ||
	    c->finished_ns != st->finished_at_ns || c->restart_count != st->restart_count)
		changed = 1;
	c->state = ns;
	if (st->created_at_ns)
		c->created_ns = c->created_ns ? c->created_ns : st->created_at_ns;
	c->started_ns = st->started_at_ns;
	c->finished_ns = st->finished_at_ns;
	c->exit_code = st->exit_code;
	c->restart_count = st->restart_count;
	c->pid = ns == CTR_RUNNING ? st->pid : 0;
	set_str(&c->reason, st->reason);
	set_str(&c->message, st->message);
	/* a digest reference the cell resolved; not the tag an older agent reports over one */
	if (st->image_ref[0] && (strchr(st->image_ref, '@') || !strchr(c->image_ref, '@')))
		set_str(&c->image_ref, st->image_ref);
	if (st->image_id[0])
		set_str(&c->image_id, st->image_id);
	c->error_status = st->error_status;
	if (changed && ns == CTR_EXITED) {
		write_termination_message(k, c, st->termination_message);
		if (c->log)
			ctrlog_idle(c->log);
	}
	if (changed) {
		if (records_save_container(k->records, c, &err) < 0)
			log_error("container %s: %s", c->id, err.msg);
		events_publish_container(k, c);
	}
	return changed;
}

void kiyot_on_unit_status(struct kiyot *k, const char *cell_id,
			  const Kiyot__Cell__V1__UnitStatus *st)
{
	struct container *c;

	pthread_mutex_lock(&k->lock);
	c = records_container_exact(k->records, st->id);
	if (c) {
		struct sandbox *sb = records_sandbox_exact(k->records, c->sandbox_id);

		if (sb && strcmp(sb->cell_id, cell_id) == 0)
			kiyot_apply_unit_status(k, c, st);
	}
	pthread_mutex_unlock(&k->lock);
}

/* Where the kubelet reads a container's log: log_directory/log_path; NULL if not asked for. */
char *kiyot_log_file(struct kiyot *k, const struct container *c)
{
	struct sandbox *sb = records_sandbox_exact(k->records, c->sandbox_id);
	const char *lp = c->config->log_path;

	if (!lp || !lp[0])
		return NULL;
	if (lp[0] == '/')
		return xstrdup(lp);
	if (!sb || !sb->config->log_directory || !sb->config->log_directory[0])
		return NULL;
	return xasprintf("%s/%s", sb->config->log_directory, lp);
}

void kiyot_log_attach(struct kiyot *k, struct container *c)
{
	_cleanup_free_ char *path = NULL;

	if (!k->logs || c->log)
		return;
	path = kiyot_log_file(k, c);
	c->log = ctrlog_new(k->logs, c->id, path, &c->log_mark);
}

/* A log chunk from a cell's Watch callback: the writer is found under k->lock, and written
 * without it. */
void kiyot_on_unit_log(struct kiyot *k, const char *unit_id, uint64_t offset, const uint8_t *data,
		       size_t len)
{
	struct container *c;
	struct ctrlog *w = NULL;

	pthread_mutex_lock(&k->lock);
	c = records_container_exact(k->records, unit_id);
	if (c && c->log)
		w = ctrlog_get(c->log);
	pthread_mutex_unlock(&k->lock);
	if (!w)
		return; /* unknown unit */
	ctrlog_write(w, offset, data, len);
	ctrlog_put(w);
}

void kiyot_log_offsets(struct kiyot *k, const char *cell_id, Kiyot__Cell__V1__LogOffset ***out,
		       size_t *n)
{
	struct container **cs = NULL;
	struct sandbox *sb;
	size_t ncs = 0;

	pthread_mutex_lock(&k->lock);
	sb = records_sandbox_of_cell(k->records, cell_id);
	if (sb)
		ncs = records_containers(k->records, sb->id, &cs);
	*out = xcalloc(ncs + 1, sizeof(**out));
	for (*n = 0; *n < ncs; (*n)++) {
		Kiyot__Cell__V1__LogOffset *o = xmalloc(sizeof(*o));

		kiyot__cell__v1__log_offset__init(o);
		o->unit_id = xstrdup(cs[*n]->id);
		o->offset = cs[*n]->log ? ctrlog_offset(cs[*n]->log) : cs[*n]->log_mark.offset;
		(*out)[*n] = o;
	}
	pthread_mutex_unlock(&k->lock);
	containers_put(cs, ncs);
}

void kiyot_log_offsets_free(Kiyot__Cell__V1__LogOffset **o, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(o[i]->unit_id);
		free(o[i]);
	}
	free(o);
}

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
	size_t n = 0, nsb;
	int ret;

	if (k->provider.ops->remote_files)
		return;
	pthread_mutex_lock(&k->lock);
	nsb = records_sandboxes(k->records, &sbs);
	keep = xcalloc(nsb + 1, sizeof(*keep));
	for (size_t i = 0; i < nsb; i++)
		if (sbs[i]->cell_id[0])
			keep[n++] = sbs[i]->cell_id;
	ret = cellnat_hostports_prune(k->cfg.cell_cidr, keep, n, &err);
	if (ret < 0)
		log_error("hostPorts: %s", err.msg);
	else if (ret > 0)
		log_info("hostPorts: removed %d rules of cells that are gone", ret);
	for (size_t i = 0; i < nsb; i++) {
		struct sandbox *s = sbs[i];

		err_clear(&err);
		if (s->state == SANDBOX_READY && s->cell_id[0] &&
		    cri_sandbox_host_ports(k, s, s->ip, &err) < 0)
			log_error("sandbox %s: hostPorts: %s", s->id, err.msg);
	}
	pthread_mutex_unlock(&k->lock);
	sandboxes_put(sbs, nsb);
}

/* Writers for the containers loaded at start, from the marks they had. */
static void logs_attach_all(struct kiyot *k)
{
	struct container **cs;
	size_t n;

	pthread_mutex_lock(&k->lock);
	n = records_containers(k->records, NULL, &cs);
	for (size_t i = 0; i < n; i++)
		kiyot_log_attach(k, cs[i]);
	pthread_mutex_unlock(&k->lock);
	containers_put(cs, n);
}

int kiyot_open(struct kiyot *k, struct err *err)
{
	_cleanup_free_ char *db = xasprintf("%s/kiyot.db", k->cfg.state_dir);
	_cleanup_free_ char *cells_dir = xasprintf("%s/cells", k->cfg.state_dir);
	_cleanup_free_ char *node_images = xasprintf("%s/images", k->cfg.state_dir);
	struct local_provider_config lc = { 0 };
	unsigned loosened = 0;

	pthread_mutex_init(&k->lock, NULL);
	if (store_dir_prepare(k->cfg.state_dir, &loosened, err) < 0 ||
	    fs_mkdir_p(cells_dir, 0700, err) < 0)
		return -err->code;
	if (loosened)
		log_warn("state directory %s was %04o, open to other users (it holds the key of "
			 "the cells' CA): now 0700",
			 k->cfg.state_dir, loosened);
	if (store_open(db, &k->store, err) < 0)
		return -err->code;
	k->records = records_new(k->store, &k->lock);
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

		ec.cluster_id = k->cluster_id;
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
		if (catalog_refresh_start(k->catalog, provider_ec2_client(&k->provider),
					  CATALOG_REFRESH_INTERVAL_S, err) < 0)
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
	if (cells_new(k, &k->cells, err) < 0)
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
	records_free(k->records);
	k->records = NULL;
	kiyot_auths_free(k);
	t = kiyot_stop_step("the provider", t);
	if (kiyot_node_prepulls_stop(k, 30000) == 0) /* else a thread still uses the store */
		image_store_free(k->node_images);
	kiyot_stop_step("the node's image pre-pulls", t);
	k->node_images = NULL;
	regconf_free(k->regconf);
	store_close(k->store);
	free(k->cluster_id);
	free(k->runtime_config_cidr);
	pthread_mutex_destroy(&k->lock);
}
