/*
 * image.c: the image store. Layers cached by digest, one flattened root file system per image
 * with its image.json record, references and repo digests attached to images, one download or
 * unpack per key even when several pulls want it, and reload after a restart. What a reference
 * resolves to at the registry comes from image_manifest.c.
 */
#include "image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cancel.h"
#include "clock.h"
#include "fsutil.h"
#include "image_internal.h"
#include "log.h"
#include "registry.h"
#include "unpack.h"
#include "xalloc.h"

#define IMAGE_MAX_RECORD (1u << 20)
#define IMAGE_DEFAULT_MAX_LAYER (8ull << 30)
#define IMAGE_DEFAULT_MAX_UNPACKED (32ull << 30)

/* What the store remembers of one unpacked image (also image.json on disk). */
struct img_rec {
	char *id;	/* "sha256:<config hex>" */
	char **refs;	/* normalised references pointing at it */
	char **digests; /* repo digests "host/repo@sha256:..." */
	char **layers;	/* blob digests of its layers; NULL in records older than the field */
	uint64_t size;
	char **entrypoint;
	char **cmd;
	char **env;
	char *user;
	char *working_dir;
	int pins; /* pulls starting their root file system from this one's (under mu) */
};

/* Work under way for one key ("ref:...", "img:...", "blob:..."); later callers wait on cv. */
struct flight {
	char *key;
	bool done;
	int ret;
	struct err err;
	int waiters;
	pthread_cond_t cv;
	struct flight *next;
};

struct image_store {
	char *root;
	const struct regconf *rc;
	uint64_t max_layer;
	uint64_t max_unpacked;
	pthread_mutex_t mu; /* guards recs, flights and the removals' fields below */
	struct img_rec **recs;
	size_t n_recs;
	size_t cap_recs;
	struct flight *flights;
	/* Removed images' trees, renamed out of the way and deleted by the reaper thread (made
	 * at the first removal, joined by image_store_free), so that a removal answers without
	 * waiting for a walk of the whole tree. */
	pthread_cond_t reap_cond; /* with mu: work queued, one done, quit, hold changed */
	struct doomed *doomed;	  /* oldest first */
	struct doomed **doomed_tail;
	unsigned long long removal_seq;
	bool reaper_started, reaping, reaper_quit, reaper_hold;
	pthread_t reaper;
};

/* A tree to delete. */
struct doomed {
	char *path;
	struct doomed *next;
};

/* ---- records ---- */

static void rec_free(struct img_rec *r)
{
	if (!r)
		return;
	free(r->id);
	strv_free(r->refs);
	strv_free(r->digests);
	strv_free(r->layers);
	strv_free(r->entrypoint);
	strv_free(r->cmd);
	strv_free(r->env);
	free(r->user);
	free(r->working_dir);
	free(r);
}

static const char *image_hex(const char *id)
{
	return id + strlen("sha256:");
}

/* A new record for a resolved image, known by no reference yet. */
static struct img_rec *rec_from_info(const struct image_info *info)
{
	struct img_rec *r = xcalloc(1, sizeof(*r));

	r->id = xstrdup(info->image_id);
	r->refs = xcalloc(1, sizeof(char *));
	r->digests = xcalloc(1, sizeof(char *));
	r->size = info->size;
	r->entrypoint = strv_dup(info->entrypoint);
	r->cmd = strv_dup(info->cmd);
	r->env = strv_dup(info->env);
	r->user = xstrdup(info->user);
	r->working_dir = xstrdup(info->working_dir);
	return r;
}

static json_t *rec_to_json(const struct img_rec *r)
{
	json_t *j = json_pack("{s:s, s:o, s:o, s:I, s:o, s:o, s:o, s:s, s:s}", "id", r->id, "refs",
			      image_strv_to_json(r->refs), "repo_digests",
			      image_strv_to_json(r->digests), "size", (json_int_t)r->size,
			      "entrypoint", image_strv_to_json(r->entrypoint), "cmd",
			      image_strv_to_json(r->cmd), "env", image_strv_to_json(r->env), "user",
			      r->user, "working_dir", r->working_dir);

	if (j && r->layers)
		json_object_set_new(j, "layers", image_strv_to_json(r->layers));
	return j;
}

