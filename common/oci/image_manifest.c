/*
 * image_manifest.c: what a reference names at its registry. Fetches manifests and indexes
 * (OCI and Docker schema 2), picks linux/amd64 from an index, checks descriptors and layer media
 * types, and fetches and reads the verified image config. Shared by image_pull (which goes on
 * to the layers) and image_inspect (which stops there).
 */
#include "image_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "registry.h"
#include "xalloc.h"

#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"

#define IMAGE_MAX_LAYERS 256
#define IMAGE_MAX_INDEX 1024

/* Frees what a parsed manifest holds and zeroes it, so a second release is harmless. */
void image_manifest_release(struct img_manifest *m)
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
		return err_set(err, EINVAL, "malformed manifest: %s: missing digest", what);
	if (!image_digest_valid(*digest))
		return err_set(err, EINVAL,
			       "malformed manifest: %s: digest %.100s is not sha256:<64 hex>", what,
			       *digest);
	if (!json_is_integer(sz) || json_integer_value(sz) < 0)
		return err_set(err, EINVAL, "malformed manifest: %s: missing or negative size",
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
		return err_set(err, EINVAL, "malformed manifest: schemaVersion must be 2");
	ret = manifest_descriptor(json_object_get(j, "config"), "config", &cd, &m->config_size,
				  err);
	if (ret < 0)
		return ret;
	if (!json_is_array(layers))
		return err_set(err, EINVAL, "malformed manifest: missing layers");
	if (json_array_size(layers) > IMAGE_MAX_LAYERS)
		return err_set(err, EINVAL, "manifest has more than %d layers", IMAGE_MAX_LAYERS);
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
			return err_set(err, EINVAL, "layer %s: unsupported media type %.100s", d,
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
		return err_set(err, EINVAL, "malformed index: missing manifests");
	if (json_array_size(ms) > IMAGE_MAX_INDEX)
		return err_set(err, EINVAL, "index has more than %d entries", IMAGE_MAX_INDEX);
	json_array_foreach (ms, i, m) {
		json_t *p = json_object_get(m, "platform");
		const char *os = json_string_value(json_object_get(p, "os"));
		const char *arch = json_string_value(json_object_get(p, "architecture"));
		const char *d = json_string_value(json_object_get(m, "digest"));

		if (os && arch && !strcmp(os, "linux") && !strcmp(arch, "amd64")) {
			if (!image_digest_valid(d))
				return err_set(err, EINVAL,
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

/* One manifest or index document as fetched (contract in image_internal.h). */
int image_manifest_read(const struct reg_manifest *doc, const char *reference, bool index_ok,
			struct img_manifest *m, char **pick, struct err *err)
{
	json_error_t jerr;
	const char *kind;
	json_t *j;
	int ret;

	if (pick)
		*pick = NULL;
	j = json_loadb(doc->body, doc->len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j && json_error_code(&jerr) == json_error_stack_overflow)
		return err_set(err, EINVAL,
			       "malformed manifest %s: its JSON nests deeper than %d levels, "
			       "which no image needs",
			       reference, JSON_PARSER_MAX_DEPTH);
	if (!json_is_object(j)) {
		json_decref(j);
		return err_set(err, EINVAL, "malformed manifest %s: invalid JSON: %s", reference,
			       j ? "not an object" : jerr.text);
	}
	kind = manifest_kind(j, doc->media_type);
	if (!index_ok && manifest_is_index(kind)) {
		ret = err_set(err, EINVAL,
			      "manifest %s: the index's linux/amd64 entry is itself an index; an "
			      "index must point at image manifests (push the image again)",
			      doc->digest);
	} else if (index_ok && pick && manifest_is_index(kind)) {
		const char *d = NULL;

		ret = index_pick(j, &d, err);
		if (ret == 0)
			*pick = xstrdup(d);
	} else if (strcmp(kind, MT_OCI_MANIFEST) && strcmp(kind, MT_DOCKER_MANIFEST)) {
		ret = err_set(err, EINVAL, "manifest %s: unsupported media type %.100s%s",
			      doc->digest, kind,
			      strstr(kind, "manifest.v1") ? " (Docker schema 1 is not supported; "
							    "push the image again with a current "
							    "client)"
							  : "");
	} else {
		ret = manifest_parse(j, m, err);
	}
	json_decref(j);
	return ret;
}

/* Fetches the manifest for reference, following an index to its linux/amd64 entry.
 * *top_digest gets the digest of the first document (the repo digest). */
static int image_resolve(struct reg_client *c, const char *reference, struct img_manifest *m,
			 char **top_digest, struct err *err)
{
	struct reg_manifest doc = { 0 };
	_cleanup_free_ char *pick = NULL;
	int ret;

	ret = reg_fetch_manifest(c, reference, &doc, err);
	if (ret < 0)
		return ret;
	*top_digest = xstrdup(doc.digest);
	ret = image_manifest_read(&doc, reference, true, m, &pick, err);
	reg_manifest_release(&doc);
	if (ret < 0 || !pick)
		return ret;
	ret = reg_fetch_manifest(c, pick, &doc, err);
	if (ret < 0)
		return ret;
	/* what an index points at must be an image manifest, not another index */
	ret = image_manifest_read(&doc, pick, false, m, NULL, err);
	reg_manifest_release(&doc);
	return ret;
}
/* Reads the "config" object of an image config blob (all fields optional) into info. */
static int config_read(struct image_info *info, const json_t *cfg, struct err *err)
{
	json_t *c = json_object_get(cfg, "config");
	json_t *user, *wd;
	int ret;

	if (c && !json_is_null(c) && !json_is_object(c))
		return err_set(err, EINVAL, "config: expected an object");
	ret = image_strv_from_json(json_object_get(c, "Entrypoint"), "config.Entrypoint",
				   &info->entrypoint, err);
	if (ret == 0)
		ret = image_strv_from_json(json_object_get(c, "Cmd"), "config.Cmd", &info->cmd,
					   err);
	if (ret == 0)
		ret = image_strv_from_json(json_object_get(c, "Env"), "config.Env", &info->env,
					   err);
	if (ret < 0)
		return ret;
	user = json_object_get(c, "User");
	wd = json_object_get(c, "WorkingDir");
	if ((user && !json_is_string(user) && !json_is_null(user)) ||
	    (wd && !json_is_string(wd) && !json_is_null(wd)))
		return err_set(err, EINVAL, "config.User and config.WorkingDir must be strings");
	info->user = xstrdup(json_is_string(user) ? json_string_value(user) : "");
	info->working_dir = xstrdup(json_is_string(wd) ? json_string_value(wd) : "");
	return 0;
}

/* An image config blob's run settings (contract in image_internal.h). */
int image_config_read(const char *body, size_t len, const char *digest, struct image_info *info,
		      struct err *err)
{
	json_error_t jerr;
	json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	int ret;

	if (!j && json_error_code(&jerr) == json_error_stack_overflow)
		return err_set(err, EINVAL,
			       "image config %s: its JSON nests deeper than %d levels, which no "
			       "image needs",
			       digest, JSON_PARSER_MAX_DEPTH);
	if (!json_is_object(j)) {
		json_decref(j);
		return err_set(err, EINVAL, "image config %s: invalid JSON: %s", digest,
			       j ? "not an object" : jerr.text);
	}
	ret = config_read(info, j, err);
	json_decref(j);
	if (ret < 0)
		return err_wrap(err, "image config %s", digest);
	return 0;
}

/* Fetches the image config blob (verified against the manifest's digest and size) and fills
 * info's image id, size and run settings from it. */
static int image_config(struct reg_client *c, const struct img_manifest *m, struct image_info *info,
			struct err *err)
{
	_cleanup_free_ char *body = NULL;
	size_t len = 0;
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
	info->image_id = xstrdup(m->config_digest);
	info->size = 0;
	for (size_t i = 0; i < m->n_layers; i++)
		info->size += (uint64_t)m->layers[i].size;
	return image_config_read(body, len, m->config_digest, info, err);
}

/* Manifest and verified config of a reference, no layer: the one path image_pull and
 * image_inspect share (contract in image_internal.h). */
int image_resolve_remote(const struct regconf *rc, const struct image_ref *ref, const char *norm,
			 const struct image_auth *auth, struct reg_client **client,
			 struct img_manifest *m, struct image_info **out, struct err *err)
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
		image_manifest_release(m);
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

/* Resolution only, for a node that stores no layers (see image.h). */
int image_inspect(const struct regconf *rc, const char *ref, const struct image_auth *auth,
		  struct image_info **out, struct err *err)
{
	struct image_ref r = { 0 };
	struct img_manifest m = { 0 };
	_cleanup_free_ char *norm = NULL;
	int ret;

	ret = image_ref_parse(ref, &r, err);
	if (ret < 0)
		return ret;
	norm = image_ref_string(&r);
	ret = image_resolve_remote(rc, &r, norm, auth, NULL, &m, out, err);
	if (ret < 0)
		err_wrap(err, "image %s", norm);
	image_manifest_release(&m);
	image_ref_release(&r);
	return ret;
}
