/*
 * cri_pod.c: the desired pod kiyot sends a cell: the sandbox and its containers as units, each
 * with the state the CRI calls so far ask for.
 */
#include "cri.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "cells/cells.h"
#include "cri_security.h"
#include "log.h"
#include "cells/provision.h"
#include "cells/shipvol.h"
#include "cells/volsync.h"
#include "xalloc.h"

/* The cell's kube-proxy unit (cells.kubeProxy) and where its kubeconfig is mounted. */
#define KUBE_PROXY_UNIT_ID "kiyot-kube-proxy"
#define KUBE_PROXY_KUBECONFIG "/var/lib/kube-proxy/kubeconfig"

/* A volume to ship before the pod is applied. */
struct ship {
	const char *name, *host_path;
};

void *cri_msg_copy(const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = xmalloc(n ? n : 1);
	void *copy;

	protobuf_c_message_pack(m, buf);
	copy = protobuf_c_message_unpack(m->descriptor, NULL, n, buf);
	free(buf);
	if (!copy)
		abort();
	return copy;
}

/* An image the cell can pull: an image id the node knows maps back to a repo digest. Needs
 * the records' lock (the answer may be a record's). */
static const char *pullable_ref(struct kiyot *k, const char *image)
{
	const struct image_rec *i = records_image_exact(k->records, image);

	if (!i && strlen(image) == 64) { /* a bare digest */
		_cleanup_free_ char *id = xasprintf("sha256:%s", image);

		i = records_image_exact(k->records, id);
	}

	if (i && strcspn(i->repo_digests, "\n"))
		return i->repo_digests; /* first line; caller copies n bytes */
	if (i && strcspn(i->repo_tags, "\n"))
		return i->repo_tags;
	return image;
}

static char *first_line(struct arena *a, const char *s)
{
	size_t n = strcspn(s, "\n");
	char *d = arena_alloc(a, n + 1);

	memcpy(d, s, n);
	return d;
}

static Kiyot__Cell__V1__Unit *unit_build(struct kiyot *k, struct arena *a,
					 const struct container *c)
{
	const Runtime__V1__ContainerConfig *cfg = c->config;
	Kiyot__Cell__V1__Unit *u = arena_alloc(a, sizeof(*u));

	kiyot__cell__v1__unit__init(u);
	u->id = arena_strdup(a, c->id);
	u->name = arena_strdup(a, cfg->metadata ? cfg->metadata->name : "");
	u->image = first_line(a, pullable_ref(k, cfg->image ? cfg->image->image : ""));
	if (cfg->image) {
		const struct image_rec *img = kiyot_find_image(k, cfg->image->image);

		/* borrowed like the rest: packed before the lock is released */
		u->auth = (Kiyot__Cell__V1__RegistryAuth *)kiyot_auth_for(
			k, img ? img->id : cfg->image->image);
		if (img)
			u->image_id = img->id; /* a cell on the node's disk takes it from there */
	}
	u->n_command = cfg->n_command;
	u->command = cfg->command; /* borrowed: the request is packed before records change */
	u->n_args = cfg->n_args;
	u->args = cfg->args;
	u->n_env = cfg->n_envs;
	u->env = arena_alloc(a, (cfg->n_envs + 1) * sizeof(*u->env));
	for (size_t i = 0; i < cfg->n_envs; i++) {
		u->env[i] = arena_alloc(a, sizeof(*u->env[i]));
		kiyot__cell__v1__key_value__init(u->env[i]);
		u->env[i]->key = cfg->envs[i]->key;
		u->env[i]->value = cfg->envs[i]->value;
	}
	u->working_dir = cfg->working_dir;
	u->n_mounts = cfg->n_mounts;
	u->mounts = arena_alloc(a, (cfg->n_mounts + 1) * sizeof(*u->mounts));
	for (size_t i = 0; i < cfg->n_mounts; i++) {
		u->mounts[i] = arena_alloc(a, sizeof(*u->mounts[i]));
		kiyot__cell__v1__mount__init(u->mounts[i]);
		u->mounts[i]->container_path = cfg->mounts[i]->container_path;
		u->mounts[i]->host_path = cfg->mounts[i]->host_path;
		u->mounts[i]->readonly = cfg->mounts[i]->readonly;
	}
	switch (c->desired) {
	case DESIRED_RUNNING:
		u->desired = KIYOT__CELL__V1__UNIT_DESIRED__RUNNING;
		break;
	case DESIRED_STOPPED:
		u->desired = KIYOT__CELL__V1__UNIT_DESIRED__STOPPED;
		break;
	default:
		u->desired = KIYOT__CELL__V1__UNIT_DESIRED__CREATED;
	}
	u->stop_timeout_s = c->stop_timeout_s;
	if (cfg->linux && cfg->linux->resources) {
		const Runtime__V1__LinuxContainerResources *r = cfg->linux->resources;

		if (r->cpu_quota > 0 && r->cpu_period > 0)
			u->cpu_millis = r->cpu_quota * 1000 / r->cpu_period;
		u->memory_bytes = r->memory_limit_in_bytes;
		/* (CreateContainer and UpdateContainerResources refused them to an older agent) */
		u->n_unified = r->n_unified;
		u->unified = arena_alloc(a, (r->n_unified + 1) * sizeof(*u->unified));
		for (size_t i = 0; i < r->n_unified; i++) {
			u->unified[i] = arena_alloc(a, sizeof(*u->unified[i]));
			kiyot__cell__v1__key_value__init(u->unified[i]);
			u->unified[i]->key = r->unified[i]->key;
			u->unified[i]->value = r->unified[i]->value;
		}
	}
	u->tty = cfg->tty;
	u->stdin = cfg->stdin;
	u->stdin_once = cfg->stdin_once;
	u->termination_message_path = (char *)cri_map_get(
		(void **)cfg->annotations, cfg->n_annotations, ANN_TERMINATION_MESSAGE_PATH);
	cri_security_unit(a, c, u);
	return u;
}

