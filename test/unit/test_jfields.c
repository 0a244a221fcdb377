/*
 * Unit tests for common/jfields.c: a table of field descriptors reads a JSON mapping into a
 * struct. Each kind stores what it is given and refuses what it is not, with an error naming
 * the full path, what the value must be and what it is; bounds come from the table.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jfields.h"
#include "strvec.h"

struct shape {
	char *type;
	int count;
	bool spot;
};

struct pair {
	char *name;
	char *value;
};

struct limits {
	int64_t ceiling;
};

struct sample {
	char *name;
	char **args;
	size_t n_args;
	int port;
	int64_t big;
	uint64_t bytes;
	bool on;
	int flag;
	double price;
	int mode;
	struct limits limits;
	struct shape *shapes;
	size_t n_shapes;
	struct pair *labels;
	size_t n_labels;
	int custom_seen;
};

static const char *const modes[] = { "Always", "OnFailure", "Never", NULL };

static void shape_release(void *e)
{
	free(((struct shape *)e)->type);
}

static int read_twice(const json_t *v, void *dst, const char *path, struct err *err)
{
	if (!json_is_integer(v))
		return err_set(err, EINVAL, "%s: must be an integer to double", path);
	*(int *)dst = 2 * (int)json_integer_value(v);
	return 0;
}

/* No two shapes of one type. */
static int check_shapes(void *obj, const json_t *v, const char *path, struct err *err)
{
	const struct sample *s = obj;

	(void)v;
	for (size_t i = 1; i < s->n_shapes; i++)
		if (strcmp(s->shapes[i].type, s->shapes[0].type) == 0)
			return err_set(err, ENOTUNIQ, "%s[%zu]: the type of %s[0] again", path, i,
				       path);
	return 0;
}

static const struct jf_field shape_fields[] = {
	{ JF_STR("type", struct shape, type), .required = true, .min = 1, .max = 16 },
	{ JF_INT("count", struct shape, count, 0, 1000) },
	{ JF_BOOL("spot", struct shape, spot) },
	JF_END,
};
static const struct jf_table shape_table = { .fields = shape_fields,
					     .strict = true,
					     .example = "{type: t3.small, count: 2}",
					     .release = shape_release };

static const struct jf_field limit_fields[] = {
	{ JF_INT("ceiling", struct limits, ceiling, -5, INT64_MAX) },
	JF_END,
};
static const struct jf_table limit_table = { .fields = limit_fields, .null_absent = true };

static const struct jf_field sample_fields[] = {
	{ JF_STR("name", struct sample, name), .max = 8 },
	{ JF_STRV("args", struct sample, args, n_args, 3) },
	{ JF_INT("port", struct sample, port, 1, 65535), .hint = "(the agent's)" },
	{ JF_INT("big", struct sample, big, INT64_MIN, INT64_MAX) },
	{ JF_INT("bytes", struct sample, bytes, 0, INT64_MAX) },
	{ JF_BOOL("on", struct sample, on) },
	{ JF_BOOL("flag", struct sample, flag) },
	{ JF_DOUBLE("price", struct sample, price, 0, 1e6) },
	{ JF_ENUM("mode", struct sample, mode, modes) },
	{ JF_OBJECT("limits", offsetof(struct sample, limits), &limit_table) },
	{ JF_LIST("shapes", struct sample, shapes, n_shapes, struct shape, 3, &shape_table),
	  .check = check_shapes },
	{ JF_MAP("labels", struct sample, labels, n_labels, struct pair, name, value, 2) },
	{ JF_CUSTOM("twice", offsetof(struct sample, custom_seen), read_twice) },
	JF_END,
};
static const struct jf_table sample_table = { .fields = sample_fields, .strict = true };

