/* Tests of OCI bundle generation: process args, env, user, mounts, cgroups. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../cell-agent/bundle.h"
#include "../../cell-agent/cgroup.h"
#include "image.h"
#include "fsutil.h"
#include "strvec.h"
#include "xalloc.h"

#define FIXTURE_ROOT "test/fixtures/bundle/rootfs"

/* Splits a space-separated list into a NULL-terminated array (NULL for "-"). */
static char **words(const char *s)
{
	char **v = xcalloc(16, sizeof(*v));
	_cleanup_free_ char *copy = xstrdup(s ? s : "");
	char *save = NULL;
	size_t n = 0;

	if (s && strcmp(s, "-") == 0)
		return v;
	for (char *w = strtok_r(copy, " ", &save); w && n < 15; w = strtok_r(NULL, " ", &save))
		v[n++] = xstrdup(w);
	return v;
}

/* Joins an array with spaces for comparison. */
static char *join(char **v)
{
	char *s = xstrdup("");

	for (size_t i = 0; v && v[i]; i++) {
		char *t = xasprintf("%s%s%s", s, i ? " " : "", v[i]);

		free(s);
		s = t;
	}
	return s;
}

struct args_case {
	const char *entrypoint, *cmd; /* image */
	const char *command, *args;   /* unit; "" means not given */
	const char *want;	      /* NULL: error */
};

static const struct args_case args_cases[] = {
	{ "/ep", "c1 c2", "", "", "/ep c1 c2" },
	{ "/ep", "c1", "", "a1 a2", "/ep a1 a2" },
	{ "/ep", "c1", "/cmd", "", "/cmd" },
	{ "/ep", "c1", "/cmd x", "a1", "/cmd x a1" },
	{ "", "c1 c2", "", "", "c1 c2" },
	{ "", "c1", "", "a1", "a1" },
	{ "", "", "", "", NULL },
	{ "", "", "", "a1", "a1" },
};

/* Command and args follow Kubernetes' rules over the image's entrypoint and cmd. */
static void test_bundle__process_args_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(args_cases); i++) {
		const struct args_case *c = &args_cases[i];
		Kiyot__Cell__V1__Unit u = KIYOT__CELL__V1__UNIT__INIT;
		struct image_info img = { 0 };
		char **command = words(c->command), **uargs = words(c->args), **got = NULL;
		struct err err = ERR_INIT;
		int ret;

		img.entrypoint = words(c->entrypoint);
		img.cmd = words(c->cmd);
		u.id = "u1";
		u.command = command;
		u.n_command = strlen(c->command) ? 1 + (strchr(c->command, ' ') != NULL) : 0;
		u.args = uargs;
		u.n_args = 0;
		while (uargs[u.n_args])
			u.n_args++;
		ret = bundle_process_args(&u, &img, &got, &err);
		if (!c->want) {
			assert_int_equal(ret, -EINVAL);
			assert_non_null(strstr(err.msg, "no command"));
		} else {
			_cleanup_free_ char *s = NULL;

			assert_int_equal(ret, 0);
			s = join(got);
			if (strcmp(s, c->want) != 0)
				fail_msg("case %zu: got \"%s\" want \"%s\"", i, s, c->want);
			strv_free(got);
		}
		strv_free(command);
		strv_free(uargs);
		strv_free(img.entrypoint);
		strv_free(img.cmd);
	}
}

