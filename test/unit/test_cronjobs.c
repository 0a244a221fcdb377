/*
 * Unit tests for kiyot/kube/cronjobs: which CronJobs of a list the warm pool foresees, how
 * many pods a run starts, and the Pod object their template makes.
 */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kube/cronjobs.h"
#include "kube/podobject.h"

#define KEY "kubernetes.io/target-runtime"

/* A CronJob item: spec fields (JSON text, may be "") and the job spec's counts (JSON text). */
static json_t *item(const char *name, const char *spec_extra, const char *counts,
		    const char *annotations)
{
	char text[2048];
	json_error_t je;
	json_t *j;

	snprintf(text, sizeof(text),
		 "{\"metadata\": {\"name\": \"%s\", \"namespace\": \"batch\", "
		 "\"resourceVersion\": \"7\"},"
		 " \"spec\": {\"schedule\": \"*/15 * * * *\"%s, \"jobTemplate\": {\"spec\": {%s%s"
		 " \"template\": {\"metadata\": {\"labels\": {\"app\": \"%s\"}, \"annotations\": "
		 "%s}, \"spec\": {\"restartPolicy\": \"Never\", \"containers\": [{\"name\": \"c\","
		 " \"image\": \"busybox\", \"resources\": {\"requests\": {\"cpu\": \"1500m\", "
		 "\"memory\": \"1Gi\"}}}]}}}}}}",
		 name, spec_extra, counts, counts[0] ? "," : "", name, annotations);
	j = json_loads(text, 0, &je);
	if (!j)
		fail_msg("%s: %s", text, je.text);
	return j;
}

static const char kiyot_ann[] = "{\"" KEY "\": \"kiyot\"}";

/* Only the CronJobs whose pods kiyot runs and that are not suspended are taken; a run starts
 * min(parallelism, completions) pods, 1 by default; parallelism 0 starts none. */
static void test_cronjobs__which_are_taken_and_their_pods(void **state)
{
	json_t *list = json_object(), *items = json_array();
	struct cronjob *v;
	size_t n;
	struct err err = ERR_INIT;

	(void)state;
	json_array_append_new(items,
			      item("fan", "", "\"parallelism\": 5, \"completions\": 3", kiyot_ann));
	json_array_append_new(items, item("wide", "", "\"parallelism\": 4", kiyot_ann));
	json_array_append_new(items, item("one", "", "", kiyot_ann));
	json_array_append_new(items,
			      item("few", "", "\"parallelism\": 4, \"completions\": 9", kiyot_ann));
	json_array_append_new(items, item("paused", ", \"suspend\": true", "", kiyot_ann));
	json_array_append_new(items, item("zero", "", "\"parallelism\": 0", kiyot_ann));
	json_array_append_new(items, item("node", "", "", "{}"));
	json_array_append_new(items, item("other", "", "", "{\"" KEY "\": \"runc\"}"));
	json_array_append_new(items, item("huge", "", "\"parallelism\": 100000", kiyot_ann));
	json_object_set_new(list, "items", items);
	assert_int_equal(cronjobs_from_list(list, KEY, "kiyot", &v, &n, &err), 0);
	assert_int_equal(n, 5);
	assert_string_equal(v[0].name, "fan");
	assert_string_equal(v[0].ns, "batch");
	assert_string_equal(v[0].version, "7");
	assert_int_equal(v[0].pods, 3);
	assert_string_equal(v[1].name, "wide");
	assert_int_equal(v[1].pods, 4);
	assert_string_equal(v[2].name, "one");
	assert_int_equal(v[2].pods, 1);
	assert_int_equal(v[3].pods, 4);
	assert_string_equal(v[4].name, "huge");
	assert_int_equal(v[4].pods, CRONJOBS_PODS_MAX);
	for (size_t i = 0; i < n; i++) {
		assert_null(v[i].problem);
		assert_true(v[i].sched.minute ==
			    ((1ull << 0) | (1ull << 15) | (1ull << 30) | (1ull << 45)));
	}
	cronjobs_free(v, n);
	json_decref(list);
}

/* A schedule kiyot cannot read, or a time zone other than UTC, is a problem saying why; UTC
 * and Etc/UTC are read. */
static void test_cronjobs__problems_say_why(void **state)
{
	json_t *list = json_object(), *items = json_array(), *bad;
	struct cronjob *v;
	size_t n;
	struct err err = ERR_INIT;

	(void)state;
	json_array_append_new(items,
			      item("paris", ", \"timeZone\": \"Europe/Paris\"", "", kiyot_ann));
	json_array_append_new(items, item("utc", ", \"timeZone\": \"Etc/UTC\"", "", kiyot_ann));
	bad = item("bad", "", "", kiyot_ann);
	json_object_set_new(json_object_get(bad, "spec"), "schedule", json_string("61 * * * *"));
	json_array_append_new(items, bad);
	json_object_set_new(list, "items", items);
	assert_int_equal(cronjobs_from_list(list, KEY, "kiyot", &v, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_non_null(v[0].problem);
	assert_non_null(strstr(v[0].problem, "Europe/Paris"));
	assert_non_null(strstr(v[0].problem, "UTC only"));
	assert_null(v[1].problem);
	assert_non_null(v[2].problem);
	assert_non_null(strstr(v[2].problem, ".spec.schedule"));
	assert_non_null(strstr(v[2].problem, "minute"));
	cronjobs_free(v, n);
	json_decref(list);
}

/* The template makes a Pod object podobject_from_json reads: the containers' requests, the
 * template's labels, the uid for the CronJob. */
static void test_cronjobs__template_reads_as_a_pod(void **state)
{
	json_t *list = json_object(), *items = json_array();
	struct cronjob *v;
	struct podspec *pod = NULL;
	size_t n;
	struct err err = ERR_INIT;

	(void)state;
	json_array_append_new(items, item("fan", "", "", kiyot_ann));
	json_object_set_new(list, "items", items);
	assert_int_equal(cronjobs_from_list(list, KEY, "kiyot", &v, &n, &err), 0);
	assert_int_equal(n, 1);
	if (podobject_from_json(v[0].pod, CRONJOBS_UID_PREFIX "batch/fan", &pod, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(pod->name, "fan");
	assert_string_equal(pod->namespace, "batch");
	assert_int_equal(pod->n_containers, 1);
	assert_int_equal(pod->containers[0].requests.cpu_milli, 1500);
	assert_string_equal(
		json_string_value(json_object_get(
			json_object_get(json_object_get(v[0].pod, "metadata"), "annotations"),
			KEY)),
		"kiyot");
	podspec_free(pod);
	cronjobs_free(v, n);
	json_decref(list);
}

/* What is no CronJobList is refused; an empty list is no CronJob. */
static void test_cronjobs__not_a_list_is_refused(void **state)
{
	json_t *j = json_pack("{s:s}", "items", "x");
	struct cronjob *v;
	size_t n = 9;
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(cronjobs_from_list(j, KEY, "kiyot", &v, &n, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "items"));
	json_decref(j);
	j = json_pack("{s:[]}", "items");
	assert_int_equal(cronjobs_from_list(j, KEY, "kiyot", &v, &n, &err), 0);
	assert_int_equal(n, 0);
	cronjobs_free(v, n);
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cronjobs__which_are_taken_and_their_pods),
		cmocka_unit_test(test_cronjobs__problems_say_why),
		cmocka_unit_test(test_cronjobs__template_reads_as_a_pod),
		cmocka_unit_test(test_cronjobs__not_a_list_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
