/*
 * cri_validate.h: the checks every CRI request kiyot serves gets before its handler acts on it.
 *
 * A CRI caller is trusted to run pods, not to be sane: a 1 MiB pod name, 300 KiB of
 * annotations or a million environment variables would otherwise be stored, sent to a cell and
 * fail there, late and with the wrong status. Each handler of RunPodSandbox, CreateContainer,
 * UpdateContainerResources, ExecSync, Exec, Attach, PortForward and PullImage calls
 * cri_validate() first; what fails is INVALID_ARGUMENT at once, naming the field:
 *
 *	config.metadata.name: 1048576 bytes; a pod name has at most 253 (a DNS-1123 subdomain)
 *
 * The limits are Kubernetes' own where it has one (the API server's validation, v1.26), so
 * nothing a kubelet sends is refused:
 *   pod name              a DNS-1123 subdomain, at most 253 characters
 *   namespace             a DNS-1123 label, at most 63
 *   container name        DNS-1123 label characters, at most 253 (the kubelet sends at most 63;
 *                         the CRI validation suite names containers with up to ~100)
 *   names above           upper case letters are taken too: CRI clients other than the kubelet
 *                         (the CRI validation suite) use them, and containerd takes them
 *   pod uid               1-128 printable characters without '/' (the kubelet makes paths of it)
 *   label key             an optional DNS-1123 subdomain prefix (253) and '/', then a name of
 *                         at most 63 ([A-Za-z0-9] at both ends, [-_.A-Za-z0-9] inside)
 *   label value           at most 63 of the same characters, or empty; the kubelet's own
 *                         io.kubernetes.pod.name label carries a pod name (253)
 *   annotations           keys as label keys in any case; keys and values together at most
 *                         256 KiB, plus 4 KiB for the entries the kubelet adds to a pod's own
 *   hostname              at most 64 letters, digits, '-' and '.' (the kernel's HOST_NAME_MAX)
 *   log_directory         absolute; it and log_path without a ".." component, at most 4095
 *                         bytes each (PATH_MAX)
 *   dns_config            at most 3 servers, 32 search domains of 2048 characters together,
 *                         32 options (the kubelet's and glibc's limits)
 *   port_mappings         container_port 1-65535, host_port 0-65535 (0: none), TCP, UDP or
 *                         SCTP, host_ip empty or an IP address
 *   sysctls               names of at most 253 characters, values of at most 4095
 *   process               command, args and environment: each string at most 128 KiB, all
 *                         together at most 2 MiB (what the kernel lets a process start with
 *                         under the default 8 MiB stack); an environment key is not empty and
 *                         holds no '='
 *   resources             cpu_period 0 or 1000-1000000 us, cpu_quota 0, -1 or 1000 us to the
 *                         kernel's maximum, cpu_shares 0 or 2-262144, oom_score_adj -1000-1000,
 *                         a container's memory limit 0 or at least 6 MiB, memory+swap 0, -1 or
 *                         at least the memory limit
 *   image                 a reference of at most 520 characters of the reference grammar's
 *                         alphabet; registry credentials at most 16 KiB a field
 *   ids                   container and sandbox ids: 1-128 letters, digits, '-', '_', '.'
 *   whole configs         a packed PodSandboxConfig or ContainerConfig of at most 4 MiB (every
 *                         field, those kiyot does not use included, is kept with the record)
 * Counts of repeated fields and map entries are bounded too (see cri_validate.c).
 *
 * Only what the request carries is checked; what a handler requires (a pod name, an image)
 * it says itself. Thread-safe: no state.
 */
#ifndef KIYOT_CRI_VALIDATE_H
#define KIYOT_CRI_VALIDATE_H

#include <protobuf-c/protobuf-c.h>

#include "err.h"

#define CRI_MAX_POD_NAME 253
#define CRI_MAX_NAMESPACE 63
#define CRI_MAX_CONTAINER_NAME 253
#define CRI_MAX_UID 128
#define CRI_MAX_ANNOTATIONS_BYTES (256 * 1024 + 4 * 1024)
#define CRI_MAX_PROCESS_BYTES (2 * 1024 * 1024)
#define CRI_MAX_ARG_BYTES (128 * 1024)
#define CRI_MAX_CONFIG_BYTES (4 * 1024 * 1024)
#define CRI_MIN_MEMORY_LIMIT (6 * 1024 * 1024)

/*
 * Checks a decoded CRI request (any method: those without checks pass) at kiyot's boundary.
 * 0 when it may go on; -EINVAL with the field at fault and what it may be.
 */
int cri_validate(const ProtobufCMessage *req, struct err *err);

#endif
