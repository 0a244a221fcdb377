/*
 * sandbox.c: the fuzz targets' scratch directory with a decoy beside it (see sandbox.h).
 */
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xalloc.h"

#define SANDBOX_MAX_DEPTH 8192
#define DECOY "written by the fuzz target; nothing may change it\n"

static struct sandbox *made; /* removed at exit */

static void die_errno(const char *what, const char *path)
{
	fprintf(stderr, "sandbox: %s %s: %s\n", what, path, strerror(errno));
	abort();
}

/* The names in directory fd, read whole before anything changes it. */
static char **names_of(int fd, size_t *n)
{
	int own = dup(fd);
	DIR *d = own >= 0 ? fdopendir(own) : NULL;
	char **names = NULL;
	size_t cap = 0;
	struct dirent *de;

	if (!d)
		die_errno("list", "a directory");
	*n = 0;
	rewinddir(d);
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		xgrow((void **)&names, &cap, *n + 1, sizeof(*names));
		names[(*n)++] = xstrdup(de->d_name);
	}
	closedir(d);
	return names;
}

static void walk(int dirfd, const char *prefix, int depth, sandbox_visit_fn *fn, void *arg)
{
	size_t n;
	char **names = names_of(dirfd, &n);

	if (depth > SANDBOX_MAX_DEPTH) {
		fprintf(stderr, "sandbox: %s is deeper than %d levels\n", prefix,
			SANDBOX_MAX_DEPTH);
		abort();
	}
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *path = *prefix ? xasprintf("%s/%s", prefix, names[i])
						    : xstrdup(names[i]);
		struct stat st;

		if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			die_errno("stat", path);
		fn(dirfd, names[i], path, &st, arg);
		if (S_ISDIR(st.st_mode)) {
			int fd = openat(dirfd, names[i],
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (fd < 0)
				die_errno("open", path);
			walk(fd, path, depth + 1, fn, arg);
			close(fd);
		}
		free(names[i]);
	}
	free(names);
}

void sandbox_walk(int dirfd, sandbox_visit_fn *fn, void *arg)
{
	walk(dirfd, "", 0, fn, arg);
}

/* Removes what dirfd holds, making each directory writable and searchable first. */
static void empty_dir(int dirfd, int depth)
{
	size_t n;
	char **names = names_of(dirfd, &n);

	if (depth > SANDBOX_MAX_DEPTH) {
		fprintf(stderr, "sandbox: a tree deeper than %d levels\n", SANDBOX_MAX_DEPTH);
		abort();
	}
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			die_errno("stat", names[i]);
		if (S_ISDIR(st.st_mode)) {
			int fd;

			fchmodat(dirfd, names[i], 0700, 0);
			fd = openat(dirfd, names[i],
				    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0)
				die_errno("open", names[i]);
			empty_dir(fd, depth + 1);
			close(fd);
		}
		if (unlinkat(dirfd, names[i], S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
			die_errno("remove", names[i]);
		free(names[i]);
	}
	free(names);
}

void sandbox_empty(const struct sandbox *sb)
{
	fchmod(sb->root_fd, 0755);
	empty_dir(sb->root_fd, 0);
}

static void remove_all(void)
{
	int fd = made ? open(made->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

	if (fd < 0)
		return;
	empty_dir(fd, 0);
	close(fd);
	rmdir(made->base);
}

void sandbox_init(struct sandbox *sb, const char *name)
{
	const char *tmp = getenv("TMPDIR");
	_cleanup_free_ char *outside = NULL;
	_cleanup_free_ char *decoy = NULL;
	int fd;

	if (!tmp || !*tmp)
		tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	sb->base = xasprintf("%s/fuzz_%s.XXXXXX", tmp, name);
	if (!mkdtemp(sb->base))
		die_errno("mkdtemp", sb->base);
	sb->root = xasprintf("%s/root", sb->base);
	outside = xasprintf("%s/outside", sb->base);
	decoy = xasprintf("%s/outside/file", sb->base);
	if (mkdir(sb->root, 0755) < 0 || mkdir(outside, 0755) < 0)
		die_errno("mkdir in", sb->base);
	fd = open(decoy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, DECOY, strlen(DECOY)) != (ssize_t)strlen(DECOY) || close(fd) < 0)
		die_errno("write", decoy);
	if (lstat(decoy, &sb->decoy) < 0)
		die_errno("stat", decoy);
	free(decoy);
	decoy = xasprintf("%s/outside/dir", sb->base);
	if (mkdir(decoy, 0755) < 0)
		die_errno("mkdir", decoy);
	sb->root_fd = open(sb->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sb->root_fd < 0)
		die_errno("open", sb->root);
	made = sb;
	atexit(remove_all);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of directory path, sorted, joined with spaces. */
static char *listing(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	char *out = xstrdup("");
	char **names;
	size_t n;

	if (fd < 0)
		die_errno("open", path);
	names = names_of(fd, &n);
	close(fd);
	if (n)
		qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n; i++) {
		char *next = xasprintf("%s%s%s", out, i ? " " : "", names[i]);

		free(out);
		free(names[i]);
		out = next;
	}
	free(names);
	return out;
}

static void expect_listing(const char *path, const char *want)
{
	_cleanup_free_ char *have = listing(path);

	if (strcmp(have, want)) {
		fprintf(stderr, "sandbox: escaped the root: %s holds \"%s\", not \"%s\"\n", path,
			have, want);
		abort();
	}
}

void sandbox_check(const struct sandbox *sb)
{
	_cleanup_free_ char *outside = xasprintf("%s/outside", sb->base);
	_cleanup_free_ char *decoy = xasprintf("%s/outside/file", sb->base);
	_cleanup_free_ char *dir = xasprintf("%s/outside/dir", sb->base);
	char buf[sizeof(DECOY) + 1];
	struct stat st;
	ssize_t n;
	int fd;

	expect_listing(sb->base, "outside root");
	expect_listing(outside, "dir file");
	expect_listing(dir, "");
	if (lstat(decoy, &st) < 0)
		die_errno("stat", decoy);
	fd = open(decoy, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
	if (fd >= 0)
		close(fd);
	if (st.st_ino != sb->decoy.st_ino || st.st_nlink != 1 || st.st_mode != sb->decoy.st_mode ||
	    st.st_uid != sb->decoy.st_uid || st.st_gid != sb->decoy.st_gid ||
	    n != (ssize_t)strlen(DECOY) || memcmp(buf, DECOY, strlen(DECOY))) {
		fprintf(stderr, "sandbox: escaped the root: %s was changed or linked to\n", decoy);
		abort();
	}
}
