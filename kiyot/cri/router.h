/*
 * router.h: kiyot next to another CRI runtime (the node's containerd).
 *
 * With a fallback runtime configured, RunPodSandbox runs a pod in a cell only when its config
 * carries the annotation kubernetes.io/target-runtime: kiyot; every other pod is forwarded to
 * the fallback unchanged. Later calls go to the runtime that owns the id they name (kiyot's
 * own ids are in its records, anything else is the fallback's), list calls merge both
 * runtimes' items, and Status combines both runtimes' conditions. Without a fallback every
 * router_* handler is exactly the cri_* handler it wraps.
 *
 * Images: PullImage goes where the pod of its sandbox_config runs; ImageStatus follows the
 * target-runtime annotation of its ImageSpec (the kubelet copies the pod's annotations there)
 * and otherwise asks the fallback, which holds the node's images; RemoveImage forgets the
 * image in both; ImageFsInfo is the fallback's (the node's disk).
 */
#ifndef KIYOT_ROUTER_H
#define KIYOT_ROUTER_H

#include "cri.h"

/* The pod annotation that sends a pod to kiyot, and the value that does. */
#define ROUTER_ANNOTATION "kubernetes.io/target-runtime"
#define ROUTER_TARGET "kiyot"

/* Connects k to the fallback runtime at endpoint ("unix:///run/containerd/containerd.sock").
 * The fallback need not be up yet: calls for its pods fail until it is. */
int router_open(struct kiyot *k, const char *endpoint, struct err *err);
/* Drops the connection (after the server stopped). Safe when router_open was not called. */
void router_close(struct kiyot *k);

/* Non-zero if a pod with these annotations belongs in a cell. */
int router_wants_kiyot(void **annotations, size_t n);

/* Handlers for cri_table.c: one per CRI method. */
#define ROUTER_HANDLER(name)                                                                       \
	int router_##name(void *svc, struct rpc_call *call, const ProtobufCMessage *req,           \
			  ProtobufCMessage *resp, struct err *err)

ROUTER_HANDLER(version);
ROUTER_HANDLER(run_pod_sandbox);
ROUTER_HANDLER(stop_pod_sandbox);
ROUTER_HANDLER(remove_pod_sandbox);
ROUTER_HANDLER(pod_sandbox_status);
ROUTER_HANDLER(list_pod_sandbox);
ROUTER_HANDLER(create_container);
ROUTER_HANDLER(start_container);
ROUTER_HANDLER(stop_container);
ROUTER_HANDLER(remove_container);
ROUTER_HANDLER(list_containers);
ROUTER_HANDLER(container_status);
ROUTER_HANDLER(update_container_resources);
ROUTER_HANDLER(reopen_container_log);
ROUTER_HANDLER(exec_sync);
ROUTER_HANDLER(exec);
ROUTER_HANDLER(attach);
ROUTER_HANDLER(port_forward);
ROUTER_HANDLER(container_stats);
ROUTER_HANDLER(list_container_stats);
ROUTER_HANDLER(pod_sandbox_stats);
ROUTER_HANDLER(list_pod_sandbox_stats);
ROUTER_HANDLER(update_runtime_config);
ROUTER_HANDLER(status);
ROUTER_HANDLER(checkpoint_container);
ROUTER_HANDLER(get_container_events);
ROUTER_HANDLER(list_metric_descriptors);
ROUTER_HANDLER(list_pod_sandbox_metrics);
ROUTER_HANDLER(runtime_config);
ROUTER_HANDLER(list_images);
ROUTER_HANDLER(image_status);
ROUTER_HANDLER(pull_image);
ROUTER_HANDLER(remove_image);
ROUTER_HANDLER(image_fs_info);

#endif