/* The unit's env replaces image variables of the same name and keeps the rest in order. */
static void test_bundle__env_overlay(void **state)
{
	Kiyot__Cell__V1__Unit u = KIYOT__CELL__V1__UNIT__INIT;
	Kiyot__Cell__V1__KeyValue kv1 = KIYOT__CELL__V1__KEY_VALUE__INIT;
	Kiyot__Cell__V1__KeyValue kv2 = KIYOT__CELL__V1__KEY_VALUE__INIT;
	Kiyot__Cell__V1__KeyValue *kvs[] = { &kv1, &kv2 };
	char *ienv[] = { "PATH=/bin", "A=image", "B=keep", NULL };
	struct image_info img = { .env = ienv };
	char **env;
	_cleanup_free_ char *s = NULL;

	(void)state;
	kv1.key = "A";
	kv1.value = "unit";
	kv2.key = "C";
	kv2.value = "new=with=equals";
	u.env = kvs;
	u.n_env = 2;
	env = bundle_process_env(&u, &img, "web-0");
	s = join(env);
	assert_string_equal(s, "HOSTNAME=web-0 PATH=/bin A=unit B=keep C=new=with=equals");
	strv_free(env);

	img.env = (char *[]){ "X=1", NULL };
	u.n_env = 0;
	env = bundle_process_env(&u, &img, NULL);
	free(s);
	s = join(env);
	assert_string_equal(
		s, "X=1 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	strv_free(env);

	/* a terminal gets TERM=xterm over the image's, and the unit's own TERM over that */
	img.env = (char *[]){ "PATH=/bin", "TERM=dumb", NULL };
	u.tty = true;
	env = bundle_process_env(&u, &img, NULL);
	free(s);
	s = join(env);
	assert_string_equal(s, "PATH=/bin TERM=xterm");
	strv_free(env);
	kv1.key = "TERM";
	kv1.value = "vt100";
	u.n_env = 1;
	env = bundle_process_env(&u, &img, NULL);
	free(s);
	s = join(env);
	assert_string_equal(s, "PATH=/bin TERM=vt100");
	strv_free(env);
}

struct user_case {
	const char *spec;
	int ret;
	uint32_t uid, gid;
	const char *gids; /* space-separated supplementary groups */
};

static const struct user_case user_cases[] = {
	/* root by default or by uid: the groups listing "root" (runc's rule, which containerd
	 * follows: busybox's root is in wheel) */
	{ "", 0, 0, 0, "10" },
	{ "0", 0, 0, 0, "10" },
	{ "root", 0, 0, 0, "10" },
	{ "www", 0, 33, 33, "4" },
	{ "app", 0, 1000, 1000, "4 50" },
	{ "1000", 0, 1000, 1000, "4 50" },
	{ "4242", 0, 4242, 0, "" },
	{ "4242:7", 0, 4242, 7, "" },
	{ "www:staff", 0, 33, 50, "4" },
	{ "33:nogroup", 0, 33, 65534, "4" },
	{ "ghost", -ENOENT, 0, 0, NULL },
	{ "www:ghosts", -ENOENT, 0, 0, NULL },
};

/* Users and groups resolve against the image's /etc/passwd and /etc/group. */
static void test_bundle__user_resolution_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(user_cases); i++) {
		const struct user_case *c = &user_cases[i];
		struct bundle_user u;
		struct err err = ERR_INIT;
		int ret = bundle_resolve_user(FIXTURE_ROOT, c->spec, &u, &err);
		char got[128] = "";

		if (ret != c->ret)
			fail_msg("case \"%s\": ret %d want %d (%s)", c->spec, ret, c->ret, err.msg);
		if (ret < 0) {
			assert_non_null(strstr(err.msg, strchr(c->spec, ':') ? "ghosts" : "ghost"));
			continue;
		}
		assert_int_equal(u.uid, c->uid);
		assert_int_equal(u.gid, c->gid);
		for (size_t k = 0; k < u.ngids; k++)
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%u", k ? " " : "",
				 u.gids[k]);
		if (strcmp(got, c->gids) != 0)
			fail_msg("case \"%s\": gids \"%s\" want \"%s\"", c->spec, got, c->gids);
	}
}

/* A symlinked /etc/passwd with an absolute target is resolved inside the image root, never
 * on the host (whose /etc/passwd knows "daemon"). */
static void test_bundle__user_lookup_stays_in_root(void **state)
{
	char dir[] = "/tmp/bundle-test-XXXXXX";
	_cleanup_free_ char *etc = NULL, *link = NULL, *users = NULL;
	const char *text = "app:x:1000:1000::/home/app:/bin/sh\n";
	struct bundle_user u;
	struct err err = ERR_INIT;

	(void)state;
	assert_non_null(mkdtemp(dir));
	etc = xasprintf("%s/etc", dir);
	assert_int_equal(fs_mkdir_p(etc, 0755, &err), 0);
	users = xasprintf("%s/users", etc);
	assert_int_equal(fs_write_file(users, text, strlen(text), 0644, &err), 0);
	link = xasprintf("%s/passwd", etc);
	assert_int_equal(symlink("/../../../../../etc/users", link), 0);
	assert_int_equal(bundle_resolve_user(dir, "app", &u, &err), 0);
	assert_int_equal(u.uid, 1000);
	assert_int_equal(bundle_resolve_user(dir, "daemon", &u, &err), -ENOENT);
	fs_remove_tree(dir, &err);
}

