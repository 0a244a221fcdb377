/*
 * stats.h: resource usage of a cell and its units (cgroup v1 cpuacct and memory, and the
 * units' writable layers).
 */
#ifndef AGENT_STATS_H
#define AGENT_STATS_H

#include <stdbool.h>
#include <stdint.h>

struct resource_usage {
	int64_t timestamp_ns;
	uint64_t cpu_usage_ns;
	uint64_t memory_working_set_bytes; /* usage minus inactive file pages */
	uint64_t memory_usage_bytes;
	uint64_t memory_rss_bytes;
	uint64_t memory_page_faults;
	uint64_t memory_major_page_faults;
	uint64_t writable_layer_bytes;
	uint64_t writable_layer_inodes;
	uint64_t cpu_usage_nano_cores; /* since the reading before, when cpu_rate_known */
	bool cpu_rate_known;
	uint64_t memory_available_bytes; /* limit less working set; 0 without a limit */
};

struct net_usage {
	int64_t timestamp_ns;
	char interface[16]; /* IFNAMSIZ */
	uint64_t rx_bytes, rx_errors, tx_bytes, tx_errors;
};

/* The counters of the interface holding the default route (else the first but lo) of this
 * network namespace, from route and dev, e.g. /proc/net/route and /proc/net/dev; -1 when
 * there is none. */
int stats_read_network(const char *route, const char *dev, struct net_usage *n);

/* Usage of the cgroup at path cg (v1, e.g. "/kiyot/<cell>"); unreadable values stay 0. The
 * CPU rate is measured against the reading of the same cgroup before (by any caller). */
void stats_read_cgroup(const char *cg, struct resource_usage *u);
/* Disk blocks and inodes under dir. */
void stats_read_dir(const char *dir, uint64_t *bytes, uint64_t *inodes);
/* A unit's usage; 1 when it has a cgroup (runs), 0 when not (u zeroed). */
int stats_unit(const char *cell_cgroup, const char *state_dir, const char *unit_id,
	       struct resource_usage *u);

#endif
