/*
 * Unit tests for the warm pool (kiyot/pool/): its settings (pool_config.c), its arithmetic
 * (pool_plan.c: the adaptive target, the caps), and, in a whole kiyot with the fake provider
 * and agent (kiyot_fixture.h), standby cells claimed by RunPodSandbox, kept by the garbage
 * collector and adopted by a restarted kiyot.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cells/cells.h"
#include "cri/cri.h"
#include "clock.h"
#include "kiyot_fixture.h"
#include "kube/cronsched.h"
#include "pool/pool.h"
#include "pool/pool_config.h"
#include "pool/pool_internal.h"
#include "pool/pool_plan.h"
#include "daemon/kiyot.h"
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
				   "    targetHitPercent: 80\n"
				   "    burstSeconds: 20\n"
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
	assert_int_equal(c.pool.target_hit_percent, 80);
	assert_int_equal(c.pool.burst_s, 20);
	assert_int_equal(c.pool.max_cells, 5);
	assert_true(c.pool.max_dollars_per_hour > 0.2499 && c.pool.max_dollars_per_hour < 0.2501);
	assert_int_equal(c.pool.idle_lifetime_s, POOL_ADAPTIVE_LIFETIME_DEFAULT_S);
	assert_false(c.pool.rebalance_replacement); /* off unless set */
	kiyot_config_release(&c);
	assert_int_equal(load(&c, "pool: { rebalanceReplacement: true }\n", &err), 0);
	assert_true(c.pool.rebalance_replacement);
	assert_true(pool_config_enabled(&c.pool));
	/* the adaptive target's level and burst response when not set */
	assert_int_equal(c.pool.target_hit_percent, POOL_HIT_DEFAULT_PERCENT);
	assert_int_equal(c.pool.burst_s, 0);
	kiyot_config_release(&c);
}

