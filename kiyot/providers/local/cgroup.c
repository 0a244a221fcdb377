#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fsutil.h"
#include "log.h"
#include "xalloc.h"

/* How often removing a cgroup is tried again while it is busy, 10 ms apart. */
#define REMOVE_BUSY_RETRIES 50

/* Deepest nesting walked below a cell's cgroup (the agent adds one level per unit). */
#define CGROUP_MAX_DEPTH 16
/* Largest control file read: cgroup.procs of a cell that runs thousands of processes. */
#define CGROUP_READ_MAX (1 << 20)

/* Joins the parts with '/', leaving out what is NULL. */
char *cgroup_path(const char *ctrl, const char *rel, const char *file)
{
	if (file)
		return xasprintf("%s/%s/%s/%s", CGROUP_V1_ROOT, ctrl, rel, file);
	return xasprintf("%s/%s/%s", CGROUP_V1_ROOT, ctrl, rel);
}

/* A mounted v1 controller has cgroup.procs at its root. */
int cgroup_controller_mounted(const char *ctrl)
{
	_cleanup_free_ char *p = xasprintf("%s/%s/cgroup.procs", CGROUP_V1_ROOT, ctrl);

	return fs_exists(p);
}

/* mkdir -p below the controller's mount, which must exist. */
int cgroup_create(const char *ctrl, const char *rel, struct err *err)
{
	_cleanup_free_ char *path = cgroup_path(ctrl, rel, NULL);

	if (!cgroup_controller_mounted(ctrl))
		return err_set(err, ENOENT, "cgroup v1 controller %s is not mounted at %s/%s", ctrl,
			       CGROUP_V1_ROOT, ctrl);
	return fs_mkdir_p(path, 0755, err);
}

/* One write(2) of the whole value, as cgroup files expect. */
int cgroup_write(const char *ctrl, const char *rel, const char *file, const char *value,
		 struct err *err)
{
	_cleanup_free_ char *path = cgroup_path(ctrl, rel, file);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t len = strlen(value);

	if (fd < 0)
		return err_errno(err, "open %s", path);
	if (write(fd, value, len) != (ssize_t)len)
		return err_errno(err, "write \"%s\" to %s", value, path);
	return 0;
}

/* Bounded read of one control file. */
int cgroup_read(const char *ctrl, const char *rel, const char *file, char **out, struct err *err)
{
	_cleanup_free_ char *path = cgroup_path(ctrl, rel, file);

	return fs_read_file(path, 64 * 1024, out, NULL, err);
}

/* Called for every cgroup directory of a subtree; children before their parent. */
typedef int (*cgroup_visit_fn)(const char *dir, void *arg, struct err *err);

/* Walks the cgroup directories below dir depth-first, calling fn after each directory's
 * children. Stops at the first error. */
static int walk_post(const char *dir, int depth, cgroup_visit_fn fn, void *arg, struct err *err)
{
	DIR *d;
	struct dirent *de;
	int ret = 0;

	if (depth > CGROUP_MAX_DEPTH)
		return err_set(err, ELOOP, "%s: cgroups nested deeper than %d", dir,
			       CGROUP_MAX_DEPTH);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : err_errno(err, "open %s", dir);
	while (ret == 0 && (de = readdir(d))) {
		_cleanup_free_ char *sub = NULL;

		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		sub = xasprintf("%s/%s", dir, de->d_name);
		ret = walk_post(sub, depth + 1, fn, arg, err);
	}
	closedir(d);
	if (ret < 0)
		return ret;
	return fn(dir, arg, err);
}

/* What kill_visit and count_visit share. */
struct procs_walk {
	int sig; /* 0: count only */
	int count;
};

/* Reads dir/cgroup.procs, counts its pids and signals each (unless sig is 0). */
static int procs_visit(const char *dir, void *arg, struct err *err)
{
	struct procs_walk *w = arg;
	_cleanup_free_ char *path = xasprintf("%s/cgroup.procs", dir);
	_cleanup_free_ char *data = NULL;
	struct err ignored = ERR_INIT;
	char *p, *end;

	if (fs_read_file(path, CGROUP_READ_MAX, &data, NULL, &ignored) < 0) {
		if (ignored.code == ENOENT)
			return 0;
		*err = ignored;
		return -err->code;
	}
	for (p = data; *p; p = end) {
		long pid = strtol(p, &end, 10);

		if (end == p)
			break;
		if (pid <= 1)
			continue;
		w->count++;
		if (w->sig)
			kill((pid_t)pid, w->sig);
	}
	return 0;
}

/* Thaws one freezer cgroup; a missing state file (not a freezer hierarchy) is fine. */
static int thaw_visit(const char *dir, void *arg, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/freezer.state", dir);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);

	(void)arg;
	if (fd < 0)
		return errno == ENOENT ? 0 : err_errno(err, "open %s", path);
	if (write(fd, "THAWED", 6) != 6)
		return err_errno(err, "thaw %s", dir);
	return 0;
}

int cgroup_thaw_tree(const char *rel, struct err *err)
{
	_cleanup_free_ char *path = cgroup_path("freezer", rel, NULL);

	return walk_post(path, 0, thaw_visit, NULL, err);
}

/* Kills in rounds: new processes forked during a round are caught by the next one. */
int cgroup_kill_tree(const char *ctrl, const char *rel, int timeout_ms, struct err *err)
{
	_cleanup_free_ char *path = cgroup_path(ctrl, rel, NULL);
	int64_t deadline = clock_mono_ns() + (int64_t)timeout_ms * 1000000;
	long pause_ms = 1;

	for (;;) {
		struct procs_walk w = { SIGKILL, 0 };
		struct err thaw = ERR_INIT;
		int ret;

		/* every round: a runtime killed in the last one may have frozen its container */
		if (cgroup_thaw_tree(rel, &thaw) < 0)
			log_warn("%s", thaw.msg);
		ret = walk_post(path, 0, procs_visit, &w, err);

		if (ret < 0)
			return err_wrap(err, "kill cgroup %s", path);
		if (w.count == 0)
			return 0;
		if (clock_mono_ns() > deadline)
			return err_set(err, EBUSY,
				       "cgroup %s: %d processes alive after SIGKILL for %d ms",
				       path, w.count, timeout_ms);
		/* most processes are gone within a millisecond of SIGKILL; back off to 16 ms */
		nanosleep(&(struct timespec){ 0, pause_ms * 1000000 }, NULL);
		if (pause_ms < 16)
			pause_ms *= 2;
	}
}

/* Depth-first rmdir; a cgroup's control files vanish with its directory. */
int cgroup_remove_tree(const char *ctrl, const char *rel, struct err *err)
{
	_cleanup_free_ char *path = cgroup_path(ctrl, rel, NULL);
	int ret;

	/* a killed process holds its cgroup until its parent reaps it: give that a moment */
	for (int i = 0;; i++) {
		ret = fs_remove_dirs(path, err);
		if (ret != -EBUSY || i == REMOVE_BUSY_RETRIES)
			return ret;
		err_clear(err);
		nanosleep(&(struct timespec){ 0, 10 * 1000000 }, NULL);
	}
}
