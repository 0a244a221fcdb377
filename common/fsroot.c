/*
 * fsroot.c: opening, creating and removing beneath a root (see fsroot.h).
 */
#include "fsroot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "xalloc.h"

/* openat2 retries when a rename elsewhere made the kernel unsure of a ".." (EAGAIN). */
#define FSROOT_AGAIN 8
/* The longest path a walk holds while it splices link targets in. */
#define FSROOT_MAX_WALK_PATH (16 * PATH_MAX)
/* Passes over a directory being emptied (entries made meanwhile, or missed by readdir). */
#define FSROOT_REMOVE_PASSES 3

/* The kernel answered ENOSYS: the walk from then on. */
static atomic_bool no_openat2;

static int by_openat2(int rootfd, const char *path, int flags, unsigned how)
{
	struct open_how oh = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV |
			   (how & FSROOT_IN_ROOT ? RESOLVE_IN_ROOT
						 : RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS),
	};
	int fd = -EAGAIN;

	for (int i = 0; i < FSROOT_AGAIN && fd == -EAGAIN; i++) {
		fd = (int)syscall(SYS_openat2, rootfd, *path ? path : ".", &oh, sizeof(oh));
		if (fd < 0)
			fd = -errno;
	}
	return fd;
}

/* Whether fd is on another mount than the root, whose device is dev: the root of a mount (a
 * bind mount of the same file system too), or a directory of another file system (only
 * directories: overlayfs gives files the device of the layer they come from). */