/* A wrong value is refused with a message naming its key. */
static void test_pool__invalid_settings_name_their_key(void **state)
{
	static const struct {
		const char *text, *key;
	} cases[] = {
		{ "pool: [1]\n", "pool: must be a mapping" },
		{ "pool: { size: 3 }\n", "pool.size: unknown key" },
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
		{ "pool: { adaptive: { targetHitPercent: 100 } }\n",
		  "pool.adaptive.targetHitPercent: must be an integer from 50 to 99" },
		{ "pool: { adaptive: { burstSeconds: -1 } }\n",
		  "pool.adaptive.burstSeconds: must be an integer from 0 to 3600" },
		{ "pool: { adaptive: { idleLifetime: 3 } }\n",
		  "pool.adaptive.idleLifetime: unknown key" },
		{ "pool: { rebalanceReplacement: 2 }\n",
		  "pool.rebalanceReplacement: must be true or false" },
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

#define SEC 1000000000LL

/* Arrivals from from_s to to_s (seconds, any clock), one every step_s. */
static void arrive(struct pool_arrivals *a, double from_s, double to_s, double step_s)
{
	for (double t = from_s; t <= to_s + 1e-9; t += step_s)
		pool_arrivals_add(a, (int64_t)(t * SEC));
}

/* The Poisson quantile: the fewest cells that cover the arrivals one boot sees with the
 * chance asked, at most the bound. */
static void test_pool__poisson_quantile(void **state)
{
	(void)state;
	assert_int_equal(pool_poisson_quantile(0, 0.9, 100), 0);
	assert_int_equal(pool_poisson_quantile(0.05, 0.9, 100), 0); /* P(0) = 0.95 */
	assert_int_equal(pool_poisson_quantile(1, 0.5, 100), 1);    /* P(<=1) = 0.74 */
	assert_int_equal(pool_poisson_quantile(1, 0.9, 100), 2);    /* P(<=2) = 0.92 */
	assert_int_equal(pool_poisson_quantile(1, 0.97, 100), 3);   /* P(<=3) = 0.98 */
	assert_int_equal(pool_poisson_quantile(10, 0.9, 5), 5);
	assert_int_equal(pool_poisson_quantile(5000, 0.9, 256), 256);
}

/* The rate is weighted by age with the window as time constant: a steady rate reads as
 * itself, the same count of arrivals weighs more when recent, and arrivals beyond the
 * horizon do not count. */
static void test_pool__arrival_rate_follows_change(void **state)
{
	struct pool_arrivals a = { 0 }, b = { 0 };
	double r;

	(void)state;
	arrive(&a, 0, 4000, 10); /* 0.1 a second */
	r = pool_arrival_rate(&a, 4000 * SEC, 600);
	if (r < 0.095 || r > 0.106)
		fail_msg("a steady 0.1/s reads %f", r);
	pool_arrivals_release(&a);
	/* 30 pods in the window's older half, or in its newer half */
	arrive(&a, 10000, 10290, 10);
	arrive(&b, 10300, 10590, 10);
	if (!(pool_arrival_rate(&b, 10600 * SEC, 600) >
	      1.5 * pool_arrival_rate(&a, 10600 * SEC, 600)))
		fail_msg("recent arrivals %f, older ones %f",
			 pool_arrival_rate(&b, 10600 * SEC, 600),
			 pool_arrival_rate(&a, 10600 * SEC, 600));
	assert_true(pool_arrival_rate(&a, (10290 + POOL_RATE_HORIZON * 600 + 1) * SEC, 600) == 0);
	pool_arrivals_release(&a);
	pool_arrivals_release(&b);
}

/* The most arrivals within the span of each other, fading with the window. */
static void test_pool__burst_size_counts_close_arrivals(void **state)
{
	struct pool_arrivals a = { 0 };

	(void)state;
	assert_true(pool_burst_size(&a, 0, 10, 600) == 0);
	arrive(&a, 100, 140, 20); /* 100, 120, 140 */
	assert_true(fabs(pool_burst_size(&a, 140 * SEC, 10, 600) - 1) < 1e-9);
	assert_true(fabs(pool_burst_size(&a, 140 * SEC, 20, 600) - 2) < 1e-9);
	assert_true(fabs(pool_burst_size(&a, 140 * SEC, 40, 600) - 3) < 1e-9);
	assert_true(fabs(pool_burst_size(&a, 740 * SEC, 40, 600) - 3 * exp(-1)) < 1e-9);
	pool_arrivals_release(&a);
}

/* The adaptive target: the Poisson quantile at the hit percent of the arrivals one boot sees,
 * none without an arrival over the window, at least one with any, at most the bound. */
static void test_pool__adaptive_target_has_a_safety_margin(void **state)
{
	struct pool_arrivals a = { 0 };
	struct pool_adaptive p = { .window_s = 600, .ready_s = 9.5, .hit_percent = 50 };

	(void)state;
	assert_int_equal(pool_adaptive_target(&a, 0, &p), 0);
	arrive(&a, 0, 4000, 10); /* 0.1 a second x 9.5 s: 0.96 a boot */
	assert_int_equal(pool_adaptive_target(&a, 4000 * SEC, &p), 1);
	p.hit_percent = 90;
	assert_int_equal(pool_adaptive_target(&a, 4000 * SEC, &p), 2);
	p.hit_percent = 97;
	assert_int_equal(pool_adaptive_target(&a, 4000 * SEC, &p), 3);
	p.max = 2;
	assert_int_equal(pool_adaptive_target(&a, 4000 * SEC, &p), 2);
	p.max = 0;
	/* nothing over the last window: none, whatever the rate still reads */
	assert_int_equal(pool_adaptive_target(&a, 4601 * SEC, &p), 0);
	pool_arrivals_release(&a);
	/* one pod, cells ready in 0.3 s: one cell */
	arrive(&a, 50, 50, 1);
	p.ready_s = 0.3;
	assert_int_equal(pool_adaptive_target(&a, 60 * SEC, &p), 1);
	pool_arrivals_release(&a);
}

/* A burst raises the target to its size at once, and the raise fades with the window. */
static void test_pool__a_burst_raises_the_target_at_once(void **state)
{
	struct pool_arrivals a = { 0 };
	struct pool_adaptive p = { .window_s = 600, .ready_s = 45, .hit_percent = 97 };

	(void)state;
	arrive(&a, 1000, 1004.5, 0.5); /* 10 pods in 5 s */
	/* the rate alone: 10/600 a second x 45 s, 0.75 a boot: 3 */
	assert_int_equal(pool_adaptive_target(&a, 1005 * SEC, &p), 3);
	p.burst_s = 10;
	assert_int_equal(pool_adaptive_target(&a, 1005 * SEC, &p), 10);
	/* half a window later: 10 x exp(-0.5), 6.07 */
	assert_int_equal(pool_adaptive_target(&a, 1305 * SEC, &p), 7);
	assert_int_equal(pool_adaptive_target(&a, 1605 * SEC, &p), 0);
	pool_arrivals_release(&a);
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

/* ---- standby cells in a whole kiyot ---- */

/* Pods without a demand land on t3.nano; the pool keeps standby cells of it. */
#define POOL_NANO(n)                                                                               \
	"defaultInstanceType: t3.nano\npool: { shapes: [{ instanceType: t3.nano, count: " #n       \
	" }] }\n"

/* A fixture with the settings, not opened yet. */
static struct kfix *fixture(const char *config)
{
	struct kfix *f = kfix_new(2);

	f->config = config;
	return f;
}

static void open_or_fail(struct kfix *f)
{
	struct err err = ERR_INIT;

	if (kfix_open(f, &err) < 0)
		fail_msg("kiyot_open: %s", err.msg);
}

static int cmp_view_id(const void *a, const void *b)
{
	return strcmp(((const struct pool_view *)a)->cell_id,
		      ((const struct pool_view *)b)->cell_id);
}

/* The ready standby cells: how many, and the ids (sorted, joined by spaces) into ids when not
 * NULL, so the same cells compare equal whatever order the pool keeps them in. */
static size_t ready_standby(struct kfix *f, char *ids, size_t len)
{
	struct pool_view *v;
	size_t n = pool_list(f->k.pool, &v), ready = 0;

	if (ids)
		ids[0] = '\0';
	if (n)
		qsort(v, n, sizeof(*v), cmp_view_id);
	for (size_t i = 0; i < n; i++) {
		if (!v[i].ready)
			continue;
		ready++;
		if (ids)
			snprintf(ids + strlen(ids), len - strlen(ids), "%s ", v[i].cell_id);
	}
	pool_views_free(v, n);
	return ready;
}

/* A RunPodSandbox of a pod asking for instance type type (annotation): its id. */
static char *run_pod_of_type(struct kfix *f, const char *name, const char *uid, const char *type)
{
	Runtime__V1__RunPodSandboxRequest req = RUNTIME__V1__RUN_POD_SANDBOX_REQUEST__INIT;
	Runtime__V1__RunPodSandboxResponse *resp = NULL;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry ann =
		RUNTIME__V1__POD_SANDBOX_CONFIG__ANNOTATIONS_ENTRY__INIT;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry *anns[] = { &ann };
	Runtime__V1__PodSandboxConfig *cfg = kfix_pod_config(f, name, uid, 0);
	void **old = (void **)cfg->annotations;
	size_t n_old = cfg->n_annotations;
	struct err err = ERR_INIT;
	char *id;

	ann.key = "pod.elotl.co/instance-type";
	ann.value = (char *)type;
	cfg->annotations = anns;
	cfg->n_annotations = 1;
	req.config = cfg;
	if (kfix_call(f, "RunPodSandbox", &req.base,
		      &runtime__v1__run_pod_sandbox_response__descriptor, &resp, &err) < 0)
		fail_msg("RunPodSandbox: %s", err.msg);
	cfg->annotations = (void *)old;
	cfg->n_annotations = n_old;
	protobuf_c_message_free_unpacked(&cfg->base, NULL);
	id = xstrdup(resp->pod_sandbox_id);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return id;
}

/* A pod of the standby cell's shape starts in it: its sandbox's record names the cell, no
 * launch is made for it, and the pool launches a new standby cell. */
static void test_pool__a_pod_takes_a_standby_cell_of_its_shape(void **state)
{
	struct kfix *f = fixture(POOL_NANO(1));
	char ids[256], after[256];
	_cleanup_free_ char *sb = NULL, *cell = NULL;
	struct err err = ERR_INIT;
	unsigned launches;

	(void)state;
	open_or_fail(f);
	assert_true(KFIX_WAIT(ready_standby(f, ids, sizeof(ids)) == 1, 10000));
	assert_true(pool_is_standby_id(ids));
	launches = fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH);
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	assert_non_null(cell);
	assert_int_equal(strncmp(ids, cell, strlen(cell)), 0);
	assert_int_equal(kfix_pod_state(f, sb, &err),
			 RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY);
	/* refilled with another cell; the claimed one is the sandbox's alone */
	assert_true(KFIX_WAIT(ready_standby(f, after, sizeof(after)) == 1, 10000));
	assert_null(strstr(after, cell));
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH), launches + 1);
	/* stopped, the cell is terminated, never given back */
	assert_int_equal(kfix_stop_pod(f, sb, &err), 0);
	assert_false(fake_provider_has(f->fp, cell));
	assert_false(pool_owns(f->k.pool, cell));
	kfix_free(f);
}

