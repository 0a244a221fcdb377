/*
 * bundle_security.c: who a unit's process is and what it may do: its capability set (the
 * default, or every one when privileged, with the unit's adds and drops, within the agent's
 * own bounding set), its user and groups resolved in the image's /etc/passwd and /etc/group,
 * and its seccomp filter (seccomp.h). bundle.c puts them in config.json.
 */
#include "bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "bundle_internal.h"
#include "fsroot.h"
#include "fsutil.h"
#include "seccomp.h"
#include "xalloc.h"

/* containerd's default capability set. */
static const char *const default_caps[] = {
	"CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",	   "CAP_FOWNER",
	"CAP_MKNOD",   "CAP_NET_RAW",	   "CAP_SETGID",	   "CAP_SETUID",
	"CAP_SETFCAP", "CAP_SETPCAP",	   "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
	"CAP_KILL",    "CAP_AUDIT_WRITE",
};

/* Every capability by number, as in linux/capability.h. */
static const char *const all_caps[] = {
	"CAP_CHOWN",
	"CAP_DAC_OVERRIDE",
	"CAP_DAC_READ_SEARCH",
	"CAP_FOWNER",
	"CAP_FSETID",
	"CAP_KILL",
	"CAP_SETGID",
	"CAP_SETUID",
	"CAP_SETPCAP",
	"CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST",
	"CAP_NET_ADMIN",
	"CAP_NET_RAW",
	"CAP_IPC_LOCK",
	"CAP_IPC_OWNER",
	"CAP_SYS_MODULE",
	"CAP_SYS_RAWIO",
	"CAP_SYS_CHROOT",
	"CAP_SYS_PTRACE",
	"CAP_SYS_PACCT",
	"CAP_SYS_ADMIN",
	"CAP_SYS_BOOT",
	"CAP_SYS_NICE",
	"CAP_SYS_RESOURCE",
	"CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG",
	"CAP_MKNOD",
	"CAP_LEASE",
	"CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL",
	"CAP_SETFCAP",
	"CAP_MAC_OVERRIDE",
	"CAP_MAC_ADMIN",
	"CAP_SYSLOG",
	"CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND",
	"CAP_AUDIT_READ",
	"CAP_PERFMON",
	"CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
};

/* The highest capability this kernel knows (the table's last when it cannot be read). */
static size_t last_cap(void)
{
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	unsigned long n = ARRAY_SIZE(all_caps) - 1;

	if (f) {
		if (fscanf(f, "%lu", &n) != 1 || n >= ARRAY_SIZE(all_caps))
			n = ARRAY_SIZE(all_caps) - 1;
		fclose(f);
	}
	return n;
}

/* The agent's own bounding set: a unit cannot get more (capset would fail). */
static uint64_t own_bounding_set(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	unsigned long long set = ~0ULL;
	char line[256];

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapBnd: %llx", &set) == 1)
			break;
	if (f)
		fclose(f);
	return set;
}

/* A capability's number from "NET_ADMIN" or "CAP_NET_ADMIN" (any case); -1 if unknown. */
static int cap_number(const char *name, size_t last)
{
	const char *bare = strncasecmp(name, "CAP_", 4) == 0 ? name + 4 : name;

	for (size_t i = 0; i <= last; i++)
		if (strcasecmp(all_caps[i] + 4, bare) == 0)
			return (int)i;
	return -1;
}

/* The unit's capability set: the default (or every one when privileged), plus what it adds,
 * minus what it drops, within what the agent itself may hand out; see bundle_internal.h. */
