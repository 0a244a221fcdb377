/*
 * burst.h: the burst rule, a pod sized from what its owner's earlier pods used.
 *
 * Today a pod whose limits exceed its requests gets a cell sized to its limits (sizing.h's
 * demand). With pod.elotl.co/burst-sizing: observed, a pod whose owner (its controller:
 * ReplicaSet, StatefulSet, Job...) ran pods before gets, per resource (CPU, memory), the
 * highest usage those pods were seen at plus a headroom, never below the pod's requests and
 * never above today's demand (its limits). GPUs are as today. Pure functions; thread-safe.
 *
 *	struct pod_demand today, req, out;
 *	sizing_demand_from_pod(pod, &today);
 *	sizing_requests_from_pod(pod, &req);
 *	if (sizing_burst(&today, &req, &hist, 20, &out))
 *		... size out instead of today
 */
#ifndef KIYOT_SIZING_BURST_H
#define KIYOT_SIZING_BURST_H

#include <stdbool.h>
#include <stdint.h>

#include "kube/podspec.h"
#include "sizing.h"

#define ANN_BURST_SIZING "pod.elotl.co/burst-sizing" /* "observed": the burst rule */
#define BURST_HEADROOM_DEFAULT_PERCENT 20
#define BURST_HEADROOM_MAX_PERCENT 1000

/* What an owner's earlier pods used: how many reported usage, and the highest CPU (a 10 s
 * average, in millicores) and memory (working set) any of them was seen at. */
struct burst_history {
	int64_t pods;
	int64_t peak_cpu_milli;
	int64_t peak_memory_bytes;
};

/*
 * A pod's requests alone, summed as sizing_demand_from_pod sums (init phase against app
 * phase, sidecars, overhead): a container's request, or its limit where it gives no request
 * (the API server's default). Sets cpu_milli, memory_bytes and gpus only.
 */
void sizing_requests_from_pod(const struct podspec *p, struct pod_demand *out);

/*
 * The burst rule. today: the demand sizing takes today (limits where they exceed requests);
 * requests: the pod's requests. With a history of at least one pod, *out is today's demand with
 * cpu_milli and memory_bytes each the peak plus headroom_percent, at least the request and at
 * most today's figure, and the result is true; without (h NULL or no pods), *out is today's
 * demand and the result false. out may be today.
 */
bool sizing_burst(const struct pod_demand *today, const struct pod_demand *requests,
		  const struct burst_history *h, int headroom_percent, struct pod_demand *out);

#endif
