/*
 * Unit tests for the burst rule: kiyot/sizing/burst.c (a demand from observed peaks, never
 * below the pod's requests and never above its limits), its history of usage per owner
 * (kiyot/cells/usage_history.c over the store's burst_pods table, kept across a restart), and
 * the rule as provision_size_pod applies it to a pod annotated pod.elotl.co/burst-sizing:
 * observed (the embedded us-east-1 catalog, local cells: x86_64, no registry asked).
 */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cells/provision.h"
#include "cells/usage_history.h"
#include "kube/podobject.h"
#include "sizing/burst.h"
#include "sizing/catalog.h"
#include "sizing/sizing.h"
#include "daemon/kiyot.h"
#include "state/store.h"
#include "xalloc.h"

#include "fake_agent.h"
#include "kiyot_fixture.h"
#include "reader_fixture.h"

#define MIB (1024LL * 1024)
#define GIB (1024LL * MIB)

/* ---- the rule ---- */

static const struct pod_demand today = { .cpu_milli = 2000, .memory_bytes = 4 * GIB, .gpus = 1 };
static const struct pod_demand requests = { .cpu_milli = 250, .memory_bytes = 256 * MIB };

/* A peak well below the requests: the pod still gets its requests. */
static void test_burst__never_below_requests(void **state)
{
	struct burst_history h = { .pods = 5, .peak_cpu_milli = 10, .peak_memory_bytes = 20 * MIB };
	struct pod_demand out;

	(void)state;
	assert_true(sizing_burst(&today, &requests, &h, 20, &out));
	assert_int_equal(out.cpu_milli, 250);
	assert_int_equal(out.memory_bytes, 256 * MIB);
	assert_int_equal(out.gpus, 1); /* GPUs as today */
}

/* A peak above the limits (a pod can be seen above its CPU limit's 10 s average, and the
 * headroom adds more): never more than today's demand. */
static void test_burst__never_above_limits(void **state)
{
	struct burst_history h = { .pods = 3,
				   .peak_cpu_milli = 1900,
				   .peak_memory_bytes = 5 * GIB };
	struct pod_demand out;

	(void)state;
	assert_true(sizing_burst(&today, &requests, &h, 20, &out));
	assert_int_equal(out.cpu_milli, 2000);
	assert_int_equal(out.memory_bytes, 4 * GIB);
}

/* Between the two: the peak plus the headroom, rounded up. */
static void test_burst__peak_plus_headroom(void **state)
{
	struct burst_history h = { .pods = 12,
				   .peak_cpu_milli = 350,
				   .peak_memory_bytes = 300 * MIB };
	struct pod_demand out;

	(void)state;
	assert_true(sizing_burst(&today, &requests, &h, 20, &out));
	assert_int_equal(out.cpu_milli, 420);
	assert_int_equal(out.memory_bytes, 360 * MIB);
	assert_true(sizing_burst(&today, &requests, &h, 0, &out));
	assert_int_equal(out.cpu_milli, 350);
	assert_int_equal(out.memory_bytes, 300 * MIB);
	h.peak_cpu_milli = 1;
	assert_true(sizing_burst(&today, &requests, &h, 50, &out));
	assert_int_equal(out.cpu_milli, 250);
}

static void expect_today(const struct pod_demand *d)
{
	assert_int_equal(d->cpu_milli, today.cpu_milli);
	assert_int_equal(d->memory_bytes, today.memory_bytes);
	assert_int_equal(d->gpus, today.gpus);
}

/* No history (none, or no pod that reported): today's demand, unchanged. */
static void test_burst__no_history_sizes_as_today(void **state)
{
	struct burst_history none = { 0 };
	struct pod_demand out;

	(void)state;
	assert_false(sizing_burst(&today, &requests, NULL, 20, &out));
	expect_today(&out);
	assert_false(sizing_burst(&today, &requests, &none, 20, &out));
	expect_today(&out);
}

static void test_burst__requests_of_a_pod(void **state)
{
	struct podspec *ps = rfix_pod(
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"r\"},"
		"\"spec\":{\"containers\":["
		"{\"name\":\"a\",\"image\":\"x\",\"resources\":{\"requests\":{\"cpu\":\"100m\","
		"\"memory\":\"100Mi\"},\"limits\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}},"
		"{\"name\":\"b\",\"image\":\"x\",\"resources\":{\"limits\":{\"cpu\":\"500m\","
		"\"memory\":\"200Mi\"}}}]}}");
	struct pod_demand req, all;

	(void)state;
	sizing_requests_from_pod(ps, &req);
	sizing_demand_from_pod(ps, &all);
	assert_int_equal(req.cpu_milli, 600);
	assert_int_equal(req.memory_bytes, 300 * MIB);
	assert_int_equal(all.cpu_milli, 1500);
	assert_int_equal(all.memory_bytes, GIB + 200 * MIB);
	podspec_free(ps);
}

