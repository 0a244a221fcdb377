/*
 * usage_history.c: the burst rule's history of usage per owner (usage_history.h), over the
 * store's burst_pods table.
 */
#include "usage_history.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "state/store.h"
#include "xalloc.h"

char *usage_history_owner(const struct podspec *pod)
{
	if (!pod || !pod->owner_kind || !pod->owner_name)
		return NULL;
	return xasprintf("%s/%s/%s", pod->namespace ? pod->namespace : "default", pod->owner_kind,
			 pod->owner_name);
}

void usage_history_owner_name(const char *owner, char *buf, size_t size)
{
	const char *kind = strchr(owner, '/');
	const char *name = kind ? strchr(kind + 1, '/') : NULL;

	if (!name) {
		snprintf(buf, size, "%s", owner);
		return;
	}
	snprintf(buf, size, "%.*s %s", (int)(name - kind - 1), kind + 1, name + 1);
}

int usage_history_attach(struct store *st, const char *cell_id, const char *owner, struct err *err)
{
	if (store_burst_attach(st, cell_id, owner, clock_now_ns(), USAGE_HISTORY_PODS,
			       USAGE_HISTORY_OWNERS, err) < 0)
		return err_wrap(err, "cell %s", cell_id);
	return 0;
}

void usage_history_observe(struct store *st, const char *cell_id,
			   const Kiyot__Cell__V1__StatsResponse *stats)
{
	const Kiyot__Cell__V1__ResourceUsage *u = stats ? stats->cell : NULL;
	struct err err = ERR_INIT;
	int64_t cpu, mem;

	if (!st || !u)
		return;
	/* nano-cores to millicores, rounded up: a pod seen at 1 nano-core used some CPU; -1: no
	 * rate in this report */
	cpu = u->cpu_rate_known ? (int64_t)(u->cpu_usage_nano_cores / 1000000 +
					    (u->cpu_usage_nano_cores % 1000000 != 0))
				: -1;
	mem = u->memory_working_set_bytes > INT64_MAX ? INT64_MAX
						      : (int64_t)u->memory_working_set_bytes;
	if (store_burst_observe(st, cell_id, cpu, mem, &err) < 0)
		log_warn("cell %s: usage not kept for burst sizing: %s", cell_id, err.msg);
}

int usage_history_get(struct store *st, const char *owner, struct burst_history *out,
		      struct err *err)
{
	struct burst_history h = { 0 };

	if (store_burst_history(st, owner, &h.pods, &h.peak_cpu_milli, &h.peak_memory_bytes, err) <
	    0)
		return err_wrap(err, "burst sizing history of %s", owner);
	*out = h;
	return 0;
}
