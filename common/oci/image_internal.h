/*
 * image_internal.h: what the parts of the image module share and nobody else sees.
 * image_manifest.c resolves references at the registry, image.c keeps the store, image_link.c
 * starts a root file system from a base image's, image_fetch.c downloads a pull's layers a few
 * at a time, image_strv.c holds the string vectors.
 */
#ifndef AGENT_IMAGE_INTERNAL_H
#define AGENT_IMAGE_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "image.h"
#include "strvec.h"

struct reg_client;
struct reg_manifest;

/* One layer of a manifest: its blob digest and compressed size. */
struct img_layer {
	char *digest;
	int64_t size;
};

/* A parsed image manifest (not an index). Zero-initialise; release with
 * image_manifest_release. */
struct img_manifest {
	char *config_digest;
	int64_t config_size;
	struct img_layer *layers;
	size_t n_layers;
};

void image_manifest_release(struct img_manifest *m);

/* Reads one manifest or index document as the registry sent it (body and Content-Type of
 * doc; doc->digest names it in errors, reference too). An index, taken when index_ok and pick
 * is non-NULL, gives *pick: a copy of its linux/amd64 entry's digest, which the caller frees,
 * with m untouched; an image manifest fills m (*pick NULL), which the caller releases whatever
 * the outcome. Anything else is refused. Nothing is fetched. Errors: EINVAL (what the
 * registry holds is no usable image; INVALID_ARGUMENT to a CRI client) for a document that is
 * malformed (not JSON, nested deeper than jansson reads, a descriptor without a sha256 digest
 * or size, more than 256 layers or 1024 index entries), of an unsupported media type (layers
 * included) or an index where the index's entry must be a manifest (index_ok false), ENOENT
 * for an index without linux/amd64. */
int image_manifest_read(const struct reg_manifest *doc, const char *reference, bool index_ok,
			struct img_manifest *m, char **pick, struct err *err);

/* Reads an image config blob (JSON; digest names it in errors) into info's entrypoint, cmd,
 * env, user and working_dir, which the caller frees with info whatever the outcome. EINVAL
 * when it is not a JSON object or a field has the wrong type. */
int image_config_read(const char *body, size_t len, const char *digest, struct image_info *info,
		      struct err *err);

/* Resolves a parsed reference at its registry without fetching any layer: the manifest
 * (through an index to its linux/amd64 entry) and the verified image config. norm is the
 * normalised reference string for info->ref. On success *out gets all of image_info but the
 * root file system (rootfs ""), *m the manifest (the caller releases it) and, when client is
 * non-NULL, *client the open registry client for fetching the layers (the caller frees it).
 * On failure nothing is left to release. rc and auth may be NULL. */
int image_resolve_remote(const struct regconf *rc, const struct image_ref *ref, const char *norm,
			 const struct image_auth *auth, struct reg_client **client,
			 struct img_manifest *m, struct image_info **out, struct err *err);

/* Fills the empty directory dst with the tree under src (image_link.c): every entry but a
 * directory a hard link to src's, directories made anew with src's owner and mode. Nothing is
 * followed. ELOOP for a tree over 64 levels deep, else the error of the step that failed
 * (EMLINK when a file has as many links as the file system allows); dst may then hold part of
 * the tree. Thread safe. */
int image_tree_link(const char *src, const char *dst, struct err *err);

/* A pull's layers first..n-1 fetched by up to three threads of their own (image_fetch.c), in
 * order, each through fn(ud, client, i, err) with a client of its own made from c (which must
 * not be used until img_fetch_end). fn must be thread safe and stop with ECANCELED when
 * cancel_requested() (its thread's scope says so once the fetch stops). EAGAIN when no thread
 * could be made. */
struct img_fetcher;
int img_fetch_start(struct reg_client *c, size_t first, size_t n,
		    int (*fn)(void *ud, struct reg_client *c, size_t i, struct err *err), void *ud,
		    struct img_fetcher **out, struct err *err);
/* Waits until layer i is fetched: 0, or the fetch's error, which stops every other layer's:
 * the first layer's that failed on its own (not stopped by another's failure), or ECANCELED
 * when the caller of this thread went away (cancel.h). */
int img_fetch_wait(struct img_fetcher *f, size_t i, struct err *err);
/* Stops what is under way (cancelling it), waits for the threads and frees f. NULL is fine. */
void img_fetch_end(struct img_fetcher *f);

/* The store's reference lists, NULL-terminated string vectors (strvec.h; NULL counts as
 * empty), as sets. Appends a copy of s unless present; returns the (possibly moved) vector. */
char **image_strv_add(char **v, const char *s);
/* Removes s; returns whether it was there. */
bool image_strv_remove(char **v, const char *s);
/* A JSON array of strings, null or absent (empty) as a vector; what names the field in errors
 * ("config.Env[3]: expected a string"). At most 4096 entries. */
int image_strv_from_json(const json_t *j, const char *what, char ***out, struct err *err);
json_t *image_strv_to_json(char *const *v);

#endif
