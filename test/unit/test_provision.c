/*
 * Unit tests for kiyot/cells/provision.c: from a RunPodSandbox config to the instance type of the
 * pod's cell. The demand comes from the pod.elotl.co annotations (what `kiyot run` writes),
 * else from LinuxPodSandboxConfig.resources (what the kubelet sends); errors name the pod and
 * the annotation or demand at fault. Uses the embedded us-east-1 catalog.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sizing/catalog.h"
#include "state/kiyot.h"
#include "cells/provision.h"
#include "sizing/sizing.h"
#include "providers/provider.h"
#include "xalloc.h"

#define MIB (1024LL * 1024)
#define GIB (1024LL * MIB)
#define MAX_ANN 8

/* A sandbox config on the stack: metadata, up to MAX_ANN annotations, Linux resources. */
struct pod {
	Runtime__V1__PodSandboxConfig cfg;
	Runtime__V1__PodSandboxMetadata md;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry ann[MAX_ANN];
	Runtime__V1__PodSandboxConfig__AnnotationsEntry *annp[MAX_ANN];
	Runtime__V1__LinuxPodSandboxConfig linux_cfg;
	Runtime__V1__LinuxContainerResources res;
};

static void pod_init(struct pod *p, const char *name)
{
	memset(p, 0, sizeof(*p));
	runtime__v1__pod_sandbox_config__init(&p->cfg);
	runtime__v1__pod_sandbox_metadata__init(&p->md);
	p->md.name = (char *)name;
	p->md.namespace_ = (char *)"default";
	p->md.uid = (char *)"0b5e3c1e-uid";
	p->cfg.metadata = &p->md;
	p->cfg.annotations = p->annp;
}

static void pod_annotate(struct pod *p, const char *key, const char *value)
{
	size_t i = p->cfg.n_annotations;

	assert_true(i < MAX_ANN);
	runtime__v1__pod_sandbox_config__annotations_entry__init(&p->ann[i]);
	p->ann[i].key = (char *)key;
	p->ann[i].value = (char *)value;
	p->annp[i] = &p->ann[i];
	p->cfg.n_annotations++;
}

/* The resources the kubelet writes for a pod (shares from requests, quota from limits). */
static Runtime__V1__LinuxContainerResources *pod_resources(struct pod *p)
{
	runtime__v1__linux_pod_sandbox_config__init(&p->linux_cfg);
	runtime__v1__linux_container_resources__init(&p->res);
	p->linux_cfg.resources = &p->res;
	p->cfg.linux = &p->linux_cfg;
	return &p->res;
}

/* A kiyot with just its config (defaults) and the us-east-1 catalog. */
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

/* Sizes a pod that must fit; fails the test with kiyot's message otherwise. */
static void size_ok(struct kiyot *k, struct pod *p, struct size_choice *out)
{
	struct err err = ERR_INIT;

	memset(out, 0, sizeof(*out));
	if (provision_size(k, &p->cfg, out, &err) < 0)
		fail_msg("provision_size: %s", err.msg);
	assert_non_null(out->instance_type);
	assert_non_null(out->reason);
}

/* What sizing picks for an explicit demand, to compare with what provision derived. */
static void expect_same_as(struct kiyot *k, const struct size_choice *got, int64_t cpu_milli,
			   int64_t memory_bytes)
{
	struct pod_demand d = { .cpu_milli = cpu_milli, .memory_bytes = memory_bytes };
	struct sizing_reserve r = { k->cfg.reserve_cpu_milli, k->cfg.reserve_memory_bytes };
	struct sizing_choice want;
	struct err err = ERR_INIT;

	assert_int_equal(sizing_pick(k->catalog, &d, &r, &want, &err), 0);
	assert_string_equal(got->instance_type, want.instance_type);
}

/* The seed behaviour: a pod asking for 0.4 GiB of memory (and no CPU) lands on a 0.5 GiB
 * nano type. */
static void test_provision__pod_of_0_4_gib_lands_on_a_nano(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch;
	const struct catalog_type *t;

	pod_init(&p, "small");
	pod_annotate(&p, ANN_CPU_REQUEST, "0m");
	pod_annotate(&p, ANN_MEMORY_REQUEST, "0.4Gi");
	size_ok(k, &p, &ch);
	t = catalog_find(k->catalog, ch.instance_type);
	assert_non_null(t);
	assert_non_null(strstr(ch.instance_type, ".nano"));
	assert_int_equal(ch.memory_bytes, 512 * MIB);
	assert_int_equal(t->memory_bytes, 512 * MIB);
	assert_false(ch.spot);
	assert_true(ch.price == t->price);
	assert_non_null(strstr(ch.reason, ch.instance_type));
	size_choice_release(&ch);
}

