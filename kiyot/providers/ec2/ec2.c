#include "ec2.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <libxml/parser.h>

#include "buf.h"
#include "clock.h"
#include "codec.h"
#include "ec2_xml.h"
#include "httpc.h"
#include "xalloc.h"

#define DEFAULT_ATTEMPTS 8
#define DEFAULT_BASE_NS (100 * (int64_t)1000000)
#define DEFAULT_CAP_NS (20 * (int64_t)1000000000)
#define DEFAULT_TIMEOUT_MS 30000L
#define DEFAULT_CONNECT_MS 5000L

struct ec2_client {
	char *region;
	char *endpoint;
	char *sigv4; /* "aws:amz:<region>:ec2" */
	struct aws_creds_provider *creds;
	int max_attempts;
	int64_t base_ns, cap_ns;
	long timeout_ms, connect_ms;
	size_t max_response;
	void (*sleep)(void *ctx, int64_t ns);
	void *sleep_ctx;
	CURLSH *share;
	pthread_mutex_t share_lock[CURL_LOCK_DATA_LAST];
	pthread_mutex_t rng_lock;
	uint64_t rng;
	uint64_t requests; /* atomic */
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

/* libcurl's and libxml2's global state, set up once, before any thread uses them. */
static void global_init(void)
{
	httpc_global_init();
	xmlInitParser();
}

const char *ec2_errclass_name(enum ec2_errclass c)
{
	static const char *const names[] = { "ok",	  "retry", "capacity",
					     "not-found", "auth",  "invalid" };

	return (unsigned)c < ARRAY_SIZE(names) ? names[c] : "invalid";
}

int ec2_errclass_errno(enum ec2_errclass c)
{
	switch (c) {
	case EC2_OK:
		return 0;
	case EC2_RETRY:
		return EAGAIN;
	case EC2_CAPACITY:
		return ENOSPC;
	case EC2_NOT_FOUND:
		return ENOENT;
	case EC2_AUTH:
		return EACCES;
	case EC2_INVALID:
		break;
	}
	return EINVAL;
}

enum ec2_errclass ec2_errclass_of(int err_code)
{
	if (err_code < 0)
		err_code = -err_code;
	switch (err_code) {
	case 0:
		return EC2_OK;
	case EAGAIN:
		return EC2_RETRY;
	case ENOSPC:
		return EC2_CAPACITY;
	case ENOENT:
		return EC2_NOT_FOUND;
	case EACCES:
		return EC2_AUTH;
	}
	return EC2_INVALID;
}

/* True when s ends with suffix. */
static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* True when s is one of the NULL-terminated list. */
static bool one_of(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(s, *list) == 0)
			return true;
	return false;
}

/*
 * EC2's error codes by what the caller can do about them. Codes not listed: 5xx retry, 401 and
 * 403 auth, other 4xx invalid.
 */
enum ec2_errclass ec2_classify(int http_status, const char *code, const char *message)
{
	static const char *const retry[] = { "RequestLimitExceeded", "Throttling",
					     "ThrottlingException",  "RequestThrottled",
					     "InternalError",	     "InternalFailure",
					     "ServiceUnavailable",   "Unavailable",
					     "RequestTimeout",	     NULL };
	static const char *const capacity[] = { "InsufficientInstanceCapacity",
						"InsufficientHostCapacity",
						"InsufficientReservedInstanceCapacity",
						"InsufficientCapacity",
						"Unsupported",
						"SpotMaxPriceTooLow",
						"MaxSpotInstanceCountExceeded",
						NULL };
	static const char *const auth[] = { "AuthFailure",
					    "UnauthorizedOperation",
					    "InvalidClientTokenId",
					    "SignatureDoesNotMatch",
					    "OptInRequired",
					    "Blocked",
					    "PendingVerification",
					    "ExpiredToken",
					    "RequestExpired",
					    "IncompleteSignature",
					    "MissingAuthenticationToken",
					    "InvalidAccessKeyId",
					    "AccessDenied",
					    NULL };

