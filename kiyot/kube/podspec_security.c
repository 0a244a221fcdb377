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

#include "xalloc.h"

/* Fields of a securityContext that a cell cannot honour, and what to say about them. */
struct punsupported {
	const char *key;
	const char *why;
};

#define NO_SELINUX "SELinux labels are not supported: kiyot cells do not run SELinux"
#define NO_APPARMOR "AppArmor profiles are not supported: kiyot cells do not run AppArmor"
#define NO_WINDOWS "Windows options are not supported: kiyot cells run Linux containers"

static const struct punsupported container_unsupported[] = {
	{ "seLinuxOptions", NO_SELINUX },
	{ "windowsOptions", NO_WINDOWS },
	{ "appArmorProfile", NO_APPARMOR },
	{ NULL, NULL },
};

static const struct punsupported pod_unsupported[] = {
	{ "seLinuxOptions", NO_SELINUX },
	{ "seLinuxChangePolicy", NO_SELINUX },
	{ "windowsOptions", NO_WINDOWS },
	{ "appArmorProfile", NO_APPARMOR },
	{ "fsGroupChangePolicy",
	  "kiyot run does not change the ownership of volumes (fsGroup is added to the "
	  "containers' groups; emptyDir volumes are writable by all)" },
	{ "supplementalGroupsPolicy",
	  "kiyot run always adds the groups the image's /etc/group gives the user (the Merge "
	  "policy)" },
	{ NULL, NULL },
};

/* Every field of a container's securityContext (v1.26, and appArmorProfile from v1.30);
 * others are unknown. */
static const char *const container_keys[] = {
	"runAsUser",
	"runAsGroup",
	"runAsNonRoot",
	"readOnlyRootFilesystem",
	"allowPrivilegeEscalation",
	"privileged",
	"capabilities",
	"seccompProfile",
	"procMount",
	"seLinuxOptions",
	"windowsOptions",
	"appArmorProfile",
	NULL,
};

/* Every field of spec.securityContext (v1.26, and the later appArmorProfile,
 * supplementalGroupsPolicy and seLinuxChangePolicy); others are unknown. */
static const char *const pod_keys[] = {
	"runAsUser",
	"runAsGroup",
	"runAsNonRoot",
	"supplementalGroups",
	"fsGroup",
	"sysctls",
	"seccompProfile",
	"seLinuxOptions",
	"seLinuxChangePolicy",
	"windowsOptions",
	"appArmorProfile",
	"fsGroupChangePolicy",
	"supplementalGroupsPolicy",
	NULL,
};

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

/* An appArmorProfile of type Unconfined asks for no confinement, which cells give. */
static bool papparmor_unconfined(const json_t *v)
{
	const json_t *t = podspec_member(v, "type");
	const char *k;
	json_t *m;

	if (!json_is_object(v) || !json_is_string(t) || strcmp(json_string_value(t), "Unconfined"))
		return false;
	json_object_foreach ((json_t *)v, k, m) {
		if (strcmp(k, "type") != 0 && !json_is_null(m))
			return false;
	}
	return true;
}

/* Refuses the fields of sc (at path) that ask for something a cell cannot do. */
static int pcheck_unsupported(const json_t *sc, const char *path, const struct punsupported *t,
			      struct err *err)
{
	for (; t->key; t++) {
		const json_t *v = podspec_member(sc, t->key);

		if (!v || pempty(v) ||
		    (strcmp(t->key, "appArmorProfile") == 0 && papparmor_unconfined(v)))
			continue;
		return err_set(err, ENOTSUP, "%s.%s: %s; remove it", path, t->key, t->why);
	}
	return 0;
}

