/*
 * ec2.c: the EC2 client's transport: the client, its shared connections, SigV4 through
 * libcurl, retries with back-off, and pagination (see ec2.h, ec2_internal.h).
 */
#include "ec2_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <libxml/parser.h>

#include "aws_retry.h"
#include "buf.h"
#include "cancel.h"
#include "clock.h"
#include "ec2_xml.h"
#include "httpc.h"
#include "metrics/metrics.h"
#include "xalloc.h"

#define DEFAULT_ATTEMPTS 8
#define DEFAULT_BASE_NS (100 * (int64_t)1000000)
#define DEFAULT_CAP_NS (20 * (int64_t)1000000000)
#define DEFAULT_TIMEOUT_MS 30000L
#define DEFAULT_CONNECT_MS 5000L
#define DEFAULT_RATE 20.0	/* calls a second the shared bucket starts at */
#define DEFAULT_BURST 20.0	/* and the most it holds */
#define MIN_RATE 0.5		/* the least it slows to after RequestLimitExceeded */
#define PER_ITEM_MS 100L	/* a call's deadline grows by this per item it may answer */
#define MAX_DEADLINE_MS 900000L /* the longest deadline, retries' included */
#define STALL_WINDOW_S 60	/* an answer that sends nothing for this long is stalled */

