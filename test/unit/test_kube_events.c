/*
 * Unit tests for kiyot/kube/events.c against a stub API server (test/fixtures/ec2/httpstub.h):
 * what an event looks like on the wire, a repeat patching the count, a cluster-scoped object's
 * events in "default", an expired event posted again, a flood cut per object, an API server
 * that answers 503 once, and a recorder whose API server is gone stopping anyway.
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
#include <jansson.h>

#include "kube/events.h"
#include "kube/kube.h"
#include "../fixtures/ec2/httpstub.h"
#include "xalloc.h"

#define NODE "node-1"

static const struct kube_ref pod = { "Pod", "v1", "ns1", "p1", "uid-1" };
static const struct kube_ref cell = { "Cell", "kiyot.elotl.co/v1", "", "c-abc", NULL };

static struct kube_recorder *recorder(struct stub *s)
{
	struct kube_auth a = { 0 };

	a.server = xasprintf("http://127.0.0.1:%d", s->port);
	return kube_recorder_start(kube_client_from_auth(&a), NODE);
}

static json_t *body_of(struct stub *s, size_t i)
{
	json_t *j = json_loads(s->reqs[i].body, 0, NULL);

	assert_non_null(j);
	return j;
}

static const char *str(json_t *j, const char *path)
{
	char key[64];
	const char *dot;

	while ((dot = strchr(path, '.'))) {
		snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
		j = json_object_get(j, key);
		path = dot + 1;
	}
	return json_string_value(json_object_get(j, path));
}

static void test_kube_events__an_event_and_its_repeat_as_the_kubelet_writes_them(void **state)
{
	static const struct stub_reply replies[] = { { 201, "{}", NULL }, { 200, "{}", NULL } };
	struct stub s = { .replies = replies, .n_replies = 2 };
	struct kube_recorder *r;
	json_t *b;
	char ctype[96], path[512];
	(void)state;

	assert_int_equal(stub_start(&s), 0);
	r = recorder(&s);
	kube_eventf(r, &pod, KUBE_EVENT_WARNING, "CellLaunchFailed", "no capacity for %s",
		    "t3.nano");
	kube_eventf(r, &pod, KUBE_EVENT_WARNING, "CellLaunchFailed", "no capacity for %s",
		    "t3.nano");
	kube_recorder_flush(r);
	kube_recorder_free(r);
	stub_stop(&s);
	assert_int_equal(s.n_reqs, 2);
	assert_string_equal(s.reqs[0].method, "POST");
	assert_string_equal(s.reqs[0].path, "/api/v1/namespaces/ns1/events");
	b = body_of(&s, 0);
	assert_string_equal(str(b, "kind"), "Event");
	assert_string_equal(str(b, "metadata.namespace"), "ns1");
	assert_true(strncmp(str(b, "metadata.name"), "p1.", 3) == 0);
	assert_string_equal(str(b, "involvedObject.kind"), "Pod");
	assert_string_equal(str(b, "involvedObject.apiVersion"), "v1");
	assert_string_equal(str(b, "involvedObject.namespace"), "ns1");
	assert_string_equal(str(b, "involvedObject.name"), "p1");
	assert_string_equal(str(b, "involvedObject.uid"), "uid-1");
	assert_string_equal(str(b, "type"), "Warning");
	assert_string_equal(str(b, "reason"), "CellLaunchFailed");
	assert_string_equal(str(b, "message"), "no capacity for t3.nano");
	assert_string_equal(str(b, "source.component"), "kiyot");
	assert_string_equal(str(b, "source.host"), NODE);
	assert_int_equal(json_integer_value(json_object_get(b, "count")), 1);
	assert_int_equal(strlen(str(b, "firstTimestamp")), strlen("2026-01-01T00:00:00Z"));
	/* the repeat: the same event's count, patched */
	snprintf(path, sizeof(path), "/api/v1/namespaces/ns1/events/%s", str(b, "metadata.name"));
	assert_string_equal(s.reqs[1].method, "PATCH");
	assert_string_equal(s.reqs[1].path, path);
	assert_true(stub_header(s.reqs[1].headers, "Content-Type", ctype, sizeof(ctype)));
	assert_string_equal(ctype, "application/strategic-merge-patch+json");
	json_decref(b);
	b = body_of(&s, 1);
	assert_int_equal(json_integer_value(json_object_get(b, "count")), 2);
	json_decref(b);
	stub_release(&s);
}

