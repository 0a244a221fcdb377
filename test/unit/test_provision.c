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
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sizing/catalog.h"
#include "platforms.h"
#include "registry.h"
#include "daemon/kiyot.h"
#include "cells/provision.h"
#include "sizing/sizing.h"
#include "providers/provider.h"
#include "xalloc.h"

#include "reader_fixture.h"

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
	/* the shipped Spot Instance Advisor table gives the type its band, which the reason
	 * names */
	assert_true(t->spot_band >= 0);
	{
		_cleanup_free_ char *want =
			xasprintf(", interruption %s", catalog_spot_band_name(t->spot_band));

		if (!strstr(ch.reason, want))
			fail_msg("reason \"%s\" lacks \"%s\"", ch.reason, want);
	}
	/* the provider gets the spot prices of the type and its runners-up, with their bands */
	assert_int_equal(ch.n_zone_prices, 1 + ch.n_alternatives);
	assert_string_equal(ch.zone_prices[0].instance_type, ch.instance_type);
	assert_null(ch.zone_prices[0].zone);
	assert_true(ch.zone_prices[0].price == t->spot_price);
	assert_int_equal(ch.zone_prices[0].band, t->spot_band);
	for (size_t i = 0; i < ch.n_alternatives; i++)
		assert_string_equal(ch.zone_prices[1 + i].instance_type, ch.alternatives[i]);
	size_choice_release(&ch);

	pod_init(&p, "steady");
	pod_annotate(&p, ANN_LAUNCH_TYPE, "on-demand");
	pod_annotate(&p, ANN_MEMORY_REQUEST, "400Mi");
	size_ok(k, &p, &ch);
	assert_false(ch.spot);
	t = catalog_find(k->catalog, ch.instance_type);
	assert_true(ch.price == t->price);
	assert_int_equal(ch.n_zone_prices, 0);
	size_choice_release(&ch);
}

