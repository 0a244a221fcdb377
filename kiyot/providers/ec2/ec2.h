/*
 * ec2.h: a client for the EC2 Query API (version 2016-11-15) over libcurl.
 *
 * Each call POSTs a form-encoded "Action=...&Version=2016-11-15&..." body to the endpoint,
 * signed by libcurl's SigV4 (CURLOPT_AWS_SIGV4 "aws:amz:<region>:ec2"), and parses EC2's XML
 * answer with libxml2. Every call of a client draws from one token bucket whose rate halves
 * at each RequestLimitExceeded and recovers with successes; throttling, 5xx, network failures
 * and timeouts are retried with exponential back-off and full jitter (a retried call that
 * timed out gets twice the time). A call has no fixed time limit: its deadline grows with the
 * items its answer may hold, and an answer that sends nothing for 60 s is cut. A caller in a
 * cancel scope (cancel.h) that gives up ends waits and transfers at once (-ECANCELED). Every
 * other failure comes back at once, classified:
 *
 *	enum ec2_errclass cls;
 *	if (ec2_run_instance(c, &spec, &inst, &cls, err) < 0) {
 *		if (cls == EC2_CAPACITY)	err: "ec2 RunInstances: InsufficientInstanceCapacity: ..."
 *			try the next candidate type;
 *	}
 *
 * The class is also in err->code: EC2_RETRY EAGAIN (retries used up), EC2_CAPACITY ENOSPC,
 * EC2_NOT_FOUND ENOENT, EC2_AUTH EACCES, EC2_INVALID EINVAL; ec2_errclass_of() maps back.
 *
 * Thread safety: a client may be used from several threads at once; connections are shared.
 * Returned structures belong to the caller.
 */
#ifndef KIYOT_EC2_H
#define KIYOT_EC2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "awscreds.h"
#include "err.h"

#define EC2_API_VERSION "2016-11-15"
/* Largest answer read. */
#define EC2_MAX_RESPONSE (16u << 20)
/* Deepest XML element nesting accepted. */
#define EC2_MAX_XML_DEPTH 32
/* Most pages one paginated call follows, and most items it collects. */
#define EC2_MAX_PAGES 1000
#define EC2_MAX_ITEMS 100000
/* EC2's own limits. */
#define EC2_MAX_TAGS 50
#define EC2_MAX_TAG_KEY 128
#define EC2_MAX_TAG_VALUE 256
#define EC2_MAX_USER_DATA 16384 /* bytes before base64 */
#define EC2_MAX_CLIENT_TOKEN 64
#define EC2_MAX_IDS_PER_CALL 1000

/* Tag keys of the instances kiyot launches. */
#define EC2_TAG_CLUSTER_ID "kiyot.elotl.co/cluster-id"
#define EC2_TAG_CELL_ID "kiyot.elotl.co/cell-id"
/* The Kubernetes node whose kiyot launched the instance: only that node lists and collects it
 * (an instance without one, launched before 0.2.0, is listed by every node of its cluster). */
#define EC2_TAG_NODE "kiyot.elotl.co/node"
#define EC2_TAG_POD_NAME "kiyot.elotl.co/pod-name"
#define EC2_TAG_POD_NAMESPACE "kiyot.elotl.co/pod-namespace"
#define EC2_TAG_POD_UID "kiyot.elotl.co/pod-uid"
/* A standby cell of the warm pool (kiyot/pool/pool.h), no pod yet: its value is the cluster
 * id. Removed when a pod claims the cell (the pod's tags take its place). */
#define EC2_TAG_STANDBY "kiyot.elotl.co/standby"

/* What a failure means to the caller. */
enum ec2_errclass {
	EC2_OK,
	EC2_RETRY,     /* throttling, 5xx, network: retried, and still failing (EAGAIN) */
	EC2_CAPACITY,  /* no capacity for, or no support of, this type here: try another (ENOSPC) */
	EC2_NOT_FOUND, /* the instance or resource does not exist (ENOENT) */
	EC2_AUTH,      /* credentials or permissions refused (EACCES) */
	EC2_INVALID,   /* any other client error (EINVAL) */
};

