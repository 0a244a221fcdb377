/*
 * agent_fixture.h: a whole cell-agent in the test process, for unit tests of its API. It is
 * the real agent's service (agent_open on a fresh temp state directory: image store,
 * supervisor, watch hub) serving kiyot.cell.v1.CellAgent through the real method table and
 * worker pools on a unix socket in that directory, plaintext; tests call it with a gRPC
 * client as kiyot does (afix_call, afix_watch_*), so every answer crosses the same handlers,
 * pools and status mapping.
 *
 * What a unit test cannot have is replaced at the agent's own seams, not inside it:
 *   - the OCI runtime is the fake runtime (fake_runtime.h), named by path in the bootstrap's
 *     "runtime" as a deployment could name crun: units and execs run on the host, as
 *     processes of their own group, and the runtime records what it was asked;
 *   - the image AFIX_IMAGE is in the cell's image store before the agent opens it (a record
 *     and an empty root file system), so pulls of it and units of it need no registry;
 *   - the shim is the test binary itself (the agent's own binary is its shim too), and the
 *     cell has no cgroup of its own (a->cgroup NULL) and no host mount namespace.
 * Units therefore run real shims, real overlay mounts and real log files: the tests need root.
 *
 * A test binary that uses it starts its main with
 *	int ret = afix_main(argc, argv);  if (ret >= 0) return ret;
 * so that its starts as the shim, the fake runtime and the pod's namespace holder run those.
 */
#ifndef KIYOT_TEST_AGENT_FIXTURE_H
#define KIYOT_TEST_AGENT_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "agent.h"
#include "cellagent.pb-c.h"
#include "err.h"

struct rpc_server;
struct rpc_channel;
struct rpc_stream;
struct rpc_loop;
struct afix_bidi;

/* The image every cell of the fixture holds, its id and repository digest. */
#define AFIX_IMAGE "registry.test/tools:1"
#define AFIX_IMAGE_ID "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define AFIX_IMAGE_DIGEST                                                                          \
	"registry.test/"                                                                           \
	"tools@sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define AFIX_CELL_ID "cell-test"
#define AFIX_POD_UID "pod-uid-1"
/* The enrollment secret of the bootstrap document. */
#define AFIX_SECRET "0123456789abcdef"

struct afix {
	char dir[64];
	char *state;	    /* the agent's state directory */
	char *runtime;	    /* the fake runtime (a symlink to the test binary) */
	char *runtime_root; /* its --root: calls.log, fail-* (fake_runtime.h) */
	char *sock;
	char *ca, *ca_key; /* the CA of the bootstrap document (kiyot's) */
	struct agent a;
	bool open;
	struct rpc_server *srv;
	struct rpc_channel *ch;
	/* Members added to the bootstrap document by the next afix_open (",\"k\":v..."), or
	 * NULL. */
	const char *bootstrap_extra;
	/* Counts the agent's on_enrolled calls. */
	int enrolled;
	struct rpc_loop *loop; /* the streaming calls' loop, made by the first afix_bidi_open */
};

/* The start of the test binary's main: runs the shim, the fake runtime or the pod's namespace
 * holder when argv asks for one of them (returning its exit status), else -1. */
int afix_main(int argc, char **argv);

/* A new state directory (the image seeded, the runtime linked), not opened. */
struct afix *afix_new(void);
/* agent_open with the fixture's bootstrap document, then the server and a client of it. */
int afix_open(struct afix *f, struct err *err);
/* Removes every unit (an Apply of an empty pod), stops serving and closes the agent; the state
 * directory stays. */
void afix_close(struct afix *f);
/* Closes what is open, kills what is left of units, unmounts and removes the directory. */
void afix_free(struct afix *f);
/* cmocka setup and teardown: *state is a new afix, opened. */
int afix_setup(void **state);
int afix_teardown(void **state);

