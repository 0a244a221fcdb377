/*
 * cri_security.h: the CRI's security contexts and namespace options, checked when a sandbox
 * or container is created and carried into the pod and units a cell runs (cri_security.c).
 * What the agent makes of them is in cell-agent/bundle.h.
 *
 * Thread safety: reentrant; the records passed in are read under the caller's lock.
 */
#ifndef KIYOT_CRI_SECURITY_H
#define KIYOT_CRI_SECURITY_H

#include "arena.h"
#include "cellagent.pb-c.h"
#include "cri_api.pb-c.h"
#include "err.h"
#include "state/state.h"

/* The largest Localhost seccomp profile read from the node. */
#define CRI_SECCOMP_PROFILE_MAX (1024 * 1024)

/* Refuses what a pod cannot have: a sysctl that is not namespaced (or would change the host a
 * host-network or host-IPC pod shares), a malformed sysctl, TARGET namespaces. -EINVAL naming
 * the field. */
int cri_security_check_sandbox(const Runtime__V1__PodSandboxConfig *cfg, struct err *err);

/* Checks a container's security context (run_as_group needs a user; ids in range; a seccomp
 * profile kiyot knows) and reads its Localhost seccomp profile from the node into *profile
 * ("" for none; the caller frees it, also on error). -EINVAL or the file's errno. */
int cri_security_check_container(const Runtime__V1__ContainerConfig *cfg, char **profile,
				 struct err *err);

/* Fills the unit's user, groups, capabilities, privileges, paths, seccomp, PID namespace and
 * mount propagation from the container (whose mounts u->mounts already mirrors). Strings are
 * borrowed from the record or allocated in a. */
void cri_security_unit(struct arena *a, const struct container *c, Kiyot__Cell__V1__Unit *u);

/* Fills the pod's network and IPC namespace modes and sysctls from the sandbox config. */
void cri_security_pod(struct arena *a, const Runtime__V1__PodSandboxConfig *cfg,
		      Kiyot__Cell__V1__Pod *p);

#endif