/* A Pod object as the API server gives it (a ReplicaSet's pod, test/fixtures/podobject):
 * kiyot keeps its controller, the owner the burst rule's history is kept under. */
static void test_burst__a_pod_objects_controller_is_its_owner(void **state)
{
	json_error_t jerr;
	json_t *j = json_load_file("test/fixtures/podobject/pod.json", 0, &jerr);
	struct podspec *ps = NULL;
	struct err err = ERR_INIT;
	_cleanup_free_ char *owner = NULL;

	(void)state;
	if (!j)
		fail_msg("pod.json: %s", jerr.text);
	if (podobject_from_json(j, "5d1c9e0a-2f7b-4c1e-9a43-0c2d7e1f8b61", &ps, &err) < 0)
		fail_msg("podobject_from_json: %s", err.msg);
	json_decref(j);
	assert_non_null(ps->owner_kind);
	assert_string_equal(ps->owner_kind, "ReplicaSet");
	assert_string_equal(ps->owner_name, "web-7d4b9c");
	owner = usage_history_owner(ps);
	assert_string_equal(owner, "shop/ReplicaSet/web-7d4b9c");
	podspec_free(ps);
}

/* ---- the history ---- */

struct tmp {
	char dir[64];
	char *path;
};

static struct store *store_at(struct tmp *t)
{
	struct store *st = NULL;
	struct err err = ERR_INIT;

	if (!t->path) {
		snprintf(t->dir, sizeof(t->dir), "/tmp/test_burst.XXXXXX");
		assert_non_null(mkdtemp(t->dir));
		t->path = xasprintf("%s/kiyot.db", t->dir);
	}
	if (store_open(t->path, &st, &err) < 0)
		fail_msg("store_open: %s", err.msg);
	return st;
}

static void tmp_remove(struct tmp *t)
{
	const char *sfx[] = { "", "-wal", "-shm" };

	for (size_t i = 0; i < 3; i++) {
		_cleanup_free_ char *p = xasprintf("%s%s", t->path, sfx[i]);

		unlink(p);
	}
	rmdir(t->dir);
	free(t->path);
}

/* A usage report of a cell, as its Watch brings it. */
static void report(struct store *st, const char *cell, uint64_t nano_cores, bool rate_known,
		   uint64_t bytes)
{
	Kiyot__Cell__V1__StatsResponse r;
	Kiyot__Cell__V1__ResourceUsage u;

	kiyot__cell__v1__stats_response__init(&r);
	kiyot__cell__v1__resource_usage__init(&u);
	u.cpu_usage_nano_cores = nano_cores;
	u.cpu_rate_known = rate_known;
	u.memory_working_set_bytes = bytes;
	r.cell = &u;
	usage_history_observe(st, cell, &r);
}

static void attach(struct store *st, const char *cell, const char *owner)
{
	struct err err = ERR_INIT;

	if (usage_history_attach(st, cell, owner, &err) < 0)
		fail_msg("attach: %s", err.msg);
}

static struct burst_history history(struct store *st, const char *owner)
{
	struct burst_history h;
	struct err err = ERR_INIT;

	if (usage_history_get(st, owner, &h, &err) < 0)
		fail_msg("history: %s", err.msg);
	return h;
}

/* The peaks of an owner's pods' cells, each the highest its cell reported, are in the store
 * after a restart (a reopen); a cell of another owner, a cell never attached and a cell that
 * never reported a CPU rate count for nothing. */
