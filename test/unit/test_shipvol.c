/*
 * Volumes for remote cells: which kubelet host paths become emptyDirs of the cell, which are
 * shipped and which are refused; snapshots of a directory laid out by the kubelet's atomic
 * writer (modes, symlinks, digest stable across reads and changed by an update), and bounds.
 */
#include <errno.h>
#include <fcntl.h>
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

#include "fsutil.h"
#include "cells/shipvol.h"
#include "xalloc.h"

#define UID "0b7c2a1e-5d2f-4e8a-9c1b-2f0e6d4a8b31"
#define PODS "/var/lib/kubelet/pods/" UID

static char dir[64];

static void classify_ok(const char *path, enum shipvol_kind want, const char *prefix)
{
	char name[SHIPVOL_NAME_MAX];
	enum shipvol_kind kind;
	struct err err = ERR_INIT;

	if (shipvol_classify(UID, path, &kind, name, &err) < 0)
		fail_msg("%s: %s", path, err.msg);
	assert_int_equal(kind, want);
	assert_memory_equal(name, prefix, strlen(prefix));
}

static void classify_refused(const char *path, const char *needle)
{
	char name[SHIPVOL_NAME_MAX];
	enum shipvol_kind kind;
	struct err err = ERR_INIT;

	assert_true(shipvol_classify(UID, path, &kind, name, &err) < 0);
	assert_int_equal(err.code, EINVAL);
	if (!strstr(err.msg, needle))
		fail_msg("error \"%s\" lacks \"%s\"", err.msg, needle);
}

static void test_classify(void **state)
{
	char a[SHIPVOL_NAME_MAX], b[SHIPVOL_NAME_MAX];
	enum shipvol_kind kind;
	struct err err = ERR_INIT;

	(void)state;
	classify_ok(PODS "/volumes/kubernetes.io~empty-dir/cache", SHIPVOL_EMPTY_DIR, "ed-cache");
	classify_ok(PODS "/volumes/kubernetes.io~configmap/config", SHIPVOL_SHIPPED, "sv-");
	classify_ok(PODS "/volumes/kubernetes.io~secret/creds", SHIPVOL_SHIPPED, "sv-");
	classify_ok(PODS "/volumes/kubernetes.io~projected/kube-api-access-x2x9z", SHIPVOL_SHIPPED,
		    "sv-");
	classify_ok(PODS "/volumes/kubernetes.io~downward-api/podinfo", SHIPVOL_SHIPPED, "sv-");
	classify_ok(PODS "/etc-hosts", SHIPVOL_SHIPPED, "sv-");
	classify_ok(PODS "/containers/web/5f1d7c2b", SHIPVOL_SHIPPED, "sv-");
	classify_ok(PODS "/volume-subpaths/config/web/0", SHIPVOL_SHIPPED, "sv-");
	classify_refused("/var/log", "hostPath");
	classify_refused("/var/lib/kubelet/pods/another-uid/etc-hosts", "hostPath");
	classify_refused(PODS "/volumes/kubernetes.io~csi/pvc-1/mount", "kubernetes.io~csi");
	classify_refused(PODS "/volumes/kubernetes.io~empty-dir/Bad_Name", "emptyDir");

	/* names are stable per path and differ between paths */
	assert_int_equal(shipvol_classify(UID, PODS "/etc-hosts", &kind, a, &err), 0);
	assert_int_equal(shipvol_classify(UID, PODS "/etc-hosts", &kind, b, &err), 0);
	assert_string_equal(a, b);
	assert_int_equal(strlen(a), 19);
	assert_int_equal(shipvol_classify(UID, PODS "/containers/web/1", &kind, b, &err), 0);
	assert_string_not_equal(a, b);
}

static void put(const char *rel, const char *data, mode_t mode)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, rel);
	struct err err = ERR_INIT;

	assert_int_equal(fs_write_file(path, data, strlen(data), mode, &err), 0);
}

static void link_at(const char *target, const char *rel)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, rel);

	unlink(path);
	assert_int_equal(symlink(target, path), 0);
}

static const Kiyot__Cell__V1__FileEntry *entry(const struct shipvol_snapshot *s, const char *p)
{
	for (size_t i = 0; i < s->req.n_entries; i++)
		if (strcmp(s->req.entries[i]->path, p) == 0)
			return s->req.entries[i];
	fail_msg("no entry %s", p);
	return NULL;
}

