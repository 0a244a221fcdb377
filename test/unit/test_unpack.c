/*
 * Layer unpacking: whiteouts, opaque directories, symbolic links resolved inside the root, and
 * entries that try to escape it.
 * Layers are written in the test with libarchive's writer (gzip, zstd and plain tar).
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "unpack.h"
#include "fsutil.h"
#include "xalloc.h"

/* One entry of a layer written by the test. */
struct tent {
	const char *path;
	char type;	  /* 'f' file, 'd' dir, 'l' symlink, 'h' hard link */
	const char *data; /* file content, or link target */
	int mode;
};

struct fixture {
	char dir[64];	 /* scratch directory */
	char root[128];	 /* the root file system being built */
	char layer[128]; /* the layer file */
};

enum layer_filter {
	LAYER_GZIP,
	LAYER_ZSTD,
	LAYER_PLAIN
};

/* Writes entries as a tar layer at path. */
static void write_layer(const char *path, enum layer_filter filter, const struct tent *ents,
			size_t n)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();

	archive_write_set_format_pax_restricted(a);
	if (filter == LAYER_GZIP)
		archive_write_add_filter_gzip(a);
	else if (filter == LAYER_ZSTD)
		assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		const struct tent *t = &ents[i];
		size_t len = t->type == 'f' && t->data ? strlen(t->data) : 0;

		archive_entry_clear(e);
		archive_entry_set_pathname(e, t->path);
		archive_entry_set_uid(e, 1000 + (int64_t)i);
		archive_entry_set_gid(e, 2000);
		archive_entry_set_mtime(e, 1700000000, 0);
		switch (t->type) {
		case 'd':
			archive_entry_set_filetype(e, AE_IFDIR);
			archive_entry_set_perm(e, t->mode ? t->mode : 0755);
			break;
		case 'l':
			archive_entry_set_filetype(e, AE_IFLNK);
			archive_entry_set_symlink(e, t->data);
			archive_entry_set_perm(e, 0777);
			break;
		case 'h':
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_hardlink(e, t->data);
			archive_entry_set_perm(e, 0644);
			break;
		default:
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_perm(e, t->mode ? t->mode : 0644);
			archive_entry_set_size(e, (int64_t)len);
		}
		assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
		if (len)
			assert_int_equal(archive_write_data(a, t->data, len), (ssize_t)len);
	}
	archive_entry_free(e);
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
}

static int setup(void **state)
{
	struct fixture *f = xcalloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_unpack.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
	snprintf(f->layer, sizeof(f->layer), "%s/layer.tar", f->dir);
	assert_int_equal(mkdir(f->root, 0755), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;

	fs_remove_tree(f->dir, &err);
	free(f);
	return 0;
}

/* Applies entries as one layer; returns unpack_layer's result. */
static int apply(struct fixture *f, enum layer_filter filter, const struct tent *ents, size_t n,
		 struct err *err)
{
	write_layer(f->layer, filter, ents, n);
	return unpack_layer(f->root, f->layer, "sha256:test", 0, err);
}

/* Reads root-relative path into a static buffer ("" if missing). */
static const char *content(struct fixture *f, const char *rel)
{
	static char data[256];
	char path[256];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", f->root, rel);
	data[0] = '\0';
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return data;
	n = read(fd, data, sizeof(data) - 1);
	close(fd);
	data[n > 0 ? n : 0] = '\0';
	return data;
}

static bool exists(struct fixture *f, const char *rel)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", f->root, rel);
	return lstat(path, &st) == 0;
}

static void test_unpack__files_dirs_links_modes_and_owners(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	const struct tent l[] = {
		{ "/etc/", 'd', NULL, 0750 },
		{ "./etc/motd", 'f', "hello\n", 0640 },
		{ "bin/tool", 'f', "#!/bin/sh\n", 04755 },
		{ "usr/lib/libx.so", 'l', "../../bin/tool", 0 },
		{ "bin/tool2", 'h', "bin/tool", 0 },
	};
	struct stat st;
	char path[256], target[64];
	ssize_t n;

	assert_int_equal(apply(f, LAYER_GZIP, l, ARRAY_SIZE(l), &err), 0);
	assert_string_equal(content(f, "etc/motd"), "hello\n");
	snprintf(path, sizeof(path), "%s/etc", f->root);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0750);
	snprintf(path, sizeof(path), "%s/etc/motd", f->root);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	if (geteuid() == 0) {
		assert_int_equal(st.st_uid, 1001);
		assert_int_equal(st.st_gid, 2000);
	}
	assert_int_equal(st.st_mtime, 1700000000);
	snprintf(path, sizeof(path), "%s/bin/tool", f->root);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 04755);
	assert_int_equal(st.st_nlink, 2);
	snprintf(path, sizeof(path), "%s/usr/lib/libx.so", f->root);
	n = readlink(path, target, sizeof(target) - 1);
	assert_true(n > 0);
	target[n] = '\0';
	assert_string_equal(target, "../../bin/tool");
}

