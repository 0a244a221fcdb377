/*
 * fuzz_volume: WriteVolume requests from a hostile caller, decoded by protobuf-c as the agent
 * decodes them and applied into a sandbox as its volumes directory. An input holds two
 * requests, an update after a first write: two bytes (little-endian) give the length of the
 * first, the rest is the second; when the length does not fit, the whole input is one
 * request. Besides what the sanitizers catch, it checks volume.h's promises:
 *  - nothing is written or linked outside the volumes directory;
 *  - a refusal has a message and a negative errno, and a request that fails validation
 *    changes nothing;
 *  - an accepted request leaves its volume exactly as listed (types, contents, modes, owners
 *    given, symlink targets; nothing else), whatever was there before;
 *  - the same request again writes and removes nothing.
 * The sandbox is emptied after every input.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox.h"
#include "volume.h"

#define T_DIR KIYOT__CELL__V1__FILE_ENTRY__TYPE__DIR
#define T_FILE KIYOT__CELL__V1__FILE_ENTRY__TYPE__FILE
#define T_SYMLINK KIYOT__CELL__V1__FILE_ENTRY__TYPE__SYMLINK

typedef Kiyot__Cell__V1__WriteVolumeRequest request_t;
typedef Kiyot__Cell__V1__FileEntry entry_t;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sandbox sb;

static void fail(const char *what, const char *path)
{
	fprintf(stderr, "volume: %s: %s\n", path, what);
	abort();
}

/* Whether what is at (dirfd, name) is entry e: type, mode, owner when given, content. */
static void expect_entry(int dirfd, const char *name, const struct stat *st, const entry_t *e,
			 const char *path)
{
	if ((e->type == T_DIR && !S_ISDIR(st->st_mode)) ||
	    (e->type == T_FILE && !S_ISREG(st->st_mode)) ||
	    (e->type == T_SYMLINK && !S_ISLNK(st->st_mode)))
		fail("not of the type the request lists", path);
	if ((e->uid >= 0 && st->st_uid != (uid_t)e->uid) ||
	    (e->gid >= 0 && st->st_gid != (gid_t)e->gid))
		fail("not of the owner the request lists", path);
	if (e->type == T_SYMLINK) {
		char target[4097];
		ssize_t n = readlinkat(dirfd, name, target, sizeof(target));

		if (n < 0 || (size_t)n != strlen(e->target) || memcmp(target, e->target, (size_t)n))
			fail("a symlink to another target", path);
		return;
	}
	if ((st->st_mode & 07777) != e->mode)
		fail("not of the mode the request lists", path);
	if (e->type == T_FILE) {
		int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		uint8_t *buf = malloc(e->data.len + 1);
		ssize_t n = fd < 0 ? -1 : pread(fd, buf, e->data.len + 1, 0);

		if (fd >= 0)
			close(fd);
		if (n != (ssize_t)e->data.len || (n && memcmp(buf, e->data.data, (size_t)n)))
			fail("holds other data than the request's", path);
		free(buf);
	}
}

struct tree_check {
	const request_t *req;
	size_t seen;
};

static void visit(int dirfd, const char *name, const char *path, const struct stat *st, void *arg)
{
	struct tree_check *t = arg;

	for (size_t i = 1; i < t->req->n_entries; i++) {
		if (strcmp(t->req->entries[i]->path, path) == 0) {
			expect_entry(dirfd, name, st, t->req->entries[i], path);
			t->seen++;
			return;
		}
	}
	fail("not in the request", path);
}

/* The volume on disk is the request, nothing more or less. */
static void expect_volume(const request_t *req)
{
	const entry_t *root = req->entries[0];
	struct tree_check t = { req, 0 };
	struct stat st;
	int fd;

	if (fstatat(sb.root_fd, req->volume, &st, AT_SYMLINK_NOFOLLOW) < 0)
		fail("missing", req->volume);
	expect_entry(sb.root_fd, req->volume, &st, root, req->volume);
	if (root->type == T_FILE)
		return;
	fd = openat(sb.root_fd, req->volume, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		fail("cannot be opened", req->volume);
	sandbox_walk(fd, visit, &t);
	close(fd);
	if (t.seen != req->n_entries - 1)
		fail("misses entries of the request", req->volume);
}

static void visit_none(int dirfd, const char *name, const char *path, const struct stat *st,
		       void *arg)
{
	(void)dirfd;
	(void)name;
	(void)st;
	(void)arg;
	fail("written by a request that was refused", path);
}

enum outcome {
	ACCEPTED,
	INVALID,
	FAILED
};

/* Applies req and checks the outcome. */
static enum outcome apply(const request_t *req)
{
	struct err err = ERR_INIT;
	unsigned written, removed;
	bool valid = volume_validate(req, &err) == 0;
	int ret;

	err = (struct err)ERR_INIT;
	ret = volume_write(sb.root, req, &written, &removed, &err);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "volume %s: %d %s\n", req->volume, ret, ret < 0 ? err.msg : "");
	sandbox_check(&sb);
	if (ret < 0) {
		if (ret != -err.code || !err.msg[0])
			fail("refused without a message or errno", req->volume);
		return valid ? FAILED : INVALID;
	}
	if (!valid)
		fail("written though volume_validate refuses it", req->volume);
	expect_volume(req);
	ret = volume_write(sb.root, req, &written, &removed, &err);
	if (ret < 0 || written || removed) {
		fprintf(stderr, "again: %d, %u written, %u removed: %s\n", ret, written, removed,
			err.msg);
		fail("writing the same request again changed something", req->volume);
	}
	return ACCEPTED;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	request_t *first = NULL, *second;
	size_t len = size >= 2 ? (size_t)data[0] | (size_t)data[1] << 8 : 0;
	enum outcome before = INVALID;

	if (!sb.root)
		sandbox_init(&sb, "volume");
	if (size >= 2 && len <= size - 2) {
		first = kiyot__cell__v1__write_volume_request__unpack(NULL, len, data + 2);
		second = kiyot__cell__v1__write_volume_request__unpack(NULL, size - 2 - len,
								       data + 2 + len);
	} else {
		second = kiyot__cell__v1__write_volume_request__unpack(NULL, size, data);
	}
	if (first) {
		before = apply(first);
		if (before == INVALID)
			sandbox_walk(sb.root_fd, visit_none, NULL);
	}
	/* a request refused as invalid leaves what was there as it was */
	if (second && apply(second) == INVALID) {
		if (before == ACCEPTED)
			expect_volume(first);
		else if (before == INVALID)
			sandbox_walk(sb.root_fd, visit_none, NULL);
	}
	if (first)
		kiyot__cell__v1__write_volume_request__free_unpacked(first, NULL);
	if (second)
		kiyot__cell__v1__write_volume_request__free_unpacked(second, NULL);
	sandbox_empty(&sb);
	return 0;
}