/* Finds the mount with destination dest in config.json. */
static json_t *find_mount(json_t *cfg, const char *dest)
{
	json_t *mounts = json_object_get(cfg, "mounts"), *m;
	size_t i;

	json_array_foreach (mounts, i, m) {
		if (strcmp(json_string_value(json_object_get(m, "destination")), dest) == 0)
			return m;
	}
	return NULL;
}

/* True when the JSON string array holds s. */
static int has_string(json_t *arr, const char *s)
{
	json_t *v;
	size_t i;

	json_array_foreach (arr, i, v) {
		if (strcmp(json_string_value(v), s) == 0)
			return 1;
	}
	return 0;
}

/* config.json carries mounts, volumes, namespaces without network, cgroup and resources. */
static void test_bundle__config_json(void **state)
{
	char dir[] = "/tmp/bundle-test-XXXXXX";
	Kiyot__Cell__V1__Pod pod = KIYOT__CELL__V1__POD__INIT;
	Kiyot__Cell__V1__Unit u = KIYOT__CELL__V1__UNIT__INIT;
	Kiyot__Cell__V1__Volume v1 = KIYOT__CELL__V1__VOLUME__INIT,
				v2 = KIYOT__CELL__V1__VOLUME__INIT;
	Kiyot__Cell__V1__Volume *vols[] = { &v1, &v2 };
	Kiyot__Cell__V1__Mount m1 = KIYOT__CELL__V1__MOUNT__INIT, m2 = KIYOT__CELL__V1__MOUNT__INIT,
			       m3 = KIYOT__CELL__V1__MOUNT__INIT;
	Kiyot__Cell__V1__Mount *mounts[] = { &m1, &m2, &m3 };
	char *cmd[] = { "/bin/sh", NULL }, *empty[] = { NULL };
	struct image_info img = { .rootfs = FIXTURE_ROOT,
				  .cmd = cmd,
				  .entrypoint = empty,
				  .env = empty,
				  .user = "www",
				  .working_dir = "/var/www" };
	_cleanup_free_ char *volumes = NULL, *etc = NULL, *cachedir = NULL;
	struct bundle_spec spec = { 0 };
	struct err err = ERR_INIT;
	json_t *cfg = NULL, *m, *linux_, *ns, *proc;
	size_t i;

	(void)state;
	assert_non_null(mkdtemp(dir));
	volumes = xasprintf("%s/volumes", dir);
	etc = xasprintf("%s/etc", dir);
	pod.hostname = "web-0";
	v1.name = "cache";
	v1.kind = KIYOT__CELL__V1__VOLUME__KIND__EMPTY_DIR;
	v2.name = "data";
	v2.kind = KIYOT__CELL__V1__VOLUME__KIND__HOST_PATH;
	v2.path = "/srv/data";
	pod.volumes = vols;
	pod.n_volumes = 2;
	m1.container_path = "/cache";
	m1.volume = "cache";
	m2.container_path = "/data";
	m2.volume = "data";
	m2.readonly = 1;
	m3.container_path = "/etc/hosts";
	m3.host_path = "/var/lib/kubelet/pods/x/etc-hosts";
	u.id = "c0ffee";
	u.mounts = mounts;
	u.n_mounts = 3;
	u.memory_bytes = 64 << 20;
	u.cpu_millis = 250;
	spec.pod = &pod;
	spec.unit = &u;
	spec.image = &img;
	spec.rootfs = "/state/units/c0ffee/rootfs";
	spec.volumes_dir = volumes;
	spec.etc_dir = etc;
	spec.cgroup_parent = "/kiyot/cell1/";
	assert_int_equal(bundle_config(&spec, &cfg, &err), 0);

	assert_string_equal(json_string_value(json_object_get(cfg, "ociVersion")), "1.0.2");
	assert_string_equal(json_string_value(json_object_get(cfg, "hostname")), "web-0");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(cfg, "root"), "path")),
		spec.rootfs);
	proc = json_object_get(cfg, "process");
	assert_string_equal(json_string_value(json_object_get(proc, "cwd")), "/var/www");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(proc, "user"), "uid")),
			 33);
	assert_true(has_string(json_object_get(json_object_get(proc, "capabilities"), "bounding"),
			       "CAP_NET_BIND_SERVICE"));
	assert_false(has_string(json_object_get(json_object_get(proc, "capabilities"), "bounding"),
				"CAP_SYS_ADMIN"));

	/* emptyDir: a shared directory under volumes_dir, created. */
	m = find_mount(cfg, "/cache");
	assert_non_null(m);
	cachedir = xasprintf("%s/cache", volumes);
	assert_string_equal(json_string_value(json_object_get(m, "source")), cachedir);
	assert_true(fs_exists(cachedir));
	assert_false(has_string(json_object_get(m, "options"), "ro"));
	m = find_mount(cfg, "/data");
	assert_string_equal(json_string_value(json_object_get(m, "source")), "/srv/data");
	assert_true(has_string(json_object_get(m, "options"), "ro"));
	assert_true(has_string(json_object_get(m, "options"), "rbind"));
	/* The unit's own /etc/hosts wins over the generated one; resolv.conf is generated. */
	m = find_mount(cfg, "/etc/hosts");
	assert_string_equal(json_string_value(json_object_get(m, "source")), m3.host_path);
	assert_non_null(find_mount(cfg, "/etc/resolv.conf"));
	assert_non_null(find_mount(cfg, "/proc"));
	assert_non_null(find_mount(cfg, "/dev/pts"));
	assert_true(has_string(json_object_get(find_mount(cfg, "/sys"), "options"), "ro"));

	linux_ = json_object_get(cfg, "linux");
	assert_string_equal(json_string_value(json_object_get(linux_, "cgroupsPath")),
			    "/kiyot/cell1/c0ffee");
	json_array_foreach (json_object_get(linux_, "namespaces"), i, ns)
		assert_string_not_equal(json_string_value(json_object_get(ns, "type")), "network");
	assert_int_equal(json_array_size(json_object_get(linux_, "namespaces")), 4);
	assert_int_equal(
		json_integer_value(json_object_get(
			json_object_get(json_object_get(linux_, "resources"), "memory"), "limit")),
		64 << 20);
	assert_int_equal(
		json_integer_value(json_object_get(
			json_object_get(json_object_get(linux_, "resources"), "cpu"), "quota")),
		25000);
	/* nothing masked or read-only unless the unit lists it */
	assert_int_equal(json_array_size(json_object_get(linux_, "maskedPaths")), 0);
	assert_int_equal(json_array_size(json_object_get(linux_, "readonlyPaths")), 0);
	assert_null(json_object_get(linux_, "seccomp"));
	json_decref(cfg);

	/* No cgroup parent: no cgroupsPath; an unknown volume names itself. */
	spec.cgroup_parent = "";
	m1.volume = "nope";
	assert_int_equal(bundle_config(&spec, &cfg, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "\"nope\""));
	m1.volume = "cache";
	assert_int_equal(bundle_config(&spec, &cfg, &err), 0);
	assert_null(json_object_get(json_object_get(cfg, "linux"), "cgroupsPath"));
	json_decref(cfg);

	/* A user the image does not know is an error naming the user. */
	u.user = "ghost";
	assert_int_equal(bundle_config(&spec, &cfg, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "ghost"));
	fs_remove_tree(dir, &err);
}

