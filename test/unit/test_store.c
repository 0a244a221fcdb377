/*
 * Unit tests for kiyot/store: what kiyot writes through to SQLite comes back the same after
 * a restart, so the kubelet sees the same sandboxes, containers and images as before.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "cri/cri.h"
#include "fsutil.h"
#include "state/state.h"
#include "state/store.h"
#include "xalloc.h"

/* A test's database in a fresh temp directory. */
struct fixture {
	char dir[64];
	char *path;
	struct store *st;
};

static int setup(void **state)
{
	struct fixture *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_store.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	f->path = xasprintf("%s/kiyot.db", f->dir);
	if (store_open(f->path, &f->st, &err) < 0) {
		print_error("%s\n", err.msg);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;

	store_close(f->st);
	fs_remove_tree(f->dir, &err);
	free(f->path);
	free(f);
	return 0;
}

/* Closes the store and opens the same file again, as a restarted kiyot does. */
static void reopen(struct fixture *f)
{
	struct err err = ERR_INIT;

	store_close(f->st);
	f->st = NULL;
	if (store_open(f->path, &f->st, &err) < 0)
		fail_msg("reopen %s: %s", f->path, err.msg);
}

/* ---- building records (all heap, freed with sandbox_free / container_free) ---- */

/* A CRI map of n key/value pairs with a message descriptor for its entries. */
static void **make_map(const ProtobufCMessageDescriptor *d, const char *const *kv, size_t *n)
{
	struct entry {
		ProtobufCMessage base;
		char *key;
		char *value;
	};
	size_t count = 0;
	void **map;

	while (kv[2 * count])
		count++;
	map = xcalloc(count + 1, sizeof(*map));
	for (size_t i = 0; i < count; i++) {
		struct entry *e = xcalloc(1, d->sizeof_message);

		d->message_init(&e->base);
		e->key = xstrdup(kv[2 * i]);
		e->value = xstrdup(kv[2 * i + 1]);
		map[i] = e;
	}
	*n = count;
	return map;
}

static struct sandbox *make_sandbox(const char *id, const char *name)
{
	static const char *const labels[] = { "app", "web", "io.kubernetes.pod.namespace", "shop",
					      NULL };
	static const char *const ann[] = { "pod.elotl.co/instance-type", "t3.nano", "note",
					   "line one\nline two: with colon", NULL };
	struct sandbox *s = xcalloc(1, sizeof(*s));
	Runtime__V1__PodSandboxConfig *c = xcalloc(1, sizeof(*c));

	runtime__v1__pod_sandbox_config__init(c);
	c->metadata = xcalloc(1, sizeof(*c->metadata));
	runtime__v1__pod_sandbox_metadata__init(c->metadata);
	c->metadata->name = xstrdup(name);
	c->metadata->namespace_ = xstrdup("shop");
	c->metadata->uid = xasprintf("uid-%s", id);
	c->metadata->attempt = 2;
	c->hostname = xstrdup(name);
	c->log_directory = xasprintf("/var/log/pods/shop_%s_uid", name);
	c->labels = (void *)make_map(&runtime__v1__pod_sandbox_config__labels_entry__descriptor,
				     labels, &c->n_labels);
	c->annotations =
		(void *)make_map(&runtime__v1__pod_sandbox_config__annotations_entry__descriptor,
				 ann, &c->n_annotations);
	s->id = xstrdup(id);
	s->config = c;
	s->runtime_handler = xstrdup("kiyot");
	s->state = SANDBOX_READY;
	s->created_ns = 1700000000123456789LL;
	s->cell_id = xasprintf("cell-%s", id);
	s->ip = xstrdup("10.77.0.5");
	s->instance_type = xstrdup("t3a.nano");
	s->sizing_reason = xstrdup("cheapest fitting 0.25 vCPU/0.40 GiB: t3a.nano $0.0047/h");
	return s;
}

static struct container *make_container(const char *id, const char *sandbox_id, const char *name)
{
	static const char *const labels[] = { "io.kubernetes.container.name", "app", "tier",
					      "front", NULL };
	static const char *const ann[] = { "io.kubernetes.container.restartCount", "3", NULL };
	struct container *c = xcalloc(1, sizeof(*c));
	Runtime__V1__ContainerConfig *cfg = xcalloc(1, sizeof(*cfg));

	runtime__v1__container_config__init(cfg);
	cfg->metadata = xcalloc(1, sizeof(*cfg->metadata));
	runtime__v1__container_metadata__init(cfg->metadata);
	cfg->metadata->name = xstrdup(name);
	cfg->image = xcalloc(1, sizeof(*cfg->image));
	runtime__v1__image_spec__init(cfg->image);
	cfg->image->image = xstrdup("registry.example/app:1.2");
	cfg->n_command = 2;
	cfg->command = xcalloc(3, sizeof(char *));
	cfg->command[0] = xstrdup("sh");
	cfg->command[1] = xstrdup("-c");
	cfg->log_path = xasprintf("%s/0.log", name);
	cfg->labels = (void *)make_map(&runtime__v1__container_config__labels_entry__descriptor,
				       labels, &cfg->n_labels);
	cfg->annotations =
		(void *)make_map(&runtime__v1__container_config__annotations_entry__descriptor, ann,
				 &cfg->n_annotations);
	c->id = xstrdup(id);
	c->sandbox_id = xstrdup(sandbox_id);
	c->config = cfg;
	c->state = CTR_EXITED;
	c->created_ns = 1700000001000000001LL;
	c->started_ns = 1700000002000000002LL;
	c->finished_ns = 1700000003000000003LL;
	c->exit_code = 137;
	c->reason = xstrdup("OOMKilled");
	c->message = xstrdup("memory limit 128 MiB");
	c->image_ref = xstrdup("registry.example/app@sha256:aaaa");
	c->image_id = xstrdup("sha256:bbbb");
	c->log_mark = (struct log_mark){ .offset = 5000000000ULL, /* past 32 bits */
					 .pos = 6000000000ULL,
					 .dev = 2049,
					 .ino = 9000000000ULL };
	c->restart_count = 3;
	return c;
}

/* Loads what the store holds into got (release with store_contents_release); the first
 * record of each kind, or NULL, in *s, *c and *i. */
static void load(struct fixture *f, struct store_contents *got, struct sandbox **s,
		 struct container **c, struct image_rec **i)
{
	struct err err = ERR_INIT;

	if (store_load(f->st, got, &err) < 0)
		fail_msg("store_load: %s", err.msg);
	*s = got->n_sandboxes ? got->sandboxes[0] : NULL;
	*c = got->n_containers ? got->containers[0] : NULL;
	*i = got->n_images ? got->images[0] : NULL;
}

static void put_sandbox(struct fixture *f, const struct sandbox *s)
{
	struct err err = ERR_INIT;

	if (store_put_sandbox(f->st, s, &err) < 0)
		fail_msg("store_put_sandbox: %s", err.msg);
}

static void put_container(struct fixture *f, const struct container *c)
{
	struct err err = ERR_INIT;

	if (store_put_container(f->st, c, &err) < 0)
		fail_msg("store_put_container: %s", err.msg);
}

/* Every field of a sandbox, its CRI config with labels and annotations included, survives. */
static void test_store__sandbox_round_trip(void **state)
{
	struct fixture *f = *state;
	struct store_contents got;
	struct sandbox *in = make_sandbox("sb1", "web"), *out = NULL;
	struct container *cs = NULL;
	struct image_rec *is = NULL;
	const Runtime__V1__PodSandboxConfig *c;

	in->state = SANDBOX_NOTREADY;
	put_sandbox(f, in);
	load(f, &got, &out, &cs, &is);
	assert_non_null(out);
	assert_int_equal(got.n_sandboxes, 1);
	assert_string_equal(out->id, "sb1");
	assert_string_equal(out->runtime_handler, "kiyot");
	assert_int_equal(out->state, SANDBOX_NOTREADY);
	assert_int_equal(out->created_ns, 1700000000123456789LL);
	assert_string_equal(out->cell_id, "cell-sb1");
	assert_string_equal(out->ip, "10.77.0.5");
	assert_string_equal(out->instance_type, "t3a.nano");
	assert_string_equal(out->sizing_reason, in->sizing_reason);
	c = out->config;
	assert_non_null(c);
	assert_string_equal(c->metadata->name, "web");
	assert_string_equal(c->metadata->namespace_, "shop");
	assert_string_equal(c->metadata->uid, "uid-sb1");
	assert_int_equal(c->metadata->attempt, 2);
	assert_string_equal(c->log_directory, "/var/log/pods/shop_web_uid");
	assert_int_equal(c->n_labels, 2);
	assert_string_equal(cri_map_get((void **)c->labels, c->n_labels, "app"), "web");
	assert_string_equal(cri_map_get((void **)c->labels, c->n_labels,
					"io.kubernetes.pod.namespace"),
			    "shop");
	assert_int_equal(c->n_annotations, 2);
	assert_string_equal(cri_map_get((void **)c->annotations, c->n_annotations, "note"),
			    "line one\nline two: with colon");
	assert_string_equal(cri_map_get((void **)c->annotations, c->n_annotations,
					"pod.elotl.co/instance-type"),
			    "t3.nano");
	assert_null(cs);
	assert_null(is);
	store_contents_release(&got);
	sandbox_free(in);
}

/* Every persisted field of a container comes back, its config's labels and annotations too. */
static void test_store__container_round_trip(void **state)
{
	struct fixture *f = *state;
	struct store_contents got;
	struct container *in = make_container("c1", "sb1", "app"), *out = NULL;
	struct sandbox *ss = NULL;
	struct image_rec *is = NULL;
	const Runtime__V1__ContainerConfig *c;

	in->desired = DESIRED_REMOVED;
	in->stop_timeout_s = 45;
	put_container(f, in);
	load(f, &got, &ss, &out, &is);
	assert_non_null(out);
	assert_int_equal(got.n_containers, 1);
	assert_string_equal(out->id, "c1");
	assert_string_equal(out->sandbox_id, "sb1");
	assert_int_equal(out->state, CTR_EXITED);
	assert_int_equal(out->created_ns, 1700000001000000001LL);
	assert_int_equal(out->started_ns, 1700000002000000002LL);
	assert_int_equal(out->finished_ns, 1700000003000000003LL);
	assert_int_equal(out->exit_code, 137);
	assert_string_equal(out->reason, "OOMKilled");
	assert_string_equal(out->message, "memory limit 128 MiB");
	assert_string_equal(out->image_ref, "registry.example/app@sha256:aaaa");
	assert_string_equal(out->image_id, "sha256:bbbb");
	assert_int_equal(out->log_mark.offset, 5000000000ULL);
	assert_int_equal(out->log_mark.pos, 6000000000ULL);
	assert_int_equal(out->log_mark.dev, 2049);
	assert_int_equal(out->log_mark.ino, 9000000000ULL);
	assert_int_equal(out->restart_count, 3);
	assert_int_equal(out->desired, DESIRED_REMOVED);
	assert_int_equal(out->stop_timeout_s, 45);
	c = out->config;
	assert_non_null(c);
	assert_string_equal(c->metadata->name, "app");
	assert_string_equal(c->image->image, "registry.example/app:1.2");
	assert_int_equal(c->n_command, 2);
	assert_string_equal(c->command[1], "-c");
	assert_string_equal(c->log_path, "app/0.log");
	assert_int_equal(c->n_labels, 2);
	assert_string_equal(cri_map_get((void **)c->labels, c->n_labels, "tier"), "front");
	assert_int_equal(c->n_annotations, 1);
	assert_string_equal(cri_map_get((void **)c->annotations, c->n_annotations,
					"io.kubernetes.container.restartCount"),
			    "3");
	assert_null(ss);
	store_contents_release(&got);
	container_free(in);
}

/* Images keep their tags, digests, size and user. */
static void test_store__image_round_trip(void **state)
{
	struct fixture *f = *state;
	struct store_contents got;
	struct image_rec in = { .id = "sha256:1111",
				.repo_tags = "docker.io/library/busybox:1\ndocker.io/library/"
					     "busybox:latest",
				.repo_digests = "docker.io/library/busybox@sha256:2222",
				.size = 4400000000ULL,
				.user = "65534" };
	struct image_rec *out = NULL;
	struct sandbox *ss = NULL;
	struct container *cs = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(store_put_image(f->st, &in, &err), 0);
	load(f, &got, &ss, &cs, &out);
	assert_non_null(out);
	assert_int_equal(got.n_images, 1);
	assert_string_equal(out->id, "sha256:1111");
	assert_string_equal(out->repo_tags, in.repo_tags);
	assert_string_equal(out->repo_digests, in.repo_digests);
	assert_int_equal(out->size, 4400000000ULL);
	assert_string_equal(out->user, "65534");

	/* deleted images stay deleted */
	store_contents_release(&got);
	assert_int_equal(store_delete_image(f->st, "sha256:1111", &err), 0);
	load(f, &got, &ss, &cs, &out);
	assert_null(out);
	store_contents_release(&got);
}

/* Meta keys: absent is NULL, a value can be replaced. */
static void test_store__meta(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	char *v = (char *)"sentinel";

	assert_int_equal(store_get_meta(f->st, "cluster-id", &v, &err), 0);
	assert_null(v);
	assert_int_equal(store_put_meta(f->st, "cluster-id", "abc", &err), 0);
	assert_int_equal(store_put_meta(f->st, "pod-cidr", "10.0.0.0/24", &err), 0);
	assert_int_equal(store_put_meta(f->st, "cluster-id", "def", &err), 0);
	assert_int_equal(store_get_meta(f->st, "cluster-id", &v, &err), 0);
	assert_string_equal(v, "def");
	free(v);
	assert_int_equal(store_get_meta(f->st, "pod-cidr", &v, &err), 0);
	assert_string_equal(v, "10.0.0.0/24");
	free(v);
	/* a key removed is absent, and removing it again is no error; others stay */
	assert_int_equal(store_del_meta(f->st, "cluster-id", &err), 0);
	assert_int_equal(store_del_meta(f->st, "cluster-id", &err), 0);
	assert_int_equal(store_get_meta(f->st, "cluster-id", &v, &err), 0);
	assert_null(v);
	assert_int_equal(store_get_meta(f->st, "pod-cidr", &v, &err), 0);
	assert_string_equal(v, "10.0.0.0/24");
	free(v);
}

/*
 * Lists come back in creation order (the kubelet and `kiyot get` list oldest first), and
 * saving a record again, as every state change does, does not move it to the end.
 */
static void test_store__order_is_creation_order(void **state)
{
	struct fixture *f = *state;
	struct store_contents got;
	const char *ids[] = { "zz", "aa", "mm", "bb" };
	struct sandbox *sb[4];
	struct container *ct[4];
	struct sandbox *ss = NULL;
	struct container *cs = NULL;
	struct image_rec *is = NULL;
	size_t i;

	for (i = 0; i < 4; i++) {
		sb[i] = make_sandbox(ids[i], ids[i]);
		ct[i] = make_container(ids[i], "sb", ids[i]);
		put_sandbox(f, sb[i]);
		put_container(f, ct[i]);
	}
	/* updates of the oldest records */
	sb[0]->state = SANDBOX_NOTREADY;
	put_sandbox(f, sb[0]);
	ct[0]->state = CTR_RUNNING;
	put_container(f, ct[0]);
	reopen(f);
	load(f, &got, &ss, &cs, &is);
	assert_int_equal(got.n_sandboxes, 4);
	for (i = 0; i < 4; i++)
		assert_string_equal(got.sandboxes[i]->id, ids[i]);
	assert_int_equal(got.n_containers, 4);
	for (i = 0; i < 4; i++)
		assert_string_equal(got.containers[i]->id, ids[i]);
	assert_int_equal(ss->state, SANDBOX_NOTREADY);
	assert_int_equal(cs->state, CTR_RUNNING);
	store_contents_release(&got);
	for (i = 0; i < 4; i++) {
		sandbox_free(sb[i]);
		container_free(ct[i]);
	}
}

/* Removed sandboxes and containers are gone after a restart; the others stay. */
static void test_store__delete(void **state)
{
	struct fixture *f = *state;
	struct store_contents got;
	struct sandbox *a = make_sandbox("a", "a"), *b = make_sandbox("b", "b");
	struct container *ca = make_container("ca", "a", "x"), *cb = make_container("cb", "b", "y");
	struct sandbox *ss = NULL;
	struct container *cs = NULL;
	struct image_rec *is = NULL;
	struct err err = ERR_INIT;

	put_sandbox(f, a);
	put_sandbox(f, b);
	put_container(f, ca);
	put_container(f, cb);
	assert_int_equal(store_delete_container(f->st, "ca", &err), 0);
	assert_int_equal(store_delete_sandbox(f->st, "a", &err), 0);
	/* deleting what is not there is not an error (CRI remove is idempotent) */
	assert_int_equal(store_delete_sandbox(f->st, "a", &err), 0);
	assert_int_equal(store_delete_container(f->st, "nope", &err), 0);
	reopen(f);
	load(f, &got, &ss, &cs, &is);
	assert_int_equal(got.n_sandboxes, 1);
	assert_string_equal(ss->id, "b");
	assert_int_equal(got.n_containers, 1);
	assert_string_equal(cs->id, "cb");
	store_contents_release(&got);
	sandbox_free(a);
	sandbox_free(b);
	container_free(ca);
	container_free(cb);
}

/* Where the log stands, written on its own (often, as log bytes arrive), is what a restart
 * resumes from; it touches nothing else of the container, and saving the container again
 * (every status change does) leaves it as it is. */
static void test_store__log_mark_update(void **state)
{
	struct fixture *f = *state;
	struct store_contents got;
	struct container *c = make_container("c1", "sb", "app");
	struct sandbox *ss = NULL;
	struct container *cs = NULL;
	struct image_rec *is = NULL;
	struct err err = ERR_INIT;

	struct log_mark m = { .offset = 12345678901ULL, .pos = 77, .dev = 3, .ino = 4 };

	c->log_mark = (struct log_mark){ .offset = 10 };
	put_container(f, c);
	assert_int_equal(store_put_log_mark(f->st, "c1", &m, &err), 0);
	assert_int_equal(store_put_log_mark(f->st, "unknown", &m, &err), 0);
	c->exit_code = 137;
	put_container(f, c);
	reopen(f);
	load(f, &got, &ss, &cs, &is);
	assert_int_equal(got.n_containers, 1);
	assert_int_equal(cs->log_mark.offset, 12345678901ULL);
	assert_int_equal(cs->log_mark.pos, 77);
	assert_int_equal(cs->log_mark.dev, 3);
	assert_int_equal(cs->log_mark.ino, 4);
	assert_int_equal(cs->exit_code, 137);
	assert_string_equal(cs->reason, "OOMKilled");
	assert_int_equal(cs->restart_count, 3);
	store_contents_release(&got);
	container_free(c);
}

/* A restarted kiyot (store closed, file reopened) sees every record and meta key it wrote. */
static void test_store__records_survive_a_restart(void **state)
{
	struct fixture *f = *state;
	struct store_contents got;
	struct sandbox *s = make_sandbox("sb1", "web");
	struct container *c = make_container("c1", "sb1", "app");
	struct image_rec img = { .id = "sha256:9",
				 .repo_tags = "a:1",
				 .repo_digests = "a@sha256:9",
				 .size = 1,
				 .user = "" };
	struct sandbox *ss = NULL;
	struct container *cs = NULL;
	struct image_rec *is = NULL;
	struct err err = ERR_INIT;
	char *v = NULL;

	put_sandbox(f, s);
	put_container(f, c);
	assert_int_equal(store_put_image(f->st, &img, &err), 0);
	assert_int_equal(store_put_meta(f->st, "cluster-id", "k1", &err), 0);
	reopen(f);
	load(f, &got, &ss, &cs, &is);
	assert_int_equal(got.n_sandboxes, 1);
	assert_string_equal(ss->config->metadata->name, "web");
	assert_string_equal(cri_map_get((void **)ss->config->labels, ss->config->n_labels, "app"),
			    "web");
	assert_int_equal(got.n_containers, 1);
	assert_string_equal(cs->sandbox_id, "sb1");
	assert_string_equal(cri_map_get((void **)cs->config->labels, cs->config->n_labels, "tier"),
			    "front");
	assert_non_null(is);
	assert_string_equal(is->repo_tags, "a:1");
	assert_int_equal(store_get_meta(f->st, "cluster-id", &v, &err), 0);
	assert_string_equal(v, "k1");
	free(v);
	store_contents_release(&got);
	sandbox_free(s);
	container_free(c);
}

/* Writes bytes into the config blob of one row, behind the store's back. */
static void corrupt_config(const char *path, const char *table, const char *id)
{
	static const unsigned char garbage[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
						 0xff, 0xff, 0xff, 0xff, 0x0a, 0xfe };
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	char sql[128];

	snprintf(sql, sizeof(sql), "UPDATE %s SET config = ? WHERE id = ?", table);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_blob(s, 1, garbage, sizeof(garbage), SQLITE_STATIC);
	sqlite3_bind_text(s, 2, id, -1, SQLITE_STATIC);
	assert_int_equal(sqlite3_step(s), SQLITE_DONE);
	assert_int_equal(sqlite3_changes(db), 1);
	sqlite3_finalize(s);
	sqlite3_close(db);
}

/* A row whose config no longer decodes is skipped; the other records still load. */
static void test_store__corrupt_row_is_skipped(void **state)
{
	struct fixture *f = *state;
	struct store_contents got;
	struct sandbox *s1 = make_sandbox("s1", "one"), *s2 = make_sandbox("s2", "two");
	struct container *c1 = make_container("c1", "s1", "a"),
			 *c2 = make_container("c2", "s2", "b");
	struct sandbox *ss = NULL;
	struct container *cs = NULL;
	struct image_rec *is = NULL;

	put_sandbox(f, s1);
	put_sandbox(f, s2);
	put_container(f, c1);
	put_container(f, c2);
	store_close(f->st);
	f->st = NULL;
	corrupt_config(f->path, "sandboxes", "s1");
	corrupt_config(f->path, "containers", "c2");
	reopen(f);
	load(f, &got, &ss, &cs, &is);
	assert_int_equal(got.n_sandboxes, 1);
	assert_string_equal(ss->id, "s2");
	assert_string_equal(ss->config->metadata->name, "two");
	assert_int_equal(got.n_containers, 1);
	assert_string_equal(cs->id, "c1");
	assert_string_equal(cs->config->metadata->name, "a");
	store_contents_release(&got);
	sandbox_free(s1);
	sandbox_free(s2);
	container_free(c1);
	container_free(c2);
}

/* A database path that cannot be created is an error naming the path, not a crash. */
static void test_store__open_error_names_the_path(void **state)
{
	struct store *st = NULL;
	struct err err = ERR_INIT;

	(void)state;
	assert_true(store_open("/nonexistent-dir-kiyot/sub/kiyot.db", &st, &err) < 0);
	assert_null(st);
	assert_non_null(strstr(err.msg, "/nonexistent-dir-kiyot/sub/kiyot.db"));
}

/* The mode bits of path, or -1 when it does not exist. */
static int mode_of(const char *path)
{
	struct stat st;

	return stat(path, &st) < 0 ? -1 : (int)(st.st_mode & 07777);
}

/* kiyot.db holds the key every cell's token derives from: it and SQLite's -wal and -shm files
 * are the owner's alone whatever the umask, and a database an older kiyot left 0644 is
 * tightened when opened. */
static void test_store__database_files_are_owner_only(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	const char *suffix[] = { "", "-wal", "-shm" };
	mode_t mask = umask(0022);

	store_close(f->st);
	f->st = NULL;
	fs_remove_tree(f->dir, &err);
	assert_int_equal(mkdir(f->dir, 0755), 0);
	assert_int_equal(store_open(f->path, &f->st, &err), 0);
	assert_int_equal(store_put_meta(f->st, "k", "v", &err), 0);
	for (size_t i = 0; i < 3; i++) {
		_cleanup_free_ char *p = xasprintf("%s%s", f->path, suffix[i]);

		assert_int_equal(mode_of(p), 0600);
		assert_int_equal(chmod(p, 0644), 0);
	}
	reopen(f);
	for (size_t i = 0; i < 3; i++) {
		_cleanup_free_ char *p = xasprintf("%s%s", f->path, suffix[i]);

		assert_int_equal(mode_of(p), 0600);
	}
	umask(mask);
}

/* The state directory is made 0700, and one that exists looser is tightened, saying how it
 * was. */
static void test_store__state_dir_is_owner_only(void **state)
{
	struct fixture *f = *state;
	_cleanup_free_ char *made = xasprintf("%s/a/state", f->dir);
	struct err err = ERR_INIT;
	unsigned loosened = 1;

	assert_int_equal(chmod(f->dir, 0755), 0);
	assert_int_equal(store_dir_prepare(f->dir, &loosened, &err), 0);
	assert_int_equal(loosened, 0755);
	assert_int_equal(mode_of(f->dir), 0700);
	assert_int_equal(store_dir_prepare(f->dir, &loosened, &err), 0);
	assert_int_equal(loosened, 0);
	assert_int_equal(store_dir_prepare(made, &loosened, &err), 0);
	assert_int_equal(loosened, 0);
	assert_int_equal(mode_of(made), 0700);
}

/* Runs sql on the database with a connection of its own (what another program, or damage,
 * does to the file). */
static void db_exec(struct fixture *f, const char *sql)
{
	sqlite3 *db = NULL;
	char *msg = NULL;

	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg);
	sqlite3_close(db);
}

