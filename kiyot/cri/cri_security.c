/*
 * cri_security.c: a pod's and a container's security context, checked where the CRI hands it
 * over and turned into the unit and pod a cell runs. Whatever a cell cannot honour is refused
 * at once, never run with less protection than asked for.
 */
#include "cri_security.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "xalloc.h"

/* Sysctls that live in a network or IPC namespace; every other one is the whole machine's. */
static const char *const ipc_sysctls[] = {
	"kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.sem",
	"kernel.shmall", "kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced",
};

enum sysctl_ns {
	SYSCTL_HOST,
	SYSCTL_NET,
	SYSCTL_IPC
};

static enum sysctl_ns sysctl_namespace(const char *name)
{
	if (strncmp(name, "net.", 4) == 0)
		return SYSCTL_NET;
	if (strncmp(name, "fs.mqueue.", 10) == 0)
		return SYSCTL_IPC;
	for (size_t i = 0; i < ARRAY_SIZE(ipc_sysctls); i++)
		if (strcmp(name, ipc_sysctls[i]) == 0)
			return SYSCTL_IPC;
	return SYSCTL_HOST;
}

static Kiyot__Cell__V1__NamespaceMode ns_mode(Runtime__V1__NamespaceMode m)
{
	switch (m) {
	case RUNTIME__V1__NAMESPACE_MODE__NODE:
		return KIYOT__CELL__V1__NAMESPACE_MODE__NODE;
	case RUNTIME__V1__NAMESPACE_MODE__CONTAINER:
		return KIYOT__CELL__V1__NAMESPACE_MODE__CONTAINER;
	default:
		return KIYOT__CELL__V1__NAMESPACE_MODE__POD;
	}
}

static const Runtime__V1__NamespaceOption *sandbox_ns(const Runtime__V1__PodSandboxConfig *cfg)
{
	if (!cfg->linux || !cfg->linux->security_context)
		return NULL;
	return cfg->linux->security_context->namespace_options;
}

int cri_security_check_sandbox(const Runtime__V1__PodSandboxConfig *cfg, struct err *err)
{
	const Runtime__V1__NamespaceOption *no = sandbox_ns(cfg);
	bool host_net = no && no->network == RUNTIME__V1__NAMESPACE_MODE__NODE;
	bool host_ipc = no && no->ipc == RUNTIME__V1__NAMESPACE_MODE__NODE;

	if (no && (no->pid == RUNTIME__V1__NAMESPACE_MODE__TARGET ||
		   no->ipc == RUNTIME__V1__NAMESPACE_MODE__TARGET ||
		   no->network == RUNTIME__V1__NAMESPACE_MODE__TARGET))
		return err_set(err, EINVAL,
			       "linux.security_context.namespace_options: TARGET is a mode for "
			       "containers, not pods");
	for (size_t i = 0; cfg->linux && i < cfg->linux->n_sysctls; i++) {
		const char *name = cfg->linux->sysctls[i]->key;
		const char *value = cfg->linux->sysctls[i]->value;

		if (!name[0] ||
		    strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789._-") != strlen(name))
			return err_set(err, EINVAL,
				       "linux.sysctls: \"%.100s\" is not a sysctl name (dotted, "
				       "e.g. net.ipv4.ip_unprivileged_port_start)",
				       name);
		if (!value || strchr(value, '\n'))
			return err_set(err, EINVAL,
				       "linux.sysctls[%s]: the value may not hold a "
				       "newline",
				       name);
		switch (sysctl_namespace(name)) {
		case SYSCTL_HOST:
			return err_set(err, EINVAL,
				       "linux.sysctls: %s is not namespaced: it would change the "
				       "whole machine, not the pod (only net.*, kernel.shm*, "
				       "kernel.msg*, kernel.sem and fs.mqueue.* may be set)",
				       name);
		case SYSCTL_NET:
			if (host_net)
				return err_set(err, EINVAL,
					       "linux.sysctls: %s would change the host's network, "
					       "which a host-network pod shares",
					       name);
			break;
		case SYSCTL_IPC:
			if (host_ipc)
				return err_set(
					err, EINVAL,
					"linux.sysctls: %s would change the host's IPC, which a "
					"host-IPC pod shares",
					name);
			break;
		}
	}
	return 0;
}

/* Reads a Localhost seccomp profile: an absolute path to a regular file of bounded size. */
static int read_profile(const char *path, char **out, struct err *err)
{
	struct stat st;

	if (path[0] != '/')
		return err_set(err, EINVAL,
			       "seccomp profile \"%s\": a Localhost profile is an absolute path on "
			       "the node",
			       path);
	if (stat(path, &st) < 0)
		return err_errno(err, "seccomp profile %s", path);
	if (!S_ISREG(st.st_mode))
		return err_set(err, EINVAL, "seccomp profile %s is not a regular file", path);
	if (fs_read_file(path, CRI_SECCOMP_PROFILE_MAX, out, NULL, err) < 0)
		return err_wrap(err, "seccomp profile %s (at most %d KiB)", path,
				CRI_SECCOMP_PROFILE_MAX / 1024);
	return 0;
}

/* The deprecated seccomp_profile_path, which older clients (and the CRI's own validation
 * suite) still send. */
static const char *profile_path(const Runtime__V1__LinuxContainerSecurityContext *sc)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	return sc->seccomp_profile_path ? sc->seccomp_profile_path : "";
#pragma GCC diagnostic pop
}