/* Appends s to the arena-backed list v (n entries, room for at least n + 1). */
static void strv_push(char **v, size_t *n, const char *s)
{
	v[(*n)++] = (char *)s;
}

/*
 * The cell's kube-proxy (cells.kubeProxy): a privileged system unit in the pod's network
 * namespace, so the pod's connections to Service IPs are translated in the cell as on a
 * node. Its kubeconfig is a node file, bind-mounted or shipped like the pod's volumes.
 */
static Kiyot__Cell__V1__Unit *kube_proxy_unit(struct kiyot *k, struct arena *a)
{
	const struct kube_proxy_config *kp = &k->cfg.kube_proxy;
	Kiyot__Cell__V1__Unit *u = arena_alloc(a, sizeof(*u));
	char host[256] = "";

	kiyot__cell__v1__unit__init(u);
	u->id = arena_strdup(a, KUBE_PROXY_UNIT_ID);
	u->name = arena_strdup(a, "kube-proxy");
	u->image = kp->image;
	u->system = 1;
	u->privileged = 1;
	u->desired = KIYOT__CELL__V1__UNIT_DESIRED__RUNNING;
	u->stop_timeout_s = 5;
	if (kp->n_command) {
		u->command = kp->command;
		u->n_command = kp->n_command;
		u->args = kp->args;
		u->n_args = kp->n_args;
	} else {
		u->command = arena_alloc(a, 2 * sizeof(char *));
		strv_push(u->command, &u->n_command, "/usr/local/bin/kube-proxy");
		u->args = arena_alloc(a, (kp->n_args + 3) * sizeof(char *));
		if (kp->kubeconfig && kp->kubeconfig[0])
			strv_push(u->args, &u->n_args, "--kubeconfig=" KUBE_PROXY_KUBECONFIG);
		/* the cell stands for this node: its Node object gives kube-proxy its
		 * topology */
		if (gethostname(host, sizeof(host) - 1) == 0 && host[0]) {
			char *flag = arena_alloc(a, sizeof(host) + 32);

			snprintf(flag, sizeof(host) + 32, "--hostname-override=%s", host);
			strv_push(u->args, &u->n_args, flag);
		}
		for (size_t i = 0; i < kp->n_args; i++)
			strv_push(u->args, &u->n_args, kp->args[i]);
	}
	if (kp->kubeconfig && kp->kubeconfig[0]) {
		u->mounts = arena_alloc(a, 2 * sizeof(*u->mounts));
		u->mounts[0] = arena_alloc(a, sizeof(*u->mounts[0]));
		kiyot__cell__v1__mount__init(u->mounts[0]);
		u->mounts[0]->container_path = arena_strdup(a, KUBE_PROXY_KUBECONFIG);
		u->mounts[0]->host_path = kp->kubeconfig;
		u->mounts[0]->readonly = 1;
		u->n_mounts = 1;
	}
	return u;
}