	if (code && *code) {
		if (one_of(code, retry))
			return EC2_RETRY;
		if (one_of(code, capacity))
			return EC2_CAPACITY;
		/* the same code also covers unrelated parameter clashes: only type support */
		if (strcmp(code, "InvalidParameterCombination") == 0)
			return message && strcasestr(message, "type") &&
					       strcasestr(message, "support")
				       ? EC2_CAPACITY
				       : EC2_INVALID;
		if (ends_with(code, ".NotFound"))
			return EC2_NOT_FOUND;
		if (one_of(code, auth))
			return EC2_AUTH;
	}
	if (http_status >= 500 || http_status == 429 || http_status == 0)
		return EC2_RETRY;
	if (http_status == 401 || http_status == 403)
		return EC2_AUTH;
	if (http_status >= 200 && http_status < 300)
		return EC2_OK;
	return EC2_INVALID;
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

/* Sleeps with nanosleep, resuming after signals. */
static void default_sleep(void *ctx, int64_t ns)
{
	struct timespec ts = { ns / 1000000000, ns % 1000000000 };

	(void)ctx;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
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
	c->base_ns = cfg->backoff_base_ns > 0 ? cfg->backoff_base_ns : DEFAULT_BASE_NS;
	c->cap_ns = cfg->backoff_cap_ns > 0 ? cfg->backoff_cap_ns : DEFAULT_CAP_NS;
	c->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : DEFAULT_TIMEOUT_MS;
	c->connect_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : DEFAULT_CONNECT_MS;
	c->max_response = cfg->max_response > 0 ? cfg->max_response : EC2_MAX_RESPONSE;
	c->sleep = cfg->sleep ? cfg->sleep : default_sleep;
	c->sleep_ctx = cfg->sleep_ctx;
	for (size_t i = 0; i < ARRAY_SIZE(c->share_lock); i++)
		pthread_mutex_init(&c->share_lock[i], NULL);
	pthread_mutex_init(&c->rng_lock, NULL);
	c->rng = (uint64_t)clock_mono_ns() ^ ((uint64_t)(uintptr_t)c << 16) ^ 0x9e3779b97f4a7c15ull;
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
	pthread_mutex_destroy(&c->rng_lock);
	free(c->region);
	free(c->endpoint);
	free(c->sigv4);
	free(c);
}

const char *ec2_client_endpoint(const struct ec2_client *c)
{
	return c->endpoint;
}

uint64_t ec2_client_requests(const struct ec2_client *c)
{
	return __atomic_load_n(&c->requests, __ATOMIC_RELAXED);
}

/* A uniformly random value in [0, bound], from the client's xorshift state. */
static int64_t random_upto(struct ec2_client *c, int64_t bound)
{
	uint64_t x;

	pthread_mutex_lock(&c->rng_lock);
	x = c->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	c->rng = x;
	pthread_mutex_unlock(&c->rng_lock);
	return bound > 0 ? (int64_t)(x % ((uint64_t)bound + 1)) : 0;
}

/* Full-jitter back-off after the attempt-th failure: random in [0, min(cap, base * 2^(n-1))]. */
static int64_t backoff_ns(struct ec2_client *c, int attempt)
{
	int64_t ceiling = c->base_ns;

	for (int i = 1; i < attempt && ceiling < c->cap_ns; i++)
		ceiling *= 2;
	if (ceiling > c->cap_ns)
		ceiling = c->cap_ns;
	return random_upto(c, ceiling);
}

/*
 * One signed POST of body with the given credentials. 0 when an HTTP answer came (any status,
 * in a); a negative errno with err set when the exchange failed: EAGAIN for the network, EFBIG
 * for an answer over the cap.
 */
static int http_post(struct ec2_client *c, const struct aws_creds *cr, const char *body,
		     struct httpc_answer *a, struct err *err)
{
	_cleanup_free_ char *tok = NULL;
	struct curl_slist *hdrs = NULL;
	CURL *h = curl_easy_init();
	struct httpc_req req = { .method = "POST",
				 .url = c->endpoint,
				 .body = body,
				 .body_len = strlen(body),
				 .max_answer = c->max_response,
				 .connect_timeout_ms = c->connect_ms,
				 .timeout_ms = c->timeout_ms };
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
	if (ret == -EIO)
		err->code = EAGAIN; /* the network: worth another attempt */
	return ret < 0 ? -err->code : 0;
}

/* Reports a failed call: the class in *cls and err, with code and errno. */
static int fail(enum ec2_errclass k, enum ec2_errclass *cls, struct err *err)
{
	if (cls)
		*cls = k;
	err->code = ec2_errclass_errno(k);
	return -err->code;
}

/*
 * Turns a non-2xx answer into err ("ec2 <Action>: <Code>: <Message>") and its class; *ec2_code
 * (the caller frees it) is the EC2 error code or NULL.
 */
static enum ec2_errclass answer_error(const char *action, const struct httpc_answer *a,
				      char **ec2_code, struct err *err)
{
	_cleanup_free_ char *code = NULL;
	_cleanup_free_ char *msg = NULL;
	struct err perr = ERR_INIT;
	enum ec2_errclass k;

	*ec2_code = NULL;
	if (a->body.len && ec2_xml_error(buf_str(&a->body), a->body.len, &code, &msg, &perr) == 0) {
		k = ec2_classify((int)a->status, code, msg);
		err_set(err, EIO, "ec2 %s: %s: %s", action, code, msg ? msg : "(no message)");
		*ec2_code = steal_ptr(code);
	} else {
		k = ec2_classify((int)a->status, NULL, NULL);
		err_set(err, EIO, "ec2 %s: HTTP %ld without an EC2 error body", action, a->status);
	}
	return k == EC2_OK ? EC2_INVALID : k;
}

/* Appends "key=value" to a form, percent-encoding both (RFC 3986 unreserved kept). */
static void form_add(struct buf *f, const char *key, const char *value)
{
	_cleanup_free_ char *k = pct_encode(key);
	_cleanup_free_ char *v = pct_encode(value);
	struct err e = ERR_INIT;

	buf_appendf(f, &e, "%s%s=%s", f->len ? "&" : "", k, v);
}

/* form_add with a printf-built key. */
static void form_addf(struct buf *f, const char *value, const char *keyfmt, ...)
	__attribute__((format(printf, 3, 4)));

static void form_addf(struct buf *f, const char *value, const char *keyfmt, ...)
{
	_cleanup_free_ char *key = NULL;
	va_list ap;

	va_start(ap, keyfmt);
	key = xvasprintf(keyfmt, ap);
	va_end(ap);
	form_add(f, key, value);
}

int ec2_call(struct ec2_client *c, const char *action, const char *params, char **body, size_t *len,
	     enum ec2_errclass *cls, struct err *err)
{
	struct buf form = BUF_INIT;
	bool refreshed = false;
	enum ec2_errclass k = EC2_RETRY;
	int attempt;

