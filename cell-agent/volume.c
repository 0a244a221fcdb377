/*
 * volume.c: shipped volumes written into the cell (see volume.h for the order of an update).
 */
#include "volume.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsroot.h"
#include "xalloc.h"

#define T_DIR KIYOT__CELL__V1__FILE_ENTRY__TYPE__DIR
#define T_FILE KIYOT__CELL__V1__FILE_ENTRY__TYPE__FILE
#define T_SYMLINK KIYOT__CELL__V1__FILE_ENTRY__TYPE__SYMLINK
#define MAX_TARGET 4096
/* the temporary name changed files and symlinks are written under; no entry may use it */
#define TMP_NAME "..kiyot-tmp"

#define entry_t Kiyot__Cell__V1__FileEntry

/* A request's entries sorted by path: parents come before what they hold. */
struct sorted {
	entry_t **e;
	size_t n;
};

static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;

int volume_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > 63)
		return 0;
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
			return 0;
	return 1;
}

/* Relative, no empty, ".", ".." or temporary-name components. */
static bool path_ok(const char *p)
{
	size_t len = strlen(p);

	if (len == 0 || len > VOLUME_MAX_PATH)
		return false;
	for (const char *s = p;;) {
		const char *e = strchrnul(s, '/');
		size_t n = (size_t)(e - s);

		if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.') ||
		    (n == strlen(TMP_NAME) && memcmp(s, TMP_NAME, n) == 0))
			return false;
		if (!*e)
			return true;
		s = e + 1;
	}
}

static int by_path(const void *a, const void *b)
{
	return strcmp((*(entry_t *const *)a)->path, (*(entry_t *const *)b)->path);
}

