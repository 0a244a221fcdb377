/*
 * platforms.c: which architectures an image offers (contract in platforms.h). A look-up reads
 * the reference's manifest; an index answers by its entries' platforms, an image manifest by
 * its config's architecture. Answers are kept by digest and, for a while, by reference.
 */
#include "platforms.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cancel.h"
#include "clock.h"
#include "registry.h"
#include "xalloc.h"

/* One cached answer: key (a digest, or a normalised reference) -> architectures. */
struct pl_entry {
	char *key;
	unsigned arch;
	int64_t stamp_ns; /* when it was stored (monotonic): the oldest goes first */
};

struct pl_cache {
	struct pl_entry *v;
	size_t n;
};

struct oci_platforms {
	struct oci_fetcher fetcher;
	int timeout_ms;
	pthread_mutex_t lock;
	struct pl_cache by_digest, by_ref;
};

/* ---- the documents ---- */

/* OCI's and Docker's names of the two architectures. */
static unsigned arch_bit(const char *os, const char *arch)
{
	if (!arch || (os && strcmp(os, "linux") != 0))
		return 0;
	if (strcmp(arch, "amd64") == 0)
		return OCI_ARCH_AMD64;
	if (strcmp(arch, "arm64") == 0)
		return OCI_ARCH_ARM64;
	return 0;
}

static bool is_index(const json_t *j, const char *media_type)
{
	const char *mt = json_string_value(json_object_get(j, "mediaType"));

	if (!mt || !*mt)
		mt = media_type;
	if (mt && (strcmp(mt, "application/vnd.oci.image.index.v1+json") == 0 ||
		   strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json") == 0))
		return true;
	return (!mt || !*mt) && json_is_array(json_object_get(j, "manifests"));
}

/* The linux platforms of an index. */
static int index_arch(const json_t *j, unsigned *arch, struct err *err)
{
	const json_t *ms = json_object_get(j, "manifests");
	size_t i;
	json_t *m;

	if (!json_is_array(ms))
		return err_set(err, EINVAL, "malformed index: \"manifests\" must be a list");
	if (json_array_size(ms) > OCI_PLATFORMS_MAX_ENTRIES)
		return err_set(err, EINVAL, "index has more than %d entries",
			       OCI_PLATFORMS_MAX_ENTRIES);
	*arch = 0;
	json_array_foreach (ms, i, m) {
		const json_t *p = json_object_get(m, "platform");

		*arch |= arch_bit(json_string_value(json_object_get(p, "os")),
				  json_string_value(json_object_get(p, "architecture")));
	}
	return 0;
}

int oci_platforms_parse(const char *body, size_t len, const char *media_type, unsigned *arch,
			char **config_digest, int64_t *config_size, struct err *err)
{
	json_error_t jerr;
	json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	const json_t *cfg, *size;
	const char *d;
	int ret;

	*config_digest = NULL;
	*arch = 0;
	if (!json_is_object(j)) {
		json_decref(j);
		return err_set(err, EINVAL, "malformed manifest: %s",
			       j ? "not a JSON object" : jerr.text);
	}
	if (is_index(j, media_type)) {
		ret = index_arch(j, arch, err);
		json_decref(j);
		return ret;
	}
	cfg = json_object_get(j, "config");
	d = json_string_value(json_object_get(cfg, "digest"));
	size = json_object_get(cfg, "size");
	if (!d || !image_digest_valid(d) || !json_is_integer(size) ||
	    json_integer_value(size) < 0) {
		json_decref(j);
		return err_set(err, EINVAL,
			       "malformed manifest: neither an index nor an image manifest with a "
			       "config digest and size");
	}
	*config_digest = xstrdup(d);
	*config_size = json_integer_value(size);
	json_decref(j);
	return 0;
}

int oci_platforms_config(const char *body, size_t len, unsigned *arch, struct err *err)
{
	json_error_t jerr;
	json_t *j = json_loadb(body, len, 0, &jerr);

	if (!json_is_object(j)) {
		json_decref(j);
		return err_set(err, EINVAL, "malformed image config: %s",
			       j ? "not a JSON object" : jerr.text);
	}
	*arch = arch_bit(json_string_value(json_object_get(j, "os")),
			 json_string_value(json_object_get(j, "architecture")));
	json_decref(j);
	return 0;
}

const char *oci_arch_names(unsigned arch)
{
	switch (arch & (OCI_ARCH_AMD64 | OCI_ARCH_ARM64)) {
	case OCI_ARCH_AMD64:
		return "amd64";
	case OCI_ARCH_ARM64:
		return "arm64";
	case OCI_ARCH_AMD64 | OCI_ARCH_ARM64:
		return "amd64, arm64";
	default:
		return "neither amd64 nor arm64";
	}
}

/* ---- the cache ---- */

/* Needs pl->lock. */
static bool cache_get(struct pl_cache *c, const char *key, int64_t max_age_ns, unsigned *arch)
{
	int64_t now = clock_mono_ns();

	for (size_t i = 0; i < c->n; i++) {
		if (strcmp(c->v[i].key, key) != 0)
			continue;
		if (max_age_ns && now - c->v[i].stamp_ns > max_age_ns)
			return false;
		*arch = c->v[i].arch;
		return true;
	}
	return false;
}

/* Stores or replaces key; the oldest entry goes when the cache is full. Needs pl->lock. */
static void cache_put(struct pl_cache *c, const char *key, unsigned arch)
{
	size_t at = c->n;

	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->v[i].key, key) == 0)
			at = i;
	if (at == c->n && c->n == OCI_PLATFORMS_MAX_CACHED) {
		at = 0;
		for (size_t i = 1; i < c->n; i++)
			if (c->v[i].stamp_ns < c->v[at].stamp_ns)
				at = i;
	}
	if (at == c->n) {
		if (!c->v)
			c->v = xcalloc(OCI_PLATFORMS_MAX_CACHED, sizeof(*c->v));
		c->n++;
	} else {
		free(c->v[at].key);
	}
	c->v[at].key = xstrdup(key);
	c->v[at].arch = arch;
	c->v[at].stamp_ns = clock_mono_ns();
}

