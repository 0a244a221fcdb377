/*
 * cellrecord.h: a local cell's record, <state_dir>/<cell_id>/cell.json. It is written before
 * anything of the cell exists and removed last, so a restarted kiyot rebuilds from these files
 * which addresses are taken and which cells it owns, and finds cells a crash left half made.
 *
 *	{ "cell_id": "c1", "instance_id": "local-c1", "ip": "10.77.0.2",
 *	  "instance_type": "t3.nano", "pod_uid": "...", "cluster_id": "...",
 *	  "launched_ns": 1795..., "agent_pid": 4242, "agent_start": 123456 }
 */
#ifndef KIYOT_CELLRECORD_H
#define KIYOT_CELLRECORD_H

#include <stdint.h>

#include "err.h"
#include "providers/provider.h"

/* Owned strings; release with cell_record_release. */
struct cell_record {
	char *cell_id;
	char *instance_id;
	char *ip;
	char *instance_type;
	char *pod_uid;
	char *cluster_id;
	int64_t launched_ns;
	long agent_pid;			/* 0 until the agent started */
	unsigned long long agent_start; /* the pid's start time, so a reused pid is not taken */
};

void cell_record_release(struct cell_record *r);

/* Reads <dir>/cell.json (at most 64 KiB) and checks it belongs to cell id and holds an IPv4
 * address. -ENOENT when there is none; -EINVAL (naming the file) when it is damaged. */
int cell_record_load(const char *dir, const char *id, struct cell_record *out, struct err *err);

/* Writes <dir>/cell.json atomically, mode 0600. */
int cell_record_save(const char *dir, const struct cell_record *r, struct err *err);

/* Whether the recorded agent process still runs. */
int cell_record_agent_alive(const struct cell_record *r);

/* Fills *out with copies of the record's fields and the given phase. */
void cell_record_to_info(const struct cell_record *r, enum cell_phase phase, struct cell_info *out);

#endif
