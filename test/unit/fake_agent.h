/*
 * fake_agent.h: cell agents in memory for kiyot's unit tests, behind agent_client.h's
 * operations. Install it as struct kiyot's agent (fake_agent_client) before kiyot_open; the
 * cell manager then launches, enrolls, applies, watches and execs against it as it does
 * against real agents over gRPC.
 *
 * Each cell's agent listens at a target ("ip:port"), boots from the bootstrap document the
 * provider was given (fake_agent_boot, as test/unit/fake_provider.c does) and enrolls for
 * real (pki.h: its own key, the proof with the document's one-time secret, the certificate
 * kiyot's CA signs); until then it answers only Enroll, and once enrolled only calls on a
 * connection made for its cell id, as the real agent's TLS does. Apply keeps the desired
 * pod's units with the state they reach at once (created, running, exited on stop); ExecSync
 * runs a tiny shell (echo, exit N, anything else 127); Stats answers fixed figures; Watch
 * sends what the real agent sends: every unit's status, each log past the offsets asked for,
 * SYNCED, then changes as they happen. Exec, Attach and PortForward streams echo their
 * input.
 *
 * Tests change what agents do (fake_agent_fail, _delay, _set_serving, _refuse_image) and what
 * happens in cells (fake_agent_unit_exit, _log), and look at what kiyot asked
 * (fake_agent_unit_state, _calls, _last_timeout, _watch_offset...).
 *
 * Thread safety: everything may be called from any thread (one lock).
 */
#ifndef KIYOT_TEST_FAKE_AGENT_H
#define KIYOT_TEST_FAKE_AGENT_H

#include <stdint.h>

#include "cells/agent_client.h"

struct fake_agent;

/* Operations that can be told to fail or to be slow, and whose calls are counted. */
enum fake_agent_op {
	FAKE_AGENT_CONNECT,
	FAKE_AGENT_ENROLL,
	FAKE_AGENT_HELLO,
	FAKE_AGENT_APPLY,
	FAKE_AGENT_PULL,
	FAKE_AGENT_EXEC,
	FAKE_AGENT_STATS,
	FAKE_AGENT_WRITE_VOLUME,
	FAKE_AGENT_WATCH,
	FAKE_AGENT_STREAM,
	FAKE_AGENT_N_OPS
};

struct fake_agent *fake_agent_new(void);
/* Frees every cell and stream; no kiyot may use it any more. */
void fake_agent_free(struct fake_agent *fa);
/* What to set struct kiyot's agent to; valid until fake_agent_free. */
const struct agent_client *fake_agent_client(struct fake_agent *fa);

/* A new cell's agent at target, booted from a bootstrap document (cells_bootstrap's JSON):
 * serving, not enrolled. -EINVAL when the document lacks the cell id, CA or secret. */
int fake_agent_boot(struct fake_agent *fa, const char *target, const char *bootstrap,
		    struct err *err);
/* A cell's agent that is up and enrolled already, as one that ran before kiyot started. */
void fake_agent_add_cell(struct fake_agent *fa, const char *cell_id, const char *target);
/* The cell's agent is gone (its cell terminated); its open streams end. */
void fake_agent_remove_cell(struct fake_agent *fa, const char *cell_id);
/* Whether the cell's agent serves: when not, every call and connection to it is refused
 * (-ECONNREFUSED) and its open Watch streams end so. */
void fake_agent_set_serving(struct fake_agent *fa, const char *cell_id, int serving);
/* Whether the fake knows a cell and whether its agent enrolled. */
int fake_agent_has_cell(struct fake_agent *fa, const char *cell_id);
int fake_agent_enrolled(struct fake_agent *fa, const char *cell_id);
/* The bootstrap document the cell booted from (a copy the caller frees), or NULL. */
char *fake_agent_bootstrap(struct fake_agent *fa, const char *cell_id);

/* The next `times` calls of op (any cell) fail with -code (times < 0: every call until told
 * otherwise; 0 clears). */
