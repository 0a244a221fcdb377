/*
 * cli_security.c: a Pod manifest's security settings as the CRI fields the kubelet (v1.26)
 * fills for them (kuberuntime's determineEffectiveSecurityContext, generatePodSandboxLinuxConfig
 * and verifyRunAsNonRoot); see cli_security.h.
 */
#include "cli_security.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "xalloc.h"

/* The kubelet's defaults (pkg/securitycontext in v1.26), sent for every container unless its
 * procMount is Unmasked; the runtime ignores them for a privileged container. */
static const char *const masked_paths[] = {
	"/proc/acpi",	       "/proc/kcore",	   "/proc/keys",
	"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
	"/proc/sched_debug",   "/proc/scsi",	   "/sys/firmware",
};

static const char *const readonly_paths[] = {
	"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
};

static Runtime__V1__Int64Value *int64_value(struct arena *a, int64_t v)
{
	Runtime__V1__Int64Value *m = arena_alloc(a, sizeof(*m));

	runtime__v1__int64_value__init(m);
	m->value = v;
	return m;
}

/* The kubelet's NamespacesForPod: the same for the sandbox and each container. */
static Runtime__V1__NamespaceOption *namespaces(struct arena *a, const struct podspec *p)
{
	Runtime__V1__NamespaceOption *no = arena_alloc(a, sizeof(*no));

	runtime__v1__namespace_option__init(no);
	no->network = p->host_network ? RUNTIME__V1__NAMESPACE_MODE__NODE
				      : RUNTIME__V1__NAMESPACE_MODE__POD;
	no->ipc = p->host_ipc ? RUNTIME__V1__NAMESPACE_MODE__NODE
			      : RUNTIME__V1__NAMESPACE_MODE__POD;
	if (p->host_pid)
		no->pid = RUNTIME__V1__NAMESPACE_MODE__NODE;
	else if (p->share_process_namespace)
		no->pid = RUNTIME__V1__NAMESPACE_MODE__POD;
	else
		no->pid = RUNTIME__V1__NAMESPACE_MODE__CONTAINER;
	return no;
}

/* fsGroup, then supplementalGroups, as the kubelet appends them. */
static int64_t *groups(struct arena *a, const struct podspec_pod_security *ps, size_t *n)
{
	int64_t *g = arena_alloc(a, (ps->n_supplemental_groups + 2) * sizeof(*g));

	*n = 0;
	if (ps->has_fs_group)
		g[(*n)++] = ps->fs_group;
	for (size_t i = 0; i < ps->n_supplemental_groups; i++)
		g[(*n)++] = ps->supplemental_groups[i];
	return g;
}

/* A sysctl name with '/' as its first separator in the dotted form the kernel's sysctl.d
 * uses (the kubelet's NormalizeName): '/' and '.' swap. */
static char *sysctl_name(struct arena *a, const char *name)
{
	char *s = arena_strdup(a, name);
	char *sep = strpbrk(s, "./");

	if (!sep || *sep == '.')
		return s;
	for (char *c = s; *c; c++) {
		if (*c == '/')
			*c = '.';
		else if (*c == '.')
			*c = '/';
	}
	return s;
}

