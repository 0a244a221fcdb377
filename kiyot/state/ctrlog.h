/*
 * ctrlog.h: the log files the kubelet reads, written from what cells stream: a writer per
 * container, and a committer that writes where each stands to the store in batches.
 *
 * A writer keeps its container's file open and appends the bytes the cell's Watch brings
 * (ctrlog_write) under a lock of its own, never the records' lock, so the kubelet's calls do not wait
 * behind a noisy container. What it wrote, as a log_mark (state.h), goes to the store:
 *   - every CTRLOG_COMMIT_MS, or sooner once a writer has CTRLOG_COMMIT_CHUNKS chunks more;
 *   - at once when its file changes (opened anew, ReopenContainerLog);
 *   - soon after its container exits (ctrlog_idle), and at ctrlogs_free.
 * A kiyot killed in between restarts from an older mark. The bytes written since are at the
 * end of the same file, so a writer made from that mark (ctrlog_new) counts them from the
 * file's size, and the cell's Watch resumes where the file ends: no line is written twice,
 * none is lost. (Only when the file was replaced in that window, by a rotation, does the
 * mark stand: the lines of that batch may then come again in the new file.)
 *
 * Thread safety: every call from any thread. A writer's lock comes before the committer's;
 * neither calls out of this module but to the store (whose SQLite lock is innermost). A
 * writer's lock may be taken under the records' lock.
 */
#ifndef KIYOT_CTRLOG_H
#define KIYOT_CTRLOG_H

#include <stdint.h>

#include "err.h"
#include "state.h"

#define CTRLOG_COMMIT_MS 1000
#define CTRLOG_COMMIT_CHUNKS 256

struct store;
struct ctrlogs;
struct ctrlog;

/* The committer of st's log marks, with its thread. */
struct ctrlogs *ctrlogs_new(struct store *st);
/* Stops the thread and commits every pending mark; no writer may write after it (writers
 * may still be put). */
void ctrlogs_free(struct ctrlogs *l);
/* Commits every pending mark now. */
void ctrlogs_commit(struct ctrlogs *l);

/* A writer of container id's log to path (NULL: no file, the offset is still kept), from the
 * mark the store held (zero for a new container): when path is still the file of the mark,
 * what it holds past the mark's pos counts as written. The caller's reference. */
struct ctrlog *ctrlog_new(struct ctrlogs *l, const char *id, const char *path,
			  const struct log_mark *stored);
struct ctrlog *ctrlog_get(struct ctrlog *w);
/* Drops a reference; the last closes the file. */
void ctrlog_put(struct ctrlog *w);
/* The container is gone: nothing more is written, opened or committed. */
void ctrlog_close(struct ctrlog *w);

/* Appends the bytes of the unit's log at offset that the file lacks; what it has already is
 * skipped. A write that fails is logged and its bytes counted as written, as a file the
 * kubelet cannot take more of loses them. */
void ctrlog_write(struct ctrlog *w, uint64_t offset, const uint8_t *data, size_t len);
/* Bytes of the unit's log written so far (where a Watch resumes). */
uint64_t ctrlog_offset(struct ctrlog *w);
/* Opens the file, creating it (and its directory) empty, so readers find it before any
 * output. */
int ctrlog_open(struct ctrlog *w, struct err *err);
/* Opens the file at its path anew (after a rotation renamed it; ReopenContainerLog); the
 * next bytes go there. */
int ctrlog_reopen(struct ctrlog *w, struct err *err);
/* The container exited: its mark is committed and its file closed soon (a late chunk opens
 * it again). */
void ctrlog_idle(struct ctrlog *w);

#endif