int bundle_unit_caps(const Kiyot__Cell__V1__Unit *unit, json_t **out, struct err *err)
{
	size_t last = last_cap();
	uint64_t bounding = own_bounding_set();
	bool have[ARRAY_SIZE(all_caps)] = { false };

	for (size_t i = 0; i < ARRAY_SIZE(default_caps); i++)
		have[cap_number(default_caps[i], last)] = true;
	for (size_t i = 0; i <= last; i++)
		have[i] = have[i] || unit->privileged;
	/* as other runtimes order them: ALL first (added, then dropped), then the named ones
	 * (added, then dropped), so "drop ALL, add X" leaves X */
	for (int pass = 0; pass < 4; pass++) {
		bool drop = pass == 1 || pass == 3, all = pass < 2;
		char **names = drop ? unit->capabilities_drop : unit->capabilities_add;
		size_t n = drop ? unit->n_capabilities_drop : unit->n_capabilities_add;

		for (size_t i = 0; i < n; i++) {
			int c = cap_number(names[i], last);

			if (strcasecmp(names[i], "ALL") == 0) {
				for (size_t j = 0; all && j <= last; j++)
					have[j] = !drop;
				continue;
			}
			if (c < 0)
				return err_set(err, EINVAL,
					       "capability \"%.64s\" is not one this kernel knows "
					       "(e.g. NET_ADMIN, SYS_TIME)",
					       names[i]);
			if (!all)
				have[c] = !drop;
		}
	}
	*out = json_array();
	for (size_t i = 0; i <= last; i++)
		if (have[i] && (bounding & (1ULL << i)))
			json_array_append_new(*out, json_string(all_caps[i]));
	return 0;
}

/* Reads root/<path> without following links out of root, at most ETC_FILE_MAX bytes.
 * *out is NULL (and 0 returned) when the file does not exist. */
static int read_in_root(const char *root, const char *path, char **out, struct err *err)
{
	_cleanup_close_ int dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *fdpath = NULL;
	struct stat st;

	*out = NULL;
	if (dfd < 0)
		return err_errno(err, "open image root %s", root);
	fd = fsroot_open(dfd, path, O_RDONLY | O_NONBLOCK, FSROOT_IN_ROOT);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0) {
		errno = -fd;
		return err_errno(err, "open %s in the image", path);
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return err_set(err, EINVAL, "%s in the image is not a regular file", path);
	fdpath = xasprintf("/proc/self/fd/%d", fd);
	return fs_read_file(fdpath, ETC_FILE_MAX, out, NULL, err);
}

/* Parses a decimal uid/gid; false for anything else. */
static bool parse_id(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	if (!*s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > UINT32_MAX - 1)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* Splits one colon-separated line into at most max fields (in place); returns the count. */
static size_t split_fields(char *line, char **f, size_t max)
{
	size_t n = 0;

	f[n++] = line;
	for (char *p = line; *p && n < max; p++) {
		if (*p == ':') {
			*p = '\0';
			f[n++] = p + 1;
		}
	}
	return n;
}

/* Finds a passwd entry by name (name != NULL) or by uid; fills uid, gid and the entry's name
 * (pointing into data). */
static bool passwd_find(char *data, const char *name, uint32_t uid, uint32_t *out_uid,
			uint32_t *out_gid, const char **out_name)
{
	char *save = NULL;

	for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[7];
		uint32_t u, g;

		if (split_fields(line, f, 7) < 4 || !parse_id(f[2], &u) || !parse_id(f[3], &g))
			continue;
		if (name ? strcmp(f[0], name) == 0 : u == uid) {
			*out_uid = u;
			*out_gid = g;
			*out_name = f[0];
			return true;
		}
	}
	return false;
}

/* Finds a group by name; and collects the groups listing member as a member. */
static bool group_scan(char *data, const char *name, uint32_t *gid, const char *member,
		       struct bundle_user *u)
{
	char *save = NULL;
	bool found = false;

	for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[4], *msave = NULL;
		uint32_t g;

		if (split_fields(line, f, 4) < 4 || !parse_id(f[2], &g))
			continue;
		if (name && strcmp(f[0], name) == 0) {
			*gid = g;
			found = true;
		}
		if (!member)
			continue;
		for (char *m = strtok_r(f[3], ",", &msave); m; m = strtok_r(NULL, ",", &msave)) {
			if (strcmp(m, member) == 0 && u->ngids < ARRAY_SIZE(u->gids))
				u->gids[u->ngids++] = g;
		}
	}
	return found;
}

