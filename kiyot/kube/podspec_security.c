/*
 * podspec_security.c: the security settings of a Pod manifest: each container's
 * securityContext, spec.securityContext, the host namespaces, and the annotations that ask
 * for a seccomp or AppArmor profile. Validated as the API server validates them; what a cell
 * cannot apply is refused (ENOTSUP), and inside a securityContext so is any unknown field, so
 * that no protection a manifest asks for is dropped without a word. The merge of pod and
 * container fields follows the kubelet.
 */
#include "podspec_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "strvec.h"
#include "xalloc.h"

#define SEC struct podspec_security
#define PSEC struct podspec_pod_security

#define NO_SELINUX "SELinux labels are not supported: kiyot cells do not run SELinux"
#define NO_APPARMOR "AppArmor profiles are not supported: kiyot cells do not run AppArmor"
#define NO_WINDOWS "Windows options are not supported: kiyot cells run Linux containers"

/* The most supplementalGroups: the kernel's NGROUPS_MAX. */
#define PODSPEC_MAX_GROUPS 65536

/* True when v asks for nothing: an empty mapping, or only null members. */
static bool pempty(const json_t *v)
{
	const char *k;
	json_t *m;

	if (!json_is_object(v))
		return false;
	json_object_foreach ((json_t *)v, k, m) {
		if (!json_is_null(m))
			return false;
	}
	return true;
}

/* A field asking for what a cell cannot do: refused (ENOTSUP) unless it asks for nothing. */
static int refuse(const json_t *v, const char *path, const char *why, struct err *err)
{
	if (pempty(v))
		return 0;
	return err_set(err, ENOTSUP, "%s: %s; remove it", path, why);
}

static int no_selinux(const json_t *v, void *dst, const char *path, struct err *err)
{
	(void)dst;
	return refuse(v, path, NO_SELINUX, err);
}

static int no_windows(const json_t *v, void *dst, const char *path, struct err *err)
{
	(void)dst;
	return refuse(v, path, NO_WINDOWS, err);
}

/* appArmorProfile: type Unconfined alone asks for no confinement, which cells give. */
static int no_apparmor(const json_t *v, void *dst, const char *path, struct err *err)
{
	const json_t *t = json_object_get(v, "type");
	const char *k;
	json_t *m;
	bool unconfined = json_is_string(t) && strcmp(json_string_value(t), "Unconfined") == 0;

	(void)dst;
	json_object_foreach ((json_t *)v, k, m)
		unconfined = unconfined && (strcmp(k, "type") == 0 || json_is_null(m));
	return unconfined ? 0 : refuse(v, path, NO_APPARMOR, err);
}

static int no_fs_group_policy(const json_t *v, void *dst, const char *path, struct err *err)
{
	(void)dst;
	return refuse(v, path,
		      "kiyot run does not change the ownership of volumes (fsGroup is added to the "
		      "containers' groups; emptyDir volumes are writable by all)",
		      err);
}

static int no_groups_policy(const json_t *v, void *dst, const char *path, struct err *err)
{
	(void)dst;
	return refuse(v, path,
		      "kiyot run always adds the groups the image's /etc/group gives the user (the "
		      "Merge policy)",
		      err);
}

/* True when p is a path below a directory: relative, without a ".." element. */
static bool pdescending(const char *p)
{
	if (p[0] == '/')
		return false;
	for (const char *s = p; (s = strstr(s, "..")); s += 2) {
		if ((s == p || s[-1] == '/') && (s[2] == '\0' || s[2] == '/'))
			return false;
	}
	return true;
}

static int check_profile_path(void *obj, const json_t *v, const char *path, struct err *err)
{
	(void)obj;
	if (pdescending(json_string_value(v)))
		return 0;
	return err_set(err, EINVAL,
		       "%s: \"%s\" must be a relative path without '..' (it is read below the "
		       "node's seccomp directory)",
		       path, json_string_value(v));
}

/* seccompProfile.type, into enum podspec_seccomp_type (UNSET is "not given"). */
static int read_seccomp_type(const json_t *v, void *dst, const char *path, struct err *err)
{
	static const char *const names[] = { "RuntimeDefault", "Unconfined", "Localhost" };
	char val[64];

	for (size_t i = 0; json_is_string(v) && i < ARRAY_SIZE(names); i++) {
		if (strcmp(json_string_value(v), names[i]) == 0 &&
		    json_string_length(v) == strlen(names[i])) {
			*(enum podspec_seccomp_type *)dst = PODSPEC_SECCOMP_RUNTIME_DEFAULT + i;
			return 0;
		}
	}
	return err_set(err, EINVAL, "%s: %s is not one of RuntimeDefault, Unconfined, Localhost",
		       path, jf_value_text(v, val));
}

