/*
 * cri.h: helpers the CRI handlers (cri_*.c) share. Every handler has the rpc_handler_fn shape
 * and runs on an RPC worker thread; responses are built in the call's arena.
 */
#ifndef KIYOT_CRI_H
#define KIYOT_CRI_H

#include "cri_api.pb-c.h"
#include "err.h"
#include "daemon/kiyot.h"
#include "rpc.h"

/* Copies a CRI map (labels, annotations) into the arena as entries of type desc. */
void **cri_map_dup(struct rpc_call *c, const ProtobufCMessageDescriptor *desc, void **src,
		   size_t n);
/* A deep copy of a message (heap, protobuf_c_message_free_unpacked); aborts on OOM. */
void *cri_msg_copy(const ProtobufCMessage *m);
/* Non-zero if every selector entry is present with the same value in the map. */
int cri_labels_match(void **labels, size_t n_labels, void **selector, size_t n_selector);
/* The value of key in a CRI map, or NULL. */
const char *cri_map_get(void **map, size_t n, const char *key);

/* Sends the sandbox's whole desired pod to its cell and folds the unit statuses the agent
 * answers into the records. Call without k->lock. pending/desired override the state the
 * container with id `id` is asked to reach (id may be NULL). */
int cri_apply_pod(struct kiyot *k, const char *sandbox_id, int64_t timeout_ms, struct err *err);

/* Makes the sandbox's hostPorts (port mappings with a host port) reach its cell at ip: DNAT
 * rules on the node for a local cell (cellnat.h); nothing for an EC2 cell, whose hostPorts are
 * its instance's own ports, or a host-network pod, whose are the node's. Idempotent. A port
 * another pod holds is -EADDRINUSE naming that pod. */
int cri_sandbox_host_ports(struct kiyot *k, const struct sandbox *sb, const char *ip,
			   struct err *err);

/* The container annotation where the kubelet says where the termination message is written. */
#define ANN_TERMINATION_MESSAGE_PATH "io.kubernetes.container.terminationMessagePath"

/* Handlers: kiyot's own answer to each CRI method (router.c sends a call here or to the
 * fallback runtime). */
rpc_handler cri_version;
rpc_handler cri_run_pod_sandbox;
rpc_handler cri_stop_pod_sandbox;
rpc_handler cri_remove_pod_sandbox;
rpc_handler cri_pod_sandbox_status;
rpc_handler cri_list_pod_sandbox;
rpc_handler cri_create_container;
rpc_handler cri_start_container;
rpc_handler cri_stop_container;
rpc_handler cri_remove_container;
rpc_handler cri_list_containers;
rpc_handler cri_container_status;
rpc_handler cri_reopen_container_log;
rpc_handler cri_update_container_resources;
rpc_handler cri_exec_sync;
rpc_handler cri_exec;
rpc_handler cri_attach;
rpc_handler cri_port_forward;
rpc_handler cri_update_runtime_config;
rpc_handler cri_status;
rpc_handler cri_get_container_events;
rpc_handler cri_unimplemented;
rpc_handler cri_runtime_config;
rpc_handler cri_container_stats;
rpc_handler cri_list_container_stats;
rpc_handler cri_pod_sandbox_stats;
rpc_handler cri_list_pod_sandbox_stats;
rpc_handler cri_list_images;
rpc_handler cri_image_status;
rpc_handler cri_pull_image;
rpc_handler cri_remove_image;
rpc_handler cri_image_fs_info;

#endif
