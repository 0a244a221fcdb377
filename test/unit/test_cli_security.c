/* Unit tests for kiyot/cli_security: a manifest's security settings as the CRI fields the
 * kubelet (v1.26) sends, and its runAsNonRoot checks. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cli_security.h"

#include "reader_fixture.h"

#define FIX "test/fixtures/podspec/"
#define POD(spec) "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: " spec "}"

/* The kubelet's default lists, v1.26 (pkg/securitycontext/util.go). */
static const char *const want_masked[] = {
	"/proc/acpi",	       "/proc/kcore",	   "/proc/keys",
	"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
	"/proc/sched_debug",   "/proc/scsi",	   "/sys/firmware",
};
static const char *const want_readonly[] = {
	"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
};

static Runtime__V1__Image image(Runtime__V1__Int64Value *uid, const char *username)
{
	Runtime__V1__Image img = RUNTIME__V1__IMAGE__INIT;

	img.uid = uid;
	img.username = (char *)username;
	return img;
}

static void assert_strv(char **got, size_t n, const char *const *want, size_t n_want)
{
	assert_int_equal(n, n_want);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(got[i], want[i]);
}

static const char *deprecated_path(const Runtime__V1__LinuxContainerSecurityContext *sc)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	return sc->seccomp_profile_path;
#pragma GCC diagnostic pop
}

/* A pod that says nothing: pod network and IPC, a PID namespace per container, a confined
 * sandbox; containers run as the image's user (root when it names none), unconfined by
 * seccomp, with the default masked and read-only paths and no_new_privs off. */
static void test_cli_security__defaults_of_a_pod_without_settings(void **state)
{
	struct podspec *p = rfix_pod(POD("{containers: [{name: c, image: x}]}"));
	struct arena a = ARENA_INIT;
	Runtime__V1__LinuxPodSandboxConfig *lc = cli_security_sandbox(&a, p);
	Runtime__V1__LinuxContainerSecurityContext *sc;
	(void)state;

	assert_non_null(lc->security_context);
	assert_int_equal(lc->security_context->namespace_options->network,
			 RUNTIME__V1__NAMESPACE_MODE__POD);
	assert_int_equal(lc->security_context->namespace_options->ipc,
			 RUNTIME__V1__NAMESPACE_MODE__POD);
	assert_int_equal(lc->security_context->namespace_options->pid,
			 RUNTIME__V1__NAMESPACE_MODE__CONTAINER);
	assert_null(lc->security_context->run_as_user);
	assert_null(lc->security_context->run_as_group);
	assert_int_equal(lc->security_context->n_supplemental_groups, 0);
	assert_false(lc->security_context->privileged);
	assert_int_equal(lc->security_context->seccomp->profile_type,
			 RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault);
	assert_int_equal(lc->n_sysctls, 0);

	sc = cli_security_container(&a, p, &p->containers[0], NULL, CLI_SECCOMP_ROOT);
	assert_null(sc->capabilities);
	assert_false(sc->privileged);
	assert_non_null(sc->run_as_user);
	assert_int_equal(sc->run_as_user->value, 0);
	assert_string_equal(sc->run_as_username, "");
	assert_null(sc->run_as_group);
	assert_false(sc->readonly_rootfs);
	assert_false(sc->no_new_privs);
	assert_int_equal(sc->n_supplemental_groups, 0);
	assert_int_equal(sc->namespace_options->pid, RUNTIME__V1__NAMESPACE_MODE__CONTAINER);
	assert_strv(sc->masked_paths, sc->n_masked_paths, want_masked, 9);
	assert_strv(sc->readonly_paths, sc->n_readonly_paths, want_readonly, 6);
	assert_int_equal(sc->seccomp->profile_type,
			 RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined);
	assert_string_equal(deprecated_path(sc), "");
	arena_release(&a);
	podspec_free(p);
}

