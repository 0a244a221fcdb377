/*
 * Unit tests for kiyot/kube/podobject.c and the Pod-object half of kiyot/cells/provision.c: a Pod object
 * as the API server returns it (test/fixtures/podobject/pod.json: a ReplicaSet's pod with the
 * service-account volume, env valueFrom, envFrom and extended resources, none of which `kiyot
 * run` accepts) gives the sandbox's demand exactly, init containers included, and the images
 * its cell pre-pulls; a Pod of another uid is not used; a malformed one is refused naming the
 * field; pod.elotl.co annotations still win. Uses the embedded us-east-1 catalog.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sizing/catalog.h"
#include "daemon/kiyot.h"
#include "kube/podobject.h"
#include "cells/provision.h"
#include "sizing/sizing.h"
#include "xalloc.h"

#define FIXTURE "test/fixtures/podobject/pod.json"
#define UID "5d1c9e0a-2f7b-4c1e-9a43-0c2d7e1f8b61"
#define MIB (1024LL * 1024)
#define GIB (1024LL * MIB)

/* A kubelet's sandbox config for the fixture's pod: metadata, optional annotation, and the
 * lossy Linux resources (CPU shares for 1 CPU, no memory limit). */
struct sandbox_cfg {
	Runtime__V1__PodSandboxConfig cfg;
	Runtime__V1__PodSandboxMetadata md;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry ann;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry *annp[1];
	Runtime__V1__LinuxPodSandboxConfig linux_cfg;
	Runtime__V1__LinuxContainerResources res;
};

static void sandbox_init(struct sandbox_cfg *s, const char *ann_key, const char *ann_value)
{
	memset(s, 0, sizeof(*s));
	runtime__v1__pod_sandbox_config__init(&s->cfg);
	runtime__v1__pod_sandbox_metadata__init(&s->md);
	s->md.name = (char *)"web-7d4b9c-x2k8p";
	s->md.namespace_ = (char *)"shop";
	s->md.uid = (char *)UID;
	s->cfg.metadata = &s->md;
	runtime__v1__linux_pod_sandbox_config__init(&s->linux_cfg);
	runtime__v1__linux_container_resources__init(&s->res);
	s->res.cpu_shares = 1024;
	s->linux_cfg.resources = &s->res;
	s->cfg.linux = &s->linux_cfg;
	if (ann_key) {
		runtime__v1__pod_sandbox_config__annotations_entry__init(&s->ann);
		s->ann.key = (char *)ann_key;
		s->ann.value = (char *)ann_value;
		s->annp[0] = &s->ann;
		s->cfg.annotations = s->annp;
		s->cfg.n_annotations = 1;
	}
}

static json_t *fixture(void)
{
	json_error_t jerr;
	json_t *j = json_load_file(FIXTURE, 0, &jerr);

	if (!j)
		fail_msg("%s: %s", FIXTURE, jerr.text);
	return j;
}

/* Reads pod (taken over) as the sandbox with uid would. */
static int read_pod(json_t *pod, const char *uid, struct podspec **out, struct err *err)
{
	int ret = podobject_from_json(pod, uid, out, err);

	json_decref(pod);
	return ret;
}

static int setup(void **state)
{
	struct kiyot *k = xcalloc(1, sizeof(*k));
	struct err err = ERR_INIT;

	kiyot_config_defaults(&k->cfg);
	if (catalog_load("us-east-1", &k->catalog, &err) < 0) {
		print_error("%s\n", err.msg);
		return -1;
	}
	*state = k;
	return 0;
}

static int teardown(void **state)
{
	struct kiyot *k = *state;

	catalog_free(k->catalog);
	kiyot_config_release(&k->cfg);
	free(k);
	return 0;
}

/* The demand is the larger of the largest init container (3 CPU / 4 GiB) and the sum of the
 * app containers (2 CPU / 3 GiB), not the sandbox's 1 CPU of shares. */
