#include "unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fsroot.h"
#include "log.h"
#include "xalloc.h"

#define UNPACK_MAX_ENTRIES (1u << 20)
#define UNPACK_MAX_RESOLVE 1024 /* components created plus links followed, per entry */
#define UNPACK_WHITEOUT ".wh."
#define UNPACK_OPAQUE ".wh..wh..opq"

/* The paths a layer has written so far, so an opaque marker spares them. */
struct pathset {
	char **slots;
	size_t cap;
	size_t n;
};

/* Everything one layer's application needs. */
struct unpack_ctx {
	int rootfd;
	const char *name;
	uint64_t max_bytes;
	uint64_t written;
	struct pathset seen;
};

/* FNV-1a, good enough for a set of paths. */
static size_t pathset_hash(const char *s)
{
	size_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static bool pathset_has(const struct pathset *ps, const char *s)
{
	if (!ps->cap)
		return false;
	for (size_t i = pathset_hash(s) & (ps->cap - 1);; i = (i + 1) & (ps->cap - 1)) {
		if (!ps->slots[i])
			return false;
		if (strcmp(ps->slots[i], s) == 0)
			return true;
	}
}

static void pathset_add(struct pathset *ps, const char *s);

/* Doubles the table and re-inserts every path. */
static void pathset_grow(struct pathset *ps)
{
	struct pathset bigger = { xcalloc(ps->cap ? ps->cap * 2 : 256, sizeof(char *)),
				  ps->cap ? ps->cap * 2 : 256, 0 };

	for (size_t i = 0; i < ps->cap; i++) {
		if (!ps->slots[i])
			continue;
		pathset_add(&bigger, ps->slots[i]);
		free(ps->slots[i]);
	}
	free(ps->slots);
	*ps = bigger;
}

static void pathset_add(struct pathset *ps, const char *s)
{
	size_t i;

	if ((ps->n + 1) * 2 > ps->cap)
		pathset_grow(ps);
	for (i = pathset_hash(s) & (ps->cap - 1); ps->slots[i]; i = (i + 1) & (ps->cap - 1))
		if (strcmp(ps->slots[i], s) == 0)
			return;
	ps->slots[i] = xstrdup(s);
	ps->n++;
}

static void pathset_release(struct pathset *ps)
{
	for (size_t i = 0; i < ps->cap; i++)
		free(ps->slots[i]);
	free(ps->slots);
	memset(ps, 0, sizeof(*ps));
}

/* Records path and each of its ancestors as written by this layer. */
static void unpack_mark(struct unpack_ctx *c, const char *path)
{
	_cleanup_free_ char *p = xstrdup(path);
	char *slash;

	pathset_add(&c->seen, p);
	while ((slash = strrchr(p, '/'))) {
		*slash = '\0';
		pathset_add(&c->seen, p);
	}
}

/* Normalises a path from the archive: strips leading '/' and "./", drops empty and "."
 * components, refuses "..". Returns the cleaned path ("" for the root itself) or NULL. */
static char *unpack_clean(const char *raw)
{
	size_t n = strlen(raw);
	char *out = xmalloc(n + 1);
	size_t o = 0;
	const char *p = raw;

	while (*p) {
		const char *end = strchr(p, '/');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len == 2 && p[0] == '.' && p[1] == '.') {
			free(out);
			return NULL;
		}
		if (len > 0 && !(len == 1 && p[0] == '.')) {
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, len);
			o += len;
		}
		p += len;
		if (*p == '/')
			p++;
	}
	out[o] = '\0';
	return out;
}

/* The error for a parent directory that could not be opened or created. */
static int unpack_dir_error(struct unpack_ctx *c, int code, const char *dir, const char *entry,
			    struct err *err)
{
	if (code == ELOOP)
		return err_set(err, ELOOP,
			       "layer %s: entry %s: too many symbolic links or levels resolving %s",
			       c->name, entry, dir);
	if (code == EXDEV)
		return err_set(err, EXDEV, "layer %s: entry %s: %s crosses a mount point", c->name,
			       entry, dir);
	errno = code;
	return err_errno(err, "layer %s: entry %s: open %s", c->name, entry, *dir ? dir : "/");
}

/* Opens directory `dir` (a cleaned path, "" for the root) resolved inside the root, creating
 * missing directories when create is set. */
static int unpack_open_dir(struct unpack_ctx *c, const char *dir, const char *entry, bool create,
			   struct err *err)
{
	int budget = UNPACK_MAX_RESOLVE;
	int fd = create ? fsroot_mkdirs(c->rootfd, dir, &budget)
			: fsroot_open(c->rootfd, dir, O_PATH | O_DIRECTORY, FSROOT_IN_ROOT);