static void cache_release(struct pl_cache *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->v[i].key);
	free(c->v);
	c->v = NULL;
	c->n = 0;
}

/* ---- the registry ---- */

static int reg_manifest_of(void *ctx, const struct regconf *rc, const struct image_ref *ref,
			   const struct image_auth *auth, const char *reference,
			   struct reg_manifest *out, struct err *err)
{
	struct reg_client *c = NULL;
	int ret;

	(void)ctx;
	ret = reg_client_new(rc, ref->host, ref->repository, auth, &c, err);

	if (ret == 0)
		ret = reg_fetch_manifest(c, reference, out, err);
	reg_client_free(c);
	return ret;
}

static int reg_blob_of(void *ctx, const struct regconf *rc, const struct image_ref *ref,
		       const struct image_auth *auth, const char *digest, size_t max, char **out,
		       size_t *len, struct err *err)
{
	struct reg_client *c = NULL;
	int ret;

	(void)ctx;
	ret = reg_client_new(rc, ref->host, ref->repository, auth, &c, err);

	if (ret == 0)
		ret = reg_fetch_blob_mem(c, digest, max, out, len, err);
	reg_client_free(c);
	return ret;
}

struct oci_platforms *oci_platforms_new(const struct oci_fetcher *fetcher)
{
	struct oci_platforms *pl = xcalloc(1, sizeof(*pl));

	if (fetcher) {
		pl->fetcher = *fetcher;
	} else {
		pl->fetcher.manifest = reg_manifest_of;
		pl->fetcher.blob = reg_blob_of;
	}
	pl->timeout_ms = OCI_PLATFORMS_DEFAULT_TIMEOUT_MS;
	pthread_mutex_init(&pl->lock, NULL);
	return pl;
}

void oci_platforms_free(struct oci_platforms *pl)
{
	if (!pl)
		return;
	cache_release(&pl->by_digest);
	cache_release(&pl->by_ref);
	pthread_mutex_destroy(&pl->lock);
	free(pl);
}

