/*
 * shipvol.h: the pod's volumes for cells that do not share the node's files (EC2).
 *
 * The kubelet passes every volume to CreateContainer as a host path under its pod directory
 * (<root-dir>/pods/<pod uid>/...). For a remote cell each mount is one of:
 *  - an emptyDir (volumes/kubernetes.io~empty-dir/<name>): a directory made in the cell and
 *    shared by the pod's units, named "ed-<name>";
 *  - files the kubelet writes (volumes/kubernetes.io~configmap, ~secret, ~projected,
 *    ~downward-api, a subPath under volume-subpaths/, etc-hosts, a termination-log file):
 *    shipped, read here and sent with WriteVolume, named "sv-" + 16 hex digits of the host
 *    path's SHA-256;
 *  - anything else (a hostPath outside the pod directory, a persistent volume): refused with
 *    an error that says so, since the cell cannot reach it.
 *
 *	char name[SHIPVOL_NAME_MAX];
 *	enum shipvol_kind kind;
 *	if (shipvol_classify(pod_uid, host_path, &kind, name, err) < 0)
 *		return err_wrap(err, "mount %s", container_path);
 *	struct shipvol_snapshot snap;
 *	if (kind == SHIPVOL_SHIPPED && shipvol_snapshot(host_path, name, &snap, err) == 0) {
 *		send &snap.req with WriteVolume unless snap.digest is what the cell has;
 *		shipvol_snapshot_release(&snap);
 *	}
 */
#ifndef KIYOT_SHIPVOL_H
#define KIYOT_SHIPVOL_H

#include <stdint.h>

#include "arena.h"
#include "cellagent.pb-c.h"
#include "err.h"

#define SHIPVOL_NAME_MAX 72	 /* "ed-" + a 63-character volume name, NUL */
#define SHIPVOL_MAX_ENTRIES 8192 /* as the agent accepts */
#define SHIPVOL_MAX_BYTES (64u << 20)
#define SHIPVOL_MAX_DEPTH 32

enum shipvol_kind {
	SHIPVOL_EMPTY_DIR,
	SHIPVOL_SHIPPED,
};

/* How a cell that does not share the node's files gets host_path, and the volume name it
 * goes by in the cell. EINVAL, naming the path and what to use instead, when it cannot. */
int shipvol_classify(const char *pod_uid, const char *host_path, enum shipvol_kind *kind,
		     char name[SHIPVOL_NAME_MAX], struct err *err);

/* The name a shipped node path goes by in the cell: "sv-" + 16 hex digits of its SHA-256. */
void shipvol_name(const char *host_path, char name[SHIPVOL_NAME_MAX]);

/* One volume's content, read from the node. */
struct shipvol_snapshot {
	struct arena arena;
	Kiyot__Cell__V1__WriteVolumeRequest req;
	uint8_t digest[32]; /* SHA-256 of the packed request: equal digests, equal content */
	uint64_t bytes;
};

/* Reads host_path (a directory tree or one file) into a WriteVolume request: directories,
 * regular files and symlinks with their modes and owners; other file types are skipped.
 * Bounded by SHIPVOL_MAX_ENTRIES, SHIPVOL_MAX_BYTES and SHIPVOL_MAX_DEPTH (E2BIG). */
int shipvol_snapshot(const char *host_path, const char *name, struct shipvol_snapshot *out,
		     struct err *err);
void shipvol_snapshot_release(struct shipvol_snapshot *s);

#endif