/* Every setting of the fixture lands in the CRI field the kubelet fills for it. */
static void test_cli_security__settings_map_to_the_kubelets_fields(void **state)
{
	struct err err = ERR_INIT;
	struct podspec *p = NULL;
	struct arena a = ARENA_INIT;
	Runtime__V1__LinuxPodSandboxConfig *lc;
	Runtime__V1__LinuxContainerSecurityContext *setup, *app, *plain;
	Runtime__V1__Int64Value uid = RUNTIME__V1__INT64_VALUE__INIT;
	Runtime__V1__Image img = image(&uid, NULL);
	const int64_t want_groups[] = { 2000, 4000, 5000 };
	(void)state;

	if (podspec_from_yaml_file(FIX "security.yaml", &p, &err) < 0)
		fail_msg("%s", err.msg);
	uid.value = 1234;
	lc = cli_security_sandbox(&a, p);
	/* hostNetwork, hostIPC and shareProcessNamespace */
	assert_int_equal(lc->security_context->namespace_options->network,
			 RUNTIME__V1__NAMESPACE_MODE__NODE);
	assert_int_equal(lc->security_context->namespace_options->ipc,
			 RUNTIME__V1__NAMESPACE_MODE__NODE);
	assert_int_equal(lc->security_context->namespace_options->pid,
			 RUNTIME__V1__NAMESPACE_MODE__POD);
	assert_int_equal(lc->security_context->run_as_user->value, 1000);
	assert_int_equal(lc->security_context->run_as_group->value, 3000);
	assert_int_equal(lc->security_context->n_supplemental_groups, 3);
	assert_memory_equal(lc->security_context->supplemental_groups, want_groups,
			    sizeof(want_groups));
	assert_true(lc->security_context->privileged); /* the init container is */
	assert_int_equal(lc->security_context->seccomp->profile_type,
			 RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault);
	/* sysctls: a name with '/' separators in its dotted form */
	assert_int_equal(lc->n_sysctls, 2);
	assert_string_equal(lc->sysctls[0]->key, "kernel.shm_rmid_forced");
	assert_string_equal(lc->sysctls[0]->value, "1");
	assert_string_equal(lc->sysctls[1]->key, "net.ipv4.ip_unprivileged_port_start");
	assert_string_equal(lc->sysctls[1]->value, "0");

	/* setup: privileged, procMount Unmasked (no masked or read-only paths), the pod's
	 * user and group, and the pod's Localhost profile below the seccomp root */
	setup = cli_security_container(&a, p, &p->init_containers[0], &img, "/srv/seccomp/");
	assert_true(setup->privileged);
	assert_int_equal(setup->run_as_user->value, 1000);
	assert_int_equal(setup->run_as_group->value, 3000);
	assert_int_equal(setup->n_masked_paths, 0);
	assert_int_equal(setup->n_readonly_paths, 0);
	assert_int_equal(setup->seccomp->profile_type,
			 RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost);
	assert_string_equal(setup->seccomp->localhost_ref, "/srv/seccomp/profiles/pod.json");
	assert_string_equal(deprecated_path(setup), "localhost//srv/seccomp/profiles/pod.json");
	assert_int_equal(setup->n_supplemental_groups, 3);
	assert_memory_equal(setup->supplemental_groups, want_groups, sizeof(want_groups));
	assert_int_equal(setup->namespace_options->pid, RUNTIME__V1__NAMESPACE_MODE__POD);
	assert_int_equal(setup->namespace_options->network, RUNTIME__V1__NAMESPACE_MODE__NODE);

	/* app: its own user, read-only root, no privilege escalation, capabilities as given,
	 * RuntimeDefault over the pod's profile, the default paths for procMount Default */
	app = cli_security_container(&a, p, &p->containers[0], &img, CLI_SECCOMP_ROOT);
	assert_int_equal(app->run_as_user->value, 1001);
	assert_int_equal(app->run_as_group->value, 3000);
	assert_true(app->readonly_rootfs);
	assert_true(app->no_new_privs);
	assert_false(app->privileged);
	assert_non_null(app->capabilities);
	assert_int_equal(app->capabilities->n_add_capabilities, 1);
	assert_string_equal(app->capabilities->add_capabilities[0], "NET_BIND_SERVICE");
	assert_int_equal(app->capabilities->n_drop_capabilities, 1);
	assert_string_equal(app->capabilities->drop_capabilities[0], "ALL");
	assert_strv(app->masked_paths, app->n_masked_paths, want_masked, 9);
	assert_strv(app->readonly_paths, app->n_readonly_paths, want_readonly, 6);
	assert_int_equal(app->seccomp->profile_type,
			 RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault);
	assert_string_equal(deprecated_path(app), "runtime/default");

	/* plain: nothing of its own; the kubelet's root for the pod's profile */
	plain = cli_security_container(&a, p, &p->containers[1], &img, CLI_SECCOMP_ROOT);
	assert_int_equal(plain->run_as_user->value, 1000);
	assert_false(plain->readonly_rootfs || plain->no_new_privs || plain->privileged);
	assert_null(plain->capabilities);
	assert_string_equal(plain->seccomp->localhost_ref,
			    "/var/lib/kubelet/seccomp/profiles/pod.json");
	arena_release(&a);
	podspec_free(p);
}

/* Without a runAsUser the container runs as the image's user: its uid when numeric, its
 * name otherwise; a runAsGroup alone then goes with that user. */
static void test_cli_security__image_user_fills_an_unset_run_as_user(void **state)
{
	struct podspec *p = rfix_pod(POD("{containers: [{name: c, image: x, securityContext: "
					 "{runAsGroup: 50}}, {name: d, image: x, securityContext: "
					 "{runAsUser: 7, allowPrivilegeEscalation: true}}]}"));
	struct arena a = ARENA_INIT;
	Runtime__V1__Int64Value uid = RUNTIME__V1__INT64_VALUE__INIT;
	Runtime__V1__Image numeric = image(&uid, NULL), named = image(NULL, "www-data");
	Runtime__V1__LinuxContainerSecurityContext *sc;
	(void)state;

	uid.value = 1000;
	sc = cli_security_container(&a, p, &p->containers[0], &numeric, CLI_SECCOMP_ROOT);
	assert_int_equal(sc->run_as_user->value, 1000);
	assert_string_equal(sc->run_as_username, "");
	assert_int_equal(sc->run_as_group->value, 50);
	sc = cli_security_container(&a, p, &p->containers[0], &named, CLI_SECCOMP_ROOT);
	assert_null(sc->run_as_user);
	assert_string_equal(sc->run_as_username, "www-data");
	assert_int_equal(sc->run_as_group->value, 50);
	/* a runAsUser wins over the image; allowPrivilegeEscalation true keeps no_new_privs off */
	sc = cli_security_container(&a, p, &p->containers[1], &named, CLI_SECCOMP_ROOT);
	assert_int_equal(sc->run_as_user->value, 7);
	assert_string_equal(sc->run_as_username, "");
	assert_false(sc->no_new_privs);
	arena_release(&a);
	podspec_free(p);
}

