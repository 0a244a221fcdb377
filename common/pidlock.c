#include "pidlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xalloc.h"

/* Room for a pid and its newline, and more than any pid file written here holds. */
#define PID_TEXT_MAX 32

/* The whole file, for F_OFD_SETLK (type F_WRLCK) or F_OFD_GETLK (it tells whether a write
 * lock could be placed). */
static int ofd_lock(int fd, int cmd, struct flock *fl)
{
	*fl = (struct flock){ .l_type = F_WRLCK, .l_whence = SEEK_SET };
	return fcntl(fd, cmd, fl);
}

/* The pid the holder wrote; 0 while it has not yet (or wrote something else). */
static long read_pid(int fd)
{
	char text[PID_TEXT_MAX + 1];
	ssize_t n = pread(fd, text, PID_TEXT_MAX, 0);
	char *end;
	long pid;

	if (n <= 0)
		return 0;
	text[n] = '\0';
	errno = 0;
	pid = strtol(text, &end, 10);
	if (errno || end == text || (*end && *end != '\n') || pid <= 0)
		return 0;
	return pid;
}

/* The refusal a second taker gets. */
static int held_by(const char *path, long pid, struct err *err)
{
	if (pid > 0)
		return err_set(err, EBUSY, "%s is held by pid %ld", path, pid);
	return err_set(err, EBUSY, "%s is held by a process that has not written its pid yet",
		       path);
}

int pidlock_take(const char *path, struct err *err)
{
	char text[PID_TEXT_MAX];
	struct flock fl;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	int n;

	if (fd < 0)
		return err_errno(err, "open %s", path);
	if (ofd_lock(fd, F_OFD_SETLK, &fl) < 0) {
		int ret = errno == EAGAIN || errno == EACCES ? held_by(path, read_pid(fd), err)
							     : err_errno(err, "lock %s", path);

		close(fd);
		return ret;
	}
	n = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, text, (size_t)n, 0) != n) {
		err_errno(err, "write %s", path);
		close(fd);
		return -err->code;
	}
	return fd;
}

int pidlock_holder(const char *path, long *pid, struct err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct flock fl;

	*pid = 0;
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return err_errno(err, "open %s", path);
	if (ofd_lock(fd, F_OFD_GETLK, &fl) < 0)
		return err_errno(err, "check the lock of %s", path);
	if (fl.l_type == F_UNLCK)
		return 0;
	*pid = read_pid(fd);
	return 1;
}
