/* Unit tests for kiyot/sizing: pod demand -> cheapest fitting instance type. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sizing/sizing.h"

#include "reader_fixture.h"

#define GIB 1073741824LL
#define MIB 1048576LL

/* No reserve, for the cases about the rule itself. */
static const struct sizing_reserve no_reserve = { 0, 0 };

/* Loads the us-east-1 catalog the rule's cases were written against (the December 2020
 * snapshot shipped before, kept as a file: the rule's cases do not move with the prices). */
static int setup_us_east_1(void **state)
{
	struct err err = ERR_INIT;
	struct catalog *c = NULL;

	if (catalog_load_file("kiyot/sizing/data/aws-instance-catalog-2020-us-east-1.json",
			      "us-east-1", &c, &err) < 0)
		return -1;
	*state = c;
	return 0;
}

static int teardown_catalog(void **state)
{
	catalog_free(*state);
	return 0;
}

/* Reads a pod from a fixture file under test/fixtures/sizing. */
static struct podspec *pod_fixture(const char *name)
{
	char path[256];
	struct err err = ERR_INIT;
	struct podspec *p = NULL;

	snprintf(path, sizeof(path), "test/fixtures/sizing/%s", name);
	if (podspec_from_yaml_file(path, &p, &err) < 0)
		fail_msg("%s: %s", path, err.msg);
	return p;
}

/* A catalog of one region "r" from JSON text. */
static struct catalog *catalog_of(const char *text)
{
	struct err err = ERR_INIT;
	struct catalog *c = NULL;

	if (catalog_load_text(text, strlen(text), "r", &c, &err) < 0)
		fail_msg("%s", err.msg);
	return c;
}

/* Prices are compared to the hundredth of a cent per hour at most. */
static void assert_price(double got, double want)
{
	if (fabs(got - want) > 1e-9)
		fail_msg("price %.6f, want %.6f", got, want);
}

/* Picks or fails the test with sizing's message. */
static void pick_ok(const struct catalog *c, const struct pod_demand *d,
		    const struct sizing_reserve *r, struct sizing_choice *ch)
{
	struct err err = ERR_INIT;

	if (sizing_pick(c, d, r, ch, &err) < 0)
		fail_msg("sizing_pick: %s", err.msg);
}

/*
 * The seed behaviour, with the default reserve: a pod asking for 0.4 GiB lands on a 0.5 GiB
 * nano type, t3a.nano ($0.0047/h) being cheaper than t3.nano ($0.0052/h) in the shipped
 * us-east-1 prices. The decision names the runners-up with their prices.
 */
static void test_sizing__pod_of_0_4_gib_lands_on_a_nano(void **state)
{
	struct podspec *p = pod_fixture("nano.yaml");
	struct sizing_reserve dflt = SIZING_RESERVE_DEFAULT;
	struct err err = ERR_INIT;
	struct pod_demand d;
	struct sizing_choice ch, ch2;

	assert_int_equal(sizing_demand_from_podspec(p, &d, &err), 0);
	assert_int_equal(d.memory_bytes, 429496730);
	assert_int_equal(d.cpu_milli, 0);
	assert_false(d.spot);
	assert_null(d.instance_type);
	pick_ok(*state, &d, NULL, &ch);
	assert_string_equal(ch.instance_type, "t3a.nano");
	assert_int_equal(ch.memory_bytes, 512 * MIB);
	assert_price(ch.price, 0.0047);
	assert_price(ch.list_price, 0.0047);
	assert_price(ch.credit_price, 0);
	assert_true(ch.cpu == 2);
	assert_true(ch.burstable);
	assert_true(ch.baseline == 0.1);
	assert_int_equal(ch.n_runners_up, 3);
	assert_string_equal(ch.runners_up[0].instance_type, "t3.nano");
	assert_price(ch.runners_up[0].price, 0.0052);
	assert_string_equal(ch.runners_up[2].instance_type, "t3a.micro");
	assert_string_equal(ch.reason,
			    "cheapest fitting 0 vCPU / 0.4 GiB + reserve 0 vCPU / 64 MiB: "
			    "t3a.nano $0.0047/h (catalog file "
			    "kiyot/sizing/data/aws-instance-catalog-2020-us-east-1.json), "
			    "burstable with baseline 0.10 vCPU (runners-up: "
			    "t3.nano $0.0052/h, t2.nano $0.0058/h, t3a.micro $0.0094/h)");
	/* NULL is the default reserve */
	pick_ok(*state, &d, &dflt, &ch2);
	assert_string_equal(ch2.reason, ch.reason);
	assert_int_equal(dflt.cpu_milli, 0);
	assert_int_equal(dflt.memory_bytes, 64 * MIB);
	podspec_free(p);
}

