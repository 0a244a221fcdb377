/*
 * cells_internal.h: what the cell manager's files share: cells.c (a cell's life, its Watch)
 * and cells_calls.c (the calls made of a running cell's agent).
 */
#ifndef KIYOT_CELLS_INTERNAL_H
#define KIYOT_CELLS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent_client.h"
#include "cells.h"

#define AGENT_CALL_TIMEOUT_MS 10000
#define PULL_TIMEOUT_MS (15 * 60 * 1000)
#define WRITE_VOLUME_TIMEOUT_MS 60000
/* The agent ends an ExecSync without a timeout, or with a longer one, after a day. */
#define EXEC_TIMEOUT_MAX_S (24LL * 3600)

struct cell_entry {
	char *id;
	char *target;		 /* "ip:port" of the agent */
	struct agent_conn *conn; /* NULL when it could not be made */
	pthread_mutex_t apply_lock;
	/* The cell's Watch, guarded by the manager's lock: the live one (NULL between two),
	 * whether the restarter is opening one (and whether that one already ended), when the
	 * next one is due (0: none is), the pause before the one after, how many ended refused
	 * in a row, whether the provider should heal the cell first, and whether the cell is
	 * being stopped (no Watch is opened any more). */
	struct agent_watch *watch;
	int runs; /* Watches whose callbacks have not all returned */
	bool opening, ended_early, heal, stop;
	int64_t due_ns;
	int backoff_ms, refused;
	/* References, guarded by the manager's lock: one for the list while the cell is in it,
	 * one for each call in flight. The last one frees the entry. A Watch holds none: the
	 * list's is dropped only once entry_stop_watch saw its callbacks done (runs 0). */
	int refs;
	/* The cell's resource usage its Watch pushed last (packed StatsResponse), when it came,
	 * and whether no unit changed since; guarded by the manager's lock. */
	uint8_t *stats;
	size_t stats_len;
	int64_t stats_ns;
	bool stats_current;
	/* A reading asked of the agent for callers that found no fresh one: one at a time, the
	 * callers meanwhile waiting for it on the manager's cond (stats_gen counts the readings that ended, stats_err
	 * is how the last one failed); guarded by the manager's lock. */
	bool stats_asking;
	uint64_t stats_gen;
	struct err stats_err;
	/* What the agent said of its instance's coming end; guarded by the manager's lock. */
	struct cell_interruption interruption;
	/* The release its agent said in its last Hello (NULL: not asked since the entry was made
	 * or its Watch last ended, as an agent restarted by the provider may be another binary);
	 * guarded by the manager's lock. */
	char *agent_version;
	/* Whether an Apply to the cell succeeded (the first one is the launch's "apply" step);
	 * guarded by the manager's lock. */
	bool applied;
	/* ExecSync calls in flight to the agent (at most CELL_EXECS_MAX) and those waiting for a
	 * turn, oldest first; guarded by the manager's lock. */
	int execs;
	struct exec_waiter *exec_head, *exec_tail;
	struct cell_entry *next;
};

/* ExecSync calls one cell's agent runs at once: its exec workers (cell-agent/api.c). More
 * would wait there holding a worker of kiyot's each; here they wait in order without one
 * (rpc_park), so that a flood of execs into one cell holds up neither other cells' nor any
 * other kind of call. */
#define CELL_EXECS_MAX 8

/* Certificates: the CA's for ten years, the cells' and kiyot's own as long. kiyot's is made
 * anew at each start and never stored. */
#define CERT_DAYS 3650
/* Bytes of a cell's one-time enrollment secret (hex in its bootstrap document). */
#define ENROLL_SECRET_BYTES 32

/* Watches run on the agent client's threads (two for gRPC), and one restarter thread opens
 * them again when they end: the threads do not grow with the number of cells. */
#define WATCH_THREADS 2
#define WATCH_BACKOFF_MIN_MS 100
#define WATCH_BACKOFF_MAX_MS 2000
/* A cell's Watch brings its resource usage at this pace, and cells_stats answers from the
 * latest while it was received less than the max age ago and no unit changed since; else it
 * asks the agent for a new reading. Rates are computed from two samples' own timestamps:
 * crictl stats takes its samples a second apart and fails when the second carries the same
 * timestamp, so a figure a second old is measured again (a sample asked for a second after
 * another is at least that much younger than the reading the first was answered with). */
#define STATS_PUSH_MS 10000
#define STATS_MAX_AGE_MS 1000

/* A launch under way, found by its cell id (cells_launch_begin to cells_launch_end, and
 * cells_launch itself): a stop of its sandbox cancels it (cells_launch_cancel). Guarded by the
 * manager's lock, but `cancelled`, which the launch's cancel scope reads on its own thread
 * without the lock (atomic). */
struct cell_launch {
	char *cell_id;
	int holds;	/* begin's and cells_launch's own; the last release frees it */
	bool cancelled; /* a stop asked: the launch ends with ECANCELED */
	bool done;	/* its cell came up and is kept: too late to cancel */
	struct cell_launch *next;
};

/* While a launch waits for its agent, the provider is asked for its cell's state this often
 * (provider_ops.state): an instance terminated during boot ends the wait at once. */
#define LAUNCH_STATE_EVERY_MS 3000
/* A cell's boot timeout when neither cells.bootTimeoutSeconds nor the provider gives one. */
#define BOOT_TIMEOUT_DEFAULT_S 30

struct cellmgr {
	struct kiyot *k;
	struct cells_hooks hooks; /* what it reports to (cells_new) */
	struct agent_client agent;
	bool own_agent; /* made here (gRPC), freed here */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a Watch due, ended or opened; quit */
	pthread_t restarter;
	bool restarting, quit;
	struct cell_entry *cells;
	struct cell_launch *launches; /* under way (under lock) */
	int interrupt_threads;	      /* interruption hook calls running (under lock) */
	/* kiyot's CA (its key never leaves kiyot.db) and kiyot's client certificate */
	char *ca, *ca_key;
	char *cert, *key;
};

/* The entry of a running cell with a reference (put it back with cell_entry_put), or NULL
 * with err (-ENOENT: not running). */
struct cell_entry *cell_entry_get(struct cellmgr *m, const char *id, struct err *err);
void cell_entry_put(struct cellmgr *m, struct cell_entry *e);
/* Keeps the usage an agent reported as the cell's latest. */
void cell_stats_keep(struct cellmgr *m, struct cell_entry *e,
		     const Kiyot__Cell__V1__StatsResponse *stats);

#endif
