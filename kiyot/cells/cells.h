/*
 * cells.h: the cell manager. Launches a cell per sandbox through the provider, talks to its
 * agent (unary calls, plus one Watch stream per cell whose events and logs it reports through
 * the hooks it was made with, struct cells_hooks), and tears cells down.
 *
 * Thread safety: all calls may come from any thread. Applies to one cell are serialised by
 * cells_apply_lock/unlock so a newer desired pod is never overtaken by an older one.
 */
#ifndef KIYOT_CELLS_H
#define KIYOT_CELLS_H

#include <stdbool.h>
#include <stdint.h>

#include "agent_client.h"
#include "cellagent.pb-c.h"
#include "err.h"
#include "providers/provider.h"

struct kiyot;
struct cellmgr;
struct cell_interruption;
struct sandbox;

/*
 * What the cell manager and the collector (gc.c) report to the side that owns the pods (the
 * CRI side: cri/cell_reports.c), which the wiring (daemon/) hands to cells_new. cells/ calls
 * nothing of that side but these. Each is called with no lock of cells/ held; ctx is the
 * hooks' own. A NULL hook is not called.
 */
struct cells_hooks {
	void *ctx;
	/* A unit's status from a cell's Watch (on the agent client's loop threads). */
	void (*unit_status)(void *ctx, const char *cell_id, const Kiyot__Cell__V1__UnitStatus *st);
	/* A chunk of a unit's log from a cell's Watch, at offset in its stream. */
	void (*unit_log)(void *ctx, const char *unit_id, uint64_t offset, const uint8_t *data,
			 size_t len);
	/* The log offsets of a cell's units, for resuming its Watch; *out (n entries) is freed
	 * with log_offsets_free. */
	void (*log_offsets)(void *ctx, const char *cell_id, Kiyot__Cell__V1__LogOffset ***out,
			    size_t *n);
	void (*log_offsets_free)(Kiyot__Cell__V1__LogOffset **o, size_t n);
	/* A cell's agent said its instance is to be interrupted: on a thread of its own, as it
	 * may block (it stops containers and waits for the cell). */
	void (*interruption)(void *ctx, const char *cell_id, const struct cell_interruption *in);
	/* The collector found a ready sandbox's cell gone: it is marked not ready, its live
	 * containers exited with reason. Called with the records' lock held. */
	void (*sandbox_lost)(void *ctx, struct sandbox *sb, const char *reason);
	/* After each pass of the collector: images nothing uses any more leave the node's
	 * store. */
	void (*pass_done)(void *ctx);
};

/* hooks is copied; NULL: nothing is reported. */
int cells_new(struct kiyot *k, const struct cells_hooks *hooks, struct cellmgr **out,
	      struct err *err);
/* The hooks m was made with (never NULL; the collector reports through them). */
const struct cells_hooks *cells_hooks(const struct cellmgr *m);
void cells_free(struct cellmgr *m);

/* What a launch made: the type the provider launched (a runner-up of sizing's choice when that
 * had no capacity) and the provider's note of what it tried, or NULL. */
struct cell_launched {
	char *instance_type;
	char *note;
	/* the launch failed ECANCELED because its caller went away (kiyot stopping, the
	 * kubelet's deadline), not because its sandbox was stopped: the cell (or instance) is
	 * kept, and a RunPodSandbox with the same cell id resumes it (the provider's launch is
	 * idempotent per cell id) */
	bool kept;
};

void cell_launched_release(struct cell_launched *l);

/*
 * Launches the cell and waits until its agent answers; fills *ip (caller frees) and, when
 * launched is not NULL, what the provider made of the spec (release it with
 * cell_launched_release). The spec's
 * cluster_id and bootstrap are ignored: kiyot's own id and cells_bootstrap's document go.
 *
 * The wait ends early, and the cell is terminated, when the provider says the cell cannot come
 * up any more (provider_ops.state, asked every LAUNCH_STATE_EVERY_MS: EIO with its reason,
 * "the instance i-... was terminated during boot: Server.SpotInstanceTermination: ..."),
 * when cells_launch_cancel cancels it or the caller's cancel scope ends (ECANCELED), and after
 * the boot timeout (cells.bootTimeoutSeconds, else the provider's; ECONNREFUSED).
 */
