/*
 * store.h: durable state in SQLite (WAL). Every change to a sandbox, container, image or key
 * is written through before the CRI call that made it answers, so a kiyot killed at any point
 * restarts with the same lists. Records are written through records.h (under the records' lock); the
 * meta keys also without it: SQLite serializes the calls on the connection.
 */
#ifndef KIYOT_STORE_H
#define KIYOT_STORE_H

#include "err.h"
#include "state.h"

struct store;

/* Makes the state directory (mkdir -p) the owner's alone (0700): one that exists looser is
 * tightened and *loosened is its old mode, for the caller to warn about (else 0). */
int store_dir_prepare(const char *dir, unsigned *loosened, struct err *err);
/* Opens (or creates) the database at path, it and its -wal and -shm files 0600: it holds the
 * key of the CA every cell's certificate and kiyot's are of. */
int store_open(const char *path, struct store **out, struct err *err);
void store_close(struct store *st);

int store_put_sandbox(struct store *st, const struct sandbox *s, struct err *err);
int store_delete_sandbox(struct store *st, const char *id, struct err *err);
int store_put_container(struct store *st, const struct container *c, struct err *err);
int store_delete_container(struct store *st, const char *id, struct err *err);
/* Just where the container's log stands (ctrlog.h), written often; the rest of the row as it
 * is. */
int store_put_log_mark(struct store *st, const char *id, const struct log_mark *m, struct err *err);
int store_put_image(struct store *st, const struct image_rec *i, struct err *err);
int store_delete_image(struct store *st, const char *id, struct err *err);

/* What the store holds, each kind oldest first; the records are the caller's. */
struct store_contents {
	struct sandbox **sandboxes;
	size_t n_sandboxes;
	struct container **containers;
	size_t n_containers;
	struct image_rec **images;
	size_t n_images;
};

/* Loads everything into *out (empty on failure). A row that does not unpack is skipped. */
int store_load(struct store *st, struct store_contents *out, struct err *err);
/* Frees the records left in c and its arrays. */
void store_contents_release(struct store_contents *c);

/* Small key/value table (cluster id, runtime config). *out is NULL when absent. */
int store_get_meta(struct store *st, const char *key, char **out, struct err *err);
int store_put_meta(struct store *st, const char *key, const char *value, struct err *err);
/* Removes key; removing an absent one is no error. */
int store_del_meta(struct store *st, const char *key, struct err *err);
/* Every key beginning with prefix and its value, in key order: *keys and *values (n each, the
 * caller frees every string and both arrays; NULL when none). */
int store_list_meta(struct store *st, const char *prefix, char ***keys, char ***values, size_t *n,
		    struct err *err);

/*
 * The burst rule's history (sizing/burst.h), per owner ("namespace/Kind/name"): a row per cell
 * of the owner's pods with the highest usage it reported. attach records cell_id as a pod of
 * owner made at created_ns (again: no change), keeps the owner's newest per_owner pods and the
 * owners whose newest pod is among the newest owners' (owner itself always). observe raises
 * the cell's peaks to cpu_milli (-1: the report has no CPU rate) and memory_bytes (a cell not
 * attached: nothing), writing only when a peak rose; a cell counts once a report of it had a
 * CPU rate (an agent's first reading of a cell has none). history gives, over the owner's kept
 * pods that count, how many and their highest figures (0, 0, 0: none).
 */
int store_burst_attach(struct store *st, const char *cell_id, const char *owner, int64_t created_ns,
		       int per_owner, int owners, struct err *err);
int store_burst_observe(struct store *st, const char *cell_id, int64_t cpu_milli,
			int64_t memory_bytes, struct err *err);
int store_burst_history(struct store *st, const char *owner, int64_t *pods, int64_t *cpu_milli,
			int64_t *memory_bytes, struct err *err);

#endif
