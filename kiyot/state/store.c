/*
 * store.c: SQLite persistence of kiyot's records. CRI configs are stored as the packed
 * protobuf messages they arrived as; the rest as plain columns.
 */
#include "store.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsutil.h"
#include "xalloc.h"

struct store {
	sqlite3 *db;
};

static const char schema[] =
	"PRAGMA journal_mode=WAL;"
	"PRAGMA synchronous=NORMAL;"
	/* kiyot reads the store at start and writes it after: a page cache of SQLite's default
	 * 2 MiB would only grow with the rows (1.4 KB a pod); the kernel caches the file */
	"PRAGMA cache_size=-256;"
	"CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS sandboxes ("
	" id TEXT PRIMARY KEY, config BLOB NOT NULL, runtime_handler TEXT NOT NULL,"
	" state INTEGER NOT NULL, created_ns INTEGER NOT NULL, cell_id TEXT NOT NULL,"
	" ip TEXT NOT NULL, instance_type TEXT NOT NULL, sizing_reason TEXT NOT NULL,"
	" seq INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS containers ("
	" id TEXT PRIMARY KEY, sandbox_id TEXT NOT NULL, config BLOB NOT NULL,"
	" state INTEGER NOT NULL, created_ns INTEGER NOT NULL, started_ns INTEGER NOT NULL,"
	" finished_ns INTEGER NOT NULL, exit_code INTEGER NOT NULL, reason TEXT NOT NULL,"
	" message TEXT NOT NULL, image_ref TEXT NOT NULL, image_id TEXT NOT NULL,"
	" log_offset INTEGER NOT NULL, restart_count INTEGER NOT NULL, seq INTEGER NOT NULL,"
	" seccomp TEXT NOT NULL DEFAULT '', log_pos INTEGER NOT NULL DEFAULT 0,"
	" log_dev INTEGER NOT NULL DEFAULT 0, log_ino INTEGER NOT NULL DEFAULT 0,"
	" desired INTEGER NOT NULL DEFAULT -1, stop_timeout INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE IF NOT EXISTS images ("
	" id TEXT PRIMARY KEY, repo_tags TEXT NOT NULL, repo_digests TEXT NOT NULL,"
	" size INTEGER NOT NULL, user TEXT NOT NULL);"
	/* the burst rule's history: one row per cell of an owner's pod, with the highest
	 * usage the cell reported (reported 0: none yet) */
	"CREATE TABLE IF NOT EXISTS burst_pods ("
	" cell_id TEXT PRIMARY KEY, owner TEXT NOT NULL, created_ns INTEGER NOT NULL,"
	" reported INTEGER NOT NULL DEFAULT 0, cpu_milli INTEGER NOT NULL DEFAULT 0,"
	" memory_bytes INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX IF NOT EXISTS burst_pods_owner ON burst_pods (owner, created_ns);";

static int db_err(struct store *st, struct err *err, const char *what)
{
	return err_set(err, EIO, "state database: %s: %s", what, sqlite3_errmsg(st->db));
}

int store_dir_prepare(const char *dir, unsigned *loosened, struct err *err)
{
	struct stat st;

	*loosened = 0;
	if (fs_mkdir_p(dir, 0700, err) < 0)
		return -err->code;
	if (stat(dir, &st) < 0)
		return err_errno(err, "state directory %s", dir);
	if (!(st.st_mode & 077))
		return 0;
	if (chmod(dir, 0700) < 0)
		return err_errno(err, "state directory %s is %04o, open to other users; chmod 0700",
				 dir, (unsigned)(st.st_mode & 07777));
	*loosened = st.st_mode & 07777;
	return 0;
}

/* The database and SQLite's WAL and shared-memory files beside it, owner only. SQLite makes
 * the last two with the database's mode; ones an older kiyot left may be looser. */
static int db_files_private(const char *path, struct err *err)
{
	static const char *const suffix[] = { "", "-wal", "-shm" };

	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		_cleanup_free_ char *p = xasprintf("%s%s", path, suffix[i]);

		if (chmod(p, 0600) < 0 && (errno != ENOENT || !i))
			return err_errno(err, "state database %s: chmod 0600", p);
	}
	return 0;
}