	if (cls)
		*cls = EC2_OK;
	form_add(&form, "Action", action);
	form_add(&form, "Version", EC2_API_VERSION);
	if (params && *params)
		buf_appendf(&form, err, "&%s", params);
	for (attempt = 1; attempt <= c->max_attempts; attempt++) {
		struct aws_creds cr = { 0 };
		_cleanup_free_ char *code = NULL;
		struct httpc_answer a = { 0 };
		int ret;

		if (attempt > 1)
			c->sleep(c->sleep_ctx, backoff_ns(c, attempt - 1));
		ret = aws_creds_provider_get(c->creds, &cr, err);
		if (ret < 0) {
			k = ret == -EAGAIN ? EC2_RETRY : EC2_AUTH;
			err_wrap(err, "ec2 %s: credentials", action);
			if (k == EC2_RETRY)
				continue;
			break;
		}
		ret = http_post(c, &cr, buf_str(&form), &a, err);
		aws_creds_release(&cr);
		if (ret == 0 && a.status >= 200 && a.status < 300) {
			buf_release(&form);
			*body = buf_detach(&a.body, len);
			return 0;
		}
		if (ret < 0) {
			k = ret == -EAGAIN ? EC2_RETRY : EC2_INVALID;
			err_wrap(err, "ec2 %s", action);
		} else {
			k = answer_error(action, &a, &code, err);
		}
		httpc_answer_release(&a);
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
	return fail(k, cls, err);
}

/* Parses one page of a paginated answer into the caller's accumulator. */
struct pager {
	const char *action;
	int (*page)(const char *body, size_t len, void *acc, char **next, struct err *err);
	void *acc;
};

/* Calls action with params, then again with each NextToken, until a page has none. */
static int paginate(struct ec2_client *c, const struct pager *pg, const char *params,
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
			form_add(&q, "NextToken", next);
		ret = ec2_call(c, pg->action, buf_str(&q), &body, &len, cls, err);
		buf_release(&q);
		if (ret < 0)
			return ret;
		if (pg->page(body, len, pg->acc, &tok, err) < 0) {
			err_wrap(err, "ec2 %s", pg->action);
			return fail(EC2_INVALID, cls, err);
		}
		if (!tok)
			return 0;
		if (next && strcmp(next, tok) == 0) {
			free(tok);
			err_set(err, EIO, "ec2 %s: the same NextToken twice", pg->action);
			return fail(EC2_INVALID, cls, err);
		}
		free(next);
		next = tok;
	}
	err_set(err, EIO, "ec2 %s: more than %d pages", pg->action, EC2_MAX_PAGES);
	return fail(EC2_INVALID, cls, err);
}

/* A plain validation error of a request, before anything is sent. */
static int invalid(enum ec2_errclass *cls, struct err *err, const char *action, const char *what)
{
	err_set(err, EINVAL, "ec2 %s: %s", action, what);
	return fail(EC2_INVALID, cls, err);
}

/* Adds prefix.N.Key / prefix.N.Value for each tag. */
static void form_tags(struct buf *f, const char *prefix, const struct ec2_tags *t)
{
	for (size_t i = 0; i < t->n; i++) {
		form_addf(f, t->items[i].key, "%s.%zu.Key", prefix, i + 1);
		form_addf(f, t->items[i].value, "%s.%zu.Value", prefix, i + 1);
	}
}

/* Checks a RunInstances spec against EC2's rules that we can know in advance. */
static const char *run_spec_problem(const struct ec2_run_spec *s)
{
	if (!s->client_token || !*s->client_token || strlen(s->client_token) > EC2_MAX_CLIENT_TOKEN)
		return "a ClientToken of 1 to 64 characters is required";
	for (const char *p = s->client_token; *p; p++)
		if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
			return "the ClientToken must be printable ASCII";
	if (!s->image_id || !*s->image_id)
		return "no image (AMI) id; set it in the ec2 provider configuration";
	if (!s->instance_type || !*s->instance_type)
		return "no instance type";
	if (s->user_data_len > EC2_MAX_USER_DATA)
		return "user data is larger than EC2's 16 KiB";
	if (s->tags && s->tags->n > EC2_MAX_TAGS)
		return "more than 50 tags";
	return NULL;
}

int ec2_run_instance(struct ec2_client *c, const struct ec2_run_spec *spec,
		     struct ec2_instance *out, enum ec2_errclass *cls, struct err *err)
{
	_cleanup_free_ char *body = NULL;
	const char *problem = run_spec_problem(spec);
	struct buf f = BUF_INIT;
	size_t len;
	int ret;

