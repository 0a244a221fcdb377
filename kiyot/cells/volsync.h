/*
 * volsync.h: keeps shipped volumes (shipvol.h) in remote cells equal to the node's copies.
 *
 * A volume is shipped when a unit that mounts it is applied (volsync_ship, synchronous: the
 * unit must find its files), and from then on re-shipped whenever the kubelet rewrites it:
 * inotify on the node's directory (the kubelet's atomic writer swaps the ..data symlink at the
 * top), debounced by VOLSYNC_DEBOUNCE_MS, plus a rescan of every volume each
 * VOLSYNC_RESCAN_S seconds for writers that change deeper files. A volume is sent only when
 * its content digest differs from what the cell has. Volumes of cells that are gone, or
 * whose node copy is gone, are forgotten.
 *
 * Thread safety: every call may come from any thread; ships of one volume are serialised, so
 * an older snapshot never lands after a newer one.
 */
#ifndef KIYOT_VOLSYNC_H
#define KIYOT_VOLSYNC_H

#include "err.h"

#define VOLSYNC_DEBOUNCE_MS 100
#define VOLSYNC_RESCAN_S 60 /* a check of every volume reads it: 4000 small volumes ~1 s of CPU */

struct kiyot;
struct volsync;

/* Starts the sync thread; the shipped volumes of the pods running now are checked at once. */
struct volsync *volsync_start(struct kiyot *k);
void volsync_stop(struct volsync *vs);

/* Ships host_path to the cell as volume name now (unless the cell has this content) and keeps
 * it in sync. */
int volsync_ship(struct volsync *vs, const char *cell_id, const char *name, const char *host_path,
		 struct err *err);

#endif