static void test_burst__history_survives_a_restart(void **state)
{
	struct tmp t = { 0 };
	struct store *st = store_at(&t);
	struct burst_history h;

	(void)state;
	attach(st, "cell-a", "default/ReplicaSet/web-7c9");
	attach(st, "cell-b", "default/ReplicaSet/web-7c9");
	attach(st, "cell-c", "default/ReplicaSet/web-7c9"); /* never with a CPU rate */
	attach(st, "cell-o", "default/Job/other");
	h = history(st, "default/ReplicaSet/web-7c9");
	assert_int_equal(h.pods, 0);
	report(st, "cell-a", 300000000, true, 200 * MIB);
	report(st, "cell-a", 100000000, true, 300 * MIB); /* the peaks stay: 300m, 300 MiB */
	report(st, "cell-b", 350000001, true, 100 * MIB); /* 351m: rounded up */
	report(st, "cell-b", 900000000000, false, 0);	  /* no rate: CPU not counted */
	report(st, "cell-c", 0, false, GIB);		  /* an agent's first reading: no rate */
	report(st, "cell-o", 4000000000, true, 4 * GIB);
	report(st, "cell-x", 4000000000, true, 4 * GIB); /* not attached */
	store_close(st);

	st = store_at(&t);
	h = history(st, "default/ReplicaSet/web-7c9");
	assert_int_equal(h.pods, 2);
	assert_int_equal(h.peak_cpu_milli, 351);
	assert_int_equal(h.peak_memory_bytes, 300 * MIB);
	h = history(st, "default/Job/other");
	assert_int_equal(h.pods, 1);
	assert_int_equal(h.peak_cpu_milli, 4000);
	h = history(st, "default/ReplicaSet/unknown");
	assert_int_equal(h.pods, 0);
	store_close(st);
	tmp_remove(&t);
}

/* Bounded: an owner keeps its newest pods, and the store the owners with the newest pods. */
static void test_burst__history_is_bounded(void **state)
{
	struct tmp t = { 0 };
	struct store *st = store_at(&t);
	struct err err = ERR_INIT;
	int64_t pods, cpu, mem;
	char cell[32];

	(void)state;
	for (int i = 0; i < 5; i++) { /* the oldest two go: their big peaks with them */
		snprintf(cell, sizeof(cell), "a-%d", i);
		assert_int_equal(store_burst_attach(st, cell, "ns/Job/a", 1000 + i, 3, 2, &err), 0);
		assert_int_equal(store_burst_observe(st, cell, i < 2 ? 9000 : 100 + i, MIB, &err),
				 0);
	}
	assert_int_equal(store_burst_history(st, "ns/Job/a", &pods, &cpu, &mem, &err), 0);
	assert_int_equal(pods, 3);
	assert_int_equal(cpu, 104);
	assert_int_equal(store_burst_attach(st, "b-0", "ns/Job/b", 2000, 3, 2, &err), 0);
	assert_int_equal(store_burst_observe(st, "b-0", 1, 1, &err), 0);
	assert_int_equal(store_burst_attach(st, "c-0", "ns/Job/c", 3000, 3, 2, &err), 0);
	assert_int_equal(store_burst_observe(st, "c-0", 1, 1, &err), 0);
	/* three owners, two kept: a (newest pod at 1004) went */
	assert_int_equal(store_burst_history(st, "ns/Job/a", &pods, &cpu, &mem, &err), 0);
	assert_int_equal(pods, 0);
	assert_int_equal(store_burst_history(st, "ns/Job/b", &pods, &cpu, &mem, &err), 0);
	assert_int_equal(pods, 1);
	assert_int_equal(store_burst_history(st, "ns/Job/c", &pods, &cpu, &mem, &err), 0);
	assert_int_equal(pods, 1);
	store_close(st);
	tmp_remove(&t);
}

/* ---- the rule in provision_size_pod ---- */

/* A sandbox config with annotations. */
struct pod {
	Runtime__V1__PodSandboxConfig cfg;
	Runtime__V1__PodSandboxMetadata md;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry ann[2];
	Runtime__V1__PodSandboxConfig__AnnotationsEntry *annp[2];
};

static void pod_init(struct pod *p, const char *burst)
{
	memset(p, 0, sizeof(*p));
	runtime__v1__pod_sandbox_config__init(&p->cfg);
	runtime__v1__pod_sandbox_metadata__init(&p->md);
	p->md.name = (char *)"web-7c9-abcde";
	p->md.namespace_ = (char *)"default";
	p->md.uid = (char *)"0b5e3c1e-uid";
	p->cfg.metadata = &p->md;
	p->cfg.annotations = p->annp;
	if (burst) {
		runtime__v1__pod_sandbox_config__annotations_entry__init(&p->ann[0]);
		p->ann[0].key = (char *)ANN_BURST_SIZING;
		p->ann[0].value = (char *)burst;
		p->annp[0] = &p->ann[0];
		p->cfg.n_annotations = 1;
	}
}

/* A pod of ReplicaSet web-7c9 requesting 250m / 256 MiB, limited to 2 vCPU / 4 GiB. */
static struct podspec *web_pod(bool owned)
{
	char text[1024];