static void test_podobject__pod_object_gives_the_demand_init_containers_included(void **state)
{
	struct podspec *p = NULL;
	struct sandbox_cfg s;
	struct pod_demand d;
	struct err err = ERR_INIT;
	unsigned from;

	(void)state;
	if (read_pod(fixture(), UID, &p, &err) < 0)
		fail_msg("podobject_from_json: %s", err.msg);
	assert_string_equal(p->uid, UID);
	assert_int_equal(p->n_init_containers, 2);
	assert_int_equal(p->n_containers, 3);
	sandbox_init(&s, NULL, NULL);
	assert_int_equal(provision_demand(&s.cfg, p, &d, &from, &err), 0);
	assert_int_equal(d.cpu_milli, 3000);
	assert_int_equal(d.memory_bytes, 4 * GIB);
	assert_int_equal(d.gpus, 0);
	assert_int_equal(from, PROVISION_FROM_POD_OBJECT);
	assert_string_equal(provision_demand_source(from), "demand from the Pod object");

	/* without the Pod object, the lossy sandbox resources: 1 CPU, no memory */
	assert_int_equal(provision_demand(&s.cfg, NULL, &d, &from, &err), 0);
	assert_int_equal(d.cpu_milli, 1000);
	assert_int_equal(d.memory_bytes, 0);
	assert_int_equal(from, PROVISION_FROM_SANDBOX);
	podspec_free(p);
}

/* A sidecar init container and the RuntimeClass overhead of the Pod object count. */
static void test_podobject__sidecar_and_overhead_count(void **state)
{
	json_t *pod = fixture();
	json_t *spec = json_object_get(pod, "spec");
	json_t *init = json_array_get(json_object_get(spec, "initContainers"), 0);
	struct podspec *p = NULL;
	struct sandbox_cfg s;
	struct pod_demand d;
	struct err err = ERR_INIT;
	unsigned from;

	(void)state;
	json_object_set_new(init, "restartPolicy", json_string("Always"));
	json_object_set_new(spec, "overhead",
			    json_pack("{s:s,s:s}", "cpu", "250m", "memory", "128Mi"));
	if (read_pod(pod, UID, &p, &err) < 0)
		fail_msg("podobject_from_json: %s", err.msg);
	assert_true(p->init_containers[0].sidecar);
	sandbox_init(&s, NULL, NULL);
	assert_int_equal(provision_demand(&s.cfg, p, &d, &from, &err), 0);
	/* migrate keeps running: next to the app (1500m + 500m, 2 + 1 GiB) it makes 5000m / 7 GiB,
	 * more than the init phase (warm next to it: 3500m / 5 GiB); plus the overhead */
	assert_int_equal(d.cpu_milli, 5000 + 250);
	assert_int_equal(d.memory_bytes, 7 * GIB + 128 * MIB);
	podspec_free(p);
}

/* Sizing with the Pod object fits its demand and says where the demand came from. */
static void test_podobject__choice_fits_the_pod_and_names_the_source(void **state)
{
	struct kiyot *k = *state;
	struct podspec *p = NULL;
	struct sandbox_cfg s;
	struct size_choice ch = { 0 };
	struct err err = ERR_INIT;

	if (read_pod(fixture(), UID, &p, &err) < 0)
		fail_msg("podobject_from_json: %s", err.msg);
	sandbox_init(&s, NULL, NULL);
	if (provision_size_pod(k, &s.cfg, p, &ch, &err) < 0)
		fail_msg("provision_size_pod: %s", err.msg);
	assert_true(ch.cpus >= 3);
	assert_true(ch.memory_bytes >= 4 * GIB + 64 * MIB);
	assert_ptr_equal(strstr(ch.reason, "demand from the Pod object; "), ch.reason);
	assert_non_null(strstr(ch.reason, ch.instance_type));
	size_choice_release(&ch);

	/* the sandbox alone: 1 CPU and no memory fit something much smaller */
	assert_int_equal(provision_size(k, &s.cfg, &ch, &err), 0);
	assert_true(ch.memory_bytes < 4 * GIB);
	assert_ptr_equal(strstr(ch.reason, "demand from the sandbox's resources; "), ch.reason);
	size_choice_release(&ch);
	podspec_free(p);
}

/* pod.elotl.co annotations still come first, per resource; the rest from the Pod object. */
static void test_podobject__annotations_win_over_the_pod_object(void **state)
{
	struct podspec *p = NULL;
	struct sandbox_cfg s;
	struct pod_demand d;
	struct err err = ERR_INIT;
	unsigned from;

	(void)state;
	if (read_pod(fixture(), UID, &p, &err) < 0)
		fail_msg("podobject_from_json: %s", err.msg);
	sandbox_init(&s, ANN_CPU_REQUEST, "250m");
	assert_int_equal(provision_demand(&s.cfg, p, &d, &from, &err), 0);
	assert_int_equal(d.cpu_milli, 250);
	assert_int_equal(d.memory_bytes, 4 * GIB);
	assert_int_equal(from, PROVISION_FROM_ANNOTATIONS | PROVISION_FROM_POD_OBJECT);
	assert_string_equal(provision_demand_source(from),
			    "demand from the pod.elotl.co annotations and the Pod object");
	podspec_free(p);
}