/* The namespace entry of a type in config.json's linux.namespaces, or NULL. */
static json_t *find_ns(json_t *cfg, const char *type)
{
	json_t *ns;
	size_t i;

	json_array_foreach (json_object_get(json_object_get(cfg, "linux"), "namespaces"), i, ns)
		if (strcmp(json_string_value(json_object_get(ns, "type")), type) == 0)
			return ns;
	return NULL;
}

/* The security context: groups, read-only root, no_new_privs, paths, namespaces, sysctls,
 * propagation; privileged drops the paths but keeps no_new_privs. */
static void test_bundle__security_context(void **state)
{
	Kiyot__Cell__V1__Pod pod = KIYOT__CELL__V1__POD__INIT;
	Kiyot__Cell__V1__Unit u = KIYOT__CELL__V1__UNIT__INIT;
	Kiyot__Cell__V1__KeyValue kv = KIYOT__CELL__V1__KEY_VALUE__INIT,
				  kv2 = KIYOT__CELL__V1__KEY_VALUE__INIT;
	Kiyot__Cell__V1__KeyValue *sysctls[] = { &kv, &kv2 };
	Kiyot__Cell__V1__Mount m = KIYOT__CELL__V1__MOUNT__INIT;
	Kiyot__Cell__V1__Mount *mounts[] = { &m };
	uint32_t groups[] = { 1234, 4 };
	/* counted like protobuf's repeated fields, not NULL-terminated: what follows is junk */
	char *masked[] = { "/proc/kcore", "/bin/ls", (char *)1 }, *ro[] = { "/tmp", (char *)1 };
	char *cmd[] = { "/bin/sh", NULL }, *empty[] = { NULL };
	struct image_info img = {
		.rootfs = FIXTURE_ROOT, .cmd = cmd, .entrypoint = empty, .env = empty, .user = ""
	};
	struct bundle_spec spec = { .pod = &pod,
				    .unit = &u,
				    .image = &img,
				    .rootfs = "/r",
				    .pod_pid_ns = "/proc/77/ns/pid",
				    .pod_ipc_ns = "/proc/77/ns/ipc",
				    .host_netns = "/run/netns/kiyotnode" };
	struct err err = ERR_INIT;
	json_t *cfg = NULL, *proc, *gids, *linux_;

	(void)state;
	u.id = "sec";
	u.user = "app:50";
	u.supplemental_groups = groups;
	u.n_supplemental_groups = 2;
	u.readonly_rootfs = 1;
	u.no_new_privs = 1;
	u.masked_paths = masked;
	u.n_masked_paths = 2;
	u.readonly_paths = ro;
	u.n_readonly_paths = 1;
	u.pid_namespace = KIYOT__CELL__V1__NAMESPACE_MODE__POD;
	m.container_path = "/mnt";
	m.host_path = "/srv/mnt";
	m.propagation = KIYOT__CELL__V1__MOUNT__PROPAGATION__HOST_TO_CONTAINER;
	u.mounts = mounts;
	u.n_mounts = 1;
	kv.key = "net.ipv4.ip_unprivileged_port_start";
	kv.value = "0";
	kv2.key = "kernel.shm_rmid_forced";
	kv2.value = "1";
	pod.sysctls = sysctls;
	pod.n_sysctls = 2;
	pod.ipc_namespace = KIYOT__CELL__V1__NAMESPACE_MODE__NODE;
	assert_int_equal(bundle_config(&spec, &cfg, &err), 0);
	proc = json_object_get(cfg, "process");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(proc, "user"), "uid")),
			 1000);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(proc, "user"), "gid")),
			 50);
	/* the image's groups of "app" (adm 4, staff 50) and the unit's, each once */
	gids = json_object_get(json_object_get(proc, "user"), "additionalGids");
	assert_int_equal(json_array_size(gids), 3);
	assert_true(json_is_true(json_object_get(proc, "noNewPrivileges")));
	assert_true(json_is_true(json_object_get(json_object_get(cfg, "root"), "readonly")));
	linux_ = json_object_get(cfg, "linux");
	assert_true(has_string(json_object_get(linux_, "maskedPaths"), "/bin/ls"));
	assert_int_equal(json_array_size(json_object_get(linux_, "maskedPaths")), 2);
	assert_true(has_string(json_object_get(linux_, "readonlyPaths"), "/tmp"));
	assert_string_equal(json_string_value(json_object_get(find_ns(cfg, "pid"), "path")),
			    "/proc/77/ns/pid");
	assert_null(find_ns(cfg, "ipc"));     /* the host's */
	assert_null(find_ns(cfg, "network")); /* the cell's */
	/* IPC sysctls go to the runtime; the network's the agent sets in the cell itself */
	assert_string_equal(json_string_value(json_object_get(json_object_get(linux_, "sysctl"),
							      "kernel.shm_rmid_forced")),
			    "1");
	assert_null(json_object_get(json_object_get(linux_, "sysctl"),
				    "net.ipv4.ip_unprivileged_port_start"));
	assert_true(has_string(json_object_get(find_mount(cfg, "/mnt"), "options"), "rslave"));
	assert_string_equal(json_string_value(json_object_get(linux_, "rootfsPropagation")),
			    "rslave");
	json_decref(cfg);

	/* own namespaces; the node's network; bidirectional; privileged: no paths, still nnp */
	u.pid_namespace = KIYOT__CELL__V1__NAMESPACE_MODE__CONTAINER;
	pod.ipc_namespace = KIYOT__CELL__V1__NAMESPACE_MODE__POD;
	pod.network_namespace = KIYOT__CELL__V1__NAMESPACE_MODE__NODE;
	m.propagation = KIYOT__CELL__V1__MOUNT__PROPAGATION__BIDIRECTIONAL;
	u.privileged = 1;
	assert_int_equal(bundle_config(&spec, &cfg, &err), 0);
	assert_null(json_object_get(find_ns(cfg, "pid"), "path"));
	assert_non_null(find_ns(cfg, "pid"));
	assert_string_equal(json_string_value(json_object_get(find_ns(cfg, "ipc"), "path")),
			    "/proc/77/ns/ipc");
	assert_string_equal(json_string_value(json_object_get(find_ns(cfg, "network"), "path")),
			    "/run/netns/kiyotnode");
	assert_true(has_string(json_object_get(find_mount(cfg, "/mnt"), "options"), "rshared"));
	linux_ = json_object_get(cfg, "linux");
	assert_null(json_object_get(linux_, "maskedPaths"));
	assert_null(json_object_get(linux_, "readonlyPaths"));
	assert_true(
		json_is_true(json_object_get(json_object_get(cfg, "process"), "noNewPrivileges")));
	json_decref(cfg);

	/* drop ALL, add one: that one, whatever the order given (as other runtimes do) */
	{
		char *all[] = { "ALL" }, *one[] = { "NET_BIND_SERVICE" };
		json_t *bounding;

		u.privileged = 0;
		u.capabilities_drop = all;
		u.n_capabilities_drop = 1;
		u.capabilities_add = one;
		u.n_capabilities_add = 1;
		assert_int_equal(bundle_config(&spec, &cfg, &err), 0);
		bounding = json_object_get(json_object_get(json_object_get(cfg, "process"),
							   "capabilities"),
					   "bounding");
		assert_int_equal(json_array_size(bounding), 1);
		assert_true(has_string(bounding, "CAP_NET_BIND_SERVICE"));
		json_decref(cfg);
		u.n_capabilities_drop = u.n_capabilities_add = 0;
	}

	/* more groups than a process may carry here is an error, not a silent cut */
	{
		uint32_t many[80];

		for (size_t i = 0; i < ARRAY_SIZE(many); i++)
			many[i] = (uint32_t)(2000 + i);
		u.supplemental_groups = many;
		u.n_supplemental_groups = ARRAY_SIZE(many);
		assert_int_equal(bundle_config(&spec, &cfg, &err), -EINVAL);
		assert_non_null(strstr(err.msg, "supplemental groups"));
	}
}

