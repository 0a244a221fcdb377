#include "image.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "log.h"
#include "registry.h"
#include "unpack.h"
#include "xalloc.h"

#define MT_OCI_MANIFEST	   "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_INDEX	   "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST	   "application/vnd.docker.distribution.manifest.list.v2+json"

#define IMAGE_MAX_LAYERS	   256
#define IMAGE_MAX_INDEX		   1024
#define IMAGE_MAX_STRV		   4096
#define IMAGE_MAX_RECORD	   (1u << 20)
#define IMAGE_DEFAULT_MAX_LAYER	   (8ull << 30)
#define IMAGE_DEFAULT_MAX_UNPACKED (32ull << 30)

/* What the store remembers of one unpacked image (also image.json on disk). */
struct img_rec {
	char *id;	/* "sha256:<config hex>" */
	char **refs;	/* normalised references pointing at it */
	char **digests; /* repo digests "host/repo@sha256:..." */
	uint64_t size;
	char **entrypoint;
	char **cmd;
	char **env;
	char *user;
	char *working_dir;
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
	pthread_mutex_t mu; /* guards recs and flights */
	struct img_rec **recs;
	size_t n_recs;
	size_t cap_recs;
	struct flight *flights;
};

/* A parsed image manifest (not an index). */
struct img_layer {
	char *digest;
	int64_t size;
};

struct img_manifest {
	char *config_digest;
	int64_t config_size;
	struct img_layer *layers;
	size_t n_layers;
};

/* ---- string vectors (NULL-terminated) ---- */

