/*
 * podspec.h: a Kubernetes v1 Pod manifest (apiVersion: v1, kind: Pod) read into C, for
 * `kiyot run` and for sizing pods from their Pod object.
 *
 *	struct podspec *p;
 *	if (podspec_from_yaml_file("pod.yaml", &p, err) < 0)
 *		return -1;   err: "pod.yaml: spec.containers[1].image: required"
 *	...
 *	podspec_free(p);
 *
 * Read: metadata (name, namespace, uid, labels, annotations), spec.restartPolicy,
 * spec.hostname, spec.terminationGracePeriodSeconds, spec.volumes (emptyDir only),
 * spec.nodeSelector, spec.affinity.nodeAffinity's required terms,
 * spec.hostNetwork, hostPID, hostIPC, shareProcessNamespace, spec.securityContext,
 * spec.initContainers and spec.containers (name, image, command, args, env, workingDir, ports,
 * resources, volumeMounts, securityContext, imagePullPolicy). Other fields are ignored, as the
 * API server drops fields it does not know. Fields kiyot cannot honour are rejected rather than
 * ignored: volume types other than emptyDir, env valueFrom, envFrom, resources other than cpu,
 * memory, nvidia.com/gpu and ephemeral-storage, and every security setting a cell cannot apply
 * (SELinux, AppArmor, Windows options, user namespaces, fsGroupChangePolicy, the seccomp
 * annotations). Inside a securityContext an unknown field is an error too (as kubectl's strict
 * field validation makes it), so a misspelt protection is never dropped.
 *
 * Validation follows the API server for these fields, and defaults are applied as it does:
 * namespace "default", restartPolicy Always, terminationGracePeriodSeconds 30, protocol TCP,
 * a request missing where a limit is given takes the limit's value, imagePullPolicy Always for
 * an image without a tag or with ":latest" and IfNotPresent otherwise.
 *
 * Errors: the first problem found is reported (the reader stops there), as
 * "<JSON path>: <what is wrong>", e.g.
 *	spec.containers[1].image: required
 *	spec.containers[0].resources.limits.cpu: "abc" is not a quantity (examples: ...)
 * Codes: EINVAL for a bad manifest, ENOTSUP for a valid field kiyot does not support.
 * The structure owns all its strings; nothing points into the json_t it was read from.
 */
#ifndef KIYOT_PODSPEC_H
#define KIYOT_PODSPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Largest manifest file podspec_from_yaml_file reads. */
#define PODSPEC_MAX_FILE (1u << 20)

enum podspec_restart {
	PODSPEC_RESTART_ALWAYS,
	PODSPEC_RESTART_ON_FAILURE,
	PODSPEC_RESTART_NEVER,
};

enum podspec_pull {
	PODSPEC_PULL_ALWAYS,
	PODSPEC_PULL_IF_NOT_PRESENT,
	PODSPEC_PULL_NEVER,
};

/* A name/value pair: a label, an annotation or an environment variable. */
struct podspec_kv {
	char *name;
	char *value;
};

struct podspec_port {
	char *name; /* NULL when not given */
	int container_port;
	char *protocol; /* "TCP", "UDP" or "SCTP" */
};

/* One side (requests or limits) of a container's resources; has_* says what was given. */
struct podspec_resources {
	bool has_cpu, has_memory, has_gpus;
	int64_t cpu_milli;
	int64_t memory_bytes;
	int64_t gpus; /* nvidia.com/gpu */
};

struct podspec_mount {
	char *name; /* a volume of spec.volumes */
	char *mount_path;
	bool read_only;
};

/* An emptyDir volume (the only kind supported). */
struct podspec_volume {
	char *name;
	bool memory;		  /* emptyDir.medium: Memory (a tmpfs) */
	int64_t size_limit_bytes; /* emptyDir.sizeLimit; 0 when not given */
};

/* A seccompProfile of a pod or container securityContext. */
enum podspec_seccomp_type {
	PODSPEC_SECCOMP_UNSET, /* not given */
	PODSPEC_SECCOMP_RUNTIME_DEFAULT,
	PODSPEC_SECCOMP_UNCONFINED,
	PODSPEC_SECCOMP_LOCALHOST,
};

struct podspec_seccomp {
	enum podspec_seccomp_type type;
	/* Localhost: a relative path under the node's seccomp root (no ".."); else NULL */
	char *localhost_profile;
};

/*
 * A container's securityContext; has_* says what was given. Also the effective context of a
 * container, pod fields merged in (podspec_effective_security).
 */
struct podspec_security {
	bool has_run_as_user, has_run_as_group, has_run_as_non_root;
	int64_t run_as_user;
	int64_t run_as_group;
	bool run_as_non_root;
	bool has_read_only_root_filesystem, read_only_root_filesystem;
	bool has_allow_privilege_escalation, allow_privilege_escalation;
	bool has_privileged, privileged;
	/* capabilities given (the lists may be empty); NULL-terminated lists of names as
	 * written, e.g. "NET_ADMIN" or "ALL" */
	bool has_capabilities;
	char **cap_add;
	size_t n_cap_add;
	char **cap_drop;
	size_t n_cap_drop;
	bool has_proc_mount, proc_mount_unmasked; /* procMount: Default or Unmasked */
	struct podspec_seccomp seccomp;
};