static bool on_other_mount(int fd, dev_t dev)
{
	struct statx sx;
	struct stat st;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_TYPE, &sx) == 0) {
		if ((sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
		    (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
			return true;
		return S_ISDIR(sx.stx_mode) && makedev(sx.stx_dev_major, sx.stx_dev_minor) != dev;
	}
	if (fstat(fd, &st) < 0) /* no statx (Linux < 4.11): the device alone */
		return true;
	return S_ISDIR(st.st_mode) && st.st_dev != dev;
}

/* A walk's state: the directories entered below the root, innermost last, and the path left. */
struct walk {
	int rootfd;
	dev_t dev;
	unsigned how;
	int *fds;
	size_t n, cap;
	char *path; /* owned; rest points into it */
	const char *rest;
	int links;
};

static int walk_cur(const struct walk *w)
{
	return w->n ? w->fds[w->n - 1] : w->rootfd;
}

static void walk_pop(struct walk *w)
{
	close(w->fds[--w->n]);
}

/* Takes the next component of the path into name; 0 at the end, 1, or -ENAMETOOLONG. */
static int walk_next(struct walk *w, char name[NAME_MAX + 1])
{
	const char *p = w->rest;
	size_t n;

	while (*p == '/')
		p++;
	n = strcspn(p, "/");
	w->rest = p + n;
	if (n == 0)
		return 0;
	if (n > NAME_MAX)
		return -ENAMETOOLONG;
	memcpy(name, p, n);
	name[n] = '\0';
	return 1;
}

static bool walk_at_end(const struct walk *w)
{
	return w->rest[strspn(w->rest, "/")] == '\0';
}

/* Replaces the link name (in the current directory) by its target in the path; an absolute
 * target starts again from the root. */
static int walk_follow(struct walk *w, const char *name)
{
	char target[PATH_MAX];
	ssize_t len = readlinkat(walk_cur(w), name, target, sizeof(target) - 1);
	char *next;

	if (len < 0)
		return -errno;
	if (len == 0)
		return -ENOENT;
	if (++w->links > FSROOT_MAX_LINKS)
		return -ELOOP;
	target[len] = '\0';
	next = xasprintf("%s/%s", target, w->rest);
	if (strlen(next) > FSROOT_MAX_WALK_PATH) {
		free(next);
		return -ENAMETOOLONG;
	}
	if (target[0] == '/')
		while (w->n)
			walk_pop(w);
	free(w->path);
	w->path = next;
	w->rest = next;
	return 0;
}

/* Enters directory name of the current directory. */
static int walk_enter(struct walk *w, const char *name)
{
	int fd = openat(walk_cur(w), name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (on_other_mount(fd, w->dev)) {
		close(fd);
		return -EXDEV;
	}
	xgrow((void **)&w->fds, &w->cap, w->n + 1, sizeof(*w->fds));
	w->fds[w->n++] = fd;
	return 0;
}

/* Opens the last component, never through a link. */
static int walk_last(struct walk *w, const char *name, int flags)
{
	int fd = openat(walk_cur(w), name, flags | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (on_other_mount(fd, w->dev)) {
		close(fd);
		return -EXDEV;
	}
	return fd;
}

/* The descriptor of what open returned, or -errno. */
static int fd_or_errno(int fd)
{
	return fd >= 0 ? fd : -errno;
}

/* One step of the walk: false to go on, true when done with *out a descriptor or -errno. */
static bool walk_step(struct walk *w, int flags, int *out)
{
	char name[NAME_MAX + 1];
	struct stat st;
	bool last;
	int r = walk_next(w, name);

	if (r <= 0) { /* the end: the directory reached */
		*out = r < 0 ? r : fd_or_errno(openat(walk_cur(w), ".", flags | O_CLOEXEC));
		return true;
	}
	if (!strcmp(name, "."))
		return false;
	if (!strcmp(name, "..")) {
		if (w->n)
			walk_pop(w);
		else if (!(w->how & FSROOT_IN_ROOT))
			r = -EXDEV; /* above the root */
		*out = r;
		return r < 0;
	}
	last = walk_at_end(w);
	if (fstatat(walk_cur(w), name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		r = -errno;
	} else if (S_ISLNK(st.st_mode) && !(last && (flags & O_NOFOLLOW))) {
		r = w->how & FSROOT_IN_ROOT ? walk_follow(w, name) : -ELOOP;
	} else if (last) {
		*out = walk_last(w, name, flags);
		return true;
	} else {
		r = S_ISDIR(st.st_mode) ? walk_enter(w, name) : -ENOTDIR;
	}
	*out = r;
	return r < 0;
}

/* openat2's promises kept in user space: every ".." and link target is handled here, and each
 * component is opened with O_NOFOLLOW from a directory already held. */
static int walk_open(int rootfd, const char *path, int flags, unsigned how)
{
	struct walk w = { .rootfd = rootfd, .how = how };
	struct stat st;
	int ret;

	if (fstat(rootfd, &st) < 0)
		return -errno;
	w.dev = st.st_dev;
	w.path = xstrdup(path);
	w.rest = w.path;
	while (!walk_step(&w, flags, &ret))
		;
	while (w.n)
		walk_pop(&w);
	free(w.fds);
	free(w.path);
	return ret;
}

int fsroot_open(int rootfd, const char *path, int flags, unsigned how)
{
	int fd;

	if (!(how & FSROOT_WALK) && !atomic_load(&no_openat2)) {
		fd = by_openat2(rootfd, path, flags, how);
		if (fd != -ENOSYS && fd != -EPERM)
			return fd;
		if (fd == -ENOSYS)
			atomic_store(&no_openat2, true);
	}
	return walk_open(rootfd, path, flags, how);
}

/* Splits path (no trailing '/') at its last '/': *parent gets what is before ("" for none),
 * the return value points at the last component inside path. */
static const char *split_last(const char *path, char **parent)
{
	const char *slash = strrchr(path, '/');

	*parent = slash ? xstrndup(path, (size_t)(slash - path)) : xstrdup("");
	return slash ? slash + 1 : path;
}

int fsroot_mkdirs(int rootfd, const char *path, int *budget)
{
	_cleanup_free_ char *trimmed = xstrdup(path);
	_cleanup_free_ char *parent = NULL;
	_cleanup_free_ char *next = NULL;
	_cleanup_close_ int pfd = -1;
	char target[PATH_MAX];
	const char *base;
	struct stat st;
	size_t n = strlen(trimmed);
	ssize_t len;
	int fd;

	while (n > 0 && trimmed[n - 1] == '/')
		trimmed[--n] = '\0';
	fd = fsroot_open(rootfd, trimmed, O_PATH | O_DIRECTORY, FSROOT_IN_ROOT);
	if (fd != -ENOENT)
		return fd;
	if (--*budget < 0)
		return -ELOOP;
	base = split_last(trimmed, &parent);
	pfd = fsroot_mkdirs(rootfd, parent, budget);
	if (pfd < 0)
		return pfd;
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return fsroot_open(rootfd, trimmed, O_PATH | O_DIRECTORY, FSROOT_IN_ROOT);
	if (mkdirat(pfd, base, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISLNK(st.st_mode)) {
		fd = openat(pfd, base, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		return fd >= 0 ? fd : -errno;
	}
	/* a dangling link: create what it points at, resolved from the link's directory */
	len = readlinkat(pfd, base, target, sizeof(target) - 1);
	if (len < 0)
		return -errno;
	target[len] = '\0';
	next = target[0] == '/' ? xstrdup(target) : xasprintf("%s/%s", parent, target);
	if (strlen(next) >= 2 * PATH_MAX)
		return -ENAMETOOLONG;
	return fsroot_mkdirs(rootfd, next, budget);
}

static int remove_at(int dfd, const char *name, unsigned char type, unsigned flags, dev_t dev,
		     int depth);

/* Removes what directory fd holds (it takes fd), in passes while a pass finds entries (readdir
 * may miss some while the directory changes); the first error. */
static int remove_children(int fd, unsigned flags, dev_t dev, int depth)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int ret = 0;

	if (!d) {
		close(fd);
		return -errno;
	}
	for (int pass = 0; pass < FSROOT_REMOVE_PASSES && ret == 0; pass++) {
		bool seen = false;

		rewinddir(d);
		while ((de = readdir(d))) {
			int r;

			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			seen = true;
			r = remove_at(dirfd(d), de->d_name, de->d_type, flags, dev, depth + 1);
			if (r < 0 && ret == 0)
				ret = r;
		}
		if (!seen || (flags & FSROOT_DIRS_ONLY))
			break;
	}
	closedir(d);
	return ret;
}

/* Removes name in dfd (whose entry says type, DT_UNKNOWN if it does not know), on device dev. */
static int remove_at(int dfd, const char *name, unsigned char type, unsigned flags, dev_t dev,
		     int depth)
{
	int fd, ret;

	if (type != DT_DIR && type != DT_UNKNOWN) {
		if (flags & FSROOT_DIRS_ONLY)
			return 0;
		return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	}
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && (errno == ENOTDIR || errno == ELOOP)) /* not a directory after all */
		return remove_at(dfd, name, DT_REG, flags, dev, depth);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (on_other_mount(fd, dev)) {
		close(fd);
		return -EXDEV;
	}
	if (depth >= FSROOT_MAX_DEPTH) {
		close(fd);
		return -ELOOP;
	}
	ret = remove_children(fd, flags, dev, depth);
	if (ret < 0)
		return ret;
	return unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

int fsroot_remove(int dirfd, const char *name, unsigned flags)
{
	struct stat st;

	if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || strchr(name, '/'))
		return -EINVAL;
	if (fstat(dirfd, &st) < 0)
		return -errno;
	return remove_at(dirfd, name, DT_UNKNOWN, flags, st.st_dev, 0);
}
