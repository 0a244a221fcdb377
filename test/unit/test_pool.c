/*
 * Unit tests for the warm pool (kiyot/pool/): its settings (pool_config.c), its arithmetic
 * (pool_plan.c: the adaptive target, the caps), and, in a whole kiyot with the fake provider
 * and agent (kiyot_fixture.h), standby cells claimed by RunPodSandbox, kept by the garbage
 * collector and adopted by a restarted kiyot.
 */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kiyot_fixture.h"
#include "pool/pool.h"
#include "pool/pool_config.h"
#include "pool/pool_plan.h"
#include "state/kiyot.h"
#include "state/store.h"
#include "xalloc.h"

/* Loads text as a whole config: 0, or the error's code with its message in err. */
static int load(struct kiyot_config *c, const char *text, struct err *err)
{
	kiyot_config_defaults(c);
	return kiyot_config_load_text(c, text, strlen(text), "k.yaml", err);
}

/* Without a pool section kiyot has no standby cell: the settings ask for none. */
static void test_pool__no_section_asks_for_no_standby_cell(void **state)
{
	struct kiyot_config c;
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(load(&c, "logLevel: info\n", &err), 0);
	assert_false(pool_config_enabled(&c.pool));
	kiyot_config_release(&c);
	assert_int_equal(load(&c, "pool: { shapes: [{instanceType: t3.nano, count: 0}] }\n", &err),
			 0);
	assert_false(pool_config_enabled(&c.pool));
	kiyot_config_release(&c);
}

/* Every setting is read, and the adaptive pool's idle lifetime has a default. */
static void test_pool__settings_are_read(void **state)
{
	static const char text[] = "pool:\n"
				   "  shapes:\n"
				   "    - { instanceType: t3.nano, count: 2 }\n"
				   "    - { instanceType: t3.small, spot: true, count: 1 }\n"
				   "  adaptive:\n"
				   "    enabled: true\n"
				   "    windowSeconds: 60\n"
				   "    maxCells: 5\n"
				   "    maxDollarsPerHour: 0.25\n";
	struct kiyot_config c;
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(load(&c, text, &err), 0);
	assert_true(pool_config_enabled(&c.pool));
	assert_int_equal(c.pool.n_shapes, 2);
	assert_string_equal(c.pool.shapes[0].instance_type, "t3.nano");
	assert_int_equal(c.pool.shapes[0].count, 2);
	assert_false(c.pool.shapes[0].spot);
	assert_true(c.pool.shapes[1].spot);
	assert_true(c.pool.adaptive);
	assert_int_equal(c.pool.window_s, 60);
	assert_int_equal(c.pool.max_cells, 5);
	assert_true(c.pool.max_dollars_per_hour > 0.2499 && c.pool.max_dollars_per_hour < 0.2501);
	assert_int_equal(c.pool.idle_lifetime_s, POOL_ADAPTIVE_LIFETIME_DEFAULT_S);
	kiyot_config_release(&c);
}