void fake_agent_fail(struct fake_agent *fa, enum fake_agent_op op, int code, int times);
/* Calls of op take ms milliseconds before they answer (0: at once). */
void fake_agent_delay(struct fake_agent *fa, enum fake_agent_op op, int ms);
/* Units of image are not created: they stay created with reason CreateContainerError and
 * message (as when the image cannot be pulled), and PullImage of it fails -EIO with it. */
void fake_agent_refuse_image(struct fake_agent *fa, const char *image, const char *message);

/* Something happens in a cell: a unit exits with exit_code and reason (a status event), or
 * writes text to its log (a log event at the end of what it wrote before). -ENOENT when the
 * cell or unit is unknown. */
int fake_agent_unit_exit(struct fake_agent *fa, const char *cell_id, const char *unit_id,
			 int exit_code, const char *reason);
/* The same, the unit leaving a termination message (its termination_message_path's text). */
int fake_agent_unit_exit_message(struct fake_agent *fa, const char *cell_id, const char *unit_id,
				 int exit_code, const char *reason, const char *message);
/* Watch streams send every unit's whole log again, whatever offsets kiyot asks from (as an
 * agent that lost its positions would). */
void fake_agent_resend_logs(struct fake_agent *fa, int resend);
/* The release the agents say in Hello from now on (NULL: this tree's, KIYOT_VERSION). */
void fake_agent_set_version(struct fake_agent *fa, const char *version);
int fake_agent_log(struct fake_agent *fa, const char *cell_id, const char *unit_id,
		   const char *text);
/* The cell's usage (what Stats answers) on its open Watches, as a real agent sends it every
 * stats interval. -ENOENT when the cell is unknown. */
int fake_agent_push_stats(struct fake_agent *fa, const char *cell_id);
/* Any event (a copy) on the cell's open Watches, as a real agent sends news (an
 * INTERRUPTION). -ENOENT when the cell is unknown. */
int fake_agent_push_event(struct fake_agent *fa, const char *cell_id,
			  const Kiyot__Cell__V1__WatchEvent *ev);

/* What kiyot asked for. */
/* The unit's state (KIYOT__CELL__V1__UNIT_STATE__*), or -1 when the cell does not have it. */
int fake_agent_unit_state(struct fake_agent *fa, const char *cell_id, const char *unit_id);
/* The desired state the last Apply gave the unit (KIYOT__CELL__V1__UNIT_DESIRED__*), or -1. */
int fake_agent_unit_desired(struct fake_agent *fa, const char *cell_id, const char *unit_id);
/* The pid a running unit reports (0 when not running; -1 when there is no such unit). */
int fake_agent_unit_pid(struct fake_agent *fa, const char *cell_id, const char *unit_id);
/* A copy of the pod the cell's last Apply asked for (caller frees with
 * protobuf_c_message_free_unpacked), or NULL. */
Kiyot__Cell__V1__Pod *fake_agent_pod(struct fake_agent *fa, const char *cell_id);
/* How many units the cell has (-1: no such cell). */
int fake_agent_n_units(struct fake_agent *fa, const char *cell_id);
/* Calls of op made so far (all cells), failed ones included. */
unsigned fake_agent_calls(struct fake_agent *fa, enum fake_agent_op op);
/* The timeout_ms of the last call of op. */
int64_t fake_agent_last_timeout(struct fake_agent *fa, enum fake_agent_op op);
/* Watch streams of the cell open now, and opened in all. */
int fake_agent_watching(struct fake_agent *fa, const char *cell_id);
unsigned fake_agent_watches(struct fake_agent *fa, const char *cell_id);
/* The offset the last Watch of the cell asked for the unit's log from: 1 with *offset set,
 * 0 when it named no offset for it. */
int fake_agent_watch_offset(struct fake_agent *fa, const char *cell_id, const char *unit_id,
			    uint64_t *offset);
/* The entries of the volume as the cell's agent last got it (WriteVolume), -1 if never. */
int fake_agent_volume_entries(struct fake_agent *fa, const char *cell_id, const char *volume);

#endif
