/*
 * cellsync.h: one Cell object (cells.kiyot.elotl.co/v1, cluster-scoped, named after the cell
 * id) per live cell, kept in the API server so `kubectl get cells` shows exactly the cells of
 * this node.
 *
 * A background worker reconciles what kiyot's sandboxes say with the Cell objects labelled
 * kiyot.elotl.co/cluster-id=<cluster id> and kiyot.elotl.co/node=<node>: it creates the
 * missing, updates the stale (re-reading on a resourceVersion conflict) and deletes the ghosts.
 * It runs when kicked (a cell appeared, changed or went), periodically, and with a growing
 * back-off while the API server is unreachable. CRI handlers only kick; they never wait on the
 * API server.
 *
 * A cell is live while its sandbox is launching it (phase Pending) or ready (phase Running).
 */
#ifndef KIYOT_CELLSYNC_H
#define KIYOT_CELLSYNC_H

#include "err.h"

struct kiyot;
struct kube_client;
struct cellsync;

#define CELLSYNC_RESYNC_S 60	 /* a full resync at least this often */
#define CELLSYNC_BACKOFF_MAX_S 8 /* the longest wait between retries while the API is down */
#define CELLSYNC_LABEL_CLUSTER "kiyot.elotl.co/cluster-id"
#define CELLSYNC_LABEL_NODE "kiyot.elotl.co/node"

/* Starts the worker for k with client kc (taken over). node NULL: k's (kiyot_node_name). */
struct cellsync *cellsync_start(struct kiyot *k, struct kube_client *kc, const char *node);
/* Starts the worker when k's config or the environment names an API server; NULL (logged)
 * when none does or the credentials are unusable. */
struct cellsync *cellsync_start_configured(struct kiyot *k);
/* Asks for a reconcile soon. Never blocks on the API server; NULL is fine. */
void cellsync_kick(struct cellsync *cs);
/* Stops the worker; kicks are ignored afterwards. NULL is fine. */
void cellsync_stop(struct cellsync *cs);
void cellsync_free(struct cellsync *cs);

/* One reconcile now, in the caller's thread (tests; the worker uses it). */
int cellsync_reconcile(struct cellsync *cs, struct err *err);

#endif