/* The annotations give the demand: 3 CPUs and 6 GiB need more than the nano. */
static void test_provision__demand_from_annotations(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch;

	pod_init(&p, "big");
	pod_annotate(&p, ANN_CPU_REQUEST, "3");
	pod_annotate(&p, ANN_MEMORY_REQUEST, "6Gi");
	size_ok(k, &p, &ch);
	assert_true(ch.cpus >= 3);
	assert_true(ch.memory_bytes >= 6 * GIB);
	expect_same_as(k, &ch, 3000, 6 * GIB);
	size_choice_release(&ch);
}

/* Without annotations the kubelet's resources count: cpu_shares 2048 is 2000m, the memory
 * limit is the memory. */
static void test_provision__demand_from_sandbox_resources(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch;
	Runtime__V1__LinuxContainerResources *r;

	pod_init(&p, "kubelet-pod");
	r = pod_resources(&p);
	r->cpu_shares = 2048;
	r->memory_limit_in_bytes = 3 * GIB;
	size_ok(k, &p, &ch);
	assert_true(ch.cpus >= 2);
	assert_true(ch.memory_bytes >= 3 * GIB);
	expect_same_as(k, &ch, 2000, 3 * GIB);
	size_choice_release(&ch);
}

/* A CPU limit (quota/period) larger than the request counts: 350000/100000 is 3.5 CPUs. */
static void test_provision__cpu_quota_over_period(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch;
	Runtime__V1__LinuxContainerResources *r;

	pod_init(&p, "limited");
	r = pod_resources(&p);
	r->cpu_shares = 512;
	r->cpu_period = 100000;
	r->cpu_quota = 350000;
	size_ok(k, &p, &ch);
	assert_true(ch.cpus >= 3.5);
	expect_same_as(k, &ch, 3500, 0);
	size_choice_release(&ch);
}

/* cpu_shares 2 is what the kubelet sends for "no request": no CPU demand, the cheapest type. */
static void test_provision__minimum_shares_mean_no_demand(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch;

	pod_init(&p, "besteffort");
	pod_resources(&p)->cpu_shares = 2;
	size_ok(k, &p, &ch);
	expect_same_as(k, &ch, 0, 0);
	size_choice_release(&ch);
}

/* The annotations, written from the whole Pod, win over the sandbox's resources. */
static void test_provision__annotations_win_over_resources(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch;
	Runtime__V1__LinuxContainerResources *r;

	pod_init(&p, "both");
	pod_annotate(&p, ANN_CPU_REQUEST, "100m");
	pod_annotate(&p, ANN_MEMORY_REQUEST, "100Mi");
	r = pod_resources(&p);
	r->cpu_shares = 8192;
	r->memory_limit_in_bytes = 30 * GIB;
	size_ok(k, &p, &ch);
	expect_same_as(k, &ch, 100, 100 * MIB);
	assert_true(ch.memory_bytes < 30 * GIB);
	size_choice_release(&ch);
}

/* launch-type spot prices the pod as spot; on-demand does not. */
static void test_provision__spot_annotation(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch;
	const struct catalog_type *t;

	pod_init(&p, "spotty");
	pod_annotate(&p, ANN_LAUNCH_TYPE, "spot");
	pod_annotate(&p, ANN_MEMORY_REQUEST, "400Mi");
	size_ok(k, &p, &ch);
	assert_true(ch.spot);
	t = catalog_find(k->catalog, ch.instance_type);
	assert_non_null(t);
	assert_true(ch.price == t->spot_price);
	size_choice_release(&ch);

	pod_init(&p, "steady");
	pod_annotate(&p, ANN_LAUNCH_TYPE, "on-demand");
	pod_annotate(&p, ANN_MEMORY_REQUEST, "400Mi");
	size_ok(k, &p, &ch);
	assert_false(ch.spot);
	t = catalog_find(k->catalog, ch.instance_type);
	assert_true(ch.price == t->price);
	size_choice_release(&ch);
}

/* spot-fallback: on-demand lets a spot pod's cell run on demand when spot has no capacity;
 * another value names the annotation and the pod. */
