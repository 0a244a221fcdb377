/*
 * cri_image.c: CRI's ImageService. Where the layers live depends on the cells: cells that
 * share the node's disk (local) take their images from one store of the node (state_dir/
 * images), which PullImage fills as containerd's does; remote cells (ec2) pull inside the cell
 * of the pod that asks (PullImage carries the sandbox config), and a pull without a pod only
 * resolves the image at its registry. Either way kiyot remembers what was pulled so
 * ImageStatus and ListImages answer the kubelet, and so a later pod's cell can pull the same
 * image by digest.
 */
#include "cri.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "cells/cells.h"
#include "clock.h"
#include "metrics/metrics.h"
#include "image.h"
#include "log.h"
#include "xalloc.h"

/* Credentials of the last pull per image id, in memory only (never on disk, never logged),
 * for cells that later need the same image by digest. */
struct remembered_auth {
	char *image_id;
	Kiyot__Cell__V1__RegistryAuth auth;
	struct remembered_auth *next;
};

static void auth_free(struct remembered_auth *a)
{
	free(a->image_id);
	free(a->auth.username);
	free(a->auth.password);
	free(a->auth.auth);
	free(a->auth.server_address);
	free(a->auth.identity_token);
	free(a->auth.registry_token);
	free(a);
}

/* Keeps the credentials a pull used. Needs the records' lock. */
static void auth_remember(struct kiyot *k, const char *image_id,
			  const Runtime__V1__AuthConfig *auth)
{
	struct remembered_auth *a, **pp;

	for (pp = &k->auths; (a = *pp); pp = &a->next)
		if (strcmp(a->image_id, image_id) == 0) {
			*pp = a->next;
			auth_free(a);
			break;
		}
	if (!auth)
		return;
	a = xcalloc(1, sizeof(*a));
	kiyot__cell__v1__registry_auth__init(&a->auth);
	a->image_id = xstrdup(image_id);
	a->auth.username = xstrdup(auth->username);
	a->auth.password = xstrdup(auth->password);
	a->auth.auth = xstrdup(auth->auth);
	a->auth.server_address = xstrdup(auth->server_address);
	a->auth.identity_token = xstrdup(auth->identity_token);
	a->auth.registry_token = xstrdup(auth->registry_token);
	a->next = k->auths;
	k->auths = a;
}

const Kiyot__Cell__V1__RegistryAuth *kiyot_auth_for(struct kiyot *k, const char *image_id)
{
	for (struct remembered_auth *a = k->auths; a; a = a->next)
		if (strcmp(a->image_id, image_id) == 0)
			return &a->auth;
	return NULL;
}

void kiyot_auths_free(struct kiyot *k)
{
	while (k->auths) {
		struct remembered_auth *a = k->auths;

		k->auths = a->next;
		auth_free(a);
	}
}

/* Does the newline-separated list contain s as a whole line? */
static int list_has(const char *list, const char *s)
{
	size_t n = strlen(s);

	for (const char *p = list; *p;) {
		size_t l = strcspn(p, "\n");

		if (l == n && strncmp(p, s, n) == 0)
			return 1;
		p += l;
		if (*p == '\n')
			p++;
	}
	return 0;
}

/* "busybox" -> "docker.io/library/busybox:latest"; other refs unchanged except a default tag. */
static char *normalise(const char *ref)
{
	const char *slash = strchr(ref, '/');
	const char *last = strrchr(ref, '/');
	const char *name = last ? last + 1 : ref;
	int has_host = slash && (memchr(ref, '.', (size_t)(slash - ref)) ||
				 memchr(ref, ':', (size_t)(slash - ref)) ||
				 strncmp(ref, "localhost/", 10) == 0);
	int tagged = strchr(name, ':') || strchr(ref, '@');

	if (strncmp(ref, "sha256:", 7) == 0)
		return xstrdup(ref);
	return xasprintf("%s%s%s%s", has_host ? "" : "docker.io/",
			 (!has_host && !slash) ? "library/" : "", ref, tagged ? "" : ":latest");
}

/* Finds an image by id (with or without "sha256:"), tag or digest: the first listed that has
 * it. Needs the records' lock (the record is borrowed). */
static struct image_rec *image_find(struct kiyot *k, const char *ref)
{
	_cleanup_free_ char *norm = normalise(ref);
	struct image_rec **v, *hit = NULL;
	size_t n = records_images(k->records, &v);

