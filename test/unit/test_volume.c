/*
 * Shipped volumes in the cell: requests that must be refused before anything is written, a
 * volume laid out as the kubelet's atomic writer does it, updated (the root directory keeps
 * its inode, the old timestamp directory goes, modes and links follow), one-file volumes
 * rewritten in place, and symlinks left on disk never followed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../cell-agent/volume.h"
#include "fsutil.h"
#include "xalloc.h"

#define MAX_ENTRIES 16

/* A request built by a test. */
struct req {
	Kiyot__Cell__V1__WriteVolumeRequest r;
	Kiyot__Cell__V1__FileEntry e[MAX_ENTRIES];
	Kiyot__Cell__V1__FileEntry *p[MAX_ENTRIES];
};

static char dir[64];

static void req_init(struct req *q, const char *name)
{
	memset(q, 0, sizeof(*q));
	kiyot__cell__v1__write_volume_request__init(&q->r);
	q->r.volume = (char *)name;
	q->r.entries = q->p;
}

/* type 'd', 'f' or 'l'; data is a file's content or a link's target */
static void add(struct req *q, const char *path, char type, unsigned mode, const char *data)
{
	Kiyot__Cell__V1__FileEntry *e = &q->e[q->r.n_entries];

	kiyot__cell__v1__file_entry__init(e);
	e->path = (char *)path;
	e->mode = mode;
	e->uid = e->gid = -1;
	e->type = type == 'd'	? KIYOT__CELL__V1__FILE_ENTRY__TYPE__DIR
		  : type == 'f' ? KIYOT__CELL__V1__FILE_ENTRY__TYPE__FILE
				: KIYOT__CELL__V1__FILE_ENTRY__TYPE__SYMLINK;
	if (type == 'f') {
		e->data.data = (uint8_t *)data;
		e->data.len = strlen(data);
	} else if (type == 'l') {
		e->target = (char *)data;
	}
	q->p[q->r.n_entries++] = e;
}

/* A configMap volume as the kubelet writes it, with keys and their values. */
static void configmap(struct req *q, const char *stamp, const char *a, const char *b)
{
	static char paths[3][64];

	req_init(q, "sv-config");
	add(q, "", 'd', 0777, NULL);
	snprintf(paths[0], sizeof(paths[0]), "%s", stamp);
	snprintf(paths[1], sizeof(paths[1]), "%s/a", stamp);
	snprintf(paths[2], sizeof(paths[2]), "%s/b", stamp);
	add(q, paths[0], 'd', 0755, NULL);
	add(q, paths[1], 'f', 0644, a);
	if (b)
		add(q, paths[2], 'f', 0400, b);
	add(q, "..data", 'l', 0777, stamp);
	add(q, "a", 'l', 0777, "..data/a");
	if (b)
		add(q, "b", 'l', 0777, "..data/b");
}

/* The scratch path of rel (caller frees). */
static char *at(const char *rel)
{
	return xasprintf("%s/%s", dir, rel);
}

static char *read_at(const char *rel)
{
	_cleanup_free_ char *path = at(rel);
	struct err err = ERR_INIT;
	char *buf = NULL;
	size_t len;

	if (fs_read_file(path, 1 << 20, &buf, &len, &err) < 0)
		return NULL;
	return buf;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/kiyot-volume-XXXXXX");
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int teardown(void **state)
{
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(fs_remove_tree(dir, &err), 0);
	return 0;
}

static void expect_refused(struct req *q, const char *needle)
{
	struct err err = ERR_INIT;
	unsigned w, r;
	_cleanup_free_ char *vdir = xasprintf("%s/vols", dir);

	assert_true(volume_write(vdir, &q->r, &w, &r, &err) < 0);
	if (!strstr(err.msg, needle))
		fail_msg("error \"%s\" lacks \"%s\"", err.msg, needle);
	/* nothing was written, not even the volumes directory */
	assert_false(fs_exists(vdir));
}

static void test_refuses_bad_requests(void **state)
{
	struct req q;

	(void)state;
	req_init(&q, "Bad_Name");
	add(&q, "", 'd', 0755, NULL);
	expect_refused(&q, "not a volume name");

	req_init(&q, "v");
	expect_refused(&q, "entries: required");

	req_init(&q, "v");
	add(&q, "x", 'd', 0755, NULL);
	expect_refused(&q, "must be the root");

	req_init(&q, "v");
	add(&q, "", 'l', 0777, "/etc");
	expect_refused(&q, "must be the root");

	const char *bad_paths[] = { "../x", "/abs", "a//b", "a/", "a/./b", "..kiyot-tmp" };
	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
		req_init(&q, "v");
		add(&q, "", 'd', 0755, NULL);
		add(&q, bad_paths[i], 'f', 0644, "x");
		expect_refused(&q, "not a relative path");
	}

	req_init(&q, "v");
	add(&q, "", 'd', 0755, NULL);
	add(&q, "a", 'f', 0644, "x");
	add(&q, "a", 'f', 0644, "y");
	expect_refused(&q, "listed twice");

	/* a file may not sit under a symlink the request makes: the link would be followed */
	req_init(&q, "v");
	add(&q, "", 'd', 0755, NULL);
	add(&q, "link", 'l', 0777, "/etc");
	add(&q, "link/passwd", 'f', 0644, "x");
	expect_refused(&q, "parent is not a directory");

	req_init(&q, "v");
	add(&q, "", 'd', 0755, NULL);
	add(&q, "a", 'f', 0104755, "x");
	expect_refused(&q, "beyond 07777");

	req_init(&q, "v");
	add(&q, "", 'f', 0644, "x");
	add(&q, "b", 'f', 0644, "y");
	expect_refused(&q, "one-file volume");
}

