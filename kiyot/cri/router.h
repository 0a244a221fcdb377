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
rpc_handler router_version;
rpc_handler router_run_pod_sandbox;
rpc_handler router_stop_pod_sandbox;
rpc_handler router_remove_pod_sandbox;
rpc_handler router_pod_sandbox_status;
rpc_handler router_list_pod_sandbox;
rpc_handler router_create_container;
rpc_handler router_start_container;
rpc_handler router_stop_container;
rpc_handler router_remove_container;
rpc_handler router_list_containers;
rpc_handler router_container_status;
rpc_handler router_update_container_resources;
rpc_handler router_reopen_container_log;
rpc_handler router_exec_sync;
rpc_handler router_exec;
rpc_handler router_attach;
rpc_handler router_port_forward;
rpc_handler router_container_stats;
rpc_handler router_list_container_stats;
rpc_handler router_pod_sandbox_stats;
rpc_handler router_list_pod_sandbox_stats;
rpc_handler router_update_runtime_config;
rpc_handler router_status;
rpc_handler router_checkpoint_container;
rpc_handler router_get_container_events;
rpc_handler router_list_metric_descriptors;
rpc_handler router_list_pod_sandbox_metrics;
rpc_handler router_runtime_config;
rpc_handler router_list_images;
rpc_handler router_image_status;
rpc_handler router_pull_image;
rpc_handler router_remove_image;
rpc_handler router_image_fs_info;

#endif
