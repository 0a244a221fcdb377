/*
 * Unit tests for kiyot/ec2 and kiyot/ec2_xml: EC2's XML answers and error bodies (fixtures in
 * test/fixtures/ec2/), error classes, the requests the client sends, retries with an injected
 * sleep against an HTTP server on 127.0.0.1, pagination, and the tags of a cell.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cancel.h"
#include "providers/ec2/ec2.h"
#include "providers/ec2/ec2_xml.h"
#include "../fixtures/ec2/httpstub.h"
#include "buf.h"
#include "fsutil.h"
#include "metrics/metrics.h"
#include "xalloc.h"

#define FIX "test/fixtures/ec2/"

/* A fixture's text; the caller frees it. */
static char *fixture(const char *name, size_t *len)
{
	_cleanup_free_ char *path = xasprintf(FIX "%s", name);
	struct err err = ERR_INIT;
	size_t n = 0;
	char *text = NULL;

	if (fs_read_file(path, 1 << 20, &text, &n, &err) < 0)
		fail_msg("%s", err.msg);
	if (len)
		*len = n;
	return text;
}

/* The sleeps a client asked for. */
struct sleeps {
	int n;
	int64_t ns[64];
};

static void record_sleep(void *ctx, int64_t ns)
{
	struct sleeps *s = ctx;

	if (s->n < 64)
		s->ns[s->n] = ns;
	s->n++;
}

/* What the next harness_start gives its client besides the defaults. */
static long harness_timeout_ms;
static bool harness_real_sleep;
static const struct stub_pace *harness_paces;

/* A test client pointed at the stub's port, with static credentials. */
struct harness {
	struct stub stub;
	struct sleeps sleeps;
	struct aws_creds_provider *creds;
	struct ec2_client *client;
	char endpoint[64];
};

static void harness_start(struct harness *h, const struct stub_reply *replies, size_t n,
			  int max_attempts, const char *token)
{
	struct aws_creds cr = { "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
				(char *)token, 0, "static" };
	struct err err = ERR_INIT;
	struct ec2_config cfg = { 0 };

	memset(h, 0, sizeof(*h));
	h->stub.replies = replies;
	h->stub.n_replies = n;
	h->stub.paces = harness_paces;
	assert_int_equal(stub_start(&h->stub), 0);
	snprintf(h->endpoint, sizeof(h->endpoint), "http://127.0.0.1:%d/", h->stub.port);
	h->creds = aws_creds_provider_new_static(&cr);
	cfg.region = "us-east-1";
	cfg.endpoint = h->endpoint;
	cfg.creds = h->creds;
	cfg.max_attempts = max_attempts;
	cfg.timeout_ms = harness_timeout_ms;
	cfg.sleep = harness_real_sleep ? NULL : record_sleep;
	cfg.sleep_ctx = &h->sleeps;
	if (ec2_client_new(&cfg, &h->client, &err) < 0)
		fail_msg("%s", err.msg);
}

static void harness_stop(struct harness *h)
{
	stub_stop(&h->stub);
	ec2_client_free(h->client);
	aws_creds_provider_free(h->creds);
	stub_release(&h->stub);
}

/* True when the form body has exactly this key=value pair. */
static bool form_has(const char *body, const char *pair)
{
	size_t n = strlen(pair);

	for (const char *p = body; (p = strstr(p, pair)); p++)
		if ((p == body || p[-1] == '&') && (p[n] == '&' || p[n] == '\0'))
			return true;
	return false;
}

