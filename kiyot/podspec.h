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
 * spec.initContainers and spec.containers (name, image, command, args, env, workingDir, ports,
 * resources, volumeMounts, securityContext.runAsUser/runAsGroup, imagePullPolicy). Other fields
 * are ignored, as the API server drops fields it does not know. Fields kiyot cannot honour are
 * rejected rather than ignored: volume types other than emptyDir, env valueFrom, envFrom, and
 * resources other than cpu, memory, nvidia.com/gpu and ephemeral-storage.
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
	bool has_run_as_user, has_run_as_group;
	int64_t run_as_user;
	int64_t run_as_group;
	enum podspec_pull pull_policy;
	/* An init container with restartPolicy: Always: a sidecar, which keeps running next to
	 * the app containers once started. */
	bool sidecar;
};

struct podspec {
	char *name;
	char *namespace;
	char *uid; /* NULL when not given */
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
	struct podspec_container *init_containers; /* in the order they run */
	size_t n_init_containers;
	struct podspec_container *containers;
	size_t n_containers;
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

/* "Always", "OnFailure", "Never"; "IfNotPresent" etc. for pull policies. */
const char *podspec_restart_name(enum podspec_restart r);
const char *podspec_pull_name(enum podspec_pull p);

#endif