/* localhostProfile with type Localhost, and only then. */
static int check_seccomp(void *obj, const json_t *v, const char *path, struct err *err)
{
	const struct podspec_seccomp *s = obj;

	(void)v;
	if (s->type != PODSPEC_SECCOMP_LOCALHOST && s->localhost_profile)
		return err_set(err, EINVAL,
			       "%s.localhostProfile: may only be set when type is Localhost", path);
	if (s->type == PODSPEC_SECCOMP_LOCALHOST && !s->localhost_profile)
		return err_set(err, EINVAL,
			       "%s.localhostProfile: required when type is Localhost (a path "
			       "relative to the node's seccomp directory, e.g. "
			       "profiles/audit.json)",
			       path);
	return 0;
}

static const struct jf_field seccomp_fields[] = {
	{ JF_CUSTOM("type", offsetof(struct podspec_seccomp, type), read_seccomp_type),
	  .required = true, .hint = "(RuntimeDefault, Unconfined or Localhost)" },
	{ PODSPEC_STR("localhostProfile", struct podspec_seccomp, localhost_profile), .min = 1,
	  .check = check_profile_path },
	JF_END,
};
static const struct jf_table seccomp_table = { .fields = seccomp_fields,
					       .strict = true,
					       .null_absent = true,
					       .example = "{type: RuntimeDefault}",
					       .check = check_seccomp };

static const struct jf_field capabilities_fields[] = {
	{ PODSPEC_STRV("add", SEC, cap_add, n_cap_add) },
	{ PODSPEC_STRV("drop", SEC, cap_drop, n_cap_drop) },
	JF_END,
};
static const struct jf_table capabilities_table = { .fields = capabilities_fields,
						    .strict = true,
						    .null_absent = true,
						    .example = "{drop: [ALL]}" };

/* procMount: Default or Unmasked. */
static int read_proc_mount(const json_t *v, void *dst, const char *path, struct err *err)
{
	SEC *s = dst;
	const char *pm = json_is_string(v) ? json_string_value(v) : "";
	char val[64];

	if (json_is_string(v) && strlen(pm) == json_string_length(v) &&
	    (strcmp(pm, "Default") == 0 || strcmp(pm, "Unmasked") == 0)) {
		s->has_proc_mount = true;
		s->proc_mount_unmasked = strcmp(pm, "Unmasked") == 0;
		return 0;
	}
	return err_set(err, EINVAL, "%s: %s is not one of Default, Unmasked", path,
		       jf_value_text(v, val));
}

/* The API server's rules between fields: no privilege escalation means no privileged
 * container and no CAP_SYS_ADMIN. */
static int check_escalation(void *obj, const json_t *v, const char *path, struct err *err)
{
	const SEC *s = obj;

	(void)v;
	if (!s->has_allow_privilege_escalation || s->allow_privilege_escalation)
		return 0;
	if (s->has_privileged && s->privileged)
		return err_set(err, EINVAL,
			       "%s: cannot set allowPrivilegeEscalation to false and privileged to "
			       "true",
			       path);
	if (strv_has(s->cap_add, "CAP_SYS_ADMIN"))
		return err_set(err, EINVAL,
			       "%s: cannot set allowPrivilegeEscalation to false and "
			       "capabilities.add CAP_SYS_ADMIN",
			       path);
	return 0;
}

/* A uid or a gid: 0 to 2147483647, as the API server allows; has_m says it was given. */
#define ID(k, T, m) JF_INT(k, T, m, 0, INT32_MAX), JF_GIVEN(T, has_##m)
#define FLAG(k, T, m) JF_BOOL(k, T, m), JF_GIVEN(T, has_##m)

/* Every field of a container's securityContext (v1.26, and appArmorProfile from v1.30). */
static const struct jf_field security_fields[] = {
	{ ID("runAsUser", SEC, run_as_user) },
	{ ID("runAsGroup", SEC, run_as_group) },
	{ FLAG("runAsNonRoot", SEC, run_as_non_root) },
	{ FLAG("readOnlyRootFilesystem", SEC, read_only_root_filesystem) },
	{ FLAG("allowPrivilegeEscalation", SEC, allow_privilege_escalation) },
	{ FLAG("privileged", SEC, privileged) },
	{ JF_OBJECT("capabilities", 0, &capabilities_table), JF_GIVEN(SEC, has_capabilities) },
	{ JF_OBJECT("seccompProfile", offsetof(SEC, seccomp), &seccomp_table) },
	{ JF_CUSTOM("procMount", 0, read_proc_mount) },
	{ JF_CUSTOM("seLinuxOptions", 0, no_selinux) },
	{ JF_CUSTOM("windowsOptions", 0, no_windows) },
	{ JF_CUSTOM("appArmorProfile", 0, no_apparmor) },
	JF_END,
};
const struct jf_table podspec_security_table = { .fields = security_fields,
						 .strict = true,
						 .null_absent = true,
						 .example = "{runAsUser: 1000}",
						 .check = check_escalation };

