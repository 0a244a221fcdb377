/*
 * cgroup.c: cgroup v1 and v2 paths (see cgroup.h).
 */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "fsutil.h"
#include "xalloc.h"

#define UNITS_PARENT_V2 "/kiyot"

static const char *root = "/sys/fs/cgroup";
static int v2_mode = -1; /* not known yet */

bool cgroup_v2(void)
{
	if (v2_mode < 0) {
		struct statfs s;

		v2_mode = statfs(root, &s) == 0 && s.f_type == CGROUP2_SUPER_MAGIC;
	}
	return v2_mode;
}

void cgroup_set_root(const char *dir, bool v2)
{
	root = dir ? dir : "/sys/fs/cgroup";
	v2_mode = dir ? v2 : -1;
}

char *cgroup_file(const char *ctrl, const char *cg, const char *file)
{
	if (cgroup_v2())
		return xasprintf("%s%s/%s", root, cg, file);
	return xasprintf("%s/%s%s/%s", root, ctrl, cg, file);
}

bool cgroup_exists(const char *cg)
{
	_cleanup_free_ char *path = cgroup_v2() ? xasprintf("%s%s", root, cg)
						: xasprintf("%s/memory%s", root, cg);

	return fs_exists(path);
}

/* The memory cgroup (v1) this process is in, e.g. "/kiyot/<cell>"; "" when unknown. */
static char *own_v1(void)
{
	char *text = NULL;
	struct err err = ERR_INIT;
	char *res = NULL;

	if (fs_read_file("/proc/self/cgroup", 65536, &text, NULL, &err) < 0)
		return xstrdup("");
	for (char *line = text; line && *line;) {
		char *nl = strchr(line, '\n');
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

		if (nl)
			*nl = '\0';
		if (c2 && (size_t)(c2 - c1 - 1) == strlen("memory") &&
		    strncmp(c1 + 1, "memory", 6) == 0)
			res = xstrdup(strcmp(c2 + 1, "/") == 0 ? "" : c2 + 1);
		line = nl ? nl + 1 : NULL;
	}
	free(text);
	return res ? res : xstrdup("");
}

int cgroup_unified_ok(struct err *err)
{
	if (cgroup_v2())
		return 0;
	return err_set(err, EINVAL,
		       "linux.resources.unified: this cell's cgroups are v1, and the unified "
		       "settings need the cgroup v2 hierarchy; leave them out for this node");
}

int cgroup_write(const char *cg, const char *file, const char *value, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s%s/%s", root, cg, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : write(fd, value, strlen(value));
	int e = errno;

	if (fd >= 0)
		close(fd);
	if (n < 0) {
		errno = e;
		return err_errno(err, "writing \"%.64s\" to %s", value, path);
	}
	return 0;
}

/* Gives a v2 cgroup's children the controllers the units are limited and measured by (each
 * on its own: a kernel without one still gets the others; memory is a must). */
static int delegate(const char *cg, struct err *err)
{
	static const char *const ctls[] = { "+memory", "+cpu", "+pids" };
	_cleanup_free_ char *path = xasprintf("%s%s/cgroup.subtree_control", root, cg);

	for (size_t i = 0; i < sizeof(ctls) / sizeof(ctls[0]); i++) {
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : write(fd, ctls[i], strlen(ctls[i]));
		int e = errno;

		if (fd >= 0)
			close(fd);
		if (n < 0 && i == 0) {
			errno = e;
			return err_errno(
				err, "giving the units' cgroups the memory controller (%s)", path);
		}
	}
	return 0;
}

char *cgroup_units_parent(struct err *err)
{
	_cleanup_free_ char *dir = NULL;

	if (!cgroup_v2())
		return own_v1();
	dir = xasprintf("%s%s", root, UNITS_PARENT_V2);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		err_errno(err, "making the units' cgroup %s", dir);
		return NULL;
	}
	if (delegate("", err) < 0 || delegate(UNITS_PARENT_V2, err) < 0)
		return NULL;
	return xstrdup(UNITS_PARENT_V2);
}