/* A wrong value is refused with a message naming its key. */
static void test_pool__invalid_settings_name_their_key(void **state)
{
	static const struct {
		const char *text, *key;
	} cases[] = {
		{ "pool: [1]\n", "pool: must be a mapping" },
		{ "pool: { size: 3 }\n", "pool.size: unknown setting" },
		{ "pool: { shapes: {} }\n", "pool.shapes: must be a list" },
		{ "pool: { shapes: [{count: 2}] }\n", "pool.shapes[0].instanceType: required" },
		{ "pool: { shapes: [{instanceType: t3.nano, count: -1}] }\n",
		  "pool.shapes[0].count: must be an integer from 0 to 256" },
		{ "pool: { shapes: [{instanceType: t3.nano, spot: yes please}] }\n",
		  "pool.shapes[0].spot: must be true or false" },
		{ "pool: { shapes: [{instanceType: t3.nano}, {instanceType: t3.nano}] }\n",
		  "pool.shapes[1]: t3.nano (on-demand) is pool.shapes[0] again" },
		{ "pool: { adaptive: { enabled: true, windowSeconds: 0 } }\n",
		  "pool.adaptive.windowSeconds: must be an integer from 1" },
		{ "pool: { adaptive: { maxDollarsPerHour: -1 } }\n",
		  "pool.adaptive.maxDollarsPerHour: must be a number" },
		{ "pool: { adaptive: { maxCells: x } }\n",
		  "pool.adaptive.maxCells: must be an integer" },
		{ "pool: { adaptive: { idleLifetime: 3 } }\n",
		  "pool.adaptive.idleLifetime: unknown setting" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kiyot_config c;
		struct err err = ERR_INIT;

		if (load(&c, cases[i].text, &err) != -EINVAL || !strstr(err.msg, cases[i].key))
			fail_msg("%s: want \"%s\", got \"%s\"", cases[i].text, cases[i].key,
				 err.msg);
		kiyot_config_release(&c);
	}
}

/* The adaptive target: ceil(arrivals over the window x time to ready), none without
 * arrivals, at least one with any, at most the bound. */
static void test_pool__adaptive_target_covers_arrivals_while_cells_come_up(void **state)
{
	(void)state;
	assert_int_equal(pool_adaptive_target(0, 60, 40, 0), 0);
	assert_int_equal(pool_adaptive_target(1, 600, 0.3, 0), 1);
	/* 120 pods a minute, 45 s to ready: 90 */
	assert_int_equal(pool_adaptive_target(120, 60, 45, 0), 90);
	/* 2 a second x 0.5 s is exactly 1 */
	assert_int_equal(pool_adaptive_target(20, 10, 0.5, 0), 1);
	assert_int_equal(pool_adaptive_target(21, 10, 0.5, 0), 2);
	assert_int_equal(pool_adaptive_target(120, 60, 45, 10), 10);
}

/* Arrivals older than the window are forgotten; the list stays bounded. */
static void test_pool__arrivals_outside_the_window_do_not_count(void **state)
{
	struct pool_arrivals a = { 0 };

	(void)state;
	for (int64_t t = 1; t <= 10; t++)
		pool_arrivals_add(&a, t * 1000);
	assert_int_equal(pool_arrivals_since(&a, 5500), 5);
	assert_int_equal(pool_arrivals_since(&a, 11000), 0);
	for (int64_t t = 0; t < POOL_ARRIVALS_MAX + 10; t++)
		pool_arrivals_add(&a, 20000 + t);
	assert_int_equal(pool_arrivals_since(&a, 0), POOL_ARRIVALS_MAX);
	pool_arrivals_release(&a);
}

/* The caps: a count cap shares the cells among the shapes in turn; a price cap lets a
 * cheaper shape have what a dearer one cannot. */
static void test_pool__caps_bound_count_and_spend(void **state)
{
	struct pool_plan_shape s[3] = { { 3, 0.10, 0 }, { 2, 0.05, 0 }, { 0, 1.0, 0 } };

	(void)state;
	assert_int_equal(pool_plan_caps(s, 3, 0, 0), 5);
	assert_int_equal(s[0].allowed, 3);
	assert_int_equal(s[1].allowed, 2);
	assert_int_equal(pool_plan_caps(s, 3, 3, 0), 3);
	assert_int_equal(s[0].allowed, 2);
	assert_int_equal(s[1].allowed, 1);
	assert_int_equal(s[2].allowed, 0);
	/* $0.22: 0.10 + 0.05, then 0.10 more is over but 0.05 is not */
	assert_int_equal(pool_plan_caps(s, 3, 0, 0.22), 3);
	assert_int_equal(s[0].allowed, 1);
	assert_int_equal(s[1].allowed, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool__no_section_asks_for_no_standby_cell),
		cmocka_unit_test(test_pool__settings_are_read),
		cmocka_unit_test(test_pool__invalid_settings_name_their_key),
		cmocka_unit_test(test_pool__adaptive_target_covers_arrivals_while_cells_come_up),
		cmocka_unit_test(test_pool__arrivals_outside_the_window_do_not_count),
		cmocka_unit_test(test_pool__caps_bound_count_and_spend),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