	if (problem)
		return invalid(cls, err, "RunInstances", problem);
	form_add(&f, "ClientToken", spec->client_token);
	form_add(&f, "ImageId", spec->image_id);
	form_add(&f, "InstanceType", spec->instance_type);
	form_add(&f, "MinCount", "1");
	form_add(&f, "MaxCount", "1");
	if (spec->subnet_id && *spec->subnet_id)
		form_add(&f, "SubnetId", spec->subnet_id);
	for (size_t i = 0; i < spec->n_security_group_ids; i++)
		form_addf(&f, spec->security_group_ids[i], "SecurityGroupId.%zu", i + 1);
	if (spec->iam_instance_profile && *spec->iam_instance_profile)
		form_add(&f,
			 strncmp(spec->iam_instance_profile, "arn:", 4) == 0
				 ? "IamInstanceProfile.Arn"
				 : "IamInstanceProfile.Name",
			 spec->iam_instance_profile);
	if (spec->user_data && spec->user_data_len) {
		_cleanup_free_ char *b64 = b64_encode(spec->user_data, spec->user_data_len);

		form_add(&f, "UserData", b64);
	}
	if (spec->tags && spec->tags->n) {
		form_add(&f, "TagSpecification.1.ResourceType", "instance");
		form_tags(&f, "TagSpecification.1.Tag", spec->tags);
	}
	if (spec->spot) {
		form_add(&f, "InstanceMarketOptions.MarketType", "spot");
		form_add(&f, "InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time");
		form_add(&f, "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior",
			 "terminate");
	}
	ret = ec2_call(c, "RunInstances", buf_str(&f), &body, &len, cls, err);
	buf_release(&f);
	if (ret < 0)
		return ret;
	if (ec2_xml_run_instances(body, len, out, err) < 0) {
		err_wrap(err, "ec2 RunInstances");
		return fail(EC2_INVALID, cls, err);
	}
	return 0;
}

/* The accumulator of DescribeInstances pages. */
struct inst_acc {
	struct ec2_instance *arr;
	size_t n, cap;
};

static int inst_page(const char *body, size_t len, void *acc, char **next, struct err *err)
{
	struct inst_acc *a = acc;

	return ec2_xml_describe_instances(body, len, &a->arr, &a->n, &a->cap, next, err);
}

int ec2_describe_instances(struct ec2_client *c, const struct ec2_describe_query *q,
			   struct ec2_instance **out, size_t *n, enum ec2_errclass *cls,
			   struct err *err)
{
	struct inst_acc acc = { NULL, 0, 0 };
	struct pager pg = { "DescribeInstances", inst_page, &acc };
	struct buf f = BUF_INIT;
	int ret;