	for (size_t j = 0; j < n && !hit; j++) {
		struct image_rec *i = v[j];

		if (strcmp(i->id, ref) == 0 || (strlen(ref) == 64 && strcmp(i->id + 7, ref) == 0) ||
		    list_has(i->repo_tags, norm) || list_has(i->repo_digests, ref) ||
		    list_has(i->repo_digests, norm))
			hit = i;
	}
	images_put(v, n);
	return hit;
}

const struct image_rec *kiyot_find_image(struct kiyot *k, const char *ref)
{
	return image_find(k, ref);
}

static char **lines_dup(struct rpc_call *call, const char *list, size_t *n)
{
	size_t count = 0;
	char **out;

	for (const char *p = list; *p; p++)
		if (*p == '\n')
			count++;
	out = rpc_alloc(call, (count + 2) * sizeof(*out));
	*n = 0;
	for (const char *p = list; *p;) {
		size_t l = strcspn(p, "\n");

		if (l)
			out[(*n)++] = rpc_strndup(call, p, l);
		p += l;
		if (*p == '\n')
			p++;
	}
	return out;
}

static Runtime__V1__Image *image_msg(struct rpc_call *call, const struct image_rec *i)
{
	Runtime__V1__Image *m = rpc_msg_new(call, &runtime__v1__image__descriptor);
	char *end = NULL;
	long long uid;

	m->id = rpc_strdup(call, i->id);
	m->repo_tags = lines_dup(call, i->repo_tags, &m->n_repo_tags);
	m->repo_digests = lines_dup(call, i->repo_digests, &m->n_repo_digests);
	m->size = i->size;
	/* the image's USER is "user" or "user:group"; the CRI reports the user part, a uid
	 * when it is numeric and a name otherwise */
	uid = i->user[0] ? strtoll(i->user, &end, 10) : 0;
	if (i->user[0] >= '0' && i->user[0] <= '9' && end && (*end == '\0' || *end == ':')) {
		m->uid = rpc_msg_new(call, &runtime__v1__int64_value__descriptor);
		m->uid->value = uid;
	} else if (i->user[0] && i->user[0] != ':') {
		m->username = rpc_strndup(call, i->user, strcspn(i->user, ":"));
	}
	return m;
}

int cri_list_images(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		    ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ListImagesRequest *r = (const void *)req;
	Runtime__V1__ListImagesResponse *out = (void *)resp;
	struct kiyot *k = svc;
	const char *want = r->filter && r->filter->image ? r->filter->image->image : "";
	struct image_rec *only = NULL, **v;
	size_t n;

	(void)err;
	if (!cri_records_lock(k, call))
		return RPC_NEEDS_WORKER;
	if (want[0] && !(only = image_find(k, want))) {
		records_unlock(k->records);
		return 0;
	}
	n = records_images(k->records, &v);
	out->images = rpc_alloc(call, (n + 1) * sizeof(*out->images));
	for (size_t i = 0; i < n; i++)
		if (!only || v[i] == only)
			out->images[out->n_images++] = image_msg(call, v[i]);
	records_unlock(k->records);
	images_put(v, n);
	return 0;
}

int cri_image_status(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		     ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ImageStatusRequest *r = (const void *)req;
	Runtime__V1__ImageStatusResponse *out = (void *)resp;
	struct kiyot *k = svc;
	struct image_rec *i;

	if (!r->image || !r->image->image[0])
		return err_set(err, EINVAL, "image.image: required");
	if (!cri_records_lock(k, call))
		return RPC_NEEDS_WORKER;
	i = image_find(k, r->image->image);
	if (i)
		out->image = image_msg(call, i); /* absent: an empty answer, not an error */
	records_unlock(k->records);
	return 0;
}

/* Adds a line to a newline-separated list unless present. */
static void list_add(char **list, const char *s)
{
	char *n;

	if (!s[0] || list_has(*list, s))
		return;
	n = (*list)[0] ? xasprintf("%s\n%s", *list, s) : xstrdup(s);
	free(*list);
	*list = n;
}

