/*
 * fuzz_unpack: image layers from a hostile registry, applied as the agent applies them. Each
 * input is a layer (tar, plain or compressed as libarchive detects) unpacked into an empty
 * root of a sandbox. Besides what the sanitizers catch, it checks unpack.h's promises: nothing
 * is written or linked outside the root (through "..", symbolic or hard links), the files'
 * contents stay within the byte bound, a refusal has a message and a negative errno, and the
 * descriptors open after an input are those open before it (neither a leak nor a stray close).
 * The root is emptied after every input; inputs are capped at 64 KiB and contents at 1 MiB, so
 * a run stays fast.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sandbox.h"
#include "unpack.h"
#include "xalloc.h"

#define FUZZ_MAX_INPUT (64u << 10)
#define MAX_BYTES (1u << 20)
#define PAGE 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sandbox sb;
static int layer_fd = -1;
static char layer_path[64];

/* The open descriptors and what each points at, one "fd target" line each, in order. */
static char *open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	char *list = xstrdup("");
	struct dirent *de;

	if (!d)
		abort();
	while ((de = readdir(d))) {
		char target[256] = "?";
		ssize_t n;
		char *next;
		int fd;

		if (de->d_name[0] == '.' || (fd = (int)strtol(de->d_name, NULL, 10)) == dirfd(d))
			continue;
		n = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
		if (n >= 0)
			target[n] = '\0';
		next = xasprintf("%s%d %s\n", list, fd, target);
		free(list);
		list = next;
	}
	closedir(d);
	return list;
}

/* What regular files take on disk: blocks (hard-linked ones shared) and how many files. */
struct usage {
	uint64_t bytes, files;
};

static void count_blocks(int dirfd, const char *name, const char *path, const struct stat *st,
			 void *arg)
{
	struct usage *u = arg;

	(void)dirfd;
	(void)name;
	(void)path;
	if (!S_ISREG(st->st_mode))
		return;
	u->bytes += (uint64_t)st->st_blocks * 512 / st->st_nlink;
	u->files++;
}

static void setup(void)
{
	sandbox_init(&sb, "unpack");
	layer_fd = memfd_create("layer", MFD_CLOEXEC);
	if (layer_fd < 0)
		abort();
	snprintf(layer_path, sizeof(layer_path), "/proc/self/fd/%d", layer_fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err err = ERR_INIT;
	struct usage u = { 0, 0 };
	char *fds_before, *fds_after;
	int ret;

	if (size > FUZZ_MAX_INPUT)
		return 0;
	if (layer_fd < 0)
		setup();
	/* taken for each input: between inputs the fuzzer may open descriptors of its own (its
	 * symbolizer's pipes, when it first names a function it reached) */
	fds_before = open_fds();
	if (ftruncate(layer_fd, 0) < 0 || pwrite(layer_fd, data, size, 0) != (ssize_t)size)
		abort();
	ret = unpack_layer(sb.root, layer_path, "sha256:fuzz", MAX_BYTES, &err);
	if (ret > 0 || (ret < 0 && (ret != -err.code || !err.msg[0]))) {
		fprintf(stderr, "unpack_layer returned %d, error %d \"%s\"\n", ret, err.code,
			err.msg);
		abort();
	}
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "unpack: %d %s\n", ret, ret < 0 ? err.msg : "");
	sandbox_check(&sb);
	sandbox_walk(sb.root_fd, count_blocks, &u);
	/* a file's last block may be rounded up to a page */
	if (u.bytes > MAX_BYTES + u.files * PAGE) {
		fprintf(stderr, "%llu bytes in %llu files, past the bound of %u\n",
			(unsigned long long)u.bytes, (unsigned long long)u.files, MAX_BYTES);
		abort();
	}
	sandbox_empty(&sb);
	fds_after = open_fds();
	if (strcmp(fds_after, fds_before)) {
		fprintf(stderr, "descriptors changed: before the input\n%safter it\n%s", fds_before,
			fds_after);
		abort();
	}
	free(fds_before);
	free(fds_after);
	return 0;
}