const char *ec2_errclass_name(enum ec2_errclass c);
/* The class an EC2 error code and HTTP status stand for (code may be NULL or ""). */
enum ec2_errclass ec2_classify(int http_status, const char *code, const char *message);
/* The errno an error class is reported with, and back (0 -> EC2_OK, unknown -> EC2_INVALID). */
int ec2_errclass_errno(enum ec2_errclass c);
enum ec2_errclass ec2_errclass_of(int err_code);

struct ec2_config {
	const char *region;   /* required, e.g. "us-east-1" */
	const char *endpoint; /* NULL: https://ec2.<region>.amazonaws.com/ (also http://host:port/) */
	struct aws_creds_provider *creds; /* required; borrowed, must outlive the client */
	int max_attempts;		  /* tries per call on EC2_RETRY; 0: 8 */
	int64_t backoff_base_ns;	  /* 0: 100 ms */
	int64_t backoff_cap_ns;		  /* 0: 20 s */
	long timeout_ms; /* a call's deadline for a one-item answer, 100 ms more per item it may
			  * answer (MaxResults, ids), doubled after a timeout; 0: 30000 */
	long connect_timeout_ms; /* 0: 5000 */
	size_t max_response;	 /* 0: EC2_MAX_RESPONSE */
	double rate;		 /* calls a second of the client's token bucket; 0: 20 */
	double burst;		 /* calls the bucket holds; 0: 20 */
	void (*sleep)(void *ctx, int64_t ns); /* between retries; NULL: nanosleep */
	void *sleep_ctx;
};

struct ec2_client;

int ec2_client_new(const struct ec2_config *cfg, struct ec2_client **out, struct err *err);
void ec2_client_free(struct ec2_client *c);
const char *ec2_client_endpoint(const struct ec2_client *c);
/* HTTP requests sent so far, retries included (for figures such as calls per pod). */
uint64_t ec2_client_requests(const struct ec2_client *c);
/* The token bucket's rate now (calls a second; lower after RequestLimitExceeded). */
double ec2_client_rate(const struct ec2_client *c);
/* The credentials provider the client signs with (borrowed: the client's creator owns it), for
 * another AWS API of the same node (the Price List, pricing.h). */
struct aws_creds_provider *ec2_client_creds(const struct ec2_client *c);

/* Tags: an owned, ordered list of key/value pairs. */
struct ec2_tag {
	char *key;
	char *value;
};

struct ec2_tags {
	struct ec2_tag *items;
	size_t n;
	size_t cap;
};

#define EC2_TAGS_INIT                                                                              \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}

void ec2_tags_release(struct ec2_tags *t);
/* Appends a copy of key=value (no limit checks: see ec2_pod_tags for EC2's). */
void ec2_tags_add(struct ec2_tags *t, const char *key, const char *value);
/* The value of key, or NULL. */
const char *ec2_tags_get(const struct ec2_tags *t, const char *key);

/* Who a cell is for. Strings borrowed; labels are parallel arrays. */
struct ec2_pod_ident {
	const char *cluster_id;
	const char *cell_id; /* optional */
	const char *pod_name;
	const char *pod_namespace;
	const char *pod_uid;
	const char *const *label_keys;
	const char *const *label_values;
	size_t n_labels;
	/* a standby cell: no pod (pod fields ignored), tagged EC2_TAG_STANDBY instead */
	int standby;
	const char *node; /* optional: EC2_TAG_NODE */
};

/*
 * The tags of a cell's instance into *out (initialised here): kiyot's own (cluster id, node,
 * cell id, pod name, namespace and uid, and Name "kiyot-<namespace>-<pod>", cut to 256 characters), then
 * the pod's labels in key order, minus keys starting with "kubernetes.io/", "io.kubernetes" or
 * "aws:", minus keys kiyot's own tags use, minus keys over 128 or values over 256 characters,
 * and only as many as fit in 50 tags. EINVAL when cluster_id or pod_uid is missing or too long.
 * A standby cell's (p->standby) are the cluster id, the node, the cell id, EC2_TAG_STANDBY and Name
 * "kiyot-standby-<cell id>"; it needs a cell id instead of a pod uid.
 */