/* A pod of another shape does not take the standby cell: it launches its own. */
static void test_pool__a_pod_of_another_shape_launches_its_own_cell(void **state)
{
	struct kfix *f = fixture(POOL_NANO(1));
	char ids[256];
	_cleanup_free_ char *sb = NULL, *cell = NULL;

	(void)state;
	open_or_fail(f);
	assert_true(KFIX_WAIT(ready_standby(f, ids, sizeof(ids)) == 1, 10000));
	sb = run_pod_of_type(f, "big", "uid-big", "t3.micro");
	cell = kfix_cell_of(f, sb);
	assert_false(pool_is_standby_id(cell));
	assert_int_equal(ready_standby(f, NULL, 0), 1);
	ids[strlen(ids) - 1] = '\0'; /* the one id, without its space */
	assert_true(pool_owns(f->k.pool, ids));
	kfix_free(f);
}

/* Two pods, one standby cell: one takes it, the other launches, never both the same cell. */
static void test_pool__two_pods_one_standby_cell_one_claim(void **state)
{
	struct kfix *f = fixture(POOL_NANO(1));
	struct kfix_runner a, b;
	_cleanup_free_ char *ca = NULL, *cb = NULL;

	(void)state;
	open_or_fail(f);
	assert_true(KFIX_WAIT(ready_standby(f, NULL, 0) == 1, 10000));
	fake_provider_hold(f->fp, 1); /* no refill and no launch ends until released */
	kfix_run_pod_start(f, &a, "a", "uid-a");
	kfix_run_pod_start(f, &b, "b", "uid-b");
	/* the pod that did not claim waits in its launch, beside the refill */
	assert_int_equal(fake_provider_wait_held(f->fp, 2, 10000), 0);
	fake_provider_hold(f->fp, 0);
	assert_int_equal(kfix_run_pod_wait(&a), 0);
	assert_int_equal(kfix_run_pod_wait(&b), 0);
	ca = kfix_cell_of(f, a.id);
	cb = kfix_cell_of(f, b.id);
	assert_string_not_equal(ca, cb);
	assert_true(pool_is_standby_id(ca) != pool_is_standby_id(cb));
	free(a.id);
	free(b.id);
	kfix_free(f);
}

