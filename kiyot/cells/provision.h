/*
 * provision.h: from a sandbox's config (and its Pod object, when the API server gave it) to
 * the cell to launch: the pod's demand (annotations, the Pod object's containers, the
 * sandbox's Linux resources), the instance type sizing picks for it, and why.
 */
#ifndef KIYOT_PROVISION_H
#define KIYOT_PROVISION_H

#include <stdint.h>

#include "cri_api.pb-c.h"
#include "err.h"
#include "kube/podspec.h"
#include "providers/provider.h"
#include "sizing/sizing.h"

struct kiyot;

struct size_choice {
	char *instance_type;
	double cpus;
	int64_t memory_bytes;
	double price;
	int spot;      /* cell_spec.spot: 0, CELL_SPOT or CELL_SPOT_OR_ON_DEMAND */
	unsigned arch; /* the cell's architecture: CATALOG_ARCH_X86_64 or CATALOG_ARCH_ARM64 */
	char *reason;
	/* The next cheapest types, for a provider without capacity for the first. */
	char *alternatives[3];
	size_t n_alternatives;
	/* Spot pods: the spot prices of instance_type and the alternatives, anywhere (zone NULL)
	 * and per zone where a catalog refresh saw them, with their interruption bands (types
	 * point at the strings above, zones are owned). */
	struct cell_zone_price *zone_prices;
	size_t n_zone_prices;
	/* A pod that asked for the burst rule (pod.elotl.co/burst-sizing: observed) and has an
	 * owner: the owner's key (cells/usage_history.h), under which its cell's usage is to be
	 * recorded once the cell has an id; else NULL. */
	char *burst_owner;
};

/* Errors name the pod and the annotation or demand at fault. */
int provision_size(struct kiyot *k, const Runtime__V1__PodSandboxConfig *cfg,
		   struct size_choice *out, struct err *err);
/* The same with the pod's Pod object (NULL: none), already checked to be this sandbox's
 * (podobject_get). The reason starts with where the demand came from ("demand from the Pod
 * object; cheapest fitting ..."). With pod.elotl.co/burst-sizing: observed, a pod of an owner
 * whose earlier pods' usage is on record is sized by the burst rule (sizing/burst.h) with the
 * headroom sizing.burstHeadroomPercent, and the reason says from which figures ("burst sized
 * from observed peak 0.35 vCPU / 300 MiB of 12 earlier pods of ReplicaSet web-7c9 + 20%: ...");
 * without a record it is sized as without the annotation, and the reason says why. */
int provision_size_pod(struct kiyot *k, const Runtime__V1__PodSandboxConfig *cfg,
		       const struct podspec *pod, struct size_choice *out, struct err *err);

/*
 * The architectures a pod may run on (CATALOG_ARCH_* bits) into *arch and why into why (a
 * phrase for the sizing reason, e.g. "every image offers linux/arm64" or "image
 * docker.io/x/app:1 offers amd64 only"). arm64 is allowed only when the provider launches it
 * (EC2: ec2.imageIds has an arm64 image; local cells: the node's own architecture), nothing
 * pins the pod (the annotation pod.elotl.co/architecture, kubernetes.io/arch in the Pod's
 * nodeSelector or required node affinity) and every image of the Pod object (init containers
 * and sidecars too) offers linux/arm64 at its registry, asked with the credentials the node
 * last pulled it with (anonymous for an image it never pulled). A registry that fails leaves
 * x86_64, and why says so. A pin the provider cannot launch is an error (EINVAL) naming the
 * pin and what to do. pod may be NULL (no images known: x86_64).
 */
int provision_arch(struct kiyot *k, const Runtime__V1__PodSandboxConfig *cfg,
		   const struct podspec *pod, unsigned *arch, char *why, size_t why_size,
		   struct err *err);

struct oci_platforms;
/* For tests: the image look-ups go through pl (borrowed; NULL: the registry's, the default). */
void provision_use_platforms(struct oci_platforms *pl);

/* Where a demand came from, as flags. */
#define PROVISION_FROM_ANNOTATIONS 1u /* pod.elotl.co/cpu|memory|gpu */
#define PROVISION_FROM_POD_OBJECT 2u
#define PROVISION_FROM_SANDBOX 4u /* the sandbox's Linux resources */

/*
 * The demand of a sandbox, per resource: its annotation, else the Pod object's containers
 * (when pod is not NULL; a resource they do not request counts 0), else the sandbox's Linux
 * resources; launch type and instance type from the annotations (d->instance_type borrowed from
 * cfg). *from gets the PROVISION_FROM_* flags of what was used. Errors (EINVAL) name the
 * annotation.
 */
int provision_demand(const Runtime__V1__PodSandboxConfig *cfg, const struct podspec *pod,
		     struct pod_demand *d, unsigned *from, struct err *err);
/* "demand from the Pod object", "demand from the sandbox's resources", ... */
const char *provision_demand_source(unsigned from);
void size_choice_release(struct size_choice *c);

/* Annotation keys kiyot reads from a sandbox. */
#define ANN_TARGET_RUNTIME "kubernetes.io/target-runtime"
#define ANN_LAUNCH_TYPE "pod.elotl.co/launch-type"
#define ANN_INSTANCE_TYPE "pod.elotl.co/instance-type"
#define ANN_SPOT_FALLBACK "pod.elotl.co/spot-fallback" /* "on-demand": when spot has none */
#define ANN_CPU_REQUEST "pod.elotl.co/cpu"	       /* pod demand, a quantity: "250m" */
#define ANN_MEMORY_REQUEST "pod.elotl.co/memory"       /* pod demand, a quantity: "400Mi" */
#define ANN_GPU_REQUEST "pod.elotl.co/gpu"
#define ANN_BURST_SIZING_OBSERVED "observed" /* the value of ANN_BURST_SIZING (sizing/burst.h) */
#define ANN_ARCHITECTURE "pod.elotl.co/architecture" /* amd64 (x86_64) or arm64: a pin */
#define LABEL_ARCH "kubernetes.io/arch"		     /* in nodeSelector or node affinity */
#define ANN_RESTART_POLICY                                                                         \
	"pod.elotl.co/restart-policy" /* Always|OnFailure|Never, for cells
							  * run without a kubelet */

#endif