/* The seccomp profile a container asks for: the SecurityProfile field when set, else the
 * deprecated profile path ("", "unconfined", "runtime/default", "docker/default",
 * "localhost/<path>"). */
static int seccomp_of(const Runtime__V1__LinuxContainerSecurityContext *sc,
		      Kiyot__Cell__V1__Seccomp__Kind *kind, const char **path, struct err *err)
{
	const char *p = profile_path(sc);

	*path = NULL;
	if (sc->seccomp) {
		switch (sc->seccomp->profile_type) {
		case RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault:
			*kind = KIYOT__CELL__V1__SECCOMP__KIND__RUNTIME_DEFAULT;
			return 0;
		case RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined:
			*kind = KIYOT__CELL__V1__SECCOMP__KIND__UNCONFINED;
			return 0;
		case RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost:
			*kind = KIYOT__CELL__V1__SECCOMP__KIND__LOCALHOST;
			*path = sc->seccomp->localhost_ref;
			return 0;
		default:
			return err_set(err, EINVAL, "seccomp: unknown profile type %d",
				       (int)sc->seccomp->profile_type);
		}
	}
	if (!p[0] || strcmp(p, "unconfined") == 0) {
		*kind = KIYOT__CELL__V1__SECCOMP__KIND__UNCONFINED;
	} else if (strcmp(p, "runtime/default") == 0 || strcmp(p, "docker/default") == 0) {
		*kind = KIYOT__CELL__V1__SECCOMP__KIND__RUNTIME_DEFAULT;
	} else if (strncmp(p, "localhost/", 10) == 0) {
		*kind = KIYOT__CELL__V1__SECCOMP__KIND__LOCALHOST;
		*path = p + 10;
	} else {
		return err_set(
			err, EINVAL,
			"seccomp profile \"%.200s\" is not one kiyot knows: use "
			"runtime/default, unconfined or localhost/<absolute path on the node>",
			p);
	}
	return 0;
}

int cri_security_check_container(const Runtime__V1__ContainerConfig *cfg, char **profile,
				 struct err *err)
{
	const Runtime__V1__LinuxContainerSecurityContext *sc =
		cfg->linux ? cfg->linux->security_context : NULL;
	Kiyot__Cell__V1__Seccomp__Kind kind;
	const char *path = NULL;

	*profile = xstrdup("");
	if (!sc)
		return 0;
	if (sc->run_as_group && !sc->run_as_user &&
	    !(sc->run_as_username && sc->run_as_username[0]))
		return err_set(err, EINVAL,
			       "linux.security_context.run_as_group: set without run_as_user or "
			       "run_as_username (a group alone cannot say which user runs)");
	if (sc->run_as_user &&
	    (sc->run_as_user->value < 0 || sc->run_as_user->value > UINT32_MAX - 1))
		return err_set(err, EINVAL, "linux.security_context.run_as_user: %lld is not a uid",
			       (long long)sc->run_as_user->value);
	if (sc->run_as_group &&
	    (sc->run_as_group->value < 0 || sc->run_as_group->value > UINT32_MAX - 1))
		return err_set(err, EINVAL,
			       "linux.security_context.run_as_group: %lld is not a gid",
			       (long long)sc->run_as_group->value);
	if (sc->run_as_username && strpbrk(sc->run_as_username, ":\n"))
		return err_set(
			err, EINVAL,
			"linux.security_context.run_as_username: \"%.64s\" is not a user name",
			sc->run_as_username);
	for (size_t i = 0; i < sc->n_supplemental_groups; i++)
		if (sc->supplemental_groups[i] < 0 || sc->supplemental_groups[i] > UINT32_MAX - 1)
			return err_set(err, EINVAL,
				       "linux.security_context.supplemental_groups: %lld is not a "
				       "gid",
				       (long long)sc->supplemental_groups[i]);
	if (sc->namespace_options &&
	    sc->namespace_options->pid == RUNTIME__V1__NAMESPACE_MODE__TARGET)
		return err_set(err, EINVAL,
			       "linux.security_context.namespace_options.pid: TARGET (another "
			       "container's PID namespace) is not supported; use POD");
	if (seccomp_of(sc, &kind, &path, err) < 0)
		return -err->code;
	if (kind != KIYOT__CELL__V1__SECCOMP__KIND__LOCALHOST || sc->privileged)
		return 0;
	free(*profile);
	*profile = NULL;
	if (read_profile(path ? path : "", profile, err) < 0) {
		*profile = xstrdup("");
		return -err->code;
	}
	return 0;
}

/* The user spec the agent resolves: "uid", "uid:gid", "name" or "name:gid"; "" keeps the
 * image's user. */
