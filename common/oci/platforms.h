/*
 * platforms.h: which CPU architectures an image offers, read from its registry, for a node
 * that decides what kind of machine a pod's cell may be before anything is pulled.
 *
 * An image index (OCI) or manifest list (Docker) lists its platforms: the linux entries'
 * architectures are what it offers. A single image manifest offers the one architecture its
 * config names (the config blob is fetched for it, never a layer). Only amd64 and arm64 count;
 * other architectures and operating systems are ignored.
 *
 *	struct oci_platforms *pl = oci_platforms_new(NULL);
 *	unsigned arch;
 *	if (oci_platforms_get(pl, regconf, "nginx:1.27", auth, &arch, err) < 0)
 *		... err: "image docker.io/library/nginx:1.27: the registry did not answer within 10 s"
 *	else if (arch & OCI_ARCH_ARM64) ...
 *	oci_platforms_free(pl);
 *
 * Answers are cached: by manifest digest for as long as the cache holds them (a digest's
 * content never changes), and by reference for OCI_PLATFORMS_REF_TTL_S (a tag may move).
 * Both caches hold at most OCI_PLATFORMS_MAX_CACHED entries, the oldest dropped first.
 * Everything fetched is bounded: a manifest by the registry client's REG_MAX_MANIFEST, an
 * index by OCI_PLATFORMS_MAX_ENTRIES entries, a config by REG_MAX_MANIFEST, and each look-up
 * by a time limit (oci_platforms_set_timeout) over all its requests. A failure is not cached.
 *
 * Thread safety: one oci_platforms may be used from several threads at once; look-ups of the
 * same image at once may each ask the registry.
 */
#ifndef COMMON_OCI_PLATFORMS_H
#define COMMON_OCI_PLATFORMS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "image.h"

/* Architectures an image offers, as bits. */
#define OCI_ARCH_AMD64 1u
#define OCI_ARCH_ARM64 2u

#define OCI_PLATFORMS_REF_TTL_S 300
#define OCI_PLATFORMS_MAX_CACHED 4096
#define OCI_PLATFORMS_MAX_ENTRIES 1024
#define OCI_PLATFORMS_DEFAULT_TIMEOUT_MS 10000

struct regconf;
struct reg_manifest;

/*
 * What the look-ups fetch through: the registry by default; tests give a fake. rc is the
 * look-up's registries configuration (may be NULL), ref the parsed reference of the image; manifest fetches reference (a tag or a digest) into *out
 * (body, media type and the body's digest, as reg_fetch_manifest gives them); blob fetches
 * at most max bytes of a blob into *out (malloc'd, *len bytes), verified against digest.
 */
struct oci_fetcher {
	int (*manifest)(void *ctx, const struct regconf *rc, const struct image_ref *ref,
			const struct image_auth *auth, const char *reference,
			struct reg_manifest *out, struct err *err);
	int (*blob)(void *ctx, const struct regconf *rc, const struct image_ref *ref,
		    const struct image_auth *auth, const char *digest, size_t max, char **out,
		    size_t *len, struct err *err);
	void *ctx;
};

struct oci_platforms;

/* fetcher (NULL: the registry) is copied. */
struct oci_platforms *oci_platforms_new(const struct oci_fetcher *fetcher);
void oci_platforms_free(struct oci_platforms *pl);
/* The time one look-up may take over all its requests (default 10 s). */
void oci_platforms_set_timeout(struct oci_platforms *pl, int timeout_ms);

/*
 * The architectures image ref offers (OCI_ARCH_* bits; 0: neither amd64 nor arm64) into *arch,
 * asked through the registries configuration rc (may be NULL: TLS to the host itself) with
 * the pull credentials auth (may be NULL). Errors name the image and what failed:
 *	image 10.0.0.1:5000/app:1: manifest unknown (404)
 *	image docker.io/library/nginx:1: the registry did not answer within 10 s
 * -ECANCELED (unchanged) when the caller went away (cancel.h).
 */
int oci_platforms_get(struct oci_platforms *pl, const struct regconf *rc, const char *ref,
		      const struct image_auth *auth, unsigned *arch, struct err *err);

/*
 * Reads one manifest document (body of len bytes; media_type as sent, may be NULL or ""):
 * an index gives the architectures of its linux entries in *arch and *config_digest NULL; an
 * image manifest gives *arch 0 and its config's digest (the caller frees it) and size. EINVAL
 * for anything else, naming what is wrong. Pure; for the look-ups and the fuzzer.
 */
int oci_platforms_parse(const char *body, size_t len, const char *media_type, unsigned *arch,
			char **config_digest, int64_t *config_size, struct err *err);
/* The architecture of an image config (its "os" must be linux or absent): *arch gets
 * OCI_ARCH_AMD64, OCI_ARCH_ARM64 or 0 for another. EINVAL when it is no JSON object. */
int oci_platforms_config(const char *body, size_t len, unsigned *arch, struct err *err);

/* "amd64", "arm64", "amd64, arm64" or "neither amd64 nor arm64" for a set. */
const char *oci_arch_names(unsigned arch);

#endif
