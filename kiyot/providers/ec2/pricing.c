/*
 * pricing.c: the Price List client's transport (pricing.h): GetProducts requests in JSON 1.1,
 * signed by libcurl's SigV4 for the service "pricing", retried with back-off, and paged.
 */
#include "pricing.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "aws_retry.h"
#include "buf.h"
#include "cancel.h"
#include "clock.h"
#include "httpc.h"
#include "metrics/metrics.h"
#include "xalloc.h"

#define DEFAULT_ATTEMPTS 8
#define DEFAULT_BASE_NS (100 * (int64_t)1000000)
#define DEFAULT_CAP_NS (20 * (int64_t)1000000000)
#define DEFAULT_TIMEOUT_MS 60000L
#define DEFAULT_CONNECT_MS 5000L
#define STALL_WINDOW_S 60 /* an answer that sends nothing for this long is stalled */
#define TARGET "AWSPriceListService.GetProducts"
#define WHAT "AWS Price List GetProducts"

struct pricing_client {
	char *endpoint;
	char *sigv4; /* "aws:amz:<endpoint's region>:pricing" */
	struct aws_creds_provider *creds;
	int max_attempts, page_size;
	struct aws_backoff backoff; /* between attempts */
	long timeout_ms, connect_ms;
	void (*sleep)(void *ctx, int64_t ns);
	void *sleep_ctx;
	uint64_t requests; /* atomic */
};

/* What one failed attempt means. */
enum attempt_class {
	ATTEMPT_RETRY,
	ATTEMPT_AUTH,
	ATTEMPT_EXPIRED,
	ATTEMPT_FAIL
};

const char *pricing_default_endpoint(const char *region)
{
	/* the Price List answers from us-east-1 and ap-south-1 (and China's own partition) */
	if (region && strncmp(region, "ap-", 3) == 0)
		return "https://api.pricing.ap-south-1.amazonaws.com/";
	return "https://api.pricing.us-east-1.amazonaws.com/";
}

/* The region an endpoint signs for: X of "api.pricing.X.amazonaws.com", else us-east-1 (a
 * private or test endpoint; the Price List's home region). */
static char *signing_region(const char *endpoint)
{
	const char *h = strstr(endpoint, "://"), *end;

	h = h ? h + 3 : endpoint;
	if (strncmp(h, "api.pricing.", 12) == 0 && (end = strchr(h + 12, '.')) && end > h + 12 &&
	    end - (h + 12) < 32)
		return xstrndup(h + 12, (size_t)(end - (h + 12)));
	return xstrdup("us-east-1");
}

int pricing_client_new(const struct pricing_config *cfg, struct pricing_client **out,
		       struct err *err)
{
	const char *ep = cfg->endpoint;
	struct pricing_client *c;

	if (!ep && (!cfg->region || !*cfg->region))
		return err_set(err, EINVAL, "price list: no region configured");
	if (!cfg->creds)
		return err_set(err, EINVAL, "price list: no credentials provider");
	if (ep && strncmp(ep, "https://", 8) != 0 && strncmp(ep, "http://", 7) != 0)
		return err_set(err, EINVAL,
			       "price list: endpoint \"%s\" is not an http:// or https:// URL", ep);
	if (cfg->page_size < 0 || cfg->page_size > PRICING_PAGE_SIZE)
		return err_set(err, EINVAL, "price list: the page size must be 1 to %d",
			       PRICING_PAGE_SIZE);
	httpc_global_init();
	c = xcalloc(1, sizeof(*c));
	c->endpoint = xstrdup(ep ? ep : pricing_default_endpoint(cfg->region));
	{
		_cleanup_free_ char *r = signing_region(c->endpoint);

		c->sigv4 = xasprintf("aws:amz:%s:pricing", r);
	}
	c->creds = cfg->creds;
	c->max_attempts = cfg->max_attempts > 0 ? cfg->max_attempts : DEFAULT_ATTEMPTS;
	c->page_size = cfg->page_size > 0 ? cfg->page_size : PRICING_PAGE_SIZE;
	aws_backoff_init(&c->backoff,
			 cfg->backoff_base_ns > 0 ? cfg->backoff_base_ns : DEFAULT_BASE_NS,
			 cfg->backoff_cap_ns > 0 ? cfg->backoff_cap_ns : DEFAULT_CAP_NS);
	c->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : DEFAULT_TIMEOUT_MS;
	c->connect_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : DEFAULT_CONNECT_MS;
	c->sleep = cfg->sleep ? cfg->sleep : aws_sleep;
	c->sleep_ctx = cfg->sleep_ctx;
	*out = c;
	return 0;
}