/* Columns a database made by an older kiyot lacks: containers' seccomp profile, the file
 * their log went to, then what the cell is asked to do with them (-1: not stored). */
static int add_columns(struct store *st, const char *path, struct err *err)
{
	static const char *const cols[][2] = {
		{ "seccomp", "TEXT NOT NULL DEFAULT ''" },
		{ "log_pos", "INTEGER NOT NULL DEFAULT 0" },
		{ "log_dev", "INTEGER NOT NULL DEFAULT 0" },
		{ "log_ino", "INTEGER NOT NULL DEFAULT 0" },
		{ "desired", "INTEGER NOT NULL DEFAULT -1" },
		{ "stop_timeout", "INTEGER NOT NULL DEFAULT 0" },
	};

	for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
		_cleanup_free_ char *sql = xasprintf("ALTER TABLE containers ADD COLUMN %s %s",
						     cols[i][0], cols[i][1]);

		if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK &&
		    !strstr(sqlite3_errmsg(st->db), "duplicate column"))
			return err_set(err, EIO, "state database %s: add column containers.%s: %s",
				       path, cols[i][0], sqlite3_errmsg(st->db));
	}
	return 0;
}

int store_open(const char *path, struct store **out, struct err *err)
{
	struct store *st = xcalloc(1, sizeof(*st));
	char *msg = NULL;
	mode_t mask = umask(0077); /* a new database is the owner's alone from the start */
	int rc = sqlite3_open_v2(path, &st->db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
				 NULL);

	umask(mask);
	if (rc != SQLITE_OK) {
		err_set(err, EIO, "open state database %s: %s", path,
			st->db ? sqlite3_errmsg(st->db) : "out of memory");
		sqlite3_close(st->db);
		free(st);
		return -EIO;
	}
	sqlite3_busy_timeout(st->db, 5000);
	if (db_files_private(path, err) < 0) {
		sqlite3_close(st->db);
		free(st);
		return -err->code;
	}
	if (sqlite3_exec(st->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
		err_set(err, EIO, "state database %s: %s", path, msg ? msg : "schema failed");
		sqlite3_free(msg);
		sqlite3_close(st->db);
		free(st);
		return -EIO;
	}
	if (add_columns(st, path, err) < 0) {
		sqlite3_close(st->db);
		free(st);
		return -EIO;
	}
	*out = st;
	return 0;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	sqlite3_close(st->db);
	free(st);
}

/* Prepares sql, binds nothing; the caller binds and steps. */
static sqlite3_stmt *prep(struct store *st, const char *sql)
{
	sqlite3_stmt *s = NULL;

	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
		return NULL;
	return s;
}

static int step_done(struct store *st, sqlite3_stmt *s, const char *what, struct err *err)
{
	int rc = sqlite3_step(s);

	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return db_err(st, err, what);
	return 0;
}

static void bind_text(sqlite3_stmt *s, int i, const char *v)
{
	sqlite3_bind_text(s, i, v ? v : "", -1, SQLITE_TRANSIENT);
}

static void bind_msg(sqlite3_stmt *s, int i, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = xmalloc(n);

	protobuf_c_message_pack(m, buf);
	sqlite3_bind_blob(s, i, buf, (int)n, free);
}

int store_put_sandbox(struct store *st, const struct sandbox *sb, struct err *err)
{
	sqlite3_stmt *s = prep(st, "INSERT OR REPLACE INTO sandboxes VALUES (?,?,?,?,?,?,?,?,?,"
				   " COALESCE((SELECT seq FROM sandboxes WHERE id = ?1),"
				   " (SELECT IFNULL(MAX(seq), 0) + 1 FROM sandboxes)))");

	if (!s)
		return db_err(st, err, "save sandbox");
	bind_text(s, 1, sb->id);
	bind_msg(s, 2, &sb->config->base);
	bind_text(s, 3, sb->runtime_handler);
	sqlite3_bind_int(s, 4, sb->state);
	sqlite3_bind_int64(s, 5, sb->created_ns);
	bind_text(s, 6, sb->cell_id);
	bind_text(s, 7, sb->ip);
	bind_text(s, 8, sb->instance_type);
	bind_text(s, 9, sb->sizing_reason);
	return step_done(st, s, "save sandbox", err);
}

static int delete_by_id(struct store *st, const char *sql, const char *id, struct err *err)
{
	sqlite3_stmt *s = prep(st, sql);

	if (!s)
		return db_err(st, err, "delete");
	bind_text(s, 1, id);
	return step_done(st, s, "delete", err);
}

int store_delete_sandbox(struct store *st, const char *id, struct err *err)
{
	return delete_by_id(st, "DELETE FROM sandboxes WHERE id = ?", id, err);
}

/* A container's row; one that exists keeps its place (seq) and its log mark, which only
 * store_put_log_mark changes. */
int store_put_container(struct store *st, const struct container *c, struct err *err)
{
	sqlite3_stmt *s = prep(
		st,
		"INSERT INTO containers (id, sandbox_id, config, state, created_ns, started_ns,"
		" finished_ns, exit_code, reason, message, image_ref, image_id, log_offset,"
		" restart_count, seccomp, log_pos, log_dev, log_ino, desired, stop_timeout, seq)"
		" VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
		" (SELECT IFNULL(MAX(seq), 0) + 1 FROM containers))"
		" ON CONFLICT (id) DO UPDATE SET sandbox_id = excluded.sandbox_id,"
		" config = excluded.config, state = excluded.state,"
		" created_ns = excluded.created_ns, started_ns = excluded.started_ns,"
		" finished_ns = excluded.finished_ns, exit_code = excluded.exit_code,"
		" reason = excluded.reason, message = excluded.message,"
		" image_ref = excluded.image_ref, image_id = excluded.image_id,"
		" restart_count = excluded.restart_count, seccomp = excluded.seccomp,"
		" desired = excluded.desired, stop_timeout = excluded.stop_timeout");

	if (!s)
		return db_err(st, err, "save container");
	bind_text(s, 1, c->id);
	bind_text(s, 2, c->sandbox_id);
	bind_msg(s, 3, &c->config->base);
	sqlite3_bind_int(s, 4, c->state);
	sqlite3_bind_int64(s, 5, c->created_ns);
	sqlite3_bind_int64(s, 6, c->started_ns);
	sqlite3_bind_int64(s, 7, c->finished_ns);
	sqlite3_bind_int(s, 8, c->exit_code);
	bind_text(s, 9, c->reason);
	bind_text(s, 10, c->message);
	bind_text(s, 11, c->image_ref);
	bind_text(s, 12, c->image_id);
	sqlite3_bind_int64(s, 13, (sqlite3_int64)c->log_mark.offset);
	sqlite3_bind_int(s, 14, (int)c->restart_count);
	bind_text(s, 15, c->seccomp_profile ? c->seccomp_profile : "");
	sqlite3_bind_int64(s, 16, (sqlite3_int64)c->log_mark.pos);
	sqlite3_bind_int64(s, 17, (sqlite3_int64)c->log_mark.dev);
	sqlite3_bind_int64(s, 18, (sqlite3_int64)c->log_mark.ino);
	sqlite3_bind_int(s, 19, c->desired);
	sqlite3_bind_int64(s, 20, c->stop_timeout_s);
	return step_done(st, s, "save container", err);
}

int store_put_log_mark(struct store *st, const char *id, const struct log_mark *m, struct err *err)
{
	sqlite3_stmt *s = prep(st, "UPDATE containers SET log_offset = ?, log_pos = ?, log_dev = ?,"
				   " log_ino = ? WHERE id = ?");

	if (!s)
		return db_err(st, err, "save log position");
	sqlite3_bind_int64(s, 1, (sqlite3_int64)m->offset);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)m->pos);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)m->dev);
	sqlite3_bind_int64(s, 4, (sqlite3_int64)m->ino);
	bind_text(s, 5, id);
	return step_done(st, s, "save log position", err);
}