static void
test_kube_events__a_cells_events_go_to_default_and_an_expired_one_is_posted_anew(void **state)
{
	static const struct stub_reply replies[] = {
		{ 201, "{}", NULL },
		{ 404, "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"code\":404}", NULL },
		{ 201, "{}", NULL },
	};
	struct stub s = { .replies = replies, .n_replies = 3 };
	struct kube_recorder *r;
	json_t *b;
	(void)state;

	assert_int_equal(stub_start(&s), 0);
	r = recorder(&s);
	kube_eventf(r, &cell, KUBE_EVENT_NORMAL, "CellLaunched", "t3a.nano");
	kube_eventf(r, &cell, KUBE_EVENT_NORMAL, "CellLaunched", "t3a.nano");
	kube_recorder_flush(r);
	kube_recorder_free(r);
	stub_stop(&s);
	assert_int_equal(s.n_reqs, 3);
	assert_string_equal(s.reqs[0].path, "/api/v1/namespaces/default/events");
	b = body_of(&s, 0);
	assert_null(json_object_get(json_object_get(b, "involvedObject"), "namespace"));
	assert_null(json_object_get(json_object_get(b, "involvedObject"), "uid"));
	assert_string_equal(str(b, "involvedObject.apiVersion"), "kiyot.elotl.co/v1");
	json_decref(b);
	assert_string_equal(s.reqs[1].method, "PATCH");
	assert_string_equal(s.reqs[2].method, "POST");
	b = body_of(&s, 2);
	assert_int_equal(json_integer_value(json_object_get(b, "count")), 1);
	json_decref(b);
	stub_release(&s);
}

static void test_kube_events__a_flood_is_cut_per_object(void **state)
{
	static const struct stub_reply replies[] = { { 201, "{}", NULL } };
	struct stub s = { .replies = replies, .n_replies = 1 };
	struct kube_recorder *r;
	size_t posts = 0;
	(void)state;

	assert_int_equal(stub_start(&s), 0);
	r = recorder(&s);
	/* different messages: each a new event, not a repeat */
	for (int i = 0; i < 40; i++)
		kube_eventf(r, &pod, KUBE_EVENT_WARNING, "CellLaunchFailed", "try %d", i);
	kube_eventf(r, &cell, KUBE_EVENT_NORMAL, "CellLaunched", "another object");
	kube_recorder_flush(r);
	assert_int_equal(kube_recorder_dropped(r), 40 - KUBE_EVENTS_BURST);
	kube_recorder_free(r);
	stub_stop(&s);
	for (size_t i = 0; i < s.n_reqs; i++)
		posts += strcmp(s.reqs[i].method, "POST") == 0;
	assert_int_equal(posts, KUBE_EVENTS_BURST + 1);
	assert_non_null(strstr(s.reqs[s.n_reqs - 1].body, "another object"));
	stub_release(&s);
}

static void test_kube_events__an_unavailable_api_server_is_asked_again(void **state)
{
	static const struct stub_reply replies[] = { { 503, "{}", NULL }, { 201, "{}", NULL } };
	struct stub s = { .replies = replies, .n_replies = 2 };
	struct kube_recorder *r;
	(void)state;

	assert_int_equal(stub_start(&s), 0);
	r = recorder(&s);
	kube_eventf(r, &pod, KUBE_EVENT_NORMAL, "CellLaunched", "t3a.nano");
	kube_recorder_flush(r);
	kube_recorder_free(r);
	stub_stop(&s);
	assert_int_equal(s.n_reqs, 2);
	assert_string_equal(s.reqs[1].method, "POST");
	stub_release(&s);
}

static void test_kube_events__a_recorder_without_its_api_server_still_stops(void **state)
{
	struct stub s = { 0 };
	struct kube_recorder *r;
	int port;
	(void)state;

	/* a port that was just free and now refuses */
	static const struct stub_reply replies[] = { { 201, "{}", NULL } };
	s.replies = replies;
	s.n_replies = 1;
	assert_int_equal(stub_start(&s), 0);
	port = s.port;
	stub_stop(&s);
	stub_release(&s);
	memset(&s, 0, sizeof(s));
	s.port = port;
	r = recorder(&s);
	for (int i = 0; i < 5; i++)
		kube_eventf(r, &pod, KUBE_EVENT_NORMAL, "CellLaunched", "n %d", i);
	kube_recorder_free(r); /* returns: what is left is given up after the grace */
	kube_eventf(NULL, &pod, KUBE_EVENT_NORMAL, "CellLaunched", "no recorder: nothing");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_kube_events__an_event_and_its_repeat_as_the_kubelet_writes_them),
		cmocka_unit_test(
			test_kube_events__a_cells_events_go_to_default_and_an_expired_one_is_posted_anew),
		cmocka_unit_test(test_kube_events__a_flood_is_cut_per_object),
		cmocka_unit_test(test_kube_events__an_unavailable_api_server_is_asked_again),
		cmocka_unit_test(test_kube_events__a_recorder_without_its_api_server_still_stops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
