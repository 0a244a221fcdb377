/*
 * events.h: Kubernetes Events about pods and their cells, written as the kubelet's recorder
 * writes them, so `kubectl describe pod` and `kubectl get events` tell a user what happened
 * to a pod's cell: launched (type, price, why), a capacity fallback, a launch that failed and
 * why, a cell lost or interrupted under the pod.
 *
 *	kube_eventf(k->events, &(struct kube_ref){ "Pod", "v1", ns, name, uid },
 *		    KUBE_EVENT_NORMAL, "CellLaunched", "cell %s: %s, %s, $%.4f/h", ...);
 *
 * Recording never waits on the API server: an event is queued (at most
 * KUBE_EVENTS_QUEUED; beyond that it is dropped and counted) and a worker thread posts it
 * (core/v1 Events, POST, three tries). The same event again (object, type, reason and
 * message) is not a new object: the worker patches the first one's count and lastTimestamp,
 * as the kubelet does. A flood is cut as client-go cuts it: each involved object has a
 * bucket of KUBE_EVENTS_BURST events, refilled by one every KUBE_EVENTS_REFILL_S seconds;
 * what comes while it is empty is dropped (a crash-looping launch cannot flood the API
 * server). An object's events go to its namespace, a cluster-scoped one's (a Cell) to
 * "default", as the API server requires.
 *
 * Thread safety: kube_eventf from any thread; start and stop from one.
 */
#ifndef KIYOT_KUBE_EVENTS_H
#define KIYOT_KUBE_EVENTS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

#define KUBE_EVENTS_QUEUED 256	    /* events waiting for the worker */
#define KUBE_EVENTS_BURST 25	    /* per involved object */
#define KUBE_EVENTS_REFILL_S 300    /* one more event an object may have, every this */
#define KUBE_EVENTS_REMEMBERED 1024 /* events (for counts) and objects (buckets) kept */
#define KUBE_EVENT_MESSAGE_MAX 1024 /* bytes of a message, longer ones cut */

struct kube_client;

/* What an event is about. Borrowed strings; namespace_ "" for a cluster-scoped kind. */
struct kube_ref {
	const char *kind;	 /* "Pod", "Cell" */
	const char *api_version; /* "v1", "kiyot.elotl.co/v1" */
	const char *namespace_;
	const char *name;
	const char *uid; /* NULL or "" when not known */
};

enum kube_event_type {
	KUBE_EVENT_NORMAL,
	KUBE_EVENT_WARNING
};

struct kube_recorder;

/* Starts a recorder posting through kc (taken over) as component "kiyot" of host (the
 * node's name). */
struct kube_recorder *kube_recorder_start(struct kube_client *kc, const char *host);
/* A recorder for the API server of kubeconfig (or the in-cluster one, kube_client_new), as
 * component "kiyot" of node host; NULL (logged) when there is none or its credentials are
 * unusable. */
struct kube_recorder *kube_recorder_start_configured(const char *kubeconfig, const char *host);
/* Stops the worker, giving what is queued up to a second, and frees. NULL is fine. */
void kube_recorder_free(struct kube_recorder *r);

/* Records an event; r NULL (no API server) records nothing. reason is CamelCase. */
void kube_eventf(struct kube_recorder *r, const struct kube_ref *obj, enum kube_event_type type,
		 const char *reason, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

void kube_veventf(struct kube_recorder *r, const struct kube_ref *obj, enum kube_event_type type,
		  const char *reason, const char *fmt, va_list ap)
	__attribute__((format(printf, 5, 0)));

/* Events dropped so far: the queue full, or the object's bucket empty. */
uint64_t kube_recorder_dropped(struct kube_recorder *r);

/* Waits until every event recorded before the call was posted or given up (tests). */
void kube_recorder_flush(struct kube_recorder *r);

#endif
