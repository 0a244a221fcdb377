/*
 * kiyot_fixture.h: a whole kiyot in the test process for unit tests of the CRI handlers, the
 * cell manager and the garbage collector. It is the real daemon's context (kiyot_open on a
 * fresh temp state directory, SQLite store included) with the fake provider and the fake
 * agent (fake_provider.h, fake_agent.h) in place of the cloud and the cells, serving CRI v1
 * on a unix socket in that directory through the real method table; tests call it with a
 * gRPC client as the kubelet does (kfix_call), so every answer crosses the same router,
 * worker pools and status mapping.
 *
 * A test may close kiyot and open another on the same directory with the same fakes
 * (kfix_restart): what a restarted kiyot finds.
 */
#ifndef KIYOT_TEST_KIYOT_FIXTURE_H
#define KIYOT_TEST_KIYOT_FIXTURE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cri_api.pb-c.h"
#include "fake_agent.h"
#include "fake_provider.h"
#include "daemon/kiyot.h"

struct rpc_server;
struct rpc_channel;

struct kfix {
	char dir[64];
	char *sock;
	struct kiyot k;
	bool open;
	struct fake_agent *fa;
	struct fake_provider *fp;
	struct rpc_server *srv;
	struct rpc_channel *ch;
	/* Settings the next kfix_open gives kiyot (kfix_new: 3600 and 120, no periodic pass). */
	int gc_interval_s;
	int gc_grace_s;
	/* Settings (config file text, YAML) the next kfix_open gives kiyot before those, or
	 * NULL. */
	const char *config;
	/* The agent client the next kfix_open gives kiyot (NULL: the fake agent's own), e.g. one
	 * that wraps some of the fake's operations. */
	const struct agent_client *agent;
};

/* A new state directory and fakes (a cell boots within boot_timeout_s), not opened. */
struct kfix *kfix_new(int boot_timeout_s);
/* kiyot_open with the fakes, then the CRI server and a client of it. */
int kfix_open(struct kfix *f, struct err *err);
/* Stops serving and closes kiyot; the state directory and the fakes stay. */
void kfix_close(struct kfix *f);
/* kfix_close then kfix_open: a restart on the same state. */
int kfix_restart(struct kfix *f, struct err *err);
/* Closes what is open, frees the fakes, removes the directory. */
void kfix_free(struct kfix *f);
/* cmocka setup and teardown: *state is a new kfix opened with a 15 s boot timeout (the fake
 * agents answer at once; a busy machine or a sanitizer build may take seconds). */
int kfix_setup(void **state);
/* The same with a 1 s boot timeout, for tests of cells that never come up. */
int kfix_setup_boot_1s(void **state);
int kfix_teardown(void **state);

/* One CRI call by method name ("RunPodSandbox", "ListImages"...) of RuntimeService or
 * ImageService: 0 with *resp (free with protobuf_c_message_free_unpacked), or the errno of
 * the status kiyot answered, as a client sees it (rpc.h's mapping). */
int kfix_call(struct kfix *f, const char *method, const ProtobufCMessage *req,
	      const ProtobufCMessageDescriptor *resp_desc, void *resp, struct err *err);
/* The same, for a call whose answer is of no interest. */
int kfix_call0(struct kfix *f, const char *method, const ProtobufCMessage *req, struct err *err);

/* A pod's sandbox config: namespace "default", label app=name, annotation
 * "note"="n", logs under the state directory (heap; free with
 * protobuf_c_message_free_unpacked). */
Runtime__V1__PodSandboxConfig *kfix_pod_config(struct kfix *f, const char *name, const char *uid,
					       uint32_t attempt);
/* RunPodSandbox of such a pod: its id (caller frees), or the error. */
int kfix_run_pod(struct kfix *f, const char *name, const char *uid, uint32_t attempt, char **id,
		 struct err *err);
/* A RunPodSandbox in a thread of its own, for a launch the provider holds: started with
 * kfix_run_pod_start, answered (ret, id, err) once kfix_run_pod_wait returns. */
struct kfix_runner {
	struct kfix *f;
	const char *name, *uid;
	pthread_t thread;
	int ret;
	char *id; /* freed by kfix_run_pod_wait's caller */
	struct err err;
};
void kfix_run_pod_start(struct kfix *f, struct kfix_runner *r, const char *name, const char *uid);
int kfix_run_pod_wait(struct kfix_runner *r);
/* CreateContainer of a container named name running image in the sandbox (with log path
 * "<name>.log"): its id (caller frees). */
int kfix_create(struct kfix *f, const char *sandbox_id, const char *name, const char *image,
		char **id, struct err *err);
/* CreateContainer of cfg in the sandbox: its id (caller frees). */
int kfix_create_config(struct kfix *f, const char *sandbox_id,
		       const Runtime__V1__ContainerConfig *cfg, char **id, struct err *err);
/* RunPodSandbox, CreateContainer and StartContainer: a pod with one running container. */
void kfix_pod_with_container(struct kfix *f, const char *name, char **sandbox_id,
			     char **container_id);
/* StartContainer, StopContainer (timeout 0), RemoveContainer, StopPodSandbox,
 * RemovePodSandbox. */
int kfix_start(struct kfix *f, const char *container_id, struct err *err);
int kfix_stop(struct kfix *f, const char *container_id, struct err *err);
int kfix_remove(struct kfix *f, const char *container_id, struct err *err);
int kfix_stop_pod(struct kfix *f, const char *sandbox_id, struct err *err);
int kfix_remove_pod(struct kfix *f, const char *sandbox_id, struct err *err);

/* PodSandboxStatus / ContainerStatus: the state, or -1 (with err) when the call failed. */
int kfix_pod_state(struct kfix *f, const char *sandbox_id, struct err *err);
int kfix_container_state(struct kfix *f, const char *container_id, struct err *err);
/* The cell a sandbox runs in, from kiyot's records ("" when none; caller frees), or NULL. */
char *kfix_cell_of(struct kfix *f, const char *sandbox_id);

/* Whether the file at path holds exactly want. */
bool kfix_file_is(const char *path, const char *want);

/* Waits up to ms for cond to hold, checking every 10 ms; whether it did. */
#define KFIX_WAIT(cond, ms)                                                                        \
	({                                                                                         \
		int _left = (ms) / 10;                                                             \
		bool _ok;                                                                          \
		while (!(_ok = (cond)) && _left-- > 0)                                             \
			usleep(10000);                                                             \
		_ok;                                                                               \
	})

#endif
