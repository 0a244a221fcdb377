/*
 * bundle_internal.h: what the bundle module's files share and nobody else sees. bundle.c
 * assembles config.json (process, linux object, the document) from the parts worked out in
 * bundle_security.c (capabilities, user and groups, seccomp) and bundle_mounts.c (the mounts
 * array, the pod's etc files, the overlay root). Reentrant.
 */
#ifndef AGENT_BUNDLE_INTERNAL_H
#define AGENT_BUNDLE_INTERNAL_H

#include <jansson.h>

#include "bundle.h"
#include "cellagent.pb-c.h"
#include "err.h"

/* The largest file read: the image's /etc/passwd and /etc/group, the host's /etc/resolv.conf,
 * a pod's etc file already written. */
#define ETC_FILE_MAX (1024 * 1024)

/* The unit's capability set, as a JSON array of "CAP_..." names: the default (every one when
 * privileged), plus the unit's adds, minus its drops ("ALL" first, then named ones), within
 * the agent's own bounding set. The caller owns *out. -EINVAL for a name this kernel does not
 * know. */
int bundle_unit_caps(const Kiyot__Cell__V1__Unit *unit, json_t **out, struct err *err);

/* The unit's seccomp filter (caps: its capabilities, borrowed); *out NULL for none (a
 * privileged or unconfined unit). The caller owns *out. An invalid Localhost profile is an
 * error. */
int bundle_build_seccomp(const Kiyot__Cell__V1__Unit *unit, json_t *caps, json_t **out,
			 struct err *err);

/* Appends the unit's mounts to mounts: the base file systems, the pod's etc files (unless the
 * unit mounts its own there), the unit's binds (emptyDir volumes created). -EINVAL for a
 * mount nothing can back (a relative path, a volume the pod lacks), -ENOENT for a shipped
 * volume not written yet; mounts may then hold some of them (the caller still frees it). */
int bundle_build_mounts(const struct bundle_spec *spec, json_t *mounts, struct err *err);

#endif
