/*
 * Unit tests for kiyot/awscreds: credentials from the environment, from shared files with
 * profiles (written into a temp dir), and from an IMDSv2 server on 127.0.0.1 that insists on
 * its session token; the provider's chain order, caching and refresh before expiry; the region.
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

#include "providers/ec2/awscreds.h"
#include "../fixtures/ec2/httpstub.h"
#include "clock.h"
#include "fsutil.h"
#include "xalloc.h"

static const char *const aws_env[] = {
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",	    "AWS_SESSION_TOKEN",
	"AWS_PROFILE",	     "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
	"AWS_REGION",	     "AWS_DEFAULT_REGION",	    "AWS_EC2_METADATA_SERVICE_ENDPOINT"
};

/* A temp dir with credentials and config files; a clean AWS environment; HOME elsewhere. */
struct fx {
	char dir[64];
	char *creds;
	char *config;
};

static const char creds_text[] = "# a comment\n"
				 "[default]\n"
				 "aws_access_key_id = AKIDDEFAULT\n"
				 "aws_secret_access_key=secret/default+1\n"
				 "\n"
				 "[work]\n"
				 "; another comment\n"
				 "AWS_ACCESS_KEY_ID = AKIDWORK\n"
				 "aws_secret_access_key = secret-work\n"
				 "aws_session_token = token-work\n"
				 "[half]\n"
				 "aws_access_key_id = AKIDHALF\n";

static const char config_text[] = "[default]\n"
				  "region = eu-central-1\n"
				  "[profile other]\n"
				  "region = ap-south-1\n"
				  "aws_access_key_id = AKIDOTHER\n"
				  "aws_secret_access_key = secret-other\n"
				  "s3 =\n"
				  "  region = nowhere-1\n"
				  "[work]\n"
				  "region = wrong-section-1\n";

