/*
 * seccomp_internal.h: what the parts of the seccomp module share and nobody else sees.
 * seccomp_default.c holds RuntimeDefault, seccomp.c parses Localhost profiles. Reentrant.
 */
#ifndef AGENT_SECCOMP_INTERNAL_H
#define AGENT_SECCOMP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

/* cap without a leading "CAP_" (any case): "CAP_SYS_ADMIN" and "sys_admin" give "SYS_ADMIN"
 * and "sys_admin", to compare in any case. Points into cap. */
const char *seccomp_cap_bare(const char *cap);

/* Whether caps[0..n_caps) holds cap, compared in any case with or without "CAP_"; NULL
 * entries are skipped, caps may be NULL when n_caps is 0. */
bool seccomp_has_cap(const char *const *caps, size_t n_caps, const char *cap);

#endif
