/* Unit tests for common/yaml: YAML and JSON text into jansson trees, with limits. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "yaml.h"
#include "buf.h"
#include "xalloc.h"

/* Parses text and returns the compact, key-sorted JSON form (caller frees), failing on error. */
static char *to_json_text(const char *text)
{
	struct err err = ERR_INIT;
	json_t *j = NULL;
	char *s;

	if (yaml_to_json(text, strlen(text), &j, &err) < 0)
		fail_msg("parse %s: %s", text, err.msg);
	s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	json_decref(j);
	return s;
}

struct ycase {
	const char *yaml;
	const char *json;
};

/* Scalars resolve as kubectl reads manifests: numbers, booleans and nulls only when unquoted. */
static void test_yaml__scalar_resolution_table(void **state)
{
	static const struct ycase cases[] = {
		{ "a: 1", "{\"a\":1}" },
		{ "a: -7", "{\"a\":-7}" },
		{ "a: +7", "{\"a\":7}" },
		{ "a: 0x1F", "{\"a\":31}" },
		{ "a: 0o17", "{\"a\":15}" },
		{ "a: 0644", "{\"a\":420}" },
		{ "a: 09", "{\"a\":9}" },
		{ "a: 0", "{\"a\":0}" },
		{ "a: 9223372036854775807", "{\"a\":9223372036854775807}" },
		{ "a: -9223372036854775808", "{\"a\":-9223372036854775808}" },
		{ "a: 9223372036854775808", "{\"a\":\"9223372036854775808\"}" },
		{ "a: 1.5", "{\"a\":1.5}" },
		{ "a: .5", "{\"a\":0.5}" },
		{ "a: -2e3", "{\"a\":-2000.0}" },
		{ "a: 1e3", "{\"a\":1000.0}" },
		{ "a: 1e999", "{\"a\":\"1e999\"}" },
		{ "a: .inf", "{\"a\":\".inf\"}" },
		{ "a: .nan", "{\"a\":\".nan\"}" },
		{ "a: true", "{\"a\":true}" },
		{ "a: False", "{\"a\":false}" },
		{ "a: TRUE", "{\"a\":true}" },
		{ "a: yes", "{\"a\":\"yes\"}" },
		{ "a: on", "{\"a\":\"on\"}" },
		{ "a: null", "{\"a\":null}" },
		{ "a: ~", "{\"a\":null}" },
		{ "a:", "{\"a\":null}" },
		{ "a: \"1\"", "{\"a\":\"1\"}" },
		{ "a: 'true'", "{\"a\":\"true\"}" },
		{ "a: \"null\"", "{\"a\":\"null\"}" },
		{ "a: !!str 12", "{\"a\":\"12\"}" },
		{ "a: !!int \"12\"", "{\"a\":12}" },
		{ "a: !!float 2", "{\"a\":2.0}" },
		{ "a: !!bool \"true\"", "{\"a\":true}" },
		{ "a: ! 12", "{\"a\":\"12\"}" },
		{ "a: 100m", "{\"a\":\"100m\"}" },
		{ "a: 128Mi", "{\"a\":\"128Mi\"}" },
		{ "a: 1.2.3", "{\"a\":\"1.2.3\"}" },
		{ "a: 12:30", "{\"a\":\"12:30\"}" },
		{ "a: 0x", "{\"a\":\"0x\"}" },
		{ "a: 1_000", "{\"a\":\"1_000\"}" },
		{ "1: x", "{\"1\":\"x\"}" },
		{ "a:\tb", "{\"a\":\"b\"}" },
		{ "\"\\0\"", "\"\\u0000\"" },
		{ "a: \"\\u00e9\\n\"", "{\"a\":\"\xc3\xa9\\n\"}" },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = to_json_text(cases[i].yaml);

		if (strcmp(got, cases[i].json) != 0)
			fail_msg("%s: got %s want %s", cases[i].yaml, got, cases[i].json);
		free(got);
	}
}

/* A typical manifest keeps its structure: nested maps, block and flow lists, literals. */
static void test_yaml__structure_of_a_manifest(void **state)
{
	char *got = to_json_text("apiVersion: v1\n"
				 "kind: Pod\n"
				 "metadata:\n"
				 "  name: web\n"
				 "  labels: {app: web, tier: \"1\"}\n"
				 "spec:\n"
				 "  containers:\n"
				 "  - name: c\n"
				 "    command: [sh, -c]\n"
				 "    args:\n"
				 "    - |\n"
				 "      echo hi\n"
				 "      sleep 1\n"
				 "    ports: []\n");
	(void)state;

	assert_string_equal(got, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"labels\":"
				 "{\"app\":\"web\",\"tier\":\"1\"},\"name\":\"web\"},\"spec\":{"
				 "\"containers\":[{\"args\":[\"echo hi\\nsleep 1\\n\"],\"command\":"
				 "[\"sh\",\"-c\"],\"name\":\"c\",\"ports\":[]}]}}");
	free(got);
}