/* Records what a cell pulled. Needs the records' lock. */
static void image_remember(struct kiyot *k, const char *ref,
			   const Kiyot__Cell__V1__PullImageResponse *p)
{
	struct image_rec *i = records_image_exact(k->records, p->image_id), **v;
	_cleanup_free_ char *norm = normalise(ref);
	struct err err = ERR_INIT;
	size_t n;

	if (!i) {
		i = xcalloc(1, sizeof(*i));
		i->id = xstrdup(p->image_id);
		i->repo_tags = xstrdup("");
		i->repo_digests = xstrdup("");
		i->user = xstrdup(p->user);
		records_add_image(k->records, i);
	}
	/* a tag now points here: take it off any other image */
	n = records_images(k->records, &v);
	for (size_t j = 0; j < n; j++) {
		struct image_rec *x = v[j];

		if (x == i || !list_has(x->repo_tags, norm))
			continue;
		_cleanup_free_ char *rest = xstrdup("");

		for (const char *q = x->repo_tags; *q;) {
			size_t l = strcspn(q, "\n");
			_cleanup_free_ char *line = xstrndup(q, l);

			if (strcmp(line, norm) != 0)
				list_add(&rest, line);
			q += l;
			if (*q == '\n')
				q++;
		}
		free(x->repo_tags);
		x->repo_tags = steal_ptr(rest);
		if (records_save_image(k->records, x, &err) < 0)
			log_error("image %s: %s", x->id, err.msg);
	}
	images_put(v, n);
	if (!strchr(ref, '@') && strncmp(ref, "sha256:", 7) != 0)
		list_add(&i->repo_tags, norm);
	list_add(&i->repo_digests, p->repo_digest);
	i->size = p->size;
	if (records_save_image(k->records, i, &err) < 0)
		log_error("image %s: %s", i->id, err.msg);
}

/* The cell of the sandbox a pull is for, by the pod's uid/name/namespace. Needs the records' lock. */
static struct sandbox *sandbox_for(struct kiyot *k, const Runtime__V1__PodSandboxConfig *cfg)
{
	struct sandbox *best = NULL, **v;
	size_t n;

	if (!cfg || !cfg->metadata)
		return NULL;
	n = records_sandboxes(k->records, &v);
	for (size_t i = 0; i < n; i++) {
		struct sandbox *s = v[i];
		const Runtime__V1__PodSandboxMetadata *m = s->config->metadata;

		if (s->state != SANDBOX_READY || strcmp(m->uid, cfg->metadata->uid) != 0 ||
		    strcmp(m->name, cfg->metadata->name) != 0 ||
		    strcmp(m->namespace_, cfg->metadata->namespace_) != 0)
			continue;
		if (!best || m->attempt > best->config->metadata->attempt)
			best = s;
	}
	sandboxes_put(v, n);
	return best;
}

static const char *nz(const char *s)
{
	return s && s[0] ? s : NULL;
}

/* A pull on the node: into the node's store when it keeps one; else (remote cells, and no
 * running pod to pull into: crictl pull, or a kubelet pre-pulling) kiyot only resolves the
 * image at its registry (manifest and config, both verified) and remembers it, and the cell
 * that runs it later pulls it by digest. */
static int pull_on_node(struct kiyot *k, struct rpc_call *call,
			const Runtime__V1__PullImageRequest *r, Runtime__V1__PullImageResponse *out,
			struct err *err)
{
	Kiyot__Cell__V1__PullImageResponse p = KIYOT__CELL__V1__PULL_IMAGE_RESPONSE__INIT;
	struct image_auth auth = { 0 };
	struct image_info *info = NULL;
	int64_t t0 = clock_mono_ns();
	bool had = false;
	int ret;

	if (r->auth) {
		auth.username = nz(r->auth->username);
		auth.password = nz(r->auth->password);
		auth.auth = nz(r->auth->auth);
		auth.identity_token = nz(r->auth->identity_token);
		auth.registry_token = nz(r->auth->registry_token);
	}
	if (k->node_images) {
		had = image_lookup(k->node_images, r->image->image, &info, err) == 0;
		image_info_free(steal_ptr(info));
		err_clear(err);
		ret = image_pull(k->node_images, r->image->image, &auth, &info, err);
	} else {
		ret = image_inspect(k->regconf, r->image->image, &auth, &info, err);
	}
	/* bytes: what came into the node's store (an inspect brings no layers) */
	metrics_image_pull(ret < 0 ? "error" : "ok",
			   ret < 0 || had || !k->node_images ? 0 : info->size,
			   (double)(clock_mono_ns() - t0) / 1e9);
	if (ret < 0)
		return ret;
	p.repo_digest = info->repo_digest;
	p.image_id = info->image_id;
	p.size = info->size;
	p.user = info->user;
	records_lock(k->records);
	image_remember(k, r->image->image, &p);
	auth_remember(k, info->image_id, r->auth);
	records_unlock(k->records);
	out->image_ref = rpc_strdup(call, info->image_id);
	image_info_free(info);
	return 0;
}

