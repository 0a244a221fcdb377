/*
 * interrupt.h: what a cell on EC2 learns of its instance's coming end from the instance
 * metadata service (imds.h), and hands to kiyot over its Watch (watch.c, an INTERRUPTION
 * event): the spot interruption notice (/latest/meta-data/spot/instance-action, about two
 * minutes before EC2 acts) and the rebalance recommendation
 * (/latest/meta-data/events/recommendations/rebalance). Both paths answer 404 while there is
 * nothing to say.
 *
 * One thread polls both every INTERRUPT_POLL_MS. It runs only in a cell on EC2: an agent
 * started with --bootstrap-imds, or one given $KIYOT_IMDS_ENDPOINT (tests).
 */
#ifndef KIYOT_INTERRUPT_H
#define KIYOT_INTERRUPT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define INTERRUPT_POLL_MS 5000 /* as EC2 advises for the notice */
#define INTERRUPT_PATH_NOTICE "/latest/meta-data/spot/instance-action"
#define INTERRUPT_PATH_REBALANCE "/latest/meta-data/events/recommendations/rebalance"
#define INTERRUPT_BODY_MAX 4096 /* the answers are a line of JSON */

enum interruption_kind {
	INTERRUPTION_NOTICE,	/* the spot interruption notice */
	INTERRUPTION_REBALANCE, /* the rebalance recommendation */
	INTERRUPTION_KINDS
};

/* What the service said. */
struct interruption {
	enum interruption_kind kind;
	char action[16];      /* NOTICE: "terminate", "stop" or "hibernate"; else "" */
	int64_t time_unix_ns; /* NOTICE: when EC2 acts; REBALANCE: when it noticed */
};

/* Parses an answer of kind's path: {"action": "terminate", "time": "2026-11-29T08:22:00Z"}
 * for the notice, {"noticeTime": "2026-11-29T08:20:00Z"} for the recommendation. -EINVAL
 * naming what is wrong. */
int interruption_parse(enum interruption_kind kind, const char *body, size_t len,
		       struct interruption *out, struct err *err);

struct watch_hub;
struct interrupt_watch;

/* Starts the poller: what it finds goes to hub (watch_hub_interruption), once for each new
 * answer. endpoint NULL: $KIYOT_IMDS_ENDPOINT, else EC2's. NULL when it cannot start
 * (logged): the cell then runs without. */
struct interrupt_watch *interrupt_watch_start(struct watch_hub *hub, const char *endpoint);
/* Stops the poller and waits for it (at most one exchange with the service). NULL is fine. */
void interrupt_watch_stop(struct interrupt_watch *w);

/* watch.c: keeps in as the latest of its kind and wakes every watch, which sends it to kiyot
 * (and sends it to every watch that starts later). */
void watch_hub_interruption(struct watch_hub *h, const struct interruption *in);

#endif