/* securityContext: capabilities added and dropped, privileged; shipped volumes must exist. */
static void test_bundle__capabilities_and_shipped_volumes(void **state)
{
	char dir[] = "/tmp/bundle-test-XXXXXX";
	Kiyot__Cell__V1__Pod pod = KIYOT__CELL__V1__POD__INIT;
	Kiyot__Cell__V1__Unit u = KIYOT__CELL__V1__UNIT__INIT;
	Kiyot__Cell__V1__Volume v = KIYOT__CELL__V1__VOLUME__INIT;
	Kiyot__Cell__V1__Volume *vols[] = { &v };
	Kiyot__Cell__V1__Mount m = KIYOT__CELL__V1__MOUNT__INIT;
	Kiyot__Cell__V1__Mount *mounts[] = { &m };
	char *cmd[] = { "/bin/sh", NULL }, *empty[] = { NULL };
	char *add[] = { "NET_ADMIN", "cap_sys_time" }, *drop[] = { "CAP_KILL" },
	     *bogus[] = { "FLY" };
	struct image_info img = {
		.rootfs = FIXTURE_ROOT, .cmd = cmd, .entrypoint = empty, .env = empty
	};
	_cleanup_free_ char *volumes = NULL, *shipped = NULL;
	struct bundle_spec spec = { 0 };
	struct err err = ERR_INIT;
	json_t *cfg = NULL, *caps;

	(void)state;
	assert_non_null(mkdtemp(dir));
	volumes = xasprintf("%s/volumes", dir);
	v.name = "sv-0123456789abcdef";
	v.kind = KIYOT__CELL__V1__VOLUME__KIND__SHIPPED;
	pod.volumes = vols;
	pod.n_volumes = 1;
	m.container_path = "/etc/config";
	m.volume = v.name;
	m.readonly = 1;
	u.id = "c0ffee";
	u.capabilities_add = add;
	u.n_capabilities_add = 2;
	u.capabilities_drop = drop;
	u.n_capabilities_drop = 1;
	spec.pod = &pod;
	spec.unit = &u;
	spec.image = &img;
	spec.rootfs = "/state/units/c0ffee/rootfs";
	spec.volumes_dir = volumes;

	/* a shipped volume that was never written is not created empty */
	u.mounts = mounts;
	u.n_mounts = 1;
	assert_int_equal(bundle_config(&spec, &cfg, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "no content in the cell"));
	shipped = xasprintf("%s/%s", volumes, v.name);
	assert_int_equal(fs_mkdir_p(shipped, 0755, &err), 0);
	assert_int_equal(bundle_config(&spec, &cfg, &err), 0);
	assert_string_equal(
		json_string_value(json_object_get(find_mount(cfg, "/etc/config"), "source")),
		shipped);
	caps = json_object_get(json_object_get(json_object_get(cfg, "process"), "capabilities"),
			       "effective");
	assert_true(has_string(caps, "CAP_NET_ADMIN"));
	assert_true(has_string(caps, "CAP_SYS_TIME"));
	assert_true(has_string(caps, "CAP_CHOWN"));
	assert_false(has_string(caps, "CAP_KILL"));
	assert_false(has_string(caps, "CAP_SYS_ADMIN"));
	json_decref(cfg);

	/* privileged: every capability, no masked paths; an unknown one is an error */
	u.privileged = 1;
	u.n_capabilities_drop = 0;
	assert_int_equal(bundle_config(&spec, &cfg, &err), 0);
	caps = json_object_get(json_object_get(json_object_get(cfg, "process"), "capabilities"),
			       "bounding");
	assert_true(has_string(caps, "CAP_SYS_ADMIN"));
	assert_true(has_string(caps, "CAP_KILL"));
	assert_null(json_object_get(json_object_get(cfg, "linux"), "maskedPaths"));
	json_decref(cfg);
	u.capabilities_add = bogus;
	u.n_capabilities_add = 1;
	assert_int_equal(bundle_config(&spec, &cfg, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "\"FLY\""));
	fs_remove_tree(dir, &err);
}