int cri_pull_image(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		   ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__PullImageRequest *r = (const void *)req;
	Runtime__V1__PullImageResponse *out = (void *)resp;
	Kiyot__Cell__V1__PullImageRequest areq = KIYOT__CELL__V1__PULL_IMAGE_REQUEST__INIT;
	Kiyot__Cell__V1__RegistryAuth auth = KIYOT__CELL__V1__REGISTRY_AUTH__INIT;
	Kiyot__Cell__V1__PullImageResponse *ares = NULL;
	struct kiyot *k = svc;
	struct sandbox *sb;
	char *cell_id;
	int64_t t0;
	int ret;

	if (!r->image || !r->image->image[0])
		return err_set(err, EINVAL, "image.image: required");
	if (k->node_images)
		return pull_on_node(k, call, r, out, err);
	records_lock(k->records);
	sb = sandbox_for(k, r->sandbox_config);
	cell_id = sb && sb->cell_id[0] ? xstrdup(sb->cell_id) : NULL;
	records_unlock(k->records);
	if (!cell_id)
		return pull_on_node(k, call, r, out, err);
	areq.image = r->image->image;
	if (r->auth) {
		auth.username = r->auth->username;
		auth.password = r->auth->password;
		auth.auth = r->auth->auth;
		auth.server_address = r->auth->server_address;
		auth.identity_token = r->auth->identity_token;
		auth.registry_token = r->auth->registry_token;
		areq.auth = &auth;
	}
	t0 = clock_mono_ns();
	ret = cells_pull_image(k->cells, cell_id, &areq, &ares, err);
	free(cell_id);
	/* bytes: the image's compressed size, as the cell says (whether it held some layers or
	 * not, it does not say) */
	metrics_image_pull(ret < 0 ? "error" : "ok", ret < 0 ? 0 : ares->size,
			   (double)(clock_mono_ns() - t0) / 1e9);
	if (ret < 0)
		return -err->code;
	records_lock(k->records);
	image_remember(k, r->image->image, ares);
	auth_remember(k, ares->image_id, r->auth);
	records_unlock(k->records);
	out->image_ref = rpc_strdup(call, ares->image_id);
	protobuf_c_message_free_unpacked(&ares->base, NULL);
	return 0;
}

/* Whether a container kiyot keeps runs (or will run) image id. Needs the records' lock. */
static bool image_in_use(struct kiyot *k, const char *id)
{
	struct container **v;
	size_t n = records_containers(k->records, NULL, &v);
	bool used = false;

	for (size_t j = 0; j < n && !used; j++) {
		const struct container *c = v[j];
		const char *want = c->config->image ? c->config->image->image : "";
		const struct image_rec *i;

		used = strcmp(c->image_id, id) == 0 || strcmp(want, id) == 0 ||
		       (strlen(want) == 64 && strcmp(want, id + 7) == 0) ||
		       ((i = image_find(k, want)) && strcmp(i->id, id) == 0);
	}
	containers_put(v, n);
	return used;
}

/* Removes image id from the node's store unless kiyot lists it or a container uses it. */
static void node_image_release(struct kiyot *k, const char *id)
{
	struct err err = ERR_INIT;
	bool keep;

	records_lock(k->records);
	keep = image_in_use(k, id) || records_image_exact(k->records, id);
	records_unlock(k->records);
	/* a pull that brings it back meanwhile makes this -EBUSY: the next sweep decides */
	if (!keep && image_remove(k->node_images, id, &err) < 0 && err.code != EBUSY)
		log_warn("node image store: %s", err.msg);
}

void kiyot_node_images_sweep(struct kiyot *k)
{
	char **ids;

	if (!k->node_images)
		return;
	ids = image_store_ids(k->node_images);
	for (size_t i = 0; ids[i]; i++) {
		node_image_release(k, ids[i]);
		free(ids[i]);
	}
	free(ids);
}

