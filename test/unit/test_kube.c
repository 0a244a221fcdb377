/*
 * Unit tests for kiyot/kube: kubeconfig reading (current context, token or client certificate,
 * CA file or data, files relative to the kubeconfig), the in-cluster service account, and
 * requests against a local HTTP stub (bearer token sent, Status objects read, refused
 * connections reported). Files are written into a temp dir.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cells/cellsync.h"
#include "daemon/kiyot.h"
#include "kube/kube.h"
#include "../fixtures/ec2/httpstub.h"
#include "fsutil.h"
#include "xalloc.h"

struct fx {
	char dir[64];
};

static int fx_setup(void **state)
{
	struct fx *f = xcalloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/test-kube-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;

	fs_remove_tree(f->dir, &err);
	free(f);
	return 0;
}

/* Writes text to dir/name and returns the path (caller frees). */
static char *put(const struct fx *f, const char *name, const char *text)
{
	char *p = xasprintf("%s/%s", f->dir, name);
	struct err err = ERR_INIT;

	assert_int_equal(fs_write_file(p, text, strlen(text), 0600, &err), 0);
	return p;
}

/* "-----BEGIN TEST-----\n" in base64. */
#define PEM_B64 "LS0tLS1CRUdJTiBURVNULS0tLS0K"

static const char two_contexts[] = "apiVersion: v1\n"
				   "kind: Config\n"
				   "current-context: prod\n"
				   "clusters:\n"
				   "- name: dev\n"
				   "  cluster: {server: 'https://dev.example:6443'}\n"
				   "- name: prod\n"
				   "  cluster:\n"
				   "    server: https://10.0.0.1:6443/\n"
				   "    certificate-authority-data: " PEM_B64 "\n"
				   "users:\n"
				   "- name: dev-user\n"
				   "  user: {token: devtoken}\n"
				   "- name: admin\n"
				   "  user:\n"
				   "    token: s3cret\n"
				   "contexts:\n"
				   "- name: dev\n"
				   "  context: {cluster: dev, user: dev-user}\n"
				   "- name: prod\n"
				   "  context: {cluster: prod, user: admin}\n";

static void test_kube__kubeconfig_current_context_token_and_ca_data(void **state)
{
	struct fx *f = *state;
	_cleanup_free_ char *p = put(f, "config", two_contexts);
	struct kube_auth a = { 0 };
	struct err err = ERR_INIT;

	assert_int_equal(kube_auth_from_kubeconfig(p, &a, &err), 0);
	assert_string_equal(a.server, "https://10.0.0.1:6443");
	assert_string_equal(a.token, "s3cret");
	assert_non_null(a.ca_data);
	assert_int_equal(a.ca_len, strlen("-----BEGIN TEST-----\n"));
	assert_memory_equal(a.ca_data, "-----BEGIN TEST-----\n", a.ca_len);
	assert_null(a.ca_file);
	assert_null(a.cert_file);
	assert_false(a.insecure);
	kube_auth_release(&a);
}

static void test_kube__kubeconfig_client_cert_files_are_relative_to_it(void **state)
{
	struct fx *f = *state;
	_cleanup_free_ char *p = put(f, "kc",
				     "current-context: c\n"
				     "clusters: [{name: k, cluster: {server: 'https://k:443', "
				     "certificate-authority: ca.crt}}]\n"
				     "users: [{name: u, user: {client-certificate: certs/me.crt, "
				     "client-key: /abs/me.key}}]\n"
				     "contexts: [{name: c, context: {cluster: k, user: u}}]\n");
	_cleanup_free_ char *ca = xasprintf("%s/ca.crt", f->dir);
	_cleanup_free_ char *crt = xasprintf("%s/certs/me.crt", f->dir);
	struct kube_auth a = { 0 };
	struct err err = ERR_INIT;

	assert_int_equal(kube_auth_from_kubeconfig(p, &a, &err), 0);
	assert_string_equal(a.ca_file, ca);
	assert_string_equal(a.cert_file, crt);
	assert_string_equal(a.key_file, "/abs/me.key");
	assert_null(a.token);
	kube_auth_release(&a);
}