/* A database whose tables are gone: every operation fails with EIO saying what it could not
 * do and why, nothing crashes, and a load hands back nothing. */
static void test_store__damaged_database_errors_say_what_failed(void **state)
{
	static const char *const want[] = {
		"state database: save sandbox: no such table: sandboxes",
		"state database: save container: no such table: containers",
		"state database: save image: no such table: images",
		"state database: save log position: no such table: containers",
		"state database: delete: no such table: sandboxes",
		"state database: delete: no such table: containers",
		"state database: delete: no such table: images",
		"state database: write meta: no such table: meta",
		"state database: read meta: no such table: meta",
		"state database: delete meta: no such table: meta",
		"state database: load sandboxes: no such table: sandboxes",
	};
	struct fixture *f = *state;
	struct sandbox *s = make_sandbox("sb-1", "web");
	struct container *c = make_container("ct-1", "sb-1", "app");
	struct image_rec img = {
		.id = "sha256:1", .repo_tags = "", .repo_digests = "", .size = 1, .user = ""
	};
	struct store_contents got = { .n_images = 99 };
	struct err err[ARRAY_SIZE(want)];
	char *meta = NULL;
	int ret[ARRAY_SIZE(want)];
	size_t i = 0;

	for (size_t j = 0; j < ARRAY_SIZE(want); j++)
		err[j] = (struct err)ERR_INIT;
	db_exec(f, "DROP TABLE sandboxes; DROP TABLE containers; DROP TABLE images; "
		   "DROP TABLE meta;");
	ret[i] = store_put_sandbox(f->st, s, &err[i]), i++;
	ret[i] = store_put_container(f->st, c, &err[i]), i++;
	ret[i] = store_put_image(f->st, &img, &err[i]), i++;
	ret[i] = store_put_log_mark(f->st, "ct-1", &(struct log_mark){ 0 }, &err[i]), i++;
	ret[i] = store_delete_sandbox(f->st, "sb-1", &err[i]), i++;
	ret[i] = store_delete_container(f->st, "ct-1", &err[i]), i++;
	ret[i] = store_delete_image(f->st, "sha256:1", &err[i]), i++;
	ret[i] = store_put_meta(f->st, "k", "v", &err[i]), i++;
	ret[i] = store_get_meta(f->st, "k", &meta, &err[i]), i++;
	ret[i] = store_del_meta(f->st, "k", &err[i]), i++;
	ret[i] = store_load(f->st, &got, &err[i]), i++;
	for (size_t j = 0; j < ARRAY_SIZE(want); j++) {
		assert_int_equal(ret[j], -EIO);
		assert_string_equal(err[j].msg, want[j]);
	}
	assert_null(meta);
	assert_null(got.sandboxes);
	assert_null(got.containers);
	assert_null(got.images);
	assert_int_equal(got.n_sandboxes + got.n_containers + got.n_images, 0);
	sandbox_free(s);
	container_free(c);
}

