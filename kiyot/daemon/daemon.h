/*
 * daemon.h: kiyot's wiring (daemon.c): the one place that knows every part, the order they are
 * made in at start-up and torn down in at stop. kiyot_open and kiyot_close (kiyot.h) make and
 * free the parts that need no socket of the kubelet's (what the unit tests' fixture runs);
 * daemon_start and daemon_stop wrap them with what `kiyot serve` adds.
 */
#ifndef KIYOT_DAEMON_H
#define KIYOT_DAEMON_H

#include <stdint.h>

#include "err.h"
#include "kiyot.h"

struct rpc_server;

/*
 * Starts everything `kiyot serve` runs, k->cfg read already: kiyot_open, the fallback
 * runtime's router (cfg.fallback_runtime_endpoint), Cell object sync and Events (cfg.kubeconfig,
 * or in-cluster), then the CRI server on cfg.socket. The error names the setting at fault; on
 * error what was started is left to the process's exit. *srv is the CRI server, for
 * daemon_stop.
 */
int daemon_start(struct kiyot *k, struct rpc_server **srv, struct err *err);
/* Stops what daemon_start started, in the reverse order: the CRI server first (the calls in
 * progress end), kiyot_close last. Cells keep running. k->cfg is the caller's to release. */
void daemon_stop(struct kiyot *k, struct rpc_server *srv);

/* One step of stopping kiyot ended: a warning naming it when it took KIYOT_SLOW_STOP_MS or
 * more since `since` (clock_mono_ns), a debug line otherwise, so a stop that hangs says
 * where (the step after the last one logged). Returns now. */
#define KIYOT_SLOW_STOP_MS 2000
int64_t kiyot_stop_step(const char *what, int64_t since);

#endif