static void test_kube__kubeconfig_token_file(void **state)
{
	struct fx *f = *state;
	_cleanup_free_ char *t = put(f, "tok", "from-file\n");
	_cleanup_free_ char *p = put(f, "kc",
				     "current-context: c\n"
				     "clusters: [{name: k, cluster: {server: 'https://k', "
				     "insecure-skip-tls-verify: true}}]\n"
				     "users: [{name: u, user: {tokenFile: tok}}]\n"
				     "contexts: [{name: c, context: {cluster: k, user: u}}]\n");
	struct kube_auth a = { 0 };
	struct err err = ERR_INIT;

	assert_int_equal(kube_auth_from_kubeconfig(p, &a, &err), 0);
	assert_string_equal(a.token, "from-file");
	assert_true(a.insecure);
	kube_auth_release(&a);
}

static void test_kube__kubeconfig_errors_say_what_is_missing(void **state)
{
	struct fx *f = *state;
	_cleanup_free_ char *none = put(f, "none", "clusters: []\n");
	_cleanup_free_ char *undef = put(f, "undef", "current-context: gone\ncontexts: []\n");
	_cleanup_free_ char *bad = put(f, "bad",
				       "current-context: c\n"
				       "clusters: [{name: k, cluster: {server: 'https://k', "
				       "certificate-authority-data: 'not*base64'}}]\n"
				       "contexts: [{name: c, context: {cluster: k}}]\n");
	_cleanup_free_ char *missing = xasprintf("%s/nosuch", f->dir);
	struct kube_auth a = { 0 };
	struct err err = ERR_INIT;

	assert_int_equal(kube_auth_from_kubeconfig(none, &a, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "no current-context"));
	err_clear(&err);
	assert_int_equal(kube_auth_from_kubeconfig(undef, &a, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "context \"gone\" is not defined"));
	err_clear(&err);
	assert_int_equal(kube_auth_from_kubeconfig(bad, &a, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "certificate-authority-data"));
	err_clear(&err);
	assert_true(kube_auth_from_kubeconfig(missing, &a, &err) < 0);
	assert_non_null(strstr(err.msg, "nosuch"));
	assert_null(a.server);
}

static void test_kube__service_account(void **state)
{
	struct fx *f = *state;
	_cleanup_free_ char *t = put(f, "token", "sa-token\n");
	_cleanup_free_ char *c = put(f, "ca.crt", "-----BEGIN CERTIFICATE-----\n");
	struct kube_auth a = { 0 };
	struct err err = ERR_INIT;

	assert_int_equal(kube_auth_from_service_account(f->dir, "10.96.0.1", "443", &a, &err), 0);
	assert_string_equal(a.server, "https://10.96.0.1:443");
	assert_string_equal(a.token, "sa-token");
	assert_string_equal(a.ca_file, c);
	kube_auth_release(&a);
	assert_int_equal(kube_auth_from_service_account(f->dir, "fd00::1", "6443", &a, &err), 0);
	assert_string_equal(a.server, "https://[fd00::1]:6443");
	kube_auth_release(&a);
	assert_int_equal(kube_auth_from_service_account(f->dir, "", "443", &a, &err), -ENOENT);
}

static void test_kube__no_kubeconfig_and_not_in_cluster_is_enoent(void **state)
{
	struct kube_client *c = NULL;
	struct err err = ERR_INIT;

	(void)state;
	unsetenv("KUBERNETES_SERVICE_HOST");
	assert_int_equal(kube_client_new("", &c, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "KUBERNETES_SERVICE_HOST"));
	assert_null(c);
}