void pricing_client_free(struct pricing_client *c)
{
	if (!c)
		return;
	aws_backoff_destroy(&c->backoff);
	free(c->endpoint);
	free(c->sigv4);
	free(c);
}

const char *pricing_client_endpoint(const struct pricing_client *c)
{
	return c->endpoint;
}

uint64_t pricing_client_requests(const struct pricing_client *c)
{
	return __atomic_load_n(&c->requests, __ATOMIC_RELAXED);
}

/* One signed POST of body; 0 when an HTTP answer came (any status, in a). */
static int http_post(struct pricing_client *c, const struct aws_creds *cr, const char *body,
		     struct httpc_answer *a, struct err *err)
{
	_cleanup_free_ char *tok = NULL;
	struct curl_slist *hdrs = NULL;
	CURL *h = curl_easy_init();
	struct httpc_watch watch = { .deadline_ns = clock_mono_ns() + c->timeout_ms * 1000000LL,
				     .min_bytes = 1,
				     .window_s = STALL_WINDOW_S };
	struct httpc_req req = { .method = "POST",
				 .url = c->endpoint,
				 .body = body,
				 .body_len = strlen(body),
				 .max_answer = PRICING_MAX_RESPONSE,
				 .connect_timeout_ms = c->connect_ms,
				 .user_agent = "kiyot-pricing/1",
				 .watch = &watch };
	int ret;

	if (!h)
		return err_set(err, ENOMEM, "curl_easy_init failed");
	hdrs = curl_slist_append(hdrs, "Content-Type: application/x-amz-json-1.1");
	hdrs = curl_slist_append(hdrs, "X-Amz-Target: " TARGET);
	if (cr->session_token) {
		tok = xasprintf("X-Amz-Security-Token: %s", cr->session_token);
		hdrs = curl_slist_append(hdrs, tok);
	}
	req.headers = hdrs;
	httpc_prepare(h, &req, a);
	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, c->sigv4);
	curl_easy_setopt(h, CURLOPT_USERNAME, cr->access_key_id);
	curl_easy_setopt(h, CURLOPT_PASSWORD, cr->secret_access_key);
	__atomic_add_fetch(&c->requests, 1, __ATOMIC_RELAXED);
	ret = httpc_perform(h, a, WHAT, err);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	return ret;
}

/* The error code of a JSON 1.1 error answer: "__type" (or "code") without its namespace
 * ("com.amazon.coral.service#ThrottlingException" -> ThrottlingException), and its message. */
static void answer_code(const struct httpc_answer *a, char *code, size_t code_size, char *msg,
			size_t msg_size)
{
	json_t *root = a->body.len ? json_loadb(buf_str(&a->body), a->body.len, 0, NULL) : NULL;
	const char *t = json_string_value(json_object_get(root, "__type"));
	const char *m = json_string_value(json_object_get(root, "message"));

	if (!t)
		t = json_string_value(json_object_get(root, "code"));
	if (!m)
		m = json_string_value(json_object_get(root, "Message"));
	if (t && strrchr(t, '#'))
		t = strrchr(t, '#') + 1;
	if (t && strchr(t, ':')) /* "Code:http://internal.amazon.com/..." */
		snprintf(code, code_size, "%.*s", (int)(strchr(t, ':') - t), t);
	else
		snprintf(code, code_size, "%s", t ? t : "");
	snprintf(msg, msg_size, "%s", m ? m : "(no message)");
	json_decref(root);
}

