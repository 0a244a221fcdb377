/*
 * events.c: a fan-out of container events to GetContainerEvents subscribers (see events.h).
 */
#include "events.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "cri_api.pb-c.h"
#include "daemon/kiyot.h"
#include "xalloc.h"

#define QUEUE_MAX 1024

struct events_sub {
	struct event q[QUEUE_MAX];
	size_t head, len;
	struct events_sub *next;
};

struct events {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct events_sub *subs;
};

struct events *events_new(void)
{
	struct events *e = xcalloc(1, sizeof(*e));
	pthread_condattr_t ca;

	pthread_mutex_init(&e->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->cond, &ca);
	pthread_condattr_destroy(&ca);
	return e;
}

void event_release(struct event *ev)
{
	free(ev->container_id);
	free(ev->sandbox_id);
	ev->container_id = ev->sandbox_id = NULL;
}

static void sub_free(struct events_sub *s)
{
	for (size_t i = 0; i < s->len; i++)
		event_release(&s->q[(s->head + i) % QUEUE_MAX]);
	free(s);
}

void events_free(struct events *e)
{
	if (!e)
		return;
	while (e->subs) {
		struct events_sub *s = e->subs;

		e->subs = s->next;
		sub_free(s);
	}
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	free(e);
}

void events_publish(struct events *e, const char *container_id, const char *sandbox_id, int type)
{
	int64_t now = clock_now_ns();

	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	for (struct events_sub *s = e->subs; s; s = s->next) {
		struct event *ev;

		if (s->len == QUEUE_MAX) { /* drop the oldest */
			event_release(&s->q[s->head]);
			s->head = (s->head + 1) % QUEUE_MAX;
			s->len--;
		}
		ev = &s->q[(s->head + s->len) % QUEUE_MAX];
		ev->container_id = xstrdup(container_id);
		ev->sandbox_id = xstrdup(sandbox_id);
		ev->type = type;
		ev->created_ns = now;
		s->len++;
	}
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
}

void events_publish_container(struct kiyot *k, const struct container *c)
{
	int type;

	switch (c->state) {
	case CTR_CREATED:
		type = RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_CREATED_EVENT;
		break;
	case CTR_RUNNING:
		type = RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STARTED_EVENT;
		break;
	case CTR_EXITED:
		type = RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STOPPED_EVENT;
		break;
	default:
		return;
	}
	events_publish(k->events, c->id, c->sandbox_id, type);
}

void events_publish_deleted(struct kiyot *k, const struct container *c)
{
	events_publish(k->events, c->id, c->sandbox_id,
		       RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_DELETED_EVENT);
}

struct events_sub *events_subscribe(struct events *e)
{
	struct events_sub *s = xcalloc(1, sizeof(*s));

	pthread_mutex_lock(&e->lock);
	s->next = e->subs;
	e->subs = s;
	pthread_mutex_unlock(&e->lock);
	return s;
}

void events_unsubscribe(struct events *e, struct events_sub *s)
{
	pthread_mutex_lock(&e->lock);
	for (struct events_sub **pp = &e->subs; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&e->lock);
	sub_free(s);
}

int events_next(struct events *e, struct events_sub *s, int timeout_ms, struct event *out)
{
	struct timespec ts = clock_deadline(CLOCK_MONOTONIC, timeout_ms);
	int got = 0;

	pthread_mutex_lock(&e->lock);
	while (s->len == 0)
		if (pthread_cond_timedwait(&e->cond, &e->lock, &ts) == ETIMEDOUT)
			break;
	if (s->len) {
		*out = s->q[s->head];
		memset(&s->q[s->head], 0, sizeof(s->q[s->head]));
		s->head = (s->head + 1) % QUEUE_MAX;
		s->len--;
		got = 1;
	}
	pthread_mutex_unlock(&e->lock);
	return got;
}