int ec2_pod_tags(const struct ec2_pod_ident *p, struct ec2_tags *out, struct err *err);

/* One instance as DescribeInstances / RunInstances report it. Owned strings, NULL if absent. */
struct ec2_instance {
	char *instance_id;
	char *instance_type;
	char *state; /* "pending", "running", "shutting-down", "terminated", ... */
	int state_code;
	char *private_ip;
	char *image_id;
	char *subnet_id;
	char *client_token;
	char *reservation_id;
	int64_t launch_ns; /* 0 if absent */
	bool spot;	   /* instanceLifecycle is "spot" */
	struct ec2_tags tags;
	/* Why it is in its state (stateReason), or NULL: "Server.SpotInstanceTermination" and
	 * "Server.SpotInstanceTermination: Spot instance termination" */
	char *state_reason_code, *state_reason_message;
};

void ec2_instance_release(struct ec2_instance *i);
void ec2_instances_free(struct ec2_instance *a, size_t n);

/* A RunInstances request for one instance. Strings borrowed. */
struct ec2_run_spec {
	const char *client_token;  /* required: makes the launch idempotent, <= 64 ASCII chars */
	const char *image_id;	   /* required */
	const char *instance_type; /* required */
	const char *subnet_id;	   /* optional */
	const char *const *security_group_ids; /* optional */
	size_t n_security_group_ids;
	const char *iam_instance_profile; /* optional: a name, or an ARN ("arn:...") */
	const void *user_data;		  /* optional, raw bytes; sent base64-encoded */
	size_t user_data_len;		  /* at most EC2_MAX_USER_DATA */
	const struct ec2_tags *tags;	  /* optional: TagSpecification.1, ResourceType instance */
	bool spot;			  /* one-time spot, terminated on interruption */
};

/* Launches one instance; *out is filled from the answer (state usually "pending"). */
int ec2_run_instance(struct ec2_client *c, const struct ec2_run_spec *spec,
		     struct ec2_instance *out, enum ec2_errclass *cls, struct err *err);

/* A DescribeInstances filter: Filter.N.Name and its Value.M. Strings borrowed. */
struct ec2_filter {
	const char *name;
	const char *const *values;
	size_t n_values;
};

struct ec2_describe_query {
	const struct ec2_filter *filters;
	size_t n_filters;
	const char *const *instance_ids; /* optional, at most EC2_MAX_IDS_PER_CALL */
	size_t n_instance_ids;
	int page_size; /* MaxResults 5..1000 when no ids are given; 0: 1000 */
};

/*
 * Every instance matching the query, following NextToken until the last page; reservations
 * are flattened. *out is NULL when n is 0.
 */
int ec2_describe_instances(struct ec2_client *c, const struct ec2_describe_query *q,
			   struct ec2_instance **out, size_t *n, enum ec2_errclass *cls,
			   struct err *err);

/* What a termination did with each instance id asked. */
enum ec2_term {
	EC2_TERM_LEFT, /* not done: the call failed (see err) or its answer left the id out */
	EC2_TERM_DONE, /* listed in the answer: shutting down or terminated */
	EC2_TERM_GONE, /* named by InvalidInstanceID.NotFound: no such instance (any more) */
};

/*
 * Terminates instances (1 to EC2_MAX_IDS_PER_CALL); out[i] (n of them) says what became of
 * ids[i]. EC2 fails the whole call when one id is unknown and terminates none, naming the
 * unknown ids (InvalidInstanceID.NotFound "The instance IDs 'i-1, i-2' do not exist"): those
 * are GONE and the call is made again with the rest. Any other failure (another code, or a
 * NotFound naming none of the ids) leaves the ids not settled LEFT and returns it; an answer
 * that does not list an id asked leaves it LEFT too (EC2_RETRY). 0 when every id is DONE or
 * GONE. Right after RunInstances EC2 may not know a new id yet (eventual consistency): a
 * caller that launched it recently should not take GONE for terminated.
 */