/* A restarted kiyot adopts the standby cells: the same cells, none launched again, none
 * ended by the collector's start-up pass. */
static void test_pool__a_restart_adopts_the_standby_cells(void **state)
{
	struct kfix *f = fixture(POOL_NANO(2));
	char before[256], after[256];
	struct err err = ERR_INIT;
	unsigned launches;

	(void)state;
	open_or_fail(f);
	assert_true(KFIX_WAIT(ready_standby(f, before, sizeof(before)) == 2, 10000));
	launches = fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH);
	assert_int_equal(kfix_restart(f, &err), 0);
	assert_true(KFIX_WAIT(ready_standby(f, after, sizeof(after)) == 2, 10000));
	assert_string_equal(before, after);
	/* the collector's first pass ran and kept them */
	assert_true(KFIX_WAIT(fake_provider_calls(f->fp, FAKE_PROVIDER_LIST) >= 2, 10000));
	assert_int_equal(fake_provider_n_cells(f->fp), 2);
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH), launches);
	assert_int_equal(ready_standby(f, after, sizeof(after)), 2);
	assert_string_equal(before, after);
	kfix_free(f);
}

/* A claim a crash cut short before the sandbox was recorded gives the cell, which never ran a
 * pod, back to the pool; a standby cell the store does not know is an orphan. */
static void test_pool__an_unrecorded_claim_goes_back_and_unknown_cells_go(void **state)
{
	struct kfix *f = fixture(POOL_NANO(1));
	_cleanup_free_ char *db = xasprintf("%s/kiyot.db", f->dir);
	struct store *st = NULL;
	struct err err = ERR_INIT;
	char ids[256];

	(void)state;
	if (store_open(db, &st, &err) < 0 ||
	    store_put_meta(st, "pool/sb-claimed1",
			   "{\"claimedBy\":\"nosuchsandbox\",\"createdNs\":1,\"instanceType\":"
			   "\"t3.nano\",\"ip\":\"10.0.0.9\",\"key\":\"x\",\"placement\":\"fake\","
			   "\"readyNs\":2,\"spot\":0,\"state\":\"claimed\"}",
			   &err) < 0)
		fail_msg("%s", err.msg);
	store_close(st);
	fake_provider_add_cell(f->fp, "sb-claimed1", CELL_RUNNING);
	fake_provider_add_cell(f->fp, "sb-unknown1", CELL_RUNNING);
	open_or_fail(f);
	assert_true(KFIX_WAIT(!fake_provider_has(f->fp, "sb-unknown1"), 10000));
	assert_true(KFIX_WAIT(ready_standby(f, ids, sizeof(ids)) == 1, 10000));
	assert_string_equal(ids, "sb-claimed1 ");
	assert_true(fake_provider_has(f->fp, "sb-claimed1"));
	kfix_free(f);
}

/* With pool.rebalanceReplacement, a cell EC2 recommends rebalancing gets one standby cell of
 * its shape (once, however often it is told), and the pod's next sandbox starts in it; the
 * replacement served, none is launched again. */