int store_delete_container(struct store *st, const char *id, struct err *err)
{
	return delete_by_id(st, "DELETE FROM containers WHERE id = ?", id, err);
}

int store_put_image(struct store *st, const struct image_rec *i, struct err *err)
{
	sqlite3_stmt *s = prep(st, "INSERT OR REPLACE INTO images VALUES (?,?,?,?,?)");

	if (!s)
		return db_err(st, err, "save image");
	bind_text(s, 1, i->id);
	bind_text(s, 2, i->repo_tags);
	bind_text(s, 3, i->repo_digests);
	sqlite3_bind_int64(s, 4, (sqlite3_int64)i->size);
	bind_text(s, 5, i->user);
	return step_done(st, s, "save image", err);
}

int store_delete_image(struct store *st, const char *id, struct err *err)
{
	return delete_by_id(st, "DELETE FROM images WHERE id = ?", id, err);
}

static char *col_text(sqlite3_stmt *s, int i)
{
	const unsigned char *t = sqlite3_column_text(s, i);

	return xstrdup(t ? (const char *)t : "");
}

static void *col_msg(sqlite3_stmt *s, int i, const ProtobufCMessageDescriptor *d)
{
	const void *blob = sqlite3_column_blob(s, i);
	int n = sqlite3_column_bytes(s, i);

	return protobuf_c_message_unpack(d, NULL, (size_t)n, blob ? blob : (const void *)"");
}

