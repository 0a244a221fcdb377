/*
 * cri_container_status.c: what the kubelet and crictl read of containers: ContainerStatus and
 * ListContainers, answered from kiyot's records (what the cells last reported) as containerd
 * answers them.
 */
#include "cri.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "arena.h"
#include "pbjson.h"
#include "daemon/kiyot.h"
#include "xalloc.h"

static Runtime__V1__ContainerMetadata *metadata_dup(struct rpc_call *call,
						    const Runtime__V1__ContainerMetadata *m)
{
	Runtime__V1__ContainerMetadata *o =
		rpc_msg_new(call, &runtime__v1__container_metadata__descriptor);

	o->name = rpc_strdup(call, m->name);
	o->attempt = m->attempt;
	return o;
}

static Runtime__V1__ImageSpec *image_dup(struct rpc_call *call, const Runtime__V1__ImageSpec *i)
{
	Runtime__V1__ImageSpec *o = rpc_msg_new(call, &runtime__v1__image_spec__descriptor);

	o->image = rpc_strdup(call, i ? i->image : "");
	return o;
}

/* The record of the image a container runs: by the id its cell reported (or the node
 * resolved at CreateContainer), else by the reference it was created with; NULL when the
 * node does not know it. Needs the records' lock. */
static const struct image_rec *image_of(struct kiyot *k, const struct container *c)
{
	const struct image_rec *i = NULL;

	if (c->image_id[0])
		i = records_image_exact(k->records, c->image_id);
	if (!i && c->config->image && c->config->image->image[0])
		i = kiyot_find_image(k, c->config->image->image);
	return i;
}

/* A newline-separated list's first entry, or NULL for an empty list. */
static char *first_of(struct rpc_call *call, const char *list)
{
	size_t n = strcspn(list, "\n");

	return n ? rpc_strndup(call, list, n) : NULL;
}

/* ContainerStatus's image_ref as containerd gives it: the image's repo digest
 * ("registry/app@sha256:..."; the kubelet shows it as the pod's containerStatuses[].imageID),
 * else the image's id, else the reference it was created with. Needs the records' lock. */
static char *status_image_ref(struct kiyot *k, struct rpc_call *call, const struct container *c)
{
	const struct image_rec *i = image_of(k, c);
	char *digest = i ? first_of(call, i->repo_digests) : NULL;

	if (digest)
		return digest;
	if (strchr(c->image_ref, '@'))
		return rpc_strdup(call, c->image_ref); /* as the cell resolved it */
	if (i)
		return rpc_strdup(call, i->id);
	if (c->image_id[0])
		return rpc_strdup(call, c->image_id);
	return rpc_strdup(call, c->image_ref[0] ? c->image_ref : c->config->image->image);
}

/* ContainerStatus's image as containerd gives it: the image's first tag when the node knows
 * one, else the reference it was created with (the kubelet creates by image id). Needs
 * the records' lock. */
static Runtime__V1__ImageSpec *status_image(struct kiyot *k, struct rpc_call *call,
					    const struct container *c)
{
	const struct image_rec *i = image_of(k, c);
	Runtime__V1__ImageSpec *o = image_dup(call, c->config->image);
	char *tag = i ? first_of(call, i->repo_tags) : NULL;

	if (tag)
		o->image = tag;
	return o;
}

static void *arena_pb_alloc(void *arena, size_t n)
{
	return arena_alloc(arena, n);
}

static void arena_pb_free(void *arena, void *p)
{
	(void)arena;
	(void)p; /* the arena goes all at once */
}

/* A deep copy of m in the call's arena, for the response. */
static void *msg_copy_in(struct rpc_call *call, const ProtobufCMessage *m)
{
	ProtobufCAllocator a = { .alloc = arena_pb_alloc,
				 .free = arena_pb_free,
				 .allocator_data = rpc_arena(call) };
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = rpc_alloc(call, n ? n : 1);
	void *copy;

	protobuf_c_message_pack(m, buf);
	copy = protobuf_c_message_unpack(m->descriptor, &a, n, buf);
	if (!copy)
		abort(); /* packed here: only out of memory fails */
	return copy;
}

/* ContainerStatus's resources: the container's linux.resources as created and updated since
 * (containerd answers those of the runtime spec it made of them). */