int cells_launch(struct cellmgr *m, const struct cell_spec *spec, char **ip,
		 struct cell_launched *launched, struct err *err);

/*
 * A launch's life as its sandbox's handlers see it. cells_launch_begin announces the launch of
 * cell_id before anything can find the sandbox launching (a handler that stops the sandbox
 * then finds the launch to cancel), cells_launch_end forgets it once the sandbox no longer
 * launches; cells_launch between them is the same launch. Each begin takes one end.
 *
 * cells_launch_cancel asks the launch of cell_id to stop: CELLS_LAUNCH_CANCELLED when it was
 * under way (cells_launch ends with ECANCELED, "stopped while starting", terminating its cell
 * itself: the caller may terminate it at once as well), CELLS_LAUNCH_DONE when its cell came up
 * and is kept (too late: the caller stops the cell as a running one, once its sandbox is no
 * longer launching), CELLS_LAUNCH_NONE when no launch of it is known (not begun yet, or
 * ended).
 */
enum cells_launch_state {
	CELLS_LAUNCH_NONE,
	CELLS_LAUNCH_CANCELLED,
	CELLS_LAUNCH_DONE,
};
void cells_launch_begin(struct cellmgr *m, const char *cell_id);
void cells_launch_end(struct cellmgr *m, const char *cell_id);
enum cells_launch_state cells_launch_cancel(struct cellmgr *m, const char *cell_id);
/*
 * What a cell's agent said of its instance's coming end (its Watch's INTERRUPTION events:
 * EC2's spot interruption notice and rebalance recommendation). The manager keeps the latest
 * of each kind while the cell runs, and calls the interruption hook (struct cells_hooks) on a thread of
 * its own for each new one.
 */
struct cell_interruption {
	bool notice;		   /* a spot interruption notice came */
	char action[16];	   /* its action: "terminate", "stop" or "hibernate" */
	int64_t notice_time_ns;	   /* when EC2 acts (Unix time, ns) */
	bool rebalance;		   /* a rebalance recommendation came */
	int64_t rebalance_time_ns; /* when EC2 noticed the risk */
};
/* The cell's interruption news into *out: 0, or -ENOENT when the cell is not running. */
int cells_interruption(struct cellmgr *m, const char *cell_id, struct cell_interruption *out);

/*
 * The launch of a sandbox that took a standby cell of the pool (pool.h) instead of launching
 * one, between cells_launch_begin and cells_launch_end, once the cell is its record's: ECANCELED
 * when a stop cancelled the launch meanwhile (cells_launch_cancel: that stop terminates the
 * cell), else the launch is done as cells_launch's is (a later stop stops the cell as a
 * running one).
 */
int cells_launch_claimed(struct cellmgr *m, const char *cell_id, struct err *err);
/* Asks a running cell's agent for Hello on its connection (within CELLS_HELLO_TIMEOUT_MS): 0
 * when it answered; -ENOENT when the cell is not running here. */
#define CELLS_HELLO_TIMEOUT_MS 2000
int cells_hello(struct cellmgr *m, const char *cell_id, struct err *err);

/* The release a running cell's agent says it is (version.h), asked with Hello when not known
 * yet (a cell adopted at start, an agent restarted since): a heap string, or NULL with err. */
char *cells_agent_version(struct cellmgr *m, const char *cell_id, struct err *err);
/* The same when known already, never asking: NULL when not (or the cell is not running). */
char *cells_agent_version_known(struct cellmgr *m, const char *cell_id);
/* What an agent may be too old for (agent_features in cells.c: the release each came in). */
enum agent_feature {
	AGENT_UNIFIED, /* Unit.unified */
};
/* 0 when the agent of cell_id can do f; -EPROTONOSUPPORT naming the agent's release, the
 * release f needs and what to do when it is older; another error when the agent cannot be
 * asked. */
int cells_agent_can(struct cellmgr *m, const char *cell_id, enum agent_feature f, struct err *err);

/* Re-attaches to a cell that survived a kiyot restart (watch stream resumes from the log
 * offsets kiyot remembers). */