/* spec.securityContext.supplementalGroups: gids. */
static int read_groups(const json_t *v, void *dst, const char *path, struct err *err)
{
	PSEC *s = dst;
	char ip[256], val[64];
	json_t *g;
	size_t i;

	if (!json_is_array(v))
		return err_set(err, EINVAL, "%s: must be a list of integers from 0 to %d, not %s",
			       path, INT32_MAX, jf_value_text(v, val));
	if (json_array_size(v) > PODSPEC_MAX_GROUPS)
		return err_set(err, EINVAL, "%s: %zu entries, at most %d", path, json_array_size(v),
			       PODSPEC_MAX_GROUPS);
	json_array_foreach ((json_t *)v, i, g) {
		if (!json_is_integer(g) || json_integer_value(g) < 0 ||
		    json_integer_value(g) > INT32_MAX)
			return err_set(err, EINVAL, "%s: must be an integer from 0 to %d, not %s",
				       jf_index(ip, sizeof(ip), path, i), INT32_MAX,
				       jf_value_text(g, val));
	}
	free(s->supplemental_groups);
	s->supplemental_groups = xcalloc(json_array_size(v) + 1, sizeof(int64_t));
	json_array_foreach ((json_t *)v, i, g)
		s->supplemental_groups[i] = json_integer_value(g);
	s->n_supplemental_groups = json_array_size(v);
	return 0;
}

/* True for a sysctl name as the API server takes it: segments of [a-z0-9] with '-' and '_'
 * inside, separated by '.' or '/', at most 253 characters. */
static bool psysctl_name(const char *s)
{
	size_t len = strlen(s), seg = 0;

	if (len == 0 || len > 253)
		return false;
	for (size_t i = 0; i <= len; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

		if (c == '\0' || c == '.' || c == '/') {
			if (seg == 0 || !((s[i - 1] >= 'a' && s[i - 1] <= 'z') ||
					  (s[i - 1] >= '0' && s[i - 1] <= '9')))
				return false;
			seg = 0;
			continue;
		}
		if (!alnum && ((c != '-' && c != '_') || seg == 0))
			return false;
		seg++;
	}
	return true;
}

static int check_sysctl_name(void *obj, const json_t *v, const char *path, struct err *err)
{
	(void)obj;
	if (psysctl_name(json_string_value(v)))
		return 0;
	return err_set(err, EINVAL,
		       "%s: \"%s\" is not a sysctl name: segments of a-z, 0-9, '-' and '_' "
		       "separated by '.' or '/', e.g. net.ipv4.ip_local_port_range",
		       path, json_string_value(v));
}

/* Sysctl names are unique. */
static int check_sysctls(void *obj, const json_t *v, const char *path, struct err *err)
{
	const PSEC *s = obj;

	(void)v;
	for (size_t i = 1; i < s->n_sysctls; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(s->sysctls[i].name, s->sysctls[j].name) == 0)
				return err_set(err, EINVAL, "%s[%zu].name: duplicate sysctl \"%s\"",
					       path, i, s->sysctls[i].name);
	return 0;
}

static const struct jf_field sysctl_fields[] = {
	{ PODSPEC_STR("name", struct podspec_kv, name), .required = true, .min = 1,
	  .check = check_sysctl_name },
	{ PODSPEC_STR("value", struct podspec_kv, value), .required = true, .min = 1 },
	JF_END,
};
static const struct jf_table sysctl_table = {
	.fields = sysctl_fields,
	.strict = true,
	.null_absent = true,
	.example = "{name: kernel.shm_rmid_forced, value: \"1\"}",
	.release = podspec_kv_release
};

/* Every field of spec.securityContext (v1.26, and the later appArmorProfile,
 * supplementalGroupsPolicy and seLinuxChangePolicy). */
static const struct jf_field pod_security_fields[] = {
	{ ID("runAsUser", PSEC, run_as_user) },
	{ ID("runAsGroup", PSEC, run_as_group) },
	{ FLAG("runAsNonRoot", PSEC, run_as_non_root) },
	{ JF_CUSTOM("supplementalGroups", 0, read_groups) },
	{ ID("fsGroup", PSEC, fs_group) },
	{ JF_LIST("sysctls", PSEC, sysctls, n_sysctls, struct podspec_kv, 0, &sysctl_table),
	  .check = check_sysctls },
	{ JF_OBJECT("seccompProfile", offsetof(PSEC, seccomp), &seccomp_table) },
	{ JF_CUSTOM("seLinuxOptions", 0, no_selinux) },
	{ JF_CUSTOM("seLinuxChangePolicy", 0, no_selinux) },
	{ JF_CUSTOM("windowsOptions", 0, no_windows) },
	{ JF_CUSTOM("appArmorProfile", 0, no_apparmor) },
	{ JF_CUSTOM("fsGroupChangePolicy", 0, no_fs_group_policy) },
	{ JF_CUSTOM("supplementalGroupsPolicy", 0, no_groups_policy) },
	JF_END,
};
const struct jf_table podspec_pod_security_table = { .fields = pod_security_fields,
						     .strict = true,
						     .null_absent = true,
						     .example = "{runAsUser: 1000}" };

