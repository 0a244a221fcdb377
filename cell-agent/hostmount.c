/*
 * hostmount.c: clones of the host's mount trees for units that share mounts with it (see
 * hostmount.h).
 */
#include "hostmount.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdpass.h"
#include "fsutil.h"
#include "xalloc.h"

#define MOUNTINFO_MAX (4 * 1024 * 1024)

int hostmount_open_ns(struct err *err)
{
	int fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return err_errno(err, "open /proc/self/ns/mnt");
	return fd;
}

static int open_tree_clone(const char *path)
{
	return (int)syscall(SYS_open_tree, AT_FDCWD, path,
			    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
}

/* A clone of path's tree made in the mount namespace host_ns, by a child that joins it. */
static int clone_in_ns(int host_ns, const char *path, struct err *err)
{
	int sv[2], st = 0, fd;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
		return err_errno(err, "socketpair");
	pid = fork();
	if (pid == 0) {
		int t;

		if (setns(host_ns, CLONE_NEWNS) < 0 || (t = open_tree_clone(path)) < 0)
			_exit(fdpass_send_errno(sv[1], errno) == 0 ? 1 : 2);
		_exit(fdpass_send(sv[1], t) == 0 ? 0 : 3);
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return err_errno(err, "fork");
	}
	fd = fdpass_recv(sv[0]);
	close(sv[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (fd < 0) {
		errno = -fd;
		return err_errno(err, "clone the host's mount at %s", path);
	}
	return fd;
}

/* True when path is a mount point of this namespace (its mount id differs from its parent's
 * or it is the root of a mount). */
static bool mounted_at(const char *path)
{
	_cleanup_free_ char *info = NULL;
	struct err err = ERR_INIT;
	char *save = NULL;
	size_t n = strlen(path);

	if (fs_read_file("/proc/self/mountinfo", MOUNTINFO_MAX, &info, NULL, &err) < 0)
		return false;
	for (char *l = strtok_r(info, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char mp[4096];

		if (sscanf(l, "%*d %*d %*s %*s %4095s", mp) == 1 && strncmp(mp, path, n) == 0 &&
		    mp[n] == '\0')
			return true;
	}
	return false;
}

int hostmount_stage(int host_ns, const char *host_path, const char *target, struct err *err)
{
	struct stat st;
	_cleanup_close_ int fd = -1;

	if (host_path[0] != '/' || strstr(host_path, "/../"))
		return err_set(err, EINVAL, "host path \"%s\" is not absolute", host_path);
	if (mounted_at(target))
		return 0;
	fd = host_ns >= 0 ? clone_in_ns(host_ns, host_path, err) : open_tree_clone(host_path);
	if (fd < 0)
		return host_ns >= 0 ? fd : err_errno(err, "clone the mount at %s", host_path);
	if (fstat(fd, &st) < 0)
		return err_errno(err, "stat the clone of %s", host_path);
	if (S_ISDIR(st.st_mode)) {
		if (fs_mkdir_p(target, 0755, err) < 0)
			return -err->code;
	} else {
		int f = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);

		if (f < 0)
			return err_errno(err, "create %s", target);
		close(f);
	}
	if (syscall(SYS_move_mount, fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return err_errno(err, "attach the clone of %s at %s", host_path, target);
	return 0;
}

int hostmount_release(const char *dir, struct err *err)
{
	size_t n = strlen(dir);

	/* one mount per pass, the last listed (innermost) first, until none is left under dir */
	for (int pass = 0; pass < 64; pass++) {
		_cleanup_free_ char *info = NULL, *last = NULL;
		char *save = NULL;

		if (fs_read_file("/proc/self/mountinfo", MOUNTINFO_MAX, &info, NULL, err) < 0)
			return -err->code;
		for (char *l = strtok_r(info, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			char mp[4096];

			if (sscanf(l, "%*d %*d %*s %*s %4095s", mp) == 1 &&
			    strncmp(mp, dir, n) == 0 && (mp[n] == '\0' || mp[n] == '/')) {
				free(last);
				last = xstrdup(mp);
			}
		}
		if (!last)
			return 0;
		if (umount2(last, MNT_DETACH) < 0)
			return err_errno(err, "unmount %s", last);
	}
	return err_set(err, EBUSY, "%s: mounts keep coming back", dir);
}
