/*
 * fake_provider.h: a cell provider in memory for kiyot's unit tests, behind provider.h's
 * operations. Install it as struct kiyot's provider (fake_provider_install) before kiyot_open.
 *
 * Its cells are records with an address (10.99.0.N); launching one boots its agent in the
 * fake agent from the bootstrap document kiyot wrote (fake_agent_boot), terminating one takes
 * the agent away, and healing one makes its agent serve again. Like EC2, its cells do not see
 * the node's files (remote_files), so kiyot ships volumes and touches no network rule of the
 * node. Cells outlive kiyot: a test closes one kiyot and opens another on the same state
 * directory with the same provider, as a restarted kiyot finds its cells.
 *
 * Tests hold launches (fake_provider_hold) to catch a RunPodSandbox in the middle, make
 * operations fail, add cells kiyot never made, make cells vanish, and count calls.
 *
 * Thread safety: everything may be called from any thread (one lock).
 */
#ifndef KIYOT_TEST_FAKE_PROVIDER_H
#define KIYOT_TEST_FAKE_PROVIDER_H

#include "fake_agent.h"
#include "providers/provider.h"

struct fake_provider;

enum fake_provider_op {
	FAKE_PROVIDER_LAUNCH,
	FAKE_PROVIDER_TERMINATE,
	FAKE_PROVIDER_LIST,
	FAKE_PROVIDER_HEAL,
	FAKE_PROVIDER_STATE,
	FAKE_PROVIDER_N_OPS
};

/* Cells' agents go to fa and listen at agent_port (kiyot's cfg.agent_port); a launch waits at
 * most boot_timeout_s for an agent (provider_ops.boot_timeout_s). */
struct fake_provider *fake_provider_new(struct fake_agent *fa, int agent_port, int boot_timeout_s);
void fake_provider_free(struct fake_provider *fp);
/* Makes *out this provider; its destroy frees nothing (the test does, after kiyot_close). */
void fake_provider_install(struct fake_provider *fp, struct provider *out);

/* While hold is set, launches wait after they made their cell, until it is cleared. */
void fake_provider_hold(struct fake_provider *fp, int hold);
/* The same for terminations, before their cell goes. */
void fake_provider_hold_terminate(struct fake_provider *fp, int hold);
/* Waits up to timeout_ms until n launches or terminations wait in a hold; 0 when they do,
 * -ETIMEDOUT. */
int fake_provider_wait_held(struct fake_provider *fp, int n, int timeout_ms);
/* The next `times` calls of op fail with -code (times < 0: all until cleared with 0). */
void fake_provider_fail(struct fake_provider *fp, enum fake_provider_op op, int code, int times);
/* New cells' agents never come up (they are not booted): launches wait out the timeout. */
void fake_provider_dead_agents(struct fake_provider *fp, int dead);
/* New cells come up FAILED (their agent must be healed before it serves). */
void fake_provider_launch_failed(struct fake_provider *fp, int failed);
/* Launches from now on make type instead of the spec's and note what was tried (a capacity
 * fallback); NULL, NULL: as asked. */
void fake_provider_launch_as(struct fake_provider *fp, const char *type, const char *note);

/* A cell kiyot did not launch, in phase, its agent up and enrolled in the fake agent. */
void fake_provider_add_cell(struct fake_provider *fp, const char *cell_id, enum cell_phase phase);
/* The phase the provider reports the cell in from now on. */
void fake_provider_set_phase(struct fake_provider *fp, const char *cell_id, enum cell_phase phase);
/* The cell's instance left pending and running for reason (as a spot instance reclaimed during
 * its boot): the provider's state says so from now on. */
void fake_provider_end_cell(struct fake_provider *fp, const char *cell_id, enum cell_phase phase,
			    const char *reason);
/* The cell is gone without kiyot's asking (its instance died): its agent with it. */
void fake_provider_vanish(struct fake_provider *fp, const char *cell_id);
/* Whether the provider has the cell, how many it has, and the instance type it was launched
 * as (a copy the caller frees, NULL if none). */
int fake_provider_has(struct fake_provider *fp, const char *cell_id);
int fake_provider_n_cells(struct fake_provider *fp);
char *fake_provider_instance_type(struct fake_provider *fp, const char *cell_id);
/* Calls of op so far, failed ones included; how many times kiyot asked to terminate cell_id. */
/* The images the cell's launch asked to pre-pull, ' '-joined ("" none; caller frees), or NULL
 * when there is no such cell. */
char *fake_provider_prepull(struct fake_provider *fp, const char *cell_id);
unsigned fake_provider_calls(struct fake_provider *fp, enum fake_provider_op op);
unsigned fake_provider_terminated(struct fake_provider *fp, const char *cell_id);

#endif
