/*
 * kiyot.h: the daemon's context, shared by the CRI handlers, the cell manager and main.
 *
 * Locking: the records own their lock (records_lock(k->records), records.h). It guards them
 * and their writes to the store and, beside them, the few other fields below marked "under
 * the records' lock": the registry credentials, the node's pre-pulls, the Pod object reader
 * and the runtime config. It is held for memory work and the store only: no call to a cell,
 * an agent, a provider or the API server is made under it. The locks, in the order a thread
 * may take them (it takes a lock only while holding none listed after it):
 *
 *   1. a cell's apply lock (cells_apply_lock: one apply at a time per cell, held across the
 *      agent's answer) or a shipped volume's ship lock (volsync.c);
 *   2. the records' lock;
 *   3. under the records' lock, taken and released without calling back: the event hub's (events.c),
 *      the warm pool's (pool/pool.h),
 *      volsync's list lock, the catalog's (catalog_acquire), the hostPort rules' (cellnat.c),
 *      a node pre-pull's (image_prepull.c; stopping one waits for its thread, which never
 *      takes the records' lock), a container's log writer's and then the log committer's (ctrlog.h;
 *      a cell's Watch callback takes them without the records' lock to write a chunk);
 *   4. never with the records' lock held: the cell manager's lock (cells.c: its cells, their
 *      references and Watch streams; taken under 1), the router's, cellsync's, gc's and the
 *      streaming server's locks and the providers'. Their threads call into kiyot with none
 *      of them held: a cell's Watch callbacks (on the agent client's loop threads) call
 *      kiyot_on_unit_*, and the Watch restarter kiyot_log_offsets, so;
 *   5. innermost: SQLite's (the store's connection is serialized, so store calls come with
 *      the records' lock or without it, as the cell manager's meta keys do) and log.c's.
 */
#ifndef KIYOT_KIYOT_H
#define KIYOT_KIYOT_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "cellagent.pb-c.h"
#include "err.h"
#include "pool/pool_config.h"
#include "providers/provider.h"
#include "state/records.h"
#include "registry.h"
#include "state/state.h"

struct store;
struct cellmgr;
struct catalog;
struct rpc_server;
struct events;
struct remembered_auth;
struct regconf;
struct gc;
struct router;
struct podobject_reader;
struct kube_recorder;
struct cellnet_port;
struct agent_client;
struct metrics_server;
struct metrics_cells;
struct pool;

struct kiyot_config {
	char *socket;	 /* CRI socket path */
	char *state_dir; /* kiyot.db and cells/ live here */
	char *log_level;
	char *region;		     /* catalog region for sizing */
	char *default_instance_type; /* used when a pod states no demand; "" = cheapest */
	char *provider;		     /* "local" */
	char *cell_cidr;
	char *bridge;
	int masquerade; /* cells.masquerade: forwarding and NAT on the node for local cells */
	struct cellnet_port *node_ports; /* cells.nodePorts: the node's ports local cells reach */
	size_t n_node_ports;
	char *agent_path;
	int agent_port;
	int64_t reserve_cpu_milli; /* the cell's OS + agent, added to the pod's demand */
	int64_t reserve_memory_bytes;
	int burst_headroom_percent; /* sizing.burstHeadroomPercent: the burst rule's headroom */
	int64_t restart_backoff_ms; /* the agents' restart back-off base */
	int gc_interval_s;	    /* how often cells and sandboxes are reconciled */
	int gc_grace_s;		    /* how long an unowned cell may live before it goes */
	int boot_timeout_s;	    /* a launch's wait for its agent; 0: the provider's */
	json_t *registries;	    /* registry hosts config sent to every cell (owned) */
	struct reg_policy pulls;    /* how kiyot's pulls and every cell's are bounded */
	char *kubeconfig;	    /* API server for Cell objects; "" = in-cluster or none */
	char *node_name;	    /* the node's name as its kubelet registers; "" = host name */
	struct {		    /* cells.provider: ec2 */
		char *region, *endpoint, *image_id, *subnet_id, *instance_profile;
		char *image_id_arm64; /* ec2.imageIds.arm64; image_id is the x86_64 one */
		char *profile, *credentials_file;
		char **security_group_ids;
		size_t n_security_group_ids;
		char **subnet_ids; /* ec2.subnetIds, tried in order (subnet_id after them) */
		size_t n_subnet_ids;
		int no_imds;
		int launch_timeout_s;
		int price_list_off;	   /* ec2.priceList: false */
		char *price_list_endpoint; /* ec2.priceList: a URL; NULL: the public one */
	} ec2;
	struct kube_proxy_config { /* cells.kubeProxy: a kube-proxy unit per cell (image NULL: none) */
		char *image, *kubeconfig;
		char **command, **args;
		size_t n_command, n_args;
	} kube_proxy;
	/* "" or the CRI endpoint of the runtime for pods not annotated for kiyot (router.c) */
	char *fallback_runtime_endpoint;
	char *streaming_address; /* where Exec's URLs point: IPv4:PORT (0: any free port) */
	char *metrics_listen;	 /* metrics.listen: IPv4:PORT of GET /metrics; "": off */
	struct pool_config pool; /* pool: standby cells (pool/pool_config.h); zero: none */
};

