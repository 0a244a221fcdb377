/*
 * sizing.h: a pod's demand -> the cheapest instance type that fits it.
 *
 *	struct pod_demand d;
 *	struct sizing_reserve r = SIZING_RESERVE_DEFAULT;
 *	struct sizing_choice ch;
 *	if (sizing_demand_from_podspec(pod, &d, err) < 0 ||
 *	    sizing_pick(catalog, &d, &r, &ch, err) < 0)
 *		return err_wrap(err, "pod \"%s\"", pod->name);
 *	launch(ch.instance_type, ch.spot);   ch.price and ch.reason go on the Cell object
 *
 * The rule. The need is the pod's demand plus the reserve for the cell's OS and agent. Among
 * the types of the region (only those matching the instance-type pattern when there is one):
 *  - memory must cover the need, and GPUs the pod's GPUs. A pod without GPUs never lands on a
 *    GPU type unless its pattern names one.
 *  - a fixed-performance type must have vCPUs for the CPU need.
 *  - a burstable type (t2, t3, t3a, t4g) fits when its vCPUs cover the CPU need; the CPU need
 *    is taken as sustained, so where it exceeds the type's baseline the type's price grows by
 *    the unlimited-mode surplus credits for the excess (sizing_surplus_credit_price per
 *    vCPU-hour). A burstable family with no known credit price fits only within its baseline.
 * Only types of an architecture the pod may run on count (x86_64 unless the demand allows
 * more). The cheapest effective price wins: the spot price for spot pods, else the on-demand
 * price, plus credits. Its runners-up are of the same architecture as the winner. Ties (within 1e-9 USD/h) go to less memory, then fewer vCPUs, then the name.
 * Pure functions; thread-safe.
 */
#ifndef KIYOT_SIZING_H
#define KIYOT_SIZING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "err.h"
#include "kube/podspec.h"

#define SIZING_ANNOTATION_INSTANCE_TYPE "pod.elotl.co/instance-type"
#define SIZING_ANNOTATION_LAUNCH_TYPE "pod.elotl.co/launch-type"

/* What a pod needs. */
struct pod_demand {
	int64_t cpu_milli;
	int64_t memory_bytes;
	int64_t gpus;
	bool spot;		   /* priced (and launched) as spot */
	const char *instance_type; /* exact type or glob ("c5*"); NULL: any. Borrowed. */
	/* The architectures the pod may run on (CATALOG_ARCH_* bits); 0 is x86_64 alone. */
	unsigned arch;
	/* Why those, for the reason ("arm64 allowed: every image offers linux/arm64"); NULL:
	 * nothing said. Borrowed. */
	const char *arch_why;
};

/* Room kept on every cell for its OS and agent, added to the demand. */
struct sizing_reserve {
	int64_t cpu_milli;
	int64_t memory_bytes;
};

/*
 * The default reserve: no CPU and 64 MiB of memory. Memory cannot be shared with the OS: a pod
 * asking for all of an instance's memory would run out, so 64 MiB is kept. CPU is compressible
 * and the agent is idle most of the time, while any CPU reserve pushes every pod that asks for
 * a whole number of vCPUs onto a type twice as large (50m costs 19% more on the reference mix
 * of bench/cost). The seed's case holds: a pod of 0.4 GiB needs 0.4 GiB + 64 MiB < 0.5 GiB and
 * lands on t3a.nano in the shipped us-east-1 prices, as long as it sustains no more than the
 * nano's 0.1 vCPU baseline; a pod that sustains 0.25 vCPU pays surplus credits there and lands
 * on a micro instead.
 */
#define SIZING_RESERVE_DEFAULT_CPU_MILLI 0
#define SIZING_RESERVE_DEFAULT_MEMORY_BYTES (64LL << 20)
/* the two above (64 MiB), as an initialiser */
/* clang-format off */
#define SIZING_RESERVE_DEFAULT { 0, 67108864 }
/* clang-format on */

/* How many runners-up a choice records. */
#define SIZING_RUNNERS_UP 3

/* A type that fitted, with its effective price. */
struct sizing_candidate {
	char instance_type[64];
	double price; /* USD/hour, credits included */
};