struct node_prepull {
	struct image_prepull *p;
	struct node_prepull *next;
};

/* Frees the pre-pulls that ended, or (all) stops them all, waiting up to wait_ms each; how
 * many are left. Needs the records' lock. */
static int node_prepulls_reap(struct kiyot *k, bool all, int wait_ms)
{
	int left = 0;

	for (struct node_prepull **pp = &k->node_prepulls; *pp;) {
		struct node_prepull *np = *pp;

		if ((all || image_prepull_done(np->p)) && image_prepull_stop(np->p, wait_ms) == 0) {
			*pp = np->next;
			free(np);
		} else {
			left++;
			pp = &np->next;
		}
	}
	return left;
}

void kiyot_node_prepull(struct kiyot *k, const json_t *refs)
{
	size_t n = json_array_size(refs);
	char **v = xcalloc(n + 1, sizeof(char *));
	struct node_prepull *np = xcalloc(1, sizeof(*np));

	for (size_t i = 0; i < n; i++)
		v[i] = (char *)json_string_value(json_array_get(refs, i));
	np->p = image_prepull_start(k->node_images, v, n);
	free(v);
	records_lock(k->records);
	node_prepulls_reap(k, false, 0);
	if (np->p) {
		np->next = k->node_prepulls;
		k->node_prepulls = np;
		np = NULL;
	}
	records_unlock(k->records);
	free(np);
}

int kiyot_node_prepulls_stop(struct kiyot *k, int wait_ms)
{
	int left;

	records_lock(k->records);
	left = node_prepulls_reap(k, true, wait_ms);
	records_unlock(k->records);
	if (left)
		log_warn("node image store: %d pre-pulls did not stop in %d ms", left, wait_ms);
	return left ? -EBUSY : 0;
}

int cri_remove_image(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		     ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__RemoveImageRequest *r = (const void *)req;
	struct kiyot *k = svc;
	_cleanup_free_ char *id = NULL;
	struct image_rec *i;
	int ret = 0;

	(void)call;
	(void)resp;
	if (!r->image || !r->image->image[0])
		return err_set(err, EINVAL, "image.image: required");
	records_lock(k->records);
	i = image_find(k, r->image->image);
	if (i) {
		id = xstrdup(i->id);
		ret = records_remove_image(k->records, i, err);
	}
	records_unlock(k->records);
	/* its layers go now, or at the sweep after the last container using it is removed */
	if (ret == 0 && id && k->node_images)
		node_image_release(k, id);
	return ret; /* removing an absent image is not an error */
}

int cri_image_fs_info(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		      ProtobufCMessage *resp, struct err *err)
{
	Runtime__V1__ImageFsInfoResponse *out = (void *)resp;
	struct kiyot *k = svc;
	Runtime__V1__FilesystemUsage *u =
		rpc_msg_new(call, &runtime__v1__filesystem_usage__descriptor);

	(void)req;
	(void)err;
	u->timestamp = clock_now_ns();
	u->fs_id = rpc_msg_new(call, &runtime__v1__filesystem_identifier__descriptor);
	u->fs_id->mountpoint = rpc_strdup(call, k->cfg.state_dir);
	u->used_bytes = rpc_msg_new(call, &runtime__v1__uint64_value__descriptor);
	u->inodes_used = rpc_msg_new(call, &runtime__v1__uint64_value__descriptor);
	/* the node's store holds the images of local cells (counted by their layers' size, as
	 * the registry gave them); remote cells keep their layers themselves */
	if (k->node_images) {
		struct image_rec **v;
		size_t n;

		records_lock(k->records);
		n = records_images(k->records, &v);
		for (size_t i = 0; i < n; i++)
			u->used_bytes->value += v[i]->size;
		records_unlock(k->records);
		images_put(v, n);
	}
	out->image_filesystems = rpc_alloc(call, sizeof(*out->image_filesystems));
	out->image_filesystems[0] = u;
	out->n_image_filesystems = 1;
	/* containers' writable layers live in cells too */
	out->container_filesystems = rpc_alloc(call, sizeof(*out->container_filesystems));
	out->container_filesystems[0] = u;
	out->n_container_filesystems = 1;
	return 0;
}
