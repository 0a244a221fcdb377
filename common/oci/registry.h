/*
 * registry.h: a Registry HTTP API v2 client for one repository, over libcurl.
 *
 * Every request walks the host's endpoints in order (mirrors, then the host itself, see
 * regconf.h); an endpoint that cannot be reached, answers 404, 429 or 5xx passes the request to
 * the next one, and the final error names every endpoint tried. Authentication follows the
 * registry's 401 challenge: Bearer (token from the realm, with basic credentials or an identity
 * token) or Basic. Credentials are only ever sent to the registry host itself and its token
 * realm, never to mirrors, and are never logged.
 *
 * A pull is made with the privileges and the network of the process (kiyot on the node, an
 * agent in its cell), so no registry answer may send it to that host itself: every address a
 * request connects to, redirects and token realms included, is vetted after name resolution,
 * and loopback, link-local (the instance metadata service), multicast, broadcast, unspecified
 * and the host's own addresses are refused (EPERM, naming the address) unless they are the
 * address and port of one of the endpoints configured for the host (a registry at
 * 127.0.0.1:5000, a mirror on the cells' bridge). Errors carry nothing of an answer that was
 * not verified (no hash or size of a body that is not what was asked for).
 *
 * Every transfer is watched: one that moves too little over a window fails, a blob has an
 * overall deadline scaled to its size, and a transfer made for a caller that went away (see
 * cancel.h: an RPC handler's client left) stops at once with -ECANCELED. Layer downloads also
 * take a slot first, so that a process (a cell's agent, or kiyot) downloads a bounded number of
 * blobs at once, and a bounded number from any one registry host: a stalled registry cannot
 * take every slot. All of it follows the process's policy (reg_set_policy).
 *
 * Not thread safe: one client per pull. The policy and the slots are the process's, shared by
 * every client and thread.
 */
#ifndef AGENT_REGISTRY_H
#define AGENT_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "image.h"

#define REG_MAX_MANIFEST (4u << 20) /* manifests, indexes and image configs */

struct regconf;
struct reg_client;

/* How the process bounds its registry transfers. */
struct reg_policy {
	/* a transfer that moves fewer than min_bytes over any window_s seconds fails, naming the
	 * registry and what it fetched (window_s 0: no check) */
	uint64_t min_bytes;
	int window_s;
	/* a blob must arrive within deadline_base_s plus its size at deadline_rate bytes per
	 * second (the manifest's size, else the most that is accepted) */
	int deadline_base_s;
	uint64_t deadline_rate;
	/* layer downloads at once in the process, and from one registry host */
	int max_transfers;
	int max_per_registry;
};

/* The defaults: 10 KiB over 30 s; 60 s plus the size at 32 KiB/s; 8 at once, 4 per registry. */
void reg_policy_default(struct reg_policy *p);
/* Replaces the process's policy; call before the first pull (later transfers follow it). */
void reg_set_policy(const struct reg_policy *p);
/* Checks a policy's ranges; the error names the field ("max_transfers: ..."). */
int reg_policy_check(const struct reg_policy *p, struct err *err);

/* A fetched manifest or index, its bytes verified against digest. */
struct reg_manifest {
	char *body;
	size_t len;
	char *media_type; /* Content-Type without parameters; "" when the registry sent none */
	char *digest;	  /* "sha256:<hex>" of body */
};

/* host and repository as image_ref_parse gives them; auth may be NULL; all borrowed (auth must
 * live as long as the client). */
int reg_client_new(const struct regconf *rc, const char *host, const char *repository,
		   const struct image_auth *auth, struct reg_client **out, struct err *err);
void reg_client_free(struct reg_client *c);
/* Another client for c's repository, with what c learned of authenticating (its tokens), for
 * another thread: c must not be in use meanwhile. Errors as reg_client_new's. */
int reg_client_dup(const struct reg_client *c, struct reg_client **out, struct err *err);

/* GET /v2/<repo>/manifests/<reference> (tag or digest). When reference is a digest the body
 * must hash to it; a Docker-Content-Digest header must match the body. */
int reg_fetch_manifest(struct reg_client *c, const char *reference, struct reg_manifest *out,
		       struct err *err);
void reg_manifest_release(struct reg_manifest *m);

/* A blob of at most max bytes into memory, verified against digest. */
int reg_fetch_blob_mem(struct reg_client *c, const char *digest, size_t max, char **out,
		       size_t *len, struct err *err);

/* A blob streamed into dest (via dest.part-*, renamed only once the sha256 matches digest), not
 * flushed to disk: the caller syncs before it records anything that needs it. size is the size
 * the manifest gives (-1: unknown); max bounds it further. Waits for a download slot first
 * (-ECANCELED if the caller goes away meanwhile). */
int reg_fetch_blob_file(struct reg_client *c, const char *digest, int64_t size, uint64_t max,
			const char *dest, struct err *err);

#endif
