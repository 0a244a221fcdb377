/*
 * provider_local_teardown.c: removing what a local cell owns, found from its id whether or
 * not its record survived: its processes, mounts, cgroups in every hierarchy, network and
 * state directory (see provider_local_internal.h).
 */
#include "provider_local_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cellguard.h"
#include "cellnat.h"
#include "cgroup.h"
#include "clock.h"
#include "fsutil.h"
#include "log.h"
#include "netlink.h"
#include "proc.h"
#include "xalloc.h"

/* Decodes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape_octal(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* Longer paths first, so nested mounts go before their parents. */
static int cmp_len_desc(const void *a, const void *b)
{
	size_t x = strlen(*(char *const *)a), y = strlen(*(char *const *)b);

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Detaches every mount at or below dir (the agent's overlay mounts of its units), deepest
 * first. */
static int unmount_below(const char *dir, struct err *err)
{
	_cleanup_free_ char *data = NULL;
	char **points = NULL;
	size_t n = 0, cap = 0, dlen = strlen(dir);
	char *line, *next;
	int ret = 0;

	if (fs_read_file("/proc/self/mountinfo", MOUNTINFO_MAX, &data, NULL, err) < 0)
		return -err->code;
	for (line = data; line && *line; line = next) {
		char *f = line, *end;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		for (int i = 0; i < 4 && f; i++) {
			f = strchr(f, ' ');
			if (f)
				f++;
		}
		if (!f)
			continue;
		end = strchr(f, ' ');
		if (end)
			*end = '\0';
		unescape_octal(f);
		if (strncmp(f, dir, dlen) || (f[dlen] != '/' && f[dlen] != '\0'))
			continue;
		xgrow((void **)&points, &cap, n + 1, sizeof(*points));
		points[n++] = f;
	}
	if (n > 1)
		qsort(points, n, sizeof(*points), cmp_len_desc);
	for (size_t i = 0; i < n; i++) {
		if (umount2(points[i], MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT &&
		    ret == 0)
			ret = err_errno(err, "unmount %s", points[i]);
	}
	free(points);
	return ret;
}

/* Keeps the first error of a best-effort sequence in *first and logs the later ones. */
static void keep_first(struct err *first, struct err *e, const char *cell_id)
{
	if (!e->code)
		return;
	if (!first->code)
		*first = *e;
	else
		log_warn("local provider: cell %s teardown: %s", cell_id, e->msg);
	err_clear(e);
}

void local_remove_all_hierarchies(const char *rel, const char *id, struct err *first)
{
	DIR *d = opendir("/sys/fs/cgroup");
	struct dirent *de;
	struct err e = ERR_INIT;

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.' ||
		    strcmp(de->d_name, "unified") == 0)
			continue;
		if (cgroup_remove_tree(de->d_name, rel, &e) < 0)
			keep_first(first, &e, id);
	}
	closedir(d);
}

/* Removes everything a cell may own, whether or not launch finished: processes, mounts,
 * cgroups, veth, netns, state directory. Every step runs even if an earlier one failed;
 * returns the first failure. */
int local_cell_teardown(struct local_provider *p, const char *id, struct err *err)
{
	_cleanup_free_ char *dir = local_cell_path(p, id, NULL);
	_cleanup_free_ char *ns = local_netns_path(id);
	_cleanup_free_ char *rel = local_cgroup_rel(p, id);
	struct err first = ERR_INIT, e = ERR_INIT;
	char veth[CELLNET_IFNAME_SIZE];
	struct cell_record r = { 0 };
	int nl, had_ns;

	if (local_record_load(p, id, &r, &e) == 0 && cell_record_agent_alive(&r))
		kill((pid_t)r.agent_pid, SIGKILL);
	cell_record_release(&r);
	err_clear(&e);
	local_agent_kill_holder(p,
				id); /* an agent the record does not name (a crash before it did) */
	for (size_t i = 0; i < NCTRL; i++) {
		if (cgroup_kill_tree(cell_controllers[i], rel, KILL_TIMEOUT_MS, &e) < 0)
			keep_first(&first, &e, id);
	}
	if (unmount_below(dir, &e) < 0)
		keep_first(&first, &e, id);
	if (cellnat_hostports_clear(id, &e) < 0)
		keep_first(&first, &e, id);
	local_remove_all_hierarchies(rel, id, &first);
	/* Releasing the netns makes the kernel destroy the veth pair in the background, which
	 * costs the caller ~1 ms where RTM_DELLINK waits 10-50 ms for an RCU grace period. The
	 * host name may linger for a moment; launch deletes such a stale link. Only a veth whose
	 * netns is already gone is deleted here. */
	had_ns = fs_exists(ns);
	if (nl_netns_delete(ns, &e) < 0)
		keep_first(&first, &e, id);
	if (!had_ns) {
		cellnet_veth_name(id, veth, sizeof(veth));
		nl = nl_open(-1, &e);
		if (nl >= 0) {
			nl_link_delete(nl, veth, &e);
			close(nl);
		}
		keep_first(&first, &e, id);
	}
	if (fs_remove_tree(dir, &e) < 0)
		keep_first(&first, &e, id);
	/* a cell whose rules were never written has none to remove */
	if (local_lease_drop(p, id) && local_spoof_remove(p, id, &e) < 0)
		keep_first(&first, &e, id);
	if (first.code) {
		*err = first;
		return err_wrap(err, "cell %s: teardown incomplete, retry terminate", id);
	}
	return 0;
}
