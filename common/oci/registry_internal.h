/*
 * registry_internal.h: what the registry client's files share; not for other modules.
 * registry.c holds the process's bounds on transfers and the requests for manifests and blobs,
 * registry_auth.c the client and how it authenticates to an endpoint (challenges, tokens).
 * A client is not thread safe (one per pull); the functions here that take none are.
 */
#ifndef AGENT_REGISTRY_INTERNAL_H
#define AGENT_REGISTRY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "httpc.h"
#include "registry.h"

struct reg_endpoint;

/* What an endpoint has taught us about authenticating to it. */
struct reg_ep_state {
	char *token; /* bearer token from its realm */
	bool basic;  /* it asked for Basic credentials */
};

struct reg_client {
	char *host;
	char *repo;
	const struct image_auth *auth;
	struct reg_endpoint *eps;
	size_t n_eps;
	struct reg_ep_state *st;
	CURL *curl;
	char *user; /* basic credentials, from username/password or auth */
	char *pass;
};

/* The monotonic deadline (clock_mono_ns) of a fetch of up to size bytes starting now, under
 * the process's policy; *limit_s gets its length in seconds, for messages. */
int64_t reg_deadline(uint64_t size, int64_t *limit_s);

/* Sets up w for one exchange that must end by deadline_ns (0: none) and move the policy's
 * minimum over its window. */
void reg_watch_init(struct httpc_watch *w, int64_t deadline_ns);

/* The error for a transfer that w stopped (w->stop not HTTPC_GOING) and that had limit_s
 * seconds: ECANCELED when the caller went away, else ETIMEDOUT, too late or stalled. */
int reg_watch_error(const struct httpc_watch *w, int64_t limit_s, struct err *err);

/* The request every registry exchange starts from: url and w borrowed, answer bodies (but a
 * sink's) bounded by max_answer, redirects and the connect timeout bounded, our User-Agent. */
struct httpc_req reg_req(const char *url, size_t max_answer, struct httpc_watch *w);

/* Answers endpoint i's 401 with its WWW-Authenticate challenge (NULL or "" when it sent
 * none): fetches a Bearer token into c->st[i].token, or turns on c->st[i].basic when the
 * client has credentials for the registry itself. Returns 1 when the request is worth
 * retrying, else a negative error: EACCES when there is nothing to answer with or the token
 * service refuses the credentials, EPROTO for a challenge or token answer that is malformed,
 * the transport's error when the token service cannot be reached in time. */
int reg_answer_challenge(struct reg_client *c, size_t i, const char *challenge, struct err *err);

/* Parses a WWW-Authenticate header, `Bearer realm="...",service="...",scope="..."` (or
 * `Basic realm="..."`): *scheme is what comes before the first space, the others the first
 * value of that (case-insensitive) key, unquoted, or left as they were (NULL) when absent.
 * Every value is a new string no longer than h. */
void reg_parse_challenge(const char *h, char **scheme, char **realm, char **service, char **scope);

#endif