static Runtime__V1__ContainerResources *status_resources(struct rpc_call *call,
							 const struct container *c)
{
	Runtime__V1__ContainerResources *r =
		rpc_msg_new(call, &runtime__v1__container_resources__descriptor);
	const Runtime__V1__LinuxContainerConfig *l = c->config->linux;

	if (l && l->resources)
		r->linux = msg_copy_in(call, &l->resources->base);
	else
		r->linux = rpc_msg_new(call, &runtime__v1__linux_container_resources__descriptor);
	return r;
}

/* The runtime spec's linux.resources (OCI's shape) of CRI resources, or NULL for none. */
static json_t *spec_resources(const Runtime__V1__LinuxContainerResources *r)
{
	json_t *cpu = json_object(), *mem = json_object(), *out = json_object();

	if (r->cpu_shares)
		json_object_set_new(cpu, "shares", json_integer(r->cpu_shares));
	if (r->cpu_quota)
		json_object_set_new(cpu, "quota", json_integer(r->cpu_quota));
	if (r->cpu_period)
		json_object_set_new(cpu, "period", json_integer(r->cpu_period));
	if (r->cpuset_cpus[0])
		json_object_set_new(cpu, "cpus", json_string(r->cpuset_cpus));
	if (r->cpuset_mems[0])
		json_object_set_new(cpu, "mems", json_string(r->cpuset_mems));
	if (r->memory_limit_in_bytes)
		json_object_set_new(mem, "limit", json_integer(r->memory_limit_in_bytes));
	if (r->memory_swap_limit_in_bytes)
		json_object_set_new(mem, "swap", json_integer(r->memory_swap_limit_in_bytes));
	json_object_set_new(out, "cpu", cpu);
	json_object_set_new(out, "memory", mem);
	return out;
}

/* A mount in the runtime spec's shape. */
static json_t *spec_mount(const Runtime__V1__Mount *m)
{
	static const char *const propagation[] = { "rprivate", "rslave", "rshared" };
	unsigned p = (unsigned)m->propagation < 3 ? (unsigned)m->propagation : 0;

	return json_pack("{s:s, s:s, s:s, s:[s, s, s]}", "destination", m->container_path, "type",
			 "bind", "source", m->host_path, "options", "rbind", propagation[p],
			 m->readonly ? "ro" : "rw");
}

/* The runtime spec kiyot asks the cell for, in OCI's shape (containerd answers the spec it
 * made): the command, environment, working directory, terminal, user, hostname, mounts,
 * annotations and resources of the container's config. What the image adds (its entrypoint
 * when no command is given, its user and environment) is resolved in the cell and not here.
 */
static json_t *runtime_spec(const struct container *c, const struct sandbox *sb)
{
	const Runtime__V1__ContainerConfig *cfg = c->config;
	const Runtime__V1__LinuxContainerConfig *l = cfg->linux;
	const Runtime__V1__LinuxContainerSecurityContext *sc = l ? l->security_context : NULL;
	json_t *spec = json_pack("{s:s}", "ociVersion", "1.0.2");
	json_t *proc = json_pack("{s:b}", "terminal", cfg->tty);
	json_t *v;

	if (cfg->n_command) {
		v = json_array();
		for (size_t i = 0; i < cfg->n_command; i++)
			json_array_append_new(v, json_string(cfg->command[i]));
		for (size_t i = 0; i < cfg->n_args; i++)
			json_array_append_new(v, json_string(cfg->args[i]));
		json_object_set_new(proc, "args", v);
	}
	v = json_array();
	for (size_t i = 0; i < cfg->n_envs; i++) {
		_cleanup_free_ char *kv =
			xasprintf("%s=%s", cfg->envs[i]->key, cfg->envs[i]->value);

		json_array_append_new(v, json_string(kv));
	}
	json_object_set_new(proc, "env", v);
	if (cfg->working_dir[0])
		json_object_set_new(proc, "cwd", json_string(cfg->working_dir));
	if (sc && (sc->run_as_user || sc->run_as_group || sc->n_supplemental_groups)) {
		json_t *user = json_object();

		if (sc->run_as_user)
			json_object_set_new(user, "uid", json_integer(sc->run_as_user->value));
		if (sc->run_as_group)
			json_object_set_new(user, "gid", json_integer(sc->run_as_group->value));
		if (sc->n_supplemental_groups) {
			json_t *g = json_array();

			for (size_t i = 0; i < sc->n_supplemental_groups; i++)
				json_array_append_new(g, json_integer(sc->supplemental_groups[i]));
			json_object_set_new(user, "additionalGids", g);
		}
		json_object_set_new(proc, "user", user);
	}
	json_object_set_new(spec, "process", proc);
	if (sb && sb->config->hostname[0])
		json_object_set_new(spec, "hostname", json_string(sb->config->hostname));
	v = json_array();
	for (size_t i = 0; i < cfg->n_mounts; i++)
		json_array_append_new(v, spec_mount(cfg->mounts[i]));
	json_object_set_new(spec, "mounts", v);
	v = json_object();
	for (size_t i = 0; i < cfg->n_annotations; i++)
		json_object_set_new(v, cfg->annotations[i]->key,
				    json_string(cfg->annotations[i]->value));
	json_object_set_new(spec, "annotations", v);
	if (l && l->resources)
		json_object_set_new(spec, "linux",
				    json_pack("{s:o}", "resources", spec_resources(l->resources)));
	return spec;
}

