/*
 * cri_table.c: every method of CRI v1's RuntimeService and ImageService, with its handler.
 * A unit test checks this table against the protobuf-c service descriptors. Every method goes
 * through router.c, which sends it to kiyot or to the fallback runtime, and runs on the worker
 * pool of its kind (below), or, marked INLINE, on the thread that took the call.
 */
#include "cri.h"
#include "router.h"

/*
 * The worker pools, by what their calls wait for, so that no kind of call waits for threads
 * another kind holds: however many pulls stall on a slow registry or cells take to launch,
 * Version and Status still answer (the kubelet marks a runtime down when they time out).
 *	fast       kiyot's own state only: versions, statuses, lists, streaming URLs
 *	stats      usage, from what cells' Watches pushed last, or a short call to a cell's agent
 *	exec       ExecSync (exec probes): as long as the command, in one cell's agent; a cell
 *	           runs CELL_EXECS_MAX at once and the rest wait their turn without a worker
 *	           (cells.h), so a flood of execs into one cell holds up no other cell's
 *	lifecycle  cells launched, applied to and torn down (seconds, minutes on EC2)
 *	pull       registries (a pull is as slow as its registry)
 * Each pool is bounded; a call beyond its queue is refused at once rather than held.
 *
 * INLINE (rpc.h's RPC_INLINE): answered on the thread that took the call, without waking a
 * worker, which on a saturated CPU costs more than the call (a status call's p95 was that
 * wait). Only calls that read the records and wait for nothing: Version, the statuses and
 * the lists of kiyot's own pods, containers and images. Their handlers take the records' lock
 * only if it is free (cri_records_lock) and ask for a worker of their pool (RPC_NEEDS_WORKER)
 * when it is not, when the fallback runtime has to be asked (its pods, the merged lists), or
 * when a cell's agent has to be (a verbose PodSandboxStatus of a cell whose release is not
 * known yet): the pool below is where they run then.
 */
enum {
	POOL_FAST,
	POOL_STATS,
	POOL_EXEC,
	POOL_LIFECYCLE,
	POOL_PULL
};

static const struct rpc_pool pools[] = {
	[POOL_FAST] = { "fast", 16, 0 }, [POOL_STATS] = { "stats", 8, 0 },
	[POOL_EXEC] = { "exec", 32, 0 }, [POOL_LIFECYCLE] = { "lifecycle", 32, 0 },
	[POOL_PULL] = { "pull", 16, 0 },
};

#define RT(name, type, fn, flags, pool)                                                            \
	{                                                                                          \
		"/runtime.v1.RuntimeService/" name, &runtime__v1__##type##_request__descriptor,    \
			&runtime__v1__##type##_response__descriptor, router_##fn, flags, pool      \
	}
#define IMG(name, type, fn, flags, pool)                                                           \
	{                                                                                          \
		"/runtime.v1.ImageService/" name, &runtime__v1__##type##_request__descriptor,      \
			&runtime__v1__##type##_response__descriptor, router_##fn, flags, pool      \
	}
#define INLINE RPC_INLINE

static const struct rpc_method methods[] = {
	RT("Version", version, version, INLINE, POOL_FAST),
	RT("RunPodSandbox", run_pod_sandbox, run_pod_sandbox, 0, POOL_LIFECYCLE),
	RT("StopPodSandbox", stop_pod_sandbox, stop_pod_sandbox, 0, POOL_LIFECYCLE),
	RT("RemovePodSandbox", remove_pod_sandbox, remove_pod_sandbox, 0, POOL_LIFECYCLE),
	RT("PodSandboxStatus", pod_sandbox_status, pod_sandbox_status, INLINE, POOL_FAST),
	RT("ListPodSandbox", list_pod_sandbox, list_pod_sandbox, INLINE, POOL_FAST),
	RT("CreateContainer", create_container, create_container, 0, POOL_LIFECYCLE),
	RT("StartContainer", start_container, start_container, 0, POOL_LIFECYCLE),
	RT("StopContainer", stop_container, stop_container, 0, POOL_LIFECYCLE),
	RT("RemoveContainer", remove_container, remove_container, 0, POOL_LIFECYCLE),
	RT("ListContainers", list_containers, list_containers, INLINE, POOL_FAST),
	RT("ContainerStatus", container_status, container_status, INLINE, POOL_FAST),
	RT("UpdateContainerResources", update_container_resources, update_container_resources, 0,
	   POOL_LIFECYCLE),
	RT("ReopenContainerLog", reopen_container_log, reopen_container_log, 0, POOL_FAST),
	RT("ExecSync", exec_sync, exec_sync, 0, POOL_EXEC),
	RT("Exec", exec, exec, 0, POOL_FAST),
	RT("Attach", attach, attach, 0, POOL_FAST),
	RT("PortForward", port_forward, port_forward, 0, POOL_FAST),
	RT("ContainerStats", container_stats, container_stats, 0, POOL_STATS),
	RT("ListContainerStats", list_container_stats, list_container_stats, 0, POOL_STATS),
	RT("PodSandboxStats", pod_sandbox_stats, pod_sandbox_stats, 0, POOL_STATS),
	RT("ListPodSandboxStats", list_pod_sandbox_stats, list_pod_sandbox_stats, 0, POOL_STATS),
	RT("UpdateRuntimeConfig", update_runtime_config, update_runtime_config, 0, POOL_FAST),
	RT("Status", status, status, 0, POOL_FAST),
	RT("CheckpointContainer", checkpoint_container, checkpoint_container, 0, POOL_LIFECYCLE),
	{ "/runtime.v1.RuntimeService/GetContainerEvents",
	  &runtime__v1__get_events_request__descriptor,
	  &runtime__v1__container_event_response__descriptor, router_get_container_events,
	  RPC_SERVER_STREAM, POOL_FAST },
	RT("ListMetricDescriptors", list_metric_descriptors, list_metric_descriptors, 0,
	   POOL_STATS),
	RT("ListPodSandboxMetrics", list_pod_sandbox_metrics, list_pod_sandbox_metrics, 0,
	   POOL_STATS),
	RT("RuntimeConfig", runtime_config, runtime_config, 0, POOL_FAST),
	IMG("ListImages", list_images, list_images, INLINE, POOL_FAST),
	IMG("ImageStatus", image_status, image_status, INLINE, POOL_FAST),
	IMG("PullImage", pull_image, pull_image, 0, POOL_PULL),
	IMG("RemoveImage", remove_image, remove_image, 0, POOL_LIFECYCLE),
	IMG("ImageFsInfo", image_fs_info, image_fs_info, 0, POOL_FAST),
};

_Static_assert(sizeof(pools) / sizeof(pools[0]) <= RPC_MAX_POOLS, "too many worker pools");

const struct rpc_pool *cri_pool_table(size_t *n)
{
	*n = sizeof(pools) / sizeof(pools[0]);
	return pools;
}

const struct rpc_method *cri_method_table(size_t *n)
{
	*n = sizeof(methods) / sizeof(methods[0]);
	return methods;
}