/* The chosen type. */
struct sizing_choice {
	char instance_type[64];
	double price;	     /* effective USD/hour: list_price + credit_price */
	double list_price;   /* the catalog's spot price when spot, else its on-demand price */
	double credit_price; /* USD/hour of surplus credits for CPU above the baseline; 0 if none */
	bool spot;
	unsigned arch; /* the one architecture the cell runs: CATALOG_ARCH_X86_64 or _ARM64 */
	double cpu;    /* vCPUs */
	int64_t cpu_milli;
	int64_t memory_bytes;
	int gpus;
	bool burstable;
	double baseline; /* sustained vCPUs (= cpu unless burstable) */
	/* next cheapest, in order; all of the chosen architecture, so a provider's fallback
	 * launches the same image */
	struct sizing_candidate runners_up[SIZING_RUNNERS_UP];
	size_t n_runners_up;
	/* "cheapest fitting 0.25 vCPU / 0.4 GiB + reserve 0 vCPU / 64 MiB: t3a.micro
	 * $0.0119/h (AWS Price List 2026-11-29 12:28 UTC), burstable with baseline 0.20 vCPU:
	 * $0.0094/h + $0.0025/h surplus credits for 0.05 vCPU above it (runners-up: t3a.nano
	 * $0.0122/h, t3.nano $0.0127/h, ...)": the chosen price says where it came from
	 * (catalog_price_source); a spot pod's names the type's interruption band after it
	 * ("..., interruption <5%", or "interruption band unknown") */
	char reason[768];
};

/*
 * Chooses the cheapest fitting type; reserve may be NULL (SIZING_RESERVE_DEFAULT). *out is
 * written only on success. Errors (ENOENT), with the region of the catalog:
 *	annotation pod.elotl.co/instance-type: "c5.hugeX" matches no instance type in us-east-1
 *	pod demand 200 vCPU / 4 TiB fits no instance type in us-east-1; lower the pod's requests
 *	or limits
 *	pod demand 4 vCPU / 1 GiB fits no instance type matching "t3.nano" in us-east-1; ...
 */
int sizing_pick(const struct catalog *c, const struct pod_demand *d,
		const struct sizing_reserve *reserve, struct sizing_choice *out, struct err *err);

/*
 * Whether type t holds a need of cpu_milli, memory_bytes and gpus by the rule above (the
 * GPU-type exclusion and the pattern aside), and if so its effective price for it: *price
 * (list price + credits) and *credits (may be NULL).
 */
bool sizing_fits(const struct catalog_type *t, int64_t cpu_milli, int64_t memory_bytes,
		 int64_t gpus, bool spot, double *price, double *credits);

/*
 * USD per vCPU-hour of unlimited-mode surplus credits (Linux) for a burstable type, by its
 * family ("t3a" of "t3a.nano"); -1 for a family without a known price.
 */
double sizing_surplus_credit_price(const char *instance_type);

/*
 * A pod's demand from its containers: per resource, the larger of the init phase (each init
 * container plus the sidecars started before it) and the app phase (the app containers plus
 * every sidecar), each container counting its limit where it exceeds its request, as the
 * scheduler does. Sets cpu_milli, memory_bytes and gpus only (saturating at INT64_MAX).
 */
void sizing_demand_from_containers(const struct podspec_container *init, size_t n_init,
				   const struct podspec_container *app, size_t n_app,
				   struct pod_demand *out);

/* The containers' demand plus the pod's spec.overhead. */
void sizing_demand_from_pod(const struct podspec *p, struct pod_demand *out);

/*
 * The whole demand of a pod: its containers and overhead, plus the annotations pod.elotl.co/launch-type
 * (spot | on-demand) and pod.elotl.co/instance-type (borrowed from p). An unknown launch type
 * is an error (EINVAL) naming the annotation.
 */
int sizing_demand_from_podspec(const struct podspec *p, struct pod_demand *out, struct err *err);

/* Writes a demand as "0.25 vCPU / 0.4 GiB[ / 1 GPU]" into buf. */
void sizing_format_demand(int64_t cpu_milli, int64_t memory_bytes, int64_t gpus, char *buf,
			  size_t size);

#endif