/* Reads a uid or gid member: 0 to 2147483647, as the API server allows. */
static int pid_field(const json_t *obj, const char *key, const char *path, int64_t *out,
		     bool *given, struct err *err)
{
	return podspec_int(obj, key, path, 0, INT32_MAX, out, given, err);
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

/* Reads a seccompProfile member of obj (at path) into *out. */
static int pseccomp(const json_t *obj, const char *path, struct podspec_seccomp *out,
		    struct err *err)
{
	static const char *const keys[] = { "type", "localhostProfile", NULL };
	const json_t *v = podspec_member(obj, "seccompProfile");
	_cleanup_free_ char *p = podspec_join(path, "seccompProfile");
	_cleanup_free_ char *type = NULL;
	int ret;

	if (!v)
		return 0;
	ret = podspec_expect(v, JSON_OBJECT, p, err);
	if (ret >= 0)
		ret = podspec_check_keys(v, p, keys, err);
	if (ret >= 0)
		ret = podspec_string(v, "type", p, false, &type, err);
	if (ret < 0)
		return ret;
	if (!type)
		return err_set(err, EINVAL,
			       "%s.type: required (RuntimeDefault, Unconfined or Localhost)", p);
	if (strcmp(type, "RuntimeDefault") == 0)
		out->type = PODSPEC_SECCOMP_RUNTIME_DEFAULT;
	else if (strcmp(type, "Unconfined") == 0)
		out->type = PODSPEC_SECCOMP_UNCONFINED;
	else if (strcmp(type, "Localhost") == 0)
		out->type = PODSPEC_SECCOMP_LOCALHOST;
	else
		return err_set(
			err, EINVAL,
			"%s.type: \"%s\" is not one of RuntimeDefault, Unconfined, Localhost", p,
			type);
	if (out->type != PODSPEC_SECCOMP_LOCALHOST) {
		if (podspec_member(v, "localhostProfile"))
			return err_set(
				err, EINVAL,
				"%s.localhostProfile: may only be set when type is Localhost", p);
		return 0;
	}
	if (!podspec_member(v, "localhostProfile"))
		return err_set(err, EINVAL,
			       "%s.localhostProfile: required when type is Localhost (a path "
			       "relative to the node's seccomp directory, e.g. "
			       "profiles/audit.json)",
			       p);
	ret = podspec_string(v, "localhostProfile", p, true, &out->localhost_profile, err);
	if (ret < 0)
		return ret;
	if (!pdescending(out->localhost_profile))
		return err_set(err, EINVAL,
			       "%s.localhostProfile: \"%s\" must be a relative path without '..' "
			       "(it is read below the node's seccomp directory)",
			       p, out->localhost_profile);
	return 0;
}

/* Reads capabilities {add, drop}. */
static int pcapabilities(const json_t *sc, const char *path, struct podspec_security *s,
			 struct err *err)
{
	static const char *const keys[] = { "add", "drop", NULL };
	const json_t *v = podspec_member(sc, "capabilities");
	_cleanup_free_ char *p = podspec_join(path, "capabilities");
	int ret;

	if (!v)
		return 0;
	ret = podspec_expect(v, JSON_OBJECT, p, err);
	if (ret >= 0)
		ret = podspec_check_keys(v, p, keys, err);
	if (ret >= 0)
		ret = podspec_string_list(v, "add", p, &s->cap_add, &s->n_cap_add, err);
	if (ret >= 0)
		ret = podspec_string_list(v, "drop", p, &s->cap_drop, &s->n_cap_drop, err);
	s->has_capabilities = true;
	return ret;
}

/* Reads procMount: Default or Unmasked. */
static int pproc_mount(const json_t *sc, const char *path, struct podspec_security *s,
		       struct err *err)
{
	_cleanup_free_ char *pm = NULL;
	int ret = podspec_string(sc, "procMount", path, false, &pm, err);

	if (ret < 0 || !pm)
		return ret;
	if (strcmp(pm, "Default") && strcmp(pm, "Unmasked"))
		return err_set(err, EINVAL, "%s.procMount: \"%s\" is not one of Default, Unmasked",
			       path, pm);
	s->has_proc_mount = true;
	s->proc_mount_unmasked = strcmp(pm, "Unmasked") == 0;
	return 0;
}

/* The API server's rules between fields: no privilege escalation means no privileged
 * container and no CAP_SYS_ADMIN. */
static int pcheck_escalation(const struct podspec_security *s, const char *path, struct err *err)
{
	if (!s->has_allow_privilege_escalation || s->allow_privilege_escalation)
		return 0;
	if (s->has_privileged && s->privileged)
		return err_set(err, EINVAL,
			       "%s: cannot set allowPrivilegeEscalation to false and privileged to "
			       "true",
			       path);
	for (size_t i = 0; i < s->n_cap_add; i++) {
		if (strcmp(s->cap_add[i], "CAP_SYS_ADMIN") == 0)
			return err_set(err, EINVAL,
				       "%s: cannot set allowPrivilegeEscalation to false and "
				       "capabilities.add CAP_SYS_ADMIN",
				       path);
	}
	return 0;
}

/* Reads a container's securityContext. */
int podspec_read_security(const json_t *c, const char *path, struct podspec_container *ct,
			  struct err *err)
{
	struct podspec_security *s = &ct->security;
	const json_t *sc = podspec_member(c, "securityContext");
	_cleanup_free_ char *p = podspec_join(path, "securityContext");
	int ret;

	if (!sc)
		return 0;
	ret = podspec_expect(sc, JSON_OBJECT, p, err);
	if (ret >= 0)
		ret = podspec_check_keys(sc, p, container_keys, err);
	if (ret >= 0)
		ret = pcheck_unsupported(sc, p, container_unsupported, err);
	if (ret >= 0)
		ret = pid_field(sc, "runAsUser", p, &s->run_as_user, &s->has_run_as_user, err);
	if (ret >= 0)
		ret = pid_field(sc, "runAsGroup", p, &s->run_as_group, &s->has_run_as_group, err);
	if (ret >= 0)
		ret = podspec_bool(sc, "runAsNonRoot", p, &s->run_as_non_root,
				   &s->has_run_as_non_root, err);
	if (ret >= 0)
		ret = podspec_bool(sc, "readOnlyRootFilesystem", p, &s->read_only_root_filesystem,
				   &s->has_read_only_root_filesystem, err);
	if (ret >= 0)
		ret = podspec_bool(sc, "allowPrivilegeEscalation", p,
				   &s->allow_privilege_escalation,
				   &s->has_allow_privilege_escalation, err);
	if (ret >= 0)
		ret = podspec_bool(sc, "privileged", p, &s->privileged, &s->has_privileged, err);
	if (ret >= 0)
		ret = pcapabilities(sc, p, s, err);
	if (ret >= 0)
		ret = pproc_mount(sc, p, s, err);
	if (ret >= 0)
		ret = pseccomp(sc, p, &s->seccomp, err);
	if (ret >= 0)
		ret = pcheck_escalation(s, p, err);
	return ret;
}

/* Reads spec.securityContext.supplementalGroups. */
static int pgroups(const json_t *sc, const char *path, struct podspec_pod_security *s,
		   struct err *err)
{
	const json_t *l = podspec_member(sc, "supplementalGroups");
	_cleanup_free_ char *p = podspec_join(path, "supplementalGroups");
	size_t i;
	json_t *v;
	int ret;

	if (!l)
		return 0;
	ret = podspec_expect(l, JSON_ARRAY, p, err);
	if (ret < 0)
		return ret;
	s->supplemental_groups = xcalloc(json_array_size(l) + 1, sizeof(int64_t));
	json_array_foreach (l, i, v) {
		_cleanup_free_ char *ip = podspec_index(p, i);

		ret = podspec_expect(v, JSON_INTEGER, ip, err);
		if (ret < 0)
			return ret;
		if (json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
			return err_set(err, EINVAL,
				       "%s: %lld is out of range; must be between 0 and %d", ip,
				       (long long)json_integer_value(v), INT32_MAX);
		s->supplemental_groups[s->n_supplemental_groups++] = json_integer_value(v);
	}
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

/* Reads one sysctl {name, value}; names are unique. */
static int psysctl(const json_t *o, const char *path, struct podspec_pod_security *s,
		   struct err *err)
{
	static const char *const keys[] = { "name", "value", NULL };
	struct podspec_kv *kv = &s->sysctls[s->n_sysctls++];
	int ret = podspec_expect(o, JSON_OBJECT, path, err);

	if (ret >= 0)
		ret = podspec_check_keys(o, path, keys, err);
	if (ret >= 0)
		ret = podspec_string(o, "name", path, true, &kv->name, err);
	if (ret < 0)
		return ret;
	if (!psysctl_name(kv->name))
		return err_set(err, EINVAL,
			       "%s.name: \"%s\" is not a sysctl name: segments of a-z, 0-9, '-' "
			       "and '_' separated by '.' or '/', e.g. net.ipv4.ip_local_port_range",
			       path, kv->name);
	for (size_t i = 0; i + 1 < s->n_sysctls; i++) {
		if (strcmp(s->sysctls[i].name, kv->name) == 0)
			return err_set(err, EINVAL, "%s.name: duplicate sysctl \"%s\"", path,
				       kv->name);
	}
	return podspec_string(o, "value", path, true, &kv->value, err);
}

/* Reads spec.securityContext.sysctls. */
static int psysctls(const json_t *sc, const char *path, struct podspec_pod_security *s,
		    struct err *err)
{
	const json_t *l = podspec_member(sc, "sysctls");
	_cleanup_free_ char *p = podspec_join(path, "sysctls");
	size_t i;
	json_t *o;
	int ret;

	if (!l)
		return 0;
	ret = podspec_expect(l, JSON_ARRAY, p, err);
	if (ret < 0)
		return ret;
	s->sysctls = xcalloc(json_array_size(l) + 1, sizeof(*s->sysctls));
	json_array_foreach (l, i, o) {
		_cleanup_free_ char *ip = podspec_index(p, i);

		ret = psysctl(o, ip, s, err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Reads spec.securityContext. */
static int ppod_context(const json_t *spec, struct podspec_pod_security *s, struct err *err)
{
	static const char p[] = "spec.securityContext";
	const json_t *sc = podspec_member(spec, "securityContext");
	int ret;

	if (!sc)
		return 0;
	ret = podspec_expect(sc, JSON_OBJECT, p, err);
	if (ret >= 0)
		ret = podspec_check_keys(sc, p, pod_keys, err);
	if (ret >= 0)
		ret = pcheck_unsupported(sc, p, pod_unsupported, err);
	if (ret >= 0)
		ret = pid_field(sc, "runAsUser", p, &s->run_as_user, &s->has_run_as_user, err);
	if (ret >= 0)
		ret = pid_field(sc, "runAsGroup", p, &s->run_as_group, &s->has_run_as_group, err);
	if (ret >= 0)
		ret = podspec_bool(sc, "runAsNonRoot", p, &s->run_as_non_root,
				   &s->has_run_as_non_root, err);
	if (ret >= 0)
		ret = pid_field(sc, "fsGroup", p, &s->fs_group, &s->has_fs_group, err);
	if (ret >= 0)
		ret = pgroups(sc, p, s, err);
	if (ret >= 0)
		ret = psysctls(sc, p, s, err);
	if (ret >= 0)
		ret = pseccomp(sc, p, &s->seccomp, err);
	return ret;
}

/* Reads the host namespaces, shareProcessNamespace, hostUsers and spec.securityContext. */
int podspec_read_pod_security(const json_t *spec, struct podspec *ps, struct err *err)
{
	bool given, host_users = true;
	int ret = podspec_bool(spec, "hostNetwork", "spec", &ps->host_network, &given, err);

	if (ret >= 0)
		ret = podspec_bool(spec, "hostPID", "spec", &ps->host_pid, &given, err);
	if (ret >= 0)
		ret = podspec_bool(spec, "hostIPC", "spec", &ps->host_ipc, &given, err);
	if (ret >= 0)
		ret = podspec_bool(spec, "shareProcessNamespace", "spec",
				   &ps->share_process_namespace, &given, err);
	if (ret >= 0)
		ret = podspec_bool(spec, "hostUsers", "spec", &host_users, &given, err);
	if (ret < 0)
		return ret;
	if (!host_users)
		return err_set(err, ENOTSUP,
			       "spec.hostUsers: false (a user namespace for the pod) is not "
			       "supported by kiyot cells; remove it");
	if (ps->share_process_namespace && ps->host_pid)
		return err_set(err, EINVAL,
			       "spec.shareProcessNamespace: cannot be true together with hostPID");
	return ppod_context(spec, &ps->security, err);
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