	if (q->n_instance_ids > EC2_MAX_IDS_PER_CALL)
		return invalid(cls, err, "DescribeInstances", "more than 1000 instance ids");
	for (size_t i = 0; i < q->n_filters; i++) {
		form_addf(&f, q->filters[i].name, "Filter.%zu.Name", i + 1);
		for (size_t j = 0; j < q->filters[i].n_values; j++)
			form_addf(&f, q->filters[i].values[j], "Filter.%zu.Value.%zu", i + 1,
				  j + 1);
	}
	for (size_t i = 0; i < q->n_instance_ids; i++)
		form_addf(&f, q->instance_ids[i], "InstanceId.%zu", i + 1);
	if (!q->n_instance_ids) {
		int ps = q->page_size ? q->page_size : 1000;
		char num[16];

		snprintf(num, sizeof(num), "%d", ps < 5 ? 5 : ps > 1000 ? 1000 : ps);
		form_add(&f, "MaxResults", num);
	}
	ret = paginate(c, &pg, buf_str(&f), cls, err);
	buf_release(&f);
	if (ret < 0) {
		ec2_instances_free(acc.arr, acc.n);
		return ret;
	}
	*out = acc.arr;
	*n = acc.n;
	return 0;
}

/* Adds prefix.N for each id, checking the per-call limit. */
static int form_ids(struct buf *f, const char *prefix, const char *const *ids, size_t n)
{
	if (n == 0 || n > EC2_MAX_IDS_PER_CALL)
		return -1;
	for (size_t i = 0; i < n; i++)
		form_addf(f, ids[i], "%s.%zu", prefix, i + 1);
	return 0;
}

int ec2_terminate_instances(struct ec2_client *c, const char *const *ids, size_t n,
			    enum ec2_errclass *cls, struct err *err)
{
	_cleanup_free_ char *body = NULL;
	struct buf f = BUF_INIT;
	size_t len;
	int ret;

	if (form_ids(&f, "InstanceId", ids, n) < 0) {
		buf_release(&f);
		return invalid(cls, err, "TerminateInstances", "1 to 1000 instance ids are needed");
	}
	ret = ec2_call(c, "TerminateInstances", buf_str(&f), &body, &len, cls, err);
	buf_release(&f);
	return ret;
}

int ec2_create_tags(struct ec2_client *c, const char *const *resource_ids, size_t n,
		    const struct ec2_tags *tags, enum ec2_errclass *cls, struct err *err)
{
	_cleanup_free_ char *body = NULL;
	struct buf f = BUF_INIT;
	size_t len;
	int ret;

	if (!tags || tags->n == 0 || tags->n > EC2_MAX_TAGS)
		return invalid(cls, err, "CreateTags", "1 to 50 tags are needed");
	if (form_ids(&f, "ResourceId", resource_ids, n) < 0) {
		buf_release(&f);
		return invalid(cls, err, "CreateTags", "1 to 1000 resource ids are needed");
	}
	form_tags(&f, "Tag", tags);
	ret = ec2_call(c, "CreateTags", buf_str(&f), &body, &len, cls, err);
	buf_release(&f);
	return ret;
}

/* The accumulator of DescribeInstanceTypes pages. */
struct type_acc {
	struct ec2_type_info *arr;
	size_t n, cap;
};

static int type_page(const char *body, size_t len, void *acc, char **next, struct err *err)
{
	struct type_acc *a = acc;

	return ec2_xml_instance_types(body, len, &a->arr, &a->n, &a->cap, next, err);
}

int ec2_describe_instance_types(struct ec2_client *c, struct ec2_type_info **out, size_t *n,
				enum ec2_errclass *cls, struct err *err)
{
	struct type_acc acc = { NULL, 0, 0 };
	struct pager pg = { "DescribeInstanceTypes", type_page, &acc };
	int ret = paginate(c, &pg, "MaxResults=100", cls, err);

