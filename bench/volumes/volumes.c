/*
 * The shipped-volume benchmark: what it costs to bring a configMap-like volume into a remote
 * cell, without the network. For volumes of several shapes, laid out as the kubelet's atomic
 * writer does it:
 *   read    kiyot reads the node's copy and digests it (every check of a volume)
 *   first   read + pack + unpack (the wire) + the agent writing the whole volume
 *   update  the same after the kubelet swapped in a new version with one key changed
 *   same    the same with nothing changed (the agent compares and writes nothing)
 * next to `cp -a` of the same directory into a fresh place, measured in the same run.
 *
 *	make bench-volumes && build/bench/volumes
 */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../cell-agent/volume.h"
#include "clock.h"
#include "fsutil.h"
#include "cells/shipvol.h"
#include "xalloc.h"

#define ROUNDS 20

extern char **environ;

struct shape {
	const char *name;
	int keys;
	size_t bytes; /* per key */
};

static const struct shape shapes[] = {
	{ "10 keys x 1 KiB", 10, 1024 },
	{ "100 keys x 10 KiB", 100, 10240 },
	{ "1 key x 1 MiB", 1, 1 << 20 },
};

static void die(const char *what, const struct err *err)
{
	fprintf(stderr, "bench volumes: %s: %s\n", what, err ? err->msg : strerror(errno));
	exit(1);
}

/* A new version of the volume at dir: ..<stamp>/ keys, ..data swapped, key links. */
static void kubelet_write(const char *dir, const struct shape *s, int version)
{
	_cleanup_free_ char *stamp = xasprintf("..2026_11_22_00_00_%02d.%d", version, version);
	_cleanup_free_ char *sdir = xasprintf("%s/%s", dir, stamp);
	_cleanup_free_ char *tmp = xasprintf("%s/..data_tmp", dir);
	_cleanup_free_ char *data = xasprintf("%s/..data", dir);
	char *buf = xmalloc(s->bytes);
	struct err err = ERR_INIT;

	if (fs_mkdir_p(sdir, 0755, &err) < 0)
		die(sdir, &err);
	for (int k = 0; k < s->keys; k++) {
		_cleanup_free_ char *p = xasprintf("%s/key-%03d", sdir, k);
		_cleanup_free_ char *link = xasprintf("%s/key-%03d", dir, k);
		_cleanup_free_ char *target = xasprintf("..data/key-%03d", k);

		/* version n changes key 0 only */
		memset(buf, 'a' + (k == 0 ? version % 26 : 0), s->bytes);
		if (fs_write_file(p, buf, s->bytes, 0644, &err) < 0)
			die(p, &err);
		if (version == 0 && symlink(target, link) < 0)
			die(link, NULL);
	}
	free(buf);
	if (symlink(stamp, tmp) < 0 || rename(tmp, data) < 0)
		die(data, NULL);
	if (version > 0) {
		_cleanup_free_ char *old =
			xasprintf("%s/..2026_11_22_00_00_%02d.%d", dir, version - 1, version - 1);

		if (fs_remove_tree(old, &err) < 0)
			die(old, &err);
	}
}

/* Reads the node's copy and sends it through pack/unpack to the agent's writer. */
static double ship(const char *node, const char *cell, int write)
{
	int64_t t0 = clock_mono_ns();
	struct shipvol_snapshot snap;
	struct err err = ERR_INIT;
	unsigned written, removed;

	if (shipvol_snapshot(node, "sv-bench", &snap, &err) < 0)
		die(node, &err);
	if (write) {
		size_t len = kiyot__cell__v1__write_volume_request__get_packed_size(&snap.req);
		uint8_t *buf = xmalloc(len);
		Kiyot__Cell__V1__WriteVolumeRequest *req;

		kiyot__cell__v1__write_volume_request__pack(&snap.req, buf);
		req = kiyot__cell__v1__write_volume_request__unpack(NULL, len, buf);
		free(buf);
		if (!req || volume_write(cell, req, &written, &removed, &err) < 0)
			die("volume_write", &err);
		kiyot__cell__v1__write_volume_request__free_unpacked(req, NULL);
	}
	shipvol_snapshot_release(&snap);
	return (double)(clock_mono_ns() - t0) / 1e6;
}

static double cp_a(const char *src, const char *dst)
{
	char *argv[] = { "cp", "-a", (char *)src, (char *)dst, NULL };
	int64_t t0 = clock_mono_ns();
	struct err err = ERR_INIT;
	int status;
	pid_t pid;

	fs_remove_tree(dst, &err);
	if (posix_spawnp(&pid, "cp", NULL, NULL, argv, environ) != 0 ||
	    waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		die("cp -a", NULL);
	return (double)(clock_mono_ns() - t0) / 1e6;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), by_value);
	return v[n / 2];
}

int main(void)
{
	char base[] = "/tmp/kiyot-bench-volumes-XXXXXX";
	struct err err = ERR_INIT;

	if (!mkdtemp(base))
		die("mkdtemp", NULL);
	printf("shipped volumes (median of %d rounds, ms; ratio to cp -a of the same directory)\n",
	       ROUNDS);
	printf("%-20s %9s %9s %9s %9s %9s %7s %7s\n", "volume", "cp -a", "read", "first", "update",
	       "same", "first/", "update/");
	for (size_t i = 0; i < ARRAY_SIZE(shapes); i++) {
		const struct shape *s = &shapes[i];
		_cleanup_free_ char *node = xasprintf("%s/node-%zu", base, i);
		_cleanup_free_ char *cells = xasprintf("%s/cells-%zu", base, i);
		_cleanup_free_ char *copy = xasprintf("%s/copy-%zu", base, i);
		double cp[ROUNDS], rd[ROUNDS], first[ROUNDS], upd[ROUNDS], same[ROUNDS];

		kubelet_write(node, s, 0);
		if (fs_mkdir_p(cells, 0700, &err) < 0)
			die(cells, &err);
		for (int r = 0; r < ROUNDS; r++) {
			_cleanup_free_ char *cell = xasprintf("%s/%d", cells, r);

			cp[r] = cp_a(node, copy);
			rd[r] = ship(node, cell, 0);
			first[r] = ship(node, cell, 1);
		}
		for (int r = 0; r < ROUNDS; r++) {
			_cleanup_free_ char *cell = xasprintf("%s/%d", cells, r);

			kubelet_write(node, s, r + 1);
			upd[r] = ship(node, cell, 1);
			same[r] = ship(node, cell, 1);
		}
		{
			double c = median(cp, ROUNDS), f = median(first, ROUNDS),
			       u = median(upd, ROUNDS);

			printf("%-20s %9.3f %9.3f %9.3f %9.3f %9.3f %6.2fx %6.2fx\n", s->name, c,
			       median(rd, ROUNDS), f, u, median(same, ROUNDS), f / c, u / c);
		}
	}
	if (fs_remove_tree(base, &err) < 0)
		die(base, &err);
	return 0;
}