	snprintf(text, sizeof(text),
		 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
		 "\"web-7c9-abcde\",\"namespace\":\"default\",\"uid\":\"0b5e3c1e-uid\"%s},"
		 "\"spec\":{\"containers\":[{\"name\":\"web\",\"image\":\"nginx\",\"resources\":"
		 "{\"requests\":{\"cpu\":\"250m\",\"memory\":\"256Mi\"},\"limits\":{\"cpu\":"
		 "\"2\",\"memory\":\"4Gi\"}}}]}}",
		 owned ? ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":"
			 "\"Deployment\",\"name\":\"not-the-controller\",\"uid\":\"u0\"},"
			 "{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":"
			 "\"web-7c9\",\"uid\":\"u1\",\"controller\":true}]"
		       : "");
	return rfix_pod(text);
}

struct fixture {
	struct kiyot k;
	struct tmp t;
};

static int setup(void **state)
{
	struct fixture *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;

	kiyot_config_defaults(&f->k.cfg);
	if (catalog_load("us-east-1", &f->k.catalog, &err) < 0) {
		print_error("%s\n", err.msg);
		return -1;
	}
	f->k.store = store_at(&f->t);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	store_close(f->k.store);
	tmp_remove(&f->t);
	catalog_free(f->k.catalog);
	kiyot_config_release(&f->k.cfg);
	free(f);
	return 0;
}

static void size_pod(struct kiyot *k, struct pod *p, const struct podspec *ps,
		     struct size_choice *out)
{
	struct err err = ERR_INIT;

	memset(out, 0, sizeof(*out));
	if (provision_size_pod(k, &p->cfg, ps, out, &err) < 0)
		fail_msg("provision_size_pod: %s", err.msg);
}

/* The type sizing picks for a demand, with the default reserve. */
static const char *pick(struct kiyot *k, int64_t cpu_milli, int64_t memory_bytes,
			struct sizing_choice *ch)
{
	struct pod_demand d = { .cpu_milli = cpu_milli, .memory_bytes = memory_bytes };
	struct sizing_reserve r = { k->cfg.reserve_cpu_milli, k->cfg.reserve_memory_bytes };
	struct err err = ERR_INIT;

	if (sizing_pick(k->catalog, &d, &r, ch, &err) < 0)
		fail_msg("sizing_pick: %s", err.msg);
	return ch->instance_type;
}

/* Without history the annotated pod is sized to its limits, as without the annotation, and
 * the reason says why; with its owner's earlier pods' peaks on record (read again after a
 * restart) it is sized to the peak + 20%, a cheaper type here, and the reason gives the
 * figures. */
static void test_burst__pod_sized_from_its_owners_history(void **state)
{
	struct fixture *f = *state;
	struct kiyot *k = &f->k;
	struct podspec *ps = web_pod(true);
	struct size_choice plain, first, burst;
	struct sizing_choice at_limits, at_peak;
	struct pod p;

	pod_init(&p, NULL);
	size_pod(k, &p, ps, &plain);
	assert_string_equal(plain.instance_type, pick(k, 2000, 4 * GIB, &at_limits));
	assert_null(plain.burst_owner);
	assert_null(strstr(plain.reason, "burst"));

	pod_init(&p, "observed");
	size_pod(k, &p, ps, &first);
	assert_string_equal(first.instance_type, plain.instance_type);
	assert_string_equal(first.burst_owner, "default/ReplicaSet/web-7c9");
	assert_non_null(strstr(first.reason, "burst sizing: no usage of an earlier pod of "
					     "ReplicaSet web-7c9 seen yet; sized to the limits"));

	attach(k->store, "cell-1", first.burst_owner);
	attach(k->store, "cell-2", first.burst_owner);
	report(k->store, "cell-1", 200000000, true, 300 * MIB);
	report(k->store, "cell-2", 350000000, true, 120 * MIB);
	store_close(k->store);
	k->store = store_at(&f->t); /* a restart */

	size_pod(k, &p, ps, &burst);
	assert_string_equal(burst.instance_type, pick(k, 420, 360 * MIB, &at_peak));
	assert_true(at_peak.price < at_limits.price);
	assert_non_null(strstr(burst.reason, "burst sized from observed peak 0.35 vCPU / 300 MiB "
					     "of 2 earlier pods of ReplicaSet web-7c9 + 20%: "
					     "0.42 vCPU / 360 MiB (requests 0.25 vCPU / 256 MiB, "
					     "limits 2 vCPU / 4 GiB)"));
	assert_string_equal(burst.burst_owner, "default/ReplicaSet/web-7c9");
	size_choice_release(&plain);
	size_choice_release(&first);
	size_choice_release(&burst);
	podspec_free(ps);
}

