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
#include "state/crimap.h"

/* Copies a CRI map (labels, annotations) into the arena as entries of type desc. */
void **cri_map_dup(struct rpc_call *c, const ProtobufCMessageDescriptor *desc, void **src,
		   size_t n);
/* A deep copy of a message (heap, protobuf_c_message_free_unpacked); aborts on OOM. */
void *cri_msg_copy(const ProtobufCMessage *m);
/* Non-zero if every selector entry is present with the same value in the map. */
int cri_labels_match(void **labels, size_t n_labels, void **selector, size_t n_selector);

/* Updates a container from a unit status; non-zero if it changed. Needs the records' lock. */
int kiyot_apply_unit_status(struct kiyot *k, struct container *c,
			    const Kiyot__Cell__V1__UnitStatus *st);
/* Marks a sandbox not ready and its live containers exited with reason. Needs the records' lock. */
void kiyot_sandbox_lost(struct kiyot *k, struct sandbox *sb, const char *reason);
/* The host file a container's log goes to, or NULL. Needs the records' lock; caller frees. */
char *kiyot_log_file(struct kiyot *k, const struct container *c);
/* Gives a container the writer of its log file (ctrlog.h), from the mark it has; one it has
 * already, or a kiyot without a committer (tests), is left as it is. Needs the records' lock. */
void kiyot_log_attach(struct kiyot *k, struct container *c);

/* Takes the records' lock for the handler of an RPC_INLINE method (cri_table.c): on the thread
 * that took the call it never waits for it, and false tells the handler to return
 * RPC_NEEDS_WORKER (someone holds it: the call runs again on its pool, where it waits). */
static inline bool cri_records_lock(struct kiyot *k, struct rpc_call *call)
{
	if (rpc_inline(call))
		return records_trylock(k->records);
	records_lock(k->records);
	return true;
}

/* The image kiyot knows by id (with or without "sha256:"), tag or repo digest, or NULL.
 * Needs the records' lock. */
const struct image_rec *kiyot_find_image(struct kiyot *k, const char *ref);
/* Removes from the node's image store every image kiyot no longer lists that no container
 * uses (what RemoveImage left while a container ran on it). Takes the records' lock. */
void kiyot_node_images_sweep(struct kiyot *k);
/* Pre-pulls refs (a JSON array of strings) into the node's store in the background,
 * anonymously; the kubelet's own pulls of them join it. Takes the records' lock. */
void kiyot_node_prepull(struct kiyot *k, const json_t *refs);
/* Stops the node's pre-pulls, waiting up to wait_ms for each; 0 when none is left, so the
 * node's store may be freed. Takes the records' lock. */
int kiyot_node_prepulls_stop(struct kiyot *k, int wait_ms);
/* What cells report (the hooks of cri_cells_hooks): a unit's status, its log bytes. */
void kiyot_on_unit_status(struct kiyot *k, const char *cell_id,
			  const Kiyot__Cell__V1__UnitStatus *st);
void kiyot_on_unit_log(struct kiyot *k, const char *unit_id, uint64_t offset, const uint8_t *data,
		       size_t len);

/* The interruption hook, on a thread of the cell manager's own (it may block), when a cell's agent said
 * its instance is to be interrupted (cells.h): a spot interruption notice stops the pod's
 * containers within their grace period, ending before EC2 acts, and makes its sandbox not
 * ready, so the kubelet makes the pod a new sandbox in a new cell; the Cell object shows
 * it. */
struct cell_interruption;
void kiyot_on_interruption(struct kiyot *k, const char *cell_id,
			   const struct cell_interruption *in);

/* The log offsets of the units of a cell, for resuming its Watch stream. */
void kiyot_log_offsets(struct kiyot *k, const char *cell_id, Kiyot__Cell__V1__LogOffset ***out,
		       size_t *n);
void kiyot_log_offsets_free(Kiyot__Cell__V1__LogOffset **o, size_t n);

/* What cells report, as the hooks the cell manager is made with (cells/cells.h): unit
 * statuses, log bytes and offsets, interruptions, lost sandboxes, the collector's passes,
 * each applied to k's records (cell_reports.c). */
struct cells_hooks;
void cri_cells_hooks(struct kiyot *k, struct cells_hooks *out);

/* Sends the sandbox's whole desired pod to its cell and folds the unit statuses the agent
 * answers into the records. Call without the records' lock. pending/desired override the state the
 * container with id `id` is asked to reach (id may be NULL). */
int cri_apply_pod(struct kiyot *k, const char *sandbox_id, int64_t timeout_ms, struct err *err);

/* Makes the sandbox's hostPorts (port mappings with a host port) reach its cell, cell_id at ip,
 * through the provider (provider_ops.host_ports: DNAT rules on the node for a local cell);
 * nothing for an EC2 cell, whose hostPorts are its instance's own ports, or a host-network pod,
 * whose are the node's. Idempotent. A port another pod holds is -EADDRINUSE naming that pod.
 * Reads only sb's config (fixed): called without the records' lock, as it runs the provider's
 * rule writes. */
int cri_sandbox_host_ports(struct kiyot *k, const struct sandbox *sb, const char *cell_id,
			   const char *ip, struct err *err);

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