static int fx_setup(void **state)
{
	struct fx *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;

	for (size_t i = 0; i < ARRAY_SIZE(aws_env); i++)
		unsetenv(aws_env[i]);
	snprintf(f->dir, sizeof(f->dir), "/tmp/kiyot-awscreds-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	setenv("HOME", f->dir, 1); /* so no real ~/.aws is read */
	f->creds = xasprintf("%s/credentials", f->dir);
	f->config = xasprintf("%s/config", f->dir);
	if (fs_write_file(f->creds, creds_text, strlen(creds_text), 0600, &err) < 0 ||
	    fs_write_file(f->config, config_text, strlen(config_text), 0600, &err) < 0)
		fail_msg("%s", err.msg);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;

	fs_remove_tree(f->dir, &err);
	free(f->creds);
	free(f->config);
	free(f);
	return 0;
}

/* Keys in the environment are used as they are, with the session token. */
static void test_awscreds__from_env(void **state)
{
	struct aws_creds c = { 0 };
	struct err err = ERR_INIT;
	(void)state;

	assert_int_equal(aws_creds_from_env(&c, &err), -ENOENT);
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	assert_int_equal(aws_creds_from_env(&c, &err), -ENOENT);
	setenv("AWS_SECRET_ACCESS_KEY", "secret-env", 1);
	setenv("AWS_SESSION_TOKEN", "token-env", 1);
	assert_int_equal(aws_creds_from_env(&c, &err), 0);
	assert_string_equal(c.access_key_id, "AKIDENV");
	assert_string_equal(c.secret_access_key, "secret-env");
	assert_string_equal(c.session_token, "token-env");
	assert_int_equal(c.expires_ns, 0);
	assert_string_equal(c.source, "env");
	aws_creds_release(&c);
}

/* Profiles of the credentials file, then of the config file ("profile <name>" sections). */
static void test_awscreds__shared_file_profiles(void **state)
{
	struct fx *f = *state;
	struct aws_creds c = { 0 };
	struct err err = ERR_INIT;

	assert_int_equal(aws_creds_from_shared_files(f->creds, f->config, NULL, &c, &err), 0);
	assert_string_equal(c.access_key_id, "AKIDDEFAULT");
	assert_string_equal(c.secret_access_key, "secret/default+1");
	assert_null(c.session_token);
	aws_creds_release(&c);

	assert_int_equal(aws_creds_from_shared_files(f->creds, f->config, "work", &c, &err), 0);
	assert_string_equal(c.access_key_id, "AKIDWORK");
	assert_string_equal(c.session_token, "token-work");
	assert_string_equal(c.source, "shared-file");
	aws_creds_release(&c);

	assert_int_equal(aws_creds_from_shared_files(f->creds, f->config, "other", &c, &err), 0);
	assert_string_equal(c.access_key_id, "AKIDOTHER");
	aws_creds_release(&c);

	assert_int_equal(aws_creds_from_shared_files(f->creds, f->config, "half", &c, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "[half]"));
	assert_non_null(strstr(err.msg, "set both"));
	assert_int_equal(aws_creds_from_shared_files(f->creds, f->config, "nope", &c, &err),
			 -ENOENT);
	assert_non_null(strstr(err.msg, "\"nope\""));
}

/* AWS_SHARED_CREDENTIALS_FILE is honoured; a missing default file is no error, a named one is. */
static void test_awscreds__shared_file_locations(void **state)
{
	struct fx *f = *state;
	struct aws_creds c = { 0 };
	struct err err = ERR_INIT;

	assert_int_equal(aws_creds_from_shared_files(NULL, NULL, NULL, &c, &err), -ENOENT);
	setenv("AWS_SHARED_CREDENTIALS_FILE", f->creds, 1);
	assert_int_equal(aws_creds_from_shared_files(NULL, NULL, "work", &c, &err), 0);
	assert_string_equal(c.access_key_id, "AKIDWORK");
	aws_creds_release(&c);
	assert_int_equal(aws_creds_from_shared_files("/nonexistent/creds", NULL, NULL, &c, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "/nonexistent/creds"));
}

/* The region: configured, AWS_REGION, AWS_DEFAULT_REGION, then the profile's in the config. */
static void test_awscreds__region_order(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;
	char *r = NULL;

	assert_int_equal(aws_region_resolve(NULL, f->config, NULL, &r, &err), 0);
	assert_string_equal(r, "eu-central-1");
	free(r);
	assert_int_equal(aws_region_resolve(NULL, f->config, "other", &r, &err), 0);
	assert_string_equal(r, "ap-south-1");
	free(r);
	assert_int_equal(aws_region_resolve(NULL, f->config, "work", &r, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "[profile work]"));
	setenv("AWS_DEFAULT_REGION", "us-west-1", 1);
	assert_int_equal(aws_region_resolve("", f->config, NULL, &r, &err), 0);
	assert_string_equal(r, "us-west-1");
	free(r);
	setenv("AWS_REGION", "us-west-2", 1);
	assert_int_equal(aws_region_resolve(NULL, f->config, NULL, &r, &err), 0);
	assert_string_equal(r, "us-west-2");
	free(r);
	assert_int_equal(aws_region_resolve("sa-east-1", f->config, NULL, &r, &err), 0);
	assert_string_equal(r, "sa-east-1");
	free(r);
}

/* What the fake metadata service hands out, and what it saw. */
struct imds {
	char expiration[32];
	char doc[512];
	int role_fetches;
	int refused;
	bool no_role;
};

/* An IMDSv2 service: a token from PUT, then only requests carrying that token. */
static void imds_handler(struct stub *s, const struct stub_request *rq, struct stub_reply *out)
{
	struct imds *m = s->ctx;
	char v[128];

	out->status = 404;
	out->body = "";
	if (strcmp(rq->path, "/latest/api/token") == 0) {
		if (strcmp(rq->method, "PUT") != 0) {
			out->status = 405;
		} else if (!stub_header(rq->headers, "X-aws-ec2-metadata-token-ttl-seconds", v,
					sizeof(v))) {
			out->status = 400;
		} else {
			out->status = 200;
			out->body = "imds-token-1";
		}
		return;
	}
	if (!stub_header(rq->headers, "X-aws-ec2-metadata-token", v, sizeof(v)) ||
	    strcmp(v, "imds-token-1") != 0) {
		m->refused++;
		out->status = 401;
		return;
	}
	if (strcmp(rq->path, "/latest/meta-data/iam/security-credentials/") == 0) {
		out->status = m->no_role ? 404 : 200;
		out->body = m->no_role ? "" : "cell-role\n";
	} else if (strcmp(rq->path, "/latest/meta-data/iam/security-credentials/cell-role") == 0) {
		m->role_fetches++;
		snprintf(m->doc, sizeof(m->doc),
			 "{\"Code\":\"Success\",\"LastUpdated\":\"2020-12-01T10:00:00Z\","
			 "\"Type\":\"AWS-HMAC\",\"AccessKeyId\":\"ASIAROLE%d\","
			 "\"SecretAccessKey\":\"secret-role\",\"Token\":\"token-role\","
			 "\"Expiration\":\"%s\"}",
			 m->role_fetches, m->expiration);
		out->status = 200;
		out->body = m->doc;
	}
}

/* Formats a wall-clock time offset from now as EC2's Expiration. */
static void expiration_in(char *out, size_t size, int64_t seconds)
{
	time_t t = (time_t)(clock_now_ns() / 1000000000 + seconds);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The role's temporary credentials, fetched with the IMDSv2 token on every request. */
static void test_awscreds__imds_role(void **state)
{
	struct imds m = { .role_fetches = 0 };
	struct stub s = { .handler = imds_handler, .ctx = &m };
	struct aws_creds c = { 0 };
	struct err err = ERR_INIT;
	char ep[64];
	(void)state;

	expiration_in(m.expiration, sizeof(m.expiration), 6 * 3600);
	assert_int_equal(stub_start(&s), 0);
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%d/", s.port);
	if (aws_creds_from_imds(ep, &c, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(c.access_key_id, "ASIAROLE1");
	assert_string_equal(c.secret_access_key, "secret-role");
	assert_string_equal(c.session_token, "token-role");
	assert_string_equal(c.source, "imds");
	assert_true(c.expires_ns > clock_now_ns() + (int64_t)5 * 3600 * 1000000000);
	aws_creds_release(&c);
	assert_int_equal(m.refused, 0);
	assert_int_equal(stub_count(&s), 3);
	assert_string_equal(s.reqs[0].method, "PUT");

	m.no_role = true;
	assert_int_equal(aws_creds_from_imds(ep, &c, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "no IAM role"));
	stub_stop(&s);
	stub_release(&s);
}

/* The provider walks env, file, then IMDS (found through the environment variable). */
static void test_awscreds__provider_chain(void **state)
{
	struct fx *f = *state;
	struct imds m = { .role_fetches = 0 };
	struct stub s = { .handler = imds_handler, .ctx = &m };
	struct aws_creds_config cfg = { .credentials_file = f->creds, .config_file = f->config };
	struct aws_creds_provider *p = NULL;
	struct aws_creds c = { 0 };
	struct err err = ERR_INIT;
	char ep[64];

	expiration_in(m.expiration, sizeof(m.expiration), 6 * 3600);
	assert_int_equal(stub_start(&s), 0);
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", s.port);
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", ep, 1);

	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "secret-env", 1);
	assert_int_equal(aws_creds_provider_new(&cfg, &p, &err), 0);
	assert_int_equal(aws_creds_provider_get(p, &c, &err), 0);
	assert_string_equal(c.access_key_id, "AKIDENV");
	aws_creds_release(&c);
	aws_creds_provider_free(p);

	unsetenv("AWS_ACCESS_KEY_ID");
	setenv("AWS_PROFILE", "work", 1);
	assert_int_equal(aws_creds_provider_new(&cfg, &p, &err), 0);
	assert_int_equal(aws_creds_provider_get(p, &c, &err), 0);
	assert_string_equal(c.access_key_id, "AKIDWORK");
	aws_creds_release(&c);
	aws_creds_provider_free(p);

	/* a profile named explicitly but absent is an error, not the instance role */
	setenv("AWS_PROFILE", "missing", 1);
	assert_int_equal(aws_creds_provider_new(&cfg, &p, &err), 0);
	assert_int_equal(aws_creds_provider_get(p, &c, &err), -ENOENT);
	aws_creds_provider_free(p);
	assert_int_equal(stub_count(&s), 0);

	unsetenv("AWS_PROFILE");
	cfg.credentials_file = NULL;
	cfg.config_file = NULL;
	assert_int_equal(aws_creds_provider_new(&cfg, &p, &err), 0);
	if (aws_creds_provider_get(p, &c, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(c.access_key_id, "ASIAROLE1");
	aws_creds_release(&c);
	aws_creds_provider_free(p);
	stub_stop(&s);
	stub_release(&s);
}

/* Role credentials are cached while fresh, and fetched again once near their Expiration. */
static void test_awscreds__provider_refreshes_before_expiry(void **state)
{
	struct imds m = { .role_fetches = 0 };
	struct stub s = { .handler = imds_handler, .ctx = &m };
	struct aws_creds_config cfg = { 0 };
	struct aws_creds_provider *p = NULL;
	struct aws_creds c = { 0 };
	struct err err = ERR_INIT;
	char ep[64];
	(void)state;

	assert_int_equal(stub_start(&s), 0);
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", s.port);
	cfg.imds_endpoint = ep;
	assert_int_equal(aws_creds_provider_new(&cfg, &p, &err), 0);

	expiration_in(m.expiration, sizeof(m.expiration), 6 * 3600);
	assert_int_equal(aws_creds_provider_get(p, &c, &err), 0);
	assert_string_equal(c.access_key_id, "ASIAROLE1");
	aws_creds_release(&c);
	assert_int_equal(aws_creds_provider_get(p, &c, &err), 0);
	assert_string_equal(c.access_key_id, "ASIAROLE1");
	aws_creds_release(&c);
	assert_int_equal(m.role_fetches, 1);

	/* the next credentials expire within the refresh margin: every get fetches again */
	aws_creds_provider_invalidate(p);
	expiration_in(m.expiration, sizeof(m.expiration), 60);
	assert_int_equal(aws_creds_provider_get(p, &c, &err), 0);
	assert_string_equal(c.access_key_id, "ASIAROLE2");
	aws_creds_release(&c);
	assert_int_equal(aws_creds_provider_get(p, &c, &err), 0);
	assert_string_equal(c.access_key_id, "ASIAROLE3");
	aws_creds_release(&c);

	/* the service gone: credentials that have not expired yet are still handed out */
	stub_stop(&s);
	assert_int_equal(aws_creds_provider_get(p, &c, &err), 0);
	assert_string_equal(c.access_key_id, "ASIAROLE3");
	aws_creds_release(&c);
	aws_creds_provider_free(p);
	stub_release(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_awscreds__from_env, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_awscreds__shared_file_profiles, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_awscreds__shared_file_locations, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_awscreds__region_order, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_awscreds__imds_role, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_awscreds__provider_chain, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_awscreds__provider_refreshes_before_expiry,
						fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