void cells_resume(struct cellmgr *m, const char *cell_id, const char *ip);
/* Stops watching and terminates the cell. Idempotent. */
int cells_terminate(struct cellmgr *m, const char *cell_id, struct err *err);

/* A TCP connection to 127.0.0.1:port in the cell's pod network (the node's for a host-network
 * pod) made by kiyot itself, when the provider's cells share the node (local): the socket;
 * -ENOTSUP when connections go through the agent instead (cells_stream_open "PortForward");
 * another -errno when the connection failed. */
int cells_dial(struct cellmgr *m, const char *cell_id, uint16_t port, int host_network,
	       struct err *err);

/* Serialises applies to one cell: returns a handle (NULL when the cell is not running) that
 * holds the cell until cells_apply_unlock. */
struct cell_entry;
struct cell_entry *cells_apply_lock(struct cellmgr *m, const char *cell_id);
void cells_apply_unlock(struct cellmgr *m, struct cell_entry *e);

/* Agent calls. *resp is freed with protobuf_c_message_free_unpacked(resp, NULL). */
int cells_apply(struct cellmgr *m, const char *cell_id, const Kiyot__Cell__V1__Pod *pod,
		int64_t timeout_ms, Kiyot__Cell__V1__ApplyResponse **resp, struct err *err);
int cells_pull_image(struct cellmgr *m, const char *cell_id,
		     const Kiyot__Cell__V1__PullImageRequest *req,
		     Kiyot__Cell__V1__PullImageResponse **resp, struct err *err);
/* At most CELL_EXECS_MAX (cells_internal.h) run in one cell at once, the others waiting for
 * their turn in the order they came: a CRI call parked (RPC_PARKED is returned: its handler
 * returns it as well, and is run again once the turn came, when this finds its turn given),
 * another caller blocked. */
int cells_exec_sync(struct cellmgr *m, const char *cell_id,
		    const Kiyot__Cell__V1__ExecSyncRequest *req,
		    Kiyot__Cell__V1__ExecSyncResponse **resp, struct err *err);
/* A handler run again after cells_exec_sync parked its call, that will not call it again
 * (its container went away meanwhile), gives its turn up with this. */
void cells_exec_forgo(struct cellmgr *m);
/* The cell's usage: the latest its Watch pushed while fresh (no call), else a reading of its
 * agent's, one for all the callers that ask meanwhile. */

int cells_stats(struct cellmgr *m, const char *cell_id, Kiyot__Cell__V1__StatsResponse **resp,
		struct err *err);
int cells_write_volume(struct cellmgr *m, const char *cell_id,
		       const Kiyot__Cell__V1__WriteVolumeRequest *req, struct err *err);

/*
 * A bidirectional stream to a cell's agent (method "Exec", "Attach" or "PortForward" of
 * CellAgent), started with first, driven by its caller without a thread of its own: the
 * caller asks for each message (cells_stream_read), sends one at a time (cells_stream_send,
 * then on_sent) and learns the end from cbs->on_end, as agent_client.h's open_stream says.
 * The cell's connection is held until cells_stream_free, which comes after on_end. No
 * deadline: the stream lives as long as its user.
 */
struct cell_stream;
int cells_stream_open(struct cellmgr *m, const char *cell_id, const char *method,
		      const ProtobufCMessage *first, const ProtobufCMessageDescriptor *out_desc,
		      const struct agent_stream_cbs *cbs, void *arg, struct cell_stream **out,
		      struct err *err);
void cells_stream_read(struct cell_stream *s);
int cells_stream_send(struct cell_stream *s, const ProtobufCMessage *msg, struct err *err);
void cells_stream_close_send(struct cell_stream *s);
/* Ends the stream from any thread: on_end follows. */
void cells_stream_cancel(struct cell_stream *s);
void cells_stream_free(struct cell_stream *s);

/* Builds the bootstrap document (JSON text, caller frees) a cell boots with: secret is the
 * cell's one-time enrollment secret. */
char *cells_bootstrap(struct kiyot *k, const struct cell_spec *spec, const char *secret);

#endif