int ec2_terminate_instances(struct ec2_client *c, const char *const *ids, size_t n,
			    enum ec2_term *out, enum ec2_errclass *cls, struct err *err);

/* Marks GONE each id of ids still LEFT that an InvalidInstanceID.NotFound message names (as a
 * whole word "i-<hex>"); returns how many it marked. */
size_t ec2_not_found_ids(const char *message, const char *const *ids, size_t n, enum ec2_term *out);

/* Adds or overwrites tags on resources (at most EC2_MAX_IDS_PER_CALL, EC2_MAX_TAGS tags). */
int ec2_create_tags(struct ec2_client *c, const char *const *resource_ids, size_t n,
		    const struct ec2_tags *tags, enum ec2_errclass *cls, struct err *err);

/* Removes the tags of keys (whatever their values, at most EC2_MAX_TAGS) from resources (at
 * most EC2_MAX_IDS_PER_CALL); a key a resource does not carry is no error. */
int ec2_delete_tags(struct ec2_client *c, const char *const *resource_ids, size_t n,
		    const char *const *keys, size_t n_keys, enum ec2_errclass *cls,
		    struct err *err);

/* An instance type from DescribeInstanceTypes. */
/* ec2_type_info.arch: ProcessorInfo.SupportedArchitectures as bits (others, such as i386 or
 * x86_64_mac, are not kept). */
#define EC2_ARCH_X86_64 1u
#define EC2_ARCH_ARM64 2u

struct ec2_type_info {
	char *name;
	unsigned arch; /* EC2_ARCH_* bits; 0 when the answer lists none of them */
	int vcpus;
	int64_t memory_mib;
	int gpus; /* sum of the GPU devices' counts */
	bool burstable;
	bool current_generation;
};

void ec2_type_infos_free(struct ec2_type_info *a, size_t n);

/* Every instance type offered in the region (all pages). */
int ec2_describe_instance_types(struct ec2_client *c, struct ec2_type_info **out, size_t *n,
				enum ec2_errclass *cls, struct err *err);

/* A spot price from DescribeSpotPriceHistory. */
struct ec2_spot_price {
	char *instance_type;
	char *availability_zone;
	double price; /* USD per hour */
	int64_t timestamp_ns;
};

void ec2_spot_prices_free(struct ec2_spot_price *a, size_t n);

/*
 * Current Linux/UNIX spot prices: one entry per instance type, the latest reported (ties: the
 * lower price), sorted by type. types (optional) narrows the query; availability_zone
 * (optional) picks one zone, otherwise the latest of any zone is kept.
 */
int ec2_describe_spot_prices(struct ec2_client *c, const char *const *types, size_t n_types,
			     const char *availability_zone, struct ec2_spot_price **out, size_t *n,
			     enum ec2_errclass *cls, struct err *err);

/* The same, one entry per instance type and availability zone (the latest there), sorted by
 * type, then zone. */
int ec2_describe_spot_prices_by_zone(struct ec2_client *c, const char *const *types, size_t n_types,
				     struct ec2_spot_price **out, size_t *n, enum ec2_errclass *cls,
				     struct err *err);

/* A subnet from DescribeSubnets. */
struct ec2_subnet {
	char *subnet_id;
	char *availability_zone; /* "us-east-1a" */
};

void ec2_subnets_free(struct ec2_subnet *a, size_t n);

/* The subnets of ids (1 to EC2_MAX_IDS_PER_CALL; all pages), in EC2's order. An unknown id
 * fails the call (InvalidSubnetID.NotFound). */
int ec2_describe_subnets(struct ec2_client *c, const char *const *ids, size_t n_ids,
			 struct ec2_subnet **out, size_t *n, enum ec2_errclass *cls,
			 struct err *err);

/*
 * The raw call under all of the above, for actions without a helper: params is a
 * form-encoded query without Action and Version ("" for none, already percent-encoded).
 * On success *body (the caller frees it) holds the XML answer of len bytes.
 */
int ec2_call(struct ec2_client *c, const char *action, const char *params, char **body, size_t *len,
	     enum ec2_errclass *cls, struct err *err);

#endif