struct ec2_client {
	char *region;
	char *endpoint;
	char *sigv4; /* "aws:amz:<region>:ec2" */
	struct aws_creds_provider *creds;
	int max_attempts;
	struct aws_backoff backoff; /* between attempts */
	long timeout_ms, connect_ms;
	size_t max_response;
	void (*sleep)(void *ctx, int64_t ns);
	void *sleep_ctx;
	CURLSH *share;
	pthread_mutex_t share_lock[CURL_LOCK_DATA_LAST];
	uint64_t requests; /* atomic */
	/* the token bucket every call of the client draws from (under bucket_lock): it refills
	 * at rate a second up to burst; RequestLimitExceeded halves the rate, success brings it
	 * back slowly, so many launches together slow down instead of being throttled */
	pthread_mutex_t bucket_lock;
	double tokens, rate, max_rate, burst;
	int64_t refilled_ns;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

/* libcurl's and libxml2's global state, set up once, before any thread uses them. */
static void global_init(void)
{
	httpc_global_init();
	xmlInitParser();
}

/* Serialises access to the shared connection cache. */
static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ud)
{
	struct ec2_client *c = ud;

	(void)h;
	(void)access;
	pthread_mutex_lock(&c->share_lock[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ud)
{
	struct ec2_client *c = ud;

	(void)h;
	pthread_mutex_unlock(&c->share_lock[data]);
}

int ec2_client_new(const struct ec2_config *cfg, struct ec2_client **out, struct err *err)
{
	struct ec2_client *c;
	const char *ep = cfg->endpoint;

	if (!cfg->region || !*cfg->region)
		return err_set(err, EINVAL, "ec2: no region configured");
	if (!cfg->creds)
		return err_set(err, EINVAL, "ec2: no credentials provider");
	if (ep && strncmp(ep, "https://", 8) != 0 && strncmp(ep, "http://", 7) != 0)
		return err_set(err, EINVAL,
			       "ec2: endpoint \"%s\" is not an http:// or https:// URL", ep);
	pthread_once(&global_once, global_init);
	c = xcalloc(1, sizeof(*c));
	c->region = xstrdup(cfg->region);
	c->endpoint = ep ? xstrdup(ep) : xasprintf("https://ec2.%s.amazonaws.com/", cfg->region);
	c->sigv4 = xasprintf("aws:amz:%s:ec2", cfg->region);
	c->creds = cfg->creds;
	c->max_attempts = cfg->max_attempts > 0 ? cfg->max_attempts : DEFAULT_ATTEMPTS;
	aws_backoff_init(&c->backoff,
			 cfg->backoff_base_ns > 0 ? cfg->backoff_base_ns : DEFAULT_BASE_NS,
			 cfg->backoff_cap_ns > 0 ? cfg->backoff_cap_ns : DEFAULT_CAP_NS);
	c->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : DEFAULT_TIMEOUT_MS;
	c->connect_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : DEFAULT_CONNECT_MS;
	c->max_response = cfg->max_response > 0 ? cfg->max_response : EC2_MAX_RESPONSE;
	c->sleep = cfg->sleep ? cfg->sleep : aws_sleep;
	c->sleep_ctx = cfg->sleep_ctx;
	pthread_mutex_init(&c->bucket_lock, NULL);
	c->max_rate = cfg->rate > 0 ? cfg->rate : DEFAULT_RATE;
	c->rate = c->max_rate;
	c->burst = cfg->burst > 0 ? cfg->burst : DEFAULT_BURST;
	c->tokens = c->burst;
	c->refilled_ns = clock_mono_ns();
	for (size_t i = 0; i < ARRAY_SIZE(c->share_lock); i++)
		pthread_mutex_init(&c->share_lock[i], NULL);
	c->share = curl_share_init();
	if (c->share) {
		curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock);
		curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
		curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
		curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
		curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
		curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	}
	*out = c;
	return 0;
}

void ec2_client_free(struct ec2_client *c)
{
	if (!c)
		return;
	if (c->share)
		curl_share_cleanup(c->share);
	for (size_t i = 0; i < ARRAY_SIZE(c->share_lock); i++)
		pthread_mutex_destroy(&c->share_lock[i]);
	aws_backoff_destroy(&c->backoff);
	pthread_mutex_destroy(&c->bucket_lock);
	free(c->region);
	free(c->endpoint);
	free(c->sigv4);
	free(c);
}

const char *ec2_client_endpoint(const struct ec2_client *c)
{
	return c->endpoint;
}

struct aws_creds_provider *ec2_client_creds(const struct ec2_client *c)
{
	return c->creds;
}

uint64_t ec2_client_requests(const struct ec2_client *c)
{
	return __atomic_load_n(&c->requests, __ATOMIC_RELAXED);
}

/* A uniformly random value in [0, bound], from the client's xorshift state. */
/* Takes a token from the shared bucket: 0 at once when one is there, else the time until the
 * next is (the caller sleeps and asks again). */
static int64_t bucket_take(struct ec2_client *c)
{
	int64_t now = clock_mono_ns(), wait = 0;

	pthread_mutex_lock(&c->bucket_lock);
	c->tokens += (double)(now - c->refilled_ns) / 1e9 * c->rate;
	if (c->tokens > c->burst)
		c->tokens = c->burst;
	c->refilled_ns = now;
	if (c->tokens >= 1.0)
		c->tokens -= 1.0;
	else
		wait = (int64_t)((1.0 - c->tokens) / c->rate * 1e9) + 1;
	pthread_mutex_unlock(&c->bucket_lock);
	return wait;
}

/* What an answer says of EC2's own rate limit: throttled halves the bucket's rate (and empties
 * it), success brings a twentieth of the rate back, up to the configured one. */
static void bucket_learn(struct ec2_client *c, bool throttled)
{
	pthread_mutex_lock(&c->bucket_lock);
	if (throttled) {
		c->rate = c->rate / 2 < MIN_RATE ? MIN_RATE : c->rate / 2;
		c->tokens = 0;
	} else if (c->rate < c->max_rate) {
		c->rate += c->max_rate / 20;
		if (c->rate > c->max_rate)
			c->rate = c->max_rate;
	}
	pthread_mutex_unlock(&c->bucket_lock);
}

double ec2_client_rate(const struct ec2_client *c)
{
	double r;

	pthread_mutex_lock((pthread_mutex_t *)&c->bucket_lock);
	r = c->rate;
	pthread_mutex_unlock((pthread_mutex_t *)&c->bucket_lock);
	return r;
}

/* Waits for a token; -ECANCELED when the caller went away meanwhile. */
static int bucket_wait(struct ec2_client *c, const char *action, struct err *err)
{
	int64_t wait;

	while ((wait = bucket_take(c)) > 0) {
		if (cancel_requested())
			break;
		aws_sleep(NULL, wait); /* real time: the bucket refills in it */
	}
	if (cancel_requested())
		return err_set(err, ECANCELED, "ec2 %s: cancelled: the caller went away", action);
	return 0;
}

/* How many items an answer to params may hold: MaxResults, the ids named, else one. */
static long expected_items(const char *params)
{
	const char *m = params ? strstr(params, "MaxResults=") : NULL;
	long n = 0;

	if (m)
		return strtol(m + strlen("MaxResults="), NULL, 10);
	for (const char *p = params; p && (p = strstr(p, "nceId.")); p += 6)
		n++; /* InstanceId.N */
	for (const char *p = params; p && (p = strstr(p, "ResourceId.")); p += 11)
		n++;
	return n ? n : 1;
}

/*
 * One signed POST of body with the given credentials. 0 when an HTTP answer came (any status,
 * in a); a negative errno with err set when the exchange failed: EAGAIN for the network, EFBIG
 * for an answer over the cap.
 */
static int http_post(struct ec2_client *c, const struct aws_creds *cr, const char *body,
		     long deadline_ms, struct httpc_answer *a, struct err *err)
{
	_cleanup_free_ char *tok = NULL;
	struct curl_slist *hdrs = NULL;
	CURL *h = curl_easy_init();
	/* no fixed total: a deadline that grows with the answer, and an answer that sends
	 * nothing for a while is stalled; a slow page that keeps coming is not cut */
	struct httpc_watch watch = { .deadline_ns = clock_mono_ns() + deadline_ms * 1000000LL,
				     .min_bytes = 1,
				     .window_s = STALL_WINDOW_S };
	struct httpc_req req = { .method = "POST",
				 .url = c->endpoint,
				 .body = body,
				 .body_len = strlen(body),
				 .max_answer = c->max_response,
				 .connect_timeout_ms = c->connect_ms,
				 .timeout_ms = 0,
				 .watch = &watch };
	int ret;

	if (!h)
		return err_set(err, ENOMEM, "curl_easy_init failed");
	hdrs = curl_slist_append(hdrs, "Content-Type: application/x-www-form-urlencoded; "
				       "charset=utf-8");
	if (cr->session_token) {
		tok = xasprintf("X-Amz-Security-Token: %s", cr->session_token);
		hdrs = curl_slist_append(hdrs, tok);
	}
	req.headers = hdrs;
	httpc_prepare(h, &req, a);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "kiyot-ec2/1");
	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, c->sigv4);
	curl_easy_setopt(h, CURLOPT_USERNAME, cr->access_key_id);
	curl_easy_setopt(h, CURLOPT_PASSWORD, cr->secret_access_key);
	if (c->share)
		curl_easy_setopt(h, CURLOPT_SHARE, c->share);
	__atomic_add_fetch(&c->requests, 1, __ATOMIC_RELAXED);
	ret = httpc_perform(h, a, c->endpoint, err);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	if (ret == -EIO || ret == -ETIMEDOUT)
		err->code = EAGAIN; /* the network, or too slow: worth another attempt */
	if (ret == -ETIMEDOUT)
		err_wrap(err, "timed out");
	return ret < 0 ? (ret == -ETIMEDOUT ? -ETIMEDOUT : -err->code) : 0;
}

