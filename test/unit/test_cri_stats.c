/*
 * Unit tests for kiyot/cri/cri_stats.c. First where no cell is asked: kiyot's CRI server
 * (crihost.h) with records whose sandboxes have no cell (not launched yet, or stopped). Such
 * containers use nothing: their stats are zeros with the attributes the kubelet matches them
 * by; lists hold only what ready cells report, so none here; unknown ids are NOT_FOUND. Then
 * pods in cells: a whole kiyot with the fake provider and agent (kiyot_fixture.h), whose Stats
 * answers fixed figures (the cell: 1 s of CPU, 64 MiB working set; its n-th unit: n ms, n MiB,
 * n * 4 KiB written).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <unistd.h>

#include "crihost.h"
#include "kiyot_fixture.h"

static int setup(void **state)
{
	struct crihost *h = xcalloc(1, sizeof(*h));

	if (crihost_start(h) < 0)
		return -1;
	crihost_add_sandbox(h, "sb-web", "web", SANDBOX_NOTREADY, "");
	crihost_add_container(h, "ctr-app", "sb-web", "app", "busybox", CTR_EXITED);
	crihost_add_container(h, "ctr-log", "sb-web", "log", "busybox", CTR_CREATED);
	crihost_add_sandbox(h, "sb-new", "new", SANDBOX_READY, "");
	*state = h;
	return 0;
}

static int teardown(void **state)
{
	crihost_stop(*state);
	free(*state);
	return 0;
}

static void check_idle_container(const Runtime__V1__ContainerStats *s, const char *id,
				 const char *name)
{
	assert_string_equal(s->attributes->id, id);
	assert_string_equal(s->attributes->metadata->name, name);
	assert_int_equal(s->attributes->n_labels, 1);
	assert_string_equal(s->attributes->labels[0]->key, "app");
	assert_string_equal(s->attributes->labels[0]->value, name);
	assert_int_equal(s->cpu->usage_core_nano_seconds->value, 0);
	assert_int_equal(s->memory->working_set_bytes->value, 0);
	assert_int_equal(s->writable_layer->used_bytes->value, 0);
	assert_string_equal(s->writable_layer->fs_id->mountpoint, "/");
}

/* A container whose pod has no cell: zeros, and its name and labels. */
static void test_cri_stats__container_without_a_cell_uses_nothing(void **state)
{
	struct crihost *h = *state;
	Runtime__V1__ContainerStatsRequest req = RUNTIME__V1__CONTAINER_STATS_REQUEST__INIT;
	Runtime__V1__ContainerStatsResponse *resp = NULL;
	struct err err;

	req.container_id = "ctr-a"; /* a unique prefix */
	assert_int_equal(crihost_call(h, CRI_RT("ContainerStats"), &req.base,
				      &runtime__v1__container_stats_response__descriptor, &resp,
				      &err),
			 0);
	check_idle_container(resp->stats, "ctr-app", "app");
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	req.container_id = "ctr-gone";
	assert_int_equal(crihost_call(h, CRI_RT("ContainerStats"), &req.base,
				      &runtime__v1__container_stats_response__descriptor, &resp,
				      &err),
			 -ENOENT);
	assert_string_equal(err.msg, "container ctr-gone not found");
	req.container_id = "ctr-"; /* ambiguous: both containers start so */
	assert_int_equal(crihost_call(h, CRI_RT("ContainerStats"), &req.base,
				      &runtime__v1__container_stats_response__descriptor, &resp,
				      &err),
			 -ENOENT);
}