/* The headroom is sizing.burstHeadroomPercent's; a peak below the requests gives the
 * requests. */
static void test_burst__headroom_setting_and_requests_floor(void **state)
{
	struct fixture *f = *state;
	struct kiyot *k = &f->k;
	struct podspec *ps = web_pod(true);
	struct sizing_choice want;
	struct size_choice ch;
	struct pod p;

	attach(k->store, "cell-1", "default/ReplicaSet/web-7c9");
	report(k->store, "cell-1", 1000000, true, 10 * MIB);
	k->cfg.burst_headroom_percent = 100;
	pod_init(&p, "observed");
	size_pod(k, &p, ps, &ch);
	assert_string_equal(ch.instance_type, pick(k, 250, 256 * MIB, &want));
	assert_non_null(strstr(ch.reason, "of 1 earlier pod of ReplicaSet web-7c9 + 100%: "
					  "0.25 vCPU / 256 MiB"));
	size_choice_release(&ch);
	podspec_free(ps);
}

/* A pod without a controller, or without a Pod object, is sized to its limits and the reason
 * says why; a value other than observed is refused, naming the annotation. */
static void test_burst__without_owner_or_with_a_wrong_value(void **state)
{
	struct fixture *f = *state;
	struct kiyot *k = &f->k;
	struct podspec *ps = web_pod(false);
	struct sizing_choice want;
	struct size_choice ch;
	struct err err = ERR_INIT;
	struct pod p;

	pod_init(&p, "observed");
	size_pod(k, &p, ps, &ch);
	assert_string_equal(ch.instance_type, pick(k, 2000, 4 * GIB, &want));
	assert_null(ch.burst_owner);
	assert_non_null(strstr(ch.reason, "the pod has no controller"));
	size_choice_release(&ch);
	pod_init(&p, "sometimes");
	memset(&ch, 0, sizeof(ch));
	assert_int_equal(provision_size_pod(k, &p.cfg, ps, &ch, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "annotation pod.elotl.co/burst-sizing: \"sometimes\" is "
					"not a burst sizing; use observed"));
	podspec_free(ps);
}

/* ---- the usage the cells report ---- */

/* A cell attached to an owner (its pod asked for the burst rule): the usage its Watch brings
 * (the fake agent's: 0.25 vCPU, 64 MiB) becomes the owner's history; a cell not attached adds
 * nothing. */
static void test_burst__a_cells_reported_usage_feeds_its_owners_history(void **state)
{
	struct kfix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *sa = NULL, *sb = NULL, *ca = NULL, *cb = NULL;
	struct burst_history h = { 0 };

	assert_int_equal(kfix_run_pod(f, "a", "uid-a", 0, &sa, &err), 0);
	assert_int_equal(kfix_run_pod(f, "b", "uid-b", 0, &sb, &err), 0);
	ca = kfix_cell_of(f, sa);
	cb = kfix_cell_of(f, sb);
	assert_int_equal(usage_history_attach(f->k.store, ca, "default/ReplicaSet/a-1", &err), 0);
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, ca) == 1, 5000));
	assert_true(KFIX_WAIT(fake_agent_watching(f->fa, cb) == 1, 5000));
	assert_int_equal(fake_agent_push_stats(f->fa, cb), 0);
	assert_int_equal(fake_agent_push_stats(f->fa, ca), 0);
	assert_true(
		KFIX_WAIT(usage_history_get(f->k.store, "default/ReplicaSet/a-1", &h, &err) == 0 &&
				  h.pods == 1,
			  5000));
	assert_int_equal(h.peak_cpu_milli, 250);
	assert_int_equal(h.peak_memory_bytes, 64 * MIB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst__never_below_requests),
		cmocka_unit_test(test_burst__never_above_limits),
		cmocka_unit_test(test_burst__peak_plus_headroom),
		cmocka_unit_test(test_burst__no_history_sizes_as_today),
		cmocka_unit_test(test_burst__requests_of_a_pod),
		cmocka_unit_test(test_burst__a_pod_objects_controller_is_its_owner),
		cmocka_unit_test(test_burst__history_survives_a_restart),
		cmocka_unit_test(test_burst__history_is_bounded),
		cmocka_unit_test_setup_teardown(test_burst__pod_sized_from_its_owners_history,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_burst__headroom_setting_and_requests_floor,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_burst__without_owner_or_with_a_wrong_value,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_burst__a_cells_reported_usage_feeds_its_owners_history, kfix_setup,
			kfix_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