static void test_provision__spot_fallback_annotation(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch = { 0 };
	struct err err = ERR_INIT;

	pod_init(&p, "flexible");
	pod_annotate(&p, ANN_LAUNCH_TYPE, "spot");
	pod_annotate(&p, ANN_SPOT_FALLBACK, "on-demand");
	size_ok(k, &p, &ch);
	assert_int_equal(ch.spot, CELL_SPOT_OR_ON_DEMAND);
	size_choice_release(&ch);

	pod_init(&p, "strict");
	pod_annotate(&p, ANN_LAUNCH_TYPE, "spot");
	size_ok(k, &p, &ch);
	assert_int_equal(ch.spot, CELL_SPOT);
	size_choice_release(&ch);

	pod_init(&p, "steady");
	pod_annotate(&p, ANN_SPOT_FALLBACK, "on-demand"); /* on demand already */
	size_ok(k, &p, &ch);
	assert_int_equal(ch.spot, 0);
	size_choice_release(&ch);

	pod_init(&p, "vague");
	pod_annotate(&p, ANN_LAUNCH_TYPE, "spot");
	pod_annotate(&p, ANN_SPOT_FALLBACK, "anything");
	assert_int_equal(provision_size(k, &p.cfg, &ch, &err), -EINVAL);
	assert_non_null(strstr(err.msg, ANN_SPOT_FALLBACK));
	assert_non_null(strstr(err.msg, "\"vague\""));
}

/* instance-type pins the type, exactly or by glob. */
static void test_provision__instance_type_annotation(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch;

	pod_init(&p, "pinned");
	pod_annotate(&p, ANN_INSTANCE_TYPE, "c5.large");
	size_ok(k, &p, &ch);
	assert_string_equal(ch.instance_type, "c5.large");
	size_choice_release(&ch);

	pod_init(&p, "globbed");
	pod_annotate(&p, ANN_INSTANCE_TYPE, "m5*");
	pod_annotate(&p, ANN_MEMORY_REQUEST, "20Gi");
	size_ok(k, &p, &ch);
	assert_memory_equal(ch.instance_type, "m5", 2);
	assert_true(ch.memory_bytes >= 20 * GIB);
	size_choice_release(&ch);
}

/* An instance type that matches nothing names the annotation, the value and the pod. */
static void test_provision__unknown_instance_type_is_named(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch = { 0 };
	struct err err = ERR_INIT;

	pod_init(&p, "typo");
	pod_annotate(&p, ANN_INSTANCE_TYPE, "c5.hugeX");
	assert_true(provision_size(k, &p.cfg, &ch, &err) < 0);
	assert_null(ch.instance_type);
	assert_non_null(strstr(err.msg, "\"typo\""));
	assert_non_null(strstr(err.msg, ANN_INSTANCE_TYPE));
	assert_non_null(strstr(err.msg, "c5.hugeX"));
}

/* A launch type that is neither spot nor on-demand names the annotation and the pod. */
static void test_provision__bad_launch_type_names_the_annotation(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch = { 0 };
	struct err err = ERR_INIT;

	pod_init(&p, "cheapskate");
	pod_annotate(&p, ANN_LAUNCH_TYPE, "cheap");
	assert_int_equal(provision_size(k, &p.cfg, &ch, &err), -EINVAL);
	assert_null(ch.instance_type);
	assert_non_null(strstr(err.msg, ANN_LAUNCH_TYPE));
	assert_non_null(strstr(err.msg, "cheap"));
	assert_non_null(strstr(err.msg, "\"cheapskate\""));
}

/* A demand no instance type can meet names the pod. */
static void test_provision__impossible_demand_names_the_pod(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch = { 0 };
	struct err err = ERR_INIT;

	pod_init(&p, "whale");
	pod_annotate(&p, ANN_CPU_REQUEST, "1000");
	pod_annotate(&p, ANN_MEMORY_REQUEST, "100Ti");
	assert_true(provision_size(k, &p.cfg, &ch, &err) < 0);
	assert_null(ch.instance_type);
	assert_non_null(strstr(err.msg, "pod \"whale\""));
	assert_non_null(strstr(err.msg, "us-east-1"));
}

/* A demand annotation that is no quantity names the annotation. */
static void test_provision__bad_quantity_names_the_annotation(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch = { 0 };
	struct err err = ERR_INIT;

	pod_init(&p, "vague");
	pod_annotate(&p, ANN_MEMORY_REQUEST, "lots");
	assert_true(provision_size(k, &p.cfg, &ch, &err) < 0);
	assert_non_null(strstr(err.msg, ANN_MEMORY_REQUEST));
	assert_non_null(strstr(err.msg, "\"vague\""));
}

/* The configured reserve for the cell's OS and agent is added: 0.4 GiB + 256 MiB no longer
 * fits a nano. */
static void test_provision__reserve_is_added(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch;

	k->cfg.reserve_memory_bytes = 256 * MIB;
	pod_init(&p, "reserved");
	pod_annotate(&p, ANN_MEMORY_REQUEST, "0.4Gi");
	size_ok(k, &p, &ch);
	assert_true(ch.memory_bytes >= 1 * GIB);
	assert_null(strstr(ch.instance_type, ".nano"));
	size_choice_release(&ch);
	k->cfg.reserve_memory_bytes = 0;
}