	return fd < 0 ? unpack_dir_error(c, -fd, dir, entry, err) : fd;
}

/* Applies ".wh..wh..opq" in dir: removes every child that this layer did not write. */
static int unpack_opaque(struct unpack_ctx *c, int pfd, const char *dir, const char *entry,
			 struct err *err)
{
	int fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int ret = 0;

	if (fd < 0)
		return err_errno(err, "layer %s: entry %s: open %s", c->name, entry, dir);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return err_errno(err, "layer %s: entry %s: list %s", c->name, entry, dir);
	}
	while ((de = readdir(d))) {
		_cleanup_free_ char *child = NULL;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		child = *dir ? xasprintf("%s/%s", dir, de->d_name) : xstrdup(de->d_name);
		if (pathset_has(&c->seen, child))
			continue;
		xgrow((void **)&names, &cap, n + 1, sizeof(*names));
		names[n++] = xstrdup(de->d_name);
	}
	closedir(d);
	for (size_t i = 0; i < n; i++) {
		int r = ret < 0 ? 0 : fsroot_remove(pfd, names[i], 0);

		if (r < 0) {
			errno = -r;
			ret = err_errno(err, "layer %s: entry %s: remove %s/%s", c->name, entry,
					dir, names[i]);
		}
		free(names[i]);
	}
	free(names);
	return ret;
}

/* Handles ".wh.<name>" and ".wh..wh..opq" entries. */
static int unpack_whiteout(struct unpack_ctx *c, const char *clean, const char *dir,
			   const char *base, struct err *err)
{
	_cleanup_close_ int pfd = -1;
	const char *target = base + strlen(UNPACK_WHITEOUT);
	int ret;

	if (!*target || !strcmp(target, ".") || !strcmp(target, ".."))
		return err_set(err, EINVAL, "layer %s: entry %s: invalid whiteout", c->name, clean);
	pfd = unpack_open_dir(c, dir, clean, false, err);
	if (pfd < 0) {
		if (err->code != ENOENT && err->code != ENOTDIR)
			return pfd;
		err_clear(err); /* nothing below to delete */
		return 0;
	}
	if (!strcmp(base, UNPACK_OPAQUE))
		return unpack_opaque(c, pfd, dir, clean, err);
	ret = fsroot_remove(pfd, target, 0);
	if (ret < 0) {
		errno = -ret;
		return err_errno(err, "layer %s: whiteout %s", c->name, clean);
	}
	return 0;
}

/* Sets owner, then mode (chown clears set-id bits), of an open file or directory. */
static int unpack_meta_fd(struct unpack_ctx *c, int fd, struct archive_entry *e, const char *path,
			  struct err *err)
{
	if (fchown(fd, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e)) < 0 &&
	    errno != EPERM)
		return err_errno(err, "layer %s: entry %s: chown", c->name, path);
	if (fchmod(fd, archive_entry_perm(e) & 07777) < 0)
		return err_errno(err, "layer %s: entry %s: chmod", c->name, path);
	return 0;
}

/* Copies the extended attributes worth keeping (user.*, file capabilities); best effort. */
static void unpack_xattrs(int fd, struct archive_entry *e)
{
	const char *name;
	const void *value;
	size_t size;

	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
		if (strncmp(name, "user.", 5) && strcmp(name, "security.capability"))
			continue;
		if (fsetxattr(fd, name, value, size, 0) < 0)
			log_debug("unpack: xattr %s not kept: %s", name, strerror(errno));
	}
}

/* Writes a regular file's data, sparse holes included, within the layer's byte budget. */
static int unpack_file(struct unpack_ctx *c, struct archive *a, int pfd, const char *base,
		       struct archive_entry *e, const char *path, struct err *err)
{
	_cleanup_close_ int fd =
		openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	struct timespec ts[2];

	if (fd < 0)
		return err_errno(err, "layer %s: entry %s: create", c->name, path);
	for (;;) {
		const void *buf;
		size_t size;
		la_int64_t off;
		int r = archive_read_data_block(a, &buf, &size, &off);

		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN)
			return err_set(err, EIO, "layer %s: entry %s: %s", c->name, path,
				       archive_error_string(a));
		c->written += size;
		if (c->max_bytes && c->written > c->max_bytes)
			return err_set(err, EFBIG,
				       "layer %s: unpacks to more than %llu bytes; refusing",
				       c->name, (unsigned long long)c->max_bytes);
		while (size) {
			ssize_t w = pwrite(fd, buf, size, off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return err_errno(err, "layer %s: entry %s: write", c->name, path);
			buf = (const char *)buf + w;
			size -= (size_t)w;
			off += w;
		}
	}
	if (archive_entry_size_is_set(e) && ftruncate(fd, archive_entry_size(e)) < 0)
		return err_errno(err, "layer %s: entry %s: truncate", c->name, path);
	if (unpack_meta_fd(c, fd, e, path, err) < 0)
		return -err->code;
	unpack_xattrs(fd, e);
	ts[0].tv_sec = ts[1].tv_sec = archive_entry_mtime(e);
	ts[0].tv_nsec = ts[1].tv_nsec = archive_entry_mtime_nsec(e);
	futimens(fd, ts);
	return 0;
}