/* spec.hostUsers: false (a user namespace) is beyond a cell. */
int podspec_read_host_users(const json_t *v, void *dst, const char *path, struct err *err)
{
	char val[64];

	(void)dst;
	if (!json_is_boolean(v))
		return err_set(err, EINVAL, "%s: must be true or false, not %s", path,
			       jf_value_text(v, val));
	if (json_is_false(v))
		return err_set(err, ENOTSUP,
			       "%s: false (a user namespace for the pod) is not supported by kiyot "
			       "cells; remove it",
			       path);
	return 0;
}

int podspec_check_share_pid(void *obj, const json_t *v, const char *path, struct err *err)
{
	const struct podspec *ps = obj;

	(void)v;
	if (ps->share_process_namespace && ps->host_pid)
		return err_set(err, EINVAL, "%s: cannot be true together with hostPID", path);
	return 0;
}

#define SECCOMP_POD_ANN "seccomp.security.alpha.kubernetes.io/pod"
#define SECCOMP_CONTAINER_ANN "container.seccomp.security.alpha.kubernetes.io/"
#define APPARMOR_CONTAINER_ANN "container.apparmor.security.beta.kubernetes.io/"

/* Refuses the annotations that ask for a seccomp or AppArmor profile: the kubelet reads
 * neither from a manifest it runs without an API server, and cells run no AppArmor. */
int podspec_check_security_annotations(const struct podspec *ps, struct err *err)
{
	for (size_t i = 0; i < ps->n_annotations; i++) {
		const char *k = ps->annotations[i].name;

		if (strcmp(ps->annotations[i].value, "unconfined") == 0)
			continue;
		if (strcmp(k, SECCOMP_POD_ANN) == 0 ||
		    strncmp(k, SECCOMP_CONTAINER_ANN, strlen(SECCOMP_CONTAINER_ANN)) == 0)
			return err_set(err, ENOTSUP,
				       "metadata.annotations.%s: seccomp annotations are not read "
				       "(kubelets ignore them since v1.25); use the seccompProfile "
				       "field of %s",
				       k,
				       k[0] == 's' ? "spec.securityContext"
						   : "the container's securityContext");
		if (strncmp(k, APPARMOR_CONTAINER_ANN, strlen(APPARMOR_CONTAINER_ANN)) == 0)
			return err_set(err, ENOTSUP,
				       "metadata.annotations.%s: " NO_APPARMOR
				       "; remove the annotation",
				       k);
	}
	return 0;
}

/* The effective security context of a container, as the kubelet merges it. */
void podspec_effective_security(const struct podspec *p, const struct podspec_container *c,
				struct podspec_security *out)
{
	const struct podspec_pod_security *ps = &p->security;

	*out = c->security;
	if (!out->has_run_as_user && ps->has_run_as_user) {
		out->has_run_as_user = true;
		out->run_as_user = ps->run_as_user;
	}
	if (!out->has_run_as_group && ps->has_run_as_group) {
		out->has_run_as_group = true;
		out->run_as_group = ps->run_as_group;
	}
	if (!out->has_run_as_non_root && ps->has_run_as_non_root) {
		out->has_run_as_non_root = true;
		out->run_as_non_root = ps->run_as_non_root;
	}
	if (out->seccomp.type == PODSPEC_SECCOMP_UNSET)
		out->seccomp = ps->seccomp;
}

/* True when any container asks to be privileged (the kubelet's HasPrivilegedContainer). */
bool podspec_has_privileged(const struct podspec *p)
{
	for (size_t i = 0; i < p->n_init_containers; i++)
		if (p->init_containers[i].security.privileged)
			return true;
	for (size_t i = 0; i < p->n_containers; i++)
		if (p->containers[i].security.privileged)
			return true;
	return false;
}

void podspec_security_release(struct podspec_security *s)
{
	strv_free(s->cap_add);
	strv_free(s->cap_drop);
	free(s->seccomp.localhost_profile);
}

void podspec_pod_security_release(struct podspec_pod_security *s)
{
	free(s->supplemental_groups);
	podspec_kv_free(s->sysctls, s->n_sysctls);
	free(s->seccomp.localhost_profile);
}