/* The pod's DNS settings become resolv.conf; hosts and hostname name the pod. */
static void test_bundle__etc_files(void **state)
{
	char dir[] = "/tmp/bundle-test-XXXXXX";
	Kiyot__Cell__V1__Pod pod = KIYOT__CELL__V1__POD__INIT;
	char *servers[] = { "10.96.0.10" },
	     *searches[] = { "default.svc.cluster.local", "cluster.local" },
	     *options[] = { "ndots:5" };
	_cleanup_free_ char *path = NULL, *text = NULL;
	struct err err = ERR_INIT;

	(void)state;
	assert_non_null(mkdtemp(dir));
	pod.hostname = "web-0";
	pod.dns_servers = servers;
	pod.n_dns_servers = 1;
	pod.dns_searches = searches;
	pod.n_dns_searches = 2;
	pod.dns_options = options;
	pod.n_dns_options = 1;
	assert_int_equal(bundle_write_etc(&pod, dir, "10.77.0.5", &err), 0);
	path = xasprintf("%s/resolv.conf", dir);
	assert_int_equal(fs_read_file(path, 4096, &text, NULL, &err), 0);
	assert_string_equal(text, "nameserver 10.96.0.10\n"
				  "search default.svc.cluster.local cluster.local\n"
				  "options ndots:5\n");
	free(path);
	free(text);
	path = xasprintf("%s/hosts", dir);
	assert_int_equal(fs_read_file(path, 4096, &text, NULL, &err), 0);
	assert_non_null(strstr(text, "10.77.0.5\tweb-0\n"));
	assert_non_null(strstr(text, "127.0.0.1\tlocalhost\n"));
	free(path);
	free(text);
	path = xasprintf("%s/hostname", dir);
	assert_int_equal(fs_read_file(path, 4096, &text, NULL, &err), 0);
	assert_string_equal(text, "web-0\n");
	fs_remove_tree(dir, &err);
}

