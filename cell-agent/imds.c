/*
 * imds.c: an IMDSv2 client (see imds.h), on one libcurl handle so the connection to the
 * service is kept between requests.
 */
#include "imds.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "clock.h"
#include "fsutil.h"
#include "httpc.h"
#include "log.h"
#include "xalloc.h"

#define IMDS_TOKEN_TTL_DEFAULT 21600

struct imds_client {
	char *base;  /* the endpoint without a trailing slash */
	char *where; /* the same without its scheme, for messages */
	long connect_timeout_ms;
	long timeout_ms;
	int token_ttl_s;
	int64_t (*now_ns)(void *ud);
	void (*sleep_ms)(void *ud, int64_t ms);
	void *ud;
	CURL *h;
	char *token;		/* NULL: none held */
	int64_t token_renew_ns; /* when the held token is renewed */
};

static int64_t real_now_ns(void *ud)
{
	(void)ud;
	return clock_mono_ns();
}

static void real_sleep_ms(void *ud, int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	(void)ud;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int imds_client_new(const struct imds_config *cfg, struct imds_client **out, struct err *err)
{
	const char *ep = cfg->endpoint;
	struct imds_client *c;
	size_t n;

	if (!ep || !*ep)
		ep = getenv(IMDS_ENDPOINT_ENV);
	if (!ep || !*ep)
		ep = IMDS_DEFAULT_ENDPOINT;
	if (strncmp(ep, "http://", 7) != 0 || !ep[7])
		return err_set(err, EINVAL,
			       "instance metadata endpoint \"%s\": must be an http:// URL such as "
			       "%s",
			       ep, IMDS_DEFAULT_ENDPOINT);
	httpc_global_init();
	c = xcalloc(1, sizeof(*c));
	c->base = xstrdup(ep);
	n = strlen(c->base);
	while (n > 7 && c->base[n - 1] == '/')
		c->base[--n] = '\0';
	c->where = xstrdup(c->base + 7);
	c->connect_timeout_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 1000;
	c->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 3000;
	c->token_ttl_s = cfg->token_ttl_s > 0 ? cfg->token_ttl_s : IMDS_TOKEN_TTL_DEFAULT;
	c->now_ns = cfg->now_ns ? cfg->now_ns : real_now_ns;
	c->sleep_ms = cfg->sleep_ms ? cfg->sleep_ms : real_sleep_ms;
	c->ud = cfg->ud;
	c->h = curl_easy_init();
	if (!c->h)
		abort(); /* libcurl fails this only out of memory */
	*out = c;
	return 0;
}

static void drop_token(struct imds_client *c)
{
	if (c->token)
		explicit_bzero(c->token, strlen(c->token));
	free(c->token);
	c->token = NULL;
}

void imds_client_free(struct imds_client *c)
{
	if (!c)
		return;
	drop_token(c);
	curl_easy_cleanup(c->h);
	free(c->base);
	free(c->where);
	free(c);
}

const char *imds_client_where(const struct imds_client *c)
{
	return c->where;
}

/* Why an exchange got no answer, in a few words: the system's reason a connection failed
 * ("connection refused", "no route to host"), the time it waited, else libcurl's reason. */
static void failure_cause(const struct imds_client *c, const struct httpc_answer *a, char *out,
			  size_t size)
{
	long os_errno = 0;

	curl_easy_getinfo(c->h, CURLINFO_OS_ERRNO, &os_errno);
	if (a->rc == CURLE_OPERATION_TIMEDOUT)
		snprintf(out, size, "nothing within %ld ms", c->timeout_ms);
	else if (os_errno > 0)
		snprintf(out, size, "%s", strerror((int)os_errno));
	else
		snprintf(out, size, "%s", httpc_reason(a));
	if (out[0] >= 'A' && out[0] <= 'Z' && out[1] >= 'a' && out[1] <= 'z')
		out[0] = (char)(out[0] - 'A' + 'a');
}

/*
 * One exchange with the service: method, path, one header line. 0 when an HTTP answer came
 * (its status in *status, its body in *a), -EAGAIN when none did (err names the cause), -EFBIG
 * when the body outgrew max.
 */
static int exchange(struct imds_client *c, const char *method, const char *path, const char *header,
		    size_t max, struct httpc_answer *a, struct err *err)
{
	_cleanup_free_ char *url = xasprintf("%s%s", c->base, path);
	struct curl_slist *hdrs = curl_slist_append(NULL, header);
	struct httpc_req req = { .method = method,
				 .url = url,
				 .headers = hdrs,
				 .body = strcmp(method, "PUT") == 0 ? "" : NULL,
				 .max_answer = max,
				 .connect_timeout_ms = c->connect_timeout_ms,
				 .timeout_ms = c->timeout_ms };
	CURLcode rc;

	if (!hdrs)
		abort();
	httpc_prepare(c->h, &req, a);
	/* the service is link-local: a proxy of the environment must not see the token */
	curl_easy_setopt(c->h, CURLOPT_NOPROXY, "*");
	rc = httpc_exchange(c->h, a);
	curl_slist_free_all(hdrs);
	if (a->overflow)
		return err_set(err, EFBIG,
			       "the instance metadata service at %s sent more than %zu bytes for "
			       "%s %s",
			       c->where, max, method, path);
	if (rc != CURLE_OK) {
		char cause[CURL_ERROR_SIZE + 32];

		failure_cause(c, a, cause, sizeof(cause));
		return err_set(err, EAGAIN,
			       "no answer from the instance metadata service at %s (%s) to %s %s",
			       c->where, cause, method, path);
	}
	return 0;
}

/* Keeps a token the service sent: printable ASCII, nothing else (it goes into a header). */
static int take_token(struct imds_client *c, const struct buf *body, struct err *err)
{
	const char *t = buf_str(body);
	size_t n = body->len;

	while (n && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' '))
		n--;
	if (n == 0)
		return err_set(err, EPROTO,
			       "the instance metadata service at %s sent an empty session token",
			       c->where);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)t[i] <= ' ' || (unsigned char)t[i] >= 0x7f)
			return err_set(err, EPROTO,
				       "the instance metadata service at %s sent a session token "
				       "with byte %zu not printable ASCII",
				       c->where, i);
	drop_token(c);
	c->token = xstrndup(t, n);
	/* renewed when 9/10 of its life has passed, long before the service drops it */
	c->token_renew_ns = c->now_ns(c->ud) + (int64_t)c->token_ttl_s * 900000000LL;
	return 0;
}

