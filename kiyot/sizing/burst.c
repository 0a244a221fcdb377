/*
 * burst.c: the burst rule (burst.h): a demand from observed peaks, between requests and limits.
 */
#include "burst.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

/* Containers whose limits are their requests (a request missing: the limit, as the API server
 * defaults it), so that summing their "needs" sums requests. A shallow copy: free the array
 * only. */
static struct podspec_container *requests_only(const struct podspec_container *c, size_t n)
{
	struct podspec_container *v = n ? xcalloc(n, sizeof(*v)) : NULL;

	for (size_t i = 0; i < n; i++) {
		struct podspec_resources *q = &v[i].requests, *l = &v[i].limits;

		v[i] = c[i];
		if (!q->has_cpu && l->has_cpu)
			q->has_cpu = true, q->cpu_milli = l->cpu_milli;
		if (!q->has_memory && l->has_memory)
			q->has_memory = true, q->memory_bytes = l->memory_bytes;
		if (!q->has_gpus && l->has_gpus)
			q->has_gpus = true, q->gpus = l->gpus;
		*l = *q;
	}
	return v;
}

void sizing_requests_from_pod(const struct podspec *p, struct pod_demand *out)
{
	struct podspec_container *init = requests_only(p->init_containers, p->n_init_containers);
	struct podspec_container *app = requests_only(p->containers, p->n_containers);
	struct podspec copy = *p;

	copy.init_containers = init;
	copy.containers = app;
	sizing_demand_from_pod(&copy, out);
	free(init);
	free(app);
}

/* peak plus pct percent, rounded up, saturating; then clamped to [lo, hi] (lo wins when
 * lo > hi, which a pod's requests and limits cannot make: never below the requests). */
static int64_t burst_one(int64_t peak, int pct, int64_t lo, int64_t hi)
{
	int64_t v = peak < 0 ? 0 : peak;

	if (v > (INT64_MAX - 99) / (100 + pct))
		v = INT64_MAX;
	else
		v = (v * (100 + pct) + 99) / 100;
	if (v > hi)
		v = hi;
	if (v < lo)
		v = lo;
	return v;
}

bool sizing_burst(const struct pod_demand *today, const struct pod_demand *requests,
		  const struct burst_history *h, int headroom_percent, struct pod_demand *out)
{
	struct pod_demand d = *today;

	if (headroom_percent < 0)
		headroom_percent = 0;
	if (headroom_percent > BURST_HEADROOM_MAX_PERCENT)
		headroom_percent = BURST_HEADROOM_MAX_PERCENT;
	if (!h || h->pods <= 0) {
		*out = d;
		return false;
	}
	d.cpu_milli = burst_one(h->peak_cpu_milli, headroom_percent, requests->cpu_milli,
				today->cpu_milli);
	d.memory_bytes = burst_one(h->peak_memory_bytes, headroom_percent, requests->memory_bytes,
				   today->memory_bytes);
	*out = d;
	return true;
}
