/*
 * fsroot.h: file operations confined beneath a root directory whatever the tree under it holds
 * (an image layer being unpacked, a shipped volume, an image's root file system): no symbolic
 * link, ".." or mount point leads out of the root, and nothing is written through a link.
 *
 *	int root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
 *	int fd = fsroot_open(root, "etc/passwd", O_RDONLY, FSROOT_IN_ROOT);
 *	int d = fsroot_mkdirs(root, "var/run/x", &budget);    as a write in a container would
 *	ret = fsroot_remove(d, "old", 0);                     rm -rf of one name, never through a link
 *
 * A path is resolved by openat2 where the kernel has it (Linux 5.6), otherwise by a walk of one
 * component at a time with O_NOFOLLOW from the descriptors already held (every ".." and every
 * link target handled here, never by the kernel), which keeps the same promises. Two ways:
 *  - FSROOT_BENEATH: no symbolic link is followed at all (-ELOOP), and ".." may not climb above
 *    the root (-EXDEV): for trees whose paths must name exactly what they say (volumes);
 *  - FSROOT_IN_ROOT: symbolic links and ".." are resolved with the root as "/", as a process
 *    chrooted there would see them: an absolute link or a ".." too many lands in the root.
 * Either way no mount point is crossed, bind mounts included (-EXDEV), nor a /proc magic link.
 *
 * Functions return a descriptor or 0, or a negative errno; they keep no state and are thread
 * safe. The caller owns the descriptors returned.
 */
#ifndef KIYOT_FSROOT_H
#define KIYOT_FSROOT_H

#include <sys/types.h>

/* How fsroot_open resolves (one of the first two, FSROOT_WALK optional). */
#define FSROOT_BENEATH 0x0
#define FSROOT_IN_ROOT 0x1
#define FSROOT_WALK 0x2 /* the walk even where openat2 exists (tests of the fallback) */

/* fsroot_remove's flags. */
#define FSROOT_DIRS_ONLY                                                                           \
	0x1 /* remove directories only, leaving other entries to vanish with
			      * them (cgroupfs, where control files cannot be unlinked) */

/* How deep fsroot_remove goes below the name it removes before it gives up with -ELOOP. */
#define FSROOT_MAX_DEPTH 256
/* Symbolic links followed resolving one path (FSROOT_IN_ROOT), as the kernel's limit. */
#define FSROOT_MAX_LINKS 40

/* Opens path (relative to rootfd; "" or "." is the root itself) with open(2)'s flags, O_CLOEXEC
 * added, resolved as how says. O_CREAT is not for here: create with openat on a directory this
 * returned. With FSROOT_IN_ROOT a final symbolic link is followed unless flags has O_NOFOLLOW
 * (then -ELOOP, or the link itself with O_PATH). */
int fsroot_open(int rootfd, const char *path, int flags, unsigned how);

/* Opens directory path under rootfd (O_PATH), resolved in the root (FSROOT_IN_ROOT), creating
 * what is missing the way a write inside a container would: a missing component becomes a
 * directory (mode 0755), and a symbolic link that points nowhere yet gets its target created.
 * *budget bounds the steps (components created plus links followed): -ELOOP when it runs out. */
int fsroot_mkdirs(int rootfd, const char *path, int *budget);

/* Removes name in dirfd, with everything under it when it is a directory (rm -rf). A symbolic
 * link is removed, never followed; a mount point (a directory on another file system, or the
 * root of a bind mount) is not entered: -EXDEV, the rest of the tree removed all the same.
 * Removal goes on past a failure and returns the first; a missing name is not one. -ELOOP past
 * FSROOT_MAX_DEPTH levels; -EINVAL for a name that is not one entry ("", ".", "..", "a/b"). */
int fsroot_remove(int dirfd, const char *name, unsigned flags);

#endif
