/*
 * bundle.c: a unit's config.json: the process object (args, env, cwd, user, capabilities,
 * rlimits), the linux object (namespaces, cgroup, resources, sysctls, masked and read-only
 * paths, seccomp), the document itself and its writing; and the pod's net.* sysctls, set by
 * the agent. Capabilities, the user and seccomp are worked out in bundle_security.c, the
 * mounts and the unit's root in bundle_mounts.c.
 */
#include "bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bundle_internal.h"
#include "cgroup.h"
#include "fsutil.h"
#include "image.h"
#include "strvec.h"
#include "xalloc.h"

#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

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

/* Whether key names a cgroup file the unit may set: "<controller>.<name>", lower case letters,
 * digits, '_' and '.', no more than 64 bytes. */
static bool unified_key_ok(const char *key)
{
	size_t n = strlen(key), dot = strcspn(key, ".");

	return n > 0 && n <= 64 && dot > 0 && dot < n - 1 &&
	       strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789_.") == n;
}

/* linux.resources.unified: the unit's cgroup v2 settings (crun writes each to the unit's
 * cgroup); refused on a cell whose cgroups are v1, where they mean nothing. */
static int add_unified(const Kiyot__Cell__V1__Unit *unit, json_t *res, struct err *err)
{
	json_t *m;

	if (!unit->n_unified)
		return 0;
	if (cgroup_unified_ok(err) < 0)
		return -err->code;
	m = json_object();
	for (size_t i = 0; i < unit->n_unified; i++) {
		const Kiyot__Cell__V1__KeyValue *kv = unit->unified[i];

		if (!unified_key_ok(kv->key) || strlen(kv->value) > 1024 ||
		    strchr(kv->value, '\n')) {
			json_decref(m);
			return err_set(
				err, EINVAL,
				"linux.resources.unified: \"%.64s\" is not a cgroup file and "
				"value (want \"memory.high\": \"1G\" and the like)",
				kv->key);
		}
		json_object_set_new(m, kv->key, json_string(kv->value));
	}
	json_object_set_new(res, "unified", m);
	return 0;
}

/* The linux object: namespaces (the network is the cell's), cgroup, resources, sysctls,
 * masked and read-only paths, seccomp. */
static int build_linux(const struct bundle_spec *spec, json_t *caps, json_t **out, struct err *err)
{
	const Kiyot__Cell__V1__Unit *unit = spec->unit;
	const Kiyot__Cell__V1__Pod *pod = spec->pod;
	json_t *l = json_object(), *res = json_object(), *nss = json_array(), *seccomp = NULL;
	int ret;

	ret = bundle_build_seccomp(unit, caps, &seccomp, err);
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
	ret = add_unified(unit, res, err);
	json_object_set_new(l, "resources", res);
	if (ret < 0) {
		json_decref(l);
		json_decref(seccomp);
		return ret;
	}
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

	ret = bundle_unit_caps(unit, &caps, err);
	if (ret == 0)
		ret = build_process(spec, caps, &process, err);
	if (ret == 0)
		ret = bundle_build_mounts(spec, mounts, err);
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