static void sample_release(struct sample *s)
{
	free(s->name);
	strv_free(s->args);
	for (size_t i = 0; i < s->n_shapes; i++)
		shape_release(&s->shapes[i]);
	free(s->shapes);
	for (size_t i = 0; i < s->n_labels; i++) {
		free(s->labels[i].name);
		free(s->labels[i].value);
	}
	free(s->labels);
	memset(s, 0, sizeof(*s));
}

/* Reads text (JSON) by the sample table into s under the path "top"; returns jf_read's. */
static int read_text(const char *text, struct sample *s, struct err *err)
{
	json_error_t jerr;
	json_t *j = json_loads(text, JSON_ALLOW_NUL, &jerr);
	int ret;

	if (!j)
		fail_msg("bad test JSON %s: %s", text, jerr.text);
	ret = jf_read(&sample_table, j, "top", s, err);
	json_decref(j);
	return ret;
}

/* Every kind stores what it is given. */
static void test_jfields__every_kind_is_stored(void **state)
{
	struct sample s = { 0 };
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(
		read_text("{\"name\": \"web\", \"args\": [\"a\", \"b\"], \"port\": 8080,"
			  " \"big\": -9000000000, \"bytes\": 9000000000, \"on\": true,"
			  " \"flag\": true, \"price\": 0.5, \"mode\": \"Never\","
			  " \"limits\": {\"ceiling\": 7},"
			  " \"shapes\": [{\"type\": \"t3.small\", \"count\": 2, \"spot\": true},"
			  " {\"type\": \"c5.large\"}],"
			  " \"labels\": {\"app\": \"web\", \"tier\": \"\"}, \"twice\": 21}",
			  &s, &err),
		0);
	assert_string_equal(s.name, "web");
	assert_int_equal(s.n_args, 2);
	assert_string_equal(s.args[1], "b");
	assert_null(s.args[2]);
	assert_int_equal(s.port, 8080);
	assert_true(s.big == -9000000000LL);
	assert_true(s.bytes == 9000000000ULL);
	assert_true(s.on);
	assert_int_equal(s.flag, 1);
	assert_true(s.price == 0.5);
	assert_int_equal(s.mode, 2);
	assert_int_equal(s.limits.ceiling, 7);
	assert_int_equal(s.n_shapes, 2);
	assert_string_equal(s.shapes[0].type, "t3.small");
	assert_int_equal(s.shapes[0].count, 2);
	assert_true(s.shapes[0].spot);
	assert_string_equal(s.shapes[1].type, "c5.large");
	assert_int_equal(s.shapes[1].count, 0);
	assert_int_equal(s.n_labels, 2);
	assert_string_equal(s.labels[0].name, "app");
	assert_string_equal(s.labels[0].value, "web");
	assert_string_equal(s.labels[1].value, "");
	assert_int_equal(s.custom_seen, 42);
	sample_release(&s);
}

/* A second read replaces what the first stored (strings, lists, entries) and keeps what it
 * does not give; nothing leaks (the ASan build checks). */
static void test_jfields__a_second_read_replaces_and_keeps(void **state)
{
	struct sample s = { 0 };
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(read_text("{\"name\": \"a\", \"args\": [\"x\"], \"port\": 1,"
				   " \"shapes\": [{\"type\": \"t\"}], \"labels\": {\"k\": \"v\"}}",
				   &s, &err),
			 0);
	assert_int_equal(read_text("{\"name\": \"b\", \"args\": [], \"shapes\": [],"
				   " \"labels\": {\"k2\": \"v2\"}}",
				   &s, &err),
			 0);
	assert_string_equal(s.name, "b");
	assert_int_equal(s.n_args, 0);
	assert_non_null(s.args);
	assert_int_equal(s.port, 1);
	assert_int_equal(s.n_shapes, 0);
	assert_int_equal(s.n_labels, 1);
	assert_string_equal(s.labels[0].name, "k2");
	sample_release(&s);
}