/* Every field kiyot reads from a RunInstances answer arrives, from the instance itself. */
static void test_ec2__run_instances_answer_parsed(void **state)
{
	_cleanup_free_ char *xml = NULL;
	struct ec2_instance in;
	struct err err = ERR_INIT;
	size_t len;
	(void)state;

	xml = fixture("run_instances.xml", &len);
	if (ec2_xml_run_instances(xml, len, &in, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(in.instance_id, "i-0123456789abcdef0");
	assert_string_equal(in.instance_type, "t3.nano");
	assert_string_equal(in.state, "pending");
	assert_int_equal(in.state_code, 0);
	assert_string_equal(in.private_ip, "10.1.2.3");
	assert_string_equal(in.client_token, "kiyot-6f1c2a4e-0000-4000-8000-000000000001");
	assert_string_equal(in.reservation_id, "r-0a1b2c3d4e5f60718");
	assert_string_equal(in.subnet_id, "subnet-0a1b2c3d");
	assert_true(in.spot);
	assert_int_equal(in.launch_ns, (int64_t)1606818030 * 1000000000);
	assert_int_equal(in.tags.n, 2);
	assert_string_equal(ec2_tags_get(&in.tags, "kiyot.elotl.co/cluster-id"), "c-1234");
	assert_string_equal(ec2_tags_get(&in.tags, "Name"), "kiyot-shop-web");
	ec2_instance_release(&in);
}

/* Two reservations flatten into one list; an instance's own IP wins over its interfaces'. */
static void test_ec2__describe_instances_page_parsed(void **state)
{
	_cleanup_free_ char *xml = NULL;
	_cleanup_free_ char *next = NULL;
	struct ec2_instance *arr = NULL;
	size_t len, n = 0, cap = 0;
	struct err err = ERR_INIT;
	(void)state;

	xml = fixture("describe_instances_page1.xml", &len);
	if (ec2_xml_describe_instances(xml, len, &arr, &n, &cap, &next, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(n, 3);
	assert_string_equal(next, "eyJwYWdlIjogMn0=");
	assert_string_equal(arr[0].instance_id, "i-000000000000000a1");
	assert_string_equal(arr[0].reservation_id, "r-0000000000000000a");
	assert_string_equal(arr[0].private_ip, "10.1.0.11");
	assert_string_equal(arr[0].state, "running");
	assert_int_equal(arr[0].state_code, 16);
	assert_false(arr[0].spot);
	assert_string_equal(ec2_tags_get(&arr[0].tags, "kiyot.elotl.co/pod-uid"), "uid-a");
	assert_string_equal(arr[1].state, "terminated");
	assert_null(arr[1].private_ip);
	assert_string_equal(arr[1].client_token, "");
	assert_string_equal(ec2_tags_get(&arr[1].tags, "empty"), "");
	assert_string_equal(arr[2].instance_id, "i-000000000000000b1");
	assert_string_equal(arr[2].reservation_id, "r-0000000000000000b");
	assert_true(arr[2].spot);
	assert_int_equal(arr[2].launch_ns, (int64_t)1606818060 * 1000000000 + 500000000);
	assert_int_equal(arr[2].tags.n, 0);
	ec2_instances_free(arr, n);
}

/* A last page has no token; an empty reservation set is no instance, not an error. */
static void test_ec2__describe_last_and_empty_pages(void **state)
{
	_cleanup_free_ char *xml = NULL;
	_cleanup_free_ char *empty = NULL;
	struct ec2_instance *arr = NULL;
	size_t len, elen, n = 0, cap = 0;
	char *next = NULL;
	struct err err = ERR_INIT;
	(void)state;

	xml = fixture("describe_instances_page2.xml", &len);
	empty = fixture("describe_instances_empty.xml", &elen);
	assert_int_equal(ec2_xml_describe_instances(xml, len, &arr, &n, &cap, &next, &err), 0);
	assert_int_equal(n, 1);
	assert_null(next);
	assert_int_equal(ec2_xml_describe_instances(empty, elen, &arr, &n, &cap, &next, &err), 0);
	assert_int_equal(n, 1);
	assert_null(next);
	ec2_instances_free(arr, n);
}

/* Instance types: vCPUs, memory, GPU count and burstability for the catalog refresh. */
static void test_ec2__instance_types_parsed(void **state)
{
	_cleanup_free_ char *xml = NULL;
	_cleanup_free_ char *next = NULL;
	struct ec2_type_info *arr = NULL;
	size_t len, n = 0, cap = 0;
	struct err err = ERR_INIT;
	(void)state;

	xml = fixture("instance_types_page1.xml", &len);
	if (ec2_xml_instance_types(xml, len, &arr, &n, &cap, &next, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(n, 2);
	assert_string_equal(next, "types-2");
	assert_string_equal(arr[0].name, "t3.nano");
	assert_int_equal(arr[0].vcpus, 2);
	assert_int_equal(arr[0].memory_mib, 512);
	assert_int_equal(arr[0].gpus, 0);
	assert_true(arr[0].burstable);
	assert_true(arr[0].current_generation);
	assert_string_equal(arr[1].name, "p3.8xlarge");
	assert_int_equal(arr[1].vcpus, 32);
	assert_int_equal(arr[1].memory_mib, 249856);
	assert_int_equal(arr[1].gpus, 4);
	assert_false(arr[1].burstable);
	ec2_type_infos_free(arr, n);
}

/* Each fixture error body's code, and the class callers act on. */
static void test_ec2__error_bodies_classified(void **state)
{
	static const struct {
		const char *file;
		int status;
		const char *code;
		enum ec2_errclass cls;
	} cases[] = {
		{ "error_capacity.xml", 500, "InsufficientInstanceCapacity", EC2_CAPACITY },
		{ "error_throttle.xml", 503, "RequestLimitExceeded", EC2_RETRY },
		{ "error_legacy.xml", 400, "Throttling", EC2_RETRY },
		{ "error_internal.xml", 500, "InternalError", EC2_RETRY },
		{ "error_notfound.xml", 400, "InvalidInstanceID.NotFound", EC2_NOT_FOUND },
		{ "error_auth.xml", 401, "AuthFailure", EC2_AUTH },
		{ "error_unauthorized.xml", 403, "UnauthorizedOperation", EC2_AUTH },
		{ "error_invalid.xml", 400, "InvalidParameterValue", EC2_INVALID },
		{ "error_unsupported.xml", 400, "Unsupported", EC2_CAPACITY },
		{ "error_combination.xml", 400, "InvalidParameterCombination", EC2_CAPACITY },
	};
	(void)state;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		_cleanup_free_ char *xml = NULL;
		_cleanup_free_ char *code = NULL;
		_cleanup_free_ char *msg = NULL;
		struct err err = ERR_INIT;
		size_t len;

		xml = fixture(cases[i].file, &len);
		if (ec2_xml_error(xml, len, &code, &msg, &err) < 0)
			fail_msg("%s: %s", cases[i].file, err.msg);
		assert_string_equal(code, cases[i].code);
		assert_non_null(msg);
		if (ec2_classify(cases[i].status, code, msg) != cases[i].cls)
			fail_msg("%s: class %s", cases[i].file,
				 ec2_errclass_name(ec2_classify(cases[i].status, code, msg)));
	}
}

/* Without an EC2 code the HTTP status decides; unrelated parameter clashes are no capacity. */
static void test_ec2__classify_by_status_and_message(void **state)
{
	(void)state;
	assert_int_equal(ec2_classify(503, NULL, NULL), EC2_RETRY);
	assert_int_equal(ec2_classify(500, "", NULL), EC2_RETRY);
	assert_int_equal(ec2_classify(0, NULL, NULL), EC2_RETRY);
	assert_int_equal(ec2_classify(403, NULL, NULL), EC2_AUTH);
	assert_int_equal(ec2_classify(400, NULL, NULL), EC2_INVALID);
	assert_int_equal(ec2_classify(400, "InvalidAMIID.NotFound", "x"), EC2_NOT_FOUND);
	/* limits of the account and full subnets: another type or subnet may do */
	assert_int_equal(ec2_classify(400, "InstanceLimitExceeded", "x"), EC2_CAPACITY);
	assert_int_equal(ec2_classify(400, "VcpuLimitExceeded", "x"), EC2_CAPACITY);
	assert_int_equal(ec2_classify(400, "InsufficientFreeAddressesInSubnet", "x"), EC2_CAPACITY);
	assert_int_equal(ec2_classify(400, "InvalidParameterCombination",
				      "Network interfaces and an instance-level security groups "
				      "may not be specified on the same request"),
			 EC2_INVALID);
	for (int k = EC2_OK; k <= EC2_INVALID; k++)
		assert_int_equal(ec2_errclass_of(ec2_errclass_errno(k)), k);
	assert_int_equal(ec2_errclass_errno(EC2_CAPACITY), ENOSPC);
	assert_int_equal(ec2_errclass_errno(EC2_RETRY), EAGAIN);
}

/* Broken, over-deep and entity-laden answers are refused or left unexpanded. */
static void test_ec2__hostile_xml_bounded(void **state)
{
	_cleanup_free_ char *xml = NULL;
	_cleanup_free_ char *code = NULL;
	_cleanup_free_ char *msg = NULL;
	struct buf deep = BUF_INIT;
	struct ec2_instance in;
	struct err err = ERR_INIT;
	size_t len;
	(void)state;

	assert_int_equal(ec2_xml_run_instances("<Run", 4, &in, &err), -EPROTO);
	for (int i = 0; i < 40; i++)
		buf_appendf(&deep, &err, "<RunInstancesResponse>");
	for (int i = 0; i < 40; i++)
		buf_appendf(&deep, &err, "</RunInstancesResponse>");
	assert_int_equal(ec2_xml_run_instances(buf_str(&deep), deep.len, &in, &err), -EPROTO);
	assert_non_null(strstr(err.msg, "deeper"));
	buf_release(&deep);
	assert_int_equal(ec2_xml_run_instances("<Other/>", 8, &in, &err), -EPROTO);
	assert_int_equal(ec2_xml_error("<Other/>", 8, &code, &msg, &err), -ENOENT);

	xml = fixture("error_entity.xml", &len);
	assert_int_equal(ec2_xml_error(xml, len, &code, &msg, &err), 0);
	assert_string_equal(code, "AuthFailure");
	assert_string_equal(msg, "xy");
}

/* 503 and RequestLimitExceeded are retried with jittered sleeps below the growing ceiling. */
static void test_ec2__throttling_retried_then_succeeds(void **state)
{
	_cleanup_free_ char *throttle = fixture("error_throttle.xml", NULL);
	_cleanup_free_ char *page = fixture("describe_instances_page2.xml", NULL);
	struct stub_reply script[] = { { 503, "", NULL },
				       { 503, throttle, NULL },
				       { 400, throttle, NULL },
				       { 200, page, NULL } };
	struct ec2_describe_query q = { 0 };
	struct ec2_instance *arr = NULL;
	enum ec2_errclass cls = EC2_INVALID;
	struct err err = ERR_INIT;
	struct harness h;
	size_t n = 0;
	(void)state;

	harness_start(&h, script, ARRAY_SIZE(script), 0, NULL);
	if (ec2_describe_instances(h.client, &q, &arr, &n, &cls, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(cls, EC2_OK);
	assert_int_equal(n, 1);
	assert_string_equal(arr[0].instance_id, "i-000000000000000c1");
	assert_int_equal(stub_count(&h.stub), 4);
	assert_int_equal(ec2_client_requests(h.client), 4);
	assert_int_equal(h.sleeps.n, 3);
	for (int i = 0; i < 3; i++) {
		assert_true(h.sleeps.ns[i] >= 0);
		assert_true(h.sleeps.ns[i] <= (int64_t)100000000 << i);
	}
	ec2_instances_free(arr, n);
	harness_stop(&h);
}

/* Throttling that never ends gives up after max_attempts with EAGAIN and says so. */
static void test_ec2__retries_exhausted(void **state)
{
	_cleanup_free_ char *throttle = fixture("error_throttle.xml", NULL);
	struct stub_reply script[] = { { 503, throttle, NULL } };
	const char *ids[] = { "i-0123456789abcdef0" };
	enum ec2_errclass cls = EC2_OK;
	struct err err = ERR_INIT;
	struct harness h;
	enum ec2_term out[1];
	(void)state;

	harness_start(&h, script, 1, 3, NULL);
	assert_int_equal(ec2_terminate_instances(h.client, ids, 1, out, &cls, &err), -EAGAIN);
	assert_int_equal(out[0], EC2_TERM_LEFT);
	assert_int_equal(cls, EC2_RETRY);
	assert_int_equal(err.code, EAGAIN);
	assert_int_equal(stub_count(&h.stub), 3);
	assert_int_equal(h.sleeps.n, 2);
	assert_non_null(strstr(err.msg, "RequestLimitExceeded: Request limit exceeded."));
	assert_non_null(strstr(err.msg, "gave up after 3 attempts"));
	harness_stop(&h);
}

/* A capacity error comes back at once, classified, so the caller tries the next type. */
static void test_ec2__capacity_error_not_retried(void **state)
{
	_cleanup_free_ char *cap = fixture("error_capacity.xml", NULL);
	struct stub_reply script[] = { { 500, cap, NULL } };
	struct ec2_run_spec spec = { .client_token = "kiyot-uid-1",
				     .image_id = "ami-0abcdef1234567890",
				     .instance_type = "t3.nano" };
	struct ec2_instance in;
	enum ec2_errclass cls = EC2_OK;
	struct err err = ERR_INIT;
	struct harness h;
	(void)state;

	harness_start(&h, script, 1, 0, NULL);
	assert_int_equal(ec2_run_instance(h.client, &spec, &in, &cls, &err), -ENOSPC);
	assert_int_equal(cls, EC2_CAPACITY);
	assert_int_equal(ec2_errclass_of(err.code), EC2_CAPACITY);
	assert_string_equal(err.msg,
			    "ec2 RunInstances: InsufficientInstanceCapacity: We currently do not "
			    "have sufficient t3.nano capacity in the Availability Zone you "
			    "requested (us-east-1a). Our system will be working on provisioning "
			    "additional capacity.");
	assert_int_equal(stub_count(&h.stub), 1);
	assert_int_equal(h.sleeps.n, 0);
	/* counted as a capacity outcome of RunInstances */
	{
		struct buf b = BUF_INIT;

		assert_int_equal(metrics_render(metrics_default(), &b, &err), 0);
		assert_non_null(strstr(buf_str(&b),
				       "kiyot_provider_calls_total{provider=\"ec2\","
				       "action=\"RunInstances\",outcome=\"capacity\"} "));
		buf_release(&b);
	}
	harness_stop(&h);
}

/* EC2 fails a whole TerminateInstances for one unknown id, naming the unknown ones: those are
 * gone, and the call is made again with the rest, whose answer lists what it terminated. */
static void test_ec2__terminate_drops_the_ids_named_unknown(void **state)
{
	static const char nf[] =
		"<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code><Message>The "
		"instance IDs 'i-0000000000000000b, i-0000000000000000c' do not exist</Message>"
		"</Error></Errors></Response>";
	static const char ok[] = "<TerminateInstancesResponse><instancesSet><item><instanceId>"
				 "i-0000000000000000a</instanceId></item></instancesSet>"
				 "</TerminateInstancesResponse>";
	struct stub_reply script[] = { { 400, nf, NULL }, { 200, ok, NULL } };
	const char *ids[] = { "i-0000000000000000a", "i-0000000000000000b", "i-0000000000000000c" };
	enum ec2_term out[3];
	enum ec2_errclass cls = EC2_INVALID;
	struct err err = ERR_INIT;
	struct harness h;
	(void)state;

	harness_start(&h, script, 2, 0, NULL);
	assert_int_equal(ec2_terminate_instances(h.client, ids, 3, out, &cls, &err), 0);
	assert_int_equal(cls, EC2_OK);
	assert_int_equal(out[0], EC2_TERM_DONE);
	assert_int_equal(out[1], EC2_TERM_GONE);
	assert_int_equal(out[2], EC2_TERM_GONE);
	assert_int_equal(stub_count(&h.stub), 2);
	assert_true(form_has(h.stub.reqs[0].body, "InstanceId.3=i-0000000000000000c"));
	assert_true(form_has(h.stub.reqs[1].body, "InstanceId.1=i-0000000000000000a"));
	assert_false(form_has(h.stub.reqs[1].body, "InstanceId.2=i-0000000000000000b"));
	harness_stop(&h);
}

/* Only InvalidInstanceID.NotFound says ids are gone: another *.NotFound code, a NotFound that
 * names none of the ids, and an answer that leaves an id out all leave the ids to the next
 * attempt and fail. */
static void test_ec2__terminate_other_failures_leave_the_ids(void **state)
{
	static const char other[] =
		"<Response><Errors><Error><Code>InvalidAttachment.NotFound</Code><Message>The "
		"attachment ID 'i-0000000000000000a' does not exist</Message></Error></Errors>"
		"</Response>";
	static const char nobody[] =
		"<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code><Message>The "
		"instance ID 'i-0000000000000000f' does not exist</Message></Error></Errors>"
		"</Response>";
	static const char partial[] =
		"<TerminateInstancesResponse><instancesSet><item><instanceId>i-0000000000000000a"
		"</instanceId></item></instancesSet></TerminateInstancesResponse>";
	const struct {
		int status;
		const char *body;
		int ret;
		enum ec2_term second;
	} cases[] = {
		{ 400, other, -ENOENT, EC2_TERM_LEFT },
		{ 400, nobody, -ENOENT, EC2_TERM_LEFT },
		{ 200, partial, -EAGAIN, EC2_TERM_LEFT },
	};
	const char *ids[] = { "i-0000000000000000a", "i-0000000000000000ab" };
	(void)state;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct stub_reply script[] = { { cases[i].status, cases[i].body, NULL } };
		enum ec2_term out[2];
		struct err err = ERR_INIT;
		struct harness h;

		harness_start(&h, script, 1, 1, NULL);
		assert_int_equal(ec2_terminate_instances(h.client, ids, 2, out, NULL, &err),
				 cases[i].ret);
		assert_int_equal(out[1], cases[i].second);
		assert_int_equal(out[0], i == 2 ? EC2_TERM_DONE : EC2_TERM_LEFT);
		assert_int_equal(stub_count(&h.stub), 1);
		assert_non_null(strstr(err.msg, "TerminateInstances"));
		harness_stop(&h);
	}
}

/* The ids a NotFound message names: whole words only, and only those asked. */
static void test_ec2__not_found_ids_parsed(void **state)
{
	const char *ids[] = { "i-1a", "i-1", "i-2b", "i-9" };
	enum ec2_term out[4] = { 0 };
	(void)state;

	assert_int_equal(ec2_not_found_ids("The instance IDs 'i-1, xi-9, i-2b, i-77' do not exist",
					   ids, 4, out),
			 2);
	assert_int_equal(out[0], EC2_TERM_LEFT);
	assert_int_equal(out[1], EC2_TERM_GONE);
	assert_int_equal(out[2], EC2_TERM_GONE);
	assert_int_equal(out[3], EC2_TERM_LEFT);
	assert_int_equal(ec2_not_found_ids(NULL, ids, 4, out), 0);
	assert_int_equal(ec2_not_found_ids("i-", ids, 4, out), 0);
}

/* A refused connection is a network error: retried, then EAGAIN. */
static void test_ec2__network_error_retried(void **state)
{
	struct stub_reply script[] = { { 200, "", NULL } };
	const char *ids[] = { "i-1" };
	enum ec2_errclass cls = EC2_OK;
	struct err err = ERR_INIT;
	struct harness h;
	enum ec2_term out[1];
	(void)state;

	harness_start(&h, script, 1, 2, NULL);
	stub_stop(&h.stub);
	assert_int_equal(ec2_terminate_instances(h.client, ids, 1, out, &cls, &err), -EAGAIN);
	assert_int_equal(cls, EC2_RETRY);
	assert_int_equal(h.sleeps.n, 1);
	assert_non_null(strstr(err.msg, "ec2 TerminateInstances"));
	ec2_client_free(h.client);
	aws_creds_provider_free(h.creds);
	stub_release(&h.stub);
}

/* A page that keeps coming is not cut by a fixed limit: the deadline grows with the items the
 * answer may hold (here 1000), far beyond the client's base time (300 ms). */
static void test_ec2__slow_page_is_not_cut(void **state)
{
	_cleanup_free_ char *page = fixture("describe_instances_page2.xml", NULL);
	struct stub_reply script[] = { { 200, page, NULL } };
	struct stub_pace pace[1] = { { 0, 0 } };
	struct ec2_describe_query q = { NULL, 0, NULL, 0, 1000 };
	struct ec2_instance *arr = NULL;
	struct err err = ERR_INIT;
	struct harness h;
	size_t n = 0;
	(void)state;

	/* a byte every 2 ms: longer than 300 ms for the whole page */
	pace[0].drip_ms = (int)(600 / strlen(page)) + 2;
	harness_timeout_ms = 300;
	harness_paces = pace;
	harness_start(&h, script, 1, 1, NULL);
	harness_timeout_ms = 0;
	harness_paces = NULL;
	if (ec2_describe_instances(h.client, &q, &arr, &n, NULL, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(n > 0);
	assert_int_equal(stub_count(&h.stub), 1);
	ec2_instances_free(arr, n);
	harness_stop(&h);
}

/* A call that timed out is tried again with twice the time: the first try's 1.1 s ends before
 * its answer (1.5 s), the second's 2.2 s do not. */
static void test_ec2__timed_out_call_retried_with_more_time(void **state)
{
	static const char ok[] = "<TerminateInstancesResponse><instancesSet><item><instanceId>i-1"
				 "</instanceId></item></instancesSet></TerminateInstancesResponse>";
	struct stub_reply script[] = { { 200, ok, NULL }, { 200, ok, NULL } };
	static const struct stub_pace pace[] = { { 1500, 0 }, { 1200, 0 } };
	const char *ids[] = { "i-1" };
	enum ec2_term out[1];
	struct err err = ERR_INIT;
	struct harness h;
	(void)state;

	harness_timeout_ms = 1000;
	harness_paces = pace;
	harness_start(&h, script, 2, 3, NULL);
	harness_timeout_ms = 0;
	harness_paces = NULL;
	if (ec2_terminate_instances(h.client, ids, 1, out, NULL, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(out[0], EC2_TERM_DONE);
	assert_int_equal(stub_count(&h.stub), 2);
	harness_stop(&h);
}

/* RequestLimitExceeded slows the client's one token bucket for every later call; successes
 * bring its rate back. */
static void test_ec2__throttling_slows_the_shared_bucket(void **state)
{
	_cleanup_free_ char *throttle = fixture("error_throttle.xml", NULL);
	static const char ok[] = "<TerminateInstancesResponse><instancesSet><item><instanceId>i-1"
				 "</instanceId></item></instancesSet></TerminateInstancesResponse>";
	struct stub_reply script[] = { { 503, throttle, NULL },
				       { 503, throttle, NULL },
				       { 200, ok, NULL } };
	const char *ids[] = { "i-1" };
	enum ec2_term out[1];
	struct err err = ERR_INIT;
	struct harness h;
	double full, after;
	(void)state;

	harness_start(&h, script, 3, 5, NULL);
	full = ec2_client_rate(h.client);
	assert_int_equal(ec2_terminate_instances(h.client, ids, 1, out, NULL, &err), 0);
	after = ec2_client_rate(h.client);
	assert_true(after < full / 2);
	for (int i = 0; i < 40; i++)
		assert_int_equal(ec2_terminate_instances(h.client, ids, 1, out, NULL, &err), 0);
	assert_true(ec2_client_rate(h.client) == full);
	harness_stop(&h);
}

static bool after_two_requests(void *ctx)
{
	return stub_count(ctx) >= 2;
}

/* A caller that gives up (cancel.h) ends a call between its tries at once, instead of after
 * every try and back-off. */
static void test_ec2__cancelled_caller_stops_retrying(void **state)
{
	_cleanup_free_ char *throttle = fixture("error_throttle.xml", NULL);
	struct stub_reply script[] = { { 503, throttle, NULL } };
	const char *ids[] = { "i-1" };
	enum ec2_term out[1];
	struct cancel_scope sc;
	struct err err = ERR_INIT;
	struct harness h;
	(void)state;

	harness_real_sleep = true;
	harness_start(&h, script, 1, 12, NULL);
	harness_real_sleep = false;
	cancel_scope_enter(&sc, after_two_requests, &h.stub);
	assert_int_equal(ec2_terminate_instances(h.client, ids, 1, out, NULL, &err), -ECANCELED);
	cancel_scope_leave(&sc);
	assert_int_equal(out[0], EC2_TERM_LEFT);
	assert_int_equal(stub_count(&h.stub), 2);
	assert_non_null(strstr(err.msg, "cancelled"));
	harness_stop(&h);
}

/* DescribeInstances follows NextToken, keeping the filters on every page. */
static void test_ec2__describe_follows_pages(void **state)
{
	_cleanup_free_ char *p1 = fixture("describe_instances_page1.xml", NULL);
	_cleanup_free_ char *p2 = fixture("describe_instances_page2.xml", NULL);
	struct stub_reply script[] = { { 200, p1, NULL }, { 200, p2, NULL } };
	const char *cluster[] = { "c-1234" };
	const char *states[] = { "pending", "running" };
	struct ec2_filter filters[] = { { "tag:kiyot.elotl.co/cluster-id", cluster, 1 },
					{ "instance-state-name", states, 2 } };
	struct ec2_describe_query q = { filters, 2, NULL, 0, 0 };
	struct ec2_instance *arr = NULL;
	struct err err = ERR_INIT;
	struct harness h;
	size_t n = 0;
	(void)state;

	harness_start(&h, script, 2, 0, NULL);
	if (ec2_describe_instances(h.client, &q, &arr, &n, NULL, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(n, 4);
	assert_string_equal(arr[3].instance_id, "i-000000000000000c1");
	assert_int_equal(stub_count(&h.stub), 2);
	for (int i = 0; i < 2; i++) {
		const char *b = h.stub.reqs[i].body;

		assert_true(form_has(b, "Action=DescribeInstances"));
		assert_true(form_has(b, "Version=2016-11-15"));
		assert_true(form_has(b, "Filter.1.Name=tag%3Akiyot.elotl.co%2Fcluster-id"));
		assert_true(form_has(b, "Filter.1.Value.1=c-1234"));
		assert_true(form_has(b, "Filter.2.Value.2=running"));
		assert_true(form_has(b, "MaxResults=1000"));
	}
	assert_null(strstr(h.stub.reqs[0].body, "NextToken"));
	assert_true(form_has(h.stub.reqs[1].body, "NextToken=eyJwYWdlIjogMn0%3D"));
	ec2_instances_free(arr, n);
	harness_stop(&h);
}

/* A server handing out the same token forever is stopped, not followed forever. */
static void test_ec2__repeated_token_stops(void **state)
{
	_cleanup_free_ char *p1 = fixture("describe_instances_page1.xml", NULL);
	struct stub_reply script[] = { { 200, p1, NULL } };
	struct ec2_describe_query q = { 0 };
	struct ec2_instance *arr = NULL;
	enum ec2_errclass cls = EC2_OK;
	struct err err = ERR_INIT;
	struct harness h;
	size_t n = 0;
	(void)state;

	harness_start(&h, script, 1, 0, NULL);
	assert_int_equal(ec2_describe_instances(h.client, &q, &arr, &n, &cls, &err), -EINVAL);
	assert_int_equal(cls, EC2_INVALID);
	assert_non_null(strstr(err.msg, "NextToken"));
	assert_int_equal(stub_count(&h.stub), 2);
	harness_stop(&h);
}

/* RunInstances carries every parameter of a cell launch, signed, with the session token. */
static void test_ec2__run_instances_request(void **state)
{
	_cleanup_free_ char *ok = fixture("run_instances.xml", NULL);
	struct stub_reply script[] = { { 200, ok, NULL } };
	const char *sgs[] = { "sg-1", "sg-2" };
	struct ec2_tags tags = EC2_TAGS_INIT;
	struct ec2_run_spec spec = { .client_token = "kiyot-uid-1",
				     .image_id = "ami-1",
				     .instance_type = "t3.nano",
				     .subnet_id = "subnet-1",
				     .security_group_ids = sgs,
				     .n_security_group_ids = 2,
				     .iam_instance_profile = "arn:aws:iam::1:instance-profile/cell",
				     .user_data = "{\"a\":1}",
				     .user_data_len = 7,
				     .tags = &tags,
				     .spot = true };
	struct ec2_instance in;
	struct err err = ERR_INIT;
	struct harness h;
	char v[512];
	const char *b;
	(void)state;

	ec2_tags_add(&tags, "kiyot.elotl.co/cluster-id", "c 1/2");
	ec2_tags_add(&tags, "Name", "kiyot-shop-web");
	harness_start(&h, script, 1, 0, "SESSIONTOKEN");
	if (ec2_run_instance(h.client, &spec, &in, NULL, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(in.instance_id, "i-0123456789abcdef0");
	b = h.stub.reqs[0].body;
	assert_string_equal(h.stub.reqs[0].method, "POST");
	assert_string_equal(h.stub.reqs[0].path, "/");
	assert_true(form_has(b, "Action=RunInstances"));
	assert_true(form_has(b, "ClientToken=kiyot-uid-1"));
	assert_true(form_has(b, "ImageId=ami-1"));
	assert_true(form_has(b, "InstanceType=t3.nano"));
	assert_true(form_has(b, "MinCount=1"));
	assert_true(form_has(b, "MaxCount=1"));
	assert_true(form_has(b, "SubnetId=subnet-1"));
	assert_true(form_has(b, "SecurityGroupId.2=sg-2"));
	assert_true(form_has(b, "IamInstanceProfile.Arn=arn%3Aaws%3Aiam%3A%3A1%3Ainstance-profile"
				"%2Fcell"));
	assert_true(form_has(b, "UserData=eyJhIjoxfQ%3D%3D"));
	assert_true(form_has(b, "TagSpecification.1.ResourceType=instance"));
	assert_true(form_has(b, "TagSpecification.1.Tag.1.Key=kiyot.elotl.co%2Fcluster-id"));
	assert_true(form_has(b, "TagSpecification.1.Tag.1.Value=c%201%2F2"));
	assert_true(form_has(b, "TagSpecification.1.Tag.2.Value=kiyot-shop-web"));
	assert_true(form_has(b, "InstanceMarketOptions.MarketType=spot"));
	assert_true(form_has(b, "InstanceMarketOptions.SpotOptions.SpotInstanceType=one-time"));
	assert_true(form_has(b, "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior="
				"terminate"));
	assert_true(form_has(b, "MetadataOptions.HttpTokens=required"));
	assert_true(form_has(b, "MetadataOptions.HttpPutResponseHopLimit=1"));
	assert_true(form_has(b, "MetadataOptions.HttpEndpoint=enabled"));
	assert_true(stub_header(h.stub.reqs[0].headers, "Authorization", v, sizeof(v)));
	assert_non_null(strstr(v, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"));
	assert_non_null(strstr(v, "/us-east-1/ec2/aws4_request"));
	assert_non_null(strstr(v, "x-amz-security-token"));
	assert_true(stub_header(h.stub.reqs[0].headers, "X-Amz-Security-Token", v, sizeof(v)));
	assert_string_equal(v, "SESSIONTOKEN");
	assert_true(stub_header(h.stub.reqs[0].headers, "X-Amz-Date", v, sizeof(v)));
	assert_int_equal(strlen(v), 16);
	ec2_instance_release(&in);
	ec2_tags_release(&tags);
	harness_stop(&h);
}

/* Bad launches are refused before anything is sent; a name profile goes as .Name. */
static void test_ec2__run_spec_checked(void **state)
{
	_cleanup_free_ char *ok = fixture("run_instances.xml", NULL);
	struct stub_reply script[] = { { 200, ok, NULL } };
	static char big[EC2_MAX_USER_DATA + 1];
	struct ec2_run_spec spec = { .client_token = "t",
				     .image_id = "ami-1",
				     .instance_type = "t3.nano",
				     .iam_instance_profile = "cell-role" };
	struct ec2_instance in;
	enum ec2_errclass cls = EC2_OK;
	struct err err = ERR_INIT;
	struct harness h;
	(void)state;

	harness_start(&h, script, 1, 0, NULL);
	spec.user_data = big;
	spec.user_data_len = sizeof(big);
	assert_int_equal(ec2_run_instance(h.client, &spec, &in, &cls, &err), -EINVAL);
	assert_int_equal(cls, EC2_INVALID);
	assert_non_null(strstr(err.msg, "16 KiB"));
	spec.user_data = NULL;
	spec.user_data_len = 0;
	spec.client_token = "";
	assert_int_equal(ec2_run_instance(h.client, &spec, &in, &cls, &err), -EINVAL);
	assert_int_equal(stub_count(&h.stub), 0);
	spec.client_token = "t";
	assert_int_equal(ec2_run_instance(h.client, &spec, &in, &cls, &err), 0);
	assert_true(form_has(h.stub.reqs[0].body, "IamInstanceProfile.Name=cell-role"));
	assert_null(strstr(h.stub.reqs[0].body, "InstanceMarketOptions"));
	assert_null(strstr(h.stub.reqs[0].body, "UserData"));
	ec2_instance_release(&in);
	harness_stop(&h);
}

/* CreateTags and TerminateInstances number their ids and tags from 1. */
static void test_ec2__tags_and_terminate_requests(void **state)
{
	static const char ok[] = "<TerminateInstancesResponse><instancesSet><item><instanceId>i-1"
				 "</instanceId></item><item><instanceId>i-2</instanceId></item>"
				 "</instancesSet></TerminateInstancesResponse>";
	struct stub_reply script[] = { { 200, ok, NULL } };
	const char *ids[] = { "i-1", "i-2" };
	enum ec2_term out[2];
	struct ec2_tags tags = EC2_TAGS_INIT;
	struct err err = ERR_INIT;
	struct harness h;
	(void)state;

	ec2_tags_add(&tags, "k", "v=&");
	harness_start(&h, script, 1, 0, NULL);
	assert_int_equal(ec2_create_tags(h.client, ids, 2, &tags, NULL, &err), 0);
	assert_int_equal(ec2_terminate_instances(h.client, ids, 2, out, NULL, &err), 0);
	assert_int_equal(out[1], EC2_TERM_DONE);
	assert_int_equal(ec2_terminate_instances(h.client, ids, 0, out, NULL, &err), -EINVAL);
	assert_true(form_has(h.stub.reqs[0].body, "Action=CreateTags"));
	assert_true(form_has(h.stub.reqs[0].body, "ResourceId.2=i-2"));
	assert_true(form_has(h.stub.reqs[0].body, "Tag.1.Key=k"));
	assert_true(form_has(h.stub.reqs[0].body, "Tag.1.Value=v%3D%26"));
	assert_true(form_has(h.stub.reqs[1].body, "Action=TerminateInstances"));
	assert_true(form_has(h.stub.reqs[1].body, "InstanceId.1=i-1"));
	assert_true(form_has(h.stub.reqs[1].body, "InstanceId.2=i-2"));
	assert_int_equal(stub_count(&h.stub), 2);
	ec2_tags_release(&tags);
	harness_stop(&h);
}

/* Instance types over two pages, and spot prices reduced to the latest per type. */
static void test_ec2__catalog_refresh_calls(void **state)
{
	_cleanup_free_ char *t1 = fixture("instance_types_page1.xml", NULL);
	_cleanup_free_ char *t2 = fixture("instance_types_page2.xml", NULL);
	_cleanup_free_ char *sp = fixture("spot_prices.xml", NULL);
	struct stub_reply script[] = { { 200, t1, NULL }, { 200, t2, NULL }, { 200, sp, NULL } };
	struct ec2_type_info *types = NULL;
	struct ec2_spot_price *prices = NULL;
	struct err err = ERR_INIT;
	struct harness h;
	size_t nt = 0, np = 0;
	(void)state;

	harness_start(&h, script, 3, 0, NULL);
	if (ec2_describe_instance_types(h.client, &types, &nt, NULL, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(nt, 3);
	assert_string_equal(types[2].name, "m4.large");
	assert_false(types[2].current_generation);
	assert_true(form_has(h.stub.reqs[1].body, "NextToken=types-2"));
	assert_true(form_has(h.stub.reqs[0].body, "MaxResults=100"));
	if (ec2_describe_spot_prices(h.client, NULL, 0, NULL, &prices, &np, NULL, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(form_has(h.stub.reqs[2].body, "ProductDescription.1=Linux%2FUNIX"));
	assert_non_null(strstr(h.stub.reqs[2].body, "StartTime="));
	assert_int_equal(np, 2);
	assert_string_equal(prices[0].instance_type, "c5.large");
	assert_true(prices[0].price > 0.0309 && prices[0].price < 0.0311);
	assert_string_equal(prices[0].availability_zone, "us-east-1c");
	assert_string_equal(prices[1].instance_type, "t3.nano");
	assert_true(prices[1].price > 0.00179 && prices[1].price < 0.00181);
	ec2_type_infos_free(types, nt);
	ec2_spot_prices_free(prices, np);
	harness_stop(&h);
}

/* kiyot's tags come first; labels lose Kubernetes' and AWS' keys and what breaks EC2's limits. */
static void test_ec2__pod_tags_filtered(void **state)
{
	const char *keys[] = { "app",
			       "kubernetes.io/name",
			       "io.kubernetes.pod.name",
			       "aws:cf",
			       "Name",
			       "kiyot.elotl.co/pod-uid",
			       "tier",
			       NULL };
	const char *vals[] = { "web", "x", "x", "x", "mine", "forged", "front", NULL };
	char longkey[EC2_MAX_TAG_KEY + 2], longval[EC2_MAX_TAG_VALUE + 2];
	struct ec2_pod_ident p = { "c-1234", "cell-1", "web", "shop", "uid-1",
				   keys,     vals,     8,     0,      NULL };
	struct ec2_tags t;
	struct err err = ERR_INIT;
	(void)state;

	memset(longkey, 'k', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = '\0';
	memset(longval, 'v', sizeof(longval) - 1);
	longval[sizeof(longval) - 1] = '\0';
	keys[7] = longkey;
	vals[7] = "x";
	if (ec2_pod_tags(&p, &t, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(t.items[0].key, EC2_TAG_CLUSTER_ID);
	assert_string_equal(t.items[0].value, "c-1234");
	assert_string_equal(ec2_tags_get(&t, EC2_TAG_CELL_ID), "cell-1");
	assert_string_equal(ec2_tags_get(&t, EC2_TAG_POD_NAME), "web");
	assert_string_equal(ec2_tags_get(&t, EC2_TAG_POD_NAMESPACE), "shop");
	assert_string_equal(ec2_tags_get(&t, EC2_TAG_POD_UID), "uid-1");
	assert_string_equal(ec2_tags_get(&t, "Name"), "kiyot-shop-web");
	assert_string_equal(ec2_tags_get(&t, "app"), "web");
	assert_string_equal(ec2_tags_get(&t, "tier"), "front");
	assert_null(ec2_tags_get(&t, "kubernetes.io/name"));
	assert_null(ec2_tags_get(&t, "io.kubernetes.pod.name"));
	assert_null(ec2_tags_get(&t, "aws:cf"));
	assert_null(ec2_tags_get(&t, longkey));
	assert_int_equal(t.n, 8);
	ec2_tags_release(&t);

	keys[7] = "long";
	vals[7] = longval;
	assert_int_equal(ec2_pod_tags(&p, &t, &err), 0);
	assert_null(ec2_tags_get(&t, "long"));
	assert_null(ec2_tags_get(&t, EC2_TAG_NODE));
	ec2_tags_release(&t);

	/* the node that launched it, right after the cluster */
	p.node = "node-a";
	assert_int_equal(ec2_pod_tags(&p, &t, &err), 0);
	assert_string_equal(t.items[1].key, EC2_TAG_NODE);
	assert_string_equal(t.items[1].value, "node-a");
	ec2_tags_release(&t);
	p.node = longval;
	assert_int_equal(ec2_pod_tags(&p, &t, &err), -EINVAL);
	p.node = NULL;

	p.cluster_id = NULL;
	assert_int_equal(ec2_pod_tags(&p, &t, &err), -EINVAL);
}

/* A standby cell's instance carries the cluster, its cell id and the standby mark, no pod;
 * it needs a cell id, not a pod uid. */
static void test_ec2__standby_tags(void **state)
{
	const char *keys[] = { "app" }, *vals[] = { "web" };
	struct ec2_pod_ident p = { "c-1234", "sb-0123", NULL, NULL, NULL, keys, vals, 1, 1, NULL };
	struct ec2_tags t;
	struct err err = ERR_INIT;
	(void)state;

	if (ec2_pod_tags(&p, &t, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(t.n, 4);
	assert_string_equal(ec2_tags_get(&t, EC2_TAG_CLUSTER_ID), "c-1234");
	assert_string_equal(ec2_tags_get(&t, EC2_TAG_CELL_ID), "sb-0123");
	assert_string_equal(ec2_tags_get(&t, EC2_TAG_STANDBY), "c-1234");
	assert_string_equal(ec2_tags_get(&t, "Name"), "kiyot-standby-sb-0123");
	assert_null(ec2_tags_get(&t, EC2_TAG_POD_UID));
	assert_null(ec2_tags_get(&t, "app"));
	ec2_tags_release(&t);
	p.node = "node-a";
	assert_int_equal(ec2_pod_tags(&p, &t, &err), 0);
	assert_int_equal(t.n, 5);
	assert_string_equal(ec2_tags_get(&t, EC2_TAG_NODE), "node-a");
	ec2_tags_release(&t);
	p.cell_id = "";
	assert_int_equal(ec2_pod_tags(&p, &t, &err), -EINVAL);
	p.standby = 0;
	p.cell_id = "sb-0123";
	assert_int_equal(ec2_pod_tags(&p, &t, &err), -EINVAL); /* a pod's needs its uid */
}

/* Past 50 tags, labels are dropped (in key order) and kiyot's own always stay. */
static void test_ec2__pod_tags_limit(void **state)
{
	char *keys[80], *vals[80];
	char longname[300];
	struct ec2_pod_ident p = { "c-1",
				   NULL,
				   longname,
				   "ns",
				   "uid-1",
				   (const char *const *)keys,
				   (const char *const *)vals,
				   80,
				   0,
				   NULL };
	struct ec2_tags t;
	struct err err = ERR_INIT;
	(void)state;

	memset(longname, 'p', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	for (int i = 0; i < 80; i++) {
		keys[i] = xasprintf("label-%02d", 79 - i);
		vals[i] = xasprintf("%d", i);
	}
	assert_int_equal(ec2_pod_tags(&p, &t, &err), 0);
	assert_int_equal(t.n, EC2_MAX_TAGS);
	assert_string_equal(ec2_tags_get(&t, EC2_TAG_CLUSTER_ID), "c-1");
	assert_string_equal(ec2_tags_get(&t, EC2_TAG_POD_UID), "uid-1");
	assert_int_equal(strlen(ec2_tags_get(&t, "Name")), EC2_MAX_TAG_VALUE);
	assert_int_equal(strlen(ec2_tags_get(&t, EC2_TAG_POD_NAME)), EC2_MAX_TAG_VALUE);
	assert_non_null(ec2_tags_get(&t, "label-00"));
	assert_null(ec2_tags_get(&t, "label-79"));
	for (size_t i = 0; i < t.n; i++) {
		assert_true(strlen(t.items[i].key) <= EC2_MAX_TAG_KEY);
		assert_true(strlen(t.items[i].value) <= EC2_MAX_TAG_VALUE);
	}
	ec2_tags_release(&t);
	for (int i = 0; i < 80; i++) {
		free(keys[i]);
		free(vals[i]);
	}
}

/* The endpoint defaults to the region's and must be an http(s) URL. */
static void test_ec2__endpoint_config(void **state)
{
	struct aws_creds cr = { "A", "S", NULL, 0, "static" };
	struct aws_creds_provider *prov = aws_creds_provider_new_static(&cr);
	struct ec2_config cfg = { .region = "eu-west-3", .creds = prov };
	struct ec2_client *c = NULL;
	struct err err = ERR_INIT;
	(void)state;

	assert_int_equal(ec2_client_new(&cfg, &c, &err), 0);
	assert_string_equal(ec2_client_endpoint(c), "https://ec2.eu-west-3.amazonaws.com/");
	ec2_client_free(c);
	cfg.endpoint = "ftp://x/";
	assert_int_equal(ec2_client_new(&cfg, &c, &err), -EINVAL);
	cfg.endpoint = NULL;
	cfg.region = NULL;
	assert_int_equal(ec2_client_new(&cfg, &c, &err), -EINVAL);
	aws_creds_provider_free(prov);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ec2__run_instances_answer_parsed),
		cmocka_unit_test(test_ec2__describe_instances_page_parsed),
		cmocka_unit_test(test_ec2__describe_last_and_empty_pages),
		cmocka_unit_test(test_ec2__instance_types_parsed),
		cmocka_unit_test(test_ec2__error_bodies_classified),
		cmocka_unit_test(test_ec2__classify_by_status_and_message),
		cmocka_unit_test(test_ec2__hostile_xml_bounded),
		cmocka_unit_test(test_ec2__throttling_retried_then_succeeds),
		cmocka_unit_test(test_ec2__retries_exhausted),
		cmocka_unit_test(test_ec2__capacity_error_not_retried),
		cmocka_unit_test(test_ec2__terminate_drops_the_ids_named_unknown),
		cmocka_unit_test(test_ec2__terminate_other_failures_leave_the_ids),
		cmocka_unit_test(test_ec2__not_found_ids_parsed),
		cmocka_unit_test(test_ec2__network_error_retried),
		cmocka_unit_test(test_ec2__slow_page_is_not_cut),
		cmocka_unit_test(test_ec2__timed_out_call_retried_with_more_time),
		cmocka_unit_test(test_ec2__throttling_slows_the_shared_bucket),
		cmocka_unit_test(test_ec2__cancelled_caller_stops_retrying),
		cmocka_unit_test(test_ec2__describe_follows_pages),
		cmocka_unit_test(test_ec2__repeated_token_stops),
		cmocka_unit_test(test_ec2__run_instances_request),
		cmocka_unit_test(test_ec2__run_spec_checked),
		cmocka_unit_test(test_ec2__tags_and_terminate_requests),
		cmocka_unit_test(test_ec2__catalog_refresh_calls),
		cmocka_unit_test(test_ec2__pod_tags_filtered),
		cmocka_unit_test(test_ec2__pod_tags_limit),
		cmocka_unit_test(test_ec2__standby_tags),
		cmocka_unit_test(test_ec2__endpoint_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
