/*
 * records.h: kiyot's records of sandboxes, containers and images (state.h), in one place. Each
 * kind is a list, in the order the CRI lists answer (the newest added first, those loaded at
 * start in the order they were made), and a hash of ids, so a lookup by id or by a unique id
 * prefix (crictl's short ids) costs one bucket. Every change goes through to the store
 * (store.h) by the calls here.
 *
 *	records_lock(k->records);
 *	c = records_container(k->records, id);        borrowed while the lock is held
 *	n = records_containers(k->records, NULL, &v); one reference per entry
 *	records_unlock(k->records);
 *	for (i = 0; i < n; i++) ... v[i]->id ...      without the lock: only fixed fields
 *	containers_put(v, n);
 *
 * or, for a lock held to the end of a block,
 *
 *	_cleanup_records_unlock_ struct records *held = records_locked(k->records);
 *
 * References: the records hold one on each record they list. A lookup's result is borrowed:
 * valid while the caller holds the records' lock. A snapshot's entries and *_get's result are
 * the caller's until it puts them: a record removed meanwhile stays allocated (unlisted) until
 * the last goes. Without the lock, a holder reads only the fields state.h marks fixed.
 *
 * Thread safety: the records own their lock (records_lock); every call needs it held, except
 * *_get, *_put and the snapshots' release, which need nothing. The daemon's few other shared
 * fields go under the same lock (daemon/kiyot.h says which).
 */
#ifndef KIYOT_RECORDS_H
#define KIYOT_RECORDS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "state.h"

struct records;
struct store;

/* Empty records writing through to st (borrowed: it outlives them), with a lock of their own. */
struct records *records_new(struct store *st);
/* The records' lock, taken and released; records_locked takes it and returns r, for a holder
 * that lets _cleanup_records_unlock_ release it at the end of its scope. */
void records_lock(struct records *r);
void records_unlock(struct records *r);
struct records *records_locked(struct records *r);
/* Takes the lock only if no one holds it: true when taken. For a caller that must not wait
 * (a CRI call answered on the thread that took it: rpc.h's RPC_INLINE). */
bool records_trylock(struct records *r);
static inline void records_unlockp(struct records **r)
{
	if (*r)
		records_unlock(*r);
}
#define _cleanup_records_unlock_ __attribute__((cleanup(records_unlockp)))
/* Drops the records' references (a record someone still holds is freed by their put). */
void records_free(struct records *r);
/* Lists what the store holds, after what is listed already. */
int records_load(struct records *r, struct err *err);

/* Lookups: the record with id, else the only one whose id starts with id; NULL when none,
 * when id is "" or when the prefix is ambiguous. The _exact ones take whole ids only. */
struct sandbox *records_sandbox(struct records *r, const char *id);
struct sandbox *records_sandbox_exact(struct records *r, const char *id);
struct container *records_container(struct records *r, const char *id);
struct container *records_container_exact(struct records *r, const char *id);
struct image_rec *records_image_exact(struct records *r, const char *id);
/* The sandbox whose cell is cell_id, or NULL. */
struct sandbox *records_sandbox_of_cell(struct records *r, const char *cell_id);

/* Lists a new record first (in memory only: records_save_* writes it), taking the caller's
 * reference as the records' own; its id must be new. */
void records_add_sandbox(struct records *r, struct sandbox *sb);
void records_add_container(struct records *r, struct container *c);
void records_add_image(struct records *r, struct image_rec *i);
/* Writes a listed record (new or changed) to the store. */
int records_save_sandbox(struct records *r, const struct sandbox *sb, struct err *err);
int records_save_container(struct records *r, const struct container *c, struct err *err);
int records_save_image(struct records *r, const struct image_rec *i, struct err *err);
/* Unlists a record and deletes it from the store, dropping the records' reference: the
 * caller's pointer is borrowed no longer (it may be freed now). Removed from memory even
 * when the store fails (the error says so). A record not listed is left as it is. */
