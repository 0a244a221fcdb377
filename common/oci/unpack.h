/*
 * unpack.h: applies one image layer (a tar stream, plain or compressed with gzip, zstd, xz or
 * bzip2, detected from its content; no other compression, so no external program ever runs)
 * onto a directory, the way OCI image layers stack:
 *  - ".wh.<name>" deletes <name> from lower layers; ".wh..wh..opq" empties its directory of
 *    what lower layers put there;
 *  - leading '/' is stripped; an entry name with a ".." component (or a hard link target with
 *    one) is malformed and refused: "layer <name>: entry <path> escapes the root";
 *  - parent directories are resolved inside the root, as the container will see them: an
 *    absolute symbolic link or ".." in a link target stays in the root (Debian's
 *    /var/run -> /run works; a link to "/" leads to the root itself), missing directories are
 *    created, the target of a dangling link included; resolution takes a bounded number of
 *    steps (then ELOOP). An entry's own name is never followed: an existing link there is
 *    replaced. Nothing is ever written or linked outside the root;
 *  - a hard link must name an entry already in the root; otherwise the layer is malformed;
 *  - modes, ownership, modification times of files, symbolic and hard links and FIFOs are kept;
 *    device nodes and sockets are skipped; "user." xattrs and security.capability are copied
 *    when the file system accepts them.
 * A failed layer may leave part of its entries in root: callers unpack into a scratch directory
 * and rename it into place only when every layer is in.
 */
#ifndef AGENT_UNPACK_H
#define AGENT_UNPACK_H

#include <stdint.h>

#include "err.h"

/* Applies the layer file layer_path onto the existing directory root_dir. name names the layer
 * in errors ("sha256:..."). max_bytes bounds the total size of the entries' contents (0: no
 * bound), so a small compressed layer cannot fill the disk. */
int unpack_layer(const char *root_dir, const char *layer_path, const char *name, uint64_t max_bytes,
		 struct err *err);

#endif