/* Reports a failed call: the class in *cls and err, with code and errno. */
int ec2_fail(enum ec2_errclass k, enum ec2_errclass *cls, struct err *err)
{
	if (cls)
		*cls = k;
	err->code = ec2_errclass_errno(k);
	return -err->code;
}

/*
 * Turns a non-2xx answer into err ("ec2 <Action>: <Code>: <Message>") and its class; *ec2_code
 * and *ec2_msg (the caller frees them) are the EC2 error code and message, or NULL.
 */
static enum ec2_errclass answer_error(const char *action, const struct httpc_answer *a,
				      char **ec2_code, char **ec2_msg, struct err *err)
{
	_cleanup_free_ char *code = NULL;
	_cleanup_free_ char *msg = NULL;
	struct err perr = ERR_INIT;
	enum ec2_errclass k;

	*ec2_code = NULL;
	*ec2_msg = NULL;
	if (a->body.len && ec2_xml_error(buf_str(&a->body), a->body.len, &code, &msg, &perr) == 0) {
		k = ec2_classify((int)a->status, code, msg);
		err_set(err, EIO, "ec2 %s: %s: %s", action, code, msg ? msg : "(no message)");
		*ec2_code = steal_ptr(code);
		*ec2_msg = steal_ptr(msg);
	} else {
		k = ec2_classify((int)a->status, NULL, NULL);
		err_set(err, EIO, "ec2 %s: HTTP %ld without an EC2 error body", action, a->status);
	}
	return k == EC2_OK ? EC2_INVALID : k;
}