int records_remove_sandbox(struct records *r, struct sandbox *sb, struct err *err);
int records_remove_container(struct records *r, struct container *c, struct err *err);
int records_remove_image(struct records *r, struct image_rec *i, struct err *err);

/* Snapshots: the listed records in list order, each with a reference, in *out (NULL-ended;
 * release with the matching _put). records_containers lists only the sandbox's when
 * sandbox_id (a whole id) is not NULL. */
size_t records_sandboxes(struct records *r, struct sandbox ***out);
size_t records_containers(struct records *r, const char *sandbox_id, struct container ***out);
size_t records_images(struct records *r, struct image_rec ***out);
void sandboxes_put(struct sandbox **v, size_t n);
void containers_put(struct container **v, size_t n);
void images_put(struct image_rec **v, size_t n);

/*
 * A sandbox's life, which every handler that launches or stops one goes through: IDLE ->
 * LAUNCHING (RunPodSandbox, first or resumed) -> IDLE (ready, or its launch failed); IDLE ->
 * STOPPING (StopPodSandbox, RemovePodSandbox, the gc's end of an interrupted launch) -> IDLE;
 * and, from IDLE or the caller's own phase, removed (records_remove_sandbox: unlisted, freed
 * with the last reference). sandbox_begin moves IDLE to `to`. While it launches that is
 * -EAGAIN, "still starting" (the launch must end first); while it stops, a launch is -EAGAIN
 * ("stopping") and a stop waits for that stop to end, then stops again (a stop is
 * idempotent); once removed, -ENOENT. Needs the records' lock, no other lock, and a reference on sb:
 * the wait drops the records' lock. sandbox_end moves it back to IDLE and wakes those waiting.
 */
int sandbox_begin(struct records *r, struct sandbox *sb, enum sandbox_phase to, struct err *err);
void sandbox_end(struct records *r, struct sandbox *sb);
/* Whether sb is still listed (not removed). Needs the records' lock. */
bool sandbox_listed(const struct sandbox *sb);

/*
 * Every change of a sandbox's state and phase is one of these (with sandbox_begin and
 * sandbox_end above); nothing else writes them. state, phase:
 *
 *	from                 to                   by                  when
 *	(new record)         NOTREADY, LAUNCHING  sandbox_launching   RunPodSandbox makes it
 *	NOTREADY, IDLE       NOTREADY, LAUNCHING  sandbox_begin       RunPodSandbox resumes a
 *	                                                              launch a crash cut short
 *	NOTREADY, LAUNCHING  READY, IDLE          sandbox_launched    its cell serves, stored
 *	any, LAUNCHING       same, IDLE           sandbox_end         the launch failed (then
 *	                                                              removed) or was abandoned
 *	any, IDLE            same, STOPPING       sandbox_begin       Stop/RemovePodSandbox, gc
 *	READY, any           NOTREADY, same       sandbox_not_ready   stopped, cell lost,
 *	                                                              spot interruption
 *	any, STOPPING        same, IDLE           sandbox_end         the stop ended
 *
 * Needs the records' lock.
 */
/* A new sandbox's record before it is listed: not ready, launching. */
void sandbox_launching(struct sandbox *sb);
/* The launch came up at ip: the record says ready and is stored, then the launch ends (the
 * phase IDLE, those waiting woken). When the store refuses it the sandbox stays not ready
 * and launching, for the caller's undo to end once; the store's error. */
int sandbox_launched(struct records *r, struct sandbox *sb, const char *ip, struct err *err);
/* The sandbox is not ready any more; its phase stays (the caller stores it). */
void sandbox_not_ready(struct sandbox *sb);

/* References. A put that drops the last one frees the record. */
struct sandbox *sandbox_get(struct sandbox *sb);
void sandbox_put(struct sandbox *sb);
struct container *container_get(struct container *c);
void container_put(struct container *c);
struct image_rec *image_rec_get(struct image_rec *i);
void image_rec_put(struct image_rec *i);

/* A new random 64-hex-digit id for a sandbox or container (caller frees). */
char *kiyot_new_id(void);

#endif
