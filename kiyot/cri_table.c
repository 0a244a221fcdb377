/*
 * cri_table.c: every method of CRI v1's RuntimeService and ImageService, with its handler.
 * A unit test checks this table against the protobuf-c service descriptors. Every method goes
 * through router.c, which sends it to kiyot or to the fallback runtime.
 */
#include "cri.h"
#include "router.h"

#define RT(name, type, fn, flags)                                                                  \
	{                                                                                          \
		"/runtime.v1.RuntimeService/" name, &runtime__v1__##type##_request__descriptor,    \
			&runtime__v1__##type##_response__descriptor, router_##fn, flags            \
	}
#define IMG(name, type, fn)                                                                        \
	{                                                                                          \
		"/runtime.v1.ImageService/" name, &runtime__v1__##type##_request__descriptor,      \
			&runtime__v1__##type##_response__descriptor, router_##fn, 0                \
	}

static const struct rpc_method methods[] = {
	RT("Version", version, version, 0),
	RT("RunPodSandbox", run_pod_sandbox, run_pod_sandbox, 0),
	RT("StopPodSandbox", stop_pod_sandbox, stop_pod_sandbox, 0),
	RT("RemovePodSandbox", remove_pod_sandbox, remove_pod_sandbox, 0),
	RT("PodSandboxStatus", pod_sandbox_status, pod_sandbox_status, 0),
	RT("ListPodSandbox", list_pod_sandbox, list_pod_sandbox, 0),
	RT("CreateContainer", create_container, create_container, 0),
	RT("StartContainer", start_container, start_container, 0),
	RT("StopContainer", stop_container, stop_container, 0),
	RT("RemoveContainer", remove_container, remove_container, 0),
	RT("ListContainers", list_containers, list_containers, 0),
	RT("ContainerStatus", container_status, container_status, 0),
	RT("UpdateContainerResources", update_container_resources, update_container_resources, 0),
	RT("ReopenContainerLog", reopen_container_log, reopen_container_log, 0),
	RT("ExecSync", exec_sync, exec_sync, 0),
	RT("Exec", exec, exec, 0),
	RT("Attach", attach, attach, 0),
	RT("PortForward", port_forward, port_forward, 0),
	RT("ContainerStats", container_stats, container_stats, 0),
	RT("ListContainerStats", list_container_stats, list_container_stats, 0),
	RT("PodSandboxStats", pod_sandbox_stats, pod_sandbox_stats, 0),
	RT("ListPodSandboxStats", list_pod_sandbox_stats, list_pod_sandbox_stats, 0),
	RT("UpdateRuntimeConfig", update_runtime_config, update_runtime_config, 0),
	RT("Status", status, status, 0),
	RT("CheckpointContainer", checkpoint_container, checkpoint_container, 0),
	{ "/runtime.v1.RuntimeService/GetContainerEvents",
	  &runtime__v1__get_events_request__descriptor,
	  &runtime__v1__container_event_response__descriptor, router_get_container_events,
	  RPC_SERVER_STREAM },
	RT("ListMetricDescriptors", list_metric_descriptors, list_metric_descriptors, 0),
	RT("ListPodSandboxMetrics", list_pod_sandbox_metrics, list_pod_sandbox_metrics, 0),
	RT("RuntimeConfig", runtime_config, runtime_config, 0),
	IMG("ListImages", list_images, list_images),
	IMG("ImageStatus", image_status, image_status),
	IMG("PullImage", pull_image, pull_image),
	IMG("RemoveImage", remove_image, remove_image),
	IMG("ImageFsInfo", image_fs_info, image_fs_info),
};

const struct rpc_method *cri_method_table(size_t *n)
{
	*n = sizeof(methods) / sizeof(methods[0]);
	return methods;
}
