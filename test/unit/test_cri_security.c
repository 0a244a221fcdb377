/* Tests of the CRI security context checks and of the unit and pod they become. */
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

#include "cri/cri_security.h"
#include "arena.h"
#include "fsutil.h"
#include "xalloc.h"

static Runtime__V1__LinuxPodSandboxConfig__SysctlsEntry *entry(const char *k, const char *v)
{
	Runtime__V1__LinuxPodSandboxConfig__SysctlsEntry *e = xcalloc(1, sizeof(*e));

	runtime__v1__linux_pod_sandbox_config__sysctls_entry__init(e);
	e->key = (char *)k;
	e->value = (char *)v;
	return e;
}

struct sysctl_case {
	const char *name, *value;
	Runtime__V1__NamespaceMode net, ipc;
	const char *want_err; /* NULL: accepted */
};

static const struct sysctl_case sysctl_cases[] = {
	{ "net.ipv4.ip_unprivileged_port_start", "0", 0, 0, NULL },
	{ "kernel.shm_rmid_forced", "1", 0, 0, NULL },
	{ "kernel.msgmax", "8192", 0, 0, NULL },
	{ "fs.mqueue.msg_max", "20", 0, 0, NULL },
	{ "kernel.sem", "250 32000 32 128", 0, 0, NULL },
	{ "kernel.panic", "10", 0, 0, "kernel.panic is not namespaced" },
	{ "vm.swappiness", "1", 0, 0, "vm.swappiness is not namespaced" },
	{ "net.core.somaxconn", "1024", RUNTIME__V1__NAMESPACE_MODE__NODE, 0, "host's network" },
	{ "kernel.shmmax", "1", 0, RUNTIME__V1__NAMESPACE_MODE__NODE, "host's IPC" },
	{ "net/ipv4/ip_forward", "1", 0, 0, "is not a sysctl name" },
	{ "net.ipv4.ip_forward", "1\nkernel.panic=1", 0, 0, "newline" },
};

/* Only namespaced sysctls, and none that would change what a host-namespace pod shares. */
static void test_cri_security__sandbox_sysctls(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(sysctl_cases); i++) {
		const struct sysctl_case *c = &sysctl_cases[i];
		Runtime__V1__PodSandboxConfig cfg = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
		Runtime__V1__LinuxPodSandboxConfig lx = RUNTIME__V1__LINUX_POD_SANDBOX_CONFIG__INIT;
		Runtime__V1__LinuxSandboxSecurityContext sc =
			RUNTIME__V1__LINUX_SANDBOX_SECURITY_CONTEXT__INIT;
		Runtime__V1__NamespaceOption no = RUNTIME__V1__NAMESPACE_OPTION__INIT;
		Runtime__V1__LinuxPodSandboxConfig__SysctlsEntry *e = entry(c->name, c->value);
		struct err err = ERR_INIT;
		int ret;

		no.network = c->net;
		no.ipc = c->ipc;
		sc.namespace_options = &no;
		lx.security_context = &sc;
		lx.sysctls = (void *)&e;
		lx.n_sysctls = 1;
		cfg.linux = &lx;
		ret = cri_security_check_sandbox(&cfg, &err);
		if (!c->want_err) {
			assert_int_equal(ret, 0);
		} else {
			assert_int_equal(ret, -EINVAL);
			if (!strstr(err.msg, c->want_err))
				fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.msg, c->want_err);
		}
		free(e);
	}
}

