/*
 * sandbox.h: a directory for fuzz targets whose module writes files (layers, volumes), to
 * check that nothing lands outside the directory it was given.
 *
 *	static struct sandbox sb;
 *	if (!sb.root)
 *		sandbox_init(&sb, "unpack");
 *	... unpack into sb.root ...
 *	sandbox_check(&sb);          aborts if anything outside sb.root changed
 *	sandbox_empty(&sb);          sb.root is empty again for the next input
 *
 * The sandbox is a new directory under $TMPDIR (else /dev/shm, else /tmp) holding root/, the
 * module's, and outside/, a decoy with a file and an empty directory that must stay as made:
 * an entry that escapes through "..", a symbolic link or a hard link lands in it or beside
 * it. It is removed when the process exits normally. Failures of the sandbox itself abort,
 * saying why: they are the target's, not the input's.
 */
#ifndef FUZZ_SANDBOX_H
#define FUZZ_SANDBOX_H

#include <stddef.h>
#include <sys/stat.h>

struct sandbox {
	char *base; /* the sandbox directory */
	char *root; /* base/root, where the module writes */
	int root_fd;
	struct stat decoy; /* base/outside/file as made */
};

void sandbox_init(struct sandbox *sb, const char *name);
/* Aborts when base holds anything but root/ and outside/, or outside/ changed. */
void sandbox_check(const struct sandbox *sb);
/* Removes everything under root, whatever its modes; root itself stays. */
void sandbox_empty(const struct sandbox *sb);

/* Calls fn for every entry under dirfd (pre-order, never following a symbolic link) with the
 * directory holding it, its name, its path relative to dirfd and its lstat. Aborts past
 * depth 8192. */
typedef void sandbox_visit_fn(int dirfd, const char *name, const char *path, const struct stat *st,
			      void *arg);
void sandbox_walk(int dirfd, sandbox_visit_fn *fn, void *arg);

#endif
