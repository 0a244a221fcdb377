/*
 * events.h: container lifecycle events for CRI's GetContainerEvents stream. Publishers never
 * block: each subscriber has a bounded queue, and a subscriber that falls behind loses its
 * oldest events (the kubelet then relists, as it does after any gap).
 */
#ifndef KIYOT_EVENTS_H
#define KIYOT_EVENTS_H

#include <stdint.h>

#include "state/state.h"

struct kiyot;
struct events;
struct events_sub;

struct event {
	char *container_id;
	char *sandbox_id;
	int type; /* Runtime__V1__ContainerEventType */
	int64_t created_ns;
};

struct events *events_new(void);
void events_free(struct events *e);

/* Publishes the event a container's current state implies (created, started, stopped). */
void events_publish_container(struct kiyot *k, const struct container *c);
void events_publish(struct events *e, const char *container_id, const char *sandbox_id, int type);
void events_publish_deleted(struct kiyot *k, const struct container *c);

struct events_sub *events_subscribe(struct events *e);
void events_unsubscribe(struct events *e, struct events_sub *s);
/* Waits up to timeout_ms for the next event; 1 with *out filled (release with event_release),
 * 0 on timeout. */
int events_next(struct events *e, struct events_sub *s, int timeout_ms, struct event *out);
void event_release(struct event *ev);

#endif