static Kiyot__Cell__V1__RestartPolicy restart_policy(const struct sandbox *sb)
{
	const char *p = cri_map_get((void **)sb->config->annotations, sb->config->n_annotations,
				    ANN_RESTART_POLICY);

	if (p && strcmp(p, "Always") == 0)
		return KIYOT__CELL__V1__RESTART_POLICY__ALWAYS;
	if (p && strcmp(p, "OnFailure") == 0)
		return KIYOT__CELL__V1__RESTART_POLICY__ON_FAILURE;
	/* with a kubelet, the kubelet restarts containers itself */
	return KIYOT__CELL__V1__RESTART_POLICY__NEVER;
}

/* Builds the desired pod of a sandbox. Needs the records' lock. */
static Kiyot__Cell__V1__Pod *pod_build(struct kiyot *k, struct arena *a, const struct sandbox *sb)
{
	Kiyot__Cell__V1__Pod *p = arena_alloc(a, sizeof(*p));
	const Runtime__V1__PodSandboxMetadata *md = sb->config->metadata;
	const Runtime__V1__DNSConfig *dns = sb->config->dns_config;
	struct container **cs;
	size_t n;

	kiyot__cell__v1__pod__init(p);
	p->uid = arena_strdup(a, md->uid);
	p->name = arena_strdup(a, md->name);
	p->namespace_ = arena_strdup(a, md->namespace_);
	p->hostname = arena_strdup(a, sb->config->hostname);
	p->restart_policy = restart_policy(sb);
	cri_security_pod(a, sb->config, p);
	if (dns) {
		p->n_dns_servers = dns->n_servers;
		p->dns_servers = dns->servers;
		p->n_dns_searches = dns->n_searches;
		p->dns_searches = dns->searches;
		p->n_dns_options = dns->n_options;
		p->dns_options = dns->options;
	}
	n = records_containers(k->records, sb->id, &cs);
	p->units = arena_alloc(a, (n + 2) * sizeof(*p->units));
	for (size_t i = 0; i < n; i++)
		if (cs[i]->desired != DESIRED_REMOVED)
			p->units[p->n_units++] = unit_build(k, a, cs[i]);
	containers_put(cs, n);
	if (k->cfg.kube_proxy.image && k->cfg.kube_proxy.image[0])
		p->units[p->n_units++] = kube_proxy_unit(k, a);
	return p;
}

/*
 * For a cell that does not share the node's files: every unit mount becomes a volume of the
 * cell, an emptyDir made there or files shipped from the node (shipvol.h), listed in *ships.
 */
