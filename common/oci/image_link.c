/*
 * image_link.c: a new image's root file system started from an image of the store whose layers
 * are the first of its own (a base image shared by both), instead of unpacking those layers
 * again. Every entry but a directory becomes a hard link to the base's: no data is read or
 * written, no inode is allocated for it, and removing either image later leaves the other's
 * files. Directories are made anew, so the layers unpacked on top (which replace an entry by
 * removing it first, never by writing into it: unpack.c) change only the new image's tree.
 */
#include "image_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xalloc.h"

/* Deeper trees are unpacked instead: each level holds three descriptors open. */
#define IMAGE_LINK_MAX_DEPTH 64

static int link_dir(int sfd, int dfd, const char *path, int depth, struct err *err);

/* Copies directory name of sfd (whose status is st) into dfd, and what it holds. */
static int link_subdir(int sfd, int dfd, const char *name, const struct stat *st, const char *path,
		       int depth, struct err *err)
{
	_cleanup_free_ char *sub = xasprintf("%s/%s", path, name);
	_cleanup_close_ int cs = -1;
	_cleanup_close_ int cd = -1;
	int ret;

	if (depth >= IMAGE_LINK_MAX_DEPTH)
		return err_set(err, ELOOP, "%s: more than %d levels deep", sub,
			       IMAGE_LINK_MAX_DEPTH);
	if (mkdirat(dfd, name, 0700) < 0)
		return err_errno(err, "mkdir %s", sub);
	cs = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (cs < 0 || cd < 0)
		return err_errno(err, "open %s", sub);
	ret = link_dir(cs, cd, sub, depth + 1, err);
	if (ret < 0)
		return ret;
	/* owner first: a chown clears the set-id bits the mode may carry */
	if (fchown(cd, st->st_uid, st->st_gid) < 0 && errno != EPERM)
		return err_errno(err, "chown %s", sub);
	if (fchmod(cd, st->st_mode & 07777) < 0)
		return err_errno(err, "chmod %s", sub);
	return 0;
}

/* Copies what directory sfd holds into the empty directory dfd. */
static int link_dir(int sfd, int dfd, const char *path, int depth, struct err *err)
{
	int fd = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;
	int ret = 0;

	if (fd < 0)
		return err_errno(err, "open %s", path);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return err_errno(err, "list %s", path);
	}
	while (ret == 0 && (errno = 0, de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN) {
			/* flags 0: a symbolic link is linked itself, never followed */
			if (linkat(sfd, de->d_name, dfd, de->d_name, 0) < 0)
				ret = err_errno(err, "link %s/%s", path, de->d_name);
			continue;
		}
		if (fstatat(sfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			ret = err_errno(err, "stat %s/%s", path, de->d_name);
		else if (S_ISDIR(st.st_mode))
			ret = link_subdir(sfd, dfd, de->d_name, &st, path, depth, err);
		else if (linkat(sfd, de->d_name, dfd, de->d_name, 0) < 0)
			ret = err_errno(err, "link %s/%s", path, de->d_name);
	}
	if (ret == 0 && errno)
		ret = err_errno(err, "list %s", path);
	closedir(d);
	return ret;
}

int image_tree_link(const char *src, const char *dst, struct err *err)
{
	_cleanup_close_ int sfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int dfd = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (sfd < 0)
		return err_errno(err, "open %s", src);
	if (dfd < 0)
		return err_errno(err, "open %s", dst);
	return link_dir(sfd, dfd, src, 0, err);
}