/* A file that is not a database is refused when opened, naming it; so is a directory. */
static void test_store__not_a_database_is_refused(void **state)
{
	struct fixture *f = *state;
	_cleanup_free_ char *junk = xasprintf("%s/junk.db", f->dir);
	struct store *st = NULL;
	struct err err = ERR_INIT;
	char text[4096];

	memset(text, 'x', sizeof(text));
	assert_int_equal(fs_write_file(junk, text, sizeof(text), 0600, &err), 0);
	assert_int_equal(store_open(junk, &st, &err), -EIO);
	assert_null(st);
	assert_non_null(strstr(err.msg, junk));
	assert_non_null(strstr(err.msg, "not a database"));
	assert_int_equal(store_open(f->dir, &st, &err), -EIO);
	assert_non_null(strstr(err.msg, f->dir));
}

/* A database of a kiyot from before containers kept their seccomp profile, the file their log
 * went to and what their cell was asked for opens, and its containers load with no profile,
 * their log offset alone, and what their state says they were asked for (an exited one:
 * stopped). */
static void test_store__older_database_gains_the_new_columns(void **state)
{
	struct fixture *f = *state;
	struct store_contents got;
	struct sandbox *s = NULL;
	struct container *c = make_container("ct-1", "sb-1", "app");
	struct image_rec *i = NULL;

	put_container(f, c);
	container_free(c);
	c = NULL;
	store_close(f->st);
	f->st = NULL;
	db_exec(f, "ALTER TABLE containers DROP COLUMN seccomp;"
		   "ALTER TABLE containers DROP COLUMN log_pos;"
		   "ALTER TABLE containers DROP COLUMN log_dev;"
		   "ALTER TABLE containers DROP COLUMN log_ino;"
		   "ALTER TABLE containers DROP COLUMN desired;"
		   "ALTER TABLE containers DROP COLUMN stop_timeout;");
	reopen(f);
	load(f, &got, &s, &c, &i);
	assert_int_equal(got.n_containers, 1);
	assert_string_equal(c->id, "ct-1");
	assert_string_equal(c->seccomp_profile, "");
	assert_int_equal(c->log_mark.offset, 5000000000ULL);
	assert_int_equal(c->log_mark.pos + c->log_mark.dev + c->log_mark.ino, 0);
	assert_int_equal(c->state, CTR_EXITED);
	assert_int_equal(c->desired, DESIRED_STOPPED);
	store_contents_release(&got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_store__sandbox_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store__container_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store__image_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store__meta, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store__order_is_creation_order, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store__delete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store__log_mark_update, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store__records_survive_a_restart, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store__corrupt_row_is_skipped, setup,
						teardown),
		cmocka_unit_test(test_store__open_error_names_the_path),
		cmocka_unit_test_setup_teardown(test_store__database_files_are_owner_only, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store__state_dir_is_owner_only, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store__damaged_database_errors_say_what_failed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_store__not_a_database_is_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_store__older_database_gains_the_new_columns,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