/* ContainerStatus's verbose info: info["info"], JSON in the shape containerd gives it (which
 * crictl inspect's templates read): sandboxID, pid, removing, runtimeType, config and
 * runtimeSpec, and the cell the container runs in. Needs the records' lock. */
static void status_info(struct kiyot *k, struct rpc_call *call, const struct container *c,
			Runtime__V1__ContainerStatusResponse *out)
{
	const struct sandbox *sb = records_sandbox(k->records, c->sandbox_id);
	Runtime__V1__ContainerStatusResponse__InfoEntry *e =
		rpc_msg_new(call, &runtime__v1__container_status_response__info_entry__descriptor);
	json_t *j = json_object();
	char *text;

	json_object_set_new(j, "sandboxID", json_string(c->sandbox_id));
	json_object_set_new(j, "pid", json_integer(c->state == CTR_RUNNING ? c->pid : 0));
	json_object_set_new(j, "removing", json_boolean(c->desired == DESIRED_REMOVED));
	json_object_set_new(j, "runtimeType", json_string("kiyot.cell"));
	json_object_set_new(j, "cellID", json_string(sb ? sb->cell_id : ""));
	json_object_set_new(j, "config", pbjson_from_msg(&c->config->base));
	json_object_set_new(j, "runtimeSpec", runtime_spec(c, sb));
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!text)
		abort(); /* only out of memory: every string in it came through jansson */
	e->key = rpc_strdup(call, "info");
	e->value = rpc_strdup(call, text);
	free(text);
	out->info = rpc_alloc(call, sizeof(*out->info));
	out->info[0] = e;
	out->n_info = 1;
}

static Runtime__V1__ContainerState cri_state(enum container_state s)
{
	switch (s) {
	case CTR_CREATED:
		return RUNTIME__V1__CONTAINER_STATE__CONTAINER_CREATED;
	case CTR_RUNNING:
		return RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING;
	case CTR_EXITED:
		return RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED;
	default:
		return RUNTIME__V1__CONTAINER_STATE__CONTAINER_UNKNOWN;
	}
}