static void test_pool__a_rebalance_recommendation_launches_one_replacement(void **state)
{
	struct kfix *f = fixture("defaultInstanceType: t3.nano\npool: { rebalanceReplacement: true "
				 "}\n");
	struct cell_interruption in = { .rebalance = true, .rebalance_time_ns = clock_now_ns() };
	_cleanup_free_ char *sb = NULL, *cell = NULL, *sb2 = NULL, *cell2 = NULL;
	struct err err = ERR_INIT;
	char ids[256];
	unsigned launches;

	(void)state;
	open_or_fail(f);
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	assert_false(pool_is_standby_id(cell));
	assert_int_equal(ready_standby(f, NULL, 0), 0);
	launches = fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH);

	kiyot_on_interruption(&f->k, cell, &in);
	assert_true(KFIX_WAIT(ready_standby(f, ids, sizeof(ids)) == 1, 10000));
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH), launches + 1);
	kiyot_on_interruption(&f->k, cell, &in); /* told again: no second replacement */
	usleep(2500 * 1000);			 /* (two of the refiller's passes) */
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH), launches + 1);

	/* the pod's next sandbox takes it */
	assert_int_equal(kfix_stop_pod(f, sb, &err), 0);
	assert_int_equal(kfix_run_pod(f, "web", "uid-web-2", 0, &sb2, &err), 0);
	cell2 = kfix_cell_of(f, sb2);
	assert_int_equal(strncmp(ids, cell2, strlen(cell2)), 0);
	usleep(2500 * 1000);
	assert_int_equal(ready_standby(f, NULL, 0), 0);
	assert_int_equal(fake_provider_calls(f->fp, FAKE_PROVIDER_LAUNCH), launches + 1);
	kfix_free(f);
}

/* The images at least half of a shape's pods used, most used first; counts halve as pods
 * come, so images no longer used drop out. */
static void test_pool__common_images_are_those_most_pods_used(void **state)
{
	const char *a_b[] = { "r/a:1", "r/b:1", "r/a:1" }, *a[] = { "r/a:1" },
		   *a_c[] = { "r/a:1", "r/c:1" }, *b[] = { "r/b:1" }, *d[] = { "r/d:1" };
	struct pool_images im = { 0 };
	const char *out[4];

	(void)state;
	pool_images_add(&im, a_b, 3); /* r/a:1 twice in one pod counts once */
	pool_images_add(&im, a, 1);
	pool_images_add(&im, a_c, 2);
	assert_int_equal(pool_images_common(&im, out, 4), 1);
	assert_string_equal(out[0], "r/a:1");
	pool_images_add(&im, b, 1); /* r/b:1: 2 of 4 */
	assert_int_equal(pool_images_common(&im, out, 4), 2);
	assert_string_equal(out[0], "r/a:1");
	assert_string_equal(out[1], "r/b:1");
	assert_int_equal(pool_images_common(&im, out, 1), 1);
	for (int i = 0; i < 3 * POOL_IMAGES_PODS; i++)
		pool_images_add(&im, d, 1);
	assert_int_equal(pool_images_common(&im, out, 4), 1);
	assert_string_equal(out[0], "r/d:1");
	pool_images_release(&im);
}

/* A standby cell launched after pods of its shape pre-pulls the images most of them used. */
static void test_pool__standby_cells_prepull_their_shapes_images(void **state)
{
	struct kfix *f = fixture(POOL_NANO(1));
	const char *web[] = { "reg/web:1", "reg/side:2" }, *job[] = { "reg/web:1", "reg/job:3" };
	_cleanup_free_ char *sb = NULL, *first = NULL, *refs = NULL, *cell = NULL;
	struct err err = ERR_INIT;
	char ids[256], first_id[64];

	(void)state;
	open_or_fail(f);
	assert_true(KFIX_WAIT(ready_standby(f, ids, sizeof(ids)) == 1, 10000));
	ids[strlen(ids) - 1] = '\0';
	snprintf(first_id, sizeof(first_id), "%s", ids);
	first = fake_provider_prepull(f->fp, ids);
	assert_string_equal(first, ""); /* no pod yet */
	pool_images(f->k.pool, "t3.nano", 0, web, 2);
	pool_images(f->k.pool, "t3.nano", 0, web, 2);
	pool_images(f->k.pool, "t3.nano", 0, job, 2);
	pool_images(f->k.pool, "t3.micro", 0, job, 2); /* another shape's */
	/* a pod takes the standby cell; the refill pre-pulls web:1 (3 of 3 pods) and side:2 (2 of
	 * 3), not job:3 (1 of 3) */
	assert_int_equal(kfix_run_pod(f, "web", "uid-web", 0, &sb, &err), 0);
	cell = kfix_cell_of(f, sb);
	assert_string_equal(cell, first_id);
	assert_true(
		KFIX_WAIT(ready_standby(f, ids, sizeof(ids)) == 1 && !strstr(ids, cell), 10000));
	ids[strlen(ids) - 1] = '\0';
	refs = fake_provider_prepull(f->fp, ids);
	assert_non_null(refs);
	assert_string_equal(refs, "reg/web:1 reg/side:2");
	kfix_free(f);
}

