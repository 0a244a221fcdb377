/*
 * usage_history.h: what the burst rule (sizing/burst.h) sizes from: per owner of pods
 * (ReplicaSet, StatefulSet, Job...), the highest CPU and memory each of its recent pods'
 * cells reported, kept in kiyot's store (state/store.h) so that it survives a restart.
 * Bounded: the newest USAGE_HISTORY_PODS pods of an owner, the USAGE_HISTORY_OWNERS owners
 * with the newest pods. Only cells attached (pods that asked for the rule) are recorded.
 * Thread-safe (the store serializes its calls).
 */
#ifndef KIYOT_USAGE_HISTORY_H
#define KIYOT_USAGE_HISTORY_H

#include "cellagent.pb-c.h"
#include "err.h"
#include "kube/podspec.h"
#include "sizing/burst.h"

struct store;

#define USAGE_HISTORY_PODS 32
#define USAGE_HISTORY_OWNERS 512

/* The owner key of pod: "namespace/Kind/name" of its controller (the caller frees), or NULL
 * when it has none. */
char *usage_history_owner(const struct podspec *pod);
/* "ReplicaSet web-7c9" of an owner key, into buf. */
void usage_history_owner_name(const char *owner, char *buf, size_t size);

/* Records cell_id as a pod of owner: its usage reports count for the owner from now on. */
int usage_history_attach(struct store *st, const char *cell_id, const char *owner, struct err *err);

/* The cell's usage report: raises its peaks when it is attached (one indexed look-up for a
 * cell that is not). CPU counts only when the report carries a rate, and the cell counts as
 * one of its owner's pods from its first report with one on. Errors are logged. */
void usage_history_observe(struct store *st, const char *cell_id,
			   const Kiyot__Cell__V1__StatsResponse *stats);

/* The owner's history: its kept pods that reported usage and their peaks. */
int usage_history_get(struct store *st, const char *owner, struct burst_history *out,
		      struct err *err);

#endif