/*
 * A pod that sustains 0.25 vCPU is over a nano's 0.1 vCPU baseline: with the surplus credits
 * ($0.05 per vCPU-hour on t3a) the nano costs more than a micro, whose baseline is 0.2.
 */
static void test_sizing__sustained_cpu_pays_credits_on_a_nano(void **state)
{
	struct pod_demand d = { .cpu_milli = 250, .memory_bytes = 429496730 };
	struct sizing_choice ch;

	pick_ok(*state, &d, NULL, &ch);
	assert_string_equal(ch.instance_type, "t3a.micro");
	assert_price(ch.list_price, 0.0094);
	assert_price(ch.credit_price, 0.05 * 0.05); /* 0.25 - 0.20 vCPU */
	assert_price(ch.price, 0.0119);
	assert_string_equal(ch.runners_up[0].instance_type, "t3a.nano");
	assert_price(ch.runners_up[0].price, 0.0047 + 0.15 * 0.05);
	assert_string_equal(
		ch.reason, "cheapest fitting 0.25 vCPU / 0.4 GiB + reserve 0 vCPU / 64 MiB: "
			   "t3a.micro $0.0119/h (catalog file "
			   "kiyot/sizing/data/aws-instance-catalog-2020-us-east-1.json), burstable "
			   "with baseline 0.20 vCPU: $0.0094/h + "
			   "$0.0025/h surplus credits for 0.05 vCPU above it (runners-up: t3a.nano "
			   "$0.0122/h, t3.nano $0.0127/h, t3.micro $0.0129/h)");
}

struct bcase {
	int64_t cpu_milli, memory_bytes;
	const char *want;
	double price;	/* effective */
	double credits; /* part of price */
};

/*
 * Burstable types against fixed ones (no reserve): credits for CPU above the baseline can
 * make a fixed type cheaper, and a small sustained demand keeps a burstable type cheapest.
 */