/* A stopped pod's stats: its metadata and every container of it, all zeros. */
static void test_cri_stats__stopped_pod_lists_its_containers(void **state)
{
	struct crihost *h = *state;
	Runtime__V1__PodSandboxStatsRequest req = RUNTIME__V1__POD_SANDBOX_STATS_REQUEST__INIT;
	Runtime__V1__PodSandboxStatsResponse *resp = NULL;
	const Runtime__V1__PodSandboxStats *s;
	struct err err;

	req.pod_sandbox_id = "sb-web";
	assert_int_equal(crihost_call(h, CRI_RT("PodSandboxStats"), &req.base,
				      &runtime__v1__pod_sandbox_stats_response__descriptor, &resp,
				      &err),
			 0);
	s = resp->stats;
	assert_string_equal(s->attributes->id, "sb-web");
	assert_string_equal(s->attributes->metadata->name, "web");
	assert_string_equal(s->attributes->metadata->namespace_, "default");
	assert_string_equal(s->attributes->metadata->uid, "uid-web");
	assert_int_equal(s->attributes->n_annotations, 1);
	assert_string_equal(s->attributes->annotations[0]->key, ROUTER_ANNOTATION);
	assert_int_equal(s->linux->cpu->usage_core_nano_seconds->value, 0);
	assert_int_equal(s->linux->memory->usage_bytes->value, 0);
	assert_int_equal(s->linux->n_containers, 2);
	for (size_t i = 0; i < 2; i++)
		check_idle_container(s->linux->containers[i],
				     s->linux->containers[i]->attributes->id,
				     strcmp(s->linux->containers[i]->attributes->id, "ctr-app") == 0
					     ? "app"
					     : "log");
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	/* a ready sandbox whose cell is not up yet: no containers, zeros */
	req.pod_sandbox_id = "sb-new";
	assert_int_equal(crihost_call(h, CRI_RT("PodSandboxStats"), &req.base,
				      &runtime__v1__pod_sandbox_stats_response__descriptor, &resp,
				      &err),
			 0);
	assert_int_equal(resp->stats->linux->n_containers, 0);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	req.pod_sandbox_id = "sb-gone";
	assert_int_equal(crihost_call(h, CRI_RT("PodSandboxStats"), &req.base,
				      &runtime__v1__pod_sandbox_stats_response__descriptor, &resp,
				      &err),
			 -ENOENT);
	assert_string_equal(err.msg, "pod sandbox sb-gone not found");
}

/* The lists hold what ready cells report: with no cell up, nothing, and no error. */
static void test_cri_stats__lists_hold_only_pods_in_cells(void **state)
{
	struct crihost *h = *state;
	Runtime__V1__ListContainerStatsRequest creq =
		RUNTIME__V1__LIST_CONTAINER_STATS_REQUEST__INIT;
	Runtime__V1__ListContainerStatsResponse *cresp = NULL;
	Runtime__V1__ListPodSandboxStatsRequest preq =
		RUNTIME__V1__LIST_POD_SANDBOX_STATS_REQUEST__INIT;
	Runtime__V1__ListPodSandboxStatsResponse *presp = NULL;
	Runtime__V1__PodSandboxStatsFilter pf = RUNTIME__V1__POD_SANDBOX_STATS_FILTER__INIT;
	struct err err;

	assert_int_equal(crihost_call(h, CRI_RT("ListContainerStats"), &creq.base,
				      &runtime__v1__list_container_stats_response__descriptor,
				      &cresp, &err),
			 0);
	assert_int_equal(cresp->n_stats, 0);
	protobuf_c_message_free_unpacked(&cresp->base, NULL);
	pf.id = "sb-";
	preq.filter = &pf;
	assert_int_equal(crihost_call(h, CRI_RT("ListPodSandboxStats"), &preq.base,
				      &runtime__v1__list_pod_sandbox_stats_response__descriptor,
				      &presp, &err),
			 0);
	assert_int_equal(presp->n_stats, 0);
	protobuf_c_message_free_unpacked(&presp->base, NULL);
}

/* ---- pods in cells ---- */

struct cells {
	struct kfix *k;
	char *sb[2], *ctr[2];
};

static int setup_cells(void **state)
{
	struct cells *c = xcalloc(1, sizeof(*c));
	void *k;

	if (kfix_setup(&k) < 0)
		return -1;
	c->k = k;
	kfix_pod_with_container(c->k, "web", &c->sb[0], &c->ctr[0]);
	kfix_pod_with_container(c->k, "db", &c->sb[1], &c->ctr[1]);
	*state = c;
	return 0;
}

static int teardown_cells(void **state)
{
	struct cells *c = *state;
	void *k = c->k;

	kfix_teardown(&k);
	for (int i = 0; i < 2; i++) {
		free(c->sb[i]);
		free(c->ctr[i]);
	}
	free(c);
	return 0;
}

/* One unit's figures, as the fake agent gives its first unit. */
static void check_first_unit(const Runtime__V1__ContainerStats *s)
{
	assert_int_equal(s->cpu->usage_core_nano_seconds->value, 1000000);
	assert_int_equal(s->memory->working_set_bytes->value, 1 << 20);
	assert_int_equal(s->writable_layer->used_bytes->value, 4096);
	assert_int_equal(s->writable_layer->inodes_used->value, 1);
	assert_true(s->cpu->timestamp > 0);
}

/* Each running container's usage, at most one Stats call per cell for a list of every cell
 * (none for a cell whose Watch brought a reading with its units in the last second: when the
 * Watch opens after the pod's containers started, its first reading holds them); a filter
 * narrows to a pod or to labels. */