/* What an error answer means: throttling and the server's failures are worth another try. */
static enum attempt_class classify(long status, const char *code)
{
	if (strcmp(code, "ExpiredTokenException") == 0 || strcmp(code, "ExpiredToken") == 0)
		return ATTEMPT_EXPIRED;
	if (strstr(code, "Throttl") || strcmp(code, "RequestLimitExceeded") == 0 ||
	    strcmp(code, "TooManyRequestsException") == 0 || strstr(code, "InternalError") ||
	    strstr(code, "ServiceUnavailable") || status == 429 || status >= 500)
		return ATTEMPT_RETRY;
	if (strstr(code, "AccessDenied") || strstr(code, "UnrecognizedClient") ||
	    strstr(code, "InvalidSignature") || strstr(code, "SignatureDoesNotMatch") ||
	    strstr(code, "InvalidClientTokenId") || strstr(code, "MissingAuthenticationToken") ||
	    strstr(code, "IncompleteSignature") || status == 401 || status == 403)
		return ATTEMPT_AUTH;
	return ATTEMPT_FAIL;
}

/* Words an error answer into err, with what to do of a missing permission. */
static enum attempt_class answer_error(const struct httpc_answer *a, struct err *err)
{
	char code[128], msg[300];
	enum attempt_class k;

	answer_code(a, code, sizeof(code), msg, sizeof(msg));
	k = classify(a->status, code);
	if (!code[0])
		err_set(err, EIO, WHAT ": HTTP %ld without an AWS error body", a->status);
	else
		err_set(err, EIO, WHAT ": %s: %s", code, msg);
	if (k == ATTEMPT_AUTH && strstr(code, "AccessDenied")) {
		size_t n = strlen(err->msg);

		snprintf(err->msg + n, sizeof(err->msg) - n,
			 "; the node's credentials need the IAM action pricing:GetProducts");
	}
	return k;
}

/* One GetProducts call with retries: the answer's body in *body. */
static int call(struct pricing_client *c, const char *request, char **body, size_t *len,
		struct err *err)
{
	enum attempt_class k = ATTEMPT_RETRY;
	bool refreshed = false;
	int attempt;

	for (attempt = 1; attempt <= c->max_attempts; attempt++) {
		struct aws_creds cr = { 0 };
		struct httpc_answer a = { 0 };
		int ret;

		if (attempt > 1)
			c->sleep(c->sleep_ctx, aws_backoff_ns(&c->backoff, attempt - 1));
		if (cancel_requested())
			return err_set(err, ECANCELED, WHAT ": cancelled: the caller went away");
		ret = aws_creds_provider_get(c->creds, &cr, err);
		if (ret < 0) {
			err_wrap(err, WHAT ": credentials");
			if (ret == -EAGAIN)
				continue;
			err->code = EACCES;
			return -EACCES;
		}
		ret = http_post(c, &cr, request, &a, err);
		aws_creds_release(&cr);
		if (ret == 0 && a.status >= 200 && a.status < 300) {
			*body = buf_detach(&a.body, len);
			return 0;
		}
		if (ret == -ECANCELED) {
			httpc_answer_release(&a);
			return -ECANCELED;
		}
		if (ret == -EIO || ret == -ETIMEDOUT) /* the network, or too slow */
			k = ATTEMPT_RETRY;
		else if (ret < 0)
			k = ATTEMPT_FAIL;
		else
			k = answer_error(&a, err);
		httpc_answer_release(&a);
		if (k == ATTEMPT_EXPIRED && !refreshed) { /* temporary credentials ran out */
			refreshed = true;
			aws_creds_provider_invalidate(c->creds);
			continue;
		}
		if (k != ATTEMPT_RETRY)
			break;
	}
	if (k == ATTEMPT_RETRY) {
		err_wrap(err, "gave up after %d attempts", c->max_attempts);
		err->code = EAGAIN;
	} else {
		err->code = k == ATTEMPT_FAIL ? EINVAL : EACCES;
	}
	return -err->code;
}

