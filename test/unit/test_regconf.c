/*
 * Registry host configuration: parsing, endpoint order, plain-HTTP rules, errors.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "regconf.h"

/* Parses text as JSON and then as a regconf; returns regconf_from_json's result. */
static int parse(const char *text, struct regconf **rc, struct err *err)
{
	json_t *j = json_loads(text, 0, NULL);
	int ret;

	assert_non_null(j);
	ret = regconf_from_json(j, rc, err);
	json_decref(j);
	return ret;
}

static void test_regconf__mirrors_first_then_host(void **state)
{
	struct regconf *rc = NULL;
	struct err err = ERR_INIT;
	struct reg_endpoint *e = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(parse("{\"registry.k8s.io\": {\"mirrors\": [\"http://10.77.0.1:5000\", "
			       "\"https://mirror.example/cache/k8s/\"]}}",
			       &rc, &err),
			 0);
	assert_int_equal(regconf_endpoints(rc, "registry.k8s.io", &e, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(e[0].base_url, "http://10.77.0.1:5000");
	assert_string_equal(e[0].prefix, "");
	assert_true(e[0].is_mirror);
	assert_string_equal(e[1].base_url, "https://mirror.example");
	assert_string_equal(e[1].prefix, "/cache/k8s");
	assert_true(e[1].is_mirror);
	assert_string_equal(e[2].base_url, "https://registry.k8s.io");
	assert_false(e[2].is_mirror);
	reg_endpoints_free(e, n);
	regconf_free(rc);
}

static void test_regconf__insecure_host_uses_http(void **state)
{
	struct regconf *rc = NULL;
	struct err err = ERR_INIT;
	struct reg_endpoint *e = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(parse("{\"10.77.0.1:5000\": {\"insecure\": true},"
			       " \"quay.io\": {\"mirrors\": [\"10.77.0.1:5000\", \"m.example\"]}}",
			       &rc, &err),
			 0);
	assert_int_equal(regconf_endpoints(rc, "10.77.0.1:5000", &e, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(e[0].base_url, "http://10.77.0.1:5000");
	reg_endpoints_free(e, n);
	/* a mirror without a scheme: http only when its host is named insecure */
	assert_int_equal(regconf_endpoints(rc, "quay.io", &e, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(e[0].base_url, "http://10.77.0.1:5000");
	assert_string_equal(e[1].base_url, "https://m.example");
	assert_string_equal(e[2].base_url, "https://quay.io");
	reg_endpoints_free(e, n);
	regconf_free(rc);
}

static void test_regconf__unlisted_host_is_https_and_docker_io_is_mapped(void **state)
{
	struct err err = ERR_INIT;
	struct reg_endpoint *e = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(regconf_endpoints(NULL, "docker.io", &e, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(e[0].base_url, "https://registry-1.docker.io");
	reg_endpoints_free(e, n);
	assert_int_equal(regconf_endpoints(NULL, "ghcr.io", &e, &n, &err), 0);
	assert_string_equal(e[0].base_url, "https://ghcr.io");
	reg_endpoints_free(e, n);
}

static void test_regconf__docker_io_mirrors_apply(void **state)
{
	struct regconf *rc = NULL;
	struct err err = ERR_INIT;
	struct reg_endpoint *e = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(
		parse("{\"docker.io\": {\"mirrors\": [\"https://hub.local\"]}}", &rc, &err), 0);
	assert_int_equal(regconf_endpoints(rc, "docker.io", &e, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(e[0].base_url, "https://hub.local");
	assert_string_equal(e[1].base_url, "https://registry-1.docker.io");
	reg_endpoints_free(e, n);
	regconf_free(rc);
}

static void test_regconf__null_and_empty_are_empty_config(void **state)
{
	struct regconf *rc = NULL;
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(regconf_from_json(NULL, &rc, &err), 0);
	regconf_free(rc);
	assert_int_equal(parse("{}", &rc, &err), 0);
	regconf_free(rc);
}

/* Each malformed document is refused with a message naming what is wrong. */
static void test_regconf__malformed_entries_are_refused_naming_the_key(void **state)
{
	static const struct {
		const char *json;
		const char *msg;
	} cases[] = {
		{ "[]", "expected an object keyed by registry host" },
		{ "{\"r.example\": 3}", "r.example: expected an object" },
		{ "{\"r.example\": {\"mirrors\": \"http://x\"}}",
		  "r.example: mirrors: expected a list" },
		{ "{\"r.example\": {\"mirrors\": [7]}}", "r.example: mirrors[0]" },
		{ "{\"r.example\": {\"mirrors\": [\"ftp://x\"]}}", "only http:// and https://" },
		{ "{\"r.example\": {\"mirrors\": [\"https://\"]}}", "expected scheme://host" },
		{ "{\"r.example\": {\"mirrors\": [\"https://u:p@x\"]}}", "expected scheme://host" },
		{ "{\"r.example\": {\"insecure\": \"yes\"}}",
		  "r.example: insecure: expected true" },
		{ "{\"r.example\": {\"mirror\": []}}", "unknown field \"mirror\"" },
		{ "{\"bad host/x\": {}}", "not a registry host" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct regconf *rc = NULL;
		struct err err = ERR_INIT;

		assert_int_equal(parse(cases[i].json, &rc, &err), -EINVAL);
		assert_null(rc);
		if (!strstr(err.msg, cases[i].msg))
			fail_msg("case %zu: \"%s\" does not contain \"%s\"", i, err.msg,
				 cases[i].msg);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_regconf__mirrors_first_then_host),
		cmocka_unit_test(test_regconf__insecure_host_uses_http),
		cmocka_unit_test(test_regconf__unlisted_host_is_https_and_docker_io_is_mapped),
		cmocka_unit_test(test_regconf__docker_io_mirrors_apply),
		cmocka_unit_test(test_regconf__null_and_empty_are_empty_config),
		cmocka_unit_test(test_regconf__malformed_entries_are_refused_naming_the_key),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