static void test_snapshot_of_atomic_writer_dir(void **state)
{
	_cleanup_free_ char *ts1 = xasprintf("%s/..2026_11_22_10_00_00.1", dir);
	_cleanup_free_ char *ts2 = xasprintf("%s/..2026_11_22_10_05_00.2", dir);
	struct shipvol_snapshot s1, s2, s3;
	struct err err = ERR_INIT;
	const Kiyot__Cell__V1__FileEntry *e;

	(void)state;
	assert_int_equal(mkdir(ts1, 0755), 0);
	put("..2026_11_22_10_00_00.1/key", "v1", 0400);
	link_at("..2026_11_22_10_00_00.1", "..data");
	link_at("..data/key", "key");
	assert_int_equal(shipvol_snapshot(dir, "sv-1", &s1, &err), 0);
	assert_string_equal(s1.req.volume, "sv-1");
	assert_int_equal(s1.req.n_entries, 5);
	assert_string_equal(s1.req.entries[0]->path, "");
	assert_int_equal(s1.req.entries[0]->type, KIYOT__CELL__V1__FILE_ENTRY__TYPE__DIR);
	e = entry(&s1, "..2026_11_22_10_00_00.1/key");
	assert_int_equal(e->type, KIYOT__CELL__V1__FILE_ENTRY__TYPE__FILE);
	assert_int_equal(e->mode, 0400);
	assert_int_equal(e->data.len, 2);
	assert_memory_equal(e->data.data, "v1", 2);
	e = entry(&s1, "key");
	assert_int_equal(e->type, KIYOT__CELL__V1__FILE_ENTRY__TYPE__SYMLINK);
	assert_string_equal(e->target, "..data/key");

	/* read again: the same digest */
	assert_int_equal(shipvol_snapshot(dir, "sv-1", &s2, &err), 0);
	assert_memory_equal(s1.digest, s2.digest, sizeof(s1.digest));

	/* the kubelet's update: a new timestamp directory, ..data swapped */
	assert_int_equal(mkdir(ts2, 0755), 0);
	put("..2026_11_22_10_05_00.2/key", "v2", 0400);
	link_at("..2026_11_22_10_05_00.2", "..data");
	assert_int_equal(shipvol_snapshot(dir, "sv-1", &s3, &err), 0);
	assert_memory_not_equal(s1.digest, s3.digest, sizeof(s1.digest));
	shipvol_snapshot_release(&s1);
	shipvol_snapshot_release(&s2);
	shipvol_snapshot_release(&s3);
}

static void test_snapshot_of_one_file_and_errors(void **state)
{
	_cleanup_free_ char *hosts = xasprintf("%s/etc-hosts", dir);
	_cleanup_free_ char *missing = xasprintf("%s/nope", dir);
	struct shipvol_snapshot s;
	struct err err = ERR_INIT;

	(void)state;
	put("etc-hosts", "127.0.0.1 localhost\n", 0644);
	assert_int_equal(shipvol_snapshot(hosts, "sv-2", &s, &err), 0);
	assert_int_equal(s.req.n_entries, 1);
	assert_int_equal(s.req.entries[0]->type, KIYOT__CELL__V1__FILE_ENTRY__TYPE__FILE);
	assert_int_equal(s.bytes, 20);
	shipvol_snapshot_release(&s);

	assert_true(shipvol_snapshot(missing, "sv-3", &s, &err) < 0);
	assert_int_equal(err.code, ENOENT);
	assert_non_null(strstr(err.msg, missing));
}

/* What a volume may hold is bounded: too many files, too many bytes or too deep a tree is
 * E2BIG naming the volume and the bound; files that are no content (a fifo) are left out. */
static void test_snapshot_bounds(void **state)
{
	_cleanup_free_ char *files = xasprintf("%s/many", dir);
	_cleanup_free_ char *big = xasprintf("%s/big", dir);
	_cleanup_free_ char *deep = xasprintf("%s/deep", dir);
	_cleanup_free_ char *plain = xasprintf("%s/plain", dir);
	_cleanup_free_ char *fifo = xasprintf("%s/plain/pipe", dir);
	struct shipvol_snapshot s;
	struct err err = ERR_INIT;
	char path[4096];
	int fd;

	(void)state;
	/* SHIPVOL_MAX_ENTRIES: the directory itself and as many empty files */
	assert_int_equal(mkdir(files, 0755), 0);
	for (int i = 0; i < SHIPVOL_MAX_ENTRIES; i++) {
		snprintf(path, sizeof(path), "%s/f%d", files, i);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		close(fd);
	}
	assert_int_equal(shipvol_snapshot(files, "sv-4", &s, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "more than 8192 files"));
	assert_non_null(strstr(err.msg, files));

	/* SHIPVOL_MAX_BYTES: a file one byte past it (sparse: nothing is read) */
	assert_int_equal(mkdir(big, 0755), 0);
	snprintf(path, sizeof(path), "%s/blob", big);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)SHIPVOL_MAX_BYTES + 1), 0);
	close(fd);
	err_clear(&err);
	assert_int_equal(shipvol_snapshot(big, "sv-5", &s, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "bytes of files"));

	/* SHIPVOL_MAX_DEPTH directories below the volume's and one more */
	snprintf(path, sizeof(path), "%s", deep);
	for (int i = 0; i <= SHIPVOL_MAX_DEPTH + 1; i++) {
		assert_int_equal(mkdir(path, 0755), 0);
		snprintf(path + strlen(path), sizeof(path) - strlen(path), "/d");
	}
	err_clear(&err);
	assert_int_equal(shipvol_snapshot(deep, "sv-6", &s, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "deeper than 32 directories"));

	assert_int_equal(mkdir(plain, 0755), 0);
	assert_int_equal(mkfifo(fifo, 0644), 0);
	put("plain/file", "x", 0644);
	assert_int_equal(shipvol_snapshot(plain, "sv-7", &s, &err), 0);
	assert_int_equal(s.req.n_entries, 2); /* the directory and the file */
	entry(&s, "file");
	shipvol_snapshot_release(&s);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/kiyot-shipvol-XXXXXX");
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_classify),
		cmocka_unit_test_setup_teardown(test_snapshot_of_atomic_writer_dir, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_of_one_file_and_errors, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_bounds, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
