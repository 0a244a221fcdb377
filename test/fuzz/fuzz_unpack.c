/*
 * fuzz_unpack: image layers from a hostile registry, applied as the agent applies them. Each
 * input is a layer (tar, plain or compressed as libarchive detects) unpacked into an empty
 * root of a sandbox. Besides what the sanitizers catch, it checks unpack.h's promises: nothing
 * is written or linked outside the root (through "..", symbolic or hard links), the files'
 * contents stay within the byte bound, a refusal has a message and a negative errno, and no
 * descriptor is left open. The root is emptied after every input; inputs are capped at 64 KiB
 * and contents at 1 MiB, so a run stays fast.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sandbox.h"
#include "unpack.h"

#define MAX_INPUT (64u << 10)
#define MAX_BYTES (1u << 20)
#define PAGE 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sandbox sb;
static int layer_fd = -1;
static char layer_path[64];
static int free_fd = -1; /* the lowest free descriptor between inputs */

/* The descriptor the next open gets. */
static int lowest_free_fd(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		abort();
	close(fd);
	return fd;
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
	free_fd = lowest_free_fd();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err err = ERR_INIT;
	struct usage u = { 0, 0 };
	int ret;

	if (size > MAX_INPUT)
		return 0;
	if (layer_fd < 0)
		setup();
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
	if (lowest_free_fd() != free_fd) {
		fprintf(stderr, "a descriptor was left open\n");
		abort();
	}
	return 0;
}