static void test_cri_stats__containers_in_cells(void **state)
{
	struct cells *c = *state;
	Runtime__V1__ListContainerStatsRequest req =
		RUNTIME__V1__LIST_CONTAINER_STATS_REQUEST__INIT;
	Runtime__V1__ContainerStatsFilter flt = RUNTIME__V1__CONTAINER_STATS_FILTER__INIT;
	Runtime__V1__ListContainerStatsResponse *resp = NULL;
	Runtime__V1__ContainerStatsRequest one = RUNTIME__V1__CONTAINER_STATS_REQUEST__INIT;
	Runtime__V1__ContainerStatsResponse *oresp = NULL;
	unsigned calls = fake_agent_calls(c->k->fa, FAKE_AGENT_STATS);
	struct err err;

	assert_int_equal(kfix_call(c->k, "ListContainerStats", &req.base,
				   &runtime__v1__list_container_stats_response__descriptor, &resp,
				   &err),
			 0);
	assert_int_equal(resp->n_stats, 2);
	for (size_t i = 0; i < 2; i++) {
		check_first_unit(resp->stats[i]);
		assert_true(strcmp(resp->stats[i]->attributes->id, c->ctr[0]) == 0 ||
			    strcmp(resp->stats[i]->attributes->id, c->ctr[1]) == 0);
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	assert_true(fake_agent_calls(c->k->fa, FAKE_AGENT_STATS) <= calls + 2);
	calls = fake_agent_calls(c->k->fa, FAKE_AGENT_STATS);

	flt.pod_sandbox_id = c->sb[1];
	req.filter = &flt;
	assert_int_equal(kfix_call(c->k, "ListContainerStats", &req.base,
				   &runtime__v1__list_container_stats_response__descriptor, &resp,
				   &err),
			 0);
	assert_int_equal(resp->n_stats, 1);
	assert_string_equal(resp->stats[0]->attributes->id, c->ctr[1]);
	assert_string_equal(resp->stats[0]->attributes->metadata->name, "db");
	protobuf_c_message_free_unpacked(&resp->base, NULL);

	one.container_id = c->ctr[0];
	assert_int_equal(kfix_call(c->k, "ContainerStats", &one.base,
				   &runtime__v1__container_stats_response__descriptor, &oresp,
				   &err),
			 0);
	assert_string_equal(oresp->stats->attributes->id, c->ctr[0]);
	check_first_unit(oresp->stats);
	protobuf_c_message_free_unpacked(&oresp->base, NULL);
	/* two more calls, one a cell: at most one reading more for each, should a second pass */
	assert_true(fake_agent_calls(c->k->fa, FAKE_AGENT_STATS) <= calls + 2);
}

/* Usage a cell's Watch brought answers without a call to its agent, until one of its units
 * changes. */
static void test_cri_stats__usage_from_the_watch(void **state)
{
	struct cells *c = *state;
	Runtime__V1__ContainerStatsRequest one = RUNTIME__V1__CONTAINER_STATS_REQUEST__INIT;
	Runtime__V1__ContainerStatsResponse *oresp = NULL;
	Runtime__V1__PodSandboxStatsRequest preq = RUNTIME__V1__POD_SANDBOX_STATS_REQUEST__INIT;
	Runtime__V1__PodSandboxStatsResponse *presp = NULL;
	_cleanup_free_ char *cell0 = kfix_cell_of(c->k, c->sb[0]);
	_cleanup_free_ char *cell1 = kfix_cell_of(c->k, c->sb[1]);
	struct err err;
	int ret = -1;

	fake_agent_fail(c->k->fa, FAKE_AGENT_STATS, ETIMEDOUT, -1);
	assert_int_equal(fake_agent_push_stats(c->k->fa, cell0), 0);
	assert_int_equal(fake_agent_push_stats(c->k->fa, cell1), 0);
	one.container_id = c->ctr[0];
	/* the events come on the Watch's own thread */
	for (int i = 0; i < 200 && ret != 0; i++) {
		ret = kfix_call(c->k, "ContainerStats", &one.base,
				&runtime__v1__container_stats_response__descriptor, &oresp, &err);
		if (ret != 0)
			usleep(10 * 1000);
	}
	assert_int_equal(ret, 0);
	check_first_unit(oresp->stats);
	protobuf_c_message_free_unpacked(&oresp->base, NULL);

	/* a unit of cell 1 changes: its usage is asked for again (and the agent fails) */
	assert_int_equal(fake_agent_unit_exit(c->k->fa, cell1, c->ctr[1], 0, "Completed"), 0);
	for (int i = 0; i < 200 && kfix_container_state(c->k, c->ctr[1], &err) !=
					   RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED;
	     i++)
		usleep(10 * 1000);
	preq.pod_sandbox_id = c->sb[1];
	assert_int_equal(kfix_call(c->k, "PodSandboxStats", &preq.base,
				   &runtime__v1__pod_sandbox_stats_response__descriptor, &presp,
				   &err),
			 -ETIMEDOUT);
	one.container_id = c->ctr[0];
	assert_int_equal(kfix_call(c->k, "ContainerStats", &one.base,
				   &runtime__v1__container_stats_response__descriptor, &oresp,
				   &err),
			 0);
	protobuf_c_message_free_unpacked(&oresp->base, NULL);
	fake_agent_fail(c->k->fa, FAKE_AGENT_STATS, 0, 0);
}

/* crictl stats takes two samples a second apart and divides the CPU used between them by the
 * time between their timestamps: the second must be a newer measurement than the first, even
 * while the Watch's figure is still the latest kiyot has (pushed every few seconds). */
static void test_cri_stats__a_second_sample_is_measured_again(void **state)
{
	struct cells *c = *state;
	Runtime__V1__ContainerStatsRequest one = RUNTIME__V1__CONTAINER_STATS_REQUEST__INIT;
	Runtime__V1__ContainerStatsResponse *first = NULL, *second = NULL;
	Runtime__V1__PodSandboxStatsRequest preq = RUNTIME__V1__POD_SANDBOX_STATS_REQUEST__INIT;
	Runtime__V1__PodSandboxStatsResponse *pfirst = NULL, *psecond = NULL;
	_cleanup_free_ char *cell0 = kfix_cell_of(c->k, c->sb[0]);
	unsigned calls;
	struct err err;

	one.container_id = c->ctr[0];
	preq.pod_sandbox_id = c->sb[0];
	assert_int_equal(fake_agent_push_stats(c->k->fa, cell0), 0);
	assert_int_equal(kfix_call(c->k, "ContainerStats", &one.base,
				   &runtime__v1__container_stats_response__descriptor, &first,
				   &err),
			 0);
	assert_int_equal(kfix_call(c->k, "PodSandboxStats", &preq.base,
				   &runtime__v1__pod_sandbox_stats_response__descriptor, &pfirst,
				   &err),
			 0);
	calls = fake_agent_calls(c->k->fa, FAKE_AGENT_STATS);
	sleep(1); /* crictl's default sample */
	assert_int_equal(kfix_call(c->k, "ContainerStats", &one.base,
				   &runtime__v1__container_stats_response__descriptor, &second,
				   &err),
			 0);
	assert_int_equal(kfix_call(c->k, "PodSandboxStats", &preq.base,
				   &runtime__v1__pod_sandbox_stats_response__descriptor, &psecond,
				   &err),
			 0);
	/* measured again, by the agent at most once (none when its feed pushed a reading in the
	 * second): the pod's call is answered with the same reading */
	assert_true(fake_agent_calls(c->k->fa, FAKE_AGENT_STATS) <= calls + 1);
	assert_true(second->stats->cpu->timestamp > first->stats->cpu->timestamp);
	assert_true(psecond->stats->linux->cpu->timestamp > pfirst->stats->linux->cpu->timestamp);
	check_first_unit(second->stats);
	protobuf_c_message_free_unpacked(&first->base, NULL);
	protobuf_c_message_free_unpacked(&second->base, NULL);
	protobuf_c_message_free_unpacked(&pfirst->base, NULL);
	protobuf_c_message_free_unpacked(&psecond->base, NULL);
}

/* A pod's stats are its cell's figures, with its containers'. */
static void test_cri_stats__pods_in_cells(void **state)
{
	struct cells *c = *state;
	Runtime__V1__PodSandboxStatsRequest req = RUNTIME__V1__POD_SANDBOX_STATS_REQUEST__INIT;
	Runtime__V1__PodSandboxStatsResponse *resp = NULL;
	Runtime__V1__ListPodSandboxStatsRequest lreq =
		RUNTIME__V1__LIST_POD_SANDBOX_STATS_REQUEST__INIT;
	Runtime__V1__ListPodSandboxStatsResponse *lresp = NULL;
	struct err err;

	req.pod_sandbox_id = c->sb[0];
	assert_int_equal(kfix_call(c->k, "PodSandboxStats", &req.base,
				   &runtime__v1__pod_sandbox_stats_response__descriptor, &resp,
				   &err),
			 0);
	assert_string_equal(resp->stats->attributes->id, c->sb[0]);
	assert_string_equal(resp->stats->attributes->metadata->name, "web");
	assert_int_equal(resp->stats->linux->cpu->usage_core_nano_seconds->value, 1000000000);
	assert_int_equal(resp->stats->linux->memory->working_set_bytes->value, 64 << 20);
	assert_int_equal(resp->stats->linux->memory->usage_bytes->value, 80 << 20);
	/* the rate the kubelet shows for the pod, and the memory left, as the agent gave them;
	 * a unit whose rate is not known yet has none (not 0) */
	assert_non_null(resp->stats->linux->cpu->usage_nano_cores);
	assert_int_equal(resp->stats->linux->cpu->usage_nano_cores->value, 250000000);
	assert_int_equal(resp->stats->linux->memory->available_bytes->value, 448 << 20);
	assert_null(resp->stats->linux->containers[0]->cpu->usage_nano_cores);
	assert_string_equal(resp->stats->linux->network->default_interface->name, "eth0");
	assert_int_equal(resp->stats->linux->network->default_interface->rx_bytes->value, 5000);
	assert_int_equal(resp->stats->linux->network->default_interface->tx_bytes->value, 7000);
	assert_int_equal(resp->stats->linux->n_containers, 1);
	check_first_unit(resp->stats->linux->containers[0]);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	assert_int_equal(kfix_call(c->k, "ListPodSandboxStats", &lreq.base,
				   &runtime__v1__list_pod_sandbox_stats_response__descriptor,
				   &lresp, &err),
			 0);
	assert_int_equal(lresp->n_stats, 2);
	protobuf_c_message_free_unpacked(&lresp->base, NULL);
}

/* A cell that cannot answer is left out of the lists (the others still count), and a call
 * for its own container fails saying so. */
static void test_cri_stats__a_cell_that_cannot_answer(void **state)
{
	struct cells *c = *state;
	Runtime__V1__ListContainerStatsRequest req =
		RUNTIME__V1__LIST_CONTAINER_STATS_REQUEST__INIT;
	Runtime__V1__ListContainerStatsResponse *resp = NULL;
	Runtime__V1__ContainerStatsRequest one = RUNTIME__V1__CONTAINER_STATS_REQUEST__INIT;
	Runtime__V1__ContainerStatsResponse *oresp = NULL;
	Runtime__V1__PodSandboxStatsRequest preq = RUNTIME__V1__POD_SANDBOX_STATS_REQUEST__INIT;
	Runtime__V1__PodSandboxStatsResponse *presp = NULL;
	_cleanup_free_ char *prefix = NULL;
	struct err err;

	fake_agent_fail(c->k->fa, FAKE_AGENT_STATS, ETIMEDOUT, 1);
	one.container_id = c->ctr[0];
	assert_int_equal(kfix_call(c->k, "ContainerStats", &one.base,
				   &runtime__v1__container_stats_response__descriptor, &oresp,
				   &err),
			 -ETIMEDOUT);
	prefix = xasprintf("stats of container %s: ", c->ctr[0]);
	if (!strstr(err.msg, prefix))
		fail_msg("\"%s\" does not say \"%s\"", err.msg, prefix);
	fake_agent_fail(c->k->fa, FAKE_AGENT_STATS, ETIMEDOUT, 1);
	preq.pod_sandbox_id = c->sb[0];
	assert_int_equal(kfix_call(c->k, "PodSandboxStats", &preq.base,
				   &runtime__v1__pod_sandbox_stats_response__descriptor, &presp,
				   &err),
			 -ETIMEDOUT);
	assert_non_null(strstr(err.msg, "stats of pod sandbox"));

	fake_agent_fail(c->k->fa, FAKE_AGENT_STATS, ETIMEDOUT, 1);
	assert_int_equal(kfix_call(c->k, "ListContainerStats", &req.base,
				   &runtime__v1__list_container_stats_response__descriptor, &resp,
				   &err),
			 0);
	assert_int_equal(resp->n_stats, 1);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_cri_stats__container_without_a_cell_uses_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cri_stats__stopped_pod_lists_its_containers,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_cri_stats__lists_hold_only_pods_in_cells,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_cri_stats__containers_in_cells, setup_cells,
						teardown_cells),
		cmocka_unit_test_setup_teardown(test_cri_stats__pods_in_cells, setup_cells,
						teardown_cells),
		cmocka_unit_test_setup_teardown(test_cri_stats__usage_from_the_watch, setup_cells,
						teardown_cells),
		cmocka_unit_test_setup_teardown(test_cri_stats__a_second_sample_is_measured_again,
						setup_cells, teardown_cells),
		cmocka_unit_test_setup_teardown(test_cri_stats__a_cell_that_cannot_answer,
						setup_cells, teardown_cells),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
