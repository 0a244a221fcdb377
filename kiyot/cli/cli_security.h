/*
 * cli_security.h: the security parts of the CRI requests `kiyot run` makes for a Pod
 * manifest, filled as the kubelet (v1.26) fills them, and the kubelet's runAsNonRoot checks.
 *
 *	sb->linux = cli_security_sandbox(&arena, pod);              RunPodSandbox
 *	cli_security_check_pod(pod, err)                            before any call
 *	ImageStatus(container image) -> img                         after the pull
 *	cli_security_check_image(pod, c, img, err)                  before CreateContainer
 *	cfg->linux->security_context =
 *		cli_security_container(&arena, pod, c, img, CLI_SECCOMP_ROOT);
 *
 * Sandbox: namespace options (network and IPC POD, or NODE for hostNetwork/hostIPC; PID
 * CONTAINER, POD with shareProcessNamespace, NODE with hostPID), the pod's runAsUser and
 * runAsGroup, supplemental groups (fsGroup first, then supplementalGroups), privileged when
 * any container is, seccomp RuntimeDefault (the kubelet confines every sandbox), and the
 * pod's sysctls (names with '/' separators turned into dotted ones, as the kubelet does).
 *
 * Container: the effective security context (podspec_effective_security): capabilities,
 * privileged, run_as_user and run_as_group, readonly_rootfs; without a runAsUser the image's
 * user from ImageStatus (run_as_user for a numeric uid, run_as_username for a name, uid 0
 * when the image says nothing); the sandbox's namespace options; supplemental groups;
 * no_new_privs only when allowPrivilegeEscalation is false; the kubelet's default masked and
 * read-only paths, none with procMount Unmasked; seccomp from the container's profile, else
 * the pod's, else Unconfined (the kubelet's default without --seccomp-default), a Localhost
 * profile as seccomp_root joined with localhostProfile.
 *
 * Messages are built in the arena and may borrow strings from the podspec, which must outlive
 * them. Errors: EINVAL with a message for the user; nothing is logged.
 */
#ifndef KIYOT_CLI_SECURITY_H
#define KIYOT_CLI_SECURITY_H

#include "arena.h"
#include "cri_api.pb-c.h"
#include "err.h"
#include "kube/podspec.h"

/* Where the kubelet reads Localhost seccomp profiles (<root-dir>/seccomp). */
#define CLI_SECCOMP_ROOT "/var/lib/kubelet/seccomp"

/* The sandbox's Linux config: its security context and sysctls. */
Runtime__V1__LinuxPodSandboxConfig *cli_security_sandbox(struct arena *a, const struct podspec *p);

/* Refuses a container whose effective context has runAsNonRoot with runAsUser 0, which no
 * image can change; the kubelet's check, made before anything is created. */
int cli_security_check_pod(const struct podspec *p, struct err *err);

/* The kubelet's runAsNonRoot check against the image's user (img: the ImageStatus answer,
 * NULL when the runtime knows no such image, which counts as root): refuses an image that
 * runs as uid 0 or as nobody in particular, and one whose user is a name (which cannot be
 * verified), unless the container's effective runAsUser decides. */
int cli_security_check_image(const struct podspec *p, const struct podspec_container *c,
			     const Runtime__V1__Image *img, struct err *err);

/* The container's security context (never NULL). img as above; seccomp_root an absolute
 * directory. */
Runtime__V1__LinuxContainerSecurityContext *
cli_security_container(struct arena *a, const struct podspec *p, const struct podspec_container *c,
		       const Runtime__V1__Image *img, const char *seccomp_root);

#endif