struct kiyot {
	struct kiyot_config cfg;
	struct store *store;
	/* sandboxes, containers and images (records.h), with the lock of this structure */
	struct records *records;
	struct ctrlogs *logs; /* containers' log files and their marks (ctrlog.h) */
	char *cluster_id;
	char *runtime_config_cidr; /* from UpdateRuntimeConfig (the records' lock) */
	/* Where cells come from: the configured provider, or one set before kiyot_open (tests) */
	struct provider provider;
	struct catalog *catalog;
	struct cellmgr *cells;
	/* How the cell manager reaches agents (cells/agent_client.h): NULL at kiyot_open for
	 * gRPC; a test sets a fake one */
	const struct agent_client *agent;
	struct events *events; /* GetContainerEvents subscribers */
	struct remembered_auth
		*auths; /* registry credentials by image id, memory only (the records' lock) */
	struct regconf *regconf; /* the registries config, for pulls that come without a pod */
	/* The node's image store (state_dir/images) when cells share the node's disk (local):
	 * PullImage fills it and cells take their images from it. NULL for remote cells. */
	struct image_store *node_images;
	struct node_prepull
		*node_prepulls; /* pre-pulls into node_images under way (the records' lock) */
	struct gc *gc;
	struct router *router;	      /* the fallback runtime, or NULL (router.c) */
	struct stream_server *stream; /* Exec's URLs (stream/server.h) */
	struct cellsync *cellsync;    /* Cell objects in the API server, or NULL (cellsync.c) */
	struct kube_recorder *kube_events; /* Events on pods and cells, or NULL (kube/events.h) */
	/* Pod objects for sizing and pre-pulls; made at the first RunPodSandbox (cri_sandbox.c),
	 * set once under the records' lock */
	struct podobject_reader *pod_reader;
	struct volsync *volsync;	     /* shipped volumes of remote cells (volsync.c) */
	struct metrics_server *metrics;	     /* GET /metrics, or NULL (metrics/server.h) */
	struct metrics_cells *metrics_cells; /* the cells' figures (metrics/metrics.h) */
	struct pool *pool;		     /* standby cells (pool/pool.h), or NULL: none */
};

/* Config: defaults, then the file (YAML or JSON), then flags. */
void kiyot_config_defaults(struct kiyot_config *c);
int kiyot_config_load_file(struct kiyot_config *c, const char *path, struct err *err);
/* The same for the file's text, len bytes (no NUL needed, at most 1 MiB); path names it in
 * errors. Settings the text gives replace those in c, the others are kept. EINVAL (or the
 * codes of yaml.h) with a message naming the setting. */
int kiyot_config_load_text(struct kiyot_config *c, const char *text, size_t len, const char *path,
			   struct err *err);
void kiyot_config_release(struct kiyot_config *c);
/* The node's name: nodeName, else the host name in lower case (the kubelet's default).
 * Free it. */
char *kiyot_node_name(const struct kiyot_config *c);

/* Opens the store, loads the records, sets up provider, catalog and cells; reconciles cells
 * with the provider (removes local cells no sandbox owns, resumes the others). A provider
 * already in k->provider is used as it is instead of the configured one. */
int kiyot_open(struct kiyot *k, struct err *err);
void kiyot_close(struct kiyot *k);

/* The credentials the last pull of an image id used, or NULL. Needs the records' lock. */
const Kiyot__Cell__V1__RegistryAuth *kiyot_auth_for(struct kiyot *k, const char *image_id);
void kiyot_auths_free(struct kiyot *k);

/* Reconciles cells with sandboxes once now (start-up rules), then periodically (gc.c). */
struct gc *gc_start(struct kiyot *k);
void gc_stop(struct gc *g);

/* The CRI method table (cri_table.c): every RuntimeService and ImageService method, and the
 * worker pools its entries name. */
struct rpc_method;
struct rpc_pool;
const struct rpc_method *cri_method_table(size_t *n);
const struct rpc_pool *cri_pool_table(size_t *n);

#endif