	if (ret < 0) {
		ec2_type_infos_free(acc.arr, acc.n);
		return ret;
	}
	*out = acc.arr;
	*n = acc.n;
	return 0;
}

/* The accumulator of DescribeSpotPriceHistory pages. */
struct spot_acc {
	struct ec2_spot_price *arr;
	size_t n, cap;
};

static int spot_page(const char *body, size_t len, void *acc, char **next, struct err *err)
{
	struct spot_acc *a = acc;

	return ec2_xml_spot_prices(body, len, &a->arr, &a->n, &a->cap, next, err);
}

/* Orders by type, then latest first, then cheapest first. */
static int spot_cmp(const void *pa, const void *pb)
{
	const struct ec2_spot_price *a = pa, *b = pb;
	int r = strcmp(a->instance_type, b->instance_type);

	if (r)
		return r;
	if (a->timestamp_ns != b->timestamp_ns)
		return a->timestamp_ns > b->timestamp_ns ? -1 : 1;
	return (a->price > b->price) - (a->price < b->price);
}

/* Keeps the first entry of each type of a sorted array, freeing the rest; returns the count. */
static size_t spot_reduce(struct ec2_spot_price *a, size_t n)
{
	size_t w = 0;

	for (size_t i = 0; i < n; i++) {
		if (w && strcmp(a[w - 1].instance_type, a[i].instance_type) == 0) {
			free(a[i].instance_type);
			free(a[i].availability_zone);
			continue;
		}
		a[w++] = a[i];
	}
	return w;
}

int ec2_describe_spot_prices(struct ec2_client *c, const char *const *types, size_t n_types,
			     const char *availability_zone, struct ec2_spot_price **out, size_t *n,
			     enum ec2_errclass *cls, struct err *err)
{
	struct spot_acc acc = { NULL, 0, 0 };
	struct pager pg = { "DescribeSpotPriceHistory", spot_page, &acc };
	struct buf f = BUF_INIT;
	char now[40];
	int ret;

	clock_rfc3339nano(clock_now_ns(), now, sizeof(now));
	form_add(&f, "ProductDescription.1", "Linux/UNIX");
	form_add(&f, "StartTime", now);
	form_add(&f, "MaxResults", "1000");
	if (availability_zone && *availability_zone)
		form_add(&f, "AvailabilityZone", availability_zone);
	for (size_t i = 0; i < n_types; i++)
		form_addf(&f, types[i], "InstanceType.%zu", i + 1);
	ret = paginate(c, &pg, buf_str(&f), cls, err);
	buf_release(&f);
	if (ret < 0) {
		ec2_spot_prices_free(acc.arr, acc.n);
		return ret;
	}
	if (acc.n)
		qsort(acc.arr, acc.n, sizeof(*acc.arr), spot_cmp);
	*n = spot_reduce(acc.arr, acc.n);
	*out = acc.arr;
	return 0;
}

void ec2_tags_release(struct ec2_tags *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->items[i].key);
		free(t->items[i].value);
	}
	free(t->items);
	t->items = NULL;
	t->n = t->cap = 0;
}

void ec2_tags_add(struct ec2_tags *t, const char *key, const char *value)
{
	xgrow((void **)&t->items, &t->cap, t->n + 1, sizeof(*t->items));
	t->items[t->n].key = xstrdup(key);
	t->items[t->n].value = xstrdup(value ? value : "");
	t->n++;
}

const char *ec2_tags_get(const struct ec2_tags *t, const char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->items[i].key, key) == 0)
			return t->items[i].value;
	return NULL;
}