/* Parses an image.json written by rec_save. */
static int rec_from_json(const json_t *j, struct img_rec **out, struct err *err)
{
	struct img_rec *r = xcalloc(1, sizeof(*r));
	const char *id = json_string_value(json_object_get(j, "id"));
	const char *user = json_string_value(json_object_get(j, "user"));
	const char *wd = json_string_value(json_object_get(j, "working_dir"));
	json_t *size = json_object_get(j, "size");
	int ret = 0;

	if (!image_digest_valid(id) || !user || !wd || !json_is_integer(size)) {
		rec_free(r);
		return err_set(err, EINVAL, "malformed image record");
	}
	r->id = xstrdup(id);
	r->user = xstrdup(user);
	r->working_dir = xstrdup(wd);
	r->size = (uint64_t)json_integer_value(size);
	ret = image_strv_from_json(json_object_get(j, "refs"), "refs", &r->refs, err);
	if (ret == 0)
		ret = image_strv_from_json(json_object_get(j, "repo_digests"), "repo_digests",
					   &r->digests, err);
	if (ret == 0)
		ret = image_strv_from_json(json_object_get(j, "entrypoint"), "entrypoint",
					   &r->entrypoint, err);
	if (ret == 0)
		ret = image_strv_from_json(json_object_get(j, "cmd"), "cmd", &r->cmd, err);
	if (ret == 0)
		ret = image_strv_from_json(json_object_get(j, "env"), "env", &r->env, err);
	if (ret == 0 && json_object_get(j, "layers"))
		ret = image_strv_from_json(json_object_get(j, "layers"), "layers", &r->layers, err);
	for (size_t i = 0; ret == 0 && r->layers && r->layers[i]; i++)
		if (!image_digest_valid(r->layers[i]))
			ret = err_set(err, EINVAL, "malformed image record: layers[%zu]", i);
	if (ret < 0) {
		rec_free(r);
		return ret;
	}
	*out = r;
	return 0;
}

/* Writes dir/image.json atomically. */
static int rec_save(const struct img_rec *r, const char *dir, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/image.json", dir);
	json_t *j = rec_to_json(r);
	char *s = json_dumps(j, JSON_COMPACT);
	int ret;

	json_decref(j);
	if (!s)
		abort();
	ret = fs_write_file(path, s, strlen(s), 0644, err);
	free(s);
	return ret;
}

static char *image_dir(const struct image_store *s, const char *id)
{
	return xasprintf("%s/images/%s", s->root, image_hex(id));
}

/* Builds what callers get of an image of the store at root; ref and repo_digest may be NULL
 * (then taken from the record). */
static struct image_info *rec_info_at(const char *root, const struct img_rec *r, const char *ref,
				      const char *repo_digest)
{
	struct image_info *info = xcalloc(1, sizeof(*info));

	info->ref = xstrdup(ref ? ref : r->refs && r->refs[0] ? r->refs[0] : "");
	info->repo_digest = xstrdup(repo_digest			  ? repo_digest
				    : r->digests && r->digests[0] ? r->digests[0]
								  : "");
	info->image_id = xstrdup(r->id);
	info->rootfs = xasprintf("%s/images/%s/rootfs", root, image_hex(r->id));
	info->size = r->size;
	info->entrypoint = strv_dup(r->entrypoint);
	info->cmd = strv_dup(r->cmd);
	info->env = strv_dup(r->env);
	info->user = xstrdup(r->user);
	info->working_dir = xstrdup(r->working_dir);
	return info;
}

static struct image_info *rec_info(const struct image_store *s, const struct img_rec *r,
				   const char *ref, const char *repo_digest)
{
	return rec_info_at(s->root, r, ref, repo_digest);
}

void image_info_free(struct image_info *info)
{
	if (!info)
		return;
	free(info->ref);
	free(info->repo_digest);
	free(info->image_id);
	free(info->rootfs);
	strv_free(info->entrypoint);
	strv_free(info->cmd);
	strv_free(info->env);
	free(info->user);
	free(info->working_dir);
	free(info);
}

/* The record with this id; caller holds mu. */
static struct img_rec *store_find_id(const struct image_store *s, const char *id)
{
	for (size_t i = 0; i < s->n_recs; i++)
		if (!strcmp(s->recs[i]->id, id))
			return s->recs[i];
	return NULL;
}

/* The record a reference or repo digest names; caller holds mu. */
static struct img_rec *store_find_ref(const struct image_store *s, const char *ref)
{
	for (size_t i = 0; i < s->n_recs; i++)
		if (strv_has(s->recs[i]->refs, ref) || strv_has(s->recs[i]->digests, ref))
			return s->recs[i];
	return NULL;
}

/* The repo digest of r for repository prefix "host/repo@", or NULL. */
static const char *rec_digest_for(const struct img_rec *r, const char *host, const char *repo)
{
	_cleanup_free_ char *prefix = xasprintf("%s/%s@", host, repo);

	for (size_t i = 0; r->digests && r->digests[i]; i++)
		if (!strncmp(r->digests[i], prefix, strlen(prefix)))
			return r->digests[i];
	return NULL;
}