/* Appends a record to a loaded array. */
static void push(void ***v, size_t *n, size_t *cap, void *rec)
{
	xgrow((void **)v, cap, *n + 1, sizeof(**v));
	(*v)[(*n)++] = rec;
}

static int load_sandboxes(struct store *st, struct store_contents *out, struct err *err)
{
	sqlite3_stmt *s = prep(st, "SELECT id, config, runtime_handler, state, created_ns, cell_id,"
				   " ip, instance_type, sizing_reason FROM sandboxes ORDER BY seq");
	size_t cap = 0;
	int rc;

	if (!s)
		return db_err(st, err, "load sandboxes");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct sandbox *sb = xcalloc(1, sizeof(*sb));

		sb->id = col_text(s, 0);
		sb->config = col_msg(s, 1, &runtime__v1__pod_sandbox_config__descriptor);
		sb->runtime_handler = col_text(s, 2);
		sb->state = sqlite3_column_int(s, 3);
		sb->created_ns = sqlite3_column_int64(s, 4);
		sb->cell_id = col_text(s, 5);
		sb->ip = col_text(s, 6);
		sb->instance_type = col_text(s, 7);
		sb->sizing_reason = col_text(s, 8);
		if (!sb->config) {
			sandbox_free(sb);
			continue; /* unreadable row: skipped rather than crash */
		}
		push((void ***)&out->sandboxes, &out->n_sandboxes, &cap, sb);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_err(st, err, "load sandboxes");
}

/* What a container in this state was last asked for, for a record stored without it. */
static int desired_of_state(int state)
{
	switch (state) {
	case CTR_RUNNING:
		return DESIRED_RUNNING;
	case CTR_EXITED:
		return DESIRED_STOPPED;
	default:
		return DESIRED_CREATED;
	}
}

static int load_containers(struct store *st, struct store_contents *out, struct err *err)
{
	sqlite3_stmt *s = prep(st, "SELECT id, sandbox_id, config, state, created_ns, started_ns,"
				   " finished_ns, exit_code, reason, message, image_ref, image_id,"
				   " log_offset, restart_count, seccomp, log_pos, log_dev, log_ino,"
				   " desired, stop_timeout FROM containers ORDER BY seq");
	size_t cap = 0;
	int rc;

	if (!s)
		return db_err(st, err, "load containers");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct container *c = xcalloc(1, sizeof(*c));

		c->id = col_text(s, 0);
		c->sandbox_id = col_text(s, 1);
		c->config = col_msg(s, 2, &runtime__v1__container_config__descriptor);
		c->state = sqlite3_column_int(s, 3);
		c->created_ns = sqlite3_column_int64(s, 4);
		c->started_ns = sqlite3_column_int64(s, 5);
		c->finished_ns = sqlite3_column_int64(s, 6);
		c->exit_code = sqlite3_column_int(s, 7);
		c->reason = col_text(s, 8);
		c->message = col_text(s, 9);
		c->image_ref = col_text(s, 10);
		c->image_id = col_text(s, 11);
		c->log_mark.offset = (uint64_t)sqlite3_column_int64(s, 12);
		c->restart_count = (uint32_t)sqlite3_column_int(s, 13);
		c->seccomp_profile = col_text(s, 14);
		c->log_mark.pos = (uint64_t)sqlite3_column_int64(s, 15);
		c->log_mark.dev = (uint64_t)sqlite3_column_int64(s, 16);
		c->log_mark.ino = (uint64_t)sqlite3_column_int64(s, 17);
		c->desired = sqlite3_column_int(s, 18);
		c->stop_timeout_s = sqlite3_column_int64(s, 19);
		if (c->desired < DESIRED_CREATED || c->desired > DESIRED_REMOVED)
			c->desired = desired_of_state(c->state);
		if (!c->config) {
			container_free(c);
			continue;
		}
		push((void ***)&out->containers, &out->n_containers, &cap, c);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_err(st, err, "load containers");
}