/* One unary call of CellAgent by method name ("Hello", "Apply"): 0 with *resp (free with
 * protobuf_c_message_free_unpacked), or the errno of the status the agent answered, as a client
 * sees it (rpc.h's mapping), with the status message in err. */
int afix_call(struct afix *f, const char *method, const ProtobufCMessage *req, void *resp,
	      struct err *err);

/* A pod "web" (namespace "default", uid AFIX_POD_UID) with the restart policy, no units; free
 * with afix_pod_free. */
Kiyot__Cell__V1__Pod *afix_pod_new(Kiyot__Cell__V1__RestartPolicy policy);
/* Adds a unit of AFIX_IMAGE running "sh -c script", desired RUNNING, a 5 s stop grace. */
Kiyot__Cell__V1__Unit *afix_pod_unit(Kiyot__Cell__V1__Pod *p, const char *id, const char *script);
/* Removes the unit id from the pod (it stays in memory until afix_pod_free). */
void afix_pod_drop(Kiyot__Cell__V1__Pod *p, const char *id);
void afix_pod_free(Kiyot__Cell__V1__Pod *p);
/* Apply of pod (timeout 20 s): 0 with *resp, or the error. */
int afix_apply(struct afix *f, const Kiyot__Cell__V1__Pod *pod,
	       Kiyot__Cell__V1__ApplyResponse **resp, struct err *err);
/* The status of unit id in an Apply's answer, or NULL. */
const Kiyot__Cell__V1__UnitStatus *afix_status_of(const Kiyot__Cell__V1__ApplyResponse *r,
						  const char *id);

/* A Watch (rpc_stream over the fixture's channel, a 30 s deadline). */
int afix_watch_open(struct afix *f, const Kiyot__Cell__V1__WatchRequest *req,
		    struct rpc_stream **out, struct err *err);
/* The next event (free with afix_event_free), or NULL at the end (err says why). */
Kiyot__Cell__V1__WatchEvent *afix_watch_next(struct rpc_stream *w, struct err *err);
void afix_event_free(Kiyot__Cell__V1__WatchEvent *ev);
/* Reads a new Watch until a STATUS event of unit id in state (with exit_code, when state is
 * EXITED and want_code >= 0); that event, or NULL when none came within 20 s. */
Kiyot__Cell__V1__WatchEvent *afix_wait_state(struct afix *f, const char *id,
					     Kiyot__Cell__V1__UnitState state, int want_code);
/* The unit's log as a Watch from offset 0 brings it, up to SYNCED (caller frees). */
char *afix_log(struct afix *f, const char *id);

/* A bidirectional call (Exec, Attach, PortForward) as kiyot makes one (rpc_loop.h), driven
 * one message at a time: opened with its first message (sent), then afix_bidi_send,
 * afix_bidi_next, afix_bidi_close_send; afix_bidi_end waits for its status. */
int afix_bidi_open(struct afix *f, const char *method, const ProtobufCMessage *first,
		   struct afix_bidi **out, struct err *err);
/* Sends msg once the message before it left; 0 or the error (-ECANCELED after the end). */
int afix_bidi_send(struct afix_bidi *b, const ProtobufCMessage *msg, struct err *err);
void afix_bidi_close_send(struct afix_bidi *b);
/* The agent's next message (free with protobuf_c_message_free_unpacked), or NULL at the end
 * of the call or after 20 s without one. */
ProtobufCMessage *afix_bidi_next(struct afix_bidi *b);
/* Ends the call from the caller's side (rpc_bidi_cancel): the caller goes away. */
void afix_bidi_cancel(struct afix_bidi *b);
/* Waits up to 20 s for the call's end and frees it: the status as an errno (0 for OK, with
 * err filled otherwise; -ETIMEDOUT when it did not end, then it is cancelled first). */
int afix_bidi_end(struct afix_bidi *b, struct err *err);

/* The runtime's calls so far (fake_runtime_calls; caller frees). */
char *afix_runtime_calls(struct afix *f);

#endif