static void test_kube__request_sends_token_and_reads_status(void **state)
{
	static const struct stub_reply replies[] = {
		{ 404,
		  "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
		  "\"message\":\"cells.kiyot.elotl.co \\\"x\\\" not "
		  "found\",\"reason\":\"NotFound\","
		  "\"code\":404}",
		  "Content-Type: application/json\r\n" },
	};
	struct stub s = { .replies = replies, .n_replies = 1 };
	struct kube_auth a = { 0 };
	struct kube_client *c;
	struct err err = ERR_INIT;
	json_t *resp = NULL, *body = json_pack("{s:s}", "kind", "Cell");
	char hdr[128];
	long status = 0;

	(void)state;
	stub_start(&s);
	a.server = xasprintf("http://127.0.0.1:%d", s.port);
	a.token = xstrdup("tok-1");
	c = kube_client_from_auth(&a);
	assert_null(a.server);
	assert_int_equal(kube_request(c, "PUT", "/apis/kiyot.elotl.co/v1/cells/x", NULL, body,
				      &status, &resp, &err),
			 0);
	assert_int_equal(status, 404);
	assert_string_equal(kube_status_message(resp, "?"), "cells.kiyot.elotl.co \"x\" not found");
	stub_stop(&s);
	assert_int_equal(s.n_reqs, 1);
	assert_string_equal(s.reqs[0].method, "PUT");
	assert_string_equal(s.reqs[0].path, "/apis/kiyot.elotl.co/v1/cells/x");
	assert_true(stub_header(s.reqs[0].headers, "Authorization", hdr, sizeof(hdr)));
	assert_string_equal(hdr, "Bearer tok-1");
	assert_true(stub_header(s.reqs[0].headers, "Content-Type", hdr, sizeof(hdr)));
	assert_string_equal(hdr, "application/json");
	assert_string_equal(s.reqs[0].body, "{\"kind\":\"Cell\"}");
	assert_string_equal(kube_status_message(NULL, "fallback"), "fallback");
	json_decref(resp);
	json_decref(body);
	kube_client_free(c);
	stub_release(&s);
}

static void test_kube__request_to_a_closed_port_fails_with_the_server(void **state)
{
	struct stub s = { 0 };
	struct kube_auth a = { 0 };
	struct kube_client *c;
	struct err err = ERR_INIT;
	json_t *resp = NULL;
	long status = 0;
	int port;

	(void)state;
	stub_start(&s);
	port = s.port;
	stub_stop(&s);
	stub_release(&s);
	a.server = xasprintf("http://127.0.0.1:%d", port);
	c = kube_client_from_auth(&a);
	assert_int_equal(kube_request(c, "GET", "/api", NULL, NULL, &status, &resp, &err), -EIO);
	assert_non_null(strstr(err.msg, "127.0.0.1"));
	assert_null(resp);
	kube_client_free(c);
}

/* A provider whose one cell has an EC2-like instance id. */
static int fake_list(void *self, struct cell_info **out, size_t *n, struct err *err)
{
	struct cell_info *c = xcalloc(1, sizeof(*c));

	(void)self;
	(void)err;
	c->cell_id = xstrdup("cellone");
	c->instance_id = xstrdup("i-0abc");
	c->phase = CELL_RUNNING;
	*out = c;
	*n = 1;
	return 0;
}

static const struct provider_ops fake_ops = { .name = "fake", .list = fake_list };

static const char list_body[] =
	"{\"kind\":\"CellList\",\"metadata\":{\"resourceVersion\":\"9\"},\"items\":["
	"{\"metadata\":{\"name\":\"ghost\",\"resourceVersion\":\"3\"}},"
	"{\"metadata\":{\"name\":\"cellone\",\"resourceVersion\":\"5\",\"labels\":{\"x\":\"y\"}},"
	"\"spec\":{\"podName\":\"old\"},\"status\":{\"phase\":\"Pending\"}}]}";
static const char conflict_body[] = "{\"kind\":\"Status\",\"status\":\"Failure\","
				    "\"reason\":\"Conflict\",\"code\":409}";
static const char fresh_body[] = "{\"metadata\":{\"name\":\"cellone\",\"resourceVersion\":\"7\"},"
				 "\"spec\":{\"podName\":\"older\"}}";