static char *user_of(struct arena *a, const Runtime__V1__LinuxContainerSecurityContext *sc)
{
	char buf[320];

	if (sc->run_as_username && sc->run_as_username[0])
		snprintf(buf, sizeof(buf), "%s", sc->run_as_username);
	else if (sc->run_as_user)
		snprintf(buf, sizeof(buf), "%lld", (long long)sc->run_as_user->value);
	else
		return arena_strdup(a, "");
	if (sc->run_as_group)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), ":%lld",
			 (long long)sc->run_as_group->value);
	return arena_strdup(a, buf);
}

static Kiyot__Cell__V1__Mount__Propagation propagation_of(Runtime__V1__MountPropagation p)
{
	switch (p) {
	case RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_HOST_TO_CONTAINER:
		return KIYOT__CELL__V1__MOUNT__PROPAGATION__HOST_TO_CONTAINER;
	case RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_BIDIRECTIONAL:
		return KIYOT__CELL__V1__MOUNT__PROPAGATION__BIDIRECTIONAL;
	default:
		return KIYOT__CELL__V1__MOUNT__PROPAGATION__PRIVATE;
	}
}

void cri_security_unit(struct arena *a, const struct container *c, Kiyot__Cell__V1__Unit *u)
{
	const Runtime__V1__ContainerConfig *cfg = c->config;
	const Runtime__V1__LinuxContainerSecurityContext *sc =
		cfg->linux ? cfg->linux->security_context : NULL;
	Kiyot__Cell__V1__Seccomp *seccomp;
	Kiyot__Cell__V1__Seccomp__Kind kind = KIYOT__CELL__V1__SECCOMP__KIND__UNCONFINED;
	const char *path = NULL;
	struct err err = ERR_INIT;

	for (size_t i = 0; i < cfg->n_mounts && i < u->n_mounts; i++)
		u->mounts[i]->propagation = propagation_of(cfg->mounts[i]->propagation);
	/* without a security context: the CRI's defaults (pid POD, nothing masked) */
	u->pid_namespace = KIYOT__CELL__V1__NAMESPACE_MODE__POD;
	u->user = arena_strdup(a, "");
	if (!sc)
		return;
	u->user = user_of(a, sc);
	u->privileged = sc->privileged;
	if (sc->capabilities) {
		u->n_capabilities_add = sc->capabilities->n_add_capabilities;
		u->capabilities_add = sc->capabilities->add_capabilities;
		u->n_capabilities_drop = sc->capabilities->n_drop_capabilities;
		u->capabilities_drop = sc->capabilities->drop_capabilities;
	}
	u->n_supplemental_groups = sc->n_supplemental_groups;
	u->supplemental_groups =
		arena_alloc(a, (sc->n_supplemental_groups + 1) * sizeof(*u->supplemental_groups));
	for (size_t i = 0; i < sc->n_supplemental_groups; i++)
		u->supplemental_groups[i] = (uint32_t)sc->supplemental_groups[i];
	u->readonly_rootfs = sc->readonly_rootfs;
	u->no_new_privs = sc->no_new_privs;
	u->n_masked_paths = sc->n_masked_paths;
	u->masked_paths = sc->masked_paths;
	u->n_readonly_paths = sc->n_readonly_paths;
	u->readonly_paths = sc->readonly_paths;
	if (sc->namespace_options)
		u->pid_namespace = ns_mode(sc->namespace_options->pid);
	/* checked at CreateContainer; a record from before then runs confined by default */
	if (seccomp_of(sc, &kind, &path, &err) < 0)
		kind = KIYOT__CELL__V1__SECCOMP__KIND__RUNTIME_DEFAULT;
	seccomp = arena_alloc(a, sizeof(*seccomp));
	kiyot__cell__v1__seccomp__init(seccomp);
	seccomp->kind = kind;
	if (kind == KIYOT__CELL__V1__SECCOMP__KIND__LOCALHOST)
		seccomp->profile = c->seccomp_profile ? c->seccomp_profile : (char *)"";
	u->seccomp = seccomp;
}

void cri_security_pod(struct arena *a, const Runtime__V1__PodSandboxConfig *cfg,
		      Kiyot__Cell__V1__Pod *p)
{
	const Runtime__V1__NamespaceOption *no = sandbox_ns(cfg);

	p->network_namespace = no ? ns_mode(no->network) : KIYOT__CELL__V1__NAMESPACE_MODE__POD;
	p->ipc_namespace = no ? ns_mode(no->ipc) : KIYOT__CELL__V1__NAMESPACE_MODE__POD;
	if (!cfg->linux || !cfg->linux->n_sysctls)
		return;
	p->sysctls = arena_alloc(a, cfg->linux->n_sysctls * sizeof(*p->sysctls));
	for (size_t i = 0; i < cfg->linux->n_sysctls; i++) {
		Kiyot__Cell__V1__KeyValue *kv = arena_alloc(a, sizeof(*kv));

		kiyot__cell__v1__key_value__init(kv);
		kv->key = cfg->linux->sysctls[i]->key;
		kv->value = cfg->linux->sysctls[i]->value;
		p->sysctls[p->n_sysctls++] = kv;
	}
}
