#include "bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "fsroot.h"
#include "fsutil.h"
#include "image.h"
#include "seccomp.h"
#include "strvec.h"
#include "xalloc.h"

#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define ETC_FILE_MAX (1024 * 1024)

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
 * minus what it drops, within what the agent itself may hand out. */
static int unit_caps(const Kiyot__Cell__V1__Unit *unit, json_t **out, struct err *err)
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

/* The file systems every unit gets: destination, type, source, comma-separated options. */
static const struct {
	const char *dest, *type, *source, *options;
} base_mounts[] = {
	{ "/proc", "proc", "proc", "nosuid,noexec,nodev" },
	{ "/dev", "tmpfs", "tmpfs", "nosuid,strictatime,mode=755,size=65536k" },
	{ "/dev/pts", "devpts", "devpts",
	  "nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,gid=5" },
	{ "/dev/shm", "tmpfs", "shm", "nosuid,noexec,nodev,mode=1777,size=65536k" },
	{ "/dev/mqueue", "mqueue", "mqueue", "nosuid,noexec,nodev" },
	{ "/sys", "sysfs", "sysfs", "nosuid,noexec,nodev,ro" },
};

/* Kubernetes' rules: command replaces entrypoint; args replace cmd; a command without args
 * runs without args. */
int bundle_process_args(const Kiyot__Cell__V1__Unit *unit, const struct image_info *image,
			char ***out, struct err *err)
{
	struct strvec sv = STRVEC_INIT;

	if (unit->n_command > 0) {
		strvec_pushn(&sv, unit->command, unit->n_command);
		strvec_pushn(&sv, unit->args, unit->n_args);
	} else {
		strvec_pushv(&sv, image ? image->entrypoint : NULL);
		if (unit->n_args > 0)
			strvec_pushn(&sv, unit->args, unit->n_args);
		else
			strvec_pushv(&sv, image ? image->cmd : NULL);
	}
	if (sv.nr == 0 || sv.v[0][0] == '\0') {
		strvec_clear(&sv);
		return err_set(err, EINVAL,
			       "unit %s: no command: the image has no entrypoint or cmd; set the "
			       "container's command",
			       unit->name && unit->name[0] ? unit->name : unit->id);
	}
	*out = strvec_detach(&sv);
	return 0;
}

/* Sets KEY=VALUE in sv, replacing an entry with the same key. */
static void env_set(struct strvec *sv, const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);

	for (size_t i = 0; i < sv->nr; i++) {
		if (strncmp(sv->v[i], kv, klen) == 0 &&
		    (sv->v[i][klen] == '=' || sv->v[i][klen] == '\0')) {
			free(sv->v[i]);
			sv->v[i] = xstrdup(kv);
			return;
		}
	}
	strvec_push(sv, kv);
}

/* Image env overlaid with unit env; see the header. */
char **bundle_process_env(const Kiyot__Cell__V1__Unit *unit, const struct image_info *image,
			  const char *hostname)
{
	struct strvec sv = STRVEC_INIT;
	bool has_path = false;

	if (hostname && hostname[0]) {
		_cleanup_free_ char *h = xasprintf("HOSTNAME=%s", hostname);

		env_set(&sv, h);
	}
	for (size_t i = 0; image && image->env && image->env[i]; i++)
		env_set(&sv, image->env[i]);
	/* as containerd: a terminal says what it is, unless the container's own env does */
	if (unit->tty)
		env_set(&sv, "TERM=xterm");
	for (size_t i = 0; i < unit->n_env; i++) {
		_cleanup_free_ char *kv = xasprintf("%s=%s", unit->env[i]->key,
						    unit->env[i]->value ? unit->env[i]->value : "");

		env_set(&sv, kv);
	}
	for (size_t i = 0; i < sv.nr; i++)
		has_path = has_path || strncmp(sv.v[i], "PATH=", 5) == 0;
	if (!has_path)
		strvec_push(&sv, DEFAULT_PATH);
	return strvec_detach(&sv);
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
		*out = u;
		return 0;
	}
	ret = read_in_root(root, "/etc/passwd", &passwd, err);
	if (ret < 0)
		return ret;
	ret = read_in_root(root, "/etc/group", &group, err);
	if (ret < 0)
		return ret;
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