static entry_t *find(const struct sorted *s, const char *path, size_t len)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *p = s->e[mid]->path;
		int c = strncmp(p, path, len);

		if (c == 0 && p[len])
			c = 1;
		if (c == 0)
			return s->e[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static void sorted_make(const Kiyot__Cell__V1__WriteVolumeRequest *req, struct sorted *s)
{
	s->n = req->n_entries;
	s->e = xcalloc(s->n + 1, sizeof(*s->e));
	memcpy(s->e, req->entries, s->n * sizeof(*s->e));
	qsort(s->e, s->n, sizeof(*s->e), by_path);
}

static int entry_check(const Kiyot__Cell__V1__WriteVolumeRequest *req, size_t i,
		       const struct sorted *s, uint64_t *bytes, struct err *err)
{
	const entry_t *e = req->entries[i];
	const char *slash;

	if (i > 0 && !path_ok(e->path))
		return err_set(err, EINVAL,
			       "entries[%zu].path \"%.64s\": not a relative path (empty, \".\" or "
			       "\"..\" components, a leading or trailing \"/\", or over %d bytes)",
			       i, e->path, VOLUME_MAX_PATH);
	if (e->type != T_DIR && e->type != T_FILE && e->type != T_SYMLINK)
		return err_set(err, EINVAL, "entries[%zu] (%s): unknown type %d", i, e->path,
			       (int)e->type);
	if (e->mode & ~07777u)
		return err_set(err, EINVAL, "entries[%zu] (%s): mode %o has bits beyond 07777", i,
			       e->path, e->mode);
	if (e->uid < -1 || e->uid > INT32_MAX || e->gid < -1 || e->gid > INT32_MAX)
		return err_set(err, EINVAL, "entries[%zu] (%s): owner %lld:%lld out of range", i,
			       e->path, (long long)e->uid, (long long)e->gid);
	if (e->type == T_SYMLINK && (!e->target[0] || strlen(e->target) > MAX_TARGET))
		return err_set(err, EINVAL,
			       "entries[%zu] (%s): a symlink needs a target of 1 to %d "
			       "bytes",
			       i, e->path, MAX_TARGET);
	if (e->type != T_FILE && e->data.len)
		return err_set(err, EINVAL, "entries[%zu] (%s): only files have data", i, e->path);
	*bytes += e->data.len;
	if (i == 0)
		return 0;
	slash = strrchr(e->path, '/');
	if (slash) {
		const entry_t *parent = find(s, e->path, (size_t)(slash - e->path));

		if (!parent || parent->type != T_DIR)
			return err_set(err, EINVAL,
				       "entries[%zu] (%s): its parent is not a directory of the "
				       "request",
				       i, e->path);
	}
	return 0;
}

int volume_validate(const Kiyot__Cell__V1__WriteVolumeRequest *req, struct err *err)
{
	struct sorted s = { 0 };
	uint64_t bytes = 0;
	int ret = 0;

	if (!volume_name_ok(req->volume))
		return err_set(
			err, EINVAL,
			"volume \"%.64s\": not a volume name ([a-z0-9-], 1 to 63 characters)",
			req->volume);
	if (req->n_entries == 0)
		return err_set(err, EINVAL, "volume %s: entries: required (the first is the root)",
			       req->volume);
	if (req->n_entries > VOLUME_MAX_ENTRIES)
		return err_set(err, E2BIG, "volume %s: %zu entries, more than %d", req->volume,
			       req->n_entries, VOLUME_MAX_ENTRIES);
	if (req->entries[0]->path[0] || req->entries[0]->type == T_SYMLINK)
		return err_set(err, EINVAL,
			       "volume %s: entries[0] must be the root: path \"\", a directory or "
			       "a file",
			       req->volume);
	if (req->entries[0]->type == T_FILE && req->n_entries > 1)
		return err_set(err, EINVAL, "volume %s: a one-file volume has one entry, not %zu",
			       req->volume, req->n_entries);
	sorted_make(req, &s);
	for (size_t i = 1; i < s.n; i++)
		if (strcmp(s.e[i - 1]->path, s.e[i]->path) == 0) {
			ret = err_set(err, EINVAL, "volume %s: path \"%s\" is listed twice",
				      req->volume, s.e[i]->path);
			goto out;
		}
	for (size_t i = 0; i < req->n_entries && ret == 0; i++)
		ret = entry_check(req, i, &s, &bytes, err);
	if (ret == 0 && bytes > VOLUME_MAX_BYTES)
		ret = err_set(err, E2BIG, "volume %s: %llu bytes of files, more than %u",
			      req->volume, (unsigned long long)bytes, VOLUME_MAX_BYTES);
	if (ret < 0)
		err_wrap(err, "volume %s", req->volume);
out:
	free(s.e);
	return ret;
}

/* The names in directory fd (not "." or ".."), read before anything changes it: removing
 * while reading may skip entries. NULL with errno set on failure; *n names. */
static char **list_names(int fd, size_t *n)
{
	char **names = NULL;
	size_t cap = 0;
	struct dirent *d;
	int own = dup(fd);
	DIR *dir = own >= 0 ? fdopendir(own) : NULL;

	*n = 0;
	if (!dir) {
		if (own >= 0)
			close(own);
		return NULL;
	}
	rewinddir(dir);
	while ((d = readdir(dir))) {
		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		xgrow((void **)&names, &cap, *n + 1, sizeof(*names));
		names[(*n)++] = xstrdup(d->d_name);
	}
	closedir(dir);
	if (!names)
		names = xcalloc(1, sizeof(*names));
	return names;
}

/* Owner, then mode (a chown clears set-id bits). */
static int set_meta(int fd, const entry_t *e)
{
	if ((e->uid >= 0 || e->gid >= 0) && fchown(fd, e->uid >= 0 ? (uid_t)e->uid : (uid_t)-1,
						   e->gid >= 0 ? (gid_t)e->gid : (gid_t)-1) < 0)
		return -errno;
	return fchmod(fd, e->mode) < 0 ? -errno : 0;
}

static bool owner_same(const struct stat *st, const entry_t *e)
{
	return (e->uid < 0 || st->st_uid == (uid_t)e->uid) &&
	       (e->gid < 0 || st->st_gid == (gid_t)e->gid);
}

static bool meta_same(const struct stat *st, const entry_t *e)
{
	return (st->st_mode & 07777) == e->mode && owner_same(st, e);
}

/* Whether fd (a regular file) holds exactly data. */
static bool content_same(int fd, const struct stat *st, const ProtobufCBinaryData *data)
{
	char buf[16384];
	size_t off = 0;

	if (!S_ISREG(st->st_mode) || (uint64_t)st->st_size != data->len)
		return false;
	while (off < data->len) {
		ssize_t r = pread(fd, buf, sizeof(buf), (off_t)off);

		if (r <= 0 || memcmp(buf, data->data + off, (size_t)r) != 0)
			return false;
		off += (size_t)r;
	}
	return true;
}

static int write_all(int fd, const ProtobufCBinaryData *data)
{
	for (size_t off = 0; off < data->len;) {
		ssize_t w = pwrite(fd, data->data + off, data->len - off, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		off += (size_t)w;
	}
	return 0;
}

/* Puts TMP_NAME in place of base (a directory there is removed first) when ret is 0, else
 * drops it; counts a replacement in *written. */
static int replace_with_tmp(int parent, const char *base, int ret, unsigned *written)
{
	struct stat st;

	if (ret == 0 && fstatat(parent, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		ret = fsroot_remove(parent, base, 0);
	if (ret == 0 && renameat(parent, TMP_NAME, parent, base) < 0)
		ret = -errno;
	if (ret < 0)
		unlinkat(parent, TMP_NAME, 0);
	else
		(*written)++;
	return ret;
}

/* One file in parent: unchanged files are left alone, others replaced through TMP_NAME. */
static int put_file(int parent, const char *base, const entry_t *e, unsigned *written)
{
	struct stat st;
	int fd, ret;

	fd = openat(parent, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0) {
		bool same = fstat(fd, &st) == 0 && content_same(fd, &st, &e->data);

		if (same && !meta_same(&st, e)) {
			ret = set_meta(fd, e);
			close(fd);
			if (ret == 0)
				(*written)++;
			return ret;
		}
		close(fd);
		if (same)
			return 0;
	}
	unlinkat(parent, TMP_NAME, 0);
	fd = openat(parent, TMP_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	ret = write_all(fd, &e->data);
	if (ret == 0)
		ret = set_meta(fd, e);
	close(fd);
	return replace_with_tmp(parent, base, ret, written);
}

static int put_dir(int parent, const char *base, const entry_t *e, unsigned *written)
{
	struct stat st;
	int fd, ret = 0;
	bool made = false;

	if (fstatat(parent, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
		ret = fsroot_remove(parent, base, 0);
		if (ret < 0)
			return ret;
	}
	if (mkdirat(parent, base, 0700) == 0)
		made = true;
	else if (errno != EEXIST)
		return -errno;
	fd = openat(parent, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		ret = -errno;
	else if (made || !meta_same(&st, e))
		ret = set_meta(fd, e);
	close(fd);
	if (ret == 0 && (made || !meta_same(&st, e)))
		(*written)++;
	return ret;
}

static int put_symlink(int parent, const char *base, const entry_t *e, unsigned *written)
{
	char cur[MAX_TARGET + 1];
	ssize_t n = readlinkat(parent, base, cur, sizeof(cur));
	struct stat st;
	int ret = 0;

	/* the same target and owner: nothing to do; another owner replaces the link too */
	if (n >= 0 && (size_t)n == strlen(e->target) && memcmp(cur, e->target, (size_t)n) == 0 &&
	    fstatat(parent, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && owner_same(&st, e))
		return 0;
	unlinkat(parent, TMP_NAME, 0);
	if (symlinkat(e->target, parent, TMP_NAME) < 0)
		return -errno;
	if ((e->uid >= 0 || e->gid >= 0) &&
	    fchownat(parent, TMP_NAME, e->uid >= 0 ? (uid_t)e->uid : (uid_t)-1,
		     e->gid >= 0 ? (gid_t)e->gid : (gid_t)-1, AT_SYMLINK_NOFOLLOW) < 0)
		ret = -errno;
	return replace_with_tmp(parent, base, ret, written);
}

/* Removes what is under dirfd (at relative path prefix) and not in the request. */
static int prune(int dirfd, const char *prefix, const struct sorted *s, unsigned *removed)
{
	size_t n;
	char **names = list_names(dirfd, &n);
	int ret = 0;

	if (!names)
		return -errno;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *rel = prefix[0] ? xasprintf("%s/%s", prefix, names[i])
						     : xstrdup(names[i]);
		const entry_t *e = find(s, rel, strlen(rel));
		int r = 0;

		if (!e) {
			r = fsroot_remove(dirfd, names[i], 0);
			if (r == 0)
				(*removed)++;
		} else if (e->type == T_DIR) {
			int sub = openat(dirfd, names[i],
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			r = sub < 0 ? -errno : prune(sub, rel, s, removed);
			if (sub >= 0)
				close(sub);
		}
		if (r < 0 && ret == 0)
			ret = r;
		free(names[i]);
	}
	free(names);
	return ret;
}

/* A one-file volume, rewritten in place: a bind mount holds the inode. */
static int write_one_file(int vols, const char *name, const entry_t *e, unsigned *written)
{
	struct stat st;
	int fd, ret = 0;

	if (fstatat(vols, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
		ret = fsroot_remove(vols, name, 0);
		if (ret < 0)
			return ret;
	}
	fd = openat(vols, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
	} else if (!content_same(fd, &st, &e->data)) {
		ret = ftruncate(fd, 0) < 0 ? -errno : write_all(fd, &e->data);
		if (ret == 0)
			ret = set_meta(fd, e);
		if (ret == 0)
			(*written)++;
	} else if (!meta_same(&st, e)) {
		ret = set_meta(fd, e);
		if (ret == 0)
			(*written)++;
	}
	close(fd);
	return ret;
}

/* The directory holding an entry, opened beneath root; cached while entries share it. */
static int parent_of(int root, const char *path, char **cur, int *cur_fd, const char **base)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	*base = slash ? slash + 1 : path;
	if (*cur && strlen(*cur) == n && strncmp(*cur, path, n) == 0)
		return *cur_fd;
	if (*cur_fd >= 0 && *cur_fd != root)
		close(*cur_fd);
	free(*cur);
	*cur = xstrndup(path, n);
	*cur_fd = n ? fsroot_open(root, *cur, O_RDONLY | O_DIRECTORY, FSROOT_BENEATH) : root;
	return *cur_fd;
}

/* Writes the entries of one type, in path order. */
static int write_pass(int root, const struct sorted *s, bool links, unsigned *written,
		      const char **failed)
{
	char *cur = NULL;
	int cur_fd = -1, ret = 0;

	for (size_t i = 0; i < s->n && ret == 0; i++) {
		const entry_t *e = s->e[i];
		const char *base;
		int parent;

		if (!e->path[0] || (e->type == T_SYMLINK) != links)
			continue;
		parent = parent_of(root, e->path, &cur, &cur_fd, &base);
		if (parent < 0)
			ret = parent;
		else if (e->type == T_DIR)
			ret = put_dir(parent, base, e, written);
		else if (e->type == T_FILE)
			ret = put_file(parent, base, e, written);
		else
			ret = put_symlink(parent, base, e, written);
		if (ret < 0)
			*failed = e->path;
	}
	if (cur_fd >= 0 && cur_fd != root)
		close(cur_fd);
	free(cur);
	return ret;
}

static int write_tree(int vols, const Kiyot__Cell__V1__WriteVolumeRequest *req, unsigned *written,
		      unsigned *removed, struct err *err)
{
	const char *failed = "";
	struct sorted s = { 0 };
	unsigned made = 0;
	int root, ret;

	ret = put_dir(vols, req->volume, req->entries[0], &made);
	if (ret < 0)
		return err_set(err, -ret, "volume %s: %s", req->volume, strerror(-ret));
	root = openat(vols, req->volume, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0)
		return err_set(err, errno, "volume %s: %s", req->volume, strerror(errno));
	*written += made;
	sorted_make(req, &s);
	/* directories and files, then the symlinks that point at them, then removals */
	ret = write_pass(root, &s, false, written, &failed);
	if (ret == 0)
		ret = write_pass(root, &s, true, written, &failed);
	if (ret < 0) {
		err_set(err, -ret, "volume %s: %s: %s", req->volume, failed, strerror(-ret));
	} else {
		ret = prune(root, "", &s, removed);
		if (ret < 0)
			err_set(err, -ret, "volume %s: removing old entries: %s", req->volume,
				strerror(-ret));
	}
	free(s.e);
	close(root);
	return ret;
}

int volume_write(const char *volumes_dir, const Kiyot__Cell__V1__WriteVolumeRequest *req,
		 unsigned *written, unsigned *removed, struct err *err)
{
	int vols, ret;

	*written = *removed = 0;
	if (volume_validate(req, err) < 0)
		return -err->code;
	if (mkdir(volumes_dir, 0700) < 0 && errno != EEXIST)
		return err_set(err, errno, "%s: %s", volumes_dir, strerror(errno));
	vols = open(volumes_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (vols < 0)
		return err_set(err, errno, "%s: %s", volumes_dir, strerror(errno));
	pthread_mutex_lock(&write_lock);
	if (req->entries[0]->type == T_FILE) {
		ret = write_one_file(vols, req->volume, req->entries[0], written);
		if (ret < 0)
			err_set(err, -ret, "volume %s: %s", req->volume, strerror(-ret));
	} else {
		ret = write_tree(vols, req, written, removed, err);
	}
	pthread_mutex_unlock(&write_lock);
	close(vols);
	return ret;
}
