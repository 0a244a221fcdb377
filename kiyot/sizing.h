/*
 * sizing.h: a pod's demand -> the cheapest instance type that fits it.
 *
 *	struct pod_demand d;
 *	struct sizing_choice ch;
 *	if (sizing_demand_from_podspec(pod, &d, err) < 0 ||
 *	    sizing_pick(catalog, &d, NULL, &ch, err) < 0)
 *		return err_wrap(err, "pod \"%s\"", pod->name);
 *	launch(ch.instance_type, ch.cpu, ch.memory_bytes);   ch.reason goes on the Cell object
 *
 * The rule (first version): among the types of the region (those matching the instance-type
 * pattern when there is one), keep those with vCPUs * 1000 >= demand milli-CPUs + reserve,
 * memory >= demand bytes + reserve and GPUs >= demand GPUs; choose the cheapest by on-demand
 * price, or spot price for spot pods; ties go to less memory, then fewer vCPUs, then the name.
 * Burstable types count their full vCPUs; the choice records their baseline. A pod without
 * requests gets the cheapest type of the region (plus the reserve, zero by default).
 * Pure functions; thread-safe.
 */
#ifndef KIYOT_SIZING_H
#define KIYOT_SIZING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "err.h"
#include "podspec.h"

#define SIZING_ANNOTATION_INSTANCE_TYPE "pod.elotl.co/instance-type"
#define SIZING_ANNOTATION_LAUNCH_TYPE "pod.elotl.co/launch-type"

/* What a pod needs. */
struct pod_demand {
	int64_t cpu_milli;
	int64_t memory_bytes;
	int64_t gpus;
	bool spot;		   /* priced (and launched) as spot */
	const char *instance_type; /* exact type or glob ("c5*"); NULL: any. Borrowed. */
};

/* Room kept on every cell for its OS and agent, added to the demand. */
struct sizing_reserve {
	int64_t cpu_milli;
	int64_t memory_bytes;
};

#define SIZING_RESERVE_DEFAULT { 0, 0 }

/* How many runners-up the reason names. */
#define SIZING_RUNNERS_UP 3

/* The chosen type. */
struct sizing_choice {
	char instance_type[64];
	double price; /* USD/hour: the spot price when spot */
	bool spot;
	double cpu; /* vCPUs */
	int64_t cpu_milli;
	int64_t memory_bytes;
	int gpus;
	bool burstable;
	double baseline; /* sustained vCPUs (= cpu unless burstable) */
	/* "cheapest fitting 0.25 vCPU/0.40 GiB: t3a.nano $0.0047/h, burstable with baseline
	 * 0.10 vCPU (runners-up: t3.nano $0.0052/h, t2.nano $0.0058/h, t3a.micro $0.0094/h)" */
	char reason[512];
};

/*
 * Chooses the cheapest fitting type; reserve may be NULL (SIZING_RESERVE_DEFAULT). Errors
 * (ENOENT), with the region of the catalog:
 *	annotation pod.elotl.co/instance-type: "c5.hugeX" matches no instance type in us-east-1
 *	pod demand 200 vCPU / 4 TiB fits no instance type in us-east-1; lower the pod's requests
 *	or limits
 *	pod demand 4 vCPU / 1 GiB fits no instance type matching "t3.nano" in us-east-1; ...
 */
int sizing_pick(const struct catalog *c, const struct pod_demand *d,
		const struct sizing_reserve *reserve, struct sizing_choice *out, struct err *err);

/*
 * A pod's demand from its containers: per resource, the larger of the largest init container
 * and the sum of the app containers, each container counting its limit where it exceeds its
 * request. Sets cpu_milli, memory_bytes and gpus only (saturating at INT64_MAX).
 */
void sizing_demand_from_containers(const struct podspec_container *init, size_t n_init,
				   const struct podspec_container *app, size_t n_app,
				   struct pod_demand *out);

/*
 * The whole demand of a pod: its containers, plus the annotations pod.elotl.co/launch-type
 * (spot | on-demand) and pod.elotl.co/instance-type (borrowed from p). An unknown launch type
 * is an error (EINVAL) naming the annotation.
 */
int sizing_demand_from_podspec(const struct podspec *p, struct pod_demand *out, struct err *err);

/* Writes a demand as "0.25 vCPU / 0.4 GiB[ / 1 GPU]" into buf. */
void sizing_format_demand(int64_t cpu_milli, int64_t memory_bytes, int64_t gpus, char *buf,
			  size_t size);

#endif