int ec2_call(struct ec2_client *c, const char *action, const char *params, char **body, size_t *len,
	     enum ec2_errclass *cls, struct err *err)
{
	struct ec2_fault f = { NULL, NULL };
	int ret = ec2_call_fault(c, action, params, body, len, cls, &f, err);

	ec2_fault_release(&f);
	return ret;
}

void ec2_fault_release(struct ec2_fault *f)
{
	free(f->code);
	free(f->message);
	f->code = f->message = NULL;
}

static int call_once(struct ec2_client *c, const char *action, const char *params, char **body,
		     size_t *len, enum ec2_errclass *cls, struct ec2_fault *fault, struct err *err);

/* One EC2 call's figure: ok, throttled (RequestLimitExceeded to the end), capacity or error. */
static void call_figure(const char *action, int64_t t0, int ret, enum ec2_errclass k,
			const struct ec2_fault *fault)
{
	const char *outcome = "ok";

	if (ret < 0)
		outcome = k == EC2_CAPACITY ? "capacity"
			  : fault->code && strcmp(fault->code, "RequestLimitExceeded") == 0
				  ? "throttled"
				  : "error";
	metrics_provider_call("ec2", action, outcome, (double)(clock_mono_ns() - t0) / 1e9);
}

int ec2_call_fault(struct ec2_client *c, const char *action, const char *params, char **body,
		   size_t *len, enum ec2_errclass *cls, struct ec2_fault *fault, struct err *err)
{
	int64_t t0 = clock_mono_ns();
	enum ec2_errclass k = EC2_OK;
	int ret = call_once(c, action, params, body, len, &k, fault, err);

	if (cls)
		*cls = k;
	call_figure(action, t0, ret, k, fault);
	return ret;
}