/* run_as_group needs a user; seccomp profiles kiyot knows; Localhost read from the node. */
static void test_cri_security__container_checks(void **state)
{
	Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	Runtime__V1__LinuxContainerConfig lx = RUNTIME__V1__LINUX_CONTAINER_CONFIG__INIT;
	Runtime__V1__LinuxContainerSecurityContext sc =
		RUNTIME__V1__LINUX_CONTAINER_SECURITY_CONTEXT__INIT;
	Runtime__V1__Int64Value gid = RUNTIME__V1__INT64_VALUE__INIT;
	Runtime__V1__Int64Value uid = RUNTIME__V1__INT64_VALUE__INIT;
	Runtime__V1__SecurityProfile sp = RUNTIME__V1__SECURITY_PROFILE__INIT;
	char path[] = "/tmp/seccomp-profile-XXXXXX";
	const char *text = "{\"defaultAction\":\"SCMP_ACT_ALLOW\"}";
	struct err err = ERR_INIT;
	char *profile = NULL;
	int fd;

	(void)state;
	cfg.linux = &lx;
	lx.security_context = &sc;
	gid.value = 5;
	sc.run_as_group = &gid;
	assert_int_equal(cri_security_check_container(&cfg, &profile, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "run_as_group"));
	free(profile);
	uid.value = 1000;
	sc.run_as_user = &uid;
	assert_int_equal(cri_security_check_container(&cfg, &profile, &err), 0);
	assert_string_equal(profile, "");
	free(profile);

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	sc.seccomp_profile_path = "/etc/some-profile.json";
	assert_int_equal(cri_security_check_container(&cfg, &profile, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "localhost/"));
	free(profile);
	sc.seccomp_profile_path = "docker/default";
	assert_int_equal(cri_security_check_container(&cfg, &profile, &err), 0);
	free(profile);
	sc.seccomp_profile_path = "localhost/relative.json";
	assert_int_equal(cri_security_check_container(&cfg, &profile, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "absolute"));
	free(profile);
	sc.seccomp_profile_path = "";
#pragma GCC diagnostic pop

	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	sp.profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost;
	sp.localhost_ref = path;
	sc.seccomp = &sp;
	assert_int_equal(cri_security_check_container(&cfg, &profile, &err), 0);
	assert_string_equal(profile, text);
	free(profile);
	unlink(path);
	assert_int_equal(cri_security_check_container(&cfg, &profile, &err), -ENOENT);
	assert_non_null(strstr(err.msg, path));
	free(profile);
}

/* The unit carries the context; RuntimeDefault and Localhost become the agent's kinds. */
static void test_cri_security__unit_mapping(void **state)
{
	Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	Runtime__V1__LinuxContainerConfig lx = RUNTIME__V1__LINUX_CONTAINER_CONFIG__INIT;
	Runtime__V1__LinuxContainerSecurityContext sc =
		RUNTIME__V1__LINUX_CONTAINER_SECURITY_CONTEXT__INIT;
	Runtime__V1__Int64Value uid = RUNTIME__V1__INT64_VALUE__INIT;
	Runtime__V1__Int64Value gid = RUNTIME__V1__INT64_VALUE__INIT;
	Runtime__V1__SecurityProfile sp = RUNTIME__V1__SECURITY_PROFILE__INIT;
	Runtime__V1__NamespaceOption no = RUNTIME__V1__NAMESPACE_OPTION__INIT;
	Kiyot__Cell__V1__Unit u = KIYOT__CELL__V1__UNIT__INIT;
	int64_t groups[] = { 7, 8 };
	struct container c = { .config = &cfg, .seccomp_profile = (char *)"{}" };
	struct arena arena = ARENA_INIT, *a = &arena;

	(void)state;
	cfg.linux = &lx;
	cri_security_unit(a, &c, &u);
	assert_string_equal(u.user, "");
	assert_int_equal(u.pid_namespace, KIYOT__CELL__V1__NAMESPACE_MODE__POD);
	assert_null(u.seccomp);

	lx.security_context = &sc;
	uid.value = 1001;
	gid.value = 2002;
	sc.run_as_user = &uid;
	sc.run_as_group = &gid;
	sc.supplemental_groups = groups;
	sc.n_supplemental_groups = 2;
	sc.readonly_rootfs = 1;
	sc.no_new_privs = 1;
	no.pid = RUNTIME__V1__NAMESPACE_MODE__CONTAINER;
	sc.namespace_options = &no;
	sc.seccomp = &sp; /* RuntimeDefault is the enum's zero */
	cri_security_unit(a, &c, &u);
	assert_string_equal(u.user, "1001:2002");
	assert_int_equal(u.n_supplemental_groups, 2);
	assert_int_equal(u.supplemental_groups[1], 8);
	assert_true(u.readonly_rootfs && u.no_new_privs);
	assert_int_equal(u.pid_namespace, KIYOT__CELL__V1__NAMESPACE_MODE__CONTAINER);
	assert_int_equal(u.seccomp->kind, KIYOT__CELL__V1__SECCOMP__KIND__RUNTIME_DEFAULT);

	sc.run_as_username = "www-data";
	sp.profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost;
	cri_security_unit(a, &c, &u);
	assert_string_equal(u.user, "www-data:2002");
	assert_int_equal(u.seccomp->kind, KIYOT__CELL__V1__SECCOMP__KIND__LOCALHOST);
	assert_string_equal(u.seccomp->profile, "{}");
	arena_release(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cri_security__sandbox_sysctls),
		cmocka_unit_test(test_cri_security__container_checks),
		cmocka_unit_test(test_cri_security__unit_mapping),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