static void test_sizing__burstable_vs_fixed(void **state)
{
	static const struct bcase cases[] = {
		/* t3a.large $0.0752 + 0.9 vCPU over its 0.6 baseline = $0.1202 > m5a.large */
		{ 1500, 6 * GIB, "m5a.large", 0.086, 0 },
		/* 0.1 vCPU is within t3a.large's baseline: cheaper than any fixed 8 GiB type */
		{ 100, 6 * GIB, "t3a.large", 0.0752, 0 },
		/* t3a.medium $0.0376 + 1.1 vCPU of credits = $0.0926 > c5a.large */
		{ 1500, 3 * GIB, "c5a.large", 0.077, 0 },
		/* t3a.small $0.0188 + 1.1 vCPU of credits = $0.0738 still beats c5a.large */
		{ 1500, 3 * GIB / 2, "t3a.small", 0.0738, 0.055 },
		/* t2.2xlarge has a baseline of 1.359 vCPU; 8 vCPU / 32 GiB goes fixed */
		{ 8000, 30 * GIB, "m5a.2xlarge", 0.344, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pod_demand d = { .cpu_milli = cases[i].cpu_milli,
					.memory_bytes = cases[i].memory_bytes };
		struct sizing_choice ch;

		pick_ok(*state, &d, &no_reserve, &ch);
		if (strcmp(ch.instance_type, cases[i].want) != 0)
			fail_msg("case %zu: got %s want %s (%s)", i, ch.instance_type,
				 cases[i].want, ch.reason);
		assert_price(ch.price, cases[i].price);
		assert_price(ch.credit_price, cases[i].credits);
	}
}

/* The credit price of a type that does not win is still what sizing_fits says. */
static void test_sizing__fits_prices_credits(void **state)
{
	const struct catalog_type *large = catalog_find(*state, "t3.large");
	const struct catalog_type *m5 = catalog_find(*state, "m5.large");
	double price = 0, credits = 0;

	assert_non_null(large);
	assert_non_null(m5);
	/* t3.large: 2 vCPU, 0.6 baseline, $0.0832/h: 1.5 vCPU sustained adds 0.9 * $0.05 */
	assert_true(sizing_fits(large, 1500, 6 * GIB, 0, false, &price, &credits));
	assert_price(credits, 0.045);
	assert_price(price, 0.1282);
	assert_true(price > m5->price);
	assert_true(sizing_fits(large, 600, 6 * GIB, 0, false, &price, &credits));
	assert_price(credits, 0);
	/* more vCPUs than it has, or more memory, never fit */
	assert_false(sizing_fits(large, 2001, GIB, 0, false, &price, NULL));
	assert_false(sizing_fits(large, 100, 9 * GIB, 0, false, &price, NULL));
	assert_false(sizing_fits(large, 100, GIB, 1, false, &price, NULL));
	/* spot: the spot price plus the same credits */
	assert_true(sizing_fits(large, 1500, GIB, 0, true, &price, &credits));
	assert_price(price, 0.025 + 0.045);
}

/* The credit table by family; families without unlimited mode have none. */
static void test_sizing__surplus_credit_prices(void **state)
{
	(void)state;
	assert_price(sizing_surplus_credit_price("t2.micro"), 0.05);
	assert_price(sizing_surplus_credit_price("t3.nano"), 0.05);
	assert_price(sizing_surplus_credit_price("t3a.2xlarge"), 0.05);
	assert_price(sizing_surplus_credit_price("t4g.small"), 0.04);
	assert_true(sizing_surplus_credit_price("t1.micro") < 0);
	assert_true(sizing_surplus_credit_price("t3x.nano") < 0);
	assert_true(sizing_surplus_credit_price("m5.large") < 0);
}

/* A burstable family with no known credit price fits only within its baseline. */
static void test_sizing__unknown_burstable_family_fits_within_baseline(void **state)
{
	struct catalog *c = catalog_of(
		"{\"r\": [{\"instanceType\": \"b1.small\", \"cpu\": 2, \"memory\": 2, "
		"\"burstable\": true, \"baseline\": 0.5, \"price\": 0.01},"
		"{\"instanceType\": \"f1.large\", \"cpu\": 2, \"memory\": 2, \"price\": 0.05}]}");
	struct pod_demand d = { .cpu_milli = 500, .memory_bytes = GIB };
	struct sizing_choice ch;
	(void)state;

	pick_ok(c, &d, &no_reserve, &ch);
	assert_string_equal(ch.instance_type, "b1.small");
	d.cpu_milli = 501;
	pick_ok(c, &d, &no_reserve, &ch);
	assert_string_equal(ch.instance_type, "f1.large");
	assert_int_equal(ch.n_runners_up, 0);
	catalog_free(c);
}

struct icase {
	const char *fixture;
	int64_t cpu_milli, memory_bytes;
	const char *want;
};

/*
 * Init containers run before the app containers, one at a time: the demand is the larger of
 * the largest init container and the sum of the app containers, per resource.
 */
static void test_sizing__init_containers_count(void **state)
{
	static const struct icase cases[] = {
		/* a 2 vCPU / 3 GiB migration before a 100m / 128Mi web app */
		{ "init-heavy.yaml", 2000, 3 * GIB, "c5a.large" },
		/* init CPU dominates, app memory dominates */
		{ "init-cpu-app-memory.yaml", 1000, 6 * GIB, "m5a.large" },
		/* small init containers change nothing */
		{ "init-light.yaml", 300, 768 * MIB, "t3a.micro" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct podspec *p = pod_fixture(cases[i].fixture);
		struct err err = ERR_INIT;
		struct pod_demand d;
		struct sizing_choice ch;

		assert_int_equal(sizing_demand_from_podspec(p, &d, &err), 0);
		assert_int_equal(d.cpu_milli, cases[i].cpu_milli);
		assert_int_equal(d.memory_bytes, cases[i].memory_bytes);
		pick_ok(*state, &d, NULL, &ch);
		if (strcmp(ch.instance_type, cases[i].want) != 0)
			fail_msg("%s: got %s want %s (%s)", cases[i].fixture, ch.instance_type,
				 cases[i].want, ch.reason);
		podspec_free(p);
	}
}

/* Sidecars (init containers with restartPolicy: Always) run through the later init
 * containers and next to the app; spec.overhead is added on top. */
static void test_sizing__sidecars_and_overhead(void **state)
{
	struct podspec *p = pod_fixture("sidecars-overhead.yaml");
	struct err err = ERR_INIT;
	struct pod_demand d;

	(void)state;
	assert_true(p->init_containers[0].sidecar);
	assert_false(p->init_containers[1].sidecar);
	assert_int_equal(sizing_demand_from_podspec(p, &d, &err), 0);
	assert_int_equal(d.cpu_milli, 2000 + 250);
	assert_int_equal(d.memory_bytes, 5 * GIB + 128 * MIB);
	/* without the sidecar flag the shipper would count only while it runs alone */
	p->init_containers[0].sidecar = false;
	assert_int_equal(sizing_demand_from_podspec(p, &d, &err), 0);
	assert_int_equal(d.cpu_milli, 1500 + 250);
	assert_int_equal(d.memory_bytes, 4 * GIB + 128 * MIB);
	podspec_free(p);
}

struct scase {
	int64_t cpu_milli, memory_bytes, gpus;
	const char *want_on_demand;
	double on_demand;
	const char *want_spot;
	double spot;
};

/* Spot pods are ranked and priced by spot price, others by on-demand price. */
static void test_sizing__spot_vs_on_demand(void **state)
{
	static const struct scase cases[] = {
		{ 1500, 6 * GIB, 0, "m5a.large", 0.086, "m1.large", 0.0175 },
		{ 0, 429496730, 0, "t3a.nano", 0.0047, "t3.nano", 0.0016 },
		{ 0, 0, 1, "g4dn.xlarge", 0.526, "g4dn.xlarge", 0.1578 },
		{ 4000, 16 * GIB, 0, "r5a.xlarge", 0.226, "m2.2xlarge", 0.049 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pod_demand d = { .cpu_milli = cases[i].cpu_milli,
					.memory_bytes = cases[i].memory_bytes,
					.gpus = cases[i].gpus,
					.spot = false };
		struct sizing_choice ch;

		pick_ok(*state, &d, NULL, &ch);
		if (strcmp(ch.instance_type, cases[i].want_on_demand) != 0)
			fail_msg("case %zu on-demand: got %s (%s)", i, ch.instance_type, ch.reason);
		assert_false(ch.spot);
		assert_price(ch.price, cases[i].on_demand);
		d.spot = true;
		pick_ok(*state, &d, NULL, &ch);
		if (strcmp(ch.instance_type, cases[i].want_spot) != 0)
			fail_msg("case %zu spot: got %s (%s)", i, ch.instance_type, ch.reason);
		assert_true(ch.spot);
		assert_price(ch.price, cases[i].spot);
		assert_non_null(strstr(ch.reason, " spot"));
	}
}

/* 400Mi with no reserve fits 0.5 GiB; as spot, t3.nano and t3a.nano tie and the name decides. */
static void test_sizing__spot_ties_break_by_name(void **state)
{
	struct pod_demand d = { .memory_bytes = 400LL << 20, .spot = true };
	struct sizing_choice ch;

	pick_ok(*state, &d, &no_reserve, &ch);
	assert_string_equal(ch.instance_type, "t3.nano");
	assert_true(ch.spot);
	assert_price(ch.price, 0.0016);
	assert_non_null(strstr(ch.reason, "t3.nano $0.0016/h spot"));
	assert_non_null(strstr(ch.reason, "(runners-up: t3a.nano $0.0016/h, t1.micro $0.0020/h"));
}

struct gcase {
	int64_t cpu_milli, memory_bytes;
	const char *pattern;
	const char *want;
};

/* pod.elotl.co/instance-type narrows the candidates to an exact type or a glob. */
static void test_sizing__instance_type_exact_or_glob(void **state)
{
	static const struct gcase cases[] = {
		{ 1000, GIB, "m5.large", "m5.large" },
		/* with the reserve 8 GiB needs more: c5n.xlarge has 10.5 GiB */
		{ 4000, 8 * GIB, "c5*", "c5n.xlarge" },
		{ 4000, 16 * GIB, "c5*", "c5n.2xlarge" },
		{ 0, 0, "t2.*", "t2.nano" },
		{ 1000, 4 * GIB, "t3*.*", "t3a.large" },
		{ 0, 0, "m5?.large", "m5a.large" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pod_demand d = { .cpu_milli = cases[i].cpu_milli,
					.memory_bytes = cases[i].memory_bytes,
					.instance_type = cases[i].pattern };
		struct sizing_choice ch;

		pick_ok(*state, &d, NULL, &ch);
		if (strcmp(ch.instance_type, cases[i].want) != 0)
			fail_msg("case %zu: got %s want %s (%s)", i, ch.instance_type,
				 cases[i].want, ch.reason);
		assert_non_null(strstr(ch.reason, cases[i].pattern));
		for (size_t k = 0; k < ch.n_runners_up; k++) {
			const struct catalog_type *t =
				catalog_find(*state, ch.runners_up[k].instance_type);

			assert_non_null(t);
			assert_true(catalog_type_matches(t, cases[i].pattern));
		}
	}
}

/* GPU pods get GPU types with enough GPUs; the cheapest is not always the newest. */
static void test_sizing__gpu_pods_get_gpu_types(void **state)
{
	static const struct scase cases[] = {
		{ 0, 0, 1, "g4dn.xlarge", 0.526, NULL, 0 },
		/* 32 GiB + the reserve is more than g4dn.2xlarge has: g3.4xlarge is cheaper than
		 * g4dn.4xlarge */
		{ 8000, 32 * GIB, 1, "g3.4xlarge", 1.14, NULL, 0 },
		{ 4000, 16 * GIB, 4, "g2.8xlarge", 2.6, NULL, 0 },
		{ 0, 0, 8, "p2.8xlarge", 7.2, NULL, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pod_demand d = { .cpu_milli = cases[i].cpu_milli,
					.memory_bytes = cases[i].memory_bytes,
					.gpus = cases[i].gpus,
					.spot = false };
		struct sizing_choice ch;

		pick_ok(*state, &d, NULL, &ch);
		if (strcmp(ch.instance_type, cases[i].want_on_demand) != 0)
			fail_msg("case %zu: got %s (%s)", i, ch.instance_type, ch.reason);
		assert_true(ch.gpus >= cases[i].gpus);
		assert_price(ch.price, cases[i].on_demand);
		assert_non_null(strstr(ch.reason, " GPU"));
	}
}

/* A pod without GPUs never lands on a GPU type, even a cheaper one, unless it names it. */
static void test_sizing__no_gpu_type_without_gpus_unless_named(void **state)
{
	struct catalog *c = catalog_of(
		"{\"r\": [{\"instanceType\": \"g9.large\", \"cpu\": 8, \"memory\": 32, \"gpu\": 1, "
		"\"price\": 0.1},"
		"{\"instanceType\": \"m9.large\", \"cpu\": 8, \"memory\": 32, \"price\": 0.3}]}");
	struct pod_demand d = { .cpu_milli = 4000, .memory_bytes = 8 * GIB };
	struct sizing_choice ch;
	(void)state;

	pick_ok(c, &d, &no_reserve, &ch);
	assert_string_equal(ch.instance_type, "m9.large");
	assert_int_equal(ch.n_runners_up, 0);
	d.instance_type = "g9.*";
	pick_ok(c, &d, &no_reserve, &ch);
	assert_string_equal(ch.instance_type, "g9.large");
	d.instance_type = "*";
	pick_ok(c, &d, &no_reserve, &ch);
	assert_string_equal(ch.instance_type, "g9.large");
	catalog_free(c);
}

/* No pod without GPUs gets a GPU type in us-east-1, across a sweep of demands. */
static void test_sizing__sweep_never_gives_gpu_types_to_cpu_pods(void **state)
{
	for (int64_t cpu = 0; cpu <= 96000; cpu += 4000) {
		for (int64_t mem = 0; mem <= 384 * GIB; mem += 32 * GIB) {
			struct pod_demand d = { .cpu_milli = cpu, .memory_bytes = mem };
			struct sizing_choice ch;
			struct err err = ERR_INIT;

			if (sizing_pick(*state, &d, NULL, &ch, &err) < 0)
				fail_msg("%lld/%lld: %s", (long long)cpu, (long long)mem, err.msg);
			assert_int_equal(ch.gpus, 0);
			assert_true(ch.cpu_milli >= cpu + SIZING_RESERVE_DEFAULT_CPU_MILLI);
			assert_true(ch.memory_bytes >= mem + SIZING_RESERVE_DEFAULT_MEMORY_BYTES);
		}
	}
}

struct rcase {
	int64_t cpu_milli, memory_bytes;
	struct sizing_reserve reserve;
	const char *want;
	double price, credits;
};

/* The reserve for the cell's OS and agent is added to memory, vCPUs and the baseline check. */
static void test_sizing__reserve_is_added(void **state)
{
	static const struct rcase cases[] = {
		{ 0, 429496730, { 0, 0 }, "t3a.nano", 0.0047, 0 },
		{ 0, 429496730, SIZING_RESERVE_DEFAULT, "t3a.nano", 0.0047, 0 },
		/* 0.4 GiB + 256 MiB no longer fits 0.5 GiB */
		{ 0, 429496730, { 0, 256 * MIB }, "t3a.micro", 0.0094, 0 },
		/* 0.1 vCPU is a nano's baseline; a CPU reserve of 0.05 vCPU is paid in credits */
		{ 100, 429496730, SIZING_RESERVE_DEFAULT, "t3a.nano", 0.0047, 0 },
		{ 100, 429496730, { 50, 0 }, "t3a.nano", 0.0072, 0.0025 },
		/* exactly 2 vCPU / 4 GiB fits c5a.large only without a reserve */
		{ 2000, 4 * GIB, { 0, 0 }, "c5a.large", 0.077, 0 },
		{ 2000, 4 * GIB, SIZING_RESERVE_DEFAULT, "m5a.large", 0.086, 0 },
		{ 2000, 4 * GIB, { 50, 0 }, "c5a.xlarge", 0.154, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pod_demand d = { .cpu_milli = cases[i].cpu_milli,
					.memory_bytes = cases[i].memory_bytes };
		struct sizing_choice ch;

		pick_ok(*state, &d, &cases[i].reserve, &ch);
		if (strcmp(ch.instance_type, cases[i].want) != 0)
			fail_msg("case %zu: got %s want %s (%s)", i, ch.instance_type,
				 cases[i].want, ch.reason);
		assert_price(ch.price, cases[i].price);
		assert_price(ch.credit_price, cases[i].credits);
	}
}

/* A pod without requests gets the cheapest type of the region. */
static void test_sizing__no_requests_gets_cheapest_overall(void **state)
{
	struct podspec *p = rfix_pod("{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: "
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
	pick_ok(*state, &d, NULL, &ch);
	assert_price(ch.price, cheapest);
	assert_string_equal(ch.instance_type, "t3a.nano");
	podspec_free(p);
}

struct sbad {
	int64_t cpu_milli, memory_bytes, gpus;
	const char *type;
	struct sizing_reserve reserve;
	const char *msg;
};

/* When nothing fits, the error gives the demand, the region and what to change. */
static void test_sizing__impossible_demands(void **state)
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
		{ 0, 0, 0, "q*", SIZING_RESERVE_DEFAULT,
		  "annotation pod.elotl.co/instance-type: \"q*\" matches no instance type in "
		  "us-east-1" },
		{ 4000,
		  GIB,
		  0,
		  "t3.nano",
		  { 0, 0 },
		  "pod demand 4 vCPU / 1 GiB fits no instance type matching \"t3.nano\" in "
		  "us-east-1; lower the pod's requests or limits, or change annotation "
		  "pod.elotl.co/instance-type" },
		/* GPUs asked of a pattern without GPU types */
		{ 0,
		  0,
		  1,
		  "c5*",
		  { 0, 0 },
		  "pod demand 0 vCPU / 0 GiB / 1 GPU fits no instance type matching \"c5*\" in "
		  "us-east-1; lower the pod's requests or limits, or change annotation "
		  "pod.elotl.co/instance-type" },
		{ 1000,
		  GIB,
		  100,
		  NULL,
		  { 0, 0 },
		  "pod demand 1 vCPU / 1 GiB / 100 GPU fits no instance type in us-east-1; lower "
		  "the pod's requests or limits" },
		/* x1e.32xlarge has exactly 128 vCPU / 3904 GiB: the reserve makes it too small */
		{ 128000, 3904 * GIB, 0, NULL, SIZING_RESERVE_DEFAULT,
		  "pod demand 128 vCPU / 3.812 TiB (with the cell reserve of 0 vCPU / 64 MiB) "
		  "fits no instance type in us-east-1; lower the pod's requests or limits" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pod_demand d = { .cpu_milli = cases[i].cpu_milli,
					.memory_bytes = cases[i].memory_bytes,
					.gpus = cases[i].gpus,
					.instance_type = cases[i].type };
		struct err err = ERR_INIT;
		struct sizing_choice ch;

		memset(&ch, 0x5a, sizeof(ch));
		assert_int_equal(sizing_pick(*state, &d, &cases[i].reserve, &ch, &err), -ENOENT);
		if (strcmp(err.msg, cases[i].msg) != 0)
			fail_msg("case %zu: %s", i, err.msg);
		assert_int_equal((unsigned char)ch.instance_type[0], 0x5a);
	}
	/* the same largest demand fits without the reserve */
	{
		struct pod_demand d = { .cpu_milli = 128000, .memory_bytes = 3904 * GIB };
		struct sizing_choice ch;

		pick_ok(*state, &d, &no_reserve, &ch);
		assert_string_equal(ch.instance_type, "x1e.32xlarge");
	}
}

/* Demand = max(largest init container, sum of app containers), limits counted when larger. */
static void test_sizing__demand_from_containers(void **state)
{
	struct podspec *p = rfix_pod(
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
	struct podspec *p = rfix_pod("{apiVersion: v1, kind: Pod, metadata: {name: p, "
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
	struct catalog *c = catalog_of(
		"{\"r\": ["
		"{\"instanceType\": \"z.big\", \"cpu\": 4, \"memory\": 8, \"price\": 0.1},"
		"{\"instanceType\": \"b.small\", \"cpu\": 4, \"memory\": 4, \"price\": 0.1},"
		"{\"instanceType\": \"c.small\", \"cpu\": 2, \"memory\": 4, \"price\": 0.1},"
		"{\"instanceType\": \"a.small\", \"cpu\": 2, \"memory\": 4, \"price\": 0.1},"
		"{\"instanceType\": \"dear\", \"cpu\": 1, \"memory\": 1, \"price\": 0.2}]}");
	struct pod_demand d = { 0 };
	struct sizing_choice ch;
	(void)state;

	pick_ok(c, &d, &no_reserve, &ch);
	assert_string_equal(ch.instance_type, "a.small");
	assert_string_equal(
		ch.reason,
		"cheapest fitting 0 vCPU / 0 GiB: a.small $0.1000/h "
		"(instance catalog) (runners-up: c.small $0.1000/h, b.small $0.1000/h, z.big "
		"$0.1000/h)");
	catalog_free(c);
}

/* A burstable type with credits ties with a fixed one at the same effective price. */
static void test_sizing__credits_tie_is_deterministic(void **state)
{
	struct catalog *c = catalog_of(
		"{\"r\": [{\"instanceType\": \"t3.x\", \"cpu\": 2, \"memory\": 4, "
		"\"burstable\": true, \"baseline\": 0.4, \"price\": 0.05},"
		"{\"instanceType\": \"m.x\", \"cpu\": 2, \"memory\": 4, \"price\": 0.08}]}");
	struct pod_demand d = { .cpu_milli = 1000, .memory_bytes = GIB };
	struct sizing_choice ch;
	(void)state;

	/* t3.x: $0.05 + 0.6 vCPU * $0.05 = $0.08, the same as m.x: the name decides */
	for (int i = 0; i < 3; i++) {
		pick_ok(c, &d, &no_reserve, &ch);
		assert_string_equal(ch.instance_type, "m.x");
		assert_string_equal(ch.runners_up[0].instance_type, "t3.x");
	}
	catalog_free(c);
}

/* Demand text: vCPUs, whole MiB below 1 GiB, GiB (TiB from 1 TiB up), three decimals at most. */
static void test_sizing__format_demand(void **state)
{
	char buf[96];
	(void)state;

	sizing_format_demand(250, 429496730, 0, buf, sizeof(buf));
	assert_string_equal(buf, "0.25 vCPU / 0.4 GiB");
	sizing_format_demand(50, 64 * MIB, 0, buf, sizeof(buf));
	assert_string_equal(buf, "0.05 vCPU / 64 MiB");
	sizing_format_demand(2000, 3 * GIB, 0, buf, sizeof(buf));
	assert_string_equal(buf, "2 vCPU / 3 GiB");
	sizing_format_demand(200000, 4 * 1024 * GIB, 2, buf, sizeof(buf));
	assert_string_equal(buf, "200 vCPU / 4 TiB / 2 GPU");
}

/* On the shipped catalog, a pod that may run on x86_64 only (the default) never gets an arm64
 * type, though arm64 types are the cheapest that fit it; allowed arm64, it gets the cheapest
 * of both, and its runners-up are of the winner's architecture. */
static void test_sizing__arm64_only_when_allowed(void **state)
{
	struct pod_demand d = { .cpu_milli = 250, .memory_bytes = 429496730 };
	struct sizing_choice x86, any;
	struct err err = ERR_INIT;
	struct catalog *c = NULL;
	(void)state;

	if (catalog_load("us-east-1", &c, &err) < 0)
		fail_msg("%s", err.msg);
	pick_ok(c, &d, NULL, &x86);
	assert_int_equal(x86.arch, CATALOG_ARCH_X86_64);
	assert_int_equal(catalog_find(c, x86.instance_type)->arch, CATALOG_ARCH_X86_64);
	for (size_t i = 0; i < x86.n_runners_up; i++)
		assert_int_equal(catalog_find(c, x86.runners_up[i].instance_type)->arch,
				 CATALOG_ARCH_X86_64);
	assert_null(strstr(x86.reason, "arm64"));

	d.arch = CATALOG_ARCH_ALL;
	d.arch_why = "every image offers linux/arm64";
	pick_ok(c, &d, NULL, &any);
	assert_int_equal(any.arch, CATALOG_ARCH_ARM64);
	assert_string_equal(any.instance_type, "t4g.nano");
	assert_true(any.price < x86.price);
	for (size_t i = 0; i < any.n_runners_up; i++)
		assert_int_equal(catalog_find(c, any.runners_up[i].instance_type)->arch,
				 CATALOG_ARCH_ARM64);
	assert_non_null(strstr(any.reason, " on x86_64+arm64 (every image offers linux/arm64): "
					   "t4g.nano (arm64) $"));
	catalog_free(c);
}

/* A pattern naming only types of an architecture the pod may not run on is refused, saying
 * which architecture it names and why the pod has the other. */
static void test_sizing__pattern_of_the_wrong_architecture(void **state)
{
	struct pod_demand d = { .memory_bytes = GIB,
				.instance_type = "m7g.large",
				.arch = CATALOG_ARCH_X86_64,
				.arch_why = "image app:1 offers no linux/arm64" };
	struct sizing_choice ch;
	struct err err = ERR_INIT;
	struct catalog *c = NULL;
	(void)state;

	if (catalog_load("us-east-1", &c, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(sizing_pick(c, &d, NULL, &ch, &err), -ENOENT);
	assert_string_equal(err.msg, "annotation pod.elotl.co/instance-type: \"m7g.large\" matches "
				     "only arm64 instance types in us-east-1, and the pod runs on "
				     "x86_64 only (image app:1 offers no linux/arm64); name a type "
				     "of that architecture");
	d.arch = CATALOG_ARCH_ARM64;
	pick_ok(c, &d, NULL, &ch);
	assert_string_equal(ch.instance_type, "m7g.large");
	catalog_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizing__pod_of_0_4_gib_lands_on_a_nano),
		cmocka_unit_test(test_sizing__sustained_cpu_pays_credits_on_a_nano),
		cmocka_unit_test(test_sizing__burstable_vs_fixed),
		cmocka_unit_test(test_sizing__fits_prices_credits),
		cmocka_unit_test(test_sizing__surplus_credit_prices),
		cmocka_unit_test(test_sizing__unknown_burstable_family_fits_within_baseline),
		cmocka_unit_test(test_sizing__init_containers_count),
		cmocka_unit_test(test_sizing__sidecars_and_overhead),
		cmocka_unit_test(test_sizing__spot_vs_on_demand),
		cmocka_unit_test(test_sizing__spot_ties_break_by_name),
		cmocka_unit_test(test_sizing__instance_type_exact_or_glob),
		cmocka_unit_test(test_sizing__gpu_pods_get_gpu_types),
		cmocka_unit_test(test_sizing__no_gpu_type_without_gpus_unless_named),
		cmocka_unit_test(test_sizing__sweep_never_gives_gpu_types_to_cpu_pods),
		cmocka_unit_test(test_sizing__reserve_is_added),
		cmocka_unit_test(test_sizing__no_requests_gets_cheapest_overall),
		cmocka_unit_test(test_sizing__impossible_demands),
		cmocka_unit_test(test_sizing__demand_from_containers),
		cmocka_unit_test(test_sizing__bad_launch_type),
		cmocka_unit_test(test_sizing__tie_break_order),
		cmocka_unit_test(test_sizing__credits_tie_is_deterministic),
		cmocka_unit_test(test_sizing__format_demand),
		cmocka_unit_test(test_sizing__arm64_only_when_allowed),
		cmocka_unit_test(test_sizing__pattern_of_the_wrong_architecture),
	};

	return cmocka_run_group_tests(tests, setup_us_east_1, teardown_catalog);
}