/* A sandbox whose cell runs, in a kiyot with no catalog. */
static void fake_kiyot(struct kiyot *k, struct sandbox *sb, Runtime__V1__PodSandboxConfig *cfg,
		       Runtime__V1__PodSandboxMetadata *md)
{
	memset(k, 0, sizeof(*k));
	k->cluster_id = "clus1";
	k->provider.ops = &fake_ops;
	runtime__v1__pod_sandbox_config__init(cfg);
	runtime__v1__pod_sandbox_metadata__init(md);
	md->name = "web";
	md->namespace_ = "default";
	md->uid = "uid-1";
	cfg->metadata = md;
	memset(sb, 0, sizeof(*sb));
	sb->id = "cellone-sandbox";
	sb->config = cfg;
	sb->state = SANDBOX_READY;
	sb->cell_id = "cellone";
	sb->ip = "10.77.0.5";
	sb->instance_type = "t3a.nano";
	sb->sizing_reason = "cheapest fit";
	/* listed with a reference of the test's own: records_free leaves it (it is on the
	 * stack) */
	k->records = records_new(NULL);
	records_add_sandbox(k->records, sandbox_get(sb));
}

static void test_kube__cellsync_deletes_ghosts_and_rereads_on_conflict(void **state)
{
	const struct stub_reply replies[] = {
		{ 200, list_body, NULL },  { 200, "{}", NULL }, { 409, conflict_body, NULL },
		{ 200, fresh_body, NULL }, { 200, "{}", NULL },
	};
	struct stub s = { .replies = replies, .n_replies = 5 };
	struct kube_auth a = { 0 };
	struct kiyot k;
	struct sandbox sb;
	Runtime__V1__PodSandboxConfig cfg;
	Runtime__V1__PodSandboxMetadata md;
	struct cellsync *cs;
	json_t *put1, *put2;
	size_t n = 0;

	(void)state;
	fake_kiyot(&k, &sb, &cfg, &md);
	stub_start(&s);
	a.server = xasprintf("http://127.0.0.1:%d", s.port);
	cs = cellsync_start(&k, kube_client_from_auth(&a), "node-a");
	for (int i = 0; i < 3000 && n < 5; i++) {
		usleep(10000);
		pthread_mutex_lock(&s.lock);
		n = s.n_reqs;
		pthread_mutex_unlock(&s.lock);
	}
	cellsync_free(cs);
	stub_stop(&s);
	assert_int_equal(s.n_reqs, 5);
	assert_string_equal(s.reqs[0].method, "GET");
	assert_string_equal(
		s.reqs[0].path,
		"/apis/kiyot.elotl.co/v1/cells?labelSelector=kiyot.elotl.co%2Fcluster-id"
		"%3Dclus1%2Ckiyot.elotl.co%2Fnode%3Dnode-a");
	assert_string_equal(s.reqs[1].method, "DELETE");
	assert_string_equal(s.reqs[1].path, "/apis/kiyot.elotl.co/v1/cells/ghost");
	assert_string_equal(s.reqs[2].method, "PUT");
	assert_string_equal(s.reqs[3].method, "GET");
	assert_string_equal(s.reqs[3].path, "/apis/kiyot.elotl.co/v1/cells/cellone");
	assert_string_equal(s.reqs[4].method, "PUT");
	put1 = json_loads(s.reqs[2].body, 0, NULL);
	put2 = json_loads(s.reqs[4].body, 0, NULL);
	assert_non_null(put1);
	assert_non_null(put2);
	/* each update is based on the version it last read; labels of others are kept */
	assert_string_equal(json_string_value(json_object_get(json_object_get(put1, "metadata"),
							      "resourceVersion")),
			    "5");
	assert_string_equal(
		json_string_value(json_object_get(
			json_object_get(json_object_get(put1, "metadata"), "labels"), "x")),
		"y");
	assert_string_equal(json_string_value(json_object_get(json_object_get(put2, "metadata"),
							      "resourceVersion")),
			    "7");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(put2, "spec"), "podName")),
		"web");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(put2, "spec"), "instanceId")),
		"i-0abc");
	assert_string_equal(json_string_value(json_object_get(json_object_get(put2, "spec"), "ip")),
			    "10.77.0.5");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(put2, "status"), "phase")),
		"Running");
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(json_object_get(put2, "metadata"), "labels"),
				    "kiyot.elotl.co/cluster-id")),
			    "clus1");
	json_decref(put1);
	json_decref(put2);
	stub_release(&s);
	records_free(k.records);
}