/* spec.securityContext; has_* says what was given. */
struct podspec_pod_security {
	bool has_run_as_user, has_run_as_group, has_run_as_non_root, has_fs_group;
	int64_t run_as_user;
	int64_t run_as_group;
	int64_t fs_group;
	bool run_as_non_root;
	int64_t *supplemental_groups;
	size_t n_supplemental_groups;
	struct podspec_kv *sysctls; /* names as written (dots or slashes) */
	size_t n_sysctls;
	struct podspec_seccomp seccomp;
};

struct podspec_container {
	char *name;
	char *image;
	char **command; /* NULL-terminated; NULL when not given (the image's entrypoint) */
	size_t n_command;
	char **args; /* NULL-terminated; NULL when not given (the image's cmd) */
	size_t n_args;
	struct podspec_kv *env;
	size_t n_env;
	char *working_dir; /* NULL when not given */
	struct podspec_port *ports;
	size_t n_ports;
	struct podspec_resources requests;
	struct podspec_resources limits;
	struct podspec_mount *mounts;
	size_t n_mounts;
	struct podspec_security security;
	enum podspec_pull pull_policy;
	/* An init container with restartPolicy: Always: a sidecar, which keeps running next to
	 * the app containers once started. */
	bool sidecar;
};

/* A requirement of a node selector term (matchExpressions): key, operator (In, NotIn, Exists,
 * DoesNotExist, Gt, Lt) and values. */
struct podspec_node_req {
	char *key;
	char *op;
	char **values; /* NULL-terminated */
	size_t n_values;
};

/* A node selector term: a node matches it when it meets every requirement. */
struct podspec_node_term {
	struct podspec_node_req *reqs;
	size_t n_reqs;
};

struct podspec {
	char *name;
	char *namespace;
	char *uid; /* NULL when not given */
	/* metadata.ownerReferences' controller (the one with controller: true): its kind
	 * ("ReplicaSet") and name; both NULL when the pod has none (or it is malformed). */
	char *owner_kind, *owner_name;
	struct podspec_kv *labels;
	size_t n_labels;
	struct podspec_kv *annotations;
	size_t n_annotations;
	enum podspec_restart restart_policy;
	/* spec.overhead: what the pod's RuntimeClass adds to its demand (cpu, memory). */
	struct podspec_resources overhead;
	char *hostname; /* NULL when not given */
	int64_t termination_grace_period_seconds;
	struct podspec_volume *volumes;
	size_t n_volumes;
	bool host_network, host_pid, host_ipc, share_process_namespace;
	struct podspec_pod_security security;
	struct podspec_container *init_containers; /* in the order they run */
	size_t n_init_containers;
	struct podspec_container *containers;
	size_t n_containers;
	/* spec.nodeSelector */
	struct podspec_kv *node_selector;
	size_t n_node_selector;
	/* spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution's
	 * nodeSelectorTerms (a node must match one); their matchExpressions only (matchFields
	 * name no labels). Preferred affinity is not read: it binds nothing. */
	struct podspec_node_term *node_terms;
	size_t n_node_terms;
};

/* Reads and validates a Pod object. On success *out belongs to the caller (podspec_free). */
int podspec_from_json(const json_t *j, struct podspec **out, struct err *err);

/* Reads a YAML or JSON manifest file of at most PODSPEC_MAX_FILE bytes holding one Pod.
 * Errors are prefixed with the path. */
int podspec_from_yaml_file(const char *path, struct podspec **out, struct err *err);

void podspec_free(struct podspec *p);

/* The value of a label or annotation, or NULL. Borrowed from p. */
const char *podspec_label(const struct podspec *p, const char *key);
const char *podspec_annotation(const struct podspec *p, const char *key);
/* The value spec.nodeSelector gives key, or NULL. Borrowed from p. */
const char *podspec_node_selector(const struct podspec *p, const char *key);

/*
 * The security context container c of p runs with, merged as the kubelet merges them
 * (DetermineEffectiveSecurityContext): the pod's runAsUser, runAsGroup and runAsNonRoot, each
 * overridden by the container's when given; everything else is the container's. The seccomp
 * profile is the container's, else the pod's (type UNSET when neither gives one). *out
 * borrows strings from p and c; it needs no release.
 */
void podspec_effective_security(const struct podspec *p, const struct podspec_container *c,
				struct podspec_security *out);

/* True when any container, init or app, asks to be privileged. */
bool podspec_has_privileged(const struct podspec *p);

/* "Always", "OnFailure", "Never"; "IfNotPresent" etc. for pull policies. */
const char *podspec_restart_name(enum podspec_restart r);
const char *podspec_pull_name(enum podspec_pull p);

#endif