/* The configured default type serves pods that state no demand, and only those. */
static void test_provision__default_instance_type(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch;

	free(k->cfg.default_instance_type);
	k->cfg.default_instance_type = xstrdup("m5.large");
	pod_init(&p, "plain");
	size_ok(k, &p, &ch);
	assert_string_equal(ch.instance_type, "m5.large");
	size_choice_release(&ch);

	pod_init(&p, "sized");
	pod_annotate(&p, ANN_MEMORY_REQUEST, "400Mi");
	size_ok(k, &p, &ch);
	assert_string_not_equal(ch.instance_type, "m5.large");
	size_choice_release(&ch);
}

/* A GPU demand picks a type with a GPU. */
static void test_provision__gpu_annotation(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct size_choice ch;
	const struct catalog_type *t;

	pod_init(&p, "trainer");
	pod_annotate(&p, ANN_GPU_REQUEST, "1");
	size_ok(k, &p, &ch);
	t = catalog_find(k->catalog, ch.instance_type);
	assert_non_null(t);
	assert_true(t->gpus >= 1);
	size_choice_release(&ch);
}

/* A demand annotation past what a quantity holds, whatever its exponent or resource, is the
 * pod's fault (-EINVAL, INVALID_ARGUMENT over CRI), named with the annotation and the pod. */
static void test_provision__out_of_range_quantity_is_invalid(void **state)
{
	static const struct {
		const char *key, *value;
	} cases[] = {
		{ ANN_CPU_REQUEST, "1e400" },
		{ ANN_CPU_REQUEST, "1e99999999999" },
		{ ANN_CPU_REQUEST, "9223372036854776" },
		{ ANN_MEMORY_REQUEST, "8Ei" },
		{ ANN_MEMORY_REQUEST, "1E400" },
		{ ANN_GPU_REQUEST, "1e400" },
	};
	struct kiyot *k = *state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pod p;
		struct size_choice ch = { 0 };
		struct err err = ERR_INIT;

		pod_init(&p, "huge");
		pod_annotate(&p, cases[i].key, cases[i].value);
		if (provision_size(k, &p.cfg, &ch, &err) != -EINVAL)
			fail_msg("%s: %s: %s (%d), not -EINVAL", cases[i].key, cases[i].value,
				 err.msg, err.code);
		assert_null(ch.instance_type);
		assert_non_null(strstr(err.msg, "pod \"huge\""));
		assert_non_null(strstr(err.msg, cases[i].key));
		assert_non_null(strstr(err.msg, cases[i].value));
		assert_non_null(strstr(err.msg, "out of range"));
	}
}

/* The largest GPU demand a quantity holds rounds up to whole GPUs without wrapping around to
 * none (which would have fitted the pod on a type without a GPU). */
static void test_provision__largest_gpu_demand_does_not_wrap(void **state)
{
	struct kiyot *k = *state;
	struct pod p;
	struct pod_demand d;
	struct size_choice ch = { 0 };
	struct err err = ERR_INIT;
	unsigned from;

	pod_init(&p, "greedy");
	pod_annotate(&p, ANN_GPU_REQUEST, "9223372036854775807m");
	assert_int_equal(provision_demand(&p.cfg, NULL, &d, &from, &err), 0);
	assert_int_equal(d.gpus, 9223372036854776LL);
	assert_int_equal(provision_size(k, &p.cfg, &ch, &err), -ENOENT);
	assert_null(ch.instance_type);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_provision__pod_of_0_4_gib_lands_on_a_nano),
		cmocka_unit_test(test_provision__demand_from_annotations),
		cmocka_unit_test(test_provision__demand_from_sandbox_resources),
		cmocka_unit_test(test_provision__cpu_quota_over_period),
		cmocka_unit_test(test_provision__minimum_shares_mean_no_demand),
		cmocka_unit_test(test_provision__annotations_win_over_resources),
		cmocka_unit_test(test_provision__spot_annotation),
		cmocka_unit_test(test_provision__instance_type_annotation),
		cmocka_unit_test(test_provision__unknown_instance_type_is_named),
		cmocka_unit_test(test_provision__bad_launch_type_names_the_annotation),
		cmocka_unit_test(test_provision__impossible_demand_names_the_pod),
		cmocka_unit_test(test_provision__bad_quantity_names_the_annotation),
		cmocka_unit_test(test_provision__reserve_is_added),
		cmocka_unit_test(test_provision__default_instance_type),
		cmocka_unit_test(test_provision__gpu_annotation),
		cmocka_unit_test(test_provision__spot_fallback_annotation),
		cmocka_unit_test(test_provision__out_of_range_quantity_is_invalid),
		cmocka_unit_test(test_provision__largest_gpu_demand_does_not_wrap),
	};

	/* one kiyot for the group: the catalog is parsed once */
	return cmocka_run_group_tests(tests, setup, teardown);
}
