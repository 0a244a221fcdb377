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
#include "netguard.h"
#include "registry.h"

struct reg_endpoint;

/* Where a client's exchanges may connect (registry_guard.c): anywhere but this host's own
 * addresses and the loopback, link-local, metadata, multicast, broadcast and unspecified ones,
 * unless the address and port are those of one of the client's endpoints as configured (a test
 * registry on 127.0.0.1:5000, a mirror on the cells' bridge), resolved the first time it
 * matters and no further than it must. So a registry's redirect, a token realm or a mirror's answer cannot send the pull to
 * the node itself. Keeps what it refused last, for the error. */
struct reg_guard {
	const struct reg_endpoint *eps; /* borrowed from the client */
	size_t n_eps;
	struct sockaddr_storage *home; /* the addresses of the endpoints resolved so far */
	size_t n_home;
	size_t n_resolved; /* eps[0 .. n_resolved) are resolved into home */
	char refused[64];  /* "127.0.0.1:8080" of the last refusal; "" none */
	enum netguard_kind kind;
	bool redirect; /* the refused hop was a redirect's */
	struct httpc_guard hg;
};

/* What an endpoint has taught us about authenticating to it. */
struct reg_ep_state {
	char *token; /* bearer token from its realm */
	bool basic;  /* it asked for Basic credentials */
};

struct reg_client {
	const struct regconf *rc; /* borrowed, for reg_client_dup */
	char *host;
	char *repo;
	const struct image_auth *auth;
	struct reg_endpoint *eps;
	size_t n_eps;
	struct reg_ep_state *st;
	CURL *curl;
	char *user; /* basic credentials, from username/password or auth */
	char *pass;
	struct reg_guard guard;
};

/* Sets g up for the client's endpoints eps (borrowed; they must outlive g). */
void reg_guard_init(struct reg_guard *g, const struct reg_endpoint *eps, size_t n_eps);
void reg_guard_release(struct reg_guard *g);
/* The error for an exchange the guard stopped (its answer's refused set): EPERM, "redirect to
 * 127.0.0.1:8080 refused: ..." naming what the address is and why nothing answered from
 * there is used; token says the exchange was a token realm's. Nothing of any answer is in it. */
int reg_guard_error(const struct reg_guard *g, bool token, struct err *err);

/* The monotonic deadline (clock_mono_ns) of a fetch of up to size bytes starting now, under
 * the process's policy; *limit_s gets its length in seconds, for messages. */
int64_t reg_deadline(uint64_t size, int64_t *limit_s);

/* Sets up w for one exchange that must end by deadline_ns (0: none) and move the policy's
 * minimum over its window. */
void reg_watch_init(struct httpc_watch *w, int64_t deadline_ns);

/* The error for a transfer that w stopped (w->stop not HTTPC_GOING) and that had limit_s
 * seconds: ECANCELED when the caller went away, else ETIMEDOUT, too late or stalled. */
int reg_watch_error(const struct httpc_watch *w, int64_t limit_s, struct err *err);

/* The request every registry exchange of c starts from: url and w borrowed, answer bodies (but
 * a sink's) bounded by max_answer, redirects and the connect timeout bounded, our User-Agent,
 * every connection vetted by c's guard. */
struct httpc_req reg_req(struct reg_client *c, const char *url, size_t max_answer,
			 struct httpc_watch *w);

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
