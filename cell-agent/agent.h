/*
 * agent.h: the cell-agent's service: its settings from the bootstrap document, and the gRPC
 * API (kiyot.cell.v1.CellAgent) over the image store and the unit supervisor.
 */
#ifndef AGENT_AGENT_H
#define AGENT_AGENT_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cellagent.pb-c.h"
#include "err.h"
#include "registry.h"

struct enroll;
struct image_store;
struct supervisor;
struct regconf;
struct watch_hub;

/* What a cell boots with: the bootstrap document (EC2 user-data, or the local provider's
 * bootstrap.json). */
struct agent_config {
	char *cell_id;
	char *cluster_id;
	char *pod_uid, *pod_name, *pod_namespace;
	char *instance_type;
	char *state_dir;
	char *log_level;
	char *runtime; /* OCI runtime, "crun" */
	/* kiyot's CA ("ca", PEM): the agent's certificate is of it, and kiyot's */
	char *ca;
	/* The one-time secret a new cell proves it booted from this document with
	 * ("enroll_secret"; "" once kiyot forgot it) */
	char *enroll_secret;
	/* The network namespace of the cell's host where that is not the agent's own (a local
	 * cell: the node's, "host_netns"); "" when the agent's namespace is the host's. */
	char *host_netns;
	/* The node's image store when the cell shares the node's disk (local cells): units whose
	 * image kiyot names by id take it from there instead of pulling. "" when none. */
	char *node_images;
	int port;
	int64_t restart_backoff_ms;
	json_t *registries; /* owned */
	/* How pulls are bounded ("pulls": the fields of struct reg_policy; defaults for those
	 * absent) */
	struct reg_policy pulls;
	/* Images to pull as soon as the agent serves ("prepull"); NULL-terminated, may be NULL */
	char **prepull;
	size_t n_prepull;
};

/* Bounds of the bootstrap's "prepull" list. */
#define AGENT_MAX_PREPULL 64
#define AGENT_MAX_PREPULL_REF 512 /* bytes of one reference */

/* Errors name the key at fault ("prepull[3]: must be a string"). */
int agent_config_parse(const char *text, size_t len, struct agent_config *out, struct err *err);
void agent_config_release(struct agent_config *c);
/* Rewrites the bootstrap document at path (at most max bytes) without its "enroll_secret",
 * through a temporary file and a rename, 0600; nothing when it has none. For an enrolled
 * cell: its certificate is all a restarted agent needs, and the one-time secret should not
 * stay on its disk. Errors name the file. */
int agent_config_drop_secret(const char *path, size_t max, struct err *err);

struct agent {
	struct agent_config cfg;
	const char *bootstrap; /* the bootstrap document's path */
	struct regconf *regconf;
	struct image_store *images;
	struct supervisor *sup;
	struct watch_hub *hub;
	uint64_t incarnation;
	int64_t boot_ns;
	char *self_path;    /* this binary, run again as the shim */
	char *ip;	    /* the cell's address */
	char *cgroup;	    /* the cell's cgroup (v1 memory path); units go under it */
	int host_mnt_ns;    /* the mount namespace the agent started in (hostmount.h); -1: none */
	atomic_int streams; /* Exec, Attach and PortForward calls open (api_stream.c) */
	struct enroll *enroll; /* the cell's identity on kiyot's channel (enroll.h) */
	/* Called once Enroll took the cell's certificate (main.c moves to TLS); may be NULL */
	void (*on_enrolled)(struct agent *a);
};

/* Sets up images, supervisor and watch hub from a parsed config. */
int agent_open(struct agent *a, struct err *err);
void agent_close(struct agent *a);

/* The method table of kiyot.cell.v1.CellAgent, and the worker pools its entries name. */
struct rpc_method;
struct rpc_pool;
const struct rpc_method *agent_method_table(size_t *n);
const struct rpc_pool *agent_pool_table(size_t *n);
/* What a cell not yet enrolled serves, over plaintext: Enroll alone, on one pool of its own. */
const struct rpc_method *agent_enroll_table(size_t *n);

/* api_stream.c: the streaming handlers (rpc_handler_fn). */
struct rpc_call;
struct arena;
struct feed_conn;
struct unit_status;
int api_exec(void *svc, struct rpc_call *call, const ProtobufCMessage *req, ProtobufCMessage *resp,
	     struct err *err);
int api_port_forward(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		     ProtobufCMessage *resp, struct err *err);
int api_attach(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
	       ProtobufCMessage *resp, struct err *err);

/* A unit's status on the wire, pointing into st (valid while st is). */
void agent_status_to_wire(const struct unit_status *st, Kiyot__Cell__V1__UnitStatus *w);

/* watch.c: the hub that wakes watches when a unit's status or log changes; the Watch and
 * Stats handlers; the cell's usage (allocated in ar); and the feed's session (feed.h), a
 * Watch over the cell feed. */
struct watch_hub *watch_hub_new(void);
void watch_hub_notify(struct watch_hub *h, const char *unit_id, int is_log);
void watch_hub_free(struct watch_hub *h);
int api_watch(void *svc, struct rpc_call *call, const ProtobufCMessage *req, ProtobufCMessage *resp,
	      struct err *err);
int api_stats(void *svc, struct rpc_call *call, const ProtobufCMessage *req, ProtobufCMessage *resp,
	      struct err *err);
int agent_stats_fill(struct agent *a, struct arena *ar, Kiyot__Cell__V1__StatsResponse *out,
		     struct err *err);
void agent_feed_session(void *arg, struct feed_conn *c, const ProtobufCMessage *req);

#endif
