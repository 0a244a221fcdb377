/*
 * Unit tests for cell-agent/agent_config.c: the bootstrap document's optional "prepull" list of
 * images is read as untrusted input: an array of at most AGENT_MAX_PREPULL non-empty printable
 * strings of at most AGENT_MAX_PREPULL_REF bytes; anything else is refused naming the entry.
 * Its optional "pulls" object sets how the cell's pulls are bounded, within registry.h's ranges.
 * Once the cell enrolled, the document on its disk loses its one-time enrollment secret.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "fsutil.h"
#include "xalloc.h"

#define HEAD                                                                                       \
	"{\"version\":1,\"cell_id\":\"c1\",\"pod\":{\"uid\":\"u\",\"name\":\"web\","               \
	"\"namespace\":\"default\"}"

/* Parses HEAD + extra + "}"; returns what agent_config_parse returned. */
static int parse(const char *extra, struct agent_config *c, struct err *err)
{
	_cleanup_free_ char *doc = xasprintf("%s%s}", HEAD, extra);

	return agent_config_parse(doc, strlen(doc), c, err);
}

static void test_agent_config__prepull_list_is_read(void **state)
{
	struct agent_config c;
	struct err err = ERR_INIT;

	(void)state;
	if (parse(",\"prepull\":[\"10.78.0.1:5000/hello:1\",\"busybox\"]", &c, &err) < 0)
		fail_msg("agent_config_parse: %s", err.msg);
	assert_int_equal(c.n_prepull, 2);
	assert_string_equal(c.prepull[0], "10.78.0.1:5000/hello:1");
	assert_string_equal(c.prepull[1], "busybox");
	assert_null(c.prepull[2]);
	agent_config_release(&c);
}

static void test_agent_config__no_prepull_is_an_empty_list(void **state)
{
	struct agent_config c;
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(parse("", &c, &err), 0);
	assert_int_equal(c.n_prepull, 0);
	agent_config_release(&c);
	assert_int_equal(parse(",\"prepull\":[]", &c, &err), 0);
	assert_int_equal(c.n_prepull, 0);
	agent_config_release(&c);
}

static void test_agent_config__too_many_prepull_images_are_refused(void **state)
{
	struct agent_config c;
	struct err err = ERR_INIT;
	char *list = xstrdup(",\"prepull\":[");

	(void)state;
	for (int i = 0; i <= AGENT_MAX_PREPULL; i++) {
		char *next = xasprintf("%s%s\"img%d:1\"", list, i ? "," : "", i);

		free(list);
		list = next;
	}
	{
		char *next = xasprintf("%s]", list);

		free(list);
		list = next;
	}
	assert_int_equal(parse(list, &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "prepull: 65 entries, at most 64"));
	free(list);
}

static void test_agent_config__wrong_prepull_types_are_refused(void **state)
{
	struct agent_config c;
	struct err err = ERR_INIT;
	char *long_ref = xmalloc(AGENT_MAX_PREPULL_REF + 2);
	char *doc;

	(void)state;
	assert_int_equal(parse(",\"prepull\":\"busybox\"", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "prepull: must be a list"));
	assert_int_equal(parse(",\"prepull\":[\"busybox\",7]", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "prepull[1]: must be a string"));
	assert_int_equal(parse(",\"prepull\":[\"busybox\",{\"image\":\"x\"}]", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "prepull[1]: must be a string"));
	assert_int_equal(parse(",\"prepull\":[\"\"]", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "prepull[0]: must be 1 to 512 bytes"));
	assert_int_equal(parse(",\"prepull\":[\"busy box\"]", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "prepull[0]: byte 4"));
	assert_int_equal(parse(",\"prepull\":[\"a\\nb\"]", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "prepull[0]: byte 1"));

	memset(long_ref, 'a', AGENT_MAX_PREPULL_REF + 1);
	long_ref[AGENT_MAX_PREPULL_REF + 1] = '\0';
	doc = xasprintf(",\"prepull\":[\"ok:1\",\"%s\"]", long_ref);
	assert_int_equal(parse(doc, &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "prepull[1]: 513 bytes, at most 512"));
	free(doc);
	long_ref[AGENT_MAX_PREPULL_REF] = '\0'; /* exactly the limit is fine */
	doc = xasprintf(",\"prepull\":[\"%s\"]", long_ref);
	assert_int_equal(parse(doc, &c, &err), 0);
	assert_int_equal(strlen(c.prepull[0]), AGENT_MAX_PREPULL_REF);
	agent_config_release(&c);
	free(doc);
	free(long_ref);
}