/* A Pod of the same name but another uid is another pod: not used. */
static void test_podobject__other_uid_is_not_used(void **state)
{
	struct podspec *p = NULL;
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(read_pod(fixture(), "11111111-2222-3333-4444-555555555555", &p, &err),
			 -ESTALE);
	assert_null(p);
	assert_non_null(strstr(err.msg, UID));
	assert_non_null(strstr(err.msg, "11111111-2222-3333-4444-555555555555"));

	/* a Pod without a uid is not this sandbox's either */
	{
		json_t *pod = fixture();

		json_object_del(json_object_get(pod, "metadata"), "uid");
		assert_int_equal(read_pod(pod, UID, &p, &err), -ESTALE);
	}
}

/* A malformed Pod object is refused; the error names the field. */
static void test_podobject__malformed_pod_names_the_field(void **state)
{
	struct podspec *p = NULL;
	struct err err = ERR_INIT;
	json_t *pod, *c;

	(void)state;
	pod = fixture();
	c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 1);
	json_object_set_new(json_object_get(json_object_get(c, "resources"), "requests"), "cpu",
			    json_string("lots"));
	assert_int_equal(read_pod(pod, UID, &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "spec.containers[1].resources.requests.cpu"));

	pod = fixture();
	json_object_set_new(json_object_get(pod, "spec"), "initContainers", json_string("x"));
	assert_int_equal(read_pod(pod, UID, &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "spec.initContainers"));

	pod = fixture();
	c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
	json_object_del(c, "image");
	assert_int_equal(read_pod(pod, UID, &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "spec.containers[0].image"));

	assert_int_equal(read_pod(json_string("Pod"), UID, &p, &err), -EINVAL);
	assert_null(p);
}

/* Reads the fixture under another metadata.name (and namespace, when given). */
static int read_named(const char *name, const char *ns, struct podspec **out, struct err *err)
{
	json_t *pod = fixture();
	json_t *md = json_object_get(pod, "metadata");

	json_object_set_new(md, "name", json_string(name));
	if (ns)
		json_object_set_new(md, "namespace", json_string(ns));
	return read_pod(pod, UID, out, err);
}

/* A pod's name is a DNS subdomain as Kubernetes checks one: 253 characters at most, in parts
 * that no label length bounds (the API server takes a 70-character name without a dot); its
 * namespace is a label, of 63 at most. */
static void test_podobject__long_pod_names_are_read(void **state)
{
	char name[300];
	struct podspec *p = NULL;
	struct err err = ERR_INIT;

	(void)state;
	memset(name, 'a', 70);
	name[70] = '\0';
	assert_int_equal(read_named(name, NULL, &p, &err), 0);
	assert_string_equal(p->name, name);
	podspec_free(p);
	p = NULL;

	/* 253 in parts of 63, 64 and more */
	memset(name, 'b', 253);
	name[63] = name[128] = '.';
	name[253] = '\0';
	assert_int_equal(read_named(name, NULL, &p, &err), 0);
	podspec_free(p);
	p = NULL;

	name[253] = 'b';
	name[254] = '\0';
	assert_int_equal(read_named(name, NULL, &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "metadata.name"));
	assert_non_null(strstr(err.msg, "253"));

	/* still refused: an empty part, a part ending in '-', upper case */
	assert_int_equal(read_named("web..x", NULL, &p, &err), -EINVAL);
	assert_int_equal(read_named("web-.x", NULL, &p, &err), -EINVAL);
	assert_int_equal(read_named("Web", NULL, &p, &err), -EINVAL);

	/* a namespace is a label: 63 at most */
	memset(name, 'n', 64);
	name[64] = '\0';
	assert_int_equal(read_named("web", name, &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "metadata.namespace"));
	name[63] = '\0';
	assert_int_equal(read_named("web", name, &p, &err), 0);
	podspec_free(p);
}

/* The cell pre-pulls init containers' then containers' images, each image once (busybox:1.36
 * and docker.io/library/busybox:1.36 are one), never those with imagePullPolicy Never. */