static size_t strv_len(char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static char **strv_dup(char *const *v)
{
	size_t n = strv_len(v);
	char **out = xcalloc(n + 1, sizeof(*out));

	for (size_t i = 0; i < n; i++)
		out[i] = xstrdup(v[i]);
	return out;
}

static bool strv_has(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (!strcmp(v[i], s))
			return true;
	return false;
}

/* Appends a copy of s unless present. */
static char **strv_add(char **v, const char *s)
{
	size_t n = strv_len(v);

	if (strv_has(v, s))
		return v;
	v = xrealloc(v, (n + 2) * sizeof(*v));
	v[n] = xstrdup(s);
	v[n + 1] = NULL;
	return v;
}

/* Removes s; returns whether it was there. */
static bool strv_remove(char **v, const char *s)
{
	size_t n = strv_len(v);

	for (size_t i = 0; i < n; i++) {
		if (strcmp(v[i], s))
			continue;
		free(v[i]);
		memmove(&v[i], &v[i + 1], (n - i) * sizeof(*v));
		return true;
	}
	return false;
}

/* A JSON array of strings (or null/absent) as a vector; what names the field in errors. */
static int strv_from_json(const json_t *j, const char *what, char ***out, struct err *err)
{
	size_t i;
	json_t *v;
	char **res;

	if (!j || json_is_null(j)) {
		*out = xcalloc(1, sizeof(char *));
		return 0;
	}
	if (!json_is_array(j) || json_array_size(j) > IMAGE_MAX_STRV)
		return err_set(err, EPROTO, "%s: expected a list of at most %d strings", what,
			       IMAGE_MAX_STRV);
	res = xcalloc(json_array_size(j) + 1, sizeof(*res));
	json_array_foreach (j, i, v) {
		if (!json_is_string(v)) {
			strv_free(res);
			return err_set(err, EPROTO, "%s[%zu]: expected a string", what, i);
		}
		res[i] = xstrdup(json_string_value(v));
	}
	*out = res;
	return 0;
}

static json_t *strv_to_json(char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

/* ---- records ---- */

static void rec_free(struct img_rec *r)
{
	if (!r)
		return;
	free(r->id);
	strv_free(r->refs);
	strv_free(r->digests);
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

/* Reads the "config" object of an image config blob (all fields optional) into info. */
static int config_read(struct image_info *info, const json_t *cfg, struct err *err)
{
	json_t *c = json_object_get(cfg, "config");
	json_t *user, *wd;
	int ret;

	if (c && !json_is_null(c) && !json_is_object(c))
		return err_set(err, EPROTO, "config: expected an object");
	ret = strv_from_json(json_object_get(c, "Entrypoint"), "config.Entrypoint",
			     &info->entrypoint, err);
	if (ret == 0)
		ret = strv_from_json(json_object_get(c, "Cmd"), "config.Cmd", &info->cmd, err);
	if (ret == 0)
		ret = strv_from_json(json_object_get(c, "Env"), "config.Env", &info->env, err);
	if (ret < 0)
		return ret;
	user = json_object_get(c, "User");
	wd = json_object_get(c, "WorkingDir");
	if ((user && !json_is_string(user) && !json_is_null(user)) ||
	    (wd && !json_is_string(wd) && !json_is_null(wd)))
		return err_set(err, EPROTO, "config.User and config.WorkingDir must be strings");
	info->user = xstrdup(json_is_string(user) ? json_string_value(user) : "");
	info->working_dir = xstrdup(json_is_string(wd) ? json_string_value(wd) : "");
	return 0;
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
	return json_pack("{s:s, s:o, s:o, s:I, s:o, s:o, s:o, s:s, s:s}", "id", r->id, "refs",
			 strv_to_json(r->refs), "repo_digests", strv_to_json(r->digests), "size",
			 (json_int_t)r->size, "entrypoint", strv_to_json(r->entrypoint), "cmd",
			 strv_to_json(r->cmd), "env", strv_to_json(r->env), "user", r->user,
			 "working_dir", r->working_dir);
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
	ret = strv_from_json(json_object_get(j, "refs"), "refs", &r->refs, err);
	if (ret == 0)
		ret = strv_from_json(json_object_get(j, "repo_digests"), "repo_digests",
				     &r->digests, err);
	if (ret == 0)
		ret = strv_from_json(json_object_get(j, "entrypoint"), "entrypoint", &r->entrypoint,
				     err);
	if (ret == 0)
		ret = strv_from_json(json_object_get(j, "cmd"), "cmd", &r->cmd, err);
	if (ret == 0)
		ret = strv_from_json(json_object_get(j, "env"), "env", &r->env, err);
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

/* Builds what callers get; ref and repo_digest may be NULL (then taken from the record). */
static struct image_info *rec_info(const struct image_store *s, const struct img_rec *r,
				   const char *ref, const char *repo_digest)
{
	struct image_info *info = xcalloc(1, sizeof(*info));

	info->ref = xstrdup(ref ? ref : r->refs && r->refs[0] ? r->refs[0] : "");
	info->repo_digest = xstrdup(repo_digest			  ? repo_digest
				    : r->digests && r->digests[0] ? r->digests[0]
								  : "");
	info->image_id = xstrdup(r->id);
	info->rootfs = xasprintf("%s/images/%s/rootfs", s->root, image_hex(r->id));
	info->size = r->size;
	info->entrypoint = strv_dup(r->entrypoint);
	info->cmd = strv_dup(r->cmd);
	info->env = strv_dup(r->env);
	info->user = xstrdup(r->user);
	info->working_dir = xstrdup(r->working_dir);
	return info;
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
 * another caller did it successfully meanwhile, or that caller's error. */
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
	f->waiters++;
	while (!f->done)
		pthread_cond_wait(&f->cv, &s->mu);
	ret = f->ret;
	if (ret < 0)
		*err = f->err;
	if (--f->waiters == 0) {
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

/* ---- manifests ---- */

static void manifest_release(struct img_manifest *m)
{
	free(m->config_digest);
	for (size_t i = 0; i < m->n_layers; i++)
		free(m->layers[i].digest);
	free(m->layers);
	memset(m, 0, sizeof(*m));
}

/* The kind of document: the JSON mediaType when present, else the Content-Type, else a guess
 * from its fields. */
static const char *manifest_kind(const json_t *j, const char *content_type)
{
	const char *mt = json_string_value(json_object_get(j, "mediaType"));

	if (mt && *mt)
		return mt;
	if (content_type &&
	    (!strcmp(content_type, MT_OCI_MANIFEST) || !strcmp(content_type, MT_OCI_INDEX) ||
	     !strcmp(content_type, MT_DOCKER_MANIFEST) || !strcmp(content_type, MT_DOCKER_LIST)))
		return content_type;
	if (json_object_get(j, "manifests"))
		return MT_OCI_INDEX;
	if (json_object_get(j, "config") && json_object_get(j, "layers"))
		return MT_OCI_MANIFEST;
	return content_type && *content_type ? content_type : "(none)";
}

static bool manifest_is_index(const char *kind)
{
	return !strcmp(kind, MT_OCI_INDEX) || !strcmp(kind, MT_DOCKER_LIST);
}

/* A descriptor's digest and size, checked. */
static int manifest_descriptor(const json_t *d, const char *what, const char **digest,
			       int64_t *size, struct err *err)
{
	json_t *sz = json_object_get(d, "size");

	*digest = json_string_value(json_object_get(d, "digest"));
	if (!json_is_object(d) || !*digest)
		return err_set(err, EPROTO, "malformed manifest: %s: missing digest", what);
	if (!image_digest_valid(*digest))
		return err_set(err, EPROTO,
			       "malformed manifest: %s: digest %.100s is not sha256:<64 hex>", what,
			       *digest);
	if (!json_is_integer(sz) || json_integer_value(sz) < 0)
		return err_set(err, EPROTO, "malformed manifest: %s: missing or negative size",
			       what);
	*size = json_integer_value(sz);
	return 0;
}

/* Whether a layer media type is one we can unpack (tar, gzip or zstd; not encrypted). */
static bool layer_type_supported(const char *mt)
{
	if (strstr(mt, "encrypted"))
		return false;
	return !strncmp(mt, "application/vnd.oci.image.layer.", 32) ||
	       !strncmp(mt, "application/vnd.docker.image.rootfs.", 36);
}

/* Reads config and layers from an image manifest document. */
static int manifest_parse(const json_t *j, struct img_manifest *m, struct err *err)
{
	json_t *layers = json_object_get(j, "layers");
	json_t *sv = json_object_get(j, "schemaVersion");
	const char *cd;
	size_t i;
	json_t *l;
	int ret;

	if (!json_is_integer(sv) || json_integer_value(sv) != 2)
		return err_set(err, EPROTO, "malformed manifest: schemaVersion must be 2");
	ret = manifest_descriptor(json_object_get(j, "config"), "config", &cd, &m->config_size,
				  err);
	if (ret < 0)
		return ret;
	if (!json_is_array(layers))
		return err_set(err, EPROTO, "malformed manifest: missing layers");
	if (json_array_size(layers) > IMAGE_MAX_LAYERS)
		return err_set(err, EPROTO, "manifest has more than %d layers", IMAGE_MAX_LAYERS);
	m->config_digest = xstrdup(cd);
	m->layers = xcalloc(json_array_size(layers) + 1, sizeof(*m->layers));
	json_array_foreach (layers, i, l) {
		char what[32];
		const char *d, *mt = json_string_value(json_object_get(l, "mediaType"));
		int64_t size;

		snprintf(what, sizeof(what), "layers[%zu]", i);
		ret = manifest_descriptor(l, what, &d, &size, err);
		if (ret < 0)
			return ret;
		if (!mt || !layer_type_supported(mt))
			return err_set(err, EPROTO, "layer %s: unsupported media type %.100s", d,
				       mt ? mt : "(none)");
		m->layers[i].digest = xstrdup(d);
		m->layers[i].size = size;
		m->n_layers++;
	}
	return 0;
}

/* Picks the linux/amd64 entry of an index; the error lists what the index offers. */
static int index_pick(const json_t *j, const char **digest, struct err *err)
{
	json_t *ms = json_object_get(j, "manifests");
	char have[200] = "";
	size_t i, off = 0;
	json_t *m;

	if (!json_is_array(ms))
		return err_set(err, EPROTO, "malformed index: missing manifests");
	if (json_array_size(ms) > IMAGE_MAX_INDEX)
		return err_set(err, EPROTO, "index has more than %d entries", IMAGE_MAX_INDEX);
	json_array_foreach (ms, i, m) {
		json_t *p = json_object_get(m, "platform");
		const char *os = json_string_value(json_object_get(p, "os"));
		const char *arch = json_string_value(json_object_get(p, "architecture"));
		const char *d = json_string_value(json_object_get(m, "digest"));

		if (os && arch && !strcmp(os, "linux") && !strcmp(arch, "amd64")) {
			if (!image_digest_valid(d))
				return err_set(err, EPROTO,
					       "malformed index: manifests[%zu]: bad digest", i);
			*digest = d;
			return 0;
		}
		if (os && arch && off < sizeof(have))
			off += (size_t)snprintf(have + off, sizeof(have) - off, "%s%s/%s",
						off ? ", " : "", os, arch);
	}
	return err_set(err, ENOENT, "no linux/amd64 image in the index (it has: %s)",
		       off ? have : "nothing");
}

/* Fetches one manifest or index and parses its JSON. */
static int image_fetch_doc(struct reg_client *c, const char *reference, struct reg_manifest *doc,
			   json_t **out, struct err *err)
{
	json_error_t jerr;
	json_t *j;
	int ret;

	ret = reg_fetch_manifest(c, reference, doc, err);
	if (ret < 0)
		return ret;
	j = json_loadb(doc->body, doc->len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(j)) {
		json_decref(j);
		return err_set(err, EPROTO, "malformed manifest %s: invalid JSON: %s", reference,
			       j ? "not an object" : jerr.text);
	}
	*out = j;
	return 0;
}

/* Fetches the manifest for reference, following an index to its linux/amd64 entry.
 * *top_digest gets the digest of the first document (the repo digest). */
static int image_resolve(struct reg_client *c, const char *reference, struct img_manifest *m,
			 char **top_digest, struct err *err)
{
	struct reg_manifest doc = {0};
	_cleanup_free_ char *pick = NULL;
	json_t *j = NULL;
	const char *kind;
	int ret;

	ret = image_fetch_doc(c, reference, &doc, &j, err);
	if (ret < 0)
		goto out;
	*top_digest = xstrdup(doc.digest);
	kind = manifest_kind(j, doc.media_type);
	if (manifest_is_index(kind)) {
		const char *d = NULL;

		ret = index_pick(j, &d, err);
		if (ret < 0)
			goto out;
		pick = xstrdup(d);
		json_decref(j);
		j = NULL;
		reg_manifest_release(&doc);
		ret = image_fetch_doc(c, pick, &doc, &j, err);
		if (ret < 0)
			goto out;
		kind = manifest_kind(j, doc.media_type);
	}
	if (strcmp(kind, MT_OCI_MANIFEST) && strcmp(kind, MT_DOCKER_MANIFEST)) {
		ret = err_set(err, EPROTO, "manifest %s: unsupported media type %.100s%s",
			      doc.digest, kind,
			      strstr(kind, "manifest.v1") ? " (Docker schema 1 is not supported; "
							    "push the image again with a current "
							    "client)"
							  : "");
		goto out;
	}
	ret = manifest_parse(j, m, err);
out:
	json_decref(j);
	reg_manifest_release(&doc);
	return ret;
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

/* Downloads every layer and unpacks them in order into images/<hex>.tmp, then renames it to
 * images/<hex>; a failure removes the scratch directory. */
static int image_build(struct image_store *s, struct reg_client *c, const struct img_manifest *m,
		       const struct img_rec *r, struct err *err)
{
	_cleanup_free_ char *dir = image_dir(s, r->id);
	_cleanup_free_ char *tmp = xasprintf("%s.tmp", dir);
	_cleanup_free_ char *rootfs = xasprintf("%s/rootfs", tmp);
	struct err ignore = ERR_INIT;
	int ret;

	for (size_t i = 0; i < m->n_layers; i++) {
		ret = image_ensure_blob(s, c, &m->layers[i], err);
		if (ret < 0)
			return ret;
	}
	ret = fs_remove_tree(tmp, err);
	if (ret < 0)
		return ret;
	ret = fs_mkdir_p(rootfs, 0755, err);
	for (size_t i = 0; ret == 0 && i < m->n_layers; i++) {
		_cleanup_free_ char *blob =
			xasprintf("%s/blobs/sha256/%s", s->root, image_hex(m->layers[i].digest));

		ret = unpack_layer(rootfs, blob, m->layers[i].digest, s->max_unpacked, err);
	}
	if (ret == 0 && chmod(rootfs, 0755) < 0)
		ret = err_errno(err, "chmod %s", rootfs);
	if (ret == 0)
		ret = rec_save(r, tmp, err);
	if (ret == 0 && rename(tmp, dir) < 0)
		ret = err_errno(err, "rename %s", tmp);
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

		if (s->recs[i] == r || !strv_remove(s->recs[i]->refs, ref))
			continue;
		dir = image_dir(s, s->recs[i]->id);
		if (rec_save(s->recs[i], dir, &e) < 0)
			log_warn("image store: %s", e.msg);
	}
	if (!strv_has(r->refs, ref) || !strv_has(r->digests, repo_digest)) {
		_cleanup_free_ char *dir = image_dir(s, r->id);

		r->refs = strv_add(r->refs, ref);
		r->digests = strv_add(r->digests, repo_digest);
		if (rec_save(r, dir, &e) < 0)
			log_warn("image store: %s", e.msg);
	}
}

/* Fetches the image config blob (verified against the manifest's digest and size) and fills
 * info's image id, size and run settings from it. */
static int image_config(struct reg_client *c, const struct img_manifest *m,
			struct image_info *info, struct err *err)
{
	_cleanup_free_ char *body = NULL;
	json_error_t jerr;
	size_t len = 0;
	json_t *j;
	int ret;

	if (m->config_size > (int64_t)REG_MAX_MANIFEST)
		return err_set(err, EFBIG, "image config %s: %lld bytes is over the limit of %u",
			       m->config_digest, (long long)m->config_size, REG_MAX_MANIFEST);
	ret = reg_fetch_blob_mem(c, m->config_digest, REG_MAX_MANIFEST, &body, &len, err);
	if (ret < 0)
		return ret;
	if ((int64_t)len != m->config_size)
		return err_set(err, EBADMSG, "image config %s: %zu bytes, the manifest says %lld",
			       m->config_digest, len, (long long)m->config_size);
	j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(j)) {
		json_decref(j);
		return err_set(err, EPROTO, "image config %s: invalid JSON: %s", m->config_digest,
			       j ? "not an object" : jerr.text);
	}
	info->image_id = xstrdup(m->config_digest);
	info->size = 0;
	for (size_t i = 0; i < m->n_layers; i++)
		info->size += (uint64_t)m->layers[i].size;
	ret = config_read(info, j, err);
	json_decref(j);
	if (ret < 0)
		return err_wrap(err, "image config %s", m->config_digest);
	return 0;
}

/* Resolves a parsed reference at its registry without fetching any layer: the manifest
 * (through an index to its linux/amd64 entry) and the verified image config. *out gets all of
 * image_info but the root file system (rootfs ""), *m the manifest. With client non-NULL the
 * open registry client is handed to the caller for the layers; otherwise it is closed. */
static int image_resolve_remote(const struct regconf *rc, const struct image_ref *ref,
				const char *norm, const struct image_auth *auth,
				struct reg_client **client, struct img_manifest *m,
				struct image_info **out, struct err *err)
{
	struct reg_client *c = NULL;
	struct image_info *info = NULL;
	_cleanup_free_ char *top = NULL;
	int ret;

	ret = reg_client_new(rc, ref->host, ref->repository, auth, &c, err);
	if (ret == 0)
		ret = image_resolve(c, ref->digest ? ref->digest : ref->tag, m, &top, err);
	if (ret == 0) {
		info = xcalloc(1, sizeof(*info));
		info->ref = xstrdup(norm);
		info->repo_digest = xasprintf("%s/%s@%s", ref->host, ref->repository, top);
		info->rootfs = xstrdup("");
		ret = image_config(c, m, info, err);
	}
	if (ret < 0) {
		image_info_free(info);
		manifest_release(m);
		reg_client_free(c);
		return ret;
	}
	if (client)
		*client = c;
	else
		reg_client_free(c);
	*out = info;
	return 0;
}

/* Unpacks the image unless it already is, once even when several pulls want it. */
static int image_materialize(struct image_store *s, struct reg_client *c,
			     const struct img_manifest *m, struct img_rec *r, struct err *err)
{
	_cleanup_free_ char *key = xasprintf("img:%s", r->id);
	struct flight *f;
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
	ret = image_build(s, c, m, r, err);
	if (ret == 0) {
		pthread_mutex_lock(&s->mu);
		xgrow((void **)&s->recs, &s->cap_recs, s->n_recs + 1, sizeof(*s->recs));
		s->recs[s->n_recs++] = r;
		pthread_mutex_unlock(&s->mu);
	}
	flight_end(s, f, ret, err);
	return ret == 0 ? 1 : ret;
}

/* The network part of a pull: manifest, config, layers, unpack. */
static int image_fetch(struct image_store *s, const struct image_ref *ref, const char *norm,
		       const struct image_auth *auth, struct image_info **out, struct err *err)
{
	struct reg_client *c = NULL;
	struct img_manifest m = {0};
	struct image_info *remote = NULL;
	struct img_rec *r = NULL, *cur;
	int ret;

	ret = image_resolve_remote(s->rc, ref, norm, auth, &c, &m, &remote, err);
	if (ret < 0)
		return ret;
	r = rec_from_info(remote);
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
	manifest_release(&m);
	reg_client_free(c);
	return ret;
}

int image_pull(struct image_store *s, const char *ref, const struct image_auth *auth,
	       struct image_info **out, struct err *err)
{
	struct image_ref r = {0};
	_cleanup_free_ char *norm = NULL;
	_cleanup_free_ char *key = NULL;
	struct flight *f;
	struct img_rec *rec;
	int ret;

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

int image_inspect(const struct regconf *rc, const char *ref, const struct image_auth *auth,
		  struct image_info **out, struct err *err)
{
	struct image_ref r = {0};
	struct img_manifest m = {0};
	_cleanup_free_ char *norm = NULL;
	int ret;

	ret = image_ref_parse(ref, &r, err);
	if (ret < 0)
		return ret;
	norm = image_ref_string(&r);
	ret = image_resolve_remote(rc, &r, norm, auth, NULL, &m, out, err);
	if (ret < 0)
		err_wrap(err, "image %s", norm);
	manifest_release(&m);
	image_ref_release(&r);
	return ret;
}

int image_lookup(struct image_store *s, const char *ref, struct image_info **out, struct err *err)
{
	struct image_ref r = {0};
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

/* Loads images/<hex>/image.json of every complete image; removes leftovers of interrupted
 * pulls (*.tmp directories, partial blobs). */
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
		_cleanup_free_ char *data = NULL;
		struct err e = ERR_INIT;
		struct img_rec *r = NULL;
		size_t len = 0;
		json_t *j;

		if (de->d_name[0] == '.')
			continue;
		path = xasprintf("%s/%s", images, de->d_name);
		if (strlen(de->d_name) != 64 || strspn(de->d_name, "0123456789abcdef") != 64) {
			if (strstr(de->d_name, ".tmp") && fs_remove_tree(path, &e) < 0)
				log_warn("image store: %s", e.msg);
			continue;
		}
		free(path);
		path = xasprintf("%s/%s/image.json", images, de->d_name);
		if (fs_read_file(path, IMAGE_MAX_RECORD, &data, &len, &e) < 0) {
			log_warn("image store: skipping %s: %s", de->d_name, e.msg);
			continue;
		}
		j = json_loadb(data, len, 0, NULL);
		if (rec_from_json(j, &r, &e) < 0 || strcmp(image_hex(r->id), de->d_name)) {
			log_warn("image store: skipping %s: malformed image.json", de->d_name);
			rec_free(r);
			json_decref(j);
			continue;
		}
		json_decref(j);
		xgrow((void **)&s->recs, &s->cap_recs, s->n_recs + 1, sizeof(*s->recs));
		s->recs[s->n_recs++] = r;
	}
	closedir(d);
	return 0;
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
	for (size_t i = 0; i < s->n_recs; i++)
		rec_free(s->recs[i]);
	free(s->recs);
	pthread_mutex_destroy(&s->mu);
	free(s->root);
	free(s);
}