/* Gets a session token (PUT /latest/api/token) unless a fresh one is held. */
static int ensure_token(struct imds_client *c, struct err *err)
{
	_cleanup_free_ char *ttl = NULL;
	struct httpc_answer a = { 0 };
	int ret;

	if (c->token && c->now_ns(c->ud) < c->token_renew_ns)
		return 0;
	drop_token(c);
	ttl = xasprintf("X-aws-ec2-metadata-token-ttl-seconds: %d", c->token_ttl_s);
	ret = exchange(c, "PUT", "/latest/api/token", ttl, IMDS_TOKEN_MAX, &a, err);
	if (ret == 0) {
		if (a.status == 200)
			ret = take_token(c, &a.body, err);
		else if (a.status == 403)
			ret = err_set(err, EACCES,
				      "the instance metadata service at %s refused a session token "
				      "(403): it is turned off for this instance; launch it with "
				      "metadata options HttpEndpoint=enabled",
				      c->where);
		else if (a.status >= 500 || a.status == 429)
			ret = err_set(err, EAGAIN,
				      "the instance metadata service at %s answered %ld to PUT "
				      "/latest/api/token",
				      c->where, a.status);
		else
			ret = err_set(
				err, EPROTO,
				"the instance metadata service at %s answered %ld to PUT "
				"/latest/api/token; an IMDSv2 service answers 200 with a token",
				c->where, a.status);
	}
	httpc_answer_release(&a);
	return ret;
}

/* One GET with the held token: its HTTP status in *status (0 when none came). */
static int get_once(struct imds_client *c, const char *path, size_t max, struct httpc_answer *a,
		    long *status, struct err *err)
{
	_cleanup_free_ char *hdr = NULL;
	int ret = ensure_token(c, err);

	*status = 0;
	if (ret < 0)
		return ret;
	hdr = xasprintf("X-aws-ec2-metadata-token: %s", c->token);
	ret = exchange(c, "GET", path, hdr, max, a, err);
	explicit_bzero(hdr, strlen(hdr));
	if (ret == 0)
		*status = a->status;
	return ret;
}

/* The error for a GET's status other than 200. */
static int status_error(struct imds_client *c, const char *path, long status, struct err *err)
{
	if (status == 404)
		return err_set(err, ENOENT, "the instance metadata service at %s has nothing at %s",
			       c->where, path);
	if (status == 401 || status == 403)
		return err_set(err, EACCES,
			       "the instance metadata service at %s refused GET %s (%ld) with a "
			       "fresh session token",
			       c->where, path, status);
	if (status >= 500 || status == 429)
		return err_set(err, EAGAIN,
			       "the instance metadata service at %s answered %ld to GET %s",
			       c->where, status, path);
	return err_set(err, EPROTO, "the instance metadata service at %s answered %ld to GET %s",
		       c->where, status, path);
}