/* Appends a mount to the array; options is comma-separated (may be NULL). */
static void add_mount(json_t *mounts, const char *dest, const char *type, const char *source,
		      const char *options)
{
	json_t *m = json_object(), *opts = json_array();
	_cleanup_free_ char *copy = xstrdup(options ? options : "");
	char *save = NULL;

	for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save))
		json_array_append_new(opts, json_string(o));
	json_object_set_new(m, "destination", json_string(dest));
	json_object_set_new(m, "type", json_string(type));
	json_object_set_new(m, "source", json_string(source));
	json_object_set_new(m, "options", opts);
	json_array_append_new(mounts, m);
}

/* A string array as JSON. */
/* n strings as JSON (a protobuf repeated field: counted, not NULL-terminated). */
static json_t *json_strn(char *const *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *json_strv(char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

/* True when a unit mount already targets dest. */
static bool unit_mounts_cover(const Kiyot__Cell__V1__Unit *unit, const char *dest)
{
	for (size_t i = 0; i < unit->n_mounts; i++) {
		if (unit->mounts[i]->container_path &&
		    strcmp(unit->mounts[i]->container_path, dest) == 0)
			return true;
	}
	return false;
}

/* The host path backing one unit mount (emptyDir created); -EINVAL for unknown volumes. */
static int mount_source(const struct bundle_spec *spec, const Kiyot__Cell__V1__Mount *m, char **out,
			struct err *err)
{
	const char *vol = m->volume ? m->volume : "";

	if (!vol[0]) {
		if (!m->host_path || m->host_path[0] != '/')
			return err_set(err, EINVAL, "mount %s: no volume and no absolute host path",
				       m->container_path);
		*out = xstrdup(m->host_path);
		return 0;
	}
	for (size_t i = 0; spec->pod && i < spec->pod->n_volumes; i++) {
		const Kiyot__Cell__V1__Volume *v = spec->pod->volumes[i];
		int ret;

		if (strcmp(v->name, vol) != 0)
			continue;
		if (v->kind == KIYOT__CELL__V1__VOLUME__KIND__HOST_PATH) {
			if (!v->path || v->path[0] != '/')
				return err_set(err, EINVAL, "volume %s: host path must be absolute",
					       vol);
			*out = xstrdup(v->path);
			return 0;
		}
		if (strchr(vol, '/') || strcmp(vol, ".") == 0 || strcmp(vol, "..") == 0)
			return err_set(err, EINVAL, "volume name \"%s\" is not a plain name", vol);
		*out = xasprintf("%s/%s", spec->volumes_dir, vol);
		if (v->kind == KIYOT__CELL__V1__VOLUME__KIND__SHIPPED) {
			if (fs_exists(*out))
				return 0;
			free(*out);
			*out = NULL;
			return err_set(err, ENOENT,
				       "mount %s: volume \"%s\" has no content in the cell yet "
				       "(kiyot writes it with WriteVolume before Apply)",
				       m->container_path, vol);
		}
		ret = fs_mkdir_p(*out, 0755, err);
		if (ret < 0) {
			free(*out);
			*out = NULL;
		}
		return ret;
	}
	return err_set(err, EINVAL, "mount %s: volume \"%s\" is not a volume of the pod",
		       m->container_path, vol);
}

/* See the header. */
bool bundle_propagates_from_host(const Kiyot__Cell__V1__Mount *m)
{
	return m->propagation != KIYOT__CELL__V1__MOUNT__PROPAGATION__PRIVATE &&
	       (!m->volume || !m->volume[0]) && m->host_path && m->host_path[0] == '/';
}

/* A unit bind mount's options: its propagation and read-only flag. */
static const char *mount_options(const Kiyot__Cell__V1__Mount *m)
{
	switch (m->propagation) {
	case KIYOT__CELL__V1__MOUNT__PROPAGATION__HOST_TO_CONTAINER:
		return m->readonly ? "rbind,rslave,ro" : "rbind,rslave";
	case KIYOT__CELL__V1__MOUNT__PROPAGATION__BIDIRECTIONAL:
		return m->readonly ? "rbind,rshared,ro" : "rbind,rshared";
	default:
		return m->readonly ? "rbind,rprivate,ro" : "rbind,rprivate";
	}
}

/* The mounts array: base file systems, the pod's etc files, the unit's binds. */
static int build_mounts(const struct bundle_spec *spec, json_t *mounts, struct err *err)
{
	static const char *const etc_files[] = { "resolv.conf", "hosts", "hostname" };
	const Kiyot__Cell__V1__Unit *unit = spec->unit;

	for (size_t i = 0; i < ARRAY_SIZE(base_mounts); i++)
		add_mount(mounts, base_mounts[i].dest, base_mounts[i].type, base_mounts[i].source,
			  base_mounts[i].options);
	for (size_t i = 0; spec->etc_dir && i < ARRAY_SIZE(etc_files); i++) {
		_cleanup_free_ char *dest = xasprintf("/etc/%s", etc_files[i]);
		_cleanup_free_ char *src = xasprintf("%s/%s", spec->etc_dir, etc_files[i]);

		if (!unit_mounts_cover(unit, dest))
			add_mount(mounts, dest, "bind", src, "rbind,rprivate");
	}
	for (size_t i = 0; i < unit->n_mounts; i++) {
		const Kiyot__Cell__V1__Mount *m = unit->mounts[i];
		_cleanup_free_ char *src = NULL;
		int ret = 0;

		if (!m->container_path || m->container_path[0] != '/')
			return err_set(err, EINVAL, "mount \"%s\": container path must be absolute",
				       m->container_path ? m->container_path : "");
		if (bundle_propagates_from_host(m) && spec->propagated_dir)
			src = xasprintf("%s/%zu", spec->propagated_dir, i);
		else
			ret = mount_source(spec, m, &src, err);
		if (ret < 0)
			return ret;
		add_mount(mounts, m->container_path, "bind", src, mount_options(m));
	}
	return 0;
}

/* RLIMIT_NOFILE for units: 1048576 like containerd, but never above the agent's own hard
 * limit, which a process without CAP_SYS_RESOURCE cannot raise (the runtime would fail). */
static json_int_t nofile_limit(void)
{
	struct rlimit rl;
	json_int_t want = 1048576;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
	    (json_int_t)rl.rlim_max < want)
		return (json_int_t)rl.rlim_max;
	return want;
}

/* Adds gid to the user's supplementary groups unless it is already there. */
static void add_gid(struct bundle_user *u, uint32_t gid)
{
	for (size_t i = 0; i < u->ngids; i++)
		if (u->gids[i] == gid)
			return;
	if (u->ngids < ARRAY_SIZE(u->gids))
		u->gids[u->ngids++] = gid;
}

/* The process object: args, env, cwd, user and groups, capabilities (caps: the unit's set,
 * borrowed), no_new_privs, rlimits. */
static int build_process(const struct bundle_spec *spec, json_t *caps, json_t **out,
			 struct err *err)
{
	const Kiyot__Cell__V1__Unit *unit = spec->unit;
	const struct image_info *img = spec->image;
	const char *hostname = spec->pod ? spec->pod->hostname : NULL;
	const char *cwd = "/", *user = img && img->user ? img->user : "";
	char **args = NULL, **env;
	struct bundle_user u;
	json_t *p, *gids, *juser;
	int ret;

	if (unit->working_dir && unit->working_dir[0])
		cwd = unit->working_dir;
	else if (img && img->working_dir && img->working_dir[0])
		cwd = img->working_dir;
	if (cwd[0] != '/')
		return err_set(err, EINVAL, "working directory \"%s\" is not absolute", cwd);
	if (unit->user && unit->user[0])
		user = unit->user;
	ret = bundle_resolve_user(img && img->rootfs ? img->rootfs : spec->rootfs, user, &u, err);
	if (ret < 0)
		return ret;
	if (unit->n_supplemental_groups > ARRAY_SIZE(u.gids) - u.ngids)
		return err_set(err, EINVAL, "too many supplemental groups (at most %zu)",
			       ARRAY_SIZE(u.gids));
	for (size_t i = 0; i < unit->n_supplemental_groups; i++)
		add_gid(&u, unit->supplemental_groups[i]);
	ret = bundle_process_args(unit, img, &args, err);
	if (ret < 0)
		return ret;
	env = bundle_process_env(unit, img, hostname);
	gids = json_array();
	for (size_t i = 0; i < u.ngids; i++)
		json_array_append_new(gids, json_integer(u.gids[i]));
	juser = json_pack("{s:I,s:I}", "uid", (json_int_t)u.uid, "gid", (json_int_t)u.gid);
	if (u.ngids)
		json_object_set_new(juser, "additionalGids", gids);
	else
		json_decref(gids);
	/* a terminal's master goes to the unit's shim (shim.c) */
	p = json_pack("{s:b,s:o,s:o,s:o,s:s,s:{s:O,s:O,s:O},s:b,s:[{s:s,s:I,s:I}]}", "terminal",
		      unit->tty, "user", juser, "args", json_strv(args), "env", json_strv(env),
		      "cwd", cwd, "capabilities", "bounding", caps, "effective", caps, "permitted",
		      caps, "noNewPrivileges", unit->no_new_privs, "rlimits", "type",
		      "RLIMIT_NOFILE", "hard", nofile_limit(), "soft", nofile_limit());
	strv_free(args);
	strv_free(env);
	if (!p)
		return err_set(err, EINVAL, "building process: invalid UTF-8 in args or env");
	*out = p;
	return 0;
}

/* The namespace of one type a unit gets: its own, the pod's (joined by path) or the cell's
 * host's (none listed: the agent's own, which is the host's). */
static void add_namespace(json_t *nss, const char *type, Kiyot__Cell__V1__NamespaceMode mode,
			  const char *pod_path)
{
	if (mode == KIYOT__CELL__V1__NAMESPACE_MODE__NODE)
		return;
	if (mode == KIYOT__CELL__V1__NAMESPACE_MODE__POD && pod_path && pod_path[0])
		json_array_append_new(nss, json_pack("{s:s,s:s}", "type", type, "path", pod_path));
	else
		json_array_append_new(nss, json_pack("{s:s}", "type", type));
}

/* The unit's seccomp filter (caps: its capabilities, borrowed); *out NULL for none. */
static int build_seccomp(const Kiyot__Cell__V1__Unit *unit, json_t *caps, json_t **out,
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

/* The pod's IPC sysctls, for every unit (the runtime sets them in its IPC namespace); the
 * network's are the agent's to set (bundle_apply_net_sysctls), units having no netns of their
 * own. */
static json_t *build_sysctls(const Kiyot__Cell__V1__Pod *pod)
{
	json_t *m = json_object();

	for (size_t i = 0; pod && i < pod->n_sysctls; i++)
		if (strncmp(pod->sysctls[i]->key, "net.", 4) != 0)
			json_object_set_new(
				m, pod->sysctls[i]->key,
				json_string(pod->sysctls[i]->value ? pod->sysctls[i]->value : ""));
	return m;
}

/* The root's propagation: shared when a mount is bidirectional, slave when one receives
 * the host's mounts, the runtime's default (private) otherwise. */
static const char *rootfs_propagation(const Kiyot__Cell__V1__Unit *unit)
{
	const char *p = NULL;

	for (size_t i = 0; i < unit->n_mounts; i++) {
		if (unit->mounts[i]->propagation ==
		    KIYOT__CELL__V1__MOUNT__PROPAGATION__BIDIRECTIONAL)
			return "rshared";
		if (unit->mounts[i]->propagation ==
		    KIYOT__CELL__V1__MOUNT__PROPAGATION__HOST_TO_CONTAINER)
			p = "rslave";
	}
	return p;
}

/* The linux object: namespaces (the network is the cell's), cgroup, resources, sysctls,
 * masked and read-only paths, seccomp. */
static int build_linux(const struct bundle_spec *spec, json_t *caps, json_t **out, struct err *err)
{
	const Kiyot__Cell__V1__Unit *unit = spec->unit;
	const Kiyot__Cell__V1__Pod *pod = spec->pod;
	json_t *l = json_object(), *res = json_object(), *nss = json_array(), *seccomp = NULL;
	int ret;

	ret = build_seccomp(unit, caps, &seccomp, err);
	if (ret < 0) {
		json_decref(l);
		json_decref(res);
		json_decref(nss);
		return ret;
	}
	add_namespace(nss, "pid", unit->pid_namespace, spec->pod_pid_ns);
	add_namespace(nss, "ipc", pod ? pod->ipc_namespace : 0, spec->pod_ipc_ns);
	if (pod && pod->network_namespace == KIYOT__CELL__V1__NAMESPACE_MODE__NODE &&
	    spec->host_netns && spec->host_netns[0])
		json_array_append_new(nss, json_pack("{s:s,s:s}", "type", "network", "path",
						     spec->host_netns));
	add_namespace(nss, "uts", KIYOT__CELL__V1__NAMESPACE_MODE__CONTAINER, NULL);
	add_namespace(nss, "mount", KIYOT__CELL__V1__NAMESPACE_MODE__CONTAINER, NULL);
	json_object_set_new(l, "namespaces", nss);
	if (spec->cgroup_parent && spec->cgroup_parent[0]) {
		size_t n = strlen(spec->cgroup_parent);
		_cleanup_free_ char *cg = NULL;

		while (n > 1 && spec->cgroup_parent[n - 1] == '/')
			n--;
		cg = xasprintf("%.*s/%s", (int)n, spec->cgroup_parent, unit->id);
		json_object_set_new(l, "cgroupsPath", json_string(cg));
	}
	json_object_set_new(res, "devices", json_pack("[{s:b,s:s}]", "allow", 0, "access", "rwm"));
	if (unit->memory_bytes > 0)
		json_object_set_new(res, "memory",
				    json_pack("{s:I}", "limit", (json_int_t)unit->memory_bytes));
	if (unit->cpu_millis > 0)
		json_object_set_new(
			res, "cpu",
			json_pack("{s:I,s:I}", "quota",
				  (json_int_t)(unit->cpu_millis * BUNDLE_CPU_PERIOD_US / 1000),
				  "period", (json_int_t)BUNDLE_CPU_PERIOD_US));
	json_object_set_new(l, "resources", res);
	if (pod && pod->n_sysctls)
		json_object_set_new(l, "sysctl", build_sysctls(pod));
	if (json_object_size(json_object_get(l, "sysctl")) == 0)
		json_object_del(l, "sysctl");
	if (!unit->privileged) {
		json_object_set_new(l, "maskedPaths",
				    json_strn(unit->masked_paths, unit->n_masked_paths));
		json_object_set_new(l, "readonlyPaths",
				    json_strn(unit->readonly_paths, unit->n_readonly_paths));
	}
	if (seccomp)
		json_object_set_new(l, "seccomp", seccomp);
	if (rootfs_propagation(unit))
		json_object_set_new(l, "rootfsPropagation", json_string(rootfs_propagation(unit)));
	*out = l;
	return 0;
}

/* Builds config.json; see the header. */
int bundle_config(const struct bundle_spec *spec, json_t **out, struct err *err)
{
	json_t *cfg, *process = NULL, *linux = NULL, *caps = NULL, *mounts = json_array();
	const Kiyot__Cell__V1__Unit *unit = spec->unit;
	json_t *ann = json_object();
	int ret;

	ret = unit_caps(unit, &caps, err);
	if (ret == 0)
		ret = build_process(spec, caps, &process, err);
	if (ret == 0)
		ret = build_mounts(spec, mounts, err);
	if (ret == 0)
		ret = build_linux(spec, caps, &linux, err);
	json_decref(caps);
	if (ret < 0) {
		json_decref(process);
		json_decref(mounts);
		json_decref(ann);
		return err_wrap(err, "unit %s",
				unit->name && unit->name[0] ? unit->name : unit->id);
	}
	for (size_t i = 0; i < unit->n_annotations; i++)
		json_object_set_new(ann, unit->annotations[i]->key,
				    json_string(unit->annotations[i]->value));
	cfg = json_pack("{s:s,s:o,s:{s:s,s:b},s:o,s:o,s:o}", "ociVersion", "1.0.2", "process",
			process, "root", "path", spec->rootfs, "readonly", unit->readonly_rootfs,
			"mounts", mounts, "linux", linux, "annotations", ann);
	if (!cfg)
		return err_set(err, EINVAL, "unit %s: building config.json failed", unit->id);
	if (spec->pod && spec->pod->hostname && spec->pod->hostname[0])
		json_object_set_new(cfg, "hostname", json_string(spec->pod->hostname));
	*out = cfg;
	return 0;
}

/* Sets the pod's net.* sysctls; see the header. */
int bundle_apply_net_sysctls(const Kiyot__Cell__V1__Pod *pod, struct err *err)
{
	for (size_t i = 0; i < pod->n_sysctls; i++) {
		const char *name = pod->sysctls[i]->key, *value = pod->sysctls[i]->value;
		_cleanup_free_ char *path = NULL;
		_cleanup_close_ int fd = -1;
		size_t len;

		if (strncmp(name, "net.", 4) != 0)
			continue;
		if (strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789._-") != strlen(name) ||
		    strstr(name, ".."))
			return err_set(err, EINVAL, "sysctl \"%.100s\": not a sysctl name", name);
		path = xasprintf("/proc/sys/%s", name);
		for (char *p = path + 10; *p; p++)
			*p = *p == '.' ? '/' : *p;
		value = value ? value : "";
		len = strlen(value);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return err_errno(err, "sysctl %s", name);
		if (write(fd, value, len) != (ssize_t)len)
			return err_errno(err, "sysctl %s = %.64s", name, value);
	}
	return 0;
}

/* Writes config.json atomically; see the header. */
int bundle_write(const struct bundle_spec *spec, const char *bundle_dir, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/config.json", bundle_dir);
	json_t *cfg = NULL;
	char *text;
	int ret;

	ret = bundle_config(spec, &cfg, err);
	if (ret < 0)
		return ret;
	text = json_dumps(cfg, JSON_INDENT(1));
	json_decref(cfg);
	ret = fs_mkdir_p(bundle_dir, 0700, err);
	if (ret == 0)
		ret = fs_replace_file(path, text, strlen(text), 0600, err);
	free(text);
	return ret;
}

/* Appends "<prefix> <item>..." lines for DNS settings. */
static void resolv_lines(struct buf *b, const char *prefix, char **items, size_t n, bool one_line)
{
	if (!n)
		return;
	if (one_line) {
		buf_appendf(b, NULL, "%s", prefix);
		for (size_t i = 0; i < n; i++)
			buf_appendf(b, NULL, " %s", items[i]);
		buf_appendf(b, NULL, "\n");
		return;
	}
	for (size_t i = 0; i < n; i++)
		buf_appendf(b, NULL, "%s %s\n", prefix, items[i]);
}

/* Writes one file into dir, unless it already holds text (every apply comes here). */
static int write_etc(const char *dir, const char *name, const char *text, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, name), *old = NULL;
	struct err rerr = ERR_INIT;

	if (fs_read_file(path, ETC_FILE_MAX, &old, NULL, &rerr) == 0 && strcmp(old, text) == 0)
		return 0;
	return fs_replace_file(path, text, strlen(text), 0644, err);
}

/* Writes resolv.conf, hosts and hostname; see the header. */
int bundle_write_etc(const Kiyot__Cell__V1__Pod *pod, const char *dir, const char *pod_ip,
		     struct err *err)
{
	const char *hostname = pod->hostname && pod->hostname[0] ? pod->hostname : pod->name;
	struct buf b = BUF_INIT;
	int ret;

	ret = fs_mkdir_p(dir, 0755, err);
	if (ret < 0)
		return ret;
	if (pod->n_dns_servers) {
		resolv_lines(&b, "nameserver", pod->dns_servers, pod->n_dns_servers, false);
		resolv_lines(&b, "search", pod->dns_searches, pod->n_dns_searches, true);
		resolv_lines(&b, "options", pod->dns_options, pod->n_dns_options, true);
	} else {
		_cleanup_free_ char *host = NULL;

		if (fs_read_file("/etc/resolv.conf", ETC_FILE_MAX, &host, NULL, err) == 0)
			buf_appendf(&b, NULL, "%s", host);
		err_clear(err);
	}
	ret = write_etc(dir, "resolv.conf", buf_str(&b), err);
	buf_reset(&b);
	buf_appendf(&b, NULL, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
	if (hostname && hostname[0] && pod_ip && pod_ip[0])
		buf_appendf(&b, NULL, "%s\t%s\n", pod_ip, hostname);
	if (ret == 0)
		ret = write_etc(dir, "hosts", buf_str(&b), err);
	buf_reset(&b);
	buf_appendf(&b, NULL, "%s\n", hostname ? hostname : "");
	if (ret == 0)
		ret = write_etc(dir, "hostname", buf_str(&b), err);
	buf_release(&b);
	return ret;
}

/* True when path is a mount point distinct from its parent directory. */
static bool is_mounted(const char *path, const char *parent)
{
	struct stat a, b;

	return stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

/* Mounts the unit's overlay root; see the header. */
int bundle_mount_rootfs(const char *image_rootfs, const char *unit_dir, struct err *err)
{
	_cleanup_free_ char *upper = xasprintf("%s/upper", unit_dir);
	_cleanup_free_ char *work = xasprintf("%s/work", unit_dir);
	_cleanup_free_ char *target = xasprintf("%s/rootfs", unit_dir);
	_cleanup_free_ char *opts = NULL;
	int ret;

	if (strpbrk(image_rootfs, ",:") || strpbrk(unit_dir, ",:"))
		return err_set(err, EINVAL, "overlay paths may not contain ',' or ':' (%s, %s)",
			       image_rootfs, unit_dir);
	if (is_mounted(target, unit_dir))
		return 0;
	ret = fs_mkdir_p(upper, 0755, err);
	if (ret == 0)
		ret = fs_mkdir_p(work, 0700, err);
	if (ret == 0)
		ret = fs_mkdir_p(target, 0755, err);
	if (ret < 0)
		return ret;
	opts = xasprintf("lowerdir=%s,upperdir=%s,workdir=%s", image_rootfs, upper, work);
	if (mount("overlay", target, "overlay", 0, opts) < 0)
		return err_errno(err, "mount overlay on %s (lower %s)", target, image_rootfs);
	return 0;
}

/* Unmounts the unit's overlay root; see the header. */
int bundle_umount_rootfs(const char *unit_dir, struct err *err)
{
	_cleanup_free_ char *target = xasprintf("%s/rootfs", unit_dir);

	if (!is_mounted(target, unit_dir))
		return 0;
	if (umount2(target, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return err_errno(err, "unmount %s", target);
	return 0;
}
