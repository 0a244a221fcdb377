/*
 * state.h: what kiyot remembers about pods, as records the CRI handlers read and the store
 * persists. Each record keeps the CRI config it was created from (unpacked protobuf-c message,
 * owned), so metadata, labels and annotations are answered exactly as given.
 */
#ifndef KIYOT_STATE_H
#define KIYOT_STATE_H

#include <stdint.h>

#include "cri_api.pb-c.h"

enum sandbox_state {
	SANDBOX_READY = 0,
	SANDBOX_NOTREADY = 1
};
enum container_state {
	CTR_CREATED = 0,
	CTR_RUNNING = 1,
	CTR_EXITED = 2,
	CTR_UNKNOWN = 3
};

struct sandbox {
	char *id;
	Runtime__V1__PodSandboxConfig *config; /* owned (protobuf_c free_unpacked) */
	char *runtime_handler;
	enum sandbox_state state;
	int64_t created_ns;
	char *cell_id; /* the cell that runs the pod; "" when none (yet/anymore) */
	char *ip;      /* the pod IP: the cell's address */
	char *instance_type;
	char *sizing_reason;
	int launching; /* a RunPodSandbox is bringing its cell up (memory only) */
	struct sandbox *next;
};

struct container {
	char *id;
	char *sandbox_id;
	Runtime__V1__ContainerConfig *config; /* owned */
	enum container_state state;
	int64_t created_ns, started_ns, finished_ns;
	int32_t exit_code;
	char *reason;
	char *message;
	char *image_ref; /* repo digest the unit runs */
	char *image_id;
	uint64_t log_offset; /* bytes of the unit's log already copied to log_path */
	uint32_t restart_count;
	/* A Localhost seccomp profile as the node's file held it at CreateContainer; "" for
	 * none (shipped with the unit: a cell does not read the node's files). */
	char *seccomp_profile;
	/* What the cell is asked to do with the unit (enum desired in cri.h); derived from the
	 * state when loaded, not persisted. */
	int desired;
	int64_t stop_timeout_s;
	struct container *next;
};

/* A remembered image: pulled in some cell. The node itself stores no layers. */
struct image_rec {
	char *id;	    /* "sha256:<config digest>" */
	char *repo_tags;    /* newline-separated normalised references */
	char *repo_digests; /* newline-separated "name@sha256:..." */
	uint64_t size;
	char *user;
	struct image_rec *next;
};

void sandbox_free(struct sandbox *s);
void container_free(struct container *c);
void image_rec_free(struct image_rec *i);

#endif
