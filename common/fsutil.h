/*
 * fsutil.h: small file-system helpers with bounded reads and atomic writes.
 */
#ifndef KIYOT_FSUTIL_H
#define KIYOT_FSUTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/* mkdir -p with mode for each created directory. */
int fs_mkdir_p(const char *path, mode_t mode, struct err *err);
/* Reads a whole file of at most max bytes into a NUL-terminated buffer the caller frees. */
int fs_read_file(const char *path, size_t max, char **out, size_t *len, struct err *err);
/* Writes via a temporary file and rename, so readers never see half a file. */
int fs_write_file(const char *path, const void *data, size_t len, mode_t mode, struct err *err);
/* The same without flushing to disk: readers still see the old or the new file whole, but a
 * machine crash may lose it. For files rebuilt after a reboot (what processes of a cell that
 * no longer exist left behind), where an fsync per change costs more than it saves. */
int fs_replace_file(const char *path, const void *data, size_t len, mode_t mode, struct err *err);
/* rm -rf; missing paths are not an error. Never follows a symbolic link and never enters a
 * mount point (fsroot_remove). */
int fs_remove_tree(const char *path, struct err *err);
/* The same for a tree whose directories alone are removed, other entries vanishing with them
 * (cgroupfs). */
int fs_remove_dirs(const char *path, struct err *err);
int fs_exists(const char *path);

#endif