/* A scratch path that lives until the test ends. */
#define P(rel) (paths_keep[n_keep++] = at(rel))
static char *paths_keep[32];
static size_t n_keep;

static void test_atomic_writer_layout_and_update(void **state)
{
	_cleanup_free_ char *vdir = xasprintf("%s/vols", dir);
	struct err err = ERR_INIT;
	struct req q;
	struct stat st1, st2;
	unsigned w, r;
	char *s;

	(void)state;
	configmap(&q, "..2026_11_22_10_00_00.1", "one", "secret-1");
	assert_int_equal(volume_write(vdir, &q.r, &w, &r, &err), 0);
	assert_int_equal(w, 7);
	assert_int_equal(r, 0);
	s = read_at("vols/sv-config/a");
	assert_string_equal(s, "one");
	free(s);
	s = read_at("vols/sv-config/b");
	assert_string_equal(s, "secret-1");
	free(s);
	assert_int_equal(lstat(P("vols/sv-config/..data/b"), &st1), 0);
	assert_int_equal(st1.st_mode & 07777, 0400);
	assert_int_equal(lstat(P("vols/sv-config"), &st1), 0);
	assert_int_equal(st1.st_mode & 07777, 0777);

	/* the same request again changes nothing */
	assert_int_equal(volume_write(vdir, &q.r, &w, &r, &err), 0);
	assert_int_equal(w, 0);
	assert_int_equal(r, 0);

	/* the kubelet's next version: a new timestamp directory, key b gone */
	configmap(&q, "..2026_11_22_10_05_00.2", "two", NULL);
	assert_int_equal(volume_write(vdir, &q.r, &w, &r, &err), 0);
	s = read_at("vols/sv-config/a");
	assert_string_equal(s, "two");
	free(s);
	assert_null(read_at("vols/sv-config/b"));
	assert_false(fs_exists(P("vols/sv-config/..2026_11_22_10_00_00.1")));
	/* removed: the old timestamp directory and the b link */
	assert_int_equal(r, 2);
	assert_int_equal(lstat(P("vols/sv-config"), &st2), 0);
	assert_int_equal(st1.st_ino, st2.st_ino);
	while (n_keep)
		free(paths_keep[--n_keep]);
}

static void test_one_file_rewritten_in_place(void **state)
{
	_cleanup_free_ char *vdir = xasprintf("%s/vols", dir);
	_cleanup_free_ char *path = xasprintf("%s/vols/sv-hosts", dir);
	struct err err = ERR_INIT;
	struct req q;
	struct stat st1, st2;
	unsigned w, r;
	char *s;

	(void)state;
	req_init(&q, "sv-hosts");
	add(&q, "", 'f', 0644, "127.0.0.1 localhost\n");
	assert_int_equal(volume_write(vdir, &q.r, &w, &r, &err), 0);
	assert_int_equal(stat(path, &st1), 0);
	req_init(&q, "sv-hosts");
	add(&q, "", 'f', 0600, "10.0.0.1 web\n");
	assert_int_equal(volume_write(vdir, &q.r, &w, &r, &err), 0);
	assert_int_equal(w, 1);
	assert_int_equal(stat(path, &st2), 0);
	assert_int_equal(st1.st_ino, st2.st_ino);
	assert_int_equal(st2.st_mode & 07777, 0600);
	s = read_at("vols/sv-hosts");
	assert_string_equal(s, "10.0.0.1 web\n");
	free(s);
}

/* A symlink on disk where the request wants a directory is replaced, never written through. */
static void test_symlink_on_disk_not_followed(void **state)
{
	_cleanup_free_ char *vdir = xasprintf("%s/vols", dir);
	_cleanup_free_ char *outside = xasprintf("%s/outside", dir);
	_cleanup_free_ char *link = xasprintf("%s/vols/sv-x/sub", dir);
	_cleanup_free_ char *victim = xasprintf("%s/outside/f", dir);
	struct err err = ERR_INIT;
	struct req q;
	struct stat st;
	unsigned w, r;

	(void)state;
	req_init(&q, "sv-x");
	add(&q, "", 'd', 0755, NULL);
	add(&q, "sub", 'l', 0777, outside);
	assert_int_equal(volume_write(vdir, &q.r, &w, &r, &err), 0);
	assert_int_equal(mkdir(outside, 0755), 0);

	req_init(&q, "sv-x");
	add(&q, "", 'd', 0755, NULL);
	add(&q, "sub", 'd', 0755, NULL);
	add(&q, "sub/f", 'f', 0644, "in");
	assert_int_equal(volume_write(vdir, &q.r, &w, &r, &err), 0);
	assert_false(fs_exists(victim));
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_refuses_bad_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_atomic_writer_layout_and_update, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_one_file_rewritten_in_place, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_on_disk_not_followed, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
