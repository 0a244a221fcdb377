/*
 * image.h: an image store, a cell's or the node's (common/oci: both daemons use it). Pulls
 * from registries speaking the Registry HTTP API v2 (anonymous, basic and bearer-token auth;
 * OCI and Docker schema-2 manifests and indexes, linux/amd64 picked from an index), verifies
 * every blob against its sha256 while it streams, unpacks layers safely (whiteouts honoured;
 * nothing written outside the root) and keeps a cache: verified layers by digest and one
 * read-only flattened root file system per image. An image whose first layers are those of an
 * image already there starts from that one's files (hard links: read-only for everyone) and
 * unpacks only the rest.
 *
 * Thread safety: an image_store may be used from several threads; two pulls of the same image
 * at once do the work once (the later one waits for the earlier and takes its result; when
 * the earlier one failed, the later one tries once more with its own credentials).
 */
#ifndef AGENT_IMAGE_H
#define AGENT_IMAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct regconf; /* registry hosts: mirrors, insecure hosts (see regconf.h) */
struct image_store;

/* Credentials for one pull, as CRI's AuthConfig carries them. Any field may be NULL or "". */
struct image_auth {
	const char *username;
	const char *password;
	const char *auth;	    /* base64("user:pass") */
	const char *identity_token; /* OAuth2 refresh token for the token endpoint */
	const char *registry_token; /* a bearer token to send as is */
};

/* A pulled image. Owned by the caller; free with image_info_free. */
struct image_info {
	char *ref;	   /* normalised reference: "docker.io/library/busybox:latest" */
	char *repo_digest; /* "docker.io/library/busybox@sha256:..." */
	char *image_id;	   /* "sha256:<config digest>" */
	char *rootfs;	   /* flattened root file system, read-only for callers; "" from inspect */
	uint64_t size;	   /* sum of compressed layer sizes */
	/* From the image config ("config" object); NULL-terminated arrays, never NULL. */
	char **entrypoint;
	char **cmd;
	char **env;
	char *user;	   /* "" when unset */
	char *working_dir; /* "" when unset */
};

/* root: cache directory (created). rc may be NULL (no mirrors, only TLS registries); it is
 * borrowed and must outlive the store. */
int image_store_new(const char *root, const struct regconf *rc, struct image_store **out,
		    struct err *err);
void image_store_free(struct image_store *s);
/* Largest layer accepted (compressed, default 8 GiB) and largest unpacked size of one layer
 * (default 32 GiB). Call before the first pull. */
void image_store_set_limits(struct image_store *s, uint64_t max_layer, uint64_t max_unpacked);

/* Pulls ref (e.g. "busybox", "10.77.0.1:5000/hello:1", "x/y@sha256:...") unless cached.
 * Errors say what failed and where: "image 10.77.0.1:5000/nope:1: manifest unknown (404)". */
int image_pull(struct image_store *s, const char *ref, const struct image_auth *auth,
	       struct image_info **out, struct err *err);
/* Resolves ref at its registry the way image_pull does (mirrors, auth, index -> linux/amd64,
 * digest checks) but fetches only the verified image config, never a layer, and stores
 * nothing: for a node that keeps no layers and hands the repo digest to a cell that pulls later.
 * *out has rootfs "" and size = sum of the manifest's compressed layer sizes. rc may be NULL.
 * Errors read as image_pull's ("image <ref>: manifest unknown (404)"). Thread safe. */
int image_inspect(const struct regconf *rc, const char *ref, const struct image_auth *auth,
		  struct image_info **out, struct err *err);
/* Pre-pulls: refs pulled one after another, anonymously, in a thread of the store's own (the
 * registries config of the store applies). Already-present images are skipped; failures are
 * logged only. Returns NULL when n is 0 (or no thread could be made, logged). The store must
 * outlive the pre-pull. */
struct image_prepull;
struct image_prepull *image_prepull_start(struct image_store *s, char *const *refs, size_t n);
/* Stops after the pull under way: waits up to wait_ms for it and frees p (0), else leaves it
 * running and returns -EBUSY (the store must then not be freed). NULL is fine. */
int image_prepull_stop(struct image_prepull *p, int wait_ms);
/* Whether the pre-pull tried every image (image_prepull_stop then returns at once). */
bool image_prepull_done(struct image_prepull *p);

/* Reads image id ("sha256:<hex>") of the store at root without opening it, for a cell whose
 * node keeps the images (another process owns that store and writes records atomically).
 * -ENOENT when it is not there. */
int image_read(const char *root, const char *id, struct image_info **out, struct err *err);
/* The ids of every image in the store: a NULL-terminated vector the caller frees, each string
 * and the vector. */
char **image_store_ids(struct image_store *s);
/* Removes an image's root file system and record, and the layer blobs no other image uses
 * (unless a pull is under way: they stay until the store is opened again). An absent image is
 * not an error; -EBUSY while the image itself is being unpacked, or a pull starts another
 * image from its files (try later). The caller makes sure no container still runs on its root
 * file system. The image is gone when it returns
 * (its directory renamed to a .tmp name, its blobs unlinked); the renamed tree is deleted by
 * the store's own thread afterwards (or by the next image_store_new, after a crash), so the
 * call does not wait for a walk of the whole tree. */
int image_remove(struct image_store *s, const char *id, struct err *err);
/* Waits until the trees of the removals so far are deleted. */
void image_store_drain(struct image_store *s);
/* Tests: while hold is true, removed trees wait (renamed) instead of being deleted. */
void image_store_hold_removals(struct image_store *s, bool hold);

/* A cached image by reference or image id; -ENOENT when not pulled. */
int image_lookup(struct image_store *s, const char *ref, struct image_info **out, struct err *err);
void image_info_free(struct image_info *info);

/* Reference parsing, exposed for tests and for kiyot. */
struct image_ref {
	char *host;	  /* "docker.io" when none given */
	char *repository; /* "library/busybox" */
	char *tag;	  /* "latest" when neither tag nor digest */
	char *digest;	  /* "sha256:..." or NULL */
};
int image_ref_parse(const char *s, struct image_ref *out, struct err *err);
void image_ref_release(struct image_ref *r);
/* "host/repository[:tag][@digest]"; the caller frees it. */
char *image_ref_string(const struct image_ref *r);
/* Whether d is "sha256:" and 64 lowercase hex digits. */
bool image_digest_valid(const char *d);

#endif