static const char in_sync_body[] =
	"{\"kind\":\"CellList\",\"items\":[{\"metadata\":{\"name\":\"cellone\","
	"\"resourceVersion\":\"5\",\"labels\":{\"kiyot.elotl.co/cluster-id\":\"clus1\","
	"\"kiyot.elotl.co/node\":\"node-a\"}},\"spec\":{\"podName\":\"web\","
	"\"podNamespace\":\"default\",\"podUid\":\"uid-1\",\"node\":\"node-a\","
	"\"launchType\":\"on-demand\",\"instanceType\":\"t3a.nano\",\"instanceId\":\"i-0abc\","
	"\"ip\":\"10.77.0.5\"},\"status\":{\"phase\":\"Running\",\"pricePerHour\":0,"
	"\"sizingReason\":\"cheapest fit\"}}]}";

/* Waits (bounded) until the stub has seen n requests. */
static size_t wait_reqs(struct stub *s, size_t n)
{
	size_t got = 0;

	for (int i = 0; i < 3000 && got < n; i++) {
		usleep(10000);
		pthread_mutex_lock(&s->lock);
		got = s->n_reqs;
		pthread_mutex_unlock(&s->lock);
	}
	return got;
}

static void test_kube__cellsync_leaves_an_object_in_sync_alone(void **state)
{
	const struct stub_reply replies[] = { { 200, in_sync_body, NULL } };
	struct stub s = { .replies = replies, .n_replies = 1 };
	struct kube_auth a = { 0 };
	struct kiyot k;
	struct sandbox sb;
	Runtime__V1__PodSandboxConfig cfg;
	Runtime__V1__PodSandboxMetadata md;
	struct cellsync *cs;

	(void)state;
	fake_kiyot(&k, &sb, &cfg, &md);
	stub_start(&s);
	a.server = xasprintf("http://127.0.0.1:%d", s.port);
	cs = cellsync_start(&k, kube_client_from_auth(&a), "node-a");
	assert_true(wait_reqs(&s, 1) >= 1);
	cellsync_kick(cs); /* a second pass: its list comes next unless the first one wrote */
	assert_true(wait_reqs(&s, 2) >= 2);
	cellsync_free(cs);
	stub_stop(&s);
	/* the price the server gave back as 0 (not 0.0) counts as equal: no update */
	assert_string_equal(s.reqs[0].method, "GET");
	assert_string_equal(s.reqs[1].method, "GET");
	assert_non_null(strstr(s.reqs[1].path, "labelSelector="));
	stub_release(&s);
	records_free(k.records);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_kube__kubeconfig_current_context_token_and_ca_data, fx_setup,
			fx_teardown),
		cmocka_unit_test_setup_teardown(
			test_kube__kubeconfig_client_cert_files_are_relative_to_it, fx_setup,
			fx_teardown),
		cmocka_unit_test_setup_teardown(test_kube__kubeconfig_token_file, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_kube__kubeconfig_errors_say_what_is_missing,
						fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_kube__service_account, fx_setup, fx_teardown),
		cmocka_unit_test(test_kube__no_kubeconfig_and_not_in_cluster_is_enoent),
		cmocka_unit_test(test_kube__request_sends_token_and_reads_status),
		cmocka_unit_test(test_kube__request_to_a_closed_port_fails_with_the_server),
		cmocka_unit_test(test_kube__cellsync_deletes_ghosts_and_rereads_on_conflict),
		cmocka_unit_test(test_kube__cellsync_leaves_an_object_in_sync_alone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