static int remote_mounts(struct arena *a, Kiyot__Cell__V1__Pod *p, struct ship **ships,
			 size_t *n_ships, struct err *err)
{
	size_t total = 0;

	for (size_t u = 0; u < p->n_units; u++)
		total += p->units[u]->n_mounts;
	p->volumes = arena_alloc(a, (total + 1) * sizeof(*p->volumes));
	*ships = arena_alloc(a, (total + 1) * sizeof(**ships));
	*n_ships = 0;
	for (size_t u = 0; u < p->n_units; u++) {
		for (size_t i = 0; i < p->units[u]->n_mounts; i++) {
			Kiyot__Cell__V1__Mount *m = p->units[u]->mounts[i];
			/* copied: the records it is borrowed from may change after the lock */
			const char *host = arena_strdup(a, m->host_path ? m->host_path : "");
			char name[SHIPVOL_NAME_MAX];
			enum shipvol_kind kind;
			Kiyot__Cell__V1__Volume *v;
			bool listed = false;

			if (p->units[u]->system) {
				/* a node file kiyot's own configuration names */
				kind = SHIPVOL_SHIPPED;
				shipvol_name(host, name);
			} else if (shipvol_classify(p->uid, host, &kind, name, err) < 0) {
				return err_wrap(err, "container %s: mount %s", p->units[u]->name,
						m->container_path);
			}
			m->volume = arena_strdup(a, name);
			m->host_path = arena_strdup(a, "");
			/* a volume two units mount is made (and shipped) once */
			for (size_t j = 0; j < p->n_volumes; j++)
				listed |= strcmp(p->volumes[j]->name, name) == 0;
			if (listed)
				continue;
			v = arena_alloc(a, sizeof(*v));
			kiyot__cell__v1__volume__init(v);
			v->name = m->volume;
			v->kind = kind == SHIPVOL_EMPTY_DIR
					  ? KIYOT__CELL__V1__VOLUME__KIND__EMPTY_DIR
					  : KIYOT__CELL__V1__VOLUME__KIND__SHIPPED;
			p->volumes[p->n_volumes++] = v;
			if (kind == SHIPVOL_SHIPPED)
				(*ships)[(*n_ships)++] = (struct ship){ m->volume, host };
		}
	}
	return 0;
}

int cri_apply_pod(struct kiyot *k, const char *sandbox_id, int64_t timeout_ms, struct err *err)
{
	struct arena a = ARENA_INIT;
	Kiyot__Cell__V1__ApplyResponse *resp = NULL;
	Kiyot__Cell__V1__Pod *pod;
	struct ship *ships = NULL;
	size_t n_ships = 0;
	ProtobufCMessage *packed_copy;
	struct cell_entry *held;
	struct sandbox *sb;
	char *cell_id;
	int ret;

	{
		_cleanup_records_unlock_ struct records *r = records_locked(k->records);

		sb = records_sandbox(r, sandbox_id);
		if (!sb || !sb->cell_id[0])
			return err_set(err, EBUSY, "sandbox %s has no running cell", sandbox_id);
		cell_id = xstrdup(sb->cell_id);
	}

	held = cells_apply_lock(k->cells, cell_id);
	/* build under the record lock and take a packed copy, so the records may change while the
	 * agent works */
	records_lock(k->records);
	sb = records_sandbox(k->records, sandbox_id);
	if (!sb) {
		records_unlock(k->records);
		cells_apply_unlock(k->cells, held);
		free(cell_id);
		return err_set(err, ENOENT, "sandbox %s not found", sandbox_id);
	}
	pod = pod_build(k, &a, sb);
	if (k->provider.ops->remote_files && remote_mounts(&a, pod, &ships, &n_ships, err) < 0) {
		records_unlock(k->records);
		cells_apply_unlock(k->cells, held);
		arena_release(&a);
		free(cell_id);
		return -err->code;
	}
	packed_copy = cri_msg_copy(&pod->base);
	records_unlock(k->records);

	/* a unit finds its shipped volumes' files in the cell when it is created */
	ret = 0;
	for (size_t i = 0; i < n_ships && ret == 0; i++)
		ret = volsync_ship(k->volsync, cell_id, ships[i].name, ships[i].host_path, err);
	arena_release(&a);
	if (ret == 0)
		ret = cells_apply(k->cells, cell_id, (Kiyot__Cell__V1__Pod *)packed_copy,
				  timeout_ms, &resp, err);
	protobuf_c_message_free_unpacked(packed_copy, NULL);
	cells_apply_unlock(k->cells, held);
	free(cell_id);
	if (ret < 0)
		return ret;
	records_lock(k->records);
	for (size_t i = 0; i < resp->n_units; i++) {
		struct container *c = records_container_exact(k->records, resp->units[i]->id);

		if (c)
			kiyot_apply_unit_status(k, c, resp->units[i]);
	}
	records_unlock(k->records);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return 0;
}
