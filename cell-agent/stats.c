/*
 * stats.c: resource usage of a cell and its units, read from their cgroups (v1: cpuacct and
 * memory; v2: cpu.stat, memory.*) and from the units' writable layers. Feeds CRI's stats calls (kubectl top).
 */
#include "stats.h"

#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cgroup.h"
#include "clock.h"
#include "fsutil.h"
#include "xalloc.h"

#define CGROUP_FILE_MAX 65536
/* cgroup v1 says "no memory limit" with a number near 2^63 (rounded down to a page). */
#define CGROUP_NO_LIMIT (1ULL << 62)

/* One number from a cgroup file; 0 when unreadable (or "max"). */
static uint64_t read_u64(const char *ctrl, const char *cg, const char *file)
{
	_cleanup_free_ char *path = cgroup_file(ctrl, cg, file);
	_cleanup_free_ char *text = NULL;
	struct err err = ERR_INIT;

	if (fs_read_file(path, CGROUP_FILE_MAX, &text, NULL, &err) < 0)
		return 0;
	return strtoull(text, NULL, 10);
}

/* A "key value" line of memory.stat. */
static uint64_t stat_field(const char *text, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, key, n) == 0 && p[n] == ' ')
			return strtoull(p + n + 1, NULL, 10);
	return 0;
}

/* The last readings the CPU rates are measured from: a cell runs one pod, so its cgroup and
 * its units' fit; the least recently read slot goes to a new cgroup. */
#define RATE_SLOTS 64
/* Readings closer than this give the rate of the one before rather than a noisy one. */
#define RATE_MIN_INTERVAL_NS (50 * 1000000LL)

struct rate_slot {
	char key[160];
	int64_t ts;
	uint64_t cpu;
	uint64_t nano_cores;
	bool known;
	uint64_t used; /* the reading count when last used */
};

static struct rate_slot rates[RATE_SLOTS];
static uint64_t rate_clock;
static pthread_mutex_t rates_lock = PTHREAD_MUTEX_INITIALIZER;

static void cpu_rate(const char *cg, struct resource_usage *u)
{
	struct rate_slot *s = NULL, *lru = &rates[0];

	pthread_mutex_lock(&rates_lock);
	rate_clock++;
	for (size_t i = 0; i < RATE_SLOTS && !s; i++) {
		if (rates[i].key[0] && strcmp(rates[i].key, cg) == 0)
			s = &rates[i];
		else if (rates[i].used < lru->used)
			lru = &rates[i];
	}
	if (!s || u->cpu_usage_ns < s->cpu) { /* a new cgroup, or one made again */
		s = s ? s : lru;
		*s = (struct rate_slot){ .ts = u->timestamp_ns, .cpu = u->cpu_usage_ns };
		snprintf(s->key, sizeof(s->key), "%s", cg);
	} else if (u->timestamp_ns - s->ts >= RATE_MIN_INTERVAL_NS) {
		s->nano_cores = (uint64_t)((double)(u->cpu_usage_ns - s->cpu) * 1e9 /
					   (double)(u->timestamp_ns - s->ts));
		s->known = true;
		s->ts = u->timestamp_ns;
		s->cpu = u->cpu_usage_ns;
	}
	s->used = rate_clock;
	u->cpu_usage_nano_cores = s->nano_cores;
	u->cpu_rate_known = s->known;
	pthread_mutex_unlock(&rates_lock);
}

void stats_read_cgroup(const char *cg, struct resource_usage *u)
{
	bool v2 = cgroup_v2();
	_cleanup_free_ char *path = cgroup_file("memory", cg, "memory.stat");
	_cleanup_free_ char *text = NULL, *cpu = NULL;
	struct err err = ERR_INIT;
	uint64_t inactive = 0, limit;

	u->timestamp_ns = clock_now_ns();
	if (v2) {
		_cleanup_free_ char *cpath = cgroup_file("cpu", cg, "cpu.stat");

		if (fs_read_file(cpath, CGROUP_FILE_MAX, &cpu, NULL, &err) == 0)
			u->cpu_usage_ns = stat_field(cpu, "usage_usec") * 1000;
		err_clear(&err);
		u->memory_usage_bytes = read_u64("memory", cg, "memory.current");
	} else {
		u->cpu_usage_ns = read_u64("cpuacct", cg, "cpuacct.usage");
		u->memory_usage_bytes = read_u64("memory", cg, "memory.usage_in_bytes");
	}
	/* v1 counts the subtree under total_*; v2's memory.stat is the subtree's already */
	if (fs_read_file(path, CGROUP_FILE_MAX, &text, NULL, &err) == 0) {
		inactive = stat_field(text, v2 ? "inactive_file" : "total_inactive_file");
		u->memory_rss_bytes = stat_field(text, v2 ? "anon" : "total_rss");
		u->memory_page_faults = stat_field(text, v2 ? "pgfault" : "total_pgfault");
		u->memory_major_page_faults =
			stat_field(text, v2 ? "pgmajfault" : "total_pgmajfault");
	}
	u->memory_working_set_bytes =
		u->memory_usage_bytes > inactive ? u->memory_usage_bytes - inactive : 0;
	limit = read_u64("memory", cg, v2 ? "memory.max" : "memory.limit_in_bytes");
	if (limit && limit < CGROUP_NO_LIMIT)
		u->memory_available_bytes = limit > u->memory_working_set_bytes
						    ? limit - u->memory_working_set_bytes
						    : 0;
	cpu_rate(cg, u);
}