/* JSON is YAML: a JSON document reads the same as jansson reads it. */
static void test_yaml__json_input_reads_like_jansson(void **state)
{
	static const char text[] = "{\"a\": [1, 2.5, \"x\", true, false, null, {\"b\": {}}],\n"
				   "\t\"c\": \"q\\\"uote\\u0041\", \"d\": -0.25e2}";
	json_error_t jerr;
	json_t *want = json_loads(text, 0, &jerr);
	struct err err = ERR_INIT;
	json_t *got = NULL;
	(void)state;

	assert_non_null(want);
	assert_int_equal(yaml_to_json(text, strlen(text), &got, &err), 0);
	assert_true(json_equal(got, want));
	json_decref(got);
	json_decref(want);
}

/* The shipped instance catalog (JSON, half a megabyte) reads through the YAML reader. */
static void test_yaml__reads_the_instance_catalog_file(void **state)
{
	struct err err = ERR_INIT;
	json_t *j = NULL;
	(void)state;

	if (yaml_file_to_json("kiyot/sizing/data/aws-instance-catalog.json", 0, &j, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(json_is_array(json_object_get(j, "us-east-1")));
	assert_int_equal(json_array_size(json_object_get(j, "us-east-1")), 1291);
	json_decref(j);
}

/* Anchors, aliases and merge keys expand; explicit keys win over merged ones. */
static void test_yaml__aliases_and_merge_keys_expand(void **state)
{
	char *got = to_json_text("base: &b {cpu: 1, mem: 2}\n"
				 "list: &l [x, y]\n"
				 "copy: *b\n"
				 "again: *l\n"
				 "merged:\n"
				 "  <<: *b\n"
				 "  cpu: 4\n");
	(void)state;

	assert_string_equal(got, "{\"again\":[\"x\",\"y\"],\"base\":{\"cpu\":1,\"mem\":2},"
				 "\"copy\":{\"cpu\":1,\"mem\":2},\"list\":[\"x\",\"y\"],"
				 "\"merged\":{\"cpu\":4,\"mem\":2}}");
	free(got);
}

/* Empty documents are skipped; the first document with content is the result. */
static void test_yaml__skips_empty_documents(void **state)
{
	char *got = to_json_text("---\n# nothing\n---\na: 1\n---\n");
	(void)state;

	assert_string_equal(got, "{\"a\":1}");
	free(got);
}

struct ybad {
	const char *yaml;
	int code;
	const char *msg;
};

/* Malformed or unsupported input fails with the position and what was wrong. */
static void test_yaml__errors_give_line_and_column(void **state)
{
	static const struct ybad cases[] = {
		{ "a: 1\n---\nb: 2\n", EINVAL,
		  "line 2, column 1: a second YAML document starts here; give one document per "
		  "file" },
		{ "", ENODATA, "no YAML document (the text is empty)" },
		{ "# only a comment\n", ENODATA, "no YAML document (the text is empty)" },
		{ "a: 1\na: 2\n", EINVAL, "line 2, column 1: duplicate key \"a\"" },
		{ "a: b: c\n", EINVAL,
		  "line 1, column 5: mapping values are not allowed in this context" },
		{ "a: [1, 2\n", EINVAL,
		  "line 2, column 1: did not find expected ',' or ']' while parsing a flow "
		  "sequence "
		  "(line 1, column 4)" },
		{ "{\"\\u0000\": 1}", EINVAL,
		  "line 1, column 2: mapping key contains a NUL character" },
		{ "a: *nope\n", EINVAL, "line 1, column 4: alias *nope names no earlier anchor" },
		{ "? [1]\n: x\n", EINVAL,
		  "line 1, column 3: mapping keys must be scalars (not lists, mappings or "
		  "aliases)" },
		{ "a: !custom x\n", EINVAL, "line 1, column 4: unsupported tag !custom" },
		{ "a: !!int abc\n", EINVAL, "line 1, column 4: \"abc\" is not a valid !!int" },
		{ "a: !!set {}\n", EINVAL,
		  "line 1, column 4: unsupported tag tag:yaml.org,2002:set on a mapping" },
		{ "a:\n  <<: 3\n", EINVAL,
		  "line 3, column 1: a merge key (<<) needs a mapping or a list of them" },
		{ "a: \"\xff\"\n", EINVAL,
		  "line 1, column 5: invalid leading UTF-8 octet (the text must be UTF-8)" },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct err err = ERR_INIT;
		json_t *j = NULL;
		int ret = yaml_to_json(cases[i].yaml, strlen(cases[i].yaml), &j, &err);

		if (ret >= 0)
			fail_msg("accepted %s", cases[i].yaml);
		assert_null(j);
		assert_int_equal(-ret, cases[i].code);
		if (strcmp(err.msg, cases[i].msg) != 0)
			fail_msg("%s: message %s", cases[i].yaml, err.msg);
	}
}

/* Builds a document nested n levels deep in flow lists. */
static char *nested(int n)
{
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;

	for (int i = 0; i < n; i++)
		buf_append(&b, "[", 1, &err);
	for (int i = 0; i < n; i++)
		buf_append(&b, "]", 1, &err);
	return buf_detach(&b, NULL);
}

/* 64 levels of nesting are fine, 65 are refused with the position of the 65th. */
static void test_yaml__depth_limit(void **state)
{
	struct err err = ERR_INIT;
	json_t *j = NULL;
	char *ok = nested(YAML_MAX_DEPTH), *bad = nested(YAML_MAX_DEPTH + 1);
	(void)state;

	assert_int_equal(yaml_to_json(ok, strlen(ok), &j, &err), 0);
	json_decref(j);
	j = NULL;
	assert_int_equal(yaml_to_json(bad, strlen(bad), &j, &err), -E2BIG);
	assert_string_equal(err.msg, "line 1, column 65: nesting deeper than 64 levels");
	assert_null(j);
	free(ok);
	free(bad);
}

/* An alias cannot smuggle a deep anchored value past the depth limit. */
static void test_yaml__alias_copies_respect_depth(void **state)
{
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;
	json_t *j = NULL;
	char *deep = nested(40);
	(void)state;

	buf_appendf(&b, &err,
		    "a: &d %s\nb: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[*d]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
		    deep);
	assert_int_equal(yaml_to_json(b.data, b.len, &j, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "alias *d nests its copy deeper than 64 levels"));
	buf_release(&b);
	free(deep);
}

/* The billion-laughs document fails on the node limit instead of expanding. */
static void test_yaml__billion_laughs_fails_fast(void **state)
{
	static const char text[] = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
				   "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
				   "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
				   "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
				   "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
				   "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
				   "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
				   "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
				   "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n";
	struct err err = ERR_INIT;
	json_t *j = NULL;
	(void)state;

	assert_int_equal(yaml_to_json(text, strlen(text), &j, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "more than 100000 values"));
	assert_null(j);
}

/* A flat list of 100001 values is over the node limit too. */
static void test_yaml__node_limit_counts_plain_values(void **state)
{
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;
	json_t *j = NULL;
	(void)state;

	buf_append(&b, "[", 1, &err);
	for (int i = 0; i < YAML_MAX_NODES; i++)
		buf_append(&b, "1,", 2, &err);
	buf_append(&b, "1]", 2, &err);
	assert_int_equal(yaml_to_json(b.data, b.len, &j, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "more than 100000 values"));
	buf_release(&b);
}

/* Texts over the size cap are refused before parsing; files are capped by their caller. */
static void test_yaml__size_limits(void **state)
{
	struct err err = ERR_INIT;
	json_t *j = NULL;
	char path[] = "/tmp/test_yaml_XXXXXX";
	int fd = mkstemp(path);
	FILE *f;
	(void)state;

	assert_int_equal(yaml_to_json("a: 1", (size_t)YAML_MAX_INPUT + 1, &j, &err), -EFBIG);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("name: this file is longer than sixteen bytes\n", f);
	fclose(f);
	assert_int_equal(yaml_file_to_json(path, 16, &j, &err), -EFBIG);
	assert_int_equal(yaml_file_to_json(path, 1024, &j, &err), 0);
	assert_string_equal(json_string_value(json_object_get(j, "name")),
			    "this file is longer than sixteen bytes");
	json_decref(j);
	unlink(path);
	assert_true(yaml_file_to_json(path, 1024, &j, &err) < 0);
	assert_non_null(strstr(err.msg, path));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_yaml__scalar_resolution_table),
		cmocka_unit_test(test_yaml__structure_of_a_manifest),
		cmocka_unit_test(test_yaml__json_input_reads_like_jansson),
		cmocka_unit_test(test_yaml__reads_the_instance_catalog_file),
		cmocka_unit_test(test_yaml__aliases_and_merge_keys_expand),
		cmocka_unit_test(test_yaml__skips_empty_documents),
		cmocka_unit_test(test_yaml__errors_give_line_and_column),
		cmocka_unit_test(test_yaml__depth_limit),
		cmocka_unit_test(test_yaml__alias_copies_respect_depth),
		cmocka_unit_test(test_yaml__billion_laughs_fails_fast),
		cmocka_unit_test(test_yaml__node_limit_counts_plain_values),
		cmocka_unit_test(test_yaml__size_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