/* pool.cronJobs follows adaptive.enabled unless it is given; on alone, it asks for a pool. */
static void test_pool__cron_jobs_setting_follows_adaptive(void **state)
{
	struct kiyot_config c;
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(load(&c, "pool: { adaptive: { enabled: true } }\n", &err), 0);
	assert_true(c.pool.cron_jobs);
	kiyot_config_release(&c);
	assert_int_equal(load(&c, "pool: { shapes: [{instanceType: t3.nano}] }\n", &err), 0);
	assert_false(c.pool.cron_jobs);
	kiyot_config_release(&c);
	assert_int_equal(load(&c, "pool: { adaptive: { enabled: true }, cronJobs: false }\n", &err),
			 0);
	assert_false(c.pool.cron_jobs);
	kiyot_config_release(&c);
	assert_int_equal(load(&c, "pool: { cronJobs: true }\n", &err), 0);
	assert_true(c.pool.cron_jobs);
	assert_true(pool_config_enabled(&c.pool));
	kiyot_config_release(&c);
	assert_int_equal(load(&c, "pool: { cronJobs: 1 }\n", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "pool.cronJobs"));
	kiyot_config_release(&c);
}

/* A run (come within its lead: pool_cron_advance) adds its pods to the target until they
 * claimed or its grace after it passed; runs long past add nothing. */
static void test_pool__cron_run_raises_the_target_from_its_lead_to_its_grace(void **state)
{
	struct pool_cron_run r[2] = { { 1000, 5, 0 }, { 1060, 2, 0 } };

	(void)state;
	/* a run that came counts however far ahead it is: its lead may have shortened since */
	assert_int_equal(pool_cron_extra(r, 1, 900, 120), 5);
	assert_int_equal(pool_cron_extra(r, 1, 940, 120), 5);
	assert_int_equal(pool_cron_extra(r, 2, 1000, 120), 7);
	/* 3 of its pods claimed: 2 left */
	r[0].claimed = 3;
	assert_int_equal(pool_cron_extra(r, 1, 1010, 120), 2);
	r[0].claimed = 5;
	assert_int_equal(pool_cron_extra(r, 2, 1010, 120), 2);
	/* its grace passed: nothing, whatever did not claim */
	r[0].claimed = 0;
	assert_int_equal(pool_cron_extra(r, 1, 1120, 120), 5);
	assert_int_equal(pool_cron_extra(r, 1, 1121, 120), 0);
	assert_int_equal(pool_cron_extra(r, 0, 1000, 120), 0);
	/* the lead: a time to ready for each wave of launches the run's pods need, and the
	 * margin */
	assert_true(pool_cron_lead(45, 1, 8) == 45 + POOL_CRON_MARGIN_S);
	assert_true(pool_cron_lead(45, 8, 8) == 45 + POOL_CRON_MARGIN_S);
	assert_true(pool_cron_lead(45, 23, 8) == 3 * 45 + POOL_CRON_MARGIN_S);
	assert_true(pool_cron_lead(45, 0, 8) == 45 + POOL_CRON_MARGIN_S);
}

/* A CronJob's runs come as their lead reaches them and go once their grace passed; at most
 * POOL_CRON_RUNS are kept; a claim counts against a run under way, not one ahead. */
static void test_pool__cron_runs_come_with_their_lead_and_go_after_their_grace(void **state)
{
	struct pool_cron_run r[POOL_CRON_RUNS];
	struct cronsched s;
	struct err err = ERR_INIT;
	size_t n = 0;
	int64_t seen = 0;

	(void)state;
	assert_int_equal(cronsched_parse(&s, "*/15 * * * *", &err), 0);
	/* at 0 (midnight) the run of 00:15 is 900 s away: beyond a lead of 60 s */
	assert_int_equal(pool_cron_advance(r, &n, &s, 3, &seen, 0, 60, 120), 0);
	assert_int_equal(n, 0);
	assert_int_equal(pool_cron_advance(r, &n, &s, 3, &seen, 840, 60, 120), 1);
	assert_int_equal(n, 1);
	assert_true(r[0].at_s == 900 && r[0].pods == 3 && r[0].claimed == 0);
	/* again: nothing more comes */
	assert_int_equal(pool_cron_advance(r, &n, &s, 3, &seen, 850, 60, 120), 0);
	assert_int_equal(n, 1);
	/* a claim ahead of the run is not its pods'; at its time it is */
	assert_false(pool_cron_claim(r, n, 890, 120));
	assert_true(pool_cron_claim(r, n, 899, 120));
	assert_int_equal(r[0].claimed, 1);
	assert_true(pool_cron_claim(r, n, 1000, 120));
	assert_true(pool_cron_claim(r, n, 1020, 120));
	assert_false(pool_cron_claim(r, n, 1020, 120)); /* all 3 claimed */
	/* its grace passed: it goes */
	assert_int_equal(pool_cron_advance(r, &n, &s, 3, &seen, 1021, 60, 120), 0);
	assert_int_equal(n, 0);
	/* every minute with a long lead: 4 runs at most */
	assert_int_equal(cronsched_parse(&s, "* * * * *", &err), 0);
	seen = 0;
	assert_int_equal(pool_cron_advance(r, &n, &s, 1, &seen, 0, 1000, 120), POOL_CRON_RUNS);
	assert_true(r[0].at_s == 60 && r[3].at_s == 240);
	/* a day later, the runs long past go and those due come, none in between */
	assert_int_equal(pool_cron_advance(r, &n, &s, 1, &seen, 86400, 30, 120), 2);
	assert_true(r[0].at_s == 86400 - 60 && r[1].at_s == 86400);
}