/* hostPID puts the sandbox and every container in the node's PID namespace. */
static void test_cli_security__host_pid_is_node_for_sandbox_and_containers(void **state)
{
	struct podspec *p = rfix_pod(POD("{hostPID: true, containers: [{name: c, image: x}]}"));
	struct arena a = ARENA_INIT;
	Runtime__V1__LinuxPodSandboxConfig *lc = cli_security_sandbox(&a, p);
	Runtime__V1__LinuxContainerSecurityContext *sc =
		cli_security_container(&a, p, &p->containers[0], NULL, CLI_SECCOMP_ROOT);
	(void)state;

	assert_int_equal(lc->security_context->namespace_options->pid,
			 RUNTIME__V1__NAMESPACE_MODE__NODE);
	assert_int_equal(sc->namespace_options->pid, RUNTIME__V1__NAMESPACE_MODE__NODE);
	assert_int_equal(sc->namespace_options->network, RUNTIME__V1__NAMESPACE_MODE__POD);
	arena_release(&a);
	podspec_free(p);
}

/* runAsNonRoot: runAsUser 0 is refused before anything runs; otherwise the image decides: a
 * root or user-less image is refused, a named user cannot be verified, a uid above 0 runs;
 * a runAsUser above 0 needs no image check, and runAsNonRoot false none at all. */
static void test_cli_security__run_as_non_root_checks(void **state)
{
	struct podspec *p =
		rfix_pod(POD("{securityContext: {runAsNonRoot: true}, initContainers: "
			     "[{name: i, image: x, securityContext: {runAsUser: 0}}], "
			     "containers: [{name: c, image: busybox}, {name: u, image: x, "
			     "securityContext: {runAsUser: 1000}}, {name: r, image: x, "
			     "securityContext: {runAsNonRoot: false}}]}"));
	struct podspec *ok = rfix_pod(POD("{containers: [{name: c, image: x, securityContext: "
					  "{runAsNonRoot: true, runAsUser: 1}}]}"));
	Runtime__V1__Int64Value root = RUNTIME__V1__INT64_VALUE__INIT, app = root;
	Runtime__V1__Image img_root = image(&root, NULL), img_app = image(&app, NULL);
	Runtime__V1__Image img_none = image(NULL, ""), img_named = image(NULL, "app");
	const struct podspec_container *c = &p->containers[0];
	struct err err = ERR_INIT;
	(void)state;

	app.value = 1000;
	assert_int_equal(cli_security_check_pod(p, &err), -EINVAL);
	assert_string_equal(err.msg, "container i: runAsNonRoot is true and runAsUser is 0: the "
				     "container's runAsUser breaks the non-root policy; set "
				     "runAsUser to a non-zero uid");
	assert_int_equal(cli_security_check_pod(ok, &err), 0);

	assert_int_equal(cli_security_check_image(p, c, &img_root, &err), -EINVAL);
	assert_string_equal(err.msg,
			    "container has runAsNonRoot and image will run as root "
			    "(image busybox sets USER 0); set runAsUser to a non-zero uid");
	assert_int_equal(cli_security_check_image(p, c, &img_none, &err), -EINVAL);
	assert_string_equal(err.msg, "container has runAsNonRoot and image will run as root "
				     "(image busybox sets no USER); set runAsUser to a non-zero "
				     "uid");
	assert_int_equal(cli_security_check_image(p, c, NULL, &err), -EINVAL);
	assert_int_equal(cli_security_check_image(p, c, &img_named, &err), -EINVAL);
	assert_string_equal(err.msg, "container has runAsNonRoot and image has non-numeric user "
				     "(app), cannot verify user is non-root; set runAsUser to "
				     "that user's uid");
	assert_int_equal(cli_security_check_image(p, c, &img_app, &err), 0);
	assert_int_equal(cli_security_check_image(p, &p->containers[1], &img_root, &err), 0);
	assert_int_equal(cli_security_check_image(p, &p->containers[2], &img_root, &err), 0);
	podspec_free(p);
	podspec_free(ok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cli_security__defaults_of_a_pod_without_settings),
		cmocka_unit_test(test_cli_security__settings_map_to_the_kubelets_fields),
		cmocka_unit_test(test_cli_security__image_user_fills_an_unset_run_as_user),
		cmocka_unit_test(test_cli_security__host_pid_is_node_for_sandbox_and_containers),
		cmocka_unit_test(test_cli_security__run_as_non_root_checks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