static void test_unpack__zstd_and_plain_tar_are_detected(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	const struct tent a[] = { { "a", 'f', "zstd", 0 } };
	const struct tent b[] = { { "b", 'f', "plain", 0 } };

	assert_int_equal(apply(f, LAYER_ZSTD, a, 1, &err), 0);
	assert_int_equal(apply(f, LAYER_PLAIN, b, 1, &err), 0);
	assert_string_equal(content(f, "a"), "zstd");
	assert_string_equal(content(f, "b"), "plain");
}

static void test_unpack__whiteout_deletes_lower_entry(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	const struct tent l1[] = {
		{ "etc/keep", 'f', "k", 0 },
		{ "etc/gone", 'f', "g", 0 },
		{ "var/cache/x/y", 'f', "y", 0 },
	};
	const struct tent l2[] = {
		{ "etc/.wh.gone", 'f', "", 0 },
		{ "var/.wh.cache", 'f', "", 0 },
		{ "nothere/.wh.x", 'f', "", 0 },
	};

	assert_int_equal(apply(f, LAYER_GZIP, l1, ARRAY_SIZE(l1), &err), 0);
	assert_int_equal(apply(f, LAYER_GZIP, l2, ARRAY_SIZE(l2), &err), 0);
	assert_true(exists(f, "etc/keep"));
	assert_false(exists(f, "etc/gone"));
	assert_false(exists(f, "etc/.wh.gone"));
	assert_false(exists(f, "var/cache"));
	assert_true(exists(f, "var"));
	assert_false(exists(f, "nothere"));
}

static void test_unpack__opaque_dir_hides_lower_content_only(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	const struct tent l1[] = {
		{ "app/old1", 'f', "1", 0 },
		{ "app/sub/old2", 'f', "2", 0 },
		{ "other/stay", 'f', "s", 0 },
	};
	/* the new file comes before the marker: it must survive */
	const struct tent l2[] = {
		{ "app/", 'd', NULL, 0 },
		{ "app/new", 'f', "n", 0 },
		{ "app/.wh..wh..opq", 'f', "", 0 },
	};

	assert_int_equal(apply(f, LAYER_GZIP, l1, ARRAY_SIZE(l1), &err), 0);
	assert_int_equal(apply(f, LAYER_GZIP, l2, ARRAY_SIZE(l2), &err), 0);
	assert_false(exists(f, "app/old1"));
	assert_false(exists(f, "app/sub"));
	assert_false(exists(f, "app/.wh..wh..opq"));
	assert_string_equal(content(f, "app/new"), "n");
	assert_true(exists(f, "other/stay"));
}

static void test_unpack__upper_layer_replaces_file_with_dir_and_back(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	const struct tent l1[] = { { "x", 'f', "file", 0 }, { "y/z", 'f', "z", 0 } };
	const struct tent l2[] = { { "x", 'd', NULL, 0 },
				   { "x/inner", 'f', "i", 0 },
				   { "y", 'f', "now a file", 0 } };

	assert_int_equal(apply(f, LAYER_GZIP, l1, ARRAY_SIZE(l1), &err), 0);
	assert_int_equal(apply(f, LAYER_GZIP, l2, ARRAY_SIZE(l2), &err), 0);
	assert_string_equal(content(f, "x/inner"), "i");
	assert_string_equal(content(f, "y"), "now a file");
}

static void test_unpack__dotdot_entry_is_refused(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	char outside[256];
	const struct tent l[] = { { "ok", 'f', "ok", 0 }, { "../x", 'f', "evil", 0 } };
	const struct tent l2[] = { { "d/", 'd', NULL, 0 }, { "d/../../y", 'f', "evil", 0 } };

	snprintf(outside, sizeof(outside), "%s/x", f->dir);
	assert_true(apply(f, LAYER_GZIP, l, ARRAY_SIZE(l), &err) < 0);
	assert_int_equal(err.code, EXDEV);
	assert_non_null(strstr(err.msg, "layer sha256:test: entry ../x escapes the root"));
	assert_false(fs_exists(outside));

	/* ".." inside a name is malformed too, even where it would stay in the root */
	err_clear(&err);
	assert_true(apply(f, LAYER_GZIP, l2, ARRAY_SIZE(l2), &err) < 0);
	assert_non_null(strstr(err.msg, "entry d/../../y escapes the root"));
	assert_false(exists(f, "y"));
}

