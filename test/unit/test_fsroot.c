/* test_fsroot.c: common/fsroot.c, confined opens, creation and removal, through openat2 and
 * through the walk that stands in for it where the kernel lacks it. */
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
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsroot.h"
#include "fsutil.h"
#include "xalloc.h"

/* A scratch directory holding root/ and outside/ side by side. */
struct fx {
	char dir[64];
	char *root_path;
	char *outside_path;
	int root;
	unsigned walk; /* 0 or FSROOT_WALK: which resolver the test runs */
};

static void put(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	close(fd);
}

/* Writes data to root/<rel>. */
static void put_in(struct fx *f, const char *rel, const char *data)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", f->root_path, rel);

	put(p, data);
}

static void mk(struct fx *f, const char *rel)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", f->root_path, rel);

	assert_int_equal(mkdir(p, 0755), 0);
}

static void ln(struct fx *f, const char *target, const char *rel)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", f->root_path, rel);

	assert_int_equal(symlink(target, p), 0);
}

static int setup(void **state)
{
	struct fx *f = xcalloc(1, sizeof(*f));
	_cleanup_free_ char *secret = NULL;

	f->walk = *state ? *(unsigned *)*state : 0;
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_fsroot.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->root_path = xasprintf("%s/root", f->dir);
	f->outside_path = xasprintf("%s/outside", f->dir);
	assert_int_equal(mkdir(f->root_path, 0755), 0);
	assert_int_equal(mkdir(f->outside_path, 0755), 0);
	secret = xasprintf("%s/secret", f->outside_path);
	put(secret, "outside");
	f->root = open(f->root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->root >= 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;

	close(f->root);
	assert_int_equal(fs_remove_tree(f->dir, &err), 0);
	free(f->root_path);
	free(f->outside_path);
	free(f);
	return 0;
}

/* Reads what fd (a regular file) holds, up to 63 bytes, and closes it. */
static char *slurp(int fd)
{
	char buf[64];
	ssize_t n;

	assert_true(fd >= 0);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	return xstrdup(buf);
}

static void test_fsroot__in_root_links_resolve_as_in_a_container(void **state)
{
	struct fx *f = *state;
	unsigned how = FSROOT_IN_ROOT | f->walk;
	_cleanup_free_ char *host_secret = xasprintf("%s/secret", f->outside_path);
	_cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;

	mk(f, "run");
	mk(f, "var");
	put_in(f, "run/pid", "in root");
	ln(f, "/run", "var/run");	       /* absolute: from the root */
	ln(f, "../../../../../run", "var/up"); /* too many "..": stay at the root */
	ln(f, host_secret, "escape");	       /* the host's path: not the host's file */
	ln(f, "/", "top");
	a = slurp(fsroot_open(f->root, "var/run/pid", O_RDONLY, how));
	assert_string_equal(a, "in root");
	b = slurp(fsroot_open(f->root, "var/up/pid", O_RDONLY, how));
	assert_string_equal(b, "in root");
	c = slurp(fsroot_open(f->root, "top/top/var/../run/pid", O_RDONLY, how));
	assert_string_equal(c, "in root");
	assert_int_equal(fsroot_open(f->root, "escape", O_RDONLY, how), -ENOENT);
	assert_int_equal(fsroot_open(f->root, "../outside/secret", O_RDONLY, how), -ENOENT);
	assert_int_equal(fsroot_open(f->root, "/../../outside/secret", O_RDONLY, how), -ENOENT);
}

static void test_fsroot__a_final_link_is_not_followed_with_o_nofollow(void **state)
{
	struct fx *f = *state;
	struct stat st;
	int fd;

	mk(f, "d");
	ln(f, "d", "l");
	assert_int_equal(fsroot_open(f->root, "l", O_RDONLY | O_NOFOLLOW, FSROOT_IN_ROOT | f->walk),
			 -ELOOP);
	fd = fsroot_open(f->root, "l", O_PATH | O_NOFOLLOW, FSROOT_IN_ROOT | f->walk);
	assert_true(fd >= 0);
	assert_int_equal(fstatat(fd, "", &st, AT_EMPTY_PATH), 0);
	assert_true(S_ISLNK(st.st_mode));
	close(fd);
	fd = fsroot_open(f->root, "l", O_RDONLY | O_DIRECTORY, FSROOT_IN_ROOT | f->walk);
	assert_true(fd >= 0);
	close(fd);
}

static void test_fsroot__beneath_follows_no_link_and_stays_below(void **state)
{
	struct fx *f = *state;
	unsigned how = FSROOT_BENEATH | f->walk;
	_cleanup_free_ char *a = NULL;
	int fd;

	mk(f, "a");
	mk(f, "b");
	put_in(f, "b/file", "b's");
	ln(f, "b", "a/l");
	ln(f, "file", "b/lf");
	a = slurp(fsroot_open(f->root, "a/../b/file", O_RDONLY, how));
	assert_string_equal(a, "b's");
	assert_int_equal(fsroot_open(f->root, "a/l/file", O_RDONLY, how), -ELOOP);
	assert_int_equal(fsroot_open(f->root, "b/lf", O_RDONLY, how), -ELOOP);
	assert_int_equal(fsroot_open(f->root, "..", O_RDONLY | O_DIRECTORY, how), -EXDEV);
	assert_int_equal(fsroot_open(f->root, "a/../../outside/secret", O_RDONLY, how), -EXDEV);
	assert_int_equal(fsroot_open(f->root, "b/file/x", O_RDONLY, how), -ENOTDIR);
	fd = fsroot_open(f->root, "", O_RDONLY | O_DIRECTORY, how);
	assert_true(fd >= 0);
	close(fd);
}

static void test_fsroot__a_link_loop_is_eloop(void **state)
{
	struct fx *f = *state;

	ln(f, "b", "a");
	ln(f, "a", "b");
	assert_int_equal(fsroot_open(f->root, "a/x", O_RDONLY, FSROOT_IN_ROOT | f->walk), -ELOOP);
}

/* Bind-mounts outside/ on root/<rel>; false when this process may not mount. */
static bool bind_outside(struct fx *f, const char *rel)
{
	_cleanup_free_ char *dst = xasprintf("%s/%s", f->root_path, rel);

	mk(f, rel);
	if (mount(f->outside_path, dst, NULL, MS_BIND, NULL) == 0)
		return true;
	assert_true(errno == EPERM || errno == EACCES);
	return false;
}

static void unbind(struct fx *f, const char *rel)
{
	_cleanup_free_ char *dst = xasprintf("%s/%s", f->root_path, rel);

	assert_int_equal(umount2(dst, MNT_DETACH), 0);
}

static void test_fsroot__no_mount_point_is_crossed(void **state)
{
	struct fx *f = *state;
	_cleanup_free_ char *secret = xasprintf("%s/secret", f->outside_path);

	if (!bind_outside(f, "mnt"))
		skip();
	assert_int_equal(fsroot_open(f->root, "mnt/secret", O_RDONLY, FSROOT_IN_ROOT | f->walk),
			 -EXDEV);
	assert_int_equal(fsroot_open(f->root, "mnt", O_RDONLY, FSROOT_BENEATH | f->walk), -EXDEV);
	/* the remover leaves the mounted tree alone and says so */
	assert_int_equal(fsroot_remove(f->root, "mnt", 0), -EXDEV);
	assert_int_equal(access(secret, F_OK), 0);
	unbind(f, "mnt");
}

static void test_fsroot__mkdirs_creates_missing_directories_and_link_targets(void **state)
{
	struct fx *f = *state;
	_cleanup_free_ char *made = xasprintf("%s/run/lock/x", f->root_path);
	_cleanup_free_ char *host = xasprintf("%s/made", f->outside_path);
	struct stat st;
	int budget = 64, fd;

	mk(f, "var");
	ln(f, "/run", "var/run"); /* dangling until its target is made */
	ln(f, host, "hostlink");
	fd = fsroot_mkdirs(f->root, "var/run/lock/x/", &budget);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(stat(made, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	/* a link to a host path makes that path in the root, never on the host */
	fd = fsroot_mkdirs(f->root, "hostlink", &budget);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(access(host, F_OK), -1);
	budget = 2;
	assert_int_equal(fsroot_mkdirs(f->root, "p/q/r/s", &budget), -ELOOP);
}

static void test_fsroot__remove_takes_the_tree_and_no_link_target(void **state)
{
	struct fx *f = *state;
	_cleanup_free_ char *secret = xasprintf("%s/secret", f->outside_path);
	_cleanup_free_ char *gone = xasprintf("%s/t", f->root_path);
	int fd;

	mk(f, "t");
	mk(f, "t/d");
	mk(f, "t/d/e");
	put_in(f, "t/d/e/file", "x");
	put_in(f, "t/file", "y");
	ln(f, f->outside_path, "t/dirlink");
	ln(f, secret, "t/d/filelink");
	fd = open(f->root_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(fsroot_remove(fd, "t", 0), 0);
	assert_int_equal(access(gone, F_OK), -1);
	assert_int_equal(access(secret, F_OK), 0);
	assert_int_equal(fsroot_remove(fd, "t", 0), 0); /* missing: nothing to do */
	/* a link itself is removed, not what it points at */
	ln(f, f->outside_path, "l");
	assert_int_equal(fsroot_remove(fd, "l", 0), 0);
	assert_int_equal(access(secret, F_OK), 0);
	close(fd);
}

static void test_fsroot__remove_dirs_only_leaves_files(void **state)
{
	struct fx *f = *state;
	int fd = open(f->root_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	mk(f, "g");
	mk(f, "g/a");
	mk(f, "g/a/b");
	assert_int_equal(fsroot_remove(fd, "g", FSROOT_DIRS_ONLY), 0);
	assert_int_equal(faccessat(fd, "g", F_OK, 0), -1);
	mk(f, "h");
	mk(f, "h/a");
	put_in(f, "h/a/control", "1");
	assert_int_equal(fsroot_remove(fd, "h", FSROOT_DIRS_ONLY), -ENOTEMPTY);
	assert_int_equal(faccessat(fd, "h/a/control", F_OK, 0), 0);
	close(fd);
}

static void test_fsroot__remove_stops_past_its_depth(void **state)
{
	struct fx *f = *state;
	int fd = open(f->root_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int d = dup(fd);

	for (int i = 0; i <= FSROOT_MAX_DEPTH + 1; i++) {
		int next;

		assert_int_equal(mkdirat(d, "n", 0755), 0);
		next = openat(d, "n", O_PATH | O_DIRECTORY | O_CLOEXEC);
		close(d);
		d = next;
	}
	close(d);
	assert_int_equal(fsroot_remove(fd, "n", 0), -ELOOP);
	assert_int_equal(faccessat(fd, "n", F_OK, 0), 0);
	for (int i = FSROOT_MAX_DEPTH + 1; i >= 0; i--) { /* deepest first */
		char path[2 * (FSROOT_MAX_DEPTH + 3)] = "n";

		for (int k = 0; k < i; k++)
			memcpy(path + 1 + 2 * k, "/n", 3);
		assert_int_equal(unlinkat(fd, path, AT_REMOVEDIR), 0);
	}
	close(fd);
}

static void test_fsroot__fs_remove_tree_removes_a_path_and_refuses_odd_ones(void **state)
{
	struct fx *f = *state;
	_cleanup_free_ char *t = xasprintf("%s/t/", f->root_path);
	_cleanup_free_ char *dotdot = xasprintf("%s/t/..", f->root_path);
	_cleanup_free_ char *missing = xasprintf("%s/nothing/here", f->root_path);
	struct err err = ERR_INIT;

	mk(f, "t");
	mk(f, "t/d");
	put_in(f, "t/d/file", "x");
	assert_int_equal(fs_remove_tree(dotdot, &err), -EINVAL);
	assert_int_equal(faccessat(f->root, "t/d/file", F_OK, 0), 0);
	assert_int_equal(fs_remove_tree("/", &err), -EINVAL);
	assert_int_equal(fs_remove_tree(t, &err), 0);
	assert_int_equal(faccessat(f->root, "t", F_OK, 0), -1);
	assert_int_equal(fs_remove_tree(missing, &err), 0);
}

static unsigned with_openat2 = 0, with_walk = FSROOT_WALK;

#define BOTH(t)                                                                                    \
	cmocka_unit_test_prestate_setup_teardown(t, setup, teardown, &with_openat2),               \
		cmocka_unit_test_prestate_setup_teardown(t, setup, teardown, &with_walk)

int main(void)
{
	const struct CMUnitTest tests[] = {
		BOTH(test_fsroot__in_root_links_resolve_as_in_a_container),
		BOTH(test_fsroot__a_final_link_is_not_followed_with_o_nofollow),
		BOTH(test_fsroot__beneath_follows_no_link_and_stays_below),
		BOTH(test_fsroot__a_link_loop_is_eloop),
		BOTH(test_fsroot__no_mount_point_is_crossed),
		cmocka_unit_test_setup_teardown(
			test_fsroot__mkdirs_creates_missing_directories_and_link_targets, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_fsroot__remove_takes_the_tree_and_no_link_target, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsroot__remove_dirs_only_leaves_files, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fsroot__remove_stops_past_its_depth, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_fsroot__fs_remove_tree_removes_a_path_and_refuses_odd_ones, setup,
			teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
