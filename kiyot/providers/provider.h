/*
 * provider.h: where cells come from. Every provider (local, ec2) sits behind these operations
 * and boots its cells from the same bootstrap document (cells_bootstrap in kiyot/cells/cells.c): the local
 * provider hands it to a cell-agent it starts in a network namespace, EC2 passes it as
 * user-data.
 *
 * Thread safety: a provider may be called from several threads at once; each implementation
 * serialises what it must.
 */
#ifndef KIYOT_PROVIDER_H
#define KIYOT_PROVIDER_H

#include <stdint.h>
#include <stddef.h>

#include "err.h"

/* cell_spec.spot: a spot cell, and one that may run on demand when spot has no capacity (the
 * pod's annotation pod.elotl.co/spot-fallback: on-demand). */
#define CELL_SPOT 1
#define CELL_SPOT_OR_ON_DEMAND 2
/* cell_spec.arch: the catalog's architecture bits (CATALOG_ARCH_*); 0 is x86_64 */
#define CELL_ARCH_X86_64 1u
#define CELL_ARCH_ARM64 2u

/* A type's spot price in one availability zone (zone NULL: its price anywhere, the
 * catalog's), with the type's spot interruption band (0: under 5% a month, to 4: over 20%;
 * -1 unknown). */
struct cell_zone_price {
	const char *instance_type;
	const char *zone;
	double price; /* USD/hour */
	int band;
};

/* What to launch. All strings borrowed for the duration of the call. */
struct cell_spec {
	const char *cell_id;	/* kiyot's id for the cell, [a-z0-9-], at most 40 chars */
	const char *cluster_id; /* durable id of this kiyot installation */
	const char *pod_uid;
	const char *pod_name;
	const char *pod_namespace;
	const char *instance_type; /* chosen by sizing */
	double cpus;		   /* the instance type's vCPUs: the cell's CPU cap */
	int64_t memory_bytes;	   /* the instance type's memory: the cell's memory cap */
	const char *bootstrap;	   /* the bootstrap document (JSON text) the cell boots with */
	int spot; /* 0: on demand; CELL_SPOT; CELL_SPOT_OR_ON_DEMAND: on demand when no spot */
	/* The architecture sizing chose (CELL_ARCH_*; 0: x86_64): the provider boots that
	 * architecture's cell image (EC2: ec2.imageIds), and every fallback type is of it. */
	unsigned arch;
	/* Types to try in order when the chosen one has no capacity (sizing's runners-up). */
	const char *const *fallback_types;
	size_t n_fallback_types;
	/* Spot pods: the spot prices of the chosen type and its fallbacks, per zone where known,
	 * so a provider with subnets in several zones tries the cheapest zone first. */
	const struct cell_zone_price *zone_prices;
	size_t n_zone_prices;
	/* Images the cell pulls as soon as it boots (from the Pod object), before any unit asks. */
	const char *const *prepull;
	size_t n_prepull;
	/* The pod's labels, for instance tags. */
	const char *const *label_keys;
	const char *const *label_values;
	size_t n_labels;
	/* A standby cell of the pool (kiyot/pool/pool.h): launched before any pod asked for it,
	 * the pod fields empty. A provider with tags marks it as a standby cell of this node
	 * (EC2: a tag the garbage collector and a restarted kiyot read); assign gives it its pod
	 * once one claims it. */
	int standby;
};

enum cell_phase {
	CELL_PENDING,
	CELL_RUNNING,
	CELL_TERMINATING,
	CELL_TERMINATED,
	CELL_FAILED
};

/* What a provider knows of one cell. Owned strings; release with cell_info_release. */
struct cell_info {
	char *cell_id;
	char *instance_id; /* provider's id: local "local-<cell_id>", ec2 "i-..." */
	char *instance_type;
	char *ip; /* the cell's address, where its agent listens */
	char *pod_uid;
	int64_t launched_ns;
	enum cell_phase phase;
	/* Why it is in that phase, when the provider knows (state only; NULL otherwise): EC2's
	 * state reason ("Server.SpotInstanceTermination: Spot instance termination"), the local
	 * provider's word of its agent. */
	char *reason;
	/* launch's answer only: what the launch did besides the obvious, for the Cell (EC2: "t3.nano:
	 * InsufficientInstanceCapacity; launched t3a.nano"); NULL when nothing */
	char *launch_note;
};

/* One hostPort of a pod: host_port on the node's addresses (or host_ip) to the cell's
 * container_port. protocol: "tcp", "udp" or "sctp". Strings borrowed. */
struct cell_host_port {
	const char *protocol;
	int host_port, container_port;
	const char *host_ip; /* NULL, "" or "0.0.0.0": every address of the node */
};