/* True for label keys that must not become tags: Kubernetes' own and AWS-reserved ones. */
static bool label_reserved(const char *key)
{
	return strncmp(key, "kubernetes.io/", 14) == 0 || strncmp(key, "io.kubernetes", 13) == 0 ||
	       strncasecmp(key, "aws:", 4) == 0;
}

/* A label, for sorting by key. */
struct label_ref {
	const char *key;
	const char *value;
};

static int label_cmp(const void *pa, const void *pb)
{
	const struct label_ref *a = pa, *b = pb;

	return strcmp(a->key, b->key);
}

int ec2_pod_tags(const struct ec2_pod_ident *p, struct ec2_tags *out, struct err *err)
{
	struct ec2_tags t = EC2_TAGS_INIT;
	_cleanup_free_ struct label_ref *labels = NULL;
	_cleanup_free_ char *name = NULL;
	size_t ours;

	if (!p->cluster_id || !*p->cluster_id || strlen(p->cluster_id) > EC2_MAX_TAG_VALUE)
		return err_set(err, EINVAL, "tags: the cluster id must be 1 to 256 characters");
	if (!p->pod_uid || !*p->pod_uid || strlen(p->pod_uid) > EC2_MAX_TAG_VALUE)
		return err_set(err, EINVAL, "tags: the pod uid must be 1 to 256 characters");
	ec2_tags_add(&t, EC2_TAG_CLUSTER_ID, p->cluster_id);
	if (p->cell_id && *p->cell_id)
		ec2_tags_add(&t, EC2_TAG_CELL_ID, p->cell_id);
	ec2_tags_add(&t, EC2_TAG_POD_UID, p->pod_uid);
	if (p->pod_name)
		ec2_tags_add(&t, EC2_TAG_POD_NAME, p->pod_name);
	if (p->pod_namespace)
		ec2_tags_add(&t, EC2_TAG_POD_NAMESPACE, p->pod_namespace);
	name = xasprintf("kiyot-%s-%s", p->pod_namespace ? p->pod_namespace : "",
			 p->pod_name ? p->pod_name : p->pod_uid);
	if (strlen(name) > EC2_MAX_TAG_VALUE)
		name[EC2_MAX_TAG_VALUE] = '\0';
	ec2_tags_add(&t, "Name", name);
	/* a pod name or namespace too long for a tag value is cut, like Name */
	for (size_t i = 0; i < t.n; i++)
		if (strlen(t.items[i].value) > EC2_MAX_TAG_VALUE)
			t.items[i].value[EC2_MAX_TAG_VALUE] = '\0';
	ours = t.n;
	labels = xcalloc(p->n_labels ? p->n_labels : 1, sizeof(*labels));
	for (size_t i = 0; i < p->n_labels; i++)
		labels[i] = (struct label_ref){ p->label_keys[i],
						p->label_values[i] ? p->label_values[i] : "" };
	if (p->n_labels)
		qsort(labels, p->n_labels, sizeof(*labels), label_cmp);
	for (size_t i = 0; i < p->n_labels && t.n < EC2_MAX_TAGS; i++) {
		const struct label_ref *l = &labels[i];
		bool clash = false;

		if (!l->key || !*l->key || label_reserved(l->key) ||
		    strlen(l->key) > EC2_MAX_TAG_KEY || strlen(l->value) > EC2_MAX_TAG_VALUE)
			continue;
		for (size_t j = 0; j < ours && !clash; j++)
			clash = strcmp(t.items[j].key, l->key) == 0;
		if (!clash)
			ec2_tags_add(&t, l->key, l->value);
	}
	*out = t;
	return 0;
}

void ec2_instance_release(struct ec2_instance *i)
{
	free(i->instance_id);
	free(i->instance_type);
	free(i->state);
	free(i->private_ip);
	free(i->image_id);
	free(i->subnet_id);
	free(i->client_token);
	free(i->reservation_id);
	ec2_tags_release(&i->tags);
	memset(i, 0, sizeof(*i));
}

void ec2_instances_free(struct ec2_instance *a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ec2_instance_release(&a[i]);
	free(a);
}

void ec2_type_infos_free(struct ec2_type_info *a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(a[i].name);
	free(a);
}

void ec2_spot_prices_free(struct ec2_spot_price *a, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(a[i].instance_type);
		free(a[i].availability_zone);
	}
	free(a);
}
