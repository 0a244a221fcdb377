/*
 * Unit tests for kiyot/cri/cri_stats.c where no cell is asked: kiyot's CRI server (crihost.h)
 * with records whose sandboxes have no cell (not launched yet, or stopped). Such containers
 * use nothing: their stats are zeros with the attributes the kubelet matches them by; lists
 * hold only what ready cells report, so none here; unknown ids are NOT_FOUND.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>

#include "crihost.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_cri_stats__container_without_a_cell_uses_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cri_stats__stopped_pod_lists_its_containers,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_cri_stats__lists_hold_only_pods_in_cells,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