struct provider_ops {
	const char *name;
	/* How long a launched cell may take until its agent answers, unless
	 * cells.bootTimeoutSeconds says otherwise. */
	int boot_timeout_s;
	/* Cells run on other machines and do not see the node's files: volumes are shipped
	 * (shipvol.h) instead of bind-mounted from the kubelet's directories. */
	int remote_files;
	/* Launches standby cells (cell_spec.standby: no pod yet) and assigns them: the warm pool
	 * (kiyot/pool/pool.h) runs only on such a provider. */
	int standby_cells;
	/* Starts a cell; on success fills *out (phase PENDING or RUNNING). Idempotent per cell_id:
	 * launching an id that exists returns the existing cell. */
	int (*launch)(void *self, const struct cell_spec *spec, struct cell_info *out,
		      struct err *err);
	/* What the provider sees of a cell right now, asked every few seconds while a launch
	 * waits for its agent: phase PENDING or RUNNING while it may still come up; TERMINATING,
	 * TERMINATED or FAILED (with the reason, when known) once it cannot (EC2: the instance
	 * left pending and running; local: its agent process is gone). Fills *out (release it);
	 * -ENOENT when the provider has no such cell (EC2 may not list a new instance for a few
	 * seconds). NULL: launches wait for the agent alone. */
	int (*state)(void *self, const char *cell_id, struct cell_info *out, struct err *err);
	/* Tears a cell down. Idempotent: an unknown cell is not an error. */
	int (*terminate)(void *self, const char *cell_id, struct err *err);
	/* Every cell this provider owns (carrying our cluster id), whatever kiyot remembers. */
	int (*list)(void *self, struct cell_info **out, size_t *n, struct err *err);
	/* Brings a cell whose agent stopped answering back to life (local: starts the agent
	 * again from its bootstrap document). 0 when the agent runs. */
	int (*heal)(void *self, const char *cell_id, struct err *err);
	/* Connects this process to 127.0.0.1:port in a cell's pod network (the node's for a
	 * host-network pod) when the provider's cells share the node, so port-forward needs no
	 * hop through the agent; NULL when they do not. The connected socket or -errno. */
	int (*dial)(void *self, const char *cell_id, uint16_t port, int host_network,
		    struct err *err);
	/* A standby cell (launched with spec.standby) now runs the pod spec names (its cell_id,
	 * pod and labels; the rest as at its launch): the provider marks the cell as the pod's
	 * where it keeps such marks (EC2: the pod's tags replace the standby tag; local: the
	 * cell's record names the pod). NULL: nothing to mark. */
	int (*assign)(void *self, const struct cell_spec *spec, struct err *err);
	/* Makes a pod's hostPorts (n of them; owner "namespace/name") reach its cell at ip where
	 * the provider's cells sit behind the node (local: DNAT rules on the node, kept when
	 * kiyot stops). Idempotent; a port another pod holds is -EADDRINUSE naming that pod.
	 * NULL: a cell's hostPorts are its own address's ports (EC2) and need nothing. */
	int (*host_ports)(void *self, const char *cell_id, const char *owner, const char *ip,
			  const struct cell_host_port *ports, size_t n, struct err *err);
	/* At start: removes the hostPort rules of cells not in keep (n_keep ids: a state
	 * directory wiped, a teardown a crash cut short); how many went. NULL with host_ports. */
	int (*host_ports_prune)(void *self, const char *const *keep, size_t n_keep,
				struct err *err);
	/* Frees the provider itself; the cells it launched keep running. */
	void (*destroy)(void *self);
};

struct provider {
	const struct provider_ops *ops;
	void *self;
};

void cell_info_release(struct cell_info *c);
void cell_info_array_free(struct cell_info *a, size_t n);

/* The local provider's settings. */
struct local_provider_config {
	const char *state_dir;	 /* e.g. /run/kiyot/cells: one directory per cell */
	const char *bridge;	 /* host bridge, default "kiyot0" */
	const char *cidr;	 /* cell network, default "10.77.0.0/16"; host gets the first IP */
	const char *agent_path;	 /* the cell-agent binary */
	const char *cgroup_root; /* cgroup v1 subtree under each controller, default "kiyot" */
	const char *cluster_id;
	const char *node_images; /* the node's image store the agents read images from, or NULL */
	/* at start, the bridge is made with the gateway address (what the node pulls through a
	 * mirror on that address works before the first cell), the anti-spoofing rules of every
	 * recorded cell are written and cells made before them get their address-derived
	 * Ethernet address (kiyot serve; a one-shot `kiyot local-cell` does it with its cell) */
	int restore_network;
};

/* The fs.inotify limits (instances, watches per user) that every cell the CIDR can hold needs,
 * as root, beside the node's own; provider_local_new raises the kernel's when lower. */
struct cellnet_cidr;
void provider_local_inotify_need(const struct cellnet_cidr *cidr, long *instances, long *watches);

int provider_local_new(const struct local_provider_config *cfg, struct provider *out,
		       struct err *err);

/* The EC2 provider's settings (see provider_ec2.c). Strings borrowed during the call. */
struct ec2_provider_config {
	const char *cluster_id;
	const char *node; /* the Kubernetes node's name: its instances' tag (NULL: none) */
	const char *region;
	const char *endpoint;	       /* NULL: EC2's public endpoint of the region */
	const char *image_id;	       /* the cell AMI (cell-agent installed, reads user-data) */
	const char *image_id_arm64;    /* the arm64 cell AMI; NULL: no arm64 cells */
	const char *subnet_id;	       /* optional; after subnet_ids when both are given */
	const char *const *subnet_ids; /* optional: tried in order when a type has no capacity */
	size_t n_subnet_ids;
	const char *const *security_group_ids;
	size_t n_security_group_ids;
	const char *instance_profile; /* optional: a name or an ARN */
	const char *profile;	      /* credentials profile; NULL: AWS_PROFILE or default */
	const char *credentials_file; /* NULL: the standard places */
	int no_imds;		      /* do not use the instance role */
	int launch_timeout_s;	      /* until the instance runs with an address; 0: 600 */
	int poll_ms;		      /* DescribeInstances period while launches wait; 0: 1000 */
};

int provider_ec2_new(const struct ec2_provider_config *cfg, struct provider *out, struct err *err);

struct ec2_client;
/* The EC2 client of an EC2 provider (owned by it, valid until it is destroyed; usable from any
 * thread), or NULL when p is another provider. */
struct ec2_client *provider_ec2_client(const struct provider *p);

#endif