Runtime__V1__LinuxPodSandboxConfig *cli_security_sandbox(struct arena *a, const struct podspec *p)
{
	const struct podspec_pod_security *ps = &p->security;
	Runtime__V1__LinuxPodSandboxConfig *lc = arena_alloc(a, sizeof(*lc));
	Runtime__V1__LinuxSandboxSecurityContext *sc = arena_alloc(a, sizeof(*sc));

	runtime__v1__linux_pod_sandbox_config__init(lc);
	runtime__v1__linux_sandbox_security_context__init(sc);
	lc->security_context = sc;
	sc->namespace_options = namespaces(a, p);
	if (ps->has_run_as_user)
		sc->run_as_user = int64_value(a, ps->run_as_user);
	if (ps->has_run_as_group)
		sc->run_as_group = int64_value(a, ps->run_as_group);
	sc->supplemental_groups = groups(a, ps, &sc->n_supplemental_groups);
	sc->privileged = podspec_has_privileged(p);
	/* every sandbox runs confined, so pod-level profiles may be the least privileged */
	sc->seccomp = arena_alloc(a, sizeof(*sc->seccomp));
	runtime__v1__security_profile__init(sc->seccomp);
	sc->seccomp->profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	sc->seccomp_profile_path = arena_strdup(a, "runtime/default");
#pragma GCC diagnostic pop
	lc->sysctls = arena_alloc(a, (ps->n_sysctls + 1) * sizeof(*lc->sysctls));
	for (size_t i = 0; i < ps->n_sysctls; i++) {
		Runtime__V1__LinuxPodSandboxConfig__SysctlsEntry *e = arena_alloc(a, sizeof(*e));

		runtime__v1__linux_pod_sandbox_config__sysctls_entry__init(e);
		e->key = sysctl_name(a, ps->sysctls[i].name);
		e->value = ps->sysctls[i].value;
		lc->sysctls[lc->n_sysctls++] = e;
	}
	return lc;
}

/* The containers of p in the order they run, by index. */
static const struct podspec_container *nth_container(const struct podspec *p, size_t i)
{
	return i < p->n_init_containers ? &p->init_containers[i]
					: &p->containers[i - p->n_init_containers];
}

int cli_security_check_pod(const struct podspec *p, struct err *err)
{
	for (size_t i = 0; i < p->n_init_containers + p->n_containers; i++) {
		const struct podspec_container *c = nth_container(p, i);
		struct podspec_security s;

		podspec_effective_security(p, c, &s);
		if (s.has_run_as_non_root && s.run_as_non_root && s.has_run_as_user &&
		    s.run_as_user == 0)
			return err_set(err, EINVAL,
				       "container %s: runAsNonRoot is true and runAsUser is 0: the "
				       "container's runAsUser breaks the non-root policy; set "
				       "runAsUser to a non-zero uid",
				       c->name);
	}
	return 0;
}

int cli_security_check_image(const struct podspec *p, const struct podspec_container *c,
			     const Runtime__V1__Image *img, struct err *err)
{
	struct podspec_security s;

	podspec_effective_security(p, c, &s);
	if (!s.has_run_as_non_root || !s.run_as_non_root || s.has_run_as_user)
		return 0;
	if (img && !img->uid && img->username && img->username[0])
		return err_set(err, EINVAL,
			       "container has runAsNonRoot and image has non-numeric user (%s), "
			       "cannot verify user is non-root; set runAsUser to that user's uid",
			       img->username);
	if (!img || !img->uid || img->uid->value == 0)
		return err_set(err, EINVAL,
			       "container has runAsNonRoot and image will run as root (image %s "
			       "sets %s); set runAsUser to a non-zero uid",
			       c->image, img && img->uid ? "USER 0" : "no USER");
	return 0;
}

/* filepath.Join(root, rel) for an absolute root: one '/' between elements, no "." elements,
 * ".." taking back the element before it. */