/* A refreshed catalog's per-zone spot prices reach the choice of a spot pod. */
static void test_provision__spot_choice_carries_zone_prices(void **state)
{
	struct kiyot *k = *state;
	struct catalog_type *types = xcalloc(1, sizeof(*types));
	struct catalog *next;
	struct pod p;
	struct size_choice ch;

	types[0] = (struct catalog_type){ xstrdup("t3.nano"),
					  2,
					  0.5,
					  2000,
					  512 * MIB,
					  0,
					  false,
					  2,
					  0.0052,
					  0.0030,
					  xstrdup("current"),
					  CATALOG_ARCH_X86_64,
					  2,
					  NULL,
					  0,
					  CATALOG_FROM_SHIPPED,
					  CATALOG_FROM_SHIPPED };
	types[0].zone_spot = xcalloc(2, sizeof(*types[0].zone_spot));
	snprintf(types[0].zone_spot[0].zone, sizeof(types[0].zone_spot[0].zone), "us-east-1a");
	types[0].zone_spot[0].price = 0.0041;
	snprintf(types[0].zone_spot[1].zone, sizeof(types[0].zone_spot[1].zone), "us-east-1c");
	types[0].zone_spot[1].price = 0.0022;
	types[0].n_zone_spot = 2;
	next = catalog_new("us-east-1", types, 1);
	catalog_publish(k->catalog, next);
	pod_init(&p, "spotty");
	pod_annotate(&p, ANN_LAUNCH_TYPE, "spot");
	pod_annotate(&p, ANN_MEMORY_REQUEST, "100Mi");
	size_ok(k, &p, &ch);
	assert_string_equal(ch.instance_type, "t3.nano");
	assert_int_equal(ch.n_zone_prices, 3);
	assert_null(ch.zone_prices[0].zone);
	assert_string_equal(ch.zone_prices[2].zone, "us-east-1c");
	assert_true(ch.zone_prices[2].price == 0.0022);
	assert_int_equal(ch.zone_prices[2].band, 2);
	assert_non_null(strstr(ch.reason, "t3.nano $0.0030/h spot"));
	assert_non_null(strstr(ch.reason, ", interruption 10-15%"));
	size_choice_release(&ch);
	/* a type without a band says so */
	types = xcalloc(1, sizeof(*types));
	types[0] = (struct catalog_type){ .name = xstrdup("t3.nano"),
					  .cpu = 2,
					  .memory_gib = 0.5,
					  .cpu_milli = 2000,
					  .memory_bytes = 512 * MIB,
					  .baseline = 2,
					  .price = 0.0052,
					  .spot_price = 0.0030,
					  .generation = xstrdup("current"),
					  .arch = CATALOG_ARCH_X86_64,
					  .spot_band = CATALOG_SPOT_BAND_UNKNOWN };
	catalog_publish(k->catalog, catalog_new("us-east-1", types, 1));
	pod_init(&p, "spotty-2");
	pod_annotate(&p, ANN_LAUNCH_TYPE, "spot");
	pod_annotate(&p, ANN_MEMORY_REQUEST, "100Mi");
	size_ok(k, &p, &ch);
	assert_int_equal(ch.zone_prices[0].band, CATALOG_SPOT_BAND_UNKNOWN);
	assert_non_null(strstr(ch.reason, ", interruption band unknown"));
	size_choice_release(&ch);
	catalog_publish(k->catalog, NULL);
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

/* ---- architectures: which images offer arm64, pins, the provider's images ---- */

#define MT_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define CFG_DIGEST "sha256:c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0"

/* A registry of a few images, by "repository:reference". */
struct fake_image {
	const char *ref; /* "library/multi:1" */
	const char *media_type;
	const char *body;
	const char *config; /* a single manifest's config blob */
	int fail;	    /* errno to fail with */
};

static const struct fake_image fake_images[] = {
	{ "library/multi:1", MT_INDEX,
	  "{\"schemaVersion\":2,\"manifests\":["
	  "{\"digest\":\"sha256:1111111111111111111111111111111111111111111111111111111111111111\","
	  "\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}},"
	  "{\"digest\":\"sha256:2222222222222222222222222222222222222222222222222222222222222222\","
	  "\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\",\"variant\":\"v8\"}"
	  "}]}",
	  NULL, 0 },
	{ "library/multi2:1", MT_INDEX,
	  "{\"schemaVersion\":2,\"manifests\":["
	  "{\"digest\":\"sha256:3333333333333333333333333333333333333333333333333333333333333333\","
	  "\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}},"
	  "{\"digest\":\"sha256:4444444444444444444444444444444444444444444444444444444444444444\","
	  "\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}}]}",
	  NULL, 0 },
	/* an index with amd64 and s390x, and arm64 only for Windows: no linux/arm64 */
	{ "library/noarm:1", MT_INDEX,
	  "{\"schemaVersion\":2,\"manifests\":["
	  "{\"digest\":\"sha256:5555555555555555555555555555555555555555555555555555555555555555\","
	  "\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}},"
	  "{\"digest\":\"sha256:6666666666666666666666666666666666666666666666666666666666666666\","
	  "\"size\":1,\"platform\":{\"os\":\"windows\",\"architecture\":\"arm64\"}},"
	  "{\"digest\":\"sha256:7777777777777777777777777777777777777777777777777777777777777777\","
	  "\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":\"s390x\"}}]}",
	  NULL, 0 },
	/* one image manifest whose config says amd64 */
	{ "library/amd64only:1", MT_MANIFEST,
	  "{\"schemaVersion\":2,\"config\":{\"mediaType\":\"application/"
	  "vnd.oci.image.config.v1+json\","
	  "\"digest\":\"" CFG_DIGEST "\",\"size\":40},\"layers\":[]}",
	  "{\"os\":\"linux\",\"architecture\":\"amd64\"}", 0 },
	{ "library/down:1", NULL, NULL, NULL, ECONNREFUSED },
};

static int fake_calls;

static const struct fake_image *fake_find(const struct image_ref *ref, const char *reference)
{
	char key[256];

	snprintf(key, sizeof(key), "%s:%s", ref->repository, reference);
	for (size_t i = 0; i < ARRAY_SIZE(fake_images); i++)
		if (strcmp(fake_images[i].ref, key) == 0)
			return &fake_images[i];
	return NULL;
}

static int fake_manifest(void *ctx, const struct regconf *rc, const struct image_ref *ref,
			 const struct image_auth *auth, const char *reference,
			 struct reg_manifest *out, struct err *err)
{
	const struct fake_image *im = fake_find(ref, reference);

	(void)ctx;
	(void)rc;
	(void)auth;
	fake_calls++;
	if (!im)
		return err_set(err, ENOENT, "manifest unknown (404)");
	if (im->fail)
		return err_set(err, im->fail, "https://%s/v2/: connection refused", ref->host);
	out->body = xstrdup(im->body);
	out->len = strlen(im->body);
	out->media_type = xstrdup(im->media_type);
	out->digest = xasprintf("sha256:%064zx", (size_t)(im - fake_images) + 0xabc);
	return 0;
}

static int fake_blob(void *ctx, const struct regconf *rc, const struct image_ref *ref,
		     const struct image_auth *auth, const char *digest, size_t max, char **out,
		     size_t *len, struct err *err)
{
	(void)ctx;
	(void)rc;
	(void)auth;
	(void)max;
	fake_calls++;
	for (size_t i = 0; i < ARRAY_SIZE(fake_images); i++) {
		if (fake_images[i].config && strcmp(digest, CFG_DIGEST) == 0 &&
		    strcmp(ref->repository, "library/amd64only") == 0) {
			*out = xstrdup(fake_images[i].config);
			*len = strlen(*out);
			return 0;
		}
	}
	return err_set(err, ENOENT, "blob unknown (404)");
}

/* An EC2 kiyot (with an arm64 cell image when arm64) whose image look-ups go to the fake
 * registry, with an empty cache. */
static struct oci_platforms *arch_setup(struct kiyot *k, bool arm64_image)
{
	static const struct oci_fetcher f = { fake_manifest, fake_blob, NULL };
	struct oci_platforms *pl = oci_platforms_new(&f);

	free(k->cfg.provider);
	k->cfg.provider = xstrdup("ec2");
	free(k->cfg.ec2.image_id_arm64);
	k->cfg.ec2.image_id_arm64 = arm64_image ? xstrdup("ami-arm64") : NULL;
	provision_use_platforms(pl);
	fake_calls = 0;
	return pl;
}

static void arch_teardown(struct kiyot *k, struct oci_platforms *pl)
{
	provision_use_platforms(NULL);
	oci_platforms_free(pl);
	free(k->cfg.provider);
	k->cfg.provider = xstrdup("local");
	free(k->cfg.ec2.image_id_arm64);
	k->cfg.ec2.image_id_arm64 = NULL;
}

/* A Pod object of a small pod: its init container, app containers and spec extras (JSON
 * members after the containers, e.g. "\"nodeSelector\":{...}", or ""). */
static struct podspec *pod_of(const char *init_image, const char *image, const char *image2,
			      const char *extra)
{
	_cleanup_free_ char *text = xasprintf(
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"arch\","
		"\"namespace\":\"default\",\"uid\":\"0b5e3c1e-"
		"uid\"},"
		"\"spec\":{%s%s%s\"containers\":[{\"name\":\"a\",\"image\":\"%s\",\"resources\":"
		"{\"requests\":{\"cpu\":\"100m\",\"memory\":\"200Mi\"}}}%s%s%s]%s%s}}",
		init_image ? "\"initContainers\":[{\"name\":\"i\",\"image\":\"" : "",
		init_image ? init_image : "", init_image ? "\"}]," : "", image,
		image2 ? ",{\"name\":\"b\",\"image\":\"" : "", image2 ? image2 : "",
		image2 ? "\"}" : "", extra[0] ? "," : "", extra);

	return rfix_pod(text);
}

/* Sizes pod ps (annotations of p); fails the test with kiyot's message otherwise. */
static void size_pod_ok(struct kiyot *k, struct pod *p, const struct podspec *ps,
			struct size_choice *out)
{
	struct err err = ERR_INIT;

	memset(out, 0, sizeof(*out));
	if (provision_size_pod(k, &p->cfg, ps, out, &err) < 0)
		fail_msg("provision_size_pod: %s", err.msg);
}

/* Every image (init container and sidecar included) offers linux/arm64: the cheapest type of
 * either architecture wins, here an arm64 one, and the reason says why. A second pod of the
 * same images asks the registry nothing (cached by reference). */
static void test_provision__multi_arch_images_may_go_arm64(void **state)
{
	struct kiyot *k = *state;
	struct oci_platforms *pl = arch_setup(k, true);
	struct podspec *ps = pod_of("registry.example/library/multi:1",
				    "registry.example/library/multi2:1",
				    "registry.example/library/multi:1", "");
	struct size_choice ch;
	struct pod p;
	int calls;

	pod_init(&p, "arch");
	size_pod_ok(k, &p, ps, &ch);
	assert_int_equal(ch.arch, CATALOG_ARCH_ARM64);
	assert_int_equal(catalog_find(k->catalog, ch.instance_type)->arch & CATALOG_ARCH_ARM64,
			 CATALOG_ARCH_ARM64);
	assert_non_null(strstr(ch.reason, "every image offers linux/arm64"));
	assert_non_null(strstr(ch.reason, "(arm64)"));
	size_choice_release(&ch);
	calls = fake_calls;
	assert_true(calls >= 2);
	size_pod_ok(k, &p, ps, &ch);
	assert_int_equal(ch.arch, CATALOG_ARCH_ARM64);
	assert_int_equal(fake_calls, calls);
	size_choice_release(&ch);
	podspec_free(ps);
	arch_teardown(k, pl);
}

/* One amd64-only image among multi-arch ones (a sidecar here, an init container next) keeps
 * the pod on x86_64, and the reason names the image. */
static void test_provision__one_amd64_only_image_never_goes_arm64(void **state)
{
	struct kiyot *k = *state;
	struct oci_platforms *pl = arch_setup(k, true);
	const char *const layouts[][3] = {
		{ NULL, "registry.example/library/multi:1",
		  "registry.example/library/amd64only:1" },
		{ "registry.example/library/amd64only:1", "registry.example/library/multi:1",
		  NULL },
	};

	for (size_t i = 0; i < ARRAY_SIZE(layouts); i++) {
		struct podspec *ps = pod_of(layouts[i][0], layouts[i][1], layouts[i][2], "");
		struct size_choice ch;
		struct pod p;

		pod_init(&p, "arch");
		size_pod_ok(k, &p, ps, &ch);
		assert_int_equal(ch.arch, CATALOG_ARCH_X86_64);
		assert_true(catalog_find(k->catalog, ch.instance_type)->arch & CATALOG_ARCH_X86_64);
		assert_non_null(
			strstr(ch.reason,
			       "image registry.example/library/amd64only:1 offers x86_64 only"));
		size_choice_release(&ch);
		podspec_free(ps);
	}
	arch_teardown(k, pl);
}

/* An index whose platforms hold no linux/arm64 (arm64 for Windows only) keeps x86_64. */
static void test_provision__index_without_linux_arm64_stays_x86_64(void **state)
{
	struct kiyot *k = *state;
	struct oci_platforms *pl = arch_setup(k, true);
	struct podspec *ps = pod_of(NULL, "registry.example/library/noarm:1", NULL, "");
	struct size_choice ch;
	struct pod p;

	pod_init(&p, "arch");
	size_pod_ok(k, &p, ps, &ch);
	assert_int_equal(ch.arch, CATALOG_ARCH_X86_64);
	assert_non_null(strstr(ch.reason, "library/noarm:1 offers x86_64 only"));
	size_choice_release(&ch);
	podspec_free(ps);
	arch_teardown(k, pl);
}

/* A registry that fails during the check (refused, unknown image) leaves the pod on x86_64,
 * launched all the same, and the reason says the check failed and why. */
static void test_provision__registry_failure_falls_back_to_x86_64(void **state)
{
	struct kiyot *k = *state;
	struct oci_platforms *pl = arch_setup(k, true);
	const char *const images[] = { "registry.example/library/down:1",
				       "registry.example/library/gone:1" };

	for (size_t i = 0; i < ARRAY_SIZE(images); i++) {
		struct podspec *ps =
			pod_of(NULL, "registry.example/library/multi:1", images[i], "");
		struct size_choice ch;
		struct pod p;

		pod_init(&p, "arch");
		size_pod_ok(k, &p, ps, &ch);
		assert_int_equal(ch.arch, CATALOG_ARCH_X86_64);
		assert_non_null(strstr(ch.reason, "arm64 not checked: image "));
		assert_non_null(
			strstr(ch.reason, i == 0 ? "connection refused" : "manifest unknown"));
		size_choice_release(&ch);
		podspec_free(ps);
	}
	arch_teardown(k, pl);
}

/* A pod pinned to amd64 (annotation, nodeSelector, required node affinity) stays on x86_64
 * without asking the registry, and the reason names the pin; pinned to arm64, it goes arm64. */
static void test_provision__pinned_pods_keep_their_architecture(void **state)
{
	struct kiyot *k = *state;
	struct oci_platforms *pl = arch_setup(k, true);
	const struct {
		const char *ann, *extra, *by;
		unsigned want;
	} cases[] = {
		{ "amd64", "", "pinned by annotation pod.elotl.co/architecture",
		  CATALOG_ARCH_X86_64 },
		{ "x86_64", "", "pinned by annotation", CATALOG_ARCH_X86_64 },
		{ NULL, "\"nodeSelector\":{\"kubernetes.io/arch\":\"amd64\"}",
		  "pinned by nodeSelector kubernetes.io/arch", CATALOG_ARCH_X86_64 },
		{ NULL,
		  "\"affinity\":{\"nodeAffinity\":{"
		  "\"requiredDuringSchedulingIgnoredDuringExecution\":"
		  "{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"kubernetes.io/arch\","
		  "\"operator\":\"In\",\"values\":[\"amd64\"]}]}]}}}",
		  "pinned by required node affinity", CATALOG_ARCH_X86_64 },
		{ NULL,
		  "\"affinity\":{\"nodeAffinity\":{"
		  "\"requiredDuringSchedulingIgnoredDuringExecution\":"
		  "{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"kubernetes.io/arch\","
		  "\"operator\":\"NotIn\",\"values\":[\"arm64\"]}]}]}}}",
		  "pinned by required node affinity", CATALOG_ARCH_X86_64 },
		{ "arm64", "", "pinned by annotation", CATALOG_ARCH_ARM64 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct podspec *ps =
			pod_of(NULL, "registry.example/library/multi:1", NULL, cases[i].extra);
		struct size_choice ch;
		struct pod p;

		pod_init(&p, "arch");
		if (cases[i].ann)
			pod_annotate(&p, ANN_ARCHITECTURE, cases[i].ann);
		size_pod_ok(k, &p, ps, &ch);
		assert_int_equal(ch.arch, cases[i].want);
		assert_non_null(strstr(ch.reason, cases[i].by));
		size_choice_release(&ch);
		podspec_free(ps);
	}
	assert_int_equal(fake_calls, 0);
	arch_teardown(k, pl);
}

/* Without an arm64 cell image (ec2.imageIds has none) no pod goes arm64, the reason says
 * why, and a pod pinned to arm64 fails naming its pin and what to do. */
static void test_provision__no_arm64_cell_image_means_x86_64(void **state)
{
	struct kiyot *k = *state;
	struct oci_platforms *pl = arch_setup(k, false);
	struct podspec *ps = pod_of(NULL, "registry.example/library/multi:1", NULL, "");
	struct size_choice ch;
	struct err err = ERR_INIT;
	struct pod p;

	pod_init(&p, "arch");
	size_pod_ok(k, &p, ps, &ch);
	assert_int_equal(ch.arch, CATALOG_ARCH_X86_64);
	assert_non_null(strstr(ch.reason, "no arm64 cell image in ec2.imageIds"));
	size_choice_release(&ch);
	assert_int_equal(fake_calls, 0);
	pod_annotate(&p, ANN_ARCHITECTURE, "arm64");
	memset(&ch, 0, sizeof(ch));
	assert_int_equal(provision_size_pod(k, &p.cfg, ps, &ch, &err), -EINVAL);
	assert_null(ch.instance_type);
	assert_non_null(strstr(err.msg, "pod \"arch\": annotation pod.elotl.co/architecture asks "
					"for arm64"));
	assert_non_null(strstr(err.msg, "add an arm64 image to ec2.imageIds"));
	podspec_free(ps);
	arch_teardown(k, pl);
}

/* A bad architecture annotation is refused naming it. */
static void test_provision__bad_architecture_annotation_is_named(void **state)
{
	struct kiyot *k = *state;
	struct oci_platforms *pl = arch_setup(k, true);
	struct size_choice ch = { 0 };
	struct err err = ERR_INIT;
	struct pod p;

	pod_init(&p, "arch");
	pod_annotate(&p, ANN_ARCHITECTURE, "sparc");
	assert_int_equal(provision_size(k, &p.cfg, &ch, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "annotation pod.elotl.co/architecture: \"sparc\" is not an "
					"architecture; use amd64 (x86_64) or arm64"));
	arch_teardown(k, pl);
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
		cmocka_unit_test(test_provision__spot_choice_carries_zone_prices),
		cmocka_unit_test(test_provision__out_of_range_quantity_is_invalid),
		cmocka_unit_test(test_provision__largest_gpu_demand_does_not_wrap),
		cmocka_unit_test(test_provision__multi_arch_images_may_go_arm64),
		cmocka_unit_test(test_provision__one_amd64_only_image_never_goes_arm64),
		cmocka_unit_test(test_provision__index_without_linux_arm64_stays_x86_64),
		cmocka_unit_test(test_provision__registry_failure_falls_back_to_x86_64),
		cmocka_unit_test(test_provision__pinned_pods_keep_their_architecture),
		cmocka_unit_test(test_provision__no_arm64_cell_image_means_x86_64),
		cmocka_unit_test(test_provision__bad_architecture_annotation_is_named),
	};

	/* one kiyot for the group: the catalog is parsed once */
	return cmocka_run_group_tests(tests, setup, teardown);
}
