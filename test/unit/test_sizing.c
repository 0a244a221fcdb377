/* Unit tests for kiyot/sizing: pod demand -> cheapest fitting instance type. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../kiyot/sizing.h"
#include "yaml.h"

#define GIB 1073741824LL

/* Loads the embedded us-east-1 catalog for a test group. */
static int setup_us_east_1(void **state)
{
	struct err err = ERR_INIT;
	struct catalog *c = NULL;

	if (catalog_load("us-east-1", &c, &err) < 0)
		return -1;
	*state = c;
	return 0;
}

static int teardown_catalog(void **state)
{
	catalog_free(*state);
	return 0;
}

/* Reads a pod manifest given as YAML text. */
static struct podspec *pod_from_yaml(const char *text)
{
	struct err err = ERR_INIT;
	struct podspec *p = NULL;
	json_t *j = NULL;

	if (yaml_to_json(text, strlen(text), &j, &err) < 0 || podspec_from_json(j, &p, &err) < 0)
		fail_msg("%s", err.msg);
	json_decref(j);
	return p;
}

/*
 * The seed behaviour: a pod asking for 0.4 GiB (429496730 bytes) lands on a 0.5 GiB nano type.
 * In the shipped us-east-1 prices t3a.nano ($0.0047/h) is cheaper than t3.nano ($0.0052/h).
 */
