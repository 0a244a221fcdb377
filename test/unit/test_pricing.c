/*
 * Unit tests for kiyot/providers/ec2/pricing: the Price List's GetProducts answers (fixtures in
 * test/fixtures/pricing/) read into on-demand prices, the requests the client sends, paging,
 * retries with an injected sleep and the errors it names, against an HTTP server on 127.0.0.1.
 */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "providers/ec2/pricing.h"
#include "buf.h"
#include "metrics/metrics.h"
#include "xalloc.h"

#include "awsstub.h"

#define FIX "test/fixtures/pricing/"

/* A fixture's text; the caller frees it. */
static char *fixture(const char *name)
{
	return awsstub_fixture(FIX, name);
}

static int parse(const char *body, struct pricing_list *l, char **next, struct err *err)
{
	return pricing_parse_page(body, strlen(body), l, next, err);
}

/* A page's hourly USD on-demand prices are read; products without one are skipped, counted. */
static void test_pricing__page_prices_read(void **state)
{
	_cleanup_free_ char *page = fixture("page1.json");
	struct pricing_list l = PRICING_LIST_INIT;
	struct err err = ERR_INIT;
	char *next = NULL;
	(void)state;

	if (parse(page, &l, &next, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(next, "page2-token/abc==");
	assert_int_equal(l.products, 7);
	/* $0, unit Quantity, no instance type, not JSON, a second m5.large */
	assert_int_equal(l.skipped, 5);
	assert_int_equal(l.n, 2);
	assert_non_null(pricing_list_find(&l, "m5.large"));
	/* the first product of a type, and the on-demand term, not the reserved one */
	assert_true(pricing_list_find(&l, "m5.large")->usd_per_hour == 0.096);
	assert_true(pricing_list_find(&l, "t3.micro")->usd_per_hour == 0.0104);
	assert_null(pricing_list_find(&l, "c5.large"));
	assert_null(pricing_list_find(&l, "m5.xlarge"));
	free(next);
	pricing_list_release(&l);
}

/* The last page has no NextToken; prices accumulate across pages. */
static void test_pricing__last_page_and_accumulation(void **state)
{
	_cleanup_free_ char *p1 = fixture("page1.json");
	_cleanup_free_ char *p2 = fixture("page2.json");
	struct pricing_list l = PRICING_LIST_INIT;
	struct err err = ERR_INIT;
	char *next = NULL;
	(void)state;

	assert_int_equal(parse(p1, &l, &next, &err), 0);
	free(next);
	assert_int_equal(parse(p2, &l, &next, &err), 0);
	assert_null(next);
	assert_int_equal(l.n, 4);
	assert_true(pricing_list_find(&l, "t4g.nano")->usd_per_hour == 0.0042);
	assert_int_equal(parse("{\"FormatVersion\":\"aws_v1\",\"PriceList\":[]}", &l, &next, &err),
			 0);
	assert_int_equal(parse("{\"NextToken\":null}", &l, &next, &err), 0);
	assert_null(next);
	assert_int_equal(l.n, 4);
	pricing_list_release(&l);
}

/* What is not a Price List answer is refused with EPROTO, naming what is wrong. */
static void test_pricing__malformed_answers_refused(void **state)
{
	static const struct {
		const char *body, *says;
	} cases[] = {
		{ "", "not JSON" },
		{ "<xml/>", "not JSON" },
		{ "[1,2]", "not a JSON object" },
		{ "{\"PriceList\":\"x\"}", "PriceList is not a list" },
		{ "{\"PriceList\":[],\"NextToken\":\"\"}", "NextToken" },
		{ "{\"PriceList\":[],\"NextToken\":7}", "NextToken" },
		{ "{\"PriceList\":[],\"NextToken\":\"a\\u0000b\"}", "not JSON" },
		{ "{\"PriceList\":[],\"PriceList\":[]}", "not JSON" },
	};
	(void)state;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct pricing_list l = PRICING_LIST_INIT;
		struct err err = ERR_INIT;
		char *next = NULL;

		if (parse(cases[i].body, &l, &next, &err) != -EPROTO)
			fail_msg("case %zu: %s accepted", i, cases[i].body);
		assert_int_equal(err.code, EPROTO);
		if (!strstr(err.msg, cases[i].says))
			fail_msg("case %zu: \"%s\" does not say %s", i, err.msg, cases[i].says);
		assert_null(next);
		assert_int_equal(l.n, 0);
		pricing_list_release(&l);
	}
}

/* Hostile products are bounded: a long token, a long type name, odd prices, a huge document. */
static void test_pricing__hostile_products_bounded(void **state)
{
	struct pricing_list l = PRICING_LIST_INIT;
	struct err err = ERR_INIT;
	char *next = NULL;
	json_t *page = json_pack("{s:[]}", "PriceList");
	json_t *list = json_object_get(page, "PriceList");
	static const char *const prices[] = { "-1",	"1e400", "nan",	   "0x10",
					      "1.5abc", "",	 "100000", " 1" };
	_cleanup_free_ char *longname = xmalloc(PRICING_MAX_TYPE_NAME + 1);
	_cleanup_free_ char *big = xmalloc(PRICING_MAX_PRODUCT + 64);
	_cleanup_free_ char *token = xmalloc(PRICING_MAX_TOKEN + 2);
	char *text;
	(void)state;

	for (size_t i = 0; i < ARRAY_SIZE(prices); i++) {
		char *doc =
			xasprintf("{\"product\":{\"attributes\":{\"instanceType\":\"x%zu.large\"}},"
				  "\"terms\":{\"OnDemand\":{\"t\":{\"priceDimensions\":{\"d\":"
				  "{\"unit\":\"Hrs\",\"pricePerUnit\":{\"USD\":\"%s\"}}}}}}}",
				  i, prices[i]);
		json_array_append_new(list, json_string(doc));
		free(doc);
	}
	memset(longname, 'a', PRICING_MAX_TYPE_NAME);
	longname[PRICING_MAX_TYPE_NAME] = '\0';
	text = xasprintf("{\"product\":{\"attributes\":{\"instanceType\":\"%s\"}},\"terms\":"
			 "{\"OnDemand\":{\"t\":{\"priceDimensions\":{\"d\":{\"unit\":\"Hrs\","
			 "\"pricePerUnit\":{\"USD\":\"1\"}}}}}}}",
			 longname);
	json_array_append_new(list, json_string(text));
	free(text);
	/* a product document over PRICING_MAX_PRODUCT, otherwise fine */
	memset(big, ' ', PRICING_MAX_PRODUCT + 63);
	big[PRICING_MAX_PRODUCT + 63] = '\0';
	memcpy(big, "{\"product\":{\"attributes\":{\"instanceType\":\"m5.large\"}},\"terms\":{}",
	       strlen("{\"product\":{\"attributes\":{\"instanceType\":\"m5.large\"}},\"terms\":{"
		      "}"));
	big[PRICING_MAX_PRODUCT + 62] = '}';
	json_array_append_new(list, json_string(big));
	assert_int_equal(json_array_size(list), ARRAY_SIZE(prices) + 2);
	text = json_dumps(page, JSON_COMPACT);
	assert_int_equal(parse(text, &l, &next, &err), 0);
	assert_int_equal(l.products, ARRAY_SIZE(prices) + 2);
	assert_int_equal(l.skipped, l.products);
	assert_int_equal(l.n, 0);
	free(text);
	/* a token one byte over the bound */
	memset(token, 'T', PRICING_MAX_TOKEN + 1);
	token[PRICING_MAX_TOKEN + 1] = '\0';
	json_object_set_new(page, "NextToken", json_string(token));
	text = json_dumps(page, JSON_COMPACT);
	assert_int_equal(parse(text, &l, &next, &err), -EPROTO);
	free(text);
	json_decref(page);
	pricing_list_release(&l);
}

/* The endpoint nearest a region, among the Price List's. */
static void test_pricing__default_endpoints(void **state)
{
	(void)state;
	assert_string_equal(pricing_default_endpoint("us-east-1"),
			    "https://api.pricing.us-east-1.amazonaws.com/");
	assert_string_equal(pricing_default_endpoint("eu-west-1"),
			    "https://api.pricing.us-east-1.amazonaws.com/");
	assert_string_equal(pricing_default_endpoint("ap-northeast-1"),
			    "https://api.pricing.ap-south-1.amazonaws.com/");
}

/* A Price List client of the stub endpoint, its sleeps recorded. */
struct harness {
	struct awsstub aws;
	struct pricing_client *client;
};

static void harness_start(struct harness *h, const struct stub_reply *replies, size_t n,
			  int max_attempts)
{
	struct pricing_config cfg = { 0 };
	struct err err = ERR_INIT;

	memset(h, 0, sizeof(*h));
	h->aws.stub.replies = replies;
	h->aws.stub.n_replies = n;
	awsstub_start(&h->aws, "session-token-1");
	cfg.endpoint = h->aws.url;
	cfg.region = "eu-west-1";
	cfg.creds = h->aws.creds;
	cfg.max_attempts = max_attempts;
	cfg.sleep = awsstub_sleep;
	cfg.sleep_ctx = &h->aws;
	if (pricing_client_new(&cfg, &h->client, &err) < 0)
		fail_msg("%s", err.msg);
}

static void harness_stop(struct harness *h)
{
	awsstub_stop(&h->aws);
	pricing_client_free(h->client);
	awsstub_release(&h->aws);
}

/* The TERM_MATCH filter of field in a request body, or NULL. */
static const char *filter_value(json_t *req, const char *field)
{
	size_t i;
	json_t *f;

	json_array_foreach (json_object_get(req, "Filters"), i, f) {
		if (strcmp(json_string_value(json_object_get(f, "Field")), field) == 0 &&
		    strcmp(json_string_value(json_object_get(f, "Type")), "TERM_MATCH") == 0)
			return json_string_value(json_object_get(f, "Value"));
	}
	return NULL;
}

/* Pages are followed to the last; each request is GetProducts in JSON 1.1, signed for the
 * service pricing, with the region's Linux on-demand filters and the token of the page before. */
static void test_pricing__requests_and_pages(void **state)
{
	_cleanup_free_ char *p1 = fixture("page1.json");
	_cleanup_free_ char *p2 = fixture("page2.json");
	struct stub_reply script[] = { { 200, p1, NULL }, { 200, p2, NULL } };
	struct pricing_list l;
	struct err err = ERR_INIT;
	struct harness h;
	char v[512];
	(void)state;

	harness_start(&h, script, ARRAY_SIZE(script), 0);
	if (pricing_ec2_on_demand(h.client, "eu-west-1", NULL, 0, &l, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(l.n, 4);
	assert_int_equal(stub_count(&h.aws.stub), 2);
	for (size_t i = 0; i < 2; i++) {
		const struct stub_request *rq = &h.aws.stub.reqs[i];
		json_t *req = json_loads(rq->body, 0, NULL);

		assert_string_equal(rq->method, "POST");
		assert_string_equal(rq->path, "/");
		assert_true(stub_header(rq->headers, "X-Amz-Target", v, sizeof(v)));
		assert_string_equal(v, "AWSPriceListService.GetProducts");
		assert_true(stub_header(rq->headers, "Content-Type", v, sizeof(v)));
		assert_string_equal(v, "application/x-amz-json-1.1");
		assert_true(stub_header(rq->headers, "X-Amz-Security-Token", v, sizeof(v)));
		assert_true(stub_header(rq->headers, "Authorization", v, sizeof(v)));
		assert_non_null(strstr(v, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"));
		assert_non_null(strstr(v, "/us-east-1/pricing/aws4_request"));
		assert_non_null(strstr(v, "x-amz-target"));
		assert_non_null(req);
		assert_string_equal(json_string_value(json_object_get(req, "ServiceCode")),
				    "AmazonEC2");
		assert_string_equal(json_string_value(json_object_get(req, "FormatVersion")),
				    "aws_v1");
		assert_int_equal(json_integer_value(json_object_get(req, "MaxResults")), 100);
		assert_string_equal(filter_value(req, "regionCode"), "eu-west-1");
		assert_string_equal(filter_value(req, "operatingSystem"), "Linux");
		assert_string_equal(filter_value(req, "tenancy"), "Shared");
		assert_string_equal(filter_value(req, "preInstalledSw"), "NA");
		assert_string_equal(filter_value(req, "capacitystatus"), "Used");
		assert_null(filter_value(req, "instanceType"));
		if (i == 0)
			assert_null(json_object_get(req, "NextToken"));
		else
			assert_string_equal(json_string_value(json_object_get(req, "NextToken")),
					    "page2-token/abc==");
		json_decref(req);
	}
	pricing_list_release(&l);
	harness_stop(&h);
}

/* A few types are asked one query each, with an instanceType filter. */
static void test_pricing__types_asked_one_by_one(void **state)
{
	_cleanup_free_ char *p2 = fixture("page2.json");
	struct stub_reply script[] = { { 200, p2, NULL } };
	const char *types[] = { "t4g.nano", "r7g.medium" };
	struct pricing_list l;
	struct err err = ERR_INIT;
	struct harness h;
	(void)state;

	harness_start(&h, script, 1, 0);
	if (pricing_ec2_on_demand(h.client, "us-east-1", types, 2, &l, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(stub_count(&h.aws.stub), 2);
	for (size_t i = 0; i < 2; i++) {
		json_t *req = json_loads(h.aws.stub.reqs[i].body, 0, NULL);

		assert_string_equal(filter_value(req, "instanceType"), types[i]);
		json_decref(req);
	}
	assert_int_equal(l.n, 2);
	assert_int_equal(l.skipped, 2); /* the second answer's, priced already */
	pricing_list_release(&l);
	assert_int_equal(pricing_ec2_on_demand(h.client, "us-east-1", types,
					       PRICING_MAX_TYPES_ASKED + 1, &l, &err),
			 -EINVAL);
	harness_stop(&h);
}

/* Throttling and 5xx are retried after a back-off, then the answer is read. */
static void test_pricing__throttling_retried(void **state)
{
	_cleanup_free_ char *throttle = fixture("throttle.json");
	_cleanup_free_ char *p2 = fixture("page2.json");
	struct stub_reply script[] = {
		{ 400, throttle, NULL }, { 503, "", NULL }, { 429, "{}", NULL }, { 200, p2, NULL }
	};
	struct pricing_list l;
	struct err err = ERR_INIT;
	struct harness h;
	(void)state;

	harness_start(&h, script, ARRAY_SIZE(script), 0);
	if (pricing_ec2_on_demand(h.client, "us-east-1", NULL, 0, &l, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(l.n, 2);
	assert_int_equal(stub_count(&h.aws.stub), 4);
	assert_int_equal(pricing_client_requests(h.client), 4);
	assert_int_equal(h.aws.n_sleeps, 3);
	for (int i = 0; i < 3; i++)
		assert_true(h.aws.sleeps_ns[i] >= 0 && h.aws.sleeps_ns[i] <= (int64_t)100000000
										     << i);
	pricing_list_release(&l);
	harness_stop(&h);
}

/* The count of GetProducts calls that ended with outcome, from the metrics. */
static long calls_counted(const char *outcome)
{
	_cleanup_free_ char *key = xasprintf("kiyot_provider_calls_total{provider=\"pricing\","
					     "action=\"GetProducts\",outcome=\"%s\"} ",
					     outcome);
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;
	const char *at;
	long n = 0;

	assert_int_equal(metrics_render(metrics_default(), &b, &err), 0);
	at = strstr(buf_str(&b), key);
	if (at)
		n = strtol(at + strlen(key), NULL, 10);
	buf_release(&b);
	return n;
}

/* Throttling that does not end gives up with EAGAIN, naming the code and the attempts. */
static void test_pricing__retries_exhausted(void **state)
{
	_cleanup_free_ char *throttle = fixture("throttle.json");
	struct stub_reply script[] = { { 400, throttle, NULL } };
	struct pricing_list l;
	struct err err = ERR_INIT;
	struct harness h;
	(void)state;

	long throttled = calls_counted("throttled"), errors = calls_counted("error");

	harness_start(&h, script, 1, 3);
	assert_int_equal(pricing_ec2_on_demand(h.client, "us-east-1", NULL, 0, &l, &err), -EAGAIN);
	assert_int_equal(stub_count(&h.aws.stub), 3);
	/* counted as a throttled GetProducts, not an error */
	assert_int_equal(calls_counted("throttled"), throttled + 1);
	assert_int_equal(calls_counted("error"), errors);
	assert_non_null(strstr(err.msg, "ThrottlingException: Rate exceeded"));
	assert_non_null(strstr(err.msg, "gave up after 3 attempts"));
	pricing_list_release(&l);
	harness_stop(&h);
}

/* An endpoint that does not answer is retried, then counted as an error, not as throttled. */
static void test_pricing__network_failure_counted_as_error(void **state)
{
	struct pricing_list l;
	struct err err = ERR_INIT;
	struct harness h;
	long throttled = calls_counted("throttled"), errors = calls_counted("error");
	(void)state;

	harness_start(&h, NULL, 0, 2);
	awsstub_stop(&h.aws); /* nothing listens there any more */
	assert_int_equal(pricing_ec2_on_demand(h.client, "us-east-1", NULL, 0, &l, &err), -EAGAIN);
	assert_non_null(strstr(err.msg, "gave up after 2 attempts"));
	assert_int_equal(h.aws.n_sleeps, 1);
	assert_int_equal(calls_counted("error"), errors + 1);
	assert_int_equal(calls_counted("throttled"), throttled);
	pricing_list_release(&l);
	harness_stop(&h);
}

/* A refused permission is not retried and says which IAM action is missing; another client
 * error is EINVAL with AWS's words. */
static void test_pricing__access_denied_names_the_action(void **state)
{
	_cleanup_free_ char *denied = fixture("access_denied.json");
	_cleanup_free_ char *invalid = fixture("invalid_parameter.json");
	struct stub_reply script[] = { { 400, denied, NULL }, { 400, invalid, NULL } };
	struct pricing_list l;
	struct err err = ERR_INIT;
	struct harness h;
	(void)state;

	long errors = calls_counted("error");

	harness_start(&h, script, ARRAY_SIZE(script), 0);
	assert_int_equal(pricing_ec2_on_demand(h.client, "us-east-1", NULL, 0, &l, &err), -EACCES);
	assert_int_equal(calls_counted("error"), errors + 1);
	assert_int_equal(stub_count(&h.aws.stub), 1);
	assert_non_null(strstr(err.msg, "AWS Price List GetProducts: AccessDeniedException: "));
	assert_non_null(strstr(err.msg, "need the IAM action pricing:GetProducts"));
	pricing_list_release(&l);
	assert_int_equal(pricing_ec2_on_demand(h.client, "us-east-1", NULL, 0, &l, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "InvalidParameterException: Input parameters are invalid"));
	assert_int_equal(stub_count(&h.aws.stub), 2);
	pricing_list_release(&l);
	harness_stop(&h);
}

/* An endpoint that answers the same NextToken forever is stopped; one that answers no Price
 * List fails with EPROTO naming the page. */
static void test_pricing__broken_endpoints_stopped(void **state)
{
	static const char loop[] = "{\"PriceList\":[],\"NextToken\":\"again\"}";
	struct stub_reply script[] = { { 200, loop, NULL } };
	struct stub_reply html[] = { { 200, "<html>captive portal</html>", NULL } };
	struct pricing_list l;
	struct err err = ERR_INIT;
	struct harness h;
	(void)state;

	harness_start(&h, script, 1, 0);
	assert_int_equal(pricing_ec2_on_demand(h.client, "us-east-1", NULL, 0, &l, &err), -EPROTO);
	assert_non_null(strstr(err.msg, "the same NextToken twice"));
	assert_int_equal(stub_count(&h.aws.stub), 2);
	pricing_list_release(&l);
	harness_stop(&h);
	harness_start(&h, html, 1, 0);
	assert_int_equal(pricing_ec2_on_demand(h.client, "us-east-1", NULL, 0, &l, &err), -EPROTO);
	assert_non_null(strstr(err.msg, "page 1: answer is not JSON"));
	pricing_list_release(&l);
	harness_stop(&h);
}

/* Configuration mistakes are named. */
static void test_pricing__config_checked(void **state)
{
	struct aws_creds cr = { "AKID", "secret", NULL, 0, "static" };
	struct aws_creds_provider *p = aws_creds_provider_new_static(&cr);
	struct pricing_client *c = NULL;
	struct err err = ERR_INIT;
	(void)state;

	assert_int_equal(pricing_client_new(&(struct pricing_config){ .creds = p }, &c, &err),
			 -EINVAL);
	assert_int_equal(pricing_client_new(&(struct pricing_config){ .region = "us-east-1",
								      .creds = p,
								      .endpoint = "ftp://x" },
					    &c, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "not an http:// or https:// URL"));
	assert_int_equal(
		pricing_client_new(&(struct pricing_config){ .region = "ap-east-1", .creds = p },
				   &c, &err),
		0);
	assert_string_equal(pricing_client_endpoint(c),
			    "https://api.pricing.ap-south-1.amazonaws.com/");
	pricing_client_free(c);
	aws_creds_provider_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pricing__page_prices_read),
		cmocka_unit_test(test_pricing__last_page_and_accumulation),
		cmocka_unit_test(test_pricing__malformed_answers_refused),
		cmocka_unit_test(test_pricing__hostile_products_bounded),
		cmocka_unit_test(test_pricing__default_endpoints),
		cmocka_unit_test(test_pricing__requests_and_pages),
		cmocka_unit_test(test_pricing__types_asked_one_by_one),
		cmocka_unit_test(test_pricing__throttling_retried),
		cmocka_unit_test(test_pricing__retries_exhausted),
		cmocka_unit_test(test_pricing__network_failure_counted_as_error),
		cmocka_unit_test(test_pricing__access_denied_names_the_action),
		cmocka_unit_test(test_pricing__broken_endpoints_stopped),
		cmocka_unit_test(test_pricing__config_checked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