int imds_get(struct imds_client *c, const char *path, size_t max, char **body, size_t *len,
	     struct err *err)
{
	struct httpc_answer a = { 0 };
	long status = 0;
	int ret = get_once(c, path, max, &a, &status, err);

	if (ret == 0 && status == 401) {
		/* the service forgot the token (restarted, or it expired early): once more with a
		 * new one */
		httpc_answer_release(&a);
		memset(&a, 0, sizeof(a));
		drop_token(c);
		ret = get_once(c, path, max, &a, &status, err);
	}
	if (ret == 0 && status != 200)
		ret = status_error(c, path, status, err);
	if (ret == 0)
		*body = buf_detach(&a.body, len);
	httpc_answer_release(&a);
	return ret;
}

/* The wait before the next try, in words: "200 ms", "2 s". */
static void wait_words(int64_t ms, char *out, size_t size)
{
	if (ms < 1000)
		snprintf(out, size, "%lld ms", (long long)ms);
	else if (ms % 1000 == 0)
		snprintf(out, size, "%lld s", (long long)(ms / 1000));
	else
		snprintf(out, size, "%.1f s", (double)ms / 1000.0);
}

int imds_get_retry(struct imds_client *c, const char *path, size_t max, const struct imds_retry *r,
		   char **body, size_t *len, struct err *err)
{
	int64_t first = r && r->first_ms > 0 ? r->first_ms : 200;
	int64_t cap = r && r->max_ms > 0 ? r->max_ms : 5000;
	int64_t total = r ? r->total_ms : 0, waited = 0, delay = first;
	char words[32];
	int ret;

	if (cap < first)
		cap = first;
	for (int tries = 1;; tries++) {
		ret = imds_get(c, path, max, body, len, err);
		if (ret != -EAGAIN)
			return ret;
		if (total > 0 && waited + delay > total)
			return err_wrap(err, "gave up after %d tries over %lld ms", tries,
					(long long)waited);
		wait_words(delay, words, sizeof(words));
		log_warn("%s; retrying in %s", err->msg, words);
		c->sleep_ms(c->ud, delay);
		waited += delay;
		delay = delay * 2 > cap ? cap : delay * 2;
	}
}

/* Writes the document to the cache, its directory made first. */
static int keep_bootstrap(const char *cache, const char *text, size_t len, struct err *err)
{
	_cleanup_free_ char *dir = xstrdup(cache);
	char *slash = strrchr(dir, '/');

	if (slash && slash != dir) {
		*slash = '\0';
		if (fs_mkdir_p(dir, 0700, err) < 0)
			return err_wrap(err, "the bootstrap document's cache");
	}
	if (fs_write_file(cache, text, len, 0600, err) < 0)
		return err_wrap(err, "the bootstrap document's cache");
	return 0;
}

int imds_bootstrap(const struct imds_config *cfg, const struct imds_retry *r, const char *cache,
		   size_t cache_max, char **text, size_t *len, struct err *err)
{
	struct imds_client *c = NULL;
	struct agent_config ac;
	char *doc = NULL;
	size_t n = 0;
	int ret;

	if (fs_exists(cache)) {
		if (fs_read_file(cache, cache_max, text, len, err) < 0)
			return err_wrap(err, "bootstrap");
		log_info("bootstrap document from %s (fetched by an earlier start)", cache);
		return 0;
	}
	if (imds_client_new(cfg, &c, err) < 0)
		return -err->code;
	log_info("reading the bootstrap document from the instance metadata service at %s",
		 imds_client_where(c));
	ret = imds_get_retry(c, IMDS_USER_DATA, IMDS_USER_DATA_MAX, r, &doc, &n, err);
	imds_client_free(c);
	if (ret == -ENOENT)
		return err_wrap(err, "the instance has no user-data: a cell's instance is launched "
				     "by kiyot, whose user-data is the cell's bootstrap document");
	if (ret < 0)
		return err_wrap(err, "the bootstrap document");
	ret = agent_config_parse(doc, n, &ac, err);
	if (ret < 0)
		err_wrap(err, "the instance's user-data is not a cell's bootstrap document");
	else
		agent_config_release(&ac);
	if (ret == 0)
		ret = keep_bootstrap(cache, doc, n, err);
	if (ret < 0) {
		explicit_bzero(doc, n);
		free(doc);
		return ret;
	}
	log_info("bootstrap document of %zu bytes from the instance metadata service, kept in %s",
		 n, cache);
	*text = doc;
	*len = n;
	return 0;
}
