/*
 * seccomp.h: the seccomp filters of units, as OCI linux.seccomp objects (runtime spec 1.0.2
 * plus defaultErrnoRet) for crun.
 *
 * RuntimeDefault is the project's own default-deny allow-list, in the spirit of Docker's and
 * containerd's default profiles: every syscall not listed fails with EPERM; the ordinary
 * syscalls of a container are allowed; syscalls that act on the whole machine or escape the
 * container's namespaces (mount, sethostname, unshare, setns, ptrace, module loading, clock
 * setting, reboot, bpf, ...) are allowed only when the unit holds the capability the kernel
 * checks for them (CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_SYS_MODULE, ...); a few are never
 * allowed (kexec_load, keyctl, add_key, request_key, userfaultfd, pivot_root, io_uring_*).
 * clone may not create namespaces without CAP_SYS_ADMIN, clone3 then fails with ENOSYS so
 * that libc falls back to clone, personality takes only the harmless personas, and socket
 * does not open AF_VSOCK sockets (to the host of a virtual machine).
 * The architectures are the build's: x86_64 with x86 and x32, or aarch64 with arm.
 *
 * A Localhost profile is a file the user wrote, either an OCI linux.seccomp object or a
 * Docker/containerd profile. seccomp_profile_parse checks it completely and builds a new OCI
 * object from what it understood, so a typo never weakens a filter silently:
 *   - keys: defaultAction (required), defaultErrnoRet, architectures or archMap (not both),
 *     flags, listenerPath, listenerMetadata, syscalls, comment; any other key is refused;
 *   - archMap keeps only the entry of the running machine's architecture, which becomes
 *     architectures (that architecture, then its subArchitectures);
 *   - a rule (syscalls[i]) has names (or the older single name, not both), action, and may
 *     have errnoRet (SCMP_ACT_ERRNO and SCMP_ACT_TRACE only), args (at most 6 of index 0-5,
 *     value, valueTwo, op), comment, includes and excludes;
 *   - includes and excludes ({arches, caps, minKernel}) are decided for this unit on this
 *     machine: a rule is kept when every capability in includes.caps is in the unit's set,
 *     includes.arches (if any) names the running architecture, and the kernel is at least
 *     includes.minKernel; it is dropped when excludes.arches names the running architecture,
 *     any of excludes.caps is in the unit's set, or the kernel is at least excludes.minKernel.
 *     Architectures may be written as Docker does ("amd64", "arm64", "x86"), as the kernel
 *     does ("x86_64", "aarch64") or as libseccomp does ("SCMP_ARCH_X86_64"); capabilities
 *     with or without "CAP_", in any case. Dropped rules are left out of the result;
 *   - null stands for an absent optional key; values are checked against what crun 1.8
 *     knows (actions, operators, architectures, flags); errno values are 0-4095; argument
 *     values 0 to 2^63-1 (the JSON parser's integers are signed 64-bit); syscall names are
 *     lower-case letters, digits and '_' (names libseccomp does not know are crun's to
 *     ignore, with a warning);
 *   - SCMP_ACT_NOTIFY needs listenerPath (absolute) and cannot be the default action;
 *   - two rules may not give one syscall the same comparisons of its arguments with
 *     different actions (libseccomp refuses to load such a filter; without args they may).
 *
 * RuntimeDefault's table is in seccomp_default.c; the parser is in seccomp.c (the top level)
 * and seccomp_rule.c (the rules).
 *
 * Thread safety: all functions are reentrant.
 */
#ifndef AGENT_SECCOMP_H
#define AGENT_SECCOMP_H

#include <jansson.h>
#include <stddef.h>

#include "err.h"

/* The largest Localhost profile accepted, in bytes (the CRI shim reads files of this size). */
#define SECCOMP_PROFILE_MAX (1024 * 1024)

/* The OCI linux.seccomp object of RuntimeDefault for a unit whose effective capabilities are
 * caps[0..n_caps) (names such as "CAP_SYS_ADMIN"; borrowed; caps may be NULL when n_caps is
 * 0). Never fails; the caller owns the result (json_decref). */
json_t *seccomp_runtime_default(const char *const *caps, size_t n_caps);

/* Parses and checks a Localhost profile of len bytes (at most SECCOMP_PROFILE_MAX; text need
 * not be NUL-terminated) for a unit with effective capabilities caps[0..n_caps), as described
 * above. On success *out is the OCI linux.seccomp object (the caller owns it) and 0 is
 * returned; otherwise -EINVAL with a message that says where the profile is wrong and how,
 * e.g. `syscalls[3].action: unknown action "SCMP_ACT_FOO" (...)`; *out is then untouched. */
int seccomp_profile_parse(const char *text, size_t len, const char *const *caps, size_t n_caps,
			  json_t **out, struct err *err);

#endif
