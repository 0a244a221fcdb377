/*
 * state.h: what kiyot remembers about pods, as records the CRI handlers read and the store
 * persists. Each record keeps the CRI config it was created from (unpacked protobuf-c message,
 * owned), so metadata, labels and annotations are answered exactly as given.
 *
 * The records (records.h) list them, count their references and write them through to the
 * store. Their fields are read and written under the records' lock; the fields marked "fixed" never
 * change while the record lives, so whoever holds a reference may read them without it.
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
/* What the cell is asked to do with a container's unit; stored with the container. */
enum desired {
	DESIRED_CREATED = 0,
	DESIRED_RUNNING = 1,
	DESIRED_STOPPED = 2,
	DESIRED_REMOVED = 3
};

/* What records.c keeps in each record: its place in the lists and its references. No one
 * else reads or writes it. */
struct rec_head {
	struct rec_head *prev, *next; /* the records' list, in the order lists answer */
	struct rec_head *hnext;	      /* the next in its hash bucket */
	const char *id;		      /* the record's id, while listed */
	int refs; /* atomic: the records' own while listed, and one per holder */
	int listed;
};

/* Where a container's log stands: the bytes of the unit's log copied to the node's file
 * (offset), and that file (device and inode) with its size right after them (pos). */
struct log_mark {
	uint64_t offset;
	uint64_t pos;
	uint64_t dev, ino; /* 0, 0: no file yet */
};

struct ctrlog;

/* What is being done to a sandbox, one thing at a time (records.h: sandbox_begin). */
enum sandbox_phase {
	SANDBOX_IDLE,	   /* nothing: its state is what it is */
	SANDBOX_LAUNCHING, /* a RunPodSandbox brings its cell up (first or resumed) */
	SANDBOX_STOPPING,  /* its cell is being terminated (StopPodSandbox, RemovePodSandbox, gc) */
};

struct sandbox {
	struct rec_head rec;
	char *id;			       /* fixed */
	Runtime__V1__PodSandboxConfig *config; /* fixed; owned (protobuf_c free_unpacked) */
	char *runtime_handler;		       /* fixed */
	enum sandbox_state state;
	int64_t created_ns;	  /* fixed */
	char *cell_id;		  /* the cell that runs the pod; "" when none (yet/anymore) */
	char *ip;		  /* the pod IP: the cell's address */
	char *instance_type;	  /* fixed */
	char *sizing_reason;	  /* fixed once launched (a capacity fallback's note added) */
	enum sandbox_phase phase; /* what a handler does to it (memory only; records.h) */
};

struct container {
	struct rec_head rec;
	char *id;			      /* fixed */
	char *sandbox_id;		      /* fixed */
	Runtime__V1__ContainerConfig *config; /* owned; UpdateContainerResources changes it */
	enum container_state state;
	int64_t created_ns, started_ns, finished_ns;
	int32_t exit_code;
	char *reason;
	char *message;
	/* With reason CreateContainerError, the gRPC status of the failure as the cell said it
	 * (NOT_FOUND for an image its registry does not have); 0 when it did not. Memory only. */
	int error_status;
	char *image_ref; /* repo digest the unit runs */
	char *image_id;
	struct log_mark log_mark; /* where its log stood when loaded (the writer has it since) */
	struct ctrlog *log;	  /* the writer of its log file (ctrlog.h), or NULL */
	uint32_t restart_count;
	/* The unit's process as its cell's agent reported it; 0 when not running. Memory only:
	 * the cell's Watch reports it again after a restart of kiyot. */
	int32_t pid;
	/* A Localhost seccomp profile as the node's file held it at CreateContainer; "" for
	 * none (shipped with the unit: a cell does not read the node's files). */
	char *seccomp_profile;
	/* What the cell is asked to do with the unit (enum desired) and the grace a stop gives
	 * it, stored (a restarted kiyot asks the cell for the same; a database of a kiyot that
	 * did not store them has them derived from the state when loaded). */
	int desired;
	int64_t stop_timeout_s;
	/* Memory only: the next container in its bucket of the records' index by sandbox
	 * (records.c); guarded by the records' lock. */
	struct container *sb_hnext;
};

/* A remembered image: pulled in some cell. The node itself stores no layers. */
struct image_rec {
	struct rec_head rec;
	char *id;	    /* fixed: "sha256:<config digest>" */
	char *repo_tags;    /* newline-separated normalised references */
	char *repo_digests; /* newline-separated "name@sha256:..." */
	uint64_t size;
	char *user;
};

/* Frees a record no one else has: one the records never listed (records.h's *_put free the
 * others when their last reference goes). */
void sandbox_free(struct sandbox *s);
void container_free(struct container *c);
void image_rec_free(struct image_rec *i);

#endif
