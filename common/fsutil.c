#include "fsutil.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsroot.h"
#include "xalloc.h"

int fs_mkdir_p(const char *path, mode_t mode, struct err *err)
{
	_cleanup_free_ char *p = xstrdup(path);

	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return err_errno(err, "mkdir %s", p);
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return err_errno(err, "mkdir %s", p);
	return 0;
}

int fs_read_file(const char *path, size_t max, char **out, size_t *len, struct err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *data = NULL;
	size_t n = 0, cap = 0;

	if (fd < 0)
		return err_errno(err, "open %s", path);
	for (;;) {
		ssize_t r;

		if (n + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 8192;
			data = xrealloc(data, cap);
		}
		r = read(fd, data + n, cap - n - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return err_errno(err, "read %s", path);
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > max)
			return err_set(err, EFBIG, "%s: larger than %zu bytes", path, max);
	}
	if (!data)
		data = xmalloc(1);
	data[n] = '\0';
	if (len)
		*len = n;
	*out = steal_ptr(data);
	return 0;
}

/* Writes a temporary file, flushed to disk when sync, and renames it over path. */
static int write_replace(const char *path, const void *data, size_t len, mode_t mode, bool sync,
			 struct err *err)
{
	_cleanup_free_ char *tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	const char *p = data;

	if (fd < 0)
		return err_errno(err, "create %s", tmp);
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			err_errno(err, "write %s", tmp);
			goto fail;
		}
		p += w;
		len -= (size_t)w;
	}
	if (sync && fsync(fd) < 0) {
		err_errno(err, "fsync %s", tmp);
		goto fail;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		err_errno(err, "rename %s", path);
		unlink(tmp);
		return -err->code;
	}
	return 0;
fail:
	close(fd);
	unlink(tmp);
	return -err->code;
}

int fs_write_file(const char *path, const void *data, size_t len, mode_t mode, struct err *err)
{
	return write_replace(path, data, len, mode, true, err);
}

int fs_replace_file(const char *path, const void *data, size_t len, mode_t mode, struct err *err)
{
	return write_replace(path, data, len, mode, false, err);
}

/* fsroot_remove of path's last component in its parent directory. */
static int remove_path(const char *path, unsigned flags, struct err *err)
{
	_cleanup_free_ char *dir = xstrdup(path);
	_cleanup_close_ int dfd = -1;
	size_t n = strlen(dir);
	const char *base;
	char *slash;
	int ret;

	while (n > 1 && dir[n - 1] == '/')
		dir[--n] = '\0';
	slash = strrchr(dir, '/');
	base = slash ? slash + 1 : dir;
	if (slash)
		*slash = '\0';
	dfd = open(!slash ? "." : slash == dir ? "/" : dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : err_errno(err, "remove %s", path);
	ret = fsroot_remove(dfd, base, flags);
	if (ret < 0) {
		errno = -ret;
		return err_errno(err, "remove %s", path);
	}
	return 0;
}

int fs_remove_tree(const char *path, struct err *err)
{
	return remove_path(path, 0, err);
}

int fs_remove_dirs(const char *path, struct err *err)
{
	return remove_path(path, FSROOT_DIRS_ONLY, err);
}

int fs_exists(const char *path)
{
	return access(path, F_OK) == 0;
}