/* "pulls" sets the registry policy field by field; what it omits keeps the default. */
static void test_agent_config__pulls_policy_is_read(void **state)
{
	struct agent_config c;
	struct err err = ERR_INIT;
	struct reg_policy def;

	(void)state;
	reg_policy_default(&def);
	assert_int_equal(parse("", &c, &err), 0);
	assert_memory_equal(&c.pulls, &def, sizeof(def));
	agent_config_release(&c);
	assert_int_equal(parse(",\"pulls\":{\"min_bytes\":4096,\"window_s\":5,"
			       "\"max_transfers\":2,\"max_per_registry\":1}",
			       &c, &err),
			 0);
	assert_int_equal(c.pulls.min_bytes, 4096);
	assert_int_equal(c.pulls.window_s, 5);
	assert_int_equal(c.pulls.max_transfers, 2);
	assert_int_equal(c.pulls.max_per_registry, 1);
	assert_int_equal(c.pulls.deadline_base_s, def.deadline_base_s);
	assert_int_equal(c.pulls.deadline_rate, def.deadline_rate);
	agent_config_release(&c);
}

/* A "pulls" that is no object, or a field out of range, is refused naming it. */
static void test_agent_config__bad_pulls_policy_is_refused(void **state)
{
	struct agent_config c;
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(parse(",\"pulls\":7", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "pulls: must be a mapping"));
	assert_int_equal(parse(",\"pulls\":{\"window_s\":\"30\"}", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "pulls.window_s: must be an integer"));
	assert_int_equal(parse(",\"pulls\":{\"max_transfers\":0}", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "pulls: max_transfers"));
	assert_int_equal(parse(",\"pulls\":{\"max_transfers\":2,\"max_per_registry\":3}", &c, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "max_per_registry"));
}

/* An enrolled cell's bootstrap document loses its enrollment secret and keeps the rest (what
 * a restarted agent reads: its CA, its id); a document without one is left as it is. */
static void test_agent_config__enrolled_cell_drops_the_secret(void **state)
{
	char dir[] = "/tmp/agent-config-test-XXXXXX";
	_cleanup_free_ char *path = NULL, *text = NULL, *again = NULL;
	const char *secret = "5ec12e75ec12e75ec12e75ec12e75ec12e75ec12e75ec12e75ec12e75ec12e7";
	struct agent_config c;
	struct err err = ERR_INIT;
	struct stat st;

	(void)state;
	assert_non_null(mkdtemp(dir));
	path = xasprintf("%s/bootstrap.json", dir);
	text = xasprintf("%s,\"ca\":\"PEM\",\"enroll_secret\":\"%s\",\"agent_port\":7500}", HEAD,
			 secret);
	assert_int_equal(fs_write_file(path, text, strlen(text), 0644, &err), 0);
	free(text);
	text = NULL;
	if (agent_config_drop_secret(path, 1 << 20, &err) < 0)
		fail_msg("agent_config_drop_secret: %s", err.msg);
	assert_int_equal(fs_read_file(path, 1 << 20, &text, NULL, &err), 0);
	assert_null(strstr(text, secret));
	assert_null(strstr(text, "enroll_secret"));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	if (agent_config_parse(text, strlen(text), &c, &err) < 0)
		fail_msg("the document left: %s", err.msg);
	assert_string_equal(c.enroll_secret, "");
	assert_string_equal(c.ca, "PEM");
	assert_string_equal(c.cell_id, "c1");
	assert_int_equal(c.port, 7500);
	agent_config_release(&c);

	assert_int_equal(agent_config_drop_secret(path, 1 << 20, &err), 0);
	assert_int_equal(fs_read_file(path, 1 << 20, &again, NULL, &err), 0);
	assert_string_equal(again, text);
	unlink(path);
	assert_int_equal(agent_config_drop_secret(path, 1 << 20, &err), -ENOENT);
	assert_non_null(strstr(err.msg, path));
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agent_config__prepull_list_is_read),
		cmocka_unit_test(test_agent_config__no_prepull_is_an_empty_list),
		cmocka_unit_test(test_agent_config__too_many_prepull_images_are_refused),
		cmocka_unit_test(test_agent_config__wrong_prepull_types_are_refused),
		cmocka_unit_test(test_agent_config__pulls_policy_is_read),
		cmocka_unit_test(test_agent_config__bad_pulls_policy_is_refused),
		cmocka_unit_test(test_agent_config__enrolled_cell_drops_the_secret),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