static void test_podobject__prepull_lists_each_image_once(void **state)
{
	struct podspec *p = NULL;
	struct err err = ERR_INIT;
	size_t dropped = 99;
	json_t *list, *want;

	(void)state;
	if (read_pod(fixture(), UID, &p, &err) < 0)
		fail_msg("podobject_from_json: %s", err.msg);
	list = podobject_prepull(p, &dropped);
	want = json_pack("[s, s, s]", "registry.example.com/shop/migrate:2.1", "busybox:1.36",
			 "registry.example.com/shop/web:2.1");
	if (!json_equal(list, want)) {
		char *got = json_dumps(list, 0);

		fail_msg("prepull list: %s", got);
	}
	assert_int_equal(dropped, 0);
	json_decref(list);
	json_decref(want);
	podspec_free(p);
}

/* At most PODOBJECT_MAX_PREPULL images; the rest are counted as dropped. */
static void test_podobject__prepull_is_bounded(void **state)
{
	json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:[]}}", "apiVersion", "v1", "kind",
				"Pod", "metadata", "name", "many", "uid", "u-1", "spec",
				"containers");
	json_t *cs = json_object_get(json_object_get(pod, "spec"), "containers");
	struct podspec *p = NULL;
	struct err err = ERR_INIT;
	size_t dropped = 0;
	json_t *list;

	(void)state;
	for (int i = 0; i < PODOBJECT_MAX_PREPULL + 6; i++) {
		char name[32], image[64];

		snprintf(name, sizeof(name), "c%d", i);
		snprintf(image, sizeof(image), "registry.example.com/img%d:1", i);
		json_array_append_new(cs, json_pack("{s:s, s:s}", "name", name, "image", image));
	}
	if (read_pod(pod, "u-1", &p, &err) < 0)
		fail_msg("podobject_from_json: %s", err.msg);
	list = podobject_prepull(p, &dropped);
	assert_int_equal(json_array_size(list), PODOBJECT_MAX_PREPULL);
	assert_int_equal(dropped, 6);
	assert_string_equal(json_string_value(json_array_get(list, 0)),
			    "registry.example.com/img0:1");
	json_decref(list);
	podspec_free(p);
}

/* No API server configured: the reader is disabled and says why at once. */
static void test_podobject__no_api_server_fails_at_once(void **state)
{
	struct podobject_reader *r;
	struct podspec *p = NULL;
	struct err err = ERR_INIT;

	(void)state;
	unsetenv("KUBERNETES_SERVICE_HOST");
	r = podobject_reader_new("", 0);
	assert_false(podobject_reader_enabled(r));
	assert_int_equal(podobject_get(r, "shop", "web", UID, &p, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "KUBERNETES_SERVICE_HOST"));
	podobject_reader_free(r);
}

/* An API server that takes the connection and never answers: the read gives up after the
 * reader's timeout with EIO (what RunPodSandbox then falls back from). */
static void test_podobject__silent_api_server_times_out(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	char dir[] = "/tmp/test-podobject-XXXXXX", path[64];
	struct podobject_reader *r;
	struct podspec *p = NULL;
	struct err err = ERR_INIT;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	FILE *f;

	(void)state;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 8), 0); /* never accepted: the kernel queues the connection */
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/kubeconfig", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
		"apiVersion: v1\nkind: Config\ncurrent-context: t\n"
		"clusters: [{name: t, cluster: {server: \"http://127.0.0.1:%d\"}}]\n"
		"users: [{name: u, user: {token: x}}]\n"
		"contexts: [{name: t, context: {cluster: t, user: u}}]\n",
		ntohs(sa.sin_port));
	fclose(f);
	r = podobject_reader_new(path, 300);
	assert_true(podobject_reader_enabled(r));
	assert_int_equal(podobject_get(r, "shop", "web", UID, &p, &err), -EIO);
	assert_non_null(
		strstr(err.msg, "no answer from the API server (kiyot waits 300 ms at most)"));
	assert_null(p);
	podobject_reader_free(r);
	close(fd);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_podobject__pod_object_gives_the_demand_init_containers_included),
		cmocka_unit_test(test_podobject__sidecar_and_overhead_count),
		cmocka_unit_test(test_podobject__choice_fits_the_pod_and_names_the_source),
		cmocka_unit_test(test_podobject__annotations_win_over_the_pod_object),
		cmocka_unit_test(test_podobject__other_uid_is_not_used),
		cmocka_unit_test(test_podobject__malformed_pod_names_the_field),
		cmocka_unit_test(test_podobject__long_pod_names_are_read),
		cmocka_unit_test(test_podobject__prepull_lists_each_image_once),
		cmocka_unit_test(test_podobject__prepull_is_bounded),
		cmocka_unit_test(test_podobject__no_api_server_fails_at_once),
		cmocka_unit_test(test_podobject__silent_api_server_times_out),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