/* The schedule "M H * * *" of the first whole minute 90 s from now or later (due in 90 to
 * 150 s). */
static void next_minute_schedule(char *text, size_t size, struct cronsched *s)
{
	int64_t t = (clock_now_ns() / 1000000000LL + 90 + 59) / 60 * 60;
	struct err err = ERR_INIT;

	snprintf(text, size, "%d %d * * *", (int)(t % 3600 / 60), (int)(t % 86400 / 3600));
	if (cronsched_parse(s, text, &err) < 0)
		fail_msg("%s", err.msg);
}

/* Hands the pool one CronJob of pods of t3.nano due in 90 to 150 s, the shape's time to ready
 * made 1000 s so the run is within its lead (and a claim now is before its time) even after
 * the fake's quick launches have lowered the measure (each weighs a fifth). */
static void cron_due(struct kfix *f, int pods)
{
	struct cronsched s;
	char text[64];
	struct pool_cron_want w = { "batch/report", "t3.nano", 0, &s, pods };

	next_minute_schedule(text, sizeof(text), &s);
	pool_launch_time(f->k.pool, "t3.nano", 0, 1000.0);
	pool_cron_set(f->k.pool, &w, 1);
}

/* With pool.cronJobs, a CronJob run due within its shape's time to ready gets standby cells of
 * its pods' shape, as many as its pods, within the caps; without it, none. */
static void test_pool__cron_run_gets_standby_cells_ahead(void **state)
{
	struct kfix *f = fixture("defaultInstanceType: t3.nano\npool: { cronJobs: true }\n");
	char ids[256];

	(void)state;
	open_or_fail(f);
	assert_non_null(f->k.pool);
	assert_int_equal(ready_standby(f, NULL, 0), 0);
	cron_due(f, 2);
	assert_true(KFIX_WAIT(ready_standby(f, ids, sizeof(ids)) == 2, 10000));
	/* a pod claiming before the run's time is not one of its pods: the pool refills */
	{
		_cleanup_free_ char *sb = NULL, *cell = NULL;
		struct err err = ERR_INIT;

		assert_int_equal(kfix_run_pod(f, "early", "uid-early", 0, &sb, &err), 0);
		cell = kfix_cell_of(f, sb);
		assert_true(pool_is_standby_id(cell));
	}
	assert_true(KFIX_WAIT(ready_standby(f, NULL, 0) == 2, 10000));
	/* the CronJob gone, its cells go (no adaptive pool keeps them) */
	pool_cron_set(f->k.pool, NULL, 0);
	assert_true(KFIX_WAIT(ready_standby(f, NULL, 0) == 0, 10000));
	kfix_free(f);

	f = fixture("defaultInstanceType: t3.nano\npool: { cronJobs: true, adaptive: "
		    "{ maxCells: 1 } }\n");
	open_or_fail(f);
	cron_due(f, 3);
	assert_true(KFIX_WAIT(ready_standby(f, NULL, 0) == 1, 10000));
	usleep(1500 * 1000); /* a pass or more later, still one */
	assert_int_equal(ready_standby(f, NULL, 0), 1);
	kfix_free(f);

	f = fixture("defaultInstanceType: t3.nano\npool: { shapes: [{ instanceType: t3.nano, "
		    "count: 1 }], cronJobs: false }\n");
	open_or_fail(f);
	assert_true(KFIX_WAIT(ready_standby(f, NULL, 0) == 1, 10000));
	cron_due(f, 2);
	usleep(1500 * 1000);
	assert_int_equal(ready_standby(f, NULL, 0), 1);
	kfix_free(f);
}

/* A run's standby cells stay once it came within its lead, though the lead shortens after: a
 * launch quicker than the shape's estimated time to ready lowers the measure, and with it the
 * lead, below how far the run still is. Its cells are the run's until its pods claim them. */