/* A hard link: its target must be an existing entry inside the root. */
static int unpack_hardlink(struct unpack_ctx *c, int pfd, const char *base, const char *link,
			   const char *path, struct err *err)
{
	_cleanup_free_ char *target = unpack_clean(link);
	_cleanup_close_ int tpfd = -1;
	const char *tbase;
	struct stat st;
	char *slash;
	int ret;

	if (!target || !*target)
		return err_set(err, EXDEV,
			       "layer %s: entry %s: hard link target %s escapes the root", c->name,
			       path, link);
	if (!strcmp(target, path))
		return 0;
	slash = strrchr(target, '/');
	if (slash) {
		*slash = '\0';
		tbase = slash + 1;
	} else {
		tbase = target;
	}
	tpfd = unpack_open_dir(c, slash ? target : "", path, false, err);
	if (tpfd < 0 && err->code != ENOENT && err->code != ENOTDIR)
		return tpfd;
	if (tpfd < 0 || fstatat(tpfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		err_clear(err);
		return err_set(err, ENOENT,
			       "layer %s: entry %s: hard link target %s is not in the image; the "
			       "layer is malformed",
			       c->name, path, link);
	}
	ret = fsroot_remove(pfd, base, 0);
	if (ret < 0) {
		errno = -ret;
		return err_errno(err, "layer %s: entry %s: replace", c->name, path);
	}
	if (linkat(tpfd, tbase, pfd, base, 0) < 0)
		return err_errno(err, "layer %s: entry %s: hard link to %s", c->name, path, link);
	return 0;
}

/* Creates a directory, or keeps the existing one and updates its owner and mode. */
static int unpack_dir(struct unpack_ctx *c, int pfd, const char *base, struct archive_entry *e,
		      const char *path, struct err *err)
{
	_cleanup_close_ int fd = -1;

	if (mkdirat(pfd, base, 0700) < 0 && errno != EEXIST)
		return err_errno(err, "layer %s: entry %s: mkdir", c->name, path);
	fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return err_errno(err, "layer %s: entry %s: open", c->name, path);
	return unpack_meta_fd(c, fd, e, path, err);
}

/* A symbolic link; its target is stored as is (it is resolved later inside the container). */
static int unpack_symlink(struct unpack_ctx *c, int pfd, const char *base, struct archive_entry *e,
			  const char *path, struct err *err)
{
	const char *target = archive_entry_symlink(e);
	struct timespec ts[2];

	if (!target)
		target = archive_entry_symlink_utf8(e);
	if (!target || !*target)
		return err_set(err, EINVAL, "layer %s: entry %s: symbolic link without a target",
			       c->name, path);
	if (symlinkat(target, pfd, base) < 0)
		return err_errno(err, "layer %s: entry %s: symlink", c->name, path);
	if (fchownat(pfd, base, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e),
		     AT_SYMLINK_NOFOLLOW) < 0 &&
	    errno != EPERM)
		return err_errno(err, "layer %s: entry %s: chown", c->name, path);
	ts[0].tv_sec = ts[1].tv_sec = archive_entry_mtime(e);
	ts[0].tv_nsec = ts[1].tv_nsec = archive_entry_mtime_nsec(e);
	utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
	return 0;
}