static void test_sizing__pod_of_0_4_gib_lands_on_a_nano(void **state)
{
	struct podspec *p = pod_from_yaml("{apiVersion: v1, kind: Pod, metadata: {name: small}, "
					  "spec: {containers: [{name: c, image: x, resources: "
					  "{requests: {cpu: 250m, memory: 0.4Gi}}}]}}");
	struct err err = ERR_INIT;
	struct pod_demand d;
	struct sizing_choice ch;

	assert_int_equal(sizing_demand_from_podspec(p, &d, &err), 0);
	assert_int_equal(d.memory_bytes, 429496730);
	assert_int_equal(d.cpu_milli, 250);
	assert_false(d.spot);
	assert_null(d.instance_type);
	if (sizing_pick(*state, &d, NULL, &ch, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(ch.instance_type, "t3a.nano");
	assert_int_equal(ch.memory_bytes, 536870912);
	assert_true(ch.price == 0.0047);
	assert_true(ch.cpu == 2);
	assert_true(ch.burstable);
	assert_true(ch.baseline == 0.1);
	assert_string_equal(
		ch.reason,
		"cheapest fitting 0.25 vCPU/0.40 GiB: t3a.nano $0.0047/h, burstable with "
		"baseline 0.10 vCPU (runners-up: t3.nano $0.0052/h, t2.nano $0.0058/h, "
		"t3a.micro $0.0094/h)");
	podspec_free(p);
}

/* 400Mi also fits 0.5 GiB; as spot, t3.nano and t3a.nano tie on price and the name decides. */
static void test_sizing__spot_ties_break_by_name(void **state)
{
	struct pod_demand d = { .memory_bytes = 400LL << 20, .spot = true };
	struct err err = ERR_INIT;
	struct sizing_choice ch;

	assert_int_equal(sizing_pick(*state, &d, NULL, &ch, &err), 0);
	assert_string_equal(ch.instance_type, "t3.nano");
	assert_true(ch.spot);
	assert_true(ch.price == 0.0016);
	assert_non_null(strstr(ch.reason, "t3.nano $0.0016/h spot"));
	assert_non_null(strstr(ch.reason, "(runners-up: t3a.nano $0.0016/h, t1.micro $0.0020/h"));
}

/* A pod without requests gets the cheapest type of the region. */
static void test_sizing__no_requests_gets_cheapest_overall(void **state)
{
	struct podspec *p = pod_from_yaml("{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: "
					  "{containers: [{name: c, image: x}]}}");
	struct err err = ERR_INIT;
	struct pod_demand d;
	struct sizing_choice ch;
	double cheapest = 1e9;

	for (size_t i = 0; i < catalog_count(*state); i++) {
		double pr = catalog_at(*state, i)->price;

		cheapest = pr < cheapest ? pr : cheapest;
	}
	assert_int_equal(sizing_demand_from_podspec(p, &d, &err), 0);
	assert_int_equal(d.cpu_milli, 0);
	assert_int_equal(d.memory_bytes, 0);
	assert_int_equal(sizing_pick(*state, &d, NULL, &ch, &err), 0);
	assert_true(ch.price == cheapest);
	assert_string_equal(ch.instance_type, "t3a.nano");
	podspec_free(p);
}

/* A reserve for the cell's OS moves a 0.4 GiB pod off the 0.5 GiB types. */
static void test_sizing__reserve_is_added(void **state)
{
	struct pod_demand d = { .memory_bytes = 429496730 };
	struct sizing_reserve r = { .cpu_milli = 0, .memory_bytes = 256LL << 20 };
	struct err err = ERR_INIT;
	struct sizing_choice ch;

	assert_int_equal(sizing_pick(*state, &d, &r, &ch, &err), 0);
	assert_true(ch.memory_bytes >= 429496730 + (256LL << 20));
	assert_string_equal(ch.instance_type, "t3a.micro");
}

struct scase {
	int64_t cpu_milli, memory_bytes, gpus;
	bool spot;
	const char *type;
	const char *want;
};

/* A table of demands and the type each one gets in us-east-1. */
static void test_sizing__picks_table(void **state)
{
	static const struct scase cases[] = {
		{ 2500, 0, 0, false, NULL, "t3a.xlarge" },
		{ 4000, 16 * GIB, 0, false, "c5*", "c5a.2xlarge" },
		{ 1000, 1 * GIB, 0, false, "m5.large", "m5.large" },
		{ 0, 0, 1, false, NULL, "g4dn.xlarge" },
		{ 128000, 3904 * GIB, 0, false, NULL, "x1e.32xlarge" },
		{ 0, 0, 0, false, "t2.*", "t2.nano" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pod_demand d = { cases[i].cpu_milli, cases[i].memory_bytes, cases[i].gpus,
					cases[i].spot, cases[i].type };
		struct err err = ERR_INIT;
		struct sizing_choice ch;

		if (sizing_pick(*state, &d, NULL, &ch, &err) < 0)
			fail_msg("case %zu: %s", i, err.msg);
		if (strcmp(ch.instance_type, cases[i].want) != 0)
			fail_msg("case %zu: got %s want %s (%s)", i, ch.instance_type,
				 cases[i].want, ch.reason);
		assert_true(ch.cpu_milli >= cases[i].cpu_milli);
		assert_true(ch.memory_bytes >= cases[i].memory_bytes);
		assert_true(ch.gpus >= cases[i].gpus);
	}
}

/* The reason names the pattern when the annotation narrows the choice. */
static void test_sizing__reason_names_the_pattern(void **state)
{
	struct pod_demand d = { .cpu_milli = 1000,
				.memory_bytes = GIB,
				.instance_type = "m5.large" };
	struct err err = ERR_INIT;
	struct sizing_choice ch;

	assert_int_equal(sizing_pick(*state, &d, NULL, &ch, &err), 0);
	assert_string_equal(ch.reason, "cheapest fitting 1.00 vCPU/1.00 GiB matching \"m5.large\": "
				       "m5.large $0.0960/h");
	assert_false(ch.burstable);
	assert_true(ch.baseline == 2);
}

struct sbad {
	int64_t cpu_milli, memory_bytes, gpus;
	const char *type;
	struct sizing_reserve reserve;
	const char *msg;
};

/* When nothing fits, the error gives the demand, the region and what to change. */
static void test_sizing__errors(void **state)
{
	static const struct sbad cases[] = {
		{ 200000,
		  4 * 1024 * GIB,
		  0,
		  NULL,
		  { 0, 0 },
		  "pod demand 200 vCPU / 4 TiB fits no instance type in us-east-1; lower the pod's "
		  "requests or limits" },
		{ 0,
		  0,
		  0,
		  "c5.hugeX",
		  { 0, 0 },
		  "annotation pod.elotl.co/instance-type: \"c5.hugeX\" matches no instance type in "
		  "us-east-1" },
		{ 4000,
		  GIB,
		  0,
		  "t3.nano",
		  { 0, 0 },
		  "pod demand 4 vCPU / 1 GiB fits no instance type matching \"t3.nano\" in "
		  "us-east-1; lower the pod's requests or limits, or change annotation "
		  "pod.elotl.co/instance-type" },
		{ 1000,
		  GIB,
		  100,
		  NULL,
		  { 0, 0 },
		  "pod demand 1 vCPU / 1 GiB / 100 GPU fits no instance type in us-east-1; lower "
		  "the "
		  "pod's requests or limits" },
		{ 128000,
		  3904 * GIB,
		  0,
		  NULL,
		  { 250, GIB / 2 },
		  "pod demand 128 vCPU / 3.812 TiB (with the cell reserve of 0.25 vCPU / 0.5 GiB) "
		  "fits "
		  "no instance type in us-east-1; lower the pod's requests or limits" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pod_demand d = { cases[i].cpu_milli, cases[i].memory_bytes, cases[i].gpus,
					false, cases[i].type };
		struct err err = ERR_INIT;
		struct sizing_choice ch;

		assert_int_equal(sizing_pick(*state, &d, &cases[i].reserve, &ch, &err), -ENOENT);
		if (strcmp(err.msg, cases[i].msg) != 0)
			fail_msg("case %zu: %s", i, err.msg);
	}
}

/* Demand = max(largest init container, sum of app containers), limits counted when larger. */
static void test_sizing__demand_from_containers(void **state)
{
	struct podspec *p = pod_from_yaml(
		"{apiVersion: v1, kind: Pod, metadata: {name: p, annotations: "
		"{pod.elotl.co/launch-type: spot, pod.elotl.co/instance-type: 'c5*'}}, spec: {"
		"initContainers: [{name: i1, image: x, resources: {requests: {cpu: 3, memory: "
		"100Mi}}}, {name: i2, image: x, resources: {requests: {memory: 1Gi}}}],"
		"containers: [{name: a, image: x, resources: {requests: {cpu: 500m, memory: "
		"256Mi}, limits: {cpu: 1, memory: 512Mi, nvidia.com/gpu: 1}}},"
		"{name: b, image: x, resources: {requests: {cpu: 1500m, memory: 1Gi}}}]}}");
	struct err err = ERR_INIT;
	struct pod_demand d;
	(void)state;

	assert_int_equal(sizing_demand_from_podspec(p, &d, &err), 0);
	assert_int_equal(d.cpu_milli, 3000);		       /* init i1 (3) > 1 + 1.5 */
	assert_int_equal(d.memory_bytes, (512LL << 20) + GIB); /* limits of a + request of b */
	assert_int_equal(d.gpus, 1);
	assert_true(d.spot);
	assert_string_equal(d.instance_type, "c5*");
	podspec_free(p);
}

/* A launch type other than spot or on-demand is refused, naming the annotation. */
static void test_sizing__bad_launch_type(void **state)
{
	struct podspec *p = pod_from_yaml("{apiVersion: v1, kind: Pod, metadata: {name: p, "
					  "annotations: {pod.elotl.co/launch-type: cheap}}, spec: "
					  "{containers: [{name: c, image: x}]}}");
	struct err err = ERR_INIT;
	struct pod_demand d;
	(void)state;

	assert_int_equal(sizing_demand_from_podspec(p, &d, &err), -EINVAL);
	assert_string_equal(err.msg, "annotation pod.elotl.co/launch-type: \"cheap\" is not one of "
				     "spot, on-demand");
	podspec_free(p);
}

/* Equal prices go to less memory, then fewer vCPUs, then the name. */
static void test_sizing__tie_break_order(void **state)
{
	static const char text[] =
		"{\"r\": ["
		"{\"instanceType\": \"z.big\", \"cpu\": 4, \"memory\": 8, \"price\": 0.1},"
		"{\"instanceType\": \"b.small\", \"cpu\": 4, \"memory\": 4, \"price\": 0.1},"
		"{\"instanceType\": \"c.small\", \"cpu\": 2, \"memory\": 4, \"price\": 0.1},"
		"{\"instanceType\": \"a.small\", \"cpu\": 2, \"memory\": 4, \"price\": 0.1},"
		"{\"instanceType\": \"dear\", \"cpu\": 1, \"memory\": 1, \"price\": 0.2}]}";
	struct err err = ERR_INIT;
	struct catalog *c = NULL;
	struct pod_demand d = { 0 };
	struct sizing_choice ch;
	(void)state;

	assert_int_equal(catalog_load_text(text, strlen(text), "r", &c, &err), 0);
	assert_int_equal(sizing_pick(c, &d, NULL, &ch, &err), 0);
	assert_string_equal(ch.instance_type, "a.small");
	assert_string_equal(ch.reason, "cheapest fitting 0.00 vCPU/0.00 GiB: a.small $0.1000/h "
				       "(runners-up: c.small $0.1000/h, b.small $0.1000/h, z.big "
				       "$0.1000/h)");
	catalog_free(c);
}

/* Demand text: vCPUs and GiB (TiB from 1 TiB up) with at most three decimals. */
static void test_sizing__format_demand(void **state)
{
	char buf[96];
	(void)state;

	sizing_format_demand(250, 429496730, 0, buf, sizeof(buf));
	assert_string_equal(buf, "0.25 vCPU / 0.4 GiB");
	sizing_format_demand(200000, 4 * 1024 * GIB, 2, buf, sizeof(buf));
	assert_string_equal(buf, "200 vCPU / 4 TiB / 2 GPU");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizing__pod_of_0_4_gib_lands_on_a_nano),
		cmocka_unit_test(test_sizing__spot_ties_break_by_name),
		cmocka_unit_test(test_sizing__no_requests_gets_cheapest_overall),
		cmocka_unit_test(test_sizing__reserve_is_added),
		cmocka_unit_test(test_sizing__picks_table),
		cmocka_unit_test(test_sizing__reason_names_the_pattern),
		cmocka_unit_test(test_sizing__errors),
		cmocka_unit_test(test_sizing__demand_from_containers),
		cmocka_unit_test(test_sizing__bad_launch_type),
		cmocka_unit_test(test_sizing__tie_break_order),
		cmocka_unit_test(test_sizing__format_demand),
	};

	return cmocka_run_group_tests(tests, setup_us_east_1, teardown_catalog);
}