static char *join_path(struct arena *a, const char *root, const char *rel)
{
	size_t len = strlen(root) + strlen(rel) + 3;
	char *in = arena_alloc(a, len), *out = arena_alloc(a, len);
	size_t o = 0;

	snprintf(in, len, "%s/%s", root, rel);
	for (char *s = in; *s;) {
		size_t n = strcspn(s, "/");

		if (n == 2 && strncmp(s, "..", 2) == 0) {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
		} else if (n > 0 && !(n == 1 && s[0] == '.')) {
			out[o++] = '/';
			memcpy(out + o, s, n);
			o += n;
		}
		s += n + (s[n] == '/');
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return out;
}

/* The container's seccomp profile, and the deprecated path form the kubelet also sends. */
static void seccomp(struct arena *a, const struct podspec_seccomp *s, const char *root,
		    Runtime__V1__LinuxContainerSecurityContext *sc)
{
	Runtime__V1__SecurityProfile *sp = arena_alloc(a, sizeof(*sp));
	const char *path;

	runtime__v1__security_profile__init(sp);
	switch (s->type) {
	case PODSPEC_SECCOMP_RUNTIME_DEFAULT:
		sp->profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault;
		path = "runtime/default";
		break;
	case PODSPEC_SECCOMP_LOCALHOST:
		sp->profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost;
		sp->localhost_ref = join_path(a, root, s->localhost_profile);
		path = NULL;
		break;
	case PODSPEC_SECCOMP_UNCONFINED:
		sp->profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined;
		path = "unconfined";
		break;
	default: /* no profile anywhere: the kubelet's default without --seccomp-default */
		sp->profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined;
		path = "";
		break;
	}
	sc->seccomp = sp;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	if (path) {
		sc->seccomp_profile_path = arena_strdup(a, path);
	} else {
		size_t n = strlen(sp->localhost_ref) + 11;

		sc->seccomp_profile_path = arena_alloc(a, n);
		snprintf(sc->seccomp_profile_path, n, "localhost/%s", sp->localhost_ref);
	}
#pragma GCC diagnostic pop
}

/* A NULL-terminated copy of a list of n strings, in the arena. */
static char **strv(struct arena *a, const char *const *l, size_t n)
{
	char **out = arena_alloc(a, (n + 1) * sizeof(*out));

	for (size_t i = 0; i < n; i++)
		out[i] = arena_strdup(a, l[i]);
	return out;
}

Runtime__V1__LinuxContainerSecurityContext *
cli_security_container(struct arena *a, const struct podspec *p, const struct podspec_container *c,
		       const Runtime__V1__Image *img, const char *seccomp_root)
{
	Runtime__V1__LinuxContainerSecurityContext *sc = arena_alloc(a, sizeof(*sc));
	struct podspec_security s;

	podspec_effective_security(p, c, &s);
	runtime__v1__linux_container_security_context__init(sc);
	if (s.has_capabilities) {
		sc->capabilities = arena_alloc(a, sizeof(*sc->capabilities));
		runtime__v1__capability__init(sc->capabilities);
		sc->capabilities->add_capabilities =
			strv(a, (const char *const *)s.cap_add, s.n_cap_add);
		sc->capabilities->n_add_capabilities = s.n_cap_add;
		sc->capabilities->drop_capabilities =
			strv(a, (const char *const *)s.cap_drop, s.n_cap_drop);
		sc->capabilities->n_drop_capabilities = s.n_cap_drop;
	}
	sc->privileged = s.privileged;
	if (s.has_run_as_user)
		sc->run_as_user = int64_value(a, s.run_as_user);
	else if (img && img->uid)
		sc->run_as_user = int64_value(a, img->uid->value);
	else if (img && img->username && img->username[0])
		sc->run_as_username = arena_strdup(a, img->username);
	else
		sc->run_as_user = int64_value(a, 0); /* an image that says nothing runs as root */
	if (s.has_run_as_group)
		sc->run_as_group = int64_value(a, s.run_as_group);
	sc->readonly_rootfs = s.read_only_root_filesystem;
	sc->namespace_options = namespaces(a, p);
	sc->supplemental_groups = groups(a, &p->security, &sc->n_supplemental_groups);
	sc->no_new_privs = s.has_allow_privilege_escalation && !s.allow_privilege_escalation;
	if (!s.proc_mount_unmasked) {
		sc->masked_paths = strv(a, masked_paths, ARRAY_SIZE(masked_paths));
		sc->n_masked_paths = ARRAY_SIZE(masked_paths);
		sc->readonly_paths = strv(a, readonly_paths, ARRAY_SIZE(readonly_paths));
		sc->n_readonly_paths = ARRAY_SIZE(readonly_paths);
	}
	seccomp(a, &s.seccomp, seccomp_root, sc);
	return sc;
}