/* Resolves a user spec against the image; see the header. */
int bundle_resolve_user(const char *root, const char *user, struct bundle_user *out,
			struct err *err)
{
	_cleanup_free_ char *spec = xstrdup(user ? user : "");
	_cleanup_free_ char *passwd = NULL, *group = NULL, *pcopy = NULL;
	char *ustr = spec, *gstr = strchr(spec, ':');
	struct bundle_user u = { 0 };
	const char *member = NULL;
	bool uid_numeric;
	int ret;

	if (gstr)
		*gstr++ = '\0';
	if (!*ustr && (!gstr || !*gstr)) {
		/* root, with its passwd entry's group and the groups listing it, as runc does
		 * for a container without a user; an image whose account files cannot be read
		 * still runs as 0:0 */
		struct err ignored = ERR_INIT;

		if (read_in_root(root, "/etc/passwd", &passwd, &ignored) < 0 ||
		    read_in_root(root, "/etc/group", &group, &ignored) < 0) {
			*out = u;
			return 0;
		}
		ustr = "0";
	} else {
		ret = read_in_root(root, "/etc/passwd", &passwd, err);
		if (ret < 0)
			return ret;
		ret = read_in_root(root, "/etc/group", &group, err);
		if (ret < 0)
			return ret;
	}
	uid_numeric = parse_id(ustr, &u.uid);
	pcopy = passwd ? xstrdup(passwd) : NULL;
	if (!uid_numeric) {
		if (!pcopy || !passwd_find(pcopy, ustr, 0, &u.uid, &u.gid, &member))
			return err_set(err, ENOENT,
				       "user \"%s\" is not in the image's /etc/passwd: use a "
				       "numeric uid or a user the image defines",
				       ustr);
	} else if (pcopy) {
		/* A known numeric uid takes its passwd entry's group and supplementary groups. */
		passwd_find(pcopy, NULL, u.uid, &u.uid, &u.gid, &member);
	}
	if (gstr && *gstr && !parse_id(gstr, &u.gid)) {
		_cleanup_free_ char *gcopy = group ? xstrdup(group) : NULL;

		if (!gcopy || !group_scan(gcopy, gstr, &u.gid, NULL, &u))
			return err_set(err, ENOENT,
				       "group \"%s\" is not in the image's /etc/group: use a "
				       "numeric gid or a group the image defines",
				       gstr);
	}
	if (member && group)
		group_scan(group, NULL, NULL, member, &u);
	*out = u;
	return 0;
}

/* The unit's seccomp filter; see bundle_internal.h. */
int bundle_build_seccomp(const Kiyot__Cell__V1__Unit *unit, json_t *caps, json_t **out,
			 struct err *err)
{
	const Kiyot__Cell__V1__Seccomp *sc = unit->seccomp;
	const char **names = xcalloc(json_array_size(caps) + 1, sizeof(*names));
	size_t n = 0;
	json_t *c;
	size_t i;
	int ret = 0;

	*out = NULL;
	json_array_foreach (caps, i, c)
		names[n++] = json_string_value(c);
	if (unit->privileged || !sc || sc->kind == KIYOT__CELL__V1__SECCOMP__KIND__UNCONFINED)
		ret = 0;
	else if (sc->kind == KIYOT__CELL__V1__SECCOMP__KIND__RUNTIME_DEFAULT)
		*out = seccomp_runtime_default(names, n);
	else if (sc->kind == KIYOT__CELL__V1__SECCOMP__KIND__LOCALHOST)
		ret = seccomp_profile_parse(sc->profile ? sc->profile : "",
					    sc->profile ? strlen(sc->profile) : 0, names, n, out,
					    err);
	else
		ret = err_set(err, EINVAL, "seccomp: unknown profile kind %d", (int)sc->kind);
	free(names);
	if (ret < 0)
		return err_wrap(err, "seccomp profile");
	return 0;
}