/* A unit's cgroup v2 settings become linux.resources.unified on a v2 cell; a v1 cell and a key
 * that is no cgroup file are refused, saying why. */
static void test_bundle__unified_settings(void **state)
{
	Kiyot__Cell__V1__Unit u = KIYOT__CELL__V1__UNIT__INIT;
	Kiyot__Cell__V1__KeyValue a = KIYOT__CELL__V1__KEY_VALUE__INIT,
				  b = KIYOT__CELL__V1__KEY_VALUE__INIT;
	Kiyot__Cell__V1__KeyValue *kv[] = { &a, &b };
	char *cmd[] = { "/bin/sh", NULL }, *empty[] = { NULL };
	struct image_info img = {
		.rootfs = FIXTURE_ROOT, .cmd = cmd, .entrypoint = empty, .env = empty
	};
	struct bundle_spec spec = {
		.unit = &u, .image = &img, .rootfs = "/r", .cgroup_parent = "/kiyot"
	};
	struct err err = ERR_INIT;
	json_t *cfg = NULL, *un;

	(void)state;
	u.id = "u1";
	a.key = "memory.high";
	a.value = "50000000";
	b.key = "pids.max";
	b.value = "64";
	u.unified = kv;
	u.n_unified = 2;
	cgroup_set_root("/nonexistent-cgroup-root", true);
	assert_int_equal(bundle_config(&spec, &cfg, &err), 0);
	un = json_object_get(json_object_get(json_object_get(cfg, "linux"), "resources"),
			     "unified");
	assert_int_equal(json_object_size(un), 2);
	assert_string_equal(json_string_value(json_object_get(un, "memory.high")), "50000000");
	assert_string_equal(json_string_value(json_object_get(un, "pids.max")), "64");
	json_decref(cfg);
	cfg = NULL;

	const char *bad[] = { "../memory.high", "memory",      ".memory",
			      "memory.",	"Memory.high", "memory/high" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b.key = (char *)bad[i];
		err_clear(&err);
		assert_int_equal(bundle_config(&spec, &cfg, &err), -EINVAL);
		assert_non_null(strstr(err.msg, "is not a cgroup file"));
		assert_null(cfg);
	}
	b.key = "pids.max";
	b.value = "1\n2";
	err_clear(&err);
	assert_int_equal(bundle_config(&spec, &cfg, &err), -EINVAL);

	b.value = "64";
	cgroup_set_root("/nonexistent-cgroup-root", false);
	err_clear(&err);
	assert_int_equal(bundle_config(&spec, &cfg, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "need the cgroup v2 hierarchy"));
	assert_null(cfg);
	/* without settings a v1 cell is fine */
	u.n_unified = 0;
	assert_int_equal(bundle_config(&spec, &cfg, &err), 0);
	assert_null(json_object_get(json_object_get(json_object_get(cfg, "linux"), "resources"),
				    "unified"));
	json_decref(cfg);
	cgroup_set_root(NULL, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bundle__process_args_table),
		cmocka_unit_test(test_bundle__env_overlay),
		cmocka_unit_test(test_bundle__user_resolution_table),
		cmocka_unit_test(test_bundle__user_lookup_stays_in_root),
		cmocka_unit_test(test_bundle__config_json),
		cmocka_unit_test(test_bundle__security_context),
		cmocka_unit_test(test_bundle__etc_files),
		cmocka_unit_test(test_bundle__capabilities_and_shipped_volumes),
		cmocka_unit_test(test_bundle__unified_settings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