static int load_images(struct store *st, struct store_contents *out, struct err *err)
{
	sqlite3_stmt *s = prep(st, "SELECT id, repo_tags, repo_digests, size, user FROM images");
	size_t cap = 0;
	int rc;

	if (!s)
		return db_err(st, err, "load images");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct image_rec *i = xcalloc(1, sizeof(*i));

		i->id = col_text(s, 0);
		i->repo_tags = col_text(s, 1);
		i->repo_digests = col_text(s, 2);
		i->size = (uint64_t)sqlite3_column_int64(s, 3);
		i->user = col_text(s, 4);
		push((void ***)&out->images, &out->n_images, &cap, i);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : db_err(st, err, "load images");
}

int store_load(struct store *st, struct store_contents *out, struct err *err)
{
	*out = (struct store_contents){ 0 };
	if (load_sandboxes(st, out, err) < 0 || load_containers(st, out, err) < 0 ||
	    load_images(st, out, err) < 0) {
		store_contents_release(out);
		return -err->code;
	}
	return 0;
}

void store_contents_release(struct store_contents *c)
{
	for (size_t i = 0; i < c->n_sandboxes; i++)
		sandbox_free(c->sandboxes[i]);
	for (size_t i = 0; i < c->n_containers; i++)
		container_free(c->containers[i]);
	for (size_t i = 0; i < c->n_images; i++)
		image_rec_free(c->images[i]);
	free(c->sandboxes);
	free(c->containers);
	free(c->images);
	*c = (struct store_contents){ 0 };
}

int store_get_meta(struct store *st, const char *key, char **out, struct err *err)
{
	sqlite3_stmt *s = prep(st, "SELECT value FROM meta WHERE key = ?");
	int rc;

	*out = NULL;
	if (!s)
		return db_err(st, err, "read meta");
	bind_text(s, 1, key);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*out = col_text(s, 0);
	sqlite3_finalize(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_err(st, err, "read meta");
	return 0;
}

int store_put_meta(struct store *st, const char *key, const char *value, struct err *err)
{
	sqlite3_stmt *s = prep(st, "INSERT OR REPLACE INTO meta VALUES (?, ?)");

	if (!s)
		return db_err(st, err, "write meta");
	bind_text(s, 1, key);
	bind_text(s, 2, value);
	return step_done(st, s, "write meta", err);
}

int store_del_meta(struct store *st, const char *key, struct err *err)
{
	sqlite3_stmt *s = prep(st, "DELETE FROM meta WHERE key = ?");

	if (!s)
		return db_err(st, err, "delete meta");
	bind_text(s, 1, key);
	return step_done(st, s, "delete meta", err);
}

int store_list_meta(struct store *st, const char *prefix, char ***keys, char ***values, size_t *n,
		    struct err *err)
{
	/* a range on the primary key: keys from the prefix up to the prefix with its last byte
	 * raised (no LIKE, whose wildcards a prefix could hold) */
	sqlite3_stmt *s = prep(st, "SELECT key, value FROM meta WHERE key >= ? AND key < ? "
				   "ORDER BY key");
	_cleanup_free_ char *end = xstrdup(prefix);
	size_t len = strlen(end), cap = 0, got = 0;
	char **k = NULL, **v = NULL;
	int rc;

	*keys = *values = NULL;
	*n = 0;
	if (!s)
		return db_err(st, err, "list meta");
	if (len)
		end[len - 1]++;
	bind_text(s, 1, prefix);
	bind_text(s, 2, len ? end : "\xff");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		xgrow((void **)&k, &cap, got + 1, sizeof(*k));
		v = xrealloc(v, cap * sizeof(*v));
		k[got] = col_text(s, 0);
		v[got++] = col_text(s, 1);
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		for (size_t i = 0; i < got; i++) {
			free(k[i]);
			free(v[i]);
		}
		free(k);
		free(v);
		return db_err(st, err, "list meta");
	}
	*keys = k;
	*values = v;
	*n = got;
	return 0;
}

