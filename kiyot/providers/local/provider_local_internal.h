/*
 * provider_local_internal.h: what the local provider's files share: provider_local.c (the
 * provider's operations, records, addresses, cgroups and agents), provider_local_net.c (a
 * cell's network: bridge, veth, addresses, anti-spoofing rules) and provider_local_teardown.c
 * (removing what a cell owns). Not for other modules.
 */
#ifndef KIYOT_PROVIDER_LOCAL_INTERNAL_H
#define KIYOT_PROVIDER_LOCAL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cellnet.h"
#include "cellrecord.h"
#include "err.h"
#include "providers/provider.h"

#define DEFAULT_STATE_DIR "/run/kiyot/cells"
#define DEFAULT_BRIDGE "kiyot0"
#define DEFAULT_CIDR "10.77.0.0/16"
#define DEFAULT_CGROUP_ROOT "kiyot"
#define MOUNTINFO_MAX (8 * 1024 * 1024)
#define PIDS_MAX "4096"
#define CPU_PERIOD_US 100000
/* How long teardown keeps killing a cell's processes before giving up on a controller. */
#define KILL_TIMEOUT_MS 5000
/* Writes of the anti-spoofing rules before giving up, the pause before the nth retry, and the
 * lock the node's kiyot processes write them under (local_spoof_sync). */
#define SPOOF_ATTEMPTS 5
#define SPOOF_RETRY_MS 20
#define SPOOF_LOCK "/run/lock/kiyot-ebtables.lock"
/* Retries while a veth name of a just-deleted cell is still held by the kernel. */
#define VETH_RETRIES 50
/* inotify for the cells' agents (provider_local_inotify_need): cells counted at most, the
 * watches of one cell (one per unit), and what the node's other root processes keep (the
 * kernel's default instances, its smallest default watches) */
#define INOTIFY_CELLS_MAX 65536L
#define INOTIFY_WATCHES_PER_CELL 32L
#define INOTIFY_NODE_INSTANCES 128L
#define INOTIFY_NODE_WATCHES 8192L
#define AGENT_ENV_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
/* The agent's state directory in its cell's (where it holds its lock, PIDLOCK_AGENT_FILE) */
#define AGENT_DIR "agent"

/* The controllers a cell gets, in the order they are joined. */
extern const char *const cell_controllers[3];
#define NCTRL 3

/* A cell's address, held while the cell exists so no other cell gets it. */
struct local_lease {
	char id[CELLNET_ID_MAX + 1];
	uint32_t ip;
	bool guarded; /* its anti-spoofing chain was written (and its jump) */
};

struct local_provider {
	char *state_dir;
	char *bridge;
	char *agent_path;
	char *cgroup_root;
	char *cluster_id;
	char *node_images; /* "" when the agents pull every image themselves */
	struct cellnet_cidr cidr;
	char *cidr_text; /* cidr as configured, which the hostPort rules name */

	pthread_mutex_t guard_lock; /* one writer of the anti-spoofing rules at a time */
	pthread_mutex_t lock;	    /* guards everything below */
	pthread_cond_t idle;	    /* signalled when an id leaves busy */
	struct local_lease *leases;
	size_t nleases, leases_cap;
	char **busy; /* ids being launched or terminated */
	size_t nbusy, busy_cap;
	uint32_t hint;	    /* where the next address search starts */
	int bridge_index;   /* the bridge as last set up, 0 until then */
	bool guard_written; /* the network's chain and PREROUTING's jump were written */
};

/* The node's network namespace by name, for host-network units of local cells. Not under the
 * cells' prefix: tools that clean up cells by their netns must never take it for one. */
#define NODE_NETNS CELLNET_NETNS_DIR "/kiyotnode"

/* "<state_dir>/<id>[/<file>]", newly allocated. */
char *local_cell_path(const struct local_provider *p, const char *id, const char *file);
/* The record of cell id in the state directory; -ENOENT when there is none. */
int local_record_load(const struct local_provider *p, const char *id, struct cell_record *out,
		      struct err *err);
/* "/run/netns/kiyot-<id>", newly allocated. */
char *local_netns_path(const char *id);
/* "<cgroup_root>/<id>", newly allocated. */
char *local_cgroup_rel(const struct local_provider *p, const char *id);
/* Kills the agent holding cell id's lock, if one does. */
void local_agent_kill_holder(const struct local_provider *p, const char *id);
/* Drops id's address, if it holds one; whether its anti-spoofing chain was written. */
bool local_lease_drop(struct local_provider *p, const char *id);
/* The OCI runtime makes each unit a cgroup in every v1 hierarchy (devices, freezer, cpuset,
 * ...), under the cell's path: remove the cell's subtree from all of them, not only from the
 * controllers the cell was given. Symlinked hierarchies (cpu,cpuacct) are the same tree. */
void local_remove_all_hierarchies(const char *rel, const char *id, struct err *first);
/* Removes everything a cell may own, whether or not launch finished: processes, mounts,
 * cgroups, veth, netns, state directory. Every step runs even if an earlier one failed;
 * returns the first failure. */
int local_cell_teardown(struct local_provider *p, const char *id, struct err *err);
/* The anti-spoofing rules of every cell holding an address, written whole. One writer at a
 * time, each taking the leases as they are when its turn comes, so the last rules written
 * hold the newest leases. ebtables-restore takes no lock: another process writing the nat
 * table at the same moment makes it fail (a rule it read is gone when it deletes it): the node's
 * kiyot processes take turns (SPOOF_LOCK), and a write another program spoiled is tried again
 * from a fresh read. */
int local_spoof_sync(struct local_provider *p, struct err *err);
/* The rules of cell id, which holds an address, added to those written (cellguard_spoof_update:
 * one ebtables-restore); everything written whole (local_spoof_sync) the first time, or when
 * the node's rules are not as written. */
int local_spoof_add(struct local_provider *p, const char *id, struct err *err);
/* The rules of cell id, whose address was dropped (local_lease_drop said it was guarded),
 * removed the same way. */
int local_spoof_remove(struct local_provider *p, const char *id, struct err *err);
/* The bridge, with the cells' gateway address, up: made when the provider starts, so what the
 * node reaches through it (a registry mirror on the gateway address) works before the first
 * cell, and again by each cell's launch should anyone have removed it. */
int local_bridge_setup(struct local_provider *p, struct err *err);
/* The cell's network: a fresh netns (replacing a stale one) and cell_net_setup. Returns an fd
 * of the netns for the agent to join. */
int local_cell_net_create(struct local_provider *p, const char *id, uint32_t ip, struct err *err);
/* The network of a cell that exists, made whole where a crash (or anyone) left it short: the
 * same result as cell_net_create, in the netns the cell has, so what runs in it keeps its
 * namespace. Returns an fd of the netns; -ENOENT when there is none (the cell must be made
 * again). */
int local_cell_net_repair(struct local_provider *p, const char *id, const char *ipstr,
			  struct err *err);

#endif
