/* Unit tests for kiyot/podspec: Pod manifests into struct podspec, with the API server's rules. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kube/podspec.h"
#include "xalloc.h"
#include "yaml.h"

#include "reader_fixture.h"

#define FIX "test/fixtures/podspec/"

/* Every field of the full fixture arrives in the structure, defaults applied. */
static void test_podspec__full_manifest(void **state)
{
	struct err err = ERR_INIT;
	struct podspec *p = NULL;
	const struct podspec_container *app, *init;
	(void)state;

	if (podspec_from_yaml_file(FIX "full.yaml", &p, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(p->name, "web");
	assert_string_equal(p->namespace, "shop");
	assert_string_equal(p->uid, "6f1c2a4e-0000-4000-8000-000000000001");
	assert_string_equal(podspec_label(p, "example.com/tier"), "1");
	assert_string_equal(podspec_label(p, "app"), "web");
	assert_null(podspec_label(p, "missing"));
	assert_string_equal(podspec_annotation(p, "pod.elotl.co/instance-type"), "t3*");
	assert_int_equal(p->restart_policy, PODSPEC_RESTART_ON_FAILURE);
	assert_string_equal(podspec_restart_name(p->restart_policy), "OnFailure");
	assert_string_equal(p->hostname, "web-0");
	assert_int_equal(p->termination_grace_period_seconds, 5);

	assert_int_equal(p->n_volumes, 3);
	assert_false(p->volumes[0].memory);
	assert_true(p->volumes[1].memory);
	assert_int_equal(p->volumes[1].size_limit_bytes, 64 << 20);
	assert_string_equal(p->volumes[2].name, "defaulted");

	assert_int_equal(p->n_init_containers, 1);
	init = &p->init_containers[0];
	assert_string_equal(init->name, "setup");
	assert_int_equal(init->n_command, 3);
	assert_string_equal(init->command[2], "echo ready > /scratch/state");
	assert_null(init->command[3]);
	assert_null(init->args);
	assert_int_equal(init->requests.cpu_milli, 1000);
	assert_int_equal(init->requests.memory_bytes, 1 << 30);
	assert_false(init->limits.has_cpu);
	assert_int_equal(init->pull_policy, PODSPEC_PULL_IF_NOT_PRESENT);

	assert_int_equal(p->n_containers, 2);
	app = &p->containers[0];
	assert_string_equal(app->image, "registry.local:5000/shop/web");
	assert_int_equal(app->pull_policy, PODSPEC_PULL_ALWAYS);
	assert_string_equal(app->args[1], "8080");
	assert_string_equal(app->working_dir, "/srv");
	assert_int_equal(app->n_env, 2);
	assert_string_equal(app->env[0].name, "MODE");
	assert_string_equal(app->env[0].value, "production");
	assert_string_equal(app->env[1].value, "");
	assert_int_equal(app->n_ports, 2);
	assert_int_equal(app->ports[0].container_port, 8080);
	assert_string_equal(app->ports[0].protocol, "TCP");
	assert_string_equal(app->ports[0].name, "http");
	assert_string_equal(app->ports[1].protocol, "UDP");
	assert_null(app->ports[1].name);
	assert_int_equal(app->requests.cpu_milli, 250);
	assert_int_equal(app->requests.memory_bytes, 256 << 20);
	assert_int_equal(app->limits.cpu_milli, 500);
	assert_int_equal(app->limits.memory_bytes, 400 << 20);
	assert_true(app->requests.has_gpus);
	assert_int_equal(app->requests.gpus, 1);
	assert_int_equal(app->limits.gpus, 1);
	assert_int_equal(app->n_mounts, 2);
	assert_true(app->mounts[0].read_only);
	assert_false(app->mounts[1].read_only);
	assert_string_equal(app->mounts[1].mount_path, "/dev/shm");
	assert_true(app->security.has_run_as_user);
	assert_int_equal(app->security.run_as_user, 1000);
	assert_int_equal(app->security.run_as_group, 3000);
	assert_false(app->security.has_run_as_non_root);
	assert_false(p->host_network);
	assert_int_equal(p->containers[1].pull_policy, PODSPEC_PULL_NEVER);
	assert_string_equal(podspec_pull_name(p->containers[1].pull_policy), "Never");
	podspec_free(p);
}

/* A JSON manifest with only the required fields gets the API server's defaults. */
static void test_podspec__minimal_json_gets_defaults(void **state)
{
	struct err err = ERR_INIT;
	struct podspec *p = NULL;
	(void)state;

	if (podspec_from_yaml_file(FIX "minimal.json", &p, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(p->namespace, "default");
	assert_null(p->uid);
	assert_null(p->hostname);
	assert_int_equal(p->restart_policy, PODSPEC_RESTART_ALWAYS);
	assert_int_equal(p->termination_grace_period_seconds, 30);
	assert_int_equal(p->n_init_containers, 0);
	assert_int_equal(p->containers[0].pull_policy, PODSPEC_PULL_ALWAYS);
	assert_false(p->containers[0].requests.has_cpu);
	assert_null(p->containers[0].command);
	podspec_free(p);
}

/* File errors carry the path, then the field. */
static void test_podspec__file_errors_name_the_file(void **state)
{
	struct err err = ERR_INIT;
	struct podspec *p = NULL;
	(void)state;

	assert_int_equal(podspec_from_yaml_file(FIX "configmap-volume.yaml", &p, &err), -ENOTSUP);
	assert_string_equal(err.msg,
			    FIX "configmap-volume.yaml: spec.volumes[0]: volume \"config\" "
				"is a configMap volume; only emptyDir volumes are supported by "
				"kiyot run");
	assert_null(p);
	assert_true(podspec_from_yaml_file(FIX "two-pods.yaml", &p, &err) < 0);
	assert_string_equal(err.msg, FIX "two-pods.yaml: line 5, column 1: a second YAML document "
					 "starts here; give one document per file");
	assert_true(podspec_from_yaml_file(FIX "absent.yaml", &p, &err) < 0);
	assert_non_null(strstr(err.msg, "absent.yaml"));
	/* restartPolicy on a container: only Always, only on an init container */
	assert_int_equal(podspec_from_yaml_file(FIX "restart-policy-on-app.yaml", &p, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "spec.containers[0].restartPolicy: \"Always\" is not "
					"allowed"));
	assert_null(p);
}

/* The default pull policy follows the image tag, as the API server's defaulting does. */
static void test_podspec__pull_policy_defaults_from_tag(void **state)
{
	static const struct {
		const char *image;
		enum podspec_pull want;
	} cases[] = {
		{ "busybox", PODSPEC_PULL_ALWAYS },
		{ "busybox:latest", PODSPEC_PULL_ALWAYS },
		{ "busybox:1.36", PODSPEC_PULL_IF_NOT_PRESENT },
		{ "host:5000/busybox", PODSPEC_PULL_ALWAYS },
		{ "host:5000/busybox:v1", PODSPEC_PULL_IF_NOT_PRESENT },
		{ "busybox@sha256:abcd", PODSPEC_PULL_IF_NOT_PRESENT },
		{ "busybox:latest@sha256:abcd", PODSPEC_PULL_ALWAYS },
		{ "busybox:latest2", PODSPEC_PULL_IF_NOT_PRESENT },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *j = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1",
				      "kind", "Pod", "metadata", "name", "p", "spec", "containers",
				      "name", "c", "image", cases[i].image);
		struct err err = ERR_INIT;
		struct podspec *p = NULL;

		if (podspec_from_json(j, &p, &err) < 0)
			fail_msg("%s: %s", cases[i].image, err.msg);
		if (p->containers[0].pull_policy != cases[i].want)
			fail_msg("%s: got %s", cases[i].image,
				 podspec_pull_name(p->containers[0].pull_policy));
		podspec_free(p);
		json_decref(j);
	}
}

/* Quantities may be written as YAML numbers; a limit alone also sets the request. */
static void test_podspec__numeric_quantities_and_request_defaults(void **state)
{
	static const char text[] = "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {"
				   "containers: [{name: c, image: x, resources: {limits: "
				   "{cpu: 2, memory: 1e9}, requests: {cpu: 0.1}}}]}}";
	struct err err = ERR_INIT;
	struct podspec *p = NULL;
	json_t *j = NULL;
	(void)state;

	assert_int_equal(yaml_to_json(text, strlen(text), &j, &err), 0);
	if (podspec_from_json(j, &p, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(p->containers[0].requests.cpu_milli, 100);
	assert_int_equal(p->containers[0].limits.cpu_milli, 2000);
	assert_int_equal(p->containers[0].limits.memory_bytes, 1000000000);
	assert_true(p->containers[0].requests.has_memory);
	assert_int_equal(p->containers[0].requests.memory_bytes, 1000000000);
	podspec_free(p);
	json_decref(j);
}

/* Where the pod may run: nodeSelector and the required node affinity's terms arrive as
 * written (preferred affinity binds nothing and is not kept). */
static void test_podspec__node_selector_and_required_affinity(void **state)
{
	static const char text[] =
		"{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {"
		"nodeSelector: {kubernetes.io/arch: arm64, disk: ssd}, affinity: {nodeAffinity: {"
		"requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: ["
		"{matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64, "
		"arm64]}, {key: zone, operator: Exists}]}, {matchFields: [{key: metadata.name, "
		"operator: In, values: [n]}]}]}, preferredDuringSchedulingIgnoredDuringExecution: "
		"[{weight: 1, preference: {matchExpressions: [{key: a, operator: In, values: "
		"[b]}]}}]"
		"}}, containers: [{name: c, image: x}]}}";
	struct err err = ERR_INIT;
	struct podspec *p = NULL;
	json_t *j = NULL;
	(void)state;

	assert_int_equal(yaml_to_json(text, strlen(text), &j, &err), 0);
	if (podspec_from_json(j, &p, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(podspec_node_selector(p, "kubernetes.io/arch"), "arm64");
	assert_string_equal(podspec_node_selector(p, "disk"), "ssd");
	assert_null(podspec_node_selector(p, "zone"));
	assert_int_equal(p->n_node_terms, 2);
	assert_int_equal(p->node_terms[0].n_reqs, 2);
	assert_string_equal(p->node_terms[0].reqs[0].key, "kubernetes.io/arch");
	assert_string_equal(p->node_terms[0].reqs[0].op, "In");
	assert_int_equal(p->node_terms[0].reqs[0].n_values, 2);
	assert_string_equal(p->node_terms[0].reqs[0].values[1], "arm64");
	assert_string_equal(p->node_terms[0].reqs[1].op, "Exists");
	assert_int_equal(p->node_terms[1].n_reqs, 0);
	podspec_free(p);
	json_decref(j);
}

/* Every security setting of the pod and its containers arrives as written. */
static void test_podspec__security_settings(void **state)
{
	struct err err = ERR_INIT;
	struct podspec *p = NULL;
	const struct podspec_pod_security *ps;
	const struct podspec_security *setup, *app, *plain;
	(void)state;

	if (podspec_from_yaml_file(FIX "security.yaml", &p, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(p->host_network);
	assert_false(p->host_pid);
	assert_true(p->host_ipc);
	assert_true(p->share_process_namespace);
	ps = &p->security;
	assert_true(ps->has_run_as_user && ps->has_run_as_group && ps->has_run_as_non_root);
	assert_int_equal(ps->run_as_user, 1000);
	assert_int_equal(ps->run_as_group, 3000);
	assert_true(ps->run_as_non_root);
	assert_true(ps->has_fs_group);
	assert_int_equal(ps->fs_group, 2000);
	assert_int_equal(ps->n_supplemental_groups, 2);
	assert_int_equal(ps->supplemental_groups[1], 5000);
	assert_int_equal(ps->n_sysctls, 2);
	assert_string_equal(ps->sysctls[0].name, "kernel.shm_rmid_forced");
	assert_string_equal(ps->sysctls[0].value, "1");
	assert_string_equal(ps->sysctls[1].name, "net/ipv4/ip_unprivileged_port_start");
	assert_int_equal(ps->seccomp.type, PODSPEC_SECCOMP_LOCALHOST);
	assert_string_equal(ps->seccomp.localhost_profile, "profiles/pod.json");

	setup = &p->init_containers[0].security;
	assert_true(setup->has_privileged && setup->privileged);
	assert_true(setup->has_proc_mount && setup->proc_mount_unmasked);
	assert_false(setup->has_run_as_user);
	assert_int_equal(setup->seccomp.type, PODSPEC_SECCOMP_UNSET);

	app = &p->containers[0].security;
	assert_int_equal(app->run_as_user, 1001);
	assert_true(app->has_run_as_non_root);
	assert_false(app->run_as_non_root);
	assert_true(app->has_read_only_root_filesystem && app->read_only_root_filesystem);
	assert_true(app->has_allow_privilege_escalation);
	assert_false(app->allow_privilege_escalation);
	assert_true(app->has_privileged);
	assert_false(app->privileged);
	assert_true(app->has_capabilities);
	assert_int_equal(app->n_cap_add, 1);
	assert_string_equal(app->cap_add[0], "NET_BIND_SERVICE");
	assert_null(app->cap_add[1]);
	assert_int_equal(app->n_cap_drop, 1);
	assert_string_equal(app->cap_drop[0], "ALL");
	assert_true(app->has_proc_mount);
	assert_false(app->proc_mount_unmasked);
	assert_int_equal(app->seccomp.type, PODSPEC_SECCOMP_RUNTIME_DEFAULT);
	assert_null(app->seccomp.localhost_profile);

	plain = &p->containers[1].security;
	assert_false(plain->has_capabilities || plain->has_privileged || plain->has_proc_mount);
	assert_true(podspec_has_privileged(p));
	podspec_free(p);
}

/* The effective context: the pod's user, group and runAsNonRoot unless the container sets its
 * own, the container's seccomp profile else the pod's, everything else the container's. */
static void test_podspec__effective_security_merges_like_the_kubelet(void **state)
{
	struct err err = ERR_INIT;
	struct podspec *p = NULL;
	struct podspec_security s;
	(void)state;

	if (podspec_from_yaml_file(FIX "security.yaml", &p, &err) < 0)
		fail_msg("%s", err.msg);
	/* app overrides the user and runAsNonRoot, keeps the pod's group */
	podspec_effective_security(p, &p->containers[0], &s);
	assert_int_equal(s.run_as_user, 1001);
	assert_true(s.has_run_as_group);
	assert_int_equal(s.run_as_group, 3000);
	assert_true(s.has_run_as_non_root);
	assert_false(s.run_as_non_root);
	assert_int_equal(s.seccomp.type, PODSPEC_SECCOMP_RUNTIME_DEFAULT);
	assert_true(s.read_only_root_filesystem);
	/* plain takes everything the pod gives and nothing else */
	podspec_effective_security(p, &p->containers[1], &s);
	assert_true(s.has_run_as_user);
	assert_int_equal(s.run_as_user, 1000);
	assert_int_equal(s.run_as_group, 3000);
	assert_true(s.run_as_non_root);
	assert_int_equal(s.seccomp.type, PODSPEC_SECCOMP_LOCALHOST);
	assert_string_equal(s.seccomp.localhost_profile, "profiles/pod.json");
	assert_false(s.has_read_only_root_filesystem || s.has_allow_privilege_escalation ||
		     s.has_capabilities || s.privileged);
	podspec_free(p);
}

#define POD(spec) "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: " spec "}"
#define ONE(c) POD("{containers: [{name: c, image: x, " c "}]}")

struct pbad {
	const char *yaml;
	int code;
	const char *msg;
};

/* Checks that each manifest is refused with its code and message; names every one that is
 * not. */
static void check_refused(const struct pbad *cases, size_t n)
{
	size_t wrong = 0;

	for (size_t i = 0; i < n; i++) {
		struct err err = ERR_INIT;
		struct podspec *p = NULL;
		int ret = rfix_pod_read(cases[i].yaml, &p, &err);

		if (ret >= 0)
			fail_msg("accepted %s", cases[i].yaml);
		assert_null(p);
		if (strcmp(err.msg, cases[i].msg) != 0 || -ret != cases[i].code) {
			print_error("%s:\n got  %d %s\n want %d %s\n", cases[i].yaml, -ret, err.msg,
				    cases[i].code, cases[i].msg);
			wrong++;
		}
	}
	if (wrong)
		fail_msg("%zu of %zu refused otherwise", wrong, n);
}

/* Each invalid manifest is refused with the JSON path of the field at fault and the reason. */
static void test_podspec__errors_name_the_field(void **state)
{
	static const struct pbad cases[] = {
		{ "[1]", EINVAL, "manifest: must be a mapping (a Pod object), not a list" },
		{ "{kind: Pod}", EINVAL, "apiVersion: required" },
		{ "{apiVersion: apps/v1, kind: Pod}", EINVAL,
		  "apiVersion: \"apps/v1\" is not supported; kiyot run takes apiVersion: v1, kind: "
		  "Pod" },
		{ "{apiVersion: v1, kind: Deployment}", EINVAL,
		  "kind: \"Deployment\" is not supported; kiyot run takes a Pod (apiVersion: v1, "
		  "kind: Pod)" },
		{ "{apiVersion: v1, kind: Pod}", EINVAL, "metadata: required (with a name)" },
		{ "{apiVersion: v1, kind: Pod, metadata: {}}", EINVAL, "metadata.name: required" },
		{ "{apiVersion: v1, kind: Pod, metadata: {name: Web}}", EINVAL,
		  "metadata.name: \"Web\" is not a valid pod name: use at most 253 characters of "
		  "a-z, 0-9, '-' and '.', starting and ending with a letter or digit" },
		{ "{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: a.b}}", EINVAL,
		  "metadata.namespace: \"a.b\" is not a valid name: use at most 63 characters of "
		  "a-z, 0-9 and '-', starting and ending with a letter or digit" },
		{ "{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {app: 1}}}", EINVAL,
		  "metadata.labels.app: must be a string (quote numbers and booleans in YAML, e.g. "
		  "\"8080\"), not 1" },
		{ "{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {app: a b}}}", EINVAL,
		  "metadata.labels.app: \"a b\" is not a valid label value: use at most 63 "
		  "characters of a-z, A-Z, 0-9, '-', '_' and '.'" },
		{ "{apiVersion: v1, kind: Pod, metadata: {name: p, annotations: {-x: y}}}", EINVAL,
		  "metadata.annotations.-x: invalid key: use an optional DNS prefix and '/', then "
		  "at "
		  "most 63 characters of a-z, A-Z, 0-9, '-', '_' and '.'" },
		{ "{apiVersion: v1, kind: Pod, metadata: {name: p}}", EINVAL,
		  "spec: required (with containers)" },
		{ POD("{}"), EINVAL,
		  "spec.containers: required (a pod needs at least one container)" },
		{ POD("{containers: []}"), EINVAL,
		  "spec.containers: required (a pod needs at least one container)" },
		{ POD("{containers: {name: c}}"), EINVAL,
		  "spec.containers: must be a list of mappings such as {name: app, image: "
		  "busybox}, "
		  "not a mapping" },
		{ POD("{containers: [{name: a, image: x}, {name: b}]}"), EINVAL,
		  "spec.containers[1].image: required" },
		{ POD("{containers: [{name: a, image: ''}]}"), EINVAL,
		  "spec.containers[0].image: required (it is empty)" },
		{ POD("{containers: [{name: a, image: ' x'}]}"), EINVAL,
		  "spec.containers[0].image: \" x\" must not begin or end with whitespace" },
		{ POD("{containers: [{image: x}]}"), EINVAL, "spec.containers[0].name: required" },
		{ POD("{containers: [{name: Web_1, image: x}]}"), EINVAL,
		  "spec.containers[0].name: \"Web_1\" is not a valid name: use at most 63 "
		  "characters "
		  "of a-z, 0-9 and '-', starting and ending with a letter or digit" },
		{ POD("{initContainers: [{name: a, image: x}], containers: [{name: a, image: x}]}"),
		  EINVAL,
		  "spec.containers[0].name: duplicate container name \"a\" (also used by "
		  "spec.initContainers[0]); container names must be unique in a pod" },
		{ POD("{restartPolicy: Sometimes, containers: [{name: a, image: x}]}"), EINVAL,
		  "spec.restartPolicy: \"Sometimes\" is not one of Always, OnFailure, Never" },
		{ POD("{hostname: -h, containers: [{name: a, image: x}]}"), EINVAL,
		  "spec.hostname: \"-h\" is not a valid name: use at most 63 characters of a-z, "
		  "0-9 "
		  "and '-', starting and ending with a letter or digit" },
		{ POD("{terminationGracePeriodSeconds: -1, containers: [{name: a, image: x}]}"),
		  EINVAL,
		  "spec.terminationGracePeriodSeconds: must be an integer from 0 to 2147483647, "
		  "not -1" },
		{ POD("{terminationGracePeriodSeconds: '30', containers: [{name: a, image: x}]}"),
		  EINVAL,
		  "spec.terminationGracePeriodSeconds: must be an integer from 0 to 2147483647, "
		  "not \"30\"" },
		{ POD("{volumes: [{name: d, hostPath: {path: /}}], containers: [{name: a, image: "
		      "x}]}"),
		  ENOTSUP,
		  "spec.volumes[0]: volume \"d\" is a hostPath volume; only emptyDir volumes are "
		  "supported by kiyot run" },
		{ POD("{volumes: [{name: d}, {name: d}], containers: [{name: a, image: x}]}"),
		  EINVAL, "spec.volumes[1].name: duplicate volume name \"d\"" },
		{ POD("{volumes: [{emptyDir: {}}], containers: [{name: a, image: x}]}"), EINVAL,
		  "spec.volumes[0].name: required" },
		{ POD("{volumes: [{name: d, emptyDir: {medium: HugePages}}], containers: [{name: "
		      "a, "
		      "image: x}]}"),
		  ENOTSUP,
		  "spec.volumes[0].emptyDir.medium: \"HugePages\" is not supported; use \"\" "
		  "(disk) "
		  "or "
		  "\"Memory\"" },
		{ POD("{volumes: [{name: d, emptyDir: {sizeLimit: lots}}], containers: [{name: a, "
		      "image: x}]}"),
		  EINVAL,
		  "spec.volumes[0].emptyDir.sizeLimit: \"lots\" is not a quantity (examples: 500m, "
		  "2, "
		  "128Mi, 1Gi)" },
		{ POD("{nodeSelector: {kubernetes.io/arch: 1}, containers: [{name: a, image: x}]}"),
		  EINVAL,
		  "spec.nodeSelector.kubernetes.io/arch: must be a string (quote numbers and "
		  "booleans in YAML, e.g. \"8080\"), not 1" },
		{ POD("{affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
		      "{nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/arch, "
		      "operator: "
		      "Is, values: [arm64]}]}]}}}, containers: [{name: a, image: x}]}"),
		  EINVAL,
		  "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
		  "nodeSelectorTerms[0].matchExpressions[0].operator: \"Is\" is not one of In, "
		  "NotIn, Exists, DoesNotExist, Gt, Lt" },
		{ ONE("command: sh"), EINVAL,
		  "spec.containers[0].command: must be a list of strings, not \"sh\"" },
		{ ONE("args: [a, 1]"), EINVAL,
		  "spec.containers[0].args[1]: must be a string (quote numbers and booleans in "
		  "YAML, e.g. \"8080\"), not 1" },
		{ ONE("env: [{value: x}]"), EINVAL, "spec.containers[0].env[0].name: required" },
		{ ONE("env: [{name: 'A=B'}]"), EINVAL,
		  "spec.containers[0].env[0].name: \"A=B\" is not a valid variable name (no '=')" },
		{ ONE("env: [{name: A, value: x}, {name: B, valueFrom: {secretKeyRef: {name: s, "
		      "key: "
		      "k}}}]"),
		  ENOTSUP,
		  "spec.containers[0].env[1].valueFrom: not supported by kiyot run; give the value "
		  "inline with \"value\"" },
		{ ONE("env: [{name: PORT, value: 8080}]"), EINVAL,
		  "spec.containers[0].env[0].value: must be a string (quote numbers and booleans "
		  "in YAML, e.g. \"8080\"), not 8080" },
		{ ONE("envFrom: [{configMapRef: {name: c}}]"), ENOTSUP,
		  "spec.containers[0].envFrom: not supported by kiyot run; list the variables "
		  "under "
		  "env" },
		{ ONE("ports: [{containerPort: 70000}]"), EINVAL,
		  "spec.containers[0].ports[0].containerPort: must be an integer from 1 to 65535, "
		  "not 70000" },
		{ ONE("ports: [{containerPort: 0}]"), EINVAL,
		  "spec.containers[0].ports[0].containerPort: must be an integer from 1 to 65535, "
		  "not 0" },
		{ ONE("ports: [{name: http}]"), EINVAL,
		  "spec.containers[0].ports[0].containerPort: required" },
		{ ONE("ports: [{containerPort: 80, protocol: tcp}]"), EINVAL,
		  "spec.containers[0].ports[0].protocol: \"tcp\" is not one of TCP, UDP, SCTP" },
		{ ONE("ports: [{containerPort: 80, name: HTTP}]"), EINVAL,
		  "spec.containers[0].ports[0].name: \"HTTP\" is not a valid port name: use at "
		  "most "
		  "15 characters of a-z, 0-9 and '-', with at least one letter" },
		{ ONE("ports: [{containerPort: 80, name: web}, {containerPort: 81, name: web}]"),
		  EINVAL, "spec.containers[0].ports[1].name: duplicate port name \"web\"" },
		{ ONE("resources: {limits: {cpu: abc}}"), EINVAL,
		  "spec.containers[0].resources.limits.cpu: \"abc\" is not a quantity (examples: "
		  "500m, 2, 128Mi, 1Gi)" },
		{ ONE("resources: {requests: {memory: -1Gi}}"), EINVAL,
		  "spec.containers[0].resources.requests.memory: \"-1Gi\" must not be negative" },
		{ ONE("resources: {requests: {memory: [1]}}"), EINVAL,
		  "spec.containers[0].resources.requests.memory: must be a quantity such as "
		  "\"500m\" "
		  "or \"1Gi\", not a list" },
		{ ONE("resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}"), EINVAL,
		  "spec.containers[0].resources.requests.cpu: \"2\" must be less than or equal to "
		  "the cpu limit \"1\"" },
		{ ONE("resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}"), EINVAL,
		  "spec.containers[0].resources.requests.memory: \"2Gi\" must be less than or "
		  "equal "
		  "to the memory limit \"1Gi\"" },
		{ ONE("resources: {limits: {nvidia.com/gpu: 1.5}}"), EINVAL,
		  "spec.containers[0].resources.limits.nvidia.com/gpu: \"1.5\" must be a whole "
		  "number "
		  "of GPUs" },
		{ ONE("resources: {requests: {nvidia.com/gpu: 1}}"), EINVAL,
		  "spec.containers[0].resources.limits.nvidia.com/gpu: required when GPUs are "
		  "requested (set it equal to the request)" },
		{ ONE("resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}"),
		  EINVAL,
		  "spec.containers[0].resources.requests.nvidia.com/gpu: \"1\" must equal the "
		  "limit "
		  "\"2\" (GPUs cannot be overcommitted)" },
		{ ONE("resources: {limits: {example.com/dongle: 1}}"), ENOTSUP,
		  "spec.containers[0].resources.limits.example.com/dongle: resource not supported "
		  "by "
		  "kiyot run (supported: cpu, memory, nvidia.com/gpu, ephemeral-storage)" },
		{ ONE("volumeMounts: [{name: data, mountPath: /data}]"), EINVAL,
		  "spec.containers[0].volumeMounts[0].name: \"data\" is not a volume declared in "
		  "spec.volumes" },
		{ POD("{volumes: [{name: d}], containers: [{name: c, image: x, volumeMounts: "
		      "[{name: "
		      "d}]}]}"),
		  EINVAL, "spec.containers[0].volumeMounts[0].mountPath: required" },
		{ POD("{volumes: [{name: d}], containers: [{name: c, image: x, volumeMounts: "
		      "[{name: "
		      "d, mountPath: data}]}]}"),
		  EINVAL,
		  "spec.containers[0].volumeMounts[0].mountPath: \"data\" must be an absolute "
		  "path" },
		{ POD("{volumes: [{name: d}, {name: e}], containers: [{name: c, image: x, "
		      "volumeMounts: [{name: d, mountPath: /m}, {name: e, mountPath: /m}]}]}"),
		  EINVAL,
		  "spec.containers[0].volumeMounts[1].mountPath: \"/m\" is already mounted" },
		{ POD("{volumes: [{name: d}], containers: [{name: c, image: x, volumeMounts: "
		      "[{name: "
		      "d, mountPath: /m, readOnly: 'yes'}]}]}"),
		  EINVAL,
		  "spec.containers[0].volumeMounts[0].readOnly: must be true or false, not "
		  "\"yes\"" },
		{ POD("{volumes: [{name: d}], containers: [{name: c, image: x, volumeMounts: "
		      "[{name: d, mountPath: /m, subPathExpr: $(POD)}]}]}"),
		  ENOTSUP,
		  "spec.containers[0].volumeMounts[0].subPathExpr: not supported by kiyot run; "
		  "mount the volume whole" },
		{ ONE("ports: [{containerPort: 80, protocol: 6}]"), EINVAL,
		  "spec.containers[0].ports[0].protocol: must be a string (quote numbers and "
		  "booleans in YAML, e.g. \"8080\"), not 6" },
		{ ONE("restartPolicy: Never"), EINVAL,
		  "spec.containers[0].restartPolicy: \"Never\" is not allowed; a container may "
		  "only "
		  "set \"Always\", and only as an init container (a sidecar)" },
		{ POD("{initContainers: [{name: i, image: x, restartPolicy: true}], containers: "
		      "[{name: c, image: x}]}"),
		  EINVAL,
		  "spec.initContainers[0].restartPolicy: true is not allowed; a container may only "
		  "set \"Always\", and only as an init container (a sidecar)" },
		{ ONE("imagePullPolicy: Sometimes"), EINVAL,
		  "spec.containers[0].imagePullPolicy: \"Sometimes\" is not one of Always, "
		  "IfNotPresent, Never" },
		{ POD("{initContainers: [{name: i, image: x, resources: {limits: {cpu: x1}}}], "
		      "containers: [{name: c, image: x}]}"),
		  EINVAL,
		  "spec.initContainers[0].resources.limits.cpu: \"x1\" is not a quantity "
		  "(examples: "
		  "500m, 2, 128Mi, 1Gi)" },
	};
	(void)state;

	check_refused(cases, sizeof(cases) / sizeof(cases[0]));
}

#define SC(sc) ONE("securityContext: " sc)
#define PSC(sc) POD("{securityContext: " sc ", containers: [{name: c, image: x}]}")
#define SCP "spec.containers[0].securityContext"

/* Security settings that are invalid, unknown, or that a cell cannot apply are refused with
 * the field's path: none is dropped, so a pod never runs with less protection than asked. */
static void test_podspec__security_errors_name_the_field(void **state)
{
	static const struct pbad cases[] = {
		{ SC("{runAsUser: -1}"), EINVAL,
		  SCP ".runAsUser: must be an integer from 0 to 2147483647, not -1" },
		{ SC("{runAsGroup: root}"), EINVAL,
		  SCP ".runAsGroup: must be an integer from 0 to 2147483647, not \"root\"" },
		{ SC("{readOnlyRootFileSystem: true}"), EINVAL,
		  SCP
		  ".readOnlyRootFileSystem: unknown key; did you mean readOnlyRootFilesystem?" },
		{ SC("{readOnly: true}"), EINVAL,
		  SCP
		  ".readOnly: unknown key (known here: runAsUser, runAsGroup, runAsNonRoot, "
		  "readOnlyRootFilesystem, allowPrivilegeEscalation, privileged, capabilities, "
		  "seccompProfile, procMount, seLinuxOptions, windowsOptions, appArmorProfile)" },
		{ SC("{readOnlyRootFilesystem: 'true'}"), EINVAL,
		  SCP ".readOnlyRootFilesystem: must be true or false, not \"true\"" },
		{ SC("{runAsNonRoot: 1}"), EINVAL,
		  SCP ".runAsNonRoot: must be true or false, not 1" },
		{ SC("{seLinuxOptions: {level: 's0:c123,c456'}}"), ENOTSUP,
		  SCP ".seLinuxOptions: SELinux labels are not supported: kiyot cells do not run "
		      "SELinux; remove it" },
		{ SC("{windowsOptions: {runAsUserName: app}}"), ENOTSUP,
		  SCP ".windowsOptions: Windows options are not supported: kiyot cells run Linux "
		      "containers; remove it" },
		{ SC("{appArmorProfile: {type: RuntimeDefault}}"), ENOTSUP,
		  SCP ".appArmorProfile: AppArmor profiles are not supported: kiyot cells do not "
		      "run AppArmor; remove it" },
		{ SC("{capabilities: {add: NET_ADMIN}}"), EINVAL,
		  SCP ".capabilities.add: must be a list of strings, not \"NET_ADMIN\"" },
		{ SC("{capabilities: {remove: [NET_RAW]}}"), EINVAL,
		  SCP ".capabilities.remove: unknown key (known here: add, drop)" },
		{ SC("{procMount: Masked}"), EINVAL,
		  SCP ".procMount: \"Masked\" is not one of Default, Unmasked" },
		{ SC("{seccompProfile: {}}"), EINVAL,
		  SCP ".seccompProfile.type: required (RuntimeDefault, Unconfined or Localhost)" },
		{ SC("{seccompProfile: {type: runtime/default}}"), EINVAL,
		  SCP ".seccompProfile.type: \"runtime/default\" is not one of RuntimeDefault, "
		      "Unconfined, Localhost" },
		{ SC("{seccompProfile: {type: Localhost}}"), EINVAL,
		  SCP ".seccompProfile.localhostProfile: required when type is Localhost (a path "
		      "relative to the node's seccomp directory, e.g. profiles/audit.json)" },
		{ SC("{seccompProfile: {type: Localhost, localhostProfile: ../etc/x.json}}"),
		  EINVAL,
		  SCP ".seccompProfile.localhostProfile: \"../etc/x.json\" must be a relative path "
		      "without '..' (it is read below the node's seccomp directory)" },
		{ SC("{seccompProfile: {type: Localhost, localhostProfile: /etc/x.json}}"), EINVAL,
		  SCP ".seccompProfile.localhostProfile: \"/etc/x.json\" must be a relative path "
		      "without '..' (it is read below the node's seccomp directory)" },
		{ SC("{seccompProfile: {type: RuntimeDefault, localhostProfile: a.json}}"), EINVAL,
		  SCP ".seccompProfile.localhostProfile: may only be set when type is Localhost" },
		{ SC("{allowPrivilegeEscalation: false, privileged: true}"), EINVAL,
		  SCP ": cannot set allowPrivilegeEscalation to false and privileged to true" },
		{ SC("{allowPrivilegeEscalation: false, capabilities: {add: [CAP_SYS_ADMIN]}}"),
		  EINVAL,
		  SCP ": cannot set allowPrivilegeEscalation to false and capabilities.add "
		      "CAP_SYS_ADMIN" },
		{ POD("{initContainers: [{name: i, image: x, securityContext: {privileged: yes}}], "
		      "containers: [{name: c, image: x}]}"),
		  EINVAL,
		  "spec.initContainers[0].securityContext.privileged: must be true or false, not "
		  "\"yes\"" },
		{ PSC("{runAsUser: 2147483648}"), EINVAL,
		  "spec.securityContext.runAsUser: must be an integer from 0 to 2147483647, not "
		  "2147483648" },
		{ PSC("{readOnlyRootFilesystem: true}"), EINVAL,
		  "spec.securityContext.readOnlyRootFilesystem: unknown key (known here: "
		  "runAsUser, runAsGroup, runAsNonRoot, supplementalGroups, fsGroup, sysctls, "
		  "seccompProfile, seLinuxOptions, seLinuxChangePolicy, windowsOptions, "
		  "appArmorProfile, fsGroupChangePolicy, supplementalGroupsPolicy)" },
		{ PSC("{fsGroup: 2000, fsGroupChangePolicy: OnRootMismatch}"), ENOTSUP,
		  "spec.securityContext.fsGroupChangePolicy: kiyot run does not change the "
		  "ownership of volumes (fsGroup is added to the containers' groups; emptyDir "
		  "volumes are writable by all); remove it" },
		{ PSC("{seLinuxOptions: {type: spc_t}}"), ENOTSUP,
		  "spec.securityContext.seLinuxOptions: SELinux labels are not supported: kiyot "
		  "cells do not run SELinux; remove it" },
		{ PSC("{supplementalGroupsPolicy: Strict}"), ENOTSUP,
		  "spec.securityContext.supplementalGroupsPolicy: kiyot run always adds the groups "
		  "the image's /etc/group gives the user (the Merge policy); remove it" },
		{ PSC("{supplementalGroups: [1, -2]}"), EINVAL,
		  "spec.securityContext.supplementalGroups[1]: must be an integer from 0 to "
		  "2147483647, not -2" },
		{ PSC("{supplementalGroups: 1}"), EINVAL,
		  "spec.securityContext.supplementalGroups: must be a list of integers from 0 to "
		  "2147483647, not 1" },
		{ PSC("{sysctls: [{name: kernel.shm_rmid_forced, value: 1}]}"), EINVAL,
		  "spec.securityContext.sysctls[0].value: must be a string (quote numbers and "
		  "booleans in YAML, e.g. \"8080\"), not 1" },
		{ PSC("{sysctls: [{name: net.core.somaxconn}]}"), EINVAL,
		  "spec.securityContext.sysctls[0].value: required" },
		{ PSC("{sysctls: [{name: Net.Core, value: '1'}]}"), EINVAL,
		  "spec.securityContext.sysctls[0].name: \"Net.Core\" is not a sysctl name: "
		  "segments of a-z, 0-9, '-' and '_' separated by '.' or '/', e.g. "
		  "net.ipv4.ip_local_port_range" },
		{ PSC("{sysctls: [{name: net..core, value: '1'}]}"), EINVAL,
		  "spec.securityContext.sysctls[0].name: \"net..core\" is not a sysctl name: "
		  "segments of a-z, 0-9, '-' and '_' separated by '.' or '/', e.g. "
		  "net.ipv4.ip_local_port_range" },
		{ PSC("{sysctls: [{name: kernel.sem, value: '1'}, {name: kernel.sem, value: "
		      "'2'}]}"),
		  EINVAL, "spec.securityContext.sysctls[1].name: duplicate sysctl \"kernel.sem\"" },
		{ PSC("{sysctls: [{name: kernel.sem, val: '1'}]}"), EINVAL,
		  "spec.securityContext.sysctls[0].val: unknown key (known here: name, value)" },
		{ PSC("{seccompProfile: {type: Localhost}}"), EINVAL,
		  "spec.securityContext.seccompProfile.localhostProfile: required when type is "
		  "Localhost (a path relative to the node's seccomp directory, e.g. "
		  "profiles/audit.json)" },
		{ POD("{hostNetwork: 'true', containers: [{name: c, image: x}]}"), EINVAL,
		  "spec.hostNetwork: must be true or false, not \"true\"" },
		{ POD("{hostPID: true, shareProcessNamespace: true, containers: [{name: c, image: "
		      "x}]}"),
		  EINVAL, "spec.shareProcessNamespace: cannot be true together with hostPID" },
		{ POD("{hostUsers: false, containers: [{name: c, image: x}]}"), ENOTSUP,
		  "spec.hostUsers: false (a user namespace for the pod) is not supported by kiyot "
		  "cells; remove it" },
		{ "{apiVersion: v1, kind: Pod, metadata: {name: p, annotations: "
		  "{seccomp.security.alpha.kubernetes.io/pod: runtime/default}}, spec: "
		  "{containers: [{name: c, image: x}]}}",
		  ENOTSUP,
		  "metadata.annotations.seccomp.security.alpha.kubernetes.io/pod: seccomp "
		  "annotations are not read (kubelets ignore them since v1.25); use the "
		  "seccompProfile field of spec.securityContext" },
		{ "{apiVersion: v1, kind: Pod, metadata: {name: p, annotations: "
		  "{container.seccomp.security.alpha.kubernetes.io/c: localhost/a.json}}, spec: "
		  "{containers: [{name: c, image: x}]}}",
		  ENOTSUP,
		  "metadata.annotations.container.seccomp.security.alpha.kubernetes.io/c: seccomp "
		  "annotations are not read (kubelets ignore them since v1.25); use the "
		  "seccompProfile field of the container's securityContext" },
		{ "{apiVersion: v1, kind: Pod, metadata: {name: p, annotations: "
		  "{container.apparmor.security.beta.kubernetes.io/c: runtime/default}}, spec: "
		  "{containers: [{name: c, image: x}]}}",
		  ENOTSUP,
		  "metadata.annotations.container.apparmor.security.beta.kubernetes.io/c: "
		  "AppArmor profiles are not supported: kiyot cells do not run AppArmor; remove "
		  "the annotation" },
	};
	(void)state;

	check_refused(cases, sizeof(cases) / sizeof(cases[0]));
}

/* Annotations are bounded in total (256 KiB of keys and values), not each: one value of
 * 200 KiB is taken, two are refused naming the mapping. */
static void test_podspec__annotations_are_bounded_in_total(void **state)
{
	size_t big = 200 * 1024;
	char *value = malloc(big + 1), *one, *two;
	struct err err = ERR_INIT;
	struct podspec *p = NULL;

	(void)state;
	memset(value, 'v', big);
	value[big] = '\0';
	one = xasprintf("{apiVersion: v1, kind: Pod, metadata: {name: p, annotations: {a: %s}},"
			" spec: {containers: [{name: c, image: x}]}}",
			value);
	two = xasprintf("{apiVersion: v1, kind: Pod, metadata: {name: p, annotations: {a: %s, "
			"b: %s}}, spec: {containers: [{name: c, image: x}]}}",
			value, value);
	p = rfix_pod(one);
	assert_int_equal(strlen(podspec_annotation(p, "a")), big);
	podspec_free(p);
	p = NULL;
	assert_int_equal(rfix_pod_read(two, &p, &err), -EINVAL);
	assert_string_equal(err.msg, "metadata.annotations: its keys and values are larger than "
				     "262144 bytes in all");
	assert_null(p);
	free(one);
	free(two);
	free(value);
}

/* The controller among the owner references names whose usage sizes the pod; the others, and
 * references that are no mapping with a kind and a name, are passed over, never refused. */
static void test_podspec__the_controller_owner_is_read_leniently(void **state)
{
	static const char text[] =
		"{apiVersion: v1, kind: Pod, metadata: {name: p, ownerReferences: [7, "
		"{kind: Node, name: n}, {kind: '', name: x, controller: true}, "
		"{kind: ReplicaSet, name: web-7d4, controller: true}]}, "
		"spec: {containers: [{name: c, image: x}]}}";
	static const char odd[] = "{apiVersion: v1, kind: Pod, metadata: {name: p, "
				  "ownerReferences: {kind: ReplicaSet}}, "
				  "spec: {containers: [{name: c, image: x}]}}";
	struct podspec *p = rfix_pod(text);

	(void)state;
	assert_string_equal(p->owner_kind, "ReplicaSet");
	assert_string_equal(p->owner_name, "web-7d4");
	podspec_free(p);
	p = rfix_pod(odd);
	assert_null(p->owner_kind);
	podspec_free(p);
}

/* "head" then n times entry, comma-separated, then "tail". The caller frees it. */
static char *repeat(const char *head, const char *entry, size_t n, const char *tail)
{
	size_t lh = strlen(head), le = strlen(entry), lt = strlen(tail);
	char *text = xcalloc(1, lh + n * (le + 2) + lt + 1), *at = text;

	memcpy(at, head, lh);
	at += lh;
	for (size_t k = 0; k < n; k++) {
		memcpy(at, ", ", k ? 2 : 0);
		at += k ? 2 : 0;
		memcpy(at, entry, le);
		at += le;
	}
	memcpy(at, tail, lt + 1);
	return text;
}

/* A list a Pod may hold is bounded: a container's env, ports and mounts at 4096 entries, the
 * supplemental groups at the kernel's 65536, the required node affinity at 64 terms; the bound
 * itself is taken. */
static void test_podspec__lists_are_bounded(void **state)
{
	static const struct {
		const char *head, *entry, *tail; /* a Pod: head, the list's entries, tail */
		size_t most;
		const char *msg;
	} cases[] = {
		{ "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, "
		  "image: x, env: [",
		  "{name: A}", "]}]}}", 4096,
		  "spec.containers[0].env: 4097 entries, at most 4096" },
		{ "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {securityContext: "
		  "{supplementalGroups: [",
		  "7", "]}, containers: [{name: c, image: x}]}}", 65536,
		  "spec.securityContext.supplementalGroups: 65537 entries, at most 65536" },
		{ "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {affinity: "
		  "{nodeAffinity: "
		  "{requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [",
		  "{}", "]}}}, containers: [{name: c, image: x}]}}", 64,
		  "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
		  "nodeSelectorTerms: 65 entries, at most 64" },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (size_t n = cases[i].most; n <= cases[i].most + 1; n++) {
			char *text = repeat(cases[i].head, cases[i].entry, n, cases[i].tail);
			struct err err = ERR_INIT;
			struct podspec *p = NULL;
			int ret = rfix_pod_read(text, &p, &err);

			if (n == cases[i].most && ret < 0)
				fail_msg("%zu entries refused: %s", n, err.msg);
			if (n > cases[i].most) {
				assert_int_equal(ret, -EINVAL);
				assert_string_equal(err.msg, cases[i].msg);
			}
			podspec_free(p);
			free(text);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_podspec__full_manifest),
		cmocka_unit_test(test_podspec__minimal_json_gets_defaults),
		cmocka_unit_test(test_podspec__file_errors_name_the_file),
		cmocka_unit_test(test_podspec__pull_policy_defaults_from_tag),
		cmocka_unit_test(test_podspec__numeric_quantities_and_request_defaults),
		cmocka_unit_test(test_podspec__node_selector_and_required_affinity),
		cmocka_unit_test(test_podspec__errors_name_the_field),
		cmocka_unit_test(test_podspec__security_settings),
		cmocka_unit_test(test_podspec__effective_security_merges_like_the_kubelet),
		cmocka_unit_test(test_podspec__security_errors_name_the_field),
		cmocka_unit_test(test_podspec__annotations_are_bounded_in_total),
		cmocka_unit_test(test_podspec__the_controller_owner_is_read_leniently),
		cmocka_unit_test(test_podspec__lists_are_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