/* ---- one piece of work per key ---- */

/* Returns 1 when the caller now owns the work for key (and must call flight_end), 0 when
 * another caller did it successfully meanwhile (or stopped because its own caller went away:
 * look again), or that caller's error; -ECANCELED when this thread's caller goes away while
 * it waits (cancel.h). */
static int flight_begin(struct image_store *s, const char *key, struct flight **out,
			struct err *err)
{
	struct flight *f;
	int ret;

	pthread_mutex_lock(&s->mu);
	for (f = s->flights; f; f = f->next)
		if (!strcmp(f->key, key))
			break;
	if (!f) {
		f = xcalloc(1, sizeof(*f));
		f->key = xstrdup(key);
		pthread_cond_init(&f->cv, NULL);
		f->next = s->flights;
		s->flights = f;
		pthread_mutex_unlock(&s->mu);
		*out = f;
		return 1;
	}
	/* a waiter whose own caller goes away stops waiting; one whose owner's caller went away
	 * does the work itself (0: look again), so only the callers who left see -ECANCELED */
	f->waiters++;
	while (!f->done && !cancel_requested()) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += ts.tv_nsec >= 800000000L;
		ts.tv_nsec = (ts.tv_nsec + 200000000L) % 1000000000L;
		pthread_cond_timedwait(&f->cv, &s->mu, &ts);
	}
	if (!f->done)
		ret = err_set(err, ECANCELED, "cancelled while waiting for another pull of %s",
			      key);
	else if (f->ret == -ECANCELED)
		ret = 0;
	else if ((ret = f->ret) < 0)
		*err = f->err;
	if (--f->waiters == 0 && f->done) {
		pthread_cond_destroy(&f->cv);
		free(f->key);
		free(f);
	}
	pthread_mutex_unlock(&s->mu);
	return ret < 0 ? ret : 0;
}

/* Publishes the result of the owner's work and wakes the waiters. */
static void flight_end(struct image_store *s, struct flight *f, int ret, const struct err *err)
{
	pthread_mutex_lock(&s->mu);
	for (struct flight **p = &s->flights; *p; p = &(*p)->next) {
		if (*p == f) {
			*p = f->next;
			break;
		}
	}
	f->done = true;
	f->ret = ret;
	if (ret < 0)
		f->err = *err;
	pthread_cond_broadcast(&f->cv);
	if (f->waiters == 0) {
		pthread_cond_destroy(&f->cv);
		free(f->key);
		free(f);
	}
	pthread_mutex_unlock(&s->mu);
}

/* ---- blobs and unpacking ---- */

/* Makes sure the layer blob is in the cache (downloaded and verified once). */
static int image_ensure_blob(struct image_store *s, struct reg_client *c, const struct img_layer *l,
			     struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/blobs/sha256/%s", s->root, image_hex(l->digest));
	_cleanup_free_ char *key = xasprintf("blob:%s", l->digest);
	struct flight *f;
	int ret;

	if (l->size >= 0 && (uint64_t)l->size > s->max_layer)
		return err_set(err, EFBIG, "layer %s: %lld bytes is over the limit of %llu bytes",
			       l->digest, (long long)l->size, (unsigned long long)s->max_layer);
	for (;;) {
		if (fs_exists(path))
			return 0;
		ret = flight_begin(s, key, &f, err);
		if (ret < 0)
			return ret;
		if (ret == 1)
			break;
	}
	ret = fs_exists(path) ? 0
			      : reg_fetch_blob_file(c, l->digest, l->size, s->max_layer, path, err);
	flight_end(s, f, ret, err);
	return ret;
}

/* The image of the store whose layers are the first of m's, the most of them (at least one),
 * or NULL; *n gets how many. Caller holds mu. */
static struct img_rec *store_pick_base(const struct image_store *s, const struct img_manifest *m,
				       size_t *n)
{
	struct img_rec *best = NULL;

	*n = 0;
	for (size_t i = 0; i < s->n_recs; i++) {
		char **l = s->recs[i]->layers;
		size_t k = 0;

		if (!l)
			continue;
		while (l[k] && k < m->n_layers && !strcmp(l[k], m->layers[k].digest))
			k++;
		if (l[k] || k <= *n)
			continue; /* not a prefix of m's layers, or no longer one */
		best = s->recs[i];
		*n = k;
	}
	return best;
}

/* Starts rootfs (empty) from the base image's tree; returns how many layers that gives, 0
 * when the base is NULL or its tree cannot be linked (rootfs then empty again: every layer is
 * unpacked, as without a base). */