/* Whether path exists on the host (not under the root). */
static bool host_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static void test_unpack__symlinks_resolve_inside_the_root(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	char outside[256], inside[256];
	bool host_etc_x = host_exists("/etc/x");
	/* a -> the scratch dir by its absolute host path: inside the root that path is new */
	const struct tent l[] = {
		{ "a", 'l', f->dir, 0 },
		{ "a/escaped", 'f', "in", 0 },
	};
	const struct tent l2[] = {
		{ "b", 'l', "/", 0 },
		{ "b/etc/x", 'f', "etc-x", 0 },
	};
	const struct tent l3[] = {
		{ "c", 'l', "../..", 0 },
		{ "c/x", 'f', "top-x", 0 },
	};

	snprintf(outside, sizeof(outside), "%s/escaped", f->dir);
	snprintf(inside, sizeof(inside), "%s/escaped", f->dir + 1);
	if (apply(f, LAYER_GZIP, l, ARRAY_SIZE(l), &err) < 0)
		fail_msg("%s", err.msg);
	assert_false(host_exists(outside));
	assert_string_equal(content(f, inside), "in");

	if (apply(f, LAYER_GZIP, l2, ARRAY_SIZE(l2), &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(content(f, "etc/x"), "etc-x");
	assert_int_equal(host_exists("/etc/x"), host_etc_x);

	if (apply(f, LAYER_GZIP, l3, ARRAY_SIZE(l3), &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(content(f, "x"), "top-x");
	snprintf(outside, sizeof(outside), "%s/x", f->dir);
	assert_false(host_exists(outside));
}

static void test_unpack__later_layer_writes_through_absolute_symlink(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	char path[256];
	struct stat st;
	bool host_run_x = host_exists("/run/x");
	bool host_run_lock_y = host_exists("/run/lock/y");
	/* Debian's /var/run -> /run; /var/lock -> /run/lock before run/lock exists */
	const struct tent l1[] = {
		{ "run/", 'd', NULL, 0 },
		{ "var/", 'd', NULL, 0 },
		{ "var/run", 'l', "/run", 0 },
		{ "var/lock", 'l', "/run/lock", 0 },
	};
	const struct tent l2[] = {
		{ "var/run/x", 'f', "pid", 0 },
		{ "var/lock/y", 'f', "lock", 0 },
	};

	assert_int_equal(apply(f, LAYER_GZIP, l1, ARRAY_SIZE(l1), &err), 0);
	if (apply(f, LAYER_GZIP, l2, ARRAY_SIZE(l2), &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(content(f, "run/x"), "pid");
	assert_string_equal(content(f, "run/lock/y"), "lock");
	snprintf(path, sizeof(path), "%s/var/run", f->root);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISLNK(st.st_mode)); /* the link is kept, not replaced by a directory */
	assert_int_equal(host_exists("/run/x"), host_run_x);
	assert_int_equal(host_exists("/run/lock/y"), host_run_lock_y);
}

static void test_unpack__symlink_loop_is_refused(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	const struct tent l[] = {
		{ "p", 'l', "q", 0 },
		{ "q", 'l', "/p", 0 },
		{ "p/x", 'f', "x", 0 },
	};

	assert_true(apply(f, LAYER_GZIP, l, ARRAY_SIZE(l), &err) < 0);
	assert_int_equal(err.code, ELOOP);
	assert_non_null(strstr(err.msg, "layer sha256:test: entry p/x: too many symbolic links"));
}

static void test_unpack__symlink_inside_root_is_followed(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	const struct tent l[] = {
		{ "usr/lib/", 'd', NULL, 0 },
		{ "lib", 'l', "usr/lib", 0 },
		{ "lib/libc.so", 'f', "c", 0 },
	};

	assert_int_equal(apply(f, LAYER_GZIP, l, ARRAY_SIZE(l), &err), 0);
	assert_string_equal(content(f, "usr/lib/libc.so"), "c");
}

static void test_unpack__hardlink_escape_is_refused(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	char secret[256], path[256];
	struct stat st, st2;
	const struct tent l[] = { { "stolen", 'h', "../secret", 0 } };
	/* through a link to the host path of the secret: resolved in the root, nothing there */
	const struct tent l2[] = {
		{ "up", 'l', f->dir, 0 },
		{ "stolen2", 'h', "up/secret", 0 },
	};
	/* through a link to "/": resolved in the root, it names the image's own file */
	const struct tent l3[] = {
		{ "data/f", 'f', "mine", 0 },
		{ "top", 'l', "/", 0 },
		{ "hl", 'h', "top/data/f", 0 },
	};

	snprintf(secret, sizeof(secret), "%s/secret", f->dir);
	assert_int_equal(fs_write_file(secret, "s", 1, 0600, &err), 0);
	assert_true(apply(f, LAYER_GZIP, l, ARRAY_SIZE(l), &err) < 0);
	assert_non_null(strstr(err.msg, "hard link target ../secret escapes the root"));
	assert_false(exists(f, "stolen"));

	err_clear(&err);
	assert_true(apply(f, LAYER_GZIP, l2, ARRAY_SIZE(l2), &err) < 0);
	assert_non_null(strstr(err.msg, "entry stolen2: hard link target up/secret is not in "
					"the image"));
	assert_false(exists(f, "stolen2"));
	assert_int_equal(stat(secret, &st), 0);
	assert_int_equal(st.st_nlink, 1);

	err_clear(&err);
	if (apply(f, LAYER_GZIP, l3, ARRAY_SIZE(l3), &err) < 0)
		fail_msg("%s", err.msg);
	snprintf(path, sizeof(path), "%s/hl", f->root);
	assert_int_equal(stat(path, &st), 0);
	snprintf(path, sizeof(path), "%s/data/f", f->root);
	assert_int_equal(stat(path, &st2), 0);
	assert_int_equal(st.st_ino, st2.st_ino);
	assert_int_equal(st.st_dev, st2.st_dev);
}

static void test_unpack__garbage_is_not_a_layer(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;

	assert_int_equal(fs_write_file(f->layer, "this is not a tar file at all", 29, 0644, &err),
			 0);
	assert_true(unpack_layer(f->root, f->layer, "sha256:junk", 0, &err) < 0);
	assert_non_null(strstr(err.msg, "layer sha256:junk"));
}

/* A layer in a compression libarchive leaves to an external program (lzop, lrzip) is refused
 * without running one: fake programs on PATH leave a mark if they are run. */
static void test_unpack__no_external_decompressor_runs(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	static const char lzop[] = "\x89LZO\0\r\n\x1a\n\x10\x30\x20\xa0\x09\x40\x01\x05";
	static const char lrzip[] = "LRZI\0\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
	_cleanup_free_ char *bin = xasprintf("%s/bin", f->dir);
	_cleanup_free_ char *mark = xasprintf("%s/ran", f->dir);
	_cleanup_free_ char *script = xasprintf("#!/bin/sh\ntouch %s\ncat >/dev/null\n", mark);
	_cleanup_free_ char *old_path = xstrdup(getenv("PATH"));
	_cleanup_free_ char *path = xasprintf("%s:%s", bin, old_path);
	const char *progs[] = { "lzop", "lrzip" };

	assert_int_equal(mkdir(bin, 0755), 0);
	for (size_t i = 0; i < 2; i++) {
		_cleanup_free_ char *prog = xasprintf("%s/%s", bin, progs[i]);

		assert_int_equal(fs_write_file(prog, script, strlen(script), 0755, &err), 0);
	}
	setenv("PATH", path, 1);
	assert_int_equal(fs_write_file(f->layer, lzop, sizeof(lzop) - 1, 0644, &err), 0);
	assert_int_equal(unpack_layer(f->root, f->layer, "sha256:lzop", 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "layer sha256:lzop: not a tar archive"));
	err_clear(&err);
	assert_int_equal(fs_write_file(f->layer, lrzip, sizeof(lrzip) - 1, 0644, &err), 0);
	assert_int_equal(unpack_layer(f->root, f->layer, "sha256:lrzip", 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "layer sha256:lrzip: not a tar archive"));
	setenv("PATH", old_path, 1);
	assert_int_equal(access(mark, F_OK), -1);
}

static void test_unpack__byte_budget_is_enforced(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	const struct tent l[] = { { "big", 'f', "0123456789abcdef", 0 } };

	write_layer(f->layer, LAYER_GZIP, l, 1);
	assert_int_equal(unpack_layer(f->root, f->layer, "sha256:bomb", 8, &err), -EFBIG);
	assert_non_null(strstr(err.msg, "more than 8 bytes"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unpack__files_dirs_links_modes_and_owners,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unpack__zstd_and_plain_tar_are_detected, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unpack__whiteout_deletes_lower_entry, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unpack__opaque_dir_hides_lower_content_only,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_unpack__upper_layer_replaces_file_with_dir_and_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unpack__dotdot_entry_is_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unpack__symlinks_resolve_inside_the_root,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_unpack__later_layer_writes_through_absolute_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unpack__symlink_loop_is_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unpack__symlink_inside_root_is_followed, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unpack__hardlink_escape_is_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unpack__garbage_is_not_a_layer, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unpack__no_external_decompressor_runs, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unpack__byte_budget_is_enforced, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
