/*
 * volume.h: shipped volumes. Cells that do not share the node's file system (EC2) get the
 * content of the pod's configMap, secret, projected and downwardAPI volumes, /etc/hosts and
 * other node files from kiyot, which reads them where the kubelet wrote them and sends the
 * whole volume with WriteVolume whenever it changes.
 *
 *	unsigned written, removed;
 *	if (volume_write(volumes_dir, req, &written, &removed, err) < 0)
 *		return -err->code;       (nothing of a request that fails validation is written)
 *
 * The copy lives at volumes_dir/<name>: a directory, or a file for a one-file volume. An
 * update writes new and changed files through a temporary name and rename, then replaces
 * symlinks the same way, then removes what the request no longer lists. The kubelet's
 * atomic writer lays a volume out as ..<timestamp>/ files, a ..data symlink to the current
 * timestamp directory and top-level symlinks through ..data; applied in this order, a unit
 * never sees a mix of old and new files. A one-file volume is rewritten in place, so a bind
 * mount of it (which pins the inode) sees the new content.
 *
 * Nothing in the request is trusted: names and paths are checked before anything is
 * written, and every file operation stays beneath the volume's directory without following
 * symlinks. Thread-safe (writes are serialised).
 */
#ifndef CELL_AGENT_VOLUME_H
#define CELL_AGENT_VOLUME_H

#include "cellagent.pb-c.h"
#include "err.h"

#define VOLUME_MAX_ENTRIES 8192
#define VOLUME_MAX_PATH 1024
#define VOLUME_MAX_BYTES (64u << 20)

/* Checks a request: the volume name, the root entry, every path, type, mode and link, no
 * duplicates, every entry's parent a directory of the request. Errors name the entry. */
int volume_validate(const Kiyot__Cell__V1__WriteVolumeRequest *req, struct err *err);

/* Makes volumes_dir/<req->volume> what the request lists (validated first). */
int volume_write(const char *volumes_dir, const Kiyot__Cell__V1__WriteVolumeRequest *req,
		 unsigned *written, unsigned *removed, struct err *err);

/* Whether a volume name is one kiyot may use: [a-z0-9-], 1 to 63 characters. */
int volume_name_ok(const char *name);

#endif
