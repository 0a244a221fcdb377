/*
 * Unit tests for kiyot/cri/events.c, the fan-out of container events to GetContainerEvents
 * subscribers: every subscriber gets every event in order, a container's state picks the
 * event type, a subscriber that falls behind loses its oldest events and never blocks the
 * publisher, and a wait with nothing published times out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "cri/events.h"
#include "cri_api.pb-c.h"
#include "daemon/kiyot.h"
#include "xalloc.h"

#define QUEUE_MAX 1024 /* events.c's bound per subscriber */

static void expect_event(struct events *e, struct events_sub *s, const char *ctr, const char *sb,
			 int type)
{
	struct event ev;

	assert_int_equal(events_next(e, s, 1000, &ev), 1);
	assert_string_equal(ev.container_id, ctr);
	assert_string_equal(ev.sandbox_id, sb);
	assert_int_equal(ev.type, type);
	assert_true(ev.created_ns > 0);
	event_release(&ev);
}

static void test_events__every_subscriber_gets_every_event(void **state)
{
	struct events *e = events_new();
	struct events_sub *a = events_subscribe(e), *b = events_subscribe(e);

	(void)state;
	events_publish(e, "c1", "s1", RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_CREATED_EVENT);
	events_publish(e, "c1", "s1", RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STARTED_EVENT);
	for (int i = 0; i < 2; i++) {
		struct events_sub *s = i ? b : a;

		expect_event(e, s, "c1", "s1",
			     RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_CREATED_EVENT);
		expect_event(e, s, "c1", "s1",
			     RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STARTED_EVENT);
	}
	events_unsubscribe(e, a);
	/* one that left gets nothing more; the other still does */
	events_publish(e, "c2", "s1", RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_DELETED_EVENT);
	expect_event(e, b, "c2", "s1", RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_DELETED_EVENT);
	events_free(e); /* frees b too */
}

static void test_events__a_wait_with_nothing_times_out(void **state)
{
	struct events *e = events_new();
	struct events_sub *s = events_subscribe(e);
	struct event ev = { 0 };
	int64_t t0 = clock_mono_ns();

	(void)state;
	assert_int_equal(events_next(e, s, 1100, &ev), 0);
	assert_null(ev.container_id);
	assert_true(clock_mono_ns() - t0 >= 1000LL * 1000 * 1000);
	events_unsubscribe(e, s);
	events_free(e);
	events_publish(NULL, "c", "s", 0); /* no hub: nothing to do */
	events_free(NULL);
}

/* A subscriber that does not read keeps the newest QUEUE_MAX events; the publisher goes on. */
static void test_events__a_slow_subscriber_loses_its_oldest(void **state)
{
	struct events *e = events_new();
	struct events_sub *s = events_subscribe(e);
	struct event ev;
	char id[32];

	(void)state;
	for (int i = 0; i < QUEUE_MAX + 10; i++) {
		snprintf(id, sizeof(id), "c%d", i);
		events_publish(e, id, "s",
			       RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STARTED_EVENT);
	}
	for (int i = 10; i < QUEUE_MAX + 10; i++) {
		snprintf(id, sizeof(id), "c%d", i);
		assert_int_equal(events_next(e, s, 0, &ev), 1);
		assert_string_equal(ev.container_id, id);
		event_release(&ev);
	}
	assert_int_equal(events_next(e, s, 0, &ev), 0);
	/* unread events go with the subscriber */
	events_publish(e, "late", "s", RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STARTED_EVENT);
	events_unsubscribe(e, s);
	events_free(e);
}

struct waiter {
	struct events *e;
	struct events_sub *s;
	struct event ev;
	int got;
};

static void *wait_main(void *arg)
{
	struct waiter *w = arg;

	w->got = events_next(w->e, w->s, 5000, &w->ev);
	return NULL;
}

/* A waiting subscriber wakes as soon as an event comes. */
static void test_events__a_waiter_wakes_on_publish(void **state)
{
	struct waiter w = { events_new(), NULL, { 0 }, 0 };
	pthread_t t;
	int64_t t0 = clock_mono_ns();

	(void)state;
	w.s = events_subscribe(w.e);
	assert_int_equal(pthread_create(&t, NULL, wait_main, &w), 0);
	usleep(50000);
	events_publish(w.e, "c1", "s1", RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STOPPED_EVENT);
	pthread_join(t, NULL);
	assert_int_equal(w.got, 1);
	assert_string_equal(w.ev.container_id, "c1");
	assert_true(clock_mono_ns() - t0 < 4000LL * 1000 * 1000);
	event_release(&w.ev);
	events_unsubscribe(w.e, w.s);
	events_free(w.e);
}

/* A container's state says which event it makes; unknown makes none; deleted has its own. */
static void test_events__container_state_picks_the_type(void **state)
{
	static const struct {
		enum container_state state;
		int type;
	} cases[] = {
		{ CTR_CREATED, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_CREATED_EVENT },
		{ CTR_RUNNING, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STARTED_EVENT },
		{ CTR_EXITED, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STOPPED_EVENT },
	};
	struct kiyot k = { 0 };
	struct container c = { 0 };
	struct events_sub *s;
	struct event ev;

	(void)state;
	k.events = events_new();
	s = events_subscribe(k.events);
	c.id = "ctr";
	c.sandbox_id = "sb";
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		c.state = cases[i].state;
		events_publish_container(&k, &c);
		expect_event(k.events, s, "ctr", "sb", cases[i].type);
	}
	c.state = CTR_UNKNOWN;
	events_publish_container(&k, &c);
	assert_int_equal(events_next(k.events, s, 0, &ev), 0);
	events_publish_deleted(&k, &c);
	expect_event(k.events, s, "ctr", "sb",
		     RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_DELETED_EVENT);
	events_unsubscribe(k.events, s);
	events_free(k.events);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_events__every_subscriber_gets_every_event),
		cmocka_unit_test(test_events__a_wait_with_nothing_times_out),
		cmocka_unit_test(test_events__a_slow_subscriber_loses_its_oldest),
		cmocka_unit_test(test_events__a_waiter_wakes_on_publish),
		cmocka_unit_test(test_events__container_state_picks_the_type),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
