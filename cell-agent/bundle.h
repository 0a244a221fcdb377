/*
 * bundle.h: the OCI bundle of one unit (runtime spec 1.0.2), built from the unit over the
 * image's config, plus the unit's root file system: an overlay whose lower layer is the
 * image's flattened root and whose upper and work directories live in the unit's directory.
 *
 * Kubernetes' rules apply: the unit's command replaces the image's entrypoint and its args the
 * image's cmd (a command without args runs with no args); the unit's env overrides image env
 * of the same name; the user may be "uid", "uid:gid" or names resolved in the image's
 * /etc/passwd and /etc/group, plus the unit's supplemental groups. Units share the cell's
 * network namespace; PID and IPC namespaces are the unit's own, the pod's or the cell host's
 * as the unit asks. The security context is applied as given: read-only root, no_new_privs,
 * exactly the masked and read-only paths listed, seccomp (seccomp.h), all but no_new_privs
 * ignored for a privileged unit.
 *
 * Thread safety: all functions are reentrant.
 */
#ifndef AGENT_BUNDLE_H
#define AGENT_BUNDLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cellagent.pb-c.h"
#include "err.h"

/* The CFS period of every unit; a unit's CPU limit is its quota in it. */
#define BUNDLE_CPU_PERIOD_US 100000

struct image_info;

/* Everything a unit's config.json is made of. All borrowed. */
struct bundle_spec {
	const Kiyot__Cell__V1__Pod *pod; /* hostname, volumes; may be NULL */
	const Kiyot__Cell__V1__Unit *unit;
	const struct image_info *image;
	const char *rootfs;	   /* root.path: the unit's mounted overlay (units/<id>/rootfs) */
	const char *volumes_dir;   /* emptyDir volumes live in <volumes_dir>/<name> (created) */
	const char *etc_dir;	   /* holds the pod's resolv.conf, hosts and hostname; or NULL */
	const char *cgroup_parent; /* "" or NULL: no linux.cgroupsPath */
	/* The pod's shared PID and IPC namespaces (e.g. /proc/<pid>/ns/pid), joined by units in
	 * mode POD; NULL or "": each such unit gets its own. */
	const char *pod_pid_ns;
	const char *pod_ipc_ns;
	/* The host's network namespace (a path) a host-network pod's units join; NULL or "":
	 * the agent's own is the host's, and units stay in it. */
	const char *host_netns;
	/* Where host-path mounts with propagation are attached from the host (hostmount.h):
	 * <propagated_dir>/<index of the mount>; NULL: bound from the host path as it is. */
	const char *propagated_dir;
};

/* A resolved user. */
struct bundle_user {
	uint32_t uid;
	uint32_t gid;
	uint32_t gids[64]; /* supplementary groups from the image's /etc/group */
	size_t ngids;
};

/* The process arguments by Kubernetes' rules; a NULL-terminated array the caller frees with
 * strv_free (strvec.h). -EINVAL when neither unit nor image names a command. */
int bundle_process_args(const Kiyot__Cell__V1__Unit *unit, const struct image_info *image,
			char ***out, struct err *err);
/* The environment: image env, then the unit's env replacing same-named variables; PATH gets a
 * default when neither sets it. NULL-terminated; free with strv_free. */
char **bundle_process_env(const Kiyot__Cell__V1__Unit *unit, const struct image_info *image,
			  const char *hostname);

/* Resolves user ("", "uid", "uid:gid", "name", "name:group", mixed) against root's
 * /etc/passwd and /etc/group, read without leaving root. "" means uid 0. A user with an entry
 * in /etc/passwd gets its group (unless one is given) and, as supplementary groups, those
 * /etc/group lists its name in (runc's rule: busybox's root is in wheel). A name that does
 * not resolve is -ENOENT with a message naming it. */
int bundle_resolve_user(const char *root, const char *user, struct bundle_user *out,
			struct err *err);

/* True for a unit mount of a host path that propagates (bound from propagated_dir). */
bool bundle_propagates_from_host(const Kiyot__Cell__V1__Mount *m);

/* Builds config.json for the spec. The caller owns *out (json_decref). */
int bundle_config(const struct bundle_spec *spec, json_t **out, struct err *err);
/* Builds config.json and writes it atomically to <bundle_dir>/config.json (dir created). */
int bundle_write(const struct bundle_spec *spec, const char *bundle_dir, struct err *err);

/* Sets the pod's net.* sysctls in the calling thread's network namespace (the cell's, which
 * is the pod's); the other sysctls go in each unit's config.json. */
int bundle_apply_net_sysctls(const Kiyot__Cell__V1__Pod *pod, struct err *err);

/* Writes the pod's resolv.conf, hosts and hostname into dir (created). Without DNS servers in
 * the pod the host's /etc/resolv.conf is copied. pod_ip may be NULL or "". */
int bundle_write_etc(const Kiyot__Cell__V1__Pod *pod, const char *dir, const char *pod_ip,
		     struct err *err);

/* Mounts the overlay <unit_dir>/rootfs (lower: image_rootfs; upper, work: in unit_dir) unless
 * it is already mounted. */
int bundle_mount_rootfs(const char *image_rootfs, const char *unit_dir, struct err *err);
/* Unmounts <unit_dir>/rootfs (lazily); not mounted is not an error. */
int bundle_umount_rootfs(const char *unit_dir, struct err *err);

#endif