void oci_platforms_set_timeout(struct oci_platforms *pl, int timeout_ms)
{
	pl->timeout_ms = timeout_ms > 0 ? timeout_ms : OCI_PLATFORMS_DEFAULT_TIMEOUT_MS;
}

/* A look-up's time limit, as a cancel scope's check. */
struct deadline {
	int64_t at_ns;
};

static bool deadline_passed(void *ctx)
{
	const struct deadline *d = ctx;

	return clock_mono_ns() >= d->at_ns;
}

/* The architectures of the document reference names, from the registry. */
static int fetch_arch(struct oci_platforms *pl, const struct regconf *rc,
		      const struct image_ref *ref, const struct image_auth *auth,
		      const char *reference, unsigned *arch, char **digest, struct err *err)
{
	struct reg_manifest doc = { 0 };
	_cleanup_free_ char *cfg_digest = NULL, *body = NULL;
	int64_t cfg_size = 0;
	size_t len = 0;
	bool hit;
	int ret;

	ret = pl->fetcher.manifest(pl->fetcher.ctx, rc, ref, auth, reference, &doc, err);
	if (ret < 0)
		return ret;
	*digest = xstrdup(doc.digest);
	pthread_mutex_lock(&pl->lock);
	hit = cache_get(&pl->by_digest, doc.digest, 0, arch);
	pthread_mutex_unlock(&pl->lock);
	if (!hit)
		ret = oci_platforms_parse(doc.body, doc.len, doc.media_type, arch, &cfg_digest,
					  &cfg_size, err);
	reg_manifest_release(&doc);
	if (hit || ret < 0 || !cfg_digest)
		return ret;
	if (cfg_size > (int64_t)REG_MAX_MANIFEST)
		return err_set(err, EFBIG, "image config %s: %lld bytes is over the limit of %u",
			       cfg_digest, (long long)cfg_size, REG_MAX_MANIFEST);
	ret = pl->fetcher.blob(pl->fetcher.ctx, rc, ref, auth, cfg_digest, REG_MAX_MANIFEST, &body,
			       &len, err);
	if (ret == 0)
		ret = oci_platforms_config(body, len, arch, err);
	return ret;
}

int oci_platforms_get(struct oci_platforms *pl, const struct regconf *rc, const char *ref,
		      const struct image_auth *auth, unsigned *arch, struct err *err)
{
	struct image_ref r = { 0 };
	_cleanup_free_ char *norm = NULL, *digest = NULL;
	struct deadline dl;
	struct cancel_scope sc;
	unsigned a = 0;
	bool hit, by_ref;
	int ret;

	ret = image_ref_parse(ref, &r, err);
	if (ret < 0)
		return ret;
	norm = image_ref_string(&r);
	by_ref = !r.digest;
	pthread_mutex_lock(&pl->lock);
	hit = r.digest ? cache_get(&pl->by_digest, r.digest, 0, &a)
		       : cache_get(&pl->by_ref, norm, OCI_PLATFORMS_REF_TTL_S * 1000000000LL, &a);
	pthread_mutex_unlock(&pl->lock);
	if (hit) {
		image_ref_release(&r);
		*arch = a;
		return 0;
	}
	dl.at_ns = clock_mono_ns() + (int64_t)pl->timeout_ms * 1000000;
	cancel_scope_enter(&sc, deadline_passed, &dl);
	ret = fetch_arch(pl, rc, &r, auth, r.digest ? r.digest : r.tag, &a, &digest, err);
	cancel_scope_leave(&sc);
	if (ret == -ECANCELED && deadline_passed(&dl) && !cancel_requested())
		ret = err_set(err, ETIMEDOUT, "the registry did not answer within %d s",
			      (pl->timeout_ms + 999) / 1000);
	image_ref_release(&r);
	if (ret < 0)
		return ret == -ECANCELED ? ret : err_wrap(err, "image %s", norm);
	pthread_mutex_lock(&pl->lock);
	cache_put(&pl->by_digest, digest, a);
	if (by_ref)
		cache_put(&pl->by_ref, norm, a);
	pthread_mutex_unlock(&pl->lock);
	*arch = a;
	return 0;
}