/* The request body of one page: every filter, then MaxResults and NextToken. */
static char *request_body(const struct pricing_client *c, const char *region, const char *type,
			  const char *next)
{
	static const char *const fixed[][2] = { { "operatingSystem", "Linux" },
						{ "tenancy", "Shared" },
						{ "preInstalledSw", "NA" },
						{ "capacitystatus", "Used" } };
	json_t *filters = json_array();
	json_t *req;
	char *text;

	json_array_append_new(filters, json_pack("{s:s, s:s, s:s}", "Type", "TERM_MATCH", "Field",
						 "regionCode", "Value", region));
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		json_array_append_new(filters,
				      json_pack("{s:s, s:s, s:s}", "Type", "TERM_MATCH", "Field",
						fixed[i][0], "Value", fixed[i][1]));
	if (type)
		json_array_append_new(filters, json_pack("{s:s, s:s, s:s}", "Type", "TERM_MATCH",
							 "Field", "instanceType", "Value", type));
	req = json_pack("{s:s, s:o, s:s, s:i}", "ServiceCode", "AmazonEC2", "Filters", filters,
			"FormatVersion", "aws_v1", "MaxResults", c->page_size);
	if (next)
		json_object_set_new(req, "NextToken", json_string(next));
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (!text)
		abort(); /* out of memory: json_dumps fails for nothing else here */
	return text;
}

/* One call's figure: ok, throttled (ThrottlingException to the end) or error. */
static const char *call_outcome(int ret, const struct err *err)
{
	if (ret == 0)
		return "ok";
	return strstr(err->msg, "Throttl") ? "throttled" : "error";
}

/* Every page of one query (type NULL: the region's every type) into out. */
static int query(struct pricing_client *c, const char *region, const char *type,
		 struct pricing_list *out, struct err *err)
{
	_cleanup_free_ char *next = NULL;

	for (int page = 0; page < PRICING_MAX_PAGES; page++) {
		_cleanup_free_ char *request = request_body(c, region, type, next);
		_cleanup_free_ char *body = NULL;
		char *tok = NULL;
		size_t len = 0;
		int64_t t0 = clock_mono_ns();
		int ret = call(c, request, &body, &len, err);

		metrics_provider_call("pricing", "GetProducts", call_outcome(ret, err),
				      (double)(clock_mono_ns() - t0) / 1e9);
		if (ret < 0)
			return ret;
		ret = pricing_parse_page(body, len, out, &tok, err);
		if (ret < 0)
			return err_wrap(err, WHAT " page %d", page + 1);
		if (!tok)
			return 0;
		if (next && strcmp(next, tok) == 0) {
			free(tok);
			return err_set(err, EPROTO, WHAT ": the same NextToken twice");
		}
		free(next);
		next = tok;
	}
	return err_set(err, EPROTO, WHAT ": more than %d pages", PRICING_MAX_PAGES);
}

int pricing_ec2_on_demand(struct pricing_client *c, const char *region, const char *const *types,
			  size_t n_types, struct pricing_list *out, struct err *err)
{
	*out = (struct pricing_list)PRICING_LIST_INIT;
	if (!region || !*region)
		return err_set(err, EINVAL, WHAT ": no region");
	if (types && n_types > PRICING_MAX_TYPES_ASKED)
		return err_set(err, EINVAL,
			       WHAT ": %zu instance types asked one by one; at most %d", n_types,
			       PRICING_MAX_TYPES_ASKED);
	if (!types)
		return query(c, region, NULL, out, err);
	for (size_t i = 0; i < n_types; i++) {
		int ret = query(c, region, types[i], out, err);

		if (ret < 0)
			return ret;
	}
	return 0;
}