/* Creates one non-whiteout entry under its (already opened) parent directory. */
static int unpack_create(struct unpack_ctx *c, struct archive *a, struct archive_entry *e, int pfd,
			 const char *base, const char *path, struct err *err)
{
	mode_t type = archive_entry_filetype(e);
	const char *link = archive_entry_hardlink(e);
	struct stat st;

	if (!link)
		link = archive_entry_hardlink_utf8(e);
	if (link)
		return unpack_hardlink(c, pfd, base, link, path, err);
	if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK) {
		log_debug("unpack: layer %s: skipping device or socket %s", c->name, path);
		return 0;
	}
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !(S_ISDIR(st.st_mode) && type == AE_IFDIR)) {
		int r = fsroot_remove(pfd, base, 0);

		if (r < 0) {
			errno = -r;
			return err_errno(err, "layer %s: entry %s: replace", c->name, path);
		}
	}
	switch (type) {
	case AE_IFDIR:
		return unpack_dir(c, pfd, base, e, path, err);
	case AE_IFREG:
		return unpack_file(c, a, pfd, base, e, path, err);
	case AE_IFLNK:
		return unpack_symlink(c, pfd, base, e, path, err);
	case AE_IFIFO:
		if (mkfifoat(pfd, base, archive_entry_perm(e) & 0777) < 0)
			return err_errno(err, "layer %s: entry %s: mkfifo", c->name, path);
		if (fchownat(pfd, base, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e),
			     AT_SYMLINK_NOFOLLOW) < 0 &&
		    errno != EPERM)
			return err_errno(err, "layer %s: entry %s: chown", c->name, path);
		return 0;
	default:
		return err_set(err, EINVAL, "layer %s: entry %s: unsupported file type 0%o",
			       c->name, path, (unsigned)type);
	}
}

/* Applies one archive entry. */
static int unpack_entry(struct unpack_ctx *c, struct archive *a, struct archive_entry *e,
			struct err *err)
{
	const char *raw = archive_entry_pathname(e);
	_cleanup_free_ char *clean = NULL;
	_cleanup_free_ char *dir = NULL;
	_cleanup_close_ int pfd = -1;
	const char *base;
	char *slash;
	int ret;

	if (!raw)
		raw = archive_entry_pathname_utf8(e);
	if (!raw)
		return err_set(err, EINVAL, "layer %s: entry with an unreadable name", c->name);
	if (strlen(raw) >= 4096)
		return err_set(err, ENAMETOOLONG, "layer %s: entry %.100s...: name too long",
			       c->name, raw);
	clean = unpack_clean(raw);
	if (!clean)
		return err_set(err, EXDEV, "layer %s: entry %s escapes the root", c->name, raw);
	if (!*clean)
		return 0; /* the root directory itself: keep ours */
	dir = xstrdup(clean);
	slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		base = clean + (slash - dir) + 1;
	} else {
		dir[0] = '\0';
		base = clean;
	}
	if (strlen(base) > 255)
		return err_set(err, ENAMETOOLONG, "layer %s: entry %.100s...: name too long",
			       c->name, clean);
	if (!strncmp(base, UNPACK_WHITEOUT, strlen(UNPACK_WHITEOUT)))
		return unpack_whiteout(c, clean, dir, base, err);
	pfd = unpack_open_dir(c, dir, clean, true, err);
	if (pfd < 0)
		return pfd;
	ret = unpack_create(c, a, e, pfd, base, clean, err);
	if (ret == 0)
		unpack_mark(c, clean);
	return ret;
}

int unpack_layer(const char *root_dir, const char *layer_path, const char *name, uint64_t max_bytes,
		 struct err *err)
{
	struct unpack_ctx c = { .rootfd = -1, .name = name, .max_bytes = max_bytes };
	_cleanup_close_ int fd = -1;
	struct archive *a = NULL;
	struct archive_entry *e;
	size_t entries = 0;
	int ret = 0;

	c.rootfd = open(root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (c.rootfd < 0)
		return err_errno(err, "layer %s: open %s", name, root_dir);
	fd = open(layer_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = err_errno(err, "layer %s: open %s", name, layer_path);
		goto out;
	}
	a = archive_read_new();
	/* the compressions image layers use, each through a library linked into libarchive:
	 * filter_all would also run external programs (lzop, lrzip, grzip) on a layer's say */
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_xz(a);
	archive_read_support_filter_bzip2(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_empty(a);
	if (archive_read_open_fd(a, fd, 64 * 1024) != ARCHIVE_OK) {
		ret = err_set(err, EINVAL, "layer %s: not a tar archive: %s", name,
			      archive_error_string(a));
		goto out;
	}
	for (;;) {
		int r = archive_read_next_header(a, &e);

		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			ret = err_set(err, EINVAL, "layer %s: corrupt archive: %s", name,
				      archive_error_string(a));
			goto out;
		}
		if (++entries > UNPACK_MAX_ENTRIES) {
			ret = err_set(err, E2BIG, "layer %s: more than %u entries", name,
				      UNPACK_MAX_ENTRIES);
			goto out;
		}
		ret = unpack_entry(&c, a, e, err);
		if (ret < 0)
			goto out;
	}
out:
	if (a)
		archive_read_free(a);
	close(c.rootfd);
	pathset_release(&c.seen);
	return ret;
}