/* What is absent is left alone; null is a value unless the table says it means absent. */
static void test_jfields__absent_and_null(void **state)
{
	struct sample s = { .port = 7443, .limits.ceiling = 3 };
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(read_text("{\"limits\": {\"ceiling\": null}}", &s, &err), 0);
	assert_int_equal(s.port, 7443);
	assert_int_equal(s.limits.ceiling, 3);
	assert_null(s.name);
	assert_true(read_text("{\"port\": null}", &s, &err) < 0);
	assert_string_equal(err.msg,
			    "top.port: must be an integer from 1 to 65535 (the agent's), not null");
	sample_release(&s);
}

/* Each refusal: the input, and the whole message it gives. */
static void test_jfields__every_error_names_the_path_and_what_to_give(void **state)
{
	static const struct {
		const char *text, *msg;
		int code;
	} cases[] = {
		{ "{\"name\": 5}",
		  "top.name: must be a string (quote numbers and booleans in YAML, e.g. \"8080\"), "
		  "not 5",
		  0 },
		{ "{\"name\": [1]}", "top.name: must be a string, not a list", 0 },
		{ "{\"name\": \"abcdefghi\"}", "top.name: 9 bytes, at most 8", 0 },
		{ "{\"name\": \"a\\u0000b\"}", "top.name: must not contain a NUL character", 0 },
		{ "{\"args\": \"x\"}", "top.args: must be a list of strings, not \"x\"", 0 },
		{ "{\"args\": [\"a\", true]}",
		  "top.args[1]: must be a string (quote numbers and booleans in YAML, e.g. "
		  "\"8080\"), not true",
		  0 },
		{ "{\"args\": [\"a\", \"b\", \"c\", \"d\"]}", "top.args: 4 entries, at most 3", 0 },
		{ "{\"port\": \"x\"}",
		  "top.port: must be an integer from 1 to 65535 (the agent's), not \"x\"", 0 },
		{ "{\"port\": 0}",
		  "top.port: must be an integer from 1 to 65535 (the agent's), not 0", 0 },
		{ "{\"port\": 1.5}",
		  "top.port: must be an integer from 1 to 65535 (the agent's), not 1.5", 0 },
		{ "{\"bytes\": -1}",
		  "top.bytes: must be an integer from 0 to 9223372036854775807, not -1", 0 },
		{ "{\"on\": 1}", "top.on: must be true or false, not 1", 0 },
		{ "{\"flag\": \"yes\"}", "top.flag: must be true or false, not \"yes\"", 0 },
		{ "{\"price\": -0.5}", "top.price: must be a number from 0 to 1e+06, not -0.5", 0 },
		{ "{\"price\": \"1\"}", "top.price: must be a number from 0 to 1e+06, not \"1\"",
		  0 },
		{ "{\"mode\": \"Sometimes\"}",
		  "top.mode: \"Sometimes\" is not one of Always, OnFailure, Never", 0 },
		{ "{\"mode\": 1}", "top.mode: must be one of Always, OnFailure, Never, not 1", 0 },
		{ "{\"limits\": 3}", "top.limits: must be a mapping, not 3", 0 },
		{ "{\"limits\": {\"ceiling\": -6}}",
		  "top.limits.ceiling: must be an integer from -5 to 9223372036854775807, not -6",
		  0 },
		{ "{\"shapes\": {}}",
		  "top.shapes: must be a list of mappings such as {type: t3.small, count: 2}, not "
		  "a "
		  "mapping",
		  0 },
		{ "{\"shapes\": [{\"type\": \"a\"}, 7]}",
		  "top.shapes[1]: must be a mapping such as {type: t3.small, count: 2}, not 7", 0 },
		{ "{\"shapes\": [{\"type\": \"a\"}, {\"type\": \"b\", \"count\": \"x\"}]}",
		  "top.shapes[1].count: must be an integer from 0 to 1000, not \"x\"", 0 },
		{ "{\"shapes\": [{\"count\": 1}]}", "top.shapes[0].type: required", 0 },
		{ "{\"shapes\": [{\"type\": \"\"}]}", "top.shapes[0].type: required (it is empty)",
		  0 },
		{ "{\"shapes\": [{\"type\": \"a\", \"Count\": 1}]}",
		  "top.shapes[0].Count: unknown key; did you mean count?", 0 },
		{ "{\"shapes\": [{\"type\": \"a\", \"number\": 1}]}",
		  "top.shapes[0].number: unknown key (known here: type, count, spot)", 0 },
		{ "{\"shapes\": [{\"type\": \"a\"}, {\"type\": \"b\"}, {\"type\": \"a\"}]}",
		  "top.shapes[2]: the type of top.shapes[0] again", ENOTUNIQ },
		{ "{\"shapes\": [{\"type\": \"a\"}, {\"type\": \"b\"}, {\"type\": \"c\"}, "
		  "{\"type\": \"d\"}]}",
		  "top.shapes: 4 entries, at most 3", 0 },
		{ "{\"labels\": [\"a\"]}",
		  "top.labels: must be a mapping of strings to strings, not a list", 0 },
		{ "{\"labels\": {\"a\": 1}}",
		  "top.labels.a: must be a string (quote numbers and booleans in YAML, e.g. "
		  "\"8080\"), not 1",
		  0 },
		{ "{\"labels\": {\"a\": \"1\", \"b\": \"2\", \"c\": \"3\"}}",
		  "top.labels: 3 entries, at most 2", 0 },
		{ "{\"twice\": \"x\"}", "top.twice: must be an integer to double", 0 },
		{ "{\"nmae\": \"x\"}",
		  "top.nmae: unknown key (known here: name, args, port, big, bytes, on, flag, "
		  "price, mode, limits, shapes, labels, twice)",
		  0 },
		{ "{\"name\": \"\\u0001long string with a control character in it, cut\"}",
		  "top.name: 48 bytes, at most 8", 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sample s = { 0 };
		struct err err = ERR_INIT;
		int code = cases[i].code ? cases[i].code : EINVAL;

		if (read_text(cases[i].text, &s, &err) != -code)
			fail_msg("%s: want -%d, got \"%s\" (%d)", cases[i].text, code, err.msg,
				 err.code);
		if (strcmp(err.msg, cases[i].msg) != 0)
			fail_msg("%s:\n got  %s\n want %s", cases[i].text, err.msg, cases[i].msg);
		sample_release(&s);
	}
}

/* A value quoted in an error is cut at 40 bytes, control characters shown as '?'. */
static void test_jfields__values_in_errors_are_cut_and_printable(void **state)
{
	json_t *v = json_string("\x01\x02 a very long value that goes on and on and on and on");
	char buf[64];

	(void)state;
	assert_string_equal(jf_value_text(v, buf),
			    "\"?? a very long value that goes on and on...\"");
	json_decref(v);
	assert_string_equal(jf_value_text(NULL, buf), "nothing");
}

/* The document itself must be a mapping; the root path is "" and keys stand alone. */
static void test_jfields__the_root(void **state)
{
	struct sample s = { 0 };
	struct err err = ERR_INIT;
	json_t *j = json_pack("[i]", 1);

	(void)state;
	assert_int_equal(jf_read(&sample_table, j, "", &s, &err), -EINVAL);
	assert_string_equal(err.msg, "the document: must be a mapping, not a list");
	json_decref(j);
	err_clear(&err);
	j = json_pack("{s:i}", "port", 0);
	assert_int_equal(jf_read(&sample_table, j, "", &s, &err), -EINVAL);
	assert_string_equal(err.msg,
			    "port: must be an integer from 1 to 65535 (the agent's), not 0");
	json_decref(j);
}

/* A path longer than the buffer is cut with "...", never overrun. */
static void test_jfields__long_paths_are_cut(void **state)
{
	char buf[16];

	(void)state;
	assert_string_equal(jf_join(buf, sizeof(buf), "spec", "containers"), "spec.containers");
	assert_string_equal(jf_join(buf, sizeof(buf), "spec.containers", "image"),
			    "spec.contain...");
	assert_string_equal(jf_index(buf, sizeof(buf), "spec.volumes", 12), "spec.volumes...");
	assert_string_equal(jf_join(buf, sizeof(buf), "", "image"), "image");
}

/* A table nested in itself stops at JF_DEPTH_MAX mappings deep. */
struct node {
	struct node *kids;
	size_t n_kids;
};

static void node_release(void *e)
{
	struct node *n = e;

	for (size_t i = 0; i < n->n_kids; i++)
		node_release(&n->kids[i]);
	free(n->kids);
}

static const struct jf_table node_table;
static const struct jf_field node_fields[] = {
	{ JF_LIST("kids", struct node, kids, n_kids, struct node, 2, &node_table) },
	JF_END,
};
static const struct jf_table node_table = { .fields = node_fields, .release = node_release };

static void test_jfields__nesting_is_bounded(void **state)
{
	struct node root = { 0 };
	struct err err = ERR_INIT;
	json_t *j = json_object();

	(void)state;
	for (int i = 0; i < JF_DEPTH_MAX + 2; i++)
		j = json_pack("{s:[o]}", "kids", j);
	assert_int_equal(jf_read(&node_table, j, "", &root, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "nested deeper than 16 mappings"));
	assert_non_null(strstr(err.msg, "kids[0].kids[0]"));
	node_release(&root);
	json_decref(j);
}

struct given {
	int64_t uid;
	bool has_uid;
	bool has_limits;
	struct limits limits;
};

static const struct jf_field given_fields[] = {
	{ JF_INT("uid", struct given, uid, 0, 100), JF_GIVEN(struct given, has_uid) },
	{ JF_OBJECT("limits", offsetof(struct given, limits), &limit_table),
	  JF_GIVEN(struct given, has_limits) },
	JF_END,
};
static const struct jf_table given_table = { .fields = given_fields, .null_absent = true };

/* A field's given flag says it was read: not when absent or null (in a table where null is
 * absent), nor when its value is refused; yes for 0 and for an empty mapping. */
static void test_jfields__given_flags_say_what_was_read(void **state)
{
	static const struct {
		const char *text;
		int ret;
		bool uid, limits;
	} cases[] = {
		{ "{}", 0, false, false },
		{ "{\"uid\": null, \"limits\": null}", 0, false, false },
		{ "{\"uid\": 0, \"limits\": {}}", 0, true, true },
		{ "{\"uid\": 101}", -EINVAL, false, false },
		{ "{\"uid\": 7, \"limits\": {\"ceiling\": -6}}", -EINVAL, true, false },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct given g = { 0 };
		struct err err = ERR_INIT;
		json_t *j = json_loads(cases[i].text, 0, NULL);

		assert_int_equal(jf_read(&given_table, j, "g", &g, &err), cases[i].ret);
		if (g.has_uid != cases[i].uid || g.has_limits != cases[i].limits)
			fail_msg("%s: has_uid %d, has_limits %d", cases[i].text, g.has_uid,
				 g.has_limits);
		json_decref(j);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jfields__every_kind_is_stored),
		cmocka_unit_test(test_jfields__a_second_read_replaces_and_keeps),
		cmocka_unit_test(test_jfields__absent_and_null),
		cmocka_unit_test(test_jfields__every_error_names_the_path_and_what_to_give),
		cmocka_unit_test(test_jfields__values_in_errors_are_cut_and_printable),
		cmocka_unit_test(test_jfields__the_root),
		cmocka_unit_test(test_jfields__long_paths_are_cut),
		cmocka_unit_test(test_jfields__nesting_is_bounded),
		cmocka_unit_test(test_jfields__given_flags_say_what_was_read),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