static size_t image_start_from(struct image_store *s, const struct img_rec *base, size_t n_base,
			       const char *rootfs, const char *id, struct err *err)
{
	_cleanup_free_ char *from = NULL;
	struct err e = ERR_INIT;

	if (!base)
		return 0;
	from = xasprintf("%s/images/%s/rootfs", s->root, image_hex(base->id));
	if (image_tree_link(from, rootfs, &e) == 0)
		return n_base;
	log_info("image %s: unpacking every layer: the tree of image %s, which has the first %zu, "
		 "could not be linked: %s",
		 id, base->id, n_base, e.msg);
	if (fs_remove_tree(rootfs, err) < 0 || fs_mkdir_p(rootfs, 0755, err) < 0)
		return (size_t)-1;
	return 0;
}

/* What the threads fetching a pull's layers need. */
struct build_fetch {
	struct image_store *s;
	const struct img_manifest *m;
};

static int build_fetch_layer(void *ud, struct reg_client *c, size_t i, struct err *err)
{
	struct build_fetch *b = ud;

	return image_ensure_blob(b->s, c, &b->m->layers[i], err);
}

/* Makes what the pull wrote so far (blobs, root file system) durable: one syncfs of the
 * store's file system, instead of a flush per file. */
static int store_sync(const struct image_store *s, struct err *err)
{
	_cleanup_close_ int fd = open(s->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return err_errno(err, "open %s", s->root);
	if (syncfs(fd) < 0)
		return err_errno(err, "sync the file system of %s", s->root);
	return 0;
}

/* Makes the rename of an image's directory into images/ durable. */
static int store_sync_images(const struct image_store *s, struct err *err)
{
	_cleanup_free_ char *images = xasprintf("%s/images", s->root);
	_cleanup_close_ int fd = open(images, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return err_errno(err, "open %s", images);
	if (fsync(fd) < 0)
		return err_errno(err, "sync %s", images);
	return 0;
}

/* Builds the image's root file system in images/<hex>.tmp, from the base image's tree (which
 * has its first n_base layers; base NULL: none) and the other layers, each unpacked as soon as
 * it is downloaded (a few download at once, in order); then makes it durable and renames it to
 * images/<hex>. A failure removes the scratch directory. */
static int image_build(struct image_store *s, struct reg_client *c, const struct img_manifest *m,
		       const struct img_rec *r, const struct img_rec *base, size_t n_base,
		       struct err *err)
{
	_cleanup_free_ char *dir = image_dir(s, r->id);
	_cleanup_free_ char *tmp = xasprintf("%s.tmp", dir);
	_cleanup_free_ char *rootfs = xasprintf("%s/rootfs", tmp);
	struct build_fetch bf = { s, m };
	struct img_fetcher *fetcher = NULL;
	struct err ignore = ERR_INIT;
	int64_t t0 = clock_mono_ns(), t1, t2;
	size_t first = 0;
	int ret;

	ret = fs_remove_tree(tmp, err);
	if (ret == 0)
		ret = fs_mkdir_p(rootfs, 0755, err);
	if (ret == 0) {
		first = image_start_from(s, base, n_base, rootfs, r->id, err);
		if (first == (size_t)-1)
			ret = -err->code;
	}
	t1 = clock_mono_ns();
	if (ret == 0 && first < m->n_layers)
		ret = img_fetch_start(c, first, m->n_layers, build_fetch_layer, &bf, &fetcher, err);
	for (size_t i = first; ret == 0 && i < m->n_layers; i++) {
		_cleanup_free_ char *blob =
			xasprintf("%s/blobs/sha256/%s", s->root, image_hex(m->layers[i].digest));

		ret = img_fetch_wait(fetcher, i, err);
		if (ret == 0)
			ret = unpack_layer(rootfs, blob, m->layers[i].digest, s->max_unpacked, err);
	}
	img_fetch_end(fetcher);
	if (ret == 0 && chmod(rootfs, 0755) < 0)
		ret = err_errno(err, "chmod %s", rootfs);
	t2 = clock_mono_ns();
	/* nothing is recorded before all it needs is on disk */
	if (ret == 0)
		ret = store_sync(s, err);
	if (ret == 0)
		ret = rec_save(r, tmp, err);
	if (ret == 0 && rename(tmp, dir) < 0)
		ret = err_errno(err, "rename %s", tmp);
	if (ret == 0)
		ret = store_sync_images(s, err);
	log_debug("image %s: %zu of %zu layers from image %s in %lld ms, the rest fetched and "
		  "unpacked in %lld ms, made durable and recorded in %lld ms",
		  r->id, first, m->n_layers, first ? base->id : "(none)",
		  (long long)(t1 - t0) / 1000000, (long long)(t2 - t1) / 1000000,
		  (long long)(clock_mono_ns() - t2) / 1000000);
	if (ret < 0)
		fs_remove_tree(tmp, &ignore);
	return ret;
}

/* Attaches ref and repo digest to the image, moving ref away from any other image, and saves
 * the records that changed. Caller holds mu. */
static void store_attach(struct image_store *s, struct img_rec *r, const char *ref,
			 const char *repo_digest)
{
	struct err e = ERR_INIT;

	for (size_t i = 0; i < s->n_recs; i++) {
		_cleanup_free_ char *dir = NULL;

		if (s->recs[i] == r || !image_strv_remove(s->recs[i]->refs, ref))
			continue;
		dir = image_dir(s, s->recs[i]->id);
		if (rec_save(s->recs[i], dir, &e) < 0)
			log_warn("image store: %s", e.msg);
	}
	if (!strv_has(r->refs, ref) || !strv_has(r->digests, repo_digest)) {
		_cleanup_free_ char *dir = image_dir(s, r->id);

		r->refs = image_strv_add(r->refs, ref);
		r->digests = image_strv_add(r->digests, repo_digest);
		if (rec_save(r, dir, &e) < 0)
			log_warn("image store: %s", e.msg);
	}
}

/* Unpacks the image unless it already is, once even when several pulls want it. */
static int image_materialize(struct image_store *s, struct reg_client *c,
			     const struct img_manifest *m, struct img_rec *r, struct err *err)
{
	_cleanup_free_ char *key = xasprintf("img:%s", r->id);
	struct img_rec *base;
	struct flight *f;
	size_t n_base;
	bool have;
	int ret;

	for (;;) {
		pthread_mutex_lock(&s->mu);
		have = store_find_id(s, r->id) != NULL;
		pthread_mutex_unlock(&s->mu);
		if (have)
			return 0;
		ret = flight_begin(s, key, &f, err);
		if (ret < 0)
			return ret;
		if (ret == 1)
			break;
	}
	/* the base stays (image_remove refuses it) until its tree is linked */
	pthread_mutex_lock(&s->mu);
	base = store_pick_base(s, m, &n_base);
	if (base)
		base->pins++;
	pthread_mutex_unlock(&s->mu);
	ret = image_build(s, c, m, r, base, n_base, err);
	pthread_mutex_lock(&s->mu);
	if (base)
		base->pins--;
	if (ret == 0) {
		xgrow((void **)&s->recs, &s->cap_recs, s->n_recs + 1, sizeof(*s->recs));
		s->recs[s->n_recs++] = r;
	}
	pthread_mutex_unlock(&s->mu);
	flight_end(s, f, ret, err);
	return ret == 0 ? 1 : ret;
}

/* The network part of a pull: manifest, config, layers, unpack. */
static int image_fetch(struct image_store *s, const struct image_ref *ref, const char *norm,
		       const struct image_auth *auth, struct image_info **out, struct err *err)
{
	struct reg_client *c = NULL;
	struct img_manifest m = { 0 };
	struct image_info *remote = NULL;
	struct img_rec *r = NULL, *cur;
	int64_t t0 = clock_mono_ns();
	int ret;

	ret = image_resolve_remote(s->rc, ref, norm, auth, &c, &m, &remote, err);
	if (ret < 0)
		return ret;
	log_debug("image %s: resolved in %lld ms", norm,
		  (long long)(clock_mono_ns() - t0) / 1000000);
	r = rec_from_info(remote);
	r->layers = xcalloc(m.n_layers + 1, sizeof(char *));
	for (size_t i = 0; i < m.n_layers; i++)
		r->layers[i] = xstrdup(m.layers[i].digest);
	ret = image_materialize(s, c, &m, r, err);
	if (ret == 1)
		r = NULL; /* now owned by the store */
	if (ret >= 0) {
		pthread_mutex_lock(&s->mu);
		cur = store_find_id(s, remote->image_id);
		if (cur) {
			store_attach(s, cur, norm, remote->repo_digest);
			*out = rec_info(s, cur, norm, remote->repo_digest);
			ret = 0;
		} else {
			ret = err_set(err, ENOENT, "image %s vanished from the store",
				      remote->image_id);
		}
		pthread_mutex_unlock(&s->mu);
	}
	rec_free(r);
	image_info_free(remote);
	image_manifest_release(&m);
	reg_client_free(c);
	return ret;
}

int image_pull(struct image_store *s, const char *ref, const struct image_auth *auth,
	       struct image_info **out, struct err *err)
{
	struct image_ref r = { 0 };
	_cleanup_free_ char *norm = NULL;
	_cleanup_free_ char *key = NULL;
	struct flight *f;
	struct img_rec *rec;
	int ret, others_failed = 0;

	ret = image_ref_parse(ref, &r, err);
	if (ret < 0)
		return ret;
	norm = image_ref_string(&r);
	key = xasprintf("ref:%s", norm);
	for (;;) {
		pthread_mutex_lock(&s->mu);
		rec = store_find_ref(s, norm);
		if (rec)
			*out = rec_info(s, rec, norm, rec_digest_for(rec, r.host, r.repository));
		pthread_mutex_unlock(&s->mu);
		if (rec) {
			image_ref_release(&r);
			return 0;
		}
		ret = flight_begin(s, key, &f, err);
		/* another caller's pull failed: it may have lacked our credentials (an anonymous
		 * pre-pull), so try once ourselves */
		if (ret < 0 && !others_failed++) {
			err_clear(err);
			continue;
		}
		if (ret < 0) {
			image_ref_release(&r);
			return ret;
		}
		if (ret == 1)
			break;
	}
	log_info("image %s: pulling", norm);
	ret = image_fetch(s, &r, norm, auth, out, err);
	if (ret < 0)
		err_wrap(err, "image %s", norm);
	flight_end(s, f, ret, err);
	image_ref_release(&r);
	return ret;
}

int image_lookup(struct image_store *s, const char *ref, struct image_info **out, struct err *err)
{
	struct image_ref r = { 0 };
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *norm = NULL;
	struct img_rec *rec;
	size_t n = ref ? strlen(ref) : 0;

	if (n == 64 && strspn(ref, "0123456789abcdef") == 64)
		id = xasprintf("sha256:%s", ref);
	else if (image_digest_valid(ref))
		id = xstrdup(ref);
	pthread_mutex_lock(&s->mu);
	if (id) {
		rec = store_find_id(s, id);
		if (rec)
			*out = rec_info(s, rec, NULL, NULL);
		pthread_mutex_unlock(&s->mu);
		return rec ? 0 : err_set(err, ENOENT, "image %s: not pulled", ref);
	}
	pthread_mutex_unlock(&s->mu);
	if (image_ref_parse(ref, &r, err) < 0)
		return -err->code;
	norm = image_ref_string(&r);
	pthread_mutex_lock(&s->mu);
	rec = store_find_ref(s, norm);
	if (rec)
		*out = rec_info(s, rec, strv_has(rec->refs, norm) ? norm : NULL,
				rec_digest_for(rec, r.host, r.repository));
	pthread_mutex_unlock(&s->mu);
	image_ref_release(&r);
	return rec ? 0 : err_set(err, ENOENT, "image %s: not pulled", ref);
}

/* Reads root/images/<hex>/image.json, checking it names the image of its directory. */
static int rec_load(const char *root, const char *hex, struct img_rec **out, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/images/%s/image.json", root, hex);
	_cleanup_free_ char *data = NULL;
	struct img_rec *r = NULL;
	size_t len = 0;
	json_t *j;
	int ret;

	ret = fs_read_file(path, IMAGE_MAX_RECORD, &data, &len, err);
	if (ret < 0)
		return ret;
	j = json_loadb(data, len, 0, NULL);
	ret = rec_from_json(j, &r, err);
	json_decref(j);
	if (ret == 0 && strcmp(image_hex(r->id), hex) != 0) {
		rec_free(r);
		ret = err_set(err, EINVAL, "malformed image record: id is not %s", hex);
	}
	if (ret == 0)
		*out = r;
	return ret;
}

/* Whether digest is a layer of some image of the store; caller holds mu (or owns s alone). */
static bool store_uses_blob(const struct image_store *s, const char *digest)
{
	for (size_t i = 0; i < s->n_recs; i++)
		if (strv_has(s->recs[i]->layers, digest))
			return true;
	return false;
}

/* Removes the blobs no image of the store lists among its layers, once every record lists its
 * layers (older records do not, and their blobs must stay). Caller owns s alone or holds mu
 * with no pull under way. */
static void store_sweep_blobs(struct image_store *s)
{
	_cleanup_free_ char *blobs = xasprintf("%s/blobs/sha256", s->root);
	struct dirent *de;
	DIR *d;

	for (size_t i = 0; i < s->n_recs; i++)
		if (!s->recs[i]->layers)
			return;
	d = opendir(blobs);
	if (!d)
		return;
	while ((de = readdir(d))) {
		_cleanup_free_ char *digest = xasprintf("sha256:%s", de->d_name);

		if (image_digest_valid(digest) && !store_uses_blob(s, digest) &&
		    unlinkat(dirfd(d), de->d_name, 0) < 0)
			log_warn("image store: remove blob %s: %s", de->d_name, strerror(errno));
	}
	closedir(d);
}

/* Loads images/<hex>/image.json of every complete image; removes leftovers of interrupted
 * pulls (*.tmp directories, partial blobs) and blobs no image uses. */
static int store_load(struct image_store *s, struct err *err)
{
	_cleanup_free_ char *images = xasprintf("%s/images", s->root);
	_cleanup_free_ char *blobs = xasprintf("%s/blobs/sha256", s->root);
	struct dirent *de;
	DIR *d;

	d = opendir(blobs);
	if (!d)
		return err_errno(err, "open %s", blobs);
	while ((de = readdir(d)))
		if (strstr(de->d_name, ".part-"))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	d = opendir(images);
	if (!d)
		return err_errno(err, "open %s", images);
	while ((de = readdir(d))) {
		_cleanup_free_ char *path = NULL;
		struct err e = ERR_INIT;
		struct img_rec *r = NULL;

		if (de->d_name[0] == '.')
			continue;
		path = xasprintf("%s/%s", images, de->d_name);
		if (strlen(de->d_name) != 64 || strspn(de->d_name, "0123456789abcdef") != 64) {
			if (strstr(de->d_name, ".tmp") && fs_remove_tree(path, &e) < 0)
				log_warn("image store: %s", e.msg);
			continue;
		}
		if (rec_load(s->root, de->d_name, &r, &e) < 0) {
			log_warn("image store: skipping %s: %s", de->d_name, e.msg);
			continue;
		}
		xgrow((void **)&s->recs, &s->cap_recs, s->n_recs + 1, sizeof(*s->recs));
		s->recs[s->n_recs++] = r;
	}
	closedir(d);
	store_sweep_blobs(s);
	return 0;
}

int image_read(const char *root, const char *id, struct image_info **out, struct err *err)
{
	struct img_rec *r = NULL;
	int ret;

	if (!image_digest_valid(id))
		return err_set(err, EINVAL, "image id %s: expected sha256: and 64 hex digits", id);
	ret = rec_load(root, image_hex(id), &r, err);
	if (ret == -ENOENT)
		return err_set(err, ENOENT, "image %s: not in the store at %s", id, root);
	if (ret < 0)
		return err_wrap(err, "image %s in the store at %s", id, root);
	*out = rec_info_at(root, r, NULL, NULL);
	rec_free(r);
	return 0;
}

char **image_store_ids(struct image_store *s)
{
	char **ids;

	pthread_mutex_lock(&s->mu);
	ids = xcalloc(s->n_recs + 1, sizeof(char *));
	for (size_t i = 0; i < s->n_recs; i++)
		ids[i] = xstrdup(s->recs[i]->id);
	pthread_mutex_unlock(&s->mu);
	return ids;
}

/* Deletes the trees image_remove queued, one at a time, until image_store_free. */
static void *reaper_main(void *arg)
{
	struct image_store *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct doomed *d;
		struct err err = ERR_INIT;

		while (!s->reaper_quit && (s->reaper_hold || !s->doomed))
			pthread_cond_wait(&s->reap_cond, &s->mu);
		if (!s->doomed)
			break; /* quit, and nothing left */
		d = s->doomed;
		s->doomed = d->next;
		if (!s->doomed)
			s->doomed_tail = &s->doomed;
		s->reaping = true;
		pthread_mutex_unlock(&s->mu);
		/* a crash meanwhile leaves a .tmp name that the next store_load deletes */
		if (fs_remove_tree(d->path, &err) < 0)
			log_warn("image store: %s", err.msg);
		free(d->path);
		free(d);
		pthread_mutex_lock(&s->mu);
		s->reaping = false;
		pthread_cond_broadcast(&s->reap_cond);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Hands a renamed tree to the reaper (started here the first time); deletes it at once if no
 * thread can be made. Called with mu held. */
static void reap_later(struct image_store *s, char *path)
{
	struct doomed *d;
	struct err err = ERR_INIT;

	if (!s->reaper_started) {
		if (pthread_create(&s->reaper, NULL, reaper_main, s) != 0) {
			if (fs_remove_tree(path, &err) < 0)
				log_warn("image store: %s", err.msg);
			free(path);
			return;
		}
		s->reaper_started = true;
	}
	d = xcalloc(1, sizeof(*d));
	d->path = path;
	*s->doomed_tail = d;
	s->doomed_tail = &d->next;
	pthread_cond_broadcast(&s->reap_cond);
}

void image_store_drain(struct image_store *s)
{
	pthread_mutex_lock(&s->mu);
	while (s->doomed || s->reaping)
		pthread_cond_wait(&s->reap_cond, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

void image_store_hold_removals(struct image_store *s, bool hold)
{
	pthread_mutex_lock(&s->mu);
	s->reaper_hold = hold;
	pthread_cond_broadcast(&s->reap_cond);
	pthread_mutex_unlock(&s->mu);
}

int image_remove(struct image_store *s, const char *id, struct err *err)
{
	_cleanup_free_ char *dir = NULL;
	struct img_rec *r = NULL;
	char *doomed;
	int ret;

	if (!image_digest_valid(id))
		return err_set(err, EINVAL, "image id %s: expected sha256: and 64 hex digits", id);
	dir = image_dir(s, id);
	pthread_mutex_lock(&s->mu);
	for (struct flight *f = s->flights; f; f = f->next) {
		if (strncmp(f->key, "img:", 4) == 0 && strcmp(f->key + 4, id) == 0) {
			pthread_mutex_unlock(&s->mu);
			return err_set(err, EBUSY,
				       "image %s: it is being unpacked; remove it later", id);
		}
	}
	for (size_t i = 0; i < s->n_recs; i++) {
		if (strcmp(s->recs[i]->id, id) != 0)
			continue;
		if (s->recs[i]->pins) {
			pthread_mutex_unlock(&s->mu);
			return err_set(err, EBUSY,
				       "image %s: a pull is starting another image from its files; "
				       "remove it later",
				       id);
		}
		r = s->recs[i];
		s->recs[i] = s->recs[--s->n_recs];
		break;
	}
	/* renamed first, so the image is gone at once and an interrupted deletion is a
	 * leftover the next load cleans up; a name of its own, as the same image pulled and
	 * removed again may find the last one's tree still being deleted */
	doomed = xasprintf("%s.tmp-removed-%llu", dir, ++s->removal_seq);
	ret = rename(dir, doomed) < 0 ? (errno == ENOENT ? 1 : err_errno(err, "rename %s", dir))
				      : 0;
	/* a pull under way may be about to unpack a blob it found present: blobs then stay, for
	 * the sweep of the next start */
	for (size_t i = 0; ret >= 0 && !s->flights && r && r->layers && r->layers[i]; i++) {
		_cleanup_free_ char *blob = NULL;

		if (store_uses_blob(s, r->layers[i]))
			continue;
		blob = xasprintf("%s/blobs/sha256/%s", s->root, image_hex(r->layers[i]));
		if (unlink(blob) < 0 && errno != ENOENT)
			log_warn("image store: remove blob %s: %s", blob, strerror(errno));
	}
	if (ret < 0 && r)
		s->recs[s->n_recs++] = r; /* still there: keep knowing it */
	else
		rec_free(r);
	if (ret == 0)
		reap_later(s, steal_ptr(doomed));
	pthread_mutex_unlock(&s->mu);
	free(doomed);
	return ret < 0 ? ret : 0;
}

int image_store_new(const char *root, const struct regconf *rc, struct image_store **out,
		    struct err *err)
{
	struct image_store *s = xcalloc(1, sizeof(*s));
	_cleanup_free_ char *blobs = xasprintf("%s/blobs/sha256", root);
	_cleanup_free_ char *images = xasprintf("%s/images", root);
	int ret;

	s->root = xstrdup(root);
	s->rc = rc;
	s->max_layer = IMAGE_DEFAULT_MAX_LAYER;
	s->max_unpacked = IMAGE_DEFAULT_MAX_UNPACKED;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->reap_cond, NULL);
	s->doomed_tail = &s->doomed;
	ret = fs_mkdir_p(blobs, 0700, err);
	if (ret == 0)
		ret = fs_mkdir_p(images, 0755, err);
	if (ret == 0)
		ret = store_load(s, err);
	if (ret < 0) {
		image_store_free(s);
		return err_wrap(err, "image store %s", root);
	}
	*out = s;
	return 0;
}

void image_store_set_limits(struct image_store *s, uint64_t max_layer, uint64_t max_unpacked)
{
	if (max_layer)
		s->max_layer = max_layer;
	if (max_unpacked)
		s->max_unpacked = max_unpacked;
}

void image_store_free(struct image_store *s)
{
	if (!s)
		return;
	if (s->reaper_started) { /* what is queued is deleted first */
		pthread_mutex_lock(&s->mu);
		s->reaper_quit = true;
		pthread_cond_broadcast(&s->reap_cond);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->reaper, NULL);
	}
	for (size_t i = 0; i < s->n_recs; i++)
		rec_free(s->recs[i]);
	free(s->recs);
	pthread_cond_destroy(&s->reap_cond);
	pthread_mutex_destroy(&s->mu);
	free(s->root);
	free(s);
}