int cri_container_status(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			 ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ContainerStatusRequest *r = (const void *)req;
	Runtime__V1__ContainerStatusResponse *out = (void *)resp;
	struct kiyot *k = svc;
	Runtime__V1__ContainerStatus *st;
	struct container *c;
	char *logf;

	if (!cri_records_lock(k, call))
		return RPC_NEEDS_WORKER;
	c = records_container(k->records, r->container_id);
	if (!c) {
		records_unlock(k->records);
		return err_set(err, ENOENT, "container %s not found", r->container_id);
	}
	st = rpc_msg_new(call, &runtime__v1__container_status__descriptor);
	st->id = rpc_strdup(call, c->id);
	st->metadata = metadata_dup(call, c->config->metadata);
	st->state = cri_state(c->state);
	st->created_at = c->created_ns;
	st->started_at = c->started_ns;
	st->finished_at = c->finished_ns;
	st->exit_code = c->exit_code;
	st->image = status_image(k, call, c);
	st->image_ref = status_image_ref(k, call, c);
	st->resources = status_resources(call, c);
	st->reason = rpc_strdup(call, c->reason);
	st->message = rpc_strdup(call, c->message);
	st->n_labels = c->config->n_labels;
	st->labels = (void *)cri_map_dup(call,
					 &runtime__v1__container_status__labels_entry__descriptor,
					 (void **)c->config->labels, c->config->n_labels);
	st->n_annotations = c->config->n_annotations;
	st->annotations = (void *)cri_map_dup(
		call, &runtime__v1__container_status__annotations_entry__descriptor,
		(void **)c->config->annotations, c->config->n_annotations);
	st->n_mounts = c->config->n_mounts;
	st->mounts = rpc_alloc(call, (c->config->n_mounts + 1) * sizeof(*st->mounts));
	for (size_t i = 0; i < c->config->n_mounts; i++) {
		Runtime__V1__Mount *m = rpc_msg_new(call, &runtime__v1__mount__descriptor);

		m->container_path = rpc_strdup(call, c->config->mounts[i]->container_path);
		m->host_path = rpc_strdup(call, c->config->mounts[i]->host_path);
		m->readonly = c->config->mounts[i]->readonly;
		m->selinux_relabel = c->config->mounts[i]->selinux_relabel;
		m->propagation = c->config->mounts[i]->propagation;
		st->mounts[i] = m;
	}
	logf = kiyot_log_file(k, c);
	st->log_path = rpc_strdup(call, logf ? logf : "");
	free(logf);
	out->status = st;
	if (r->verbose)
		status_info(k, call, c, out);
	records_unlock(k->records);
	return 0;
}

static int container_matches(struct kiyot *k, const struct container *c,
			     const Runtime__V1__ContainerFilter *f)
{
	(void)k;
	if (!f)
		return 1;
	if (f->id[0] && strncmp(c->id, f->id, strlen(f->id)) != 0)
		return 0;
	if (f->state && f->state->state != cri_state(c->state))
		return 0;
	if (f->pod_sandbox_id[0] &&
	    strncmp(c->sandbox_id, f->pod_sandbox_id, strlen(f->pod_sandbox_id)) != 0)
		return 0;
	return cri_labels_match((void **)c->config->labels, c->config->n_labels,
				(void **)f->label_selector, f->n_label_selector);
}

int cri_list_containers(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ListContainersRequest *r = (const void *)req;
	Runtime__V1__ListContainersResponse *out = (void *)resp;
	struct kiyot *k = svc;
	struct container **cs;
	size_t n;

	(void)err;
	if (!cri_records_lock(k, call))
		return RPC_NEEDS_WORKER;
	n = records_containers(k->records, NULL, &cs);
	out->containers = rpc_alloc(call, (n + 1) * sizeof(*out->containers));
	for (size_t i = 0; i < n; i++) {
		const struct container *c = cs[i];
		Runtime__V1__Container *o;

		if (!container_matches(k, c, r->filter))
			continue;
		o = rpc_msg_new(call, &runtime__v1__container__descriptor);
		o->id = rpc_strdup(call, c->id);
		o->pod_sandbox_id = rpc_strdup(call, c->sandbox_id);
		o->metadata = metadata_dup(call, c->config->metadata);
		o->image = image_dup(call, c->config->image);
		/* the image's id, as containerd lists it (the kubelet's image GC matches it) */
		o->image_ref = c->image_id[0] ? rpc_strdup(call, c->image_id)
					      : status_image_ref(k, call, c);
		o->state = cri_state(c->state);
		o->created_at = c->created_ns;
		o->n_labels = c->config->n_labels;
		o->labels = (void *)cri_map_dup(call,
						&runtime__v1__container__labels_entry__descriptor,
						(void **)c->config->labels, c->config->n_labels);
		o->n_annotations = c->config->n_annotations;
		o->annotations = (void *)cri_map_dup(
			call, &runtime__v1__container__annotations_entry__descriptor,
			(void **)c->config->annotations, c->config->n_annotations);
		out->containers[out->n_containers++] = o;
	}
	records_unlock(k->records);
	containers_put(cs, n);
	return 0;
}