/* ec2_call_fault without its figure. */
static int call_once(struct ec2_client *c, const char *action, const char *params, char **body,
		     size_t *len, enum ec2_errclass *cls, struct ec2_fault *fault, struct err *err)
{
	struct buf form = BUF_INIT;
	bool refreshed = false;
	enum ec2_errclass k = EC2_RETRY;
	long deadline_ms = c->timeout_ms + expected_items(params) * PER_ITEM_MS;
	int attempt;

	if (cls)
		*cls = EC2_OK;
	ec2_form_add(&form, "Action", action);
	ec2_form_add(&form, "Version", EC2_API_VERSION);
	if (params && *params)
		buf_appendf(&form, err, "&%s", params);
	for (attempt = 1; attempt <= c->max_attempts; attempt++) {
		struct aws_creds cr = { 0 };
		char *code = NULL, *msg = NULL;
		struct httpc_answer a = { 0 };
		int ret;

		if (attempt > 1)
			c->sleep(c->sleep_ctx, aws_backoff_ns(&c->backoff, attempt - 1));
		if (bucket_wait(c, action, err) < 0) {
			buf_release(&form);
			if (cls)
				*cls = EC2_RETRY;
			return -ECANCELED;
		}
		ret = aws_creds_provider_get(c->creds, &cr, err);
		if (ret < 0) {
			k = ret == -EAGAIN ? EC2_RETRY : EC2_AUTH;
			err_wrap(err, "ec2 %s: credentials", action);
			if (k == EC2_RETRY)
				continue;
			break;
		}
		ret = http_post(c, &cr, buf_str(&form), deadline_ms, &a, err);
		aws_creds_release(&cr);
		if (ret == 0 && a.status >= 200 && a.status < 300) {
			bucket_learn(c, false);
			buf_release(&form);
			*body = buf_detach(&a.body, len);
			return 0;
		}
		if (ret == -ECANCELED) {
			httpc_answer_release(&a);
			buf_release(&form);
			if (cls)
				*cls = EC2_RETRY;
			return err_wrap(err, "ec2 %s", action);
		}
		if (ret == -ETIMEDOUT) /* the next try waits longer */
			deadline_ms = deadline_ms * 2 > MAX_DEADLINE_MS ? MAX_DEADLINE_MS
									: deadline_ms * 2;
		if (ret < 0) {
			k = ret == -EAGAIN || ret == -ETIMEDOUT ? EC2_RETRY : EC2_INVALID;
			err_wrap(err, "ec2 %s", action);
		} else {
			k = answer_error(action, &a, &code, &msg, err);
			if (code && strcmp(code, "RequestLimitExceeded") == 0)
				bucket_learn(c, true);
		}
		httpc_answer_release(&a);
		ec2_fault_release(fault);
		fault->code = code;
		fault->message = msg;
		/* temporary credentials that ran out: fetch new ones once */
		if (k == EC2_AUTH && !refreshed && code && strcmp(code, "ExpiredToken") == 0) {
			refreshed = true;
			aws_creds_provider_invalidate(c->creds);
			continue;
		}
		if (k != EC2_RETRY)
			break;
	}
	buf_release(&form);
	if (k == EC2_RETRY && attempt > c->max_attempts)
		err_wrap(err, "gave up after %d attempts", c->max_attempts);
	return ec2_fail(k, cls, err);
}

/* Calls action with params, then again with each NextToken, until a page has none. */
int ec2_paginate(struct ec2_client *c, const struct pager *pg, const char *params,
		 enum ec2_errclass *cls, struct err *err)
{
	_cleanup_free_ char *next = NULL;

	for (int page = 0; page < EC2_MAX_PAGES; page++) {
		struct buf q = BUF_INIT;
		_cleanup_free_ char *body = NULL;
		char *tok = NULL;
		size_t len;
		int ret;

		buf_append(&q, params, strlen(params), err);
		if (next)
			ec2_form_add(&q, "NextToken", next);
		ret = ec2_call(c, pg->action, buf_str(&q), &body, &len, cls, err);
		buf_release(&q);
		if (ret < 0)
			return ret;
		if (pg->page(body, len, pg->acc, &tok, err) < 0) {
			err_wrap(err, "ec2 %s", pg->action);
			return ec2_fail(EC2_INVALID, cls, err);
		}
		if (!tok)
			return 0;
		if (next && strcmp(next, tok) == 0) {
			free(tok);
			err_set(err, EIO, "ec2 %s: the same NextToken twice", pg->action);
			return ec2_fail(EC2_INVALID, cls, err);
		}
		free(next);
		next = tok;
	}
	err_set(err, EIO, "ec2 %s: more than %d pages", pg->action, EC2_MAX_PAGES);
	return ec2_fail(EC2_INVALID, cls, err);
}
