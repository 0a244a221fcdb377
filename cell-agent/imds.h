/*
 * imds.h: the EC2 instance metadata service, IMDSv2 only, as a cell on EC2 reads it: its
 * bootstrap document (the instance's user-data) at boot, and later the spot interruption
 * notice and the rebalance recommendation.
 *
 *	struct imds_client *c;
 *	imds_client_new(&cfg, &c, &err);          cfg may be all zeros (the defaults below)
 *	ret = imds_get(c, "/latest/meta-data/spot/instance-action", 4096, &body, &len, &err);
 *	    0: body (the caller's, NUL-terminated); -ENOENT: the path has nothing (404)
 *	imds_get_retry(c, IMDS_USER_DATA, IMDS_USER_DATA_MAX, &retry, &body, &len, &err);
 *	imds_client_free(c);
 *
 * Every request carries a session token from PUT /latest/api/token (its TTL asked for in the
 * X-aws-ec2-metadata-token-ttl-seconds header). The token is fetched when first needed, again
 * before it expires, and again once when the service answers 401 (it forgot the token). Every
 * answer is bounded in size and every exchange in time. Not thread safe: one client a thread.
 */
#ifndef KIYOT_IMDS_H
#define KIYOT_IMDS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Where the service answers on EC2; $KIYOT_IMDS_ENDPOINT overrides it (tests). */
#define IMDS_DEFAULT_ENDPOINT "http://169.254.169.254"
#define IMDS_ENDPOINT_ENV "KIYOT_IMDS_ENDPOINT"
#define IMDS_USER_DATA "/latest/user-data"
/* EC2 takes at most 16 KiB of user-data (after base64 decoding); what the agent accepts. */
#define IMDS_USER_DATA_MAX (64u << 10)
/* A token is a short string; anything longer is not the service's. */
#define IMDS_TOKEN_MAX 1024

struct imds_config {
	const char *endpoint;	 /* NULL: $KIYOT_IMDS_ENDPOINT, else IMDS_DEFAULT_ENDPOINT */
	long connect_timeout_ms; /* 0: 1000 */
	long timeout_ms;	 /* one exchange, whole; 0: 3000 */
	int token_ttl_s;	 /* the token's lifetime asked for; 0: 21600 (6 h) */
	/* optional, for tests: the monotonic clock (ns) and the sleep between retries */
	int64_t (*now_ns)(void *ud);
	void (*sleep_ms)(void *ud, int64_t ms);
	void *ud;
};

/* How imds_get_retry retries: first_ms, doubled each failure up to max_ms, until total_ms of
 * waiting have passed (0: forever). Zeros: 200 ms, 5 s, forever. */
struct imds_retry {
	int64_t first_ms;
	int64_t max_ms;
	int64_t total_ms;
};

struct imds_client;

/* A client of the service at cfg's endpoint (copied). -EINVAL when the endpoint is not an
 * http:// URL. */
int imds_client_new(const struct imds_config *cfg, struct imds_client **out, struct err *err);
void imds_client_free(struct imds_client *c);
/* The endpoint the client asks, for messages (no scheme, no trailing slash). */
const char *imds_client_where(const struct imds_client *c);

/*
 * One GET of path (from the endpoint's root, "/latest/..."), with a token (fetched first if
 * the client holds none or it is about to expire; fetched again once on a 401).
 * 0: *body (NUL-terminated, the caller frees) and *len. -ENOENT: the service has nothing at
 * path (404). -EFBIG: the answer is longer than max. -EACCES: the service refused the token
 * twice, or refused a token (403: the service is disabled for the instance). -EAGAIN: the
 * service did not answer or answered a server error (worth retrying; err says which).
 * -EPROTO: another status.
 */
int imds_get(struct imds_client *c, const char *path, size_t max, char **body, size_t *len,
	     struct err *err);

/* imds_get, retried on -EAGAIN with r's backoff (NULL: the defaults); each failure is logged
 * once with its cause and the wait before the next try. Other errors return at once; so does
 * -EAGAIN when r's total has passed (err says how long it tried). */
int imds_get_retry(struct imds_client *c, const char *path, size_t max, const struct imds_retry *r,
		   char **body, size_t *len, struct err *err);

/*
 * The bootstrap document of a cell on EC2 (agent_config.c reads it): the file at cache when an
 * earlier start of the agent wrote it (cache_max bounds it), else the instance's user-data,
 * fetched with imds_get_retry (r: NULL for the defaults, forever), checked with
 * agent_config_parse and written to cache (mode 0600, its directory made 0700) so the agent's
 * secret-dropping rewrite works on it and a restarted agent asks no more. A document that is
 * not a bootstrap document is not kept (the next start asks again).
 * 0: *text (the caller wipes and frees it) and *len. -ENOENT: the instance has no user-data
 * (it was not launched by kiyot); -EINVAL: the user-data is not a bootstrap document; else
 * imds_get_retry's errors or the cache's.
 */
int imds_bootstrap(const struct imds_config *cfg, const struct imds_retry *r, const char *cache,
		   size_t cache_max, char **text, size_t *len, struct err *err);

#endif