static void test_pool__cron_run_keeps_its_cells_when_its_lead_shortens(void **state)
{
	struct kfix *f = fixture("defaultInstanceType: t3.nano\npool: { cronJobs: true }\n");
	char before[256], after[256];
	struct pool *p;

	(void)state;
	open_or_fail(f);
	p = f->k.pool;
	cron_due(f, 2); /* the run 90 to 150 s ahead, within a lead of about 1000 s */
	assert_true(KFIX_WAIT(ready_standby(f, before, sizeof(before)) == 2, 10000));
	/* the shape's launches measured quick: a lead of about 15 s, the run 85 s or more ahead */
	for (int i = 0; i < 40; i++)
		pool_launch_time(p, "t3.nano", 0, 0.01);
	pthread_mutex_lock(&p->lock);
	assert_int_equal(pool_cron_target(p, pool_shape_get(p, "t3.nano", 0), 0.01), 2);
	pthread_mutex_unlock(&p->lock);
	usleep(2500 * 1000); /* two passes or more: the same cells, none ended */
	assert_int_equal(ready_standby(f, after, sizeof(after)), 2);
	assert_string_equal(before, after);
	kfix_free(f);
}

/* A claim at or after a run's time counts against the run: once its pods all claimed, the run
 * asks for no more cells. */
static void test_pool__cron_run_claims_count_against_it(void **state)
{
	struct kfix *f = fixture("defaultInstanceType: t3.nano\npool: { cronJobs: true }\n");
	struct pool *p;
	struct shape *s;
	int64_t now = clock_now_ns() / 1000000000LL;

	(void)state;
	open_or_fail(f);
	cron_due(f, 2);
	/* (its cells up first: no launch is under way while the test holds the lock) */
	assert_true(KFIX_WAIT(ready_standby(f, NULL, 0) == 2, 10000));
	p = f->k.pool;
	pthread_mutex_lock(&p->lock);
	s = pool_shape_get(p, "t3.nano", 0);
	assert_non_null(p->crons);
	/* its run just came (5 s ago) */
	p->crons->runs[0] = (struct pool_cron_run){ now - 5, 2, 0 };
	p->crons->n_runs = 1;
	p->crons->seen_s = now + 3600;
	assert_int_equal(pool_cron_target(p, s, 1.0), 2);
	pool_cron_claimed(p, s);
	assert_int_equal(pool_cron_target(p, s, 1.0), 1);
	pool_cron_claimed(p, s);
	assert_int_equal(pool_cron_target(p, s, 1.0), 0);
	/* a run still ahead does not count claims */
	p->crons->runs[0] = (struct pool_cron_run){ now + 10, 2, 0 };
	pool_cron_claimed(p, s);
	assert_int_equal(pool_cron_target(p, s, 1.0), 2);
	pthread_mutex_unlock(&p->lock);
	kfix_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool__cron_jobs_setting_follows_adaptive),
		cmocka_unit_test(test_pool__cron_run_raises_the_target_from_its_lead_to_its_grace),
		cmocka_unit_test(test_pool__cron_run_gets_standby_cells_ahead),
		cmocka_unit_test(test_pool__cron_run_claims_count_against_it),
		cmocka_unit_test(test_pool__cron_run_keeps_its_cells_when_its_lead_shortens),
		cmocka_unit_test(
			test_pool__cron_runs_come_with_their_lead_and_go_after_their_grace),
		cmocka_unit_test(test_pool__no_section_asks_for_no_standby_cell),
		cmocka_unit_test(test_pool__settings_are_read),
		cmocka_unit_test(test_pool__invalid_settings_name_their_key),
		cmocka_unit_test(test_pool__poisson_quantile),
		cmocka_unit_test(test_pool__arrival_rate_follows_change),
		cmocka_unit_test(test_pool__burst_size_counts_close_arrivals),
		cmocka_unit_test(test_pool__adaptive_target_has_a_safety_margin),
		cmocka_unit_test(test_pool__a_burst_raises_the_target_at_once),
		cmocka_unit_test(test_pool__arrivals_outside_the_window_do_not_count),
		cmocka_unit_test(test_pool__caps_bound_count_and_spend),
		cmocka_unit_test(test_pool__a_pod_takes_a_standby_cell_of_its_shape),
		cmocka_unit_test(test_pool__a_pod_of_another_shape_launches_its_own_cell),
		cmocka_unit_test(test_pool__two_pods_one_standby_cell_one_claim),
		cmocka_unit_test(test_pool__a_restart_adopts_the_standby_cells),
		cmocka_unit_test(test_pool__an_unrecorded_claim_goes_back_and_unknown_cells_go),
		cmocka_unit_test(test_pool__a_rebalance_recommendation_launches_one_replacement),
		cmocka_unit_test(test_pool__common_images_are_those_most_pods_used),
		cmocka_unit_test(test_pool__standby_cells_prepull_their_shapes_images),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