/* Runs sql with one text and one integer bound (?1, ?2), to its end. */
static int exec_text_int(struct store *st, const char *sql, const char *t, int64_t i,
			 const char *what, struct err *err)
{
	sqlite3_stmt *s = prep(st, sql);

	if (!s)
		return db_err(st, err, what);
	bind_text(s, 1, t);
	sqlite3_bind_int64(s, 2, i);
	return step_done(st, s, what, err);
}

int store_burst_attach(struct store *st, const char *cell_id, const char *owner, int64_t created_ns,
		       int per_owner, int owners, struct err *err)
{
	const char *what = "record a pod for burst sizing";
	sqlite3_stmt *s = prep(st, "INSERT OR IGNORE INTO burst_pods (cell_id, owner, created_ns) "
				   "VALUES (?, ?, ?)");

	if (!s)
		return db_err(st, err, what);
	bind_text(s, 1, cell_id);
	bind_text(s, 2, owner);
	sqlite3_bind_int64(s, 3, created_ns);
	if (step_done(st, s, what, err) < 0)
		return -err->code;
	/* the owner's newest per_owner pods are kept */
	if (exec_text_int(st,
			  "DELETE FROM burst_pods WHERE owner = ?1 AND cell_id NOT IN (SELECT "
			  "cell_id FROM burst_pods WHERE owner = ?1 ORDER BY created_ns DESC, "
			  "cell_id DESC LIMIT ?2)",
			  owner, per_owner, what, err) < 0)
		return -err->code;
	/* and the owners whose newest pod is among the newest owners' */
	return exec_text_int(st,
			     "DELETE FROM burst_pods WHERE owner NOT IN (SELECT owner FROM "
			     "burst_pods GROUP BY owner ORDER BY owner = ?1 DESC, MAX(created_ns) "
			     "DESC, owner LIMIT ?2)",
			     owner, owners, what, err);
}

int store_burst_observe(struct store *st, const char *cell_id, int64_t cpu_milli,
			int64_t memory_bytes, struct err *err)
{
	const char *what = "record a pod's usage for burst sizing";
	/* written only when it raises a peak (or is the first with a CPU rate): most reports
	 * change nothing */
	sqlite3_stmt *s = prep(st, "UPDATE burst_pods SET reported = MAX(reported, ?4), cpu_milli "
				   "= MAX(cpu_milli, ?2), memory_bytes = MAX(memory_bytes, ?3) "
				   "WHERE cell_id = ?1 AND (reported < ?4 OR cpu_milli < ?2 OR "
				   "memory_bytes < ?3)");

	if (!s)
		return db_err(st, err, what);
	bind_text(s, 1, cell_id);
	sqlite3_bind_int64(s, 2, cpu_milli < 0 ? 0 : cpu_milli);
	sqlite3_bind_int64(s, 3, memory_bytes < 0 ? 0 : memory_bytes);
	sqlite3_bind_int(s, 4, cpu_milli >= 0);
	return step_done(st, s, what, err);
}

int store_burst_history(struct store *st, const char *owner, int64_t *pods, int64_t *cpu_milli,
			int64_t *memory_bytes, struct err *err)
{
	sqlite3_stmt *s = prep(st, "SELECT COUNT(*), COALESCE(MAX(cpu_milli), 0), "
				   "COALESCE(MAX(memory_bytes), 0) FROM burst_pods WHERE owner = ? "
				   "AND reported = 1");
	int rc;

	*pods = *cpu_milli = *memory_bytes = 0;
	if (!s)
		return db_err(st, err, "read burst sizing history");
	bind_text(s, 1, owner);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*pods = sqlite3_column_int64(s, 0);
		*cpu_milli = sqlite3_column_int64(s, 1);
		*memory_bytes = sqlite3_column_int64(s, 2);
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_ROW)
		return db_err(st, err, "read burst sizing history");
	return 0;
}