/* nftw has no context argument; the walk is short and the agent serialises stats calls. */
static __thread uint64_t walk_bytes, walk_inodes;

static int add_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)flag;
	(void)ftw;
	walk_bytes += (uint64_t)st->st_blocks * 512;
	walk_inodes++;
	return 0;
}

void stats_read_dir(const char *dir, uint64_t *bytes, uint64_t *inodes)
{
	walk_bytes = walk_inodes = 0;
	if (fs_exists(dir))
		nftw(dir, add_entry, 16, FTW_PHYS | FTW_MOUNT);
	*bytes = walk_bytes;
	*inodes = walk_inodes;
}

int stats_unit(const char *cell_cgroup, const char *state_dir, const char *unit_id,
	       struct resource_usage *u)
{
	_cleanup_free_ char *cg = xasprintf("%s/%s", cell_cgroup, unit_id);
	_cleanup_free_ char *upper = xasprintf("%s/units/%s/upper", state_dir, unit_id);

	memset(u, 0, sizeof(*u));
	if (!cgroup_exists(cg))
		return 0;
	stats_read_cgroup(cg, u);
	stats_read_dir(upper, &u->writable_layer_bytes, &u->writable_layer_inodes);
	return 1;
}

/* The interface of the default route in a /proc/net/route text, into name; false if none. */
static bool default_interface(const char *text, char *name, size_t size)
{
	for (const char *line = text; line && *line; line = strchr(line, '\n')) {
		char iface[32], dest[16], gw[16], mask[16];
		unsigned flags;

		if (*line == '\n')
			line++;
		if (sscanf(line, "%31s %15s %15s %x %*s %*s %*s %15s", iface, dest, gw, &flags,
			   mask) == 5 &&
		    strcmp(dest, "00000000") == 0 && strcmp(mask, "00000000") == 0 &&
		    (flags & 1) /* RTF_UP */ && strlen(iface) < size) {
			memcpy(name, iface, strlen(iface) + 1);
			return true;
		}
	}
	return false;
}

int stats_read_network(const char *route, const char *dev, struct net_usage *n)
{
	_cleanup_free_ char *rt = NULL, *text = NULL;
	struct err err = ERR_INIT;
	char want[sizeof(n->interface)] = "";

	memset(n, 0, sizeof(*n));
	if (fs_read_file(route, CGROUP_FILE_MAX, &rt, NULL, &err) == 0)
		default_interface(rt, want, sizeof(want));
	err_clear(&err);
	if (fs_read_file(dev, CGROUP_FILE_MAX, &text, NULL, &err) < 0)
		return -1;
	n->timestamp_ns = clock_now_ns();
	/* "  eth0: rx bytes packets errs drop fifo frame compressed multicast, tx bytes
	 * packets errs ..." after two header lines */
	for (char *line = text, *next; line && *line; line = next) {
		char *colon, *name;
		unsigned long long v[16];

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		name = line + strspn(line, " ");
		if (strcmp(name, "lo") == 0 || strlen(name) >= sizeof(n->interface) ||
		    (want[0] && strcmp(name, want) != 0))
			continue;
		if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9],
			   &v[10]) != 11)
			continue;
		snprintf(n->interface, sizeof(n->interface), "%s", name);
		n->rx_bytes = v[0];
		n->rx_errors = v[2];
		n->tx_bytes = v[8];
		n->tx_errors = v[10];
		return 0;
	}
	return -1;
}
