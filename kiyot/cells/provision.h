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
#include "sizing/sizing.h"

struct kiyot;

struct size_choice {
	char *instance_type;
	double cpus;
	int64_t memory_bytes;
	double price;
	int spot; /* cell_spec.spot: 0, CELL_SPOT or CELL_SPOT_OR_ON_DEMAND */
	char *reason;
	/* The next cheapest types, for a provider without capacity for the first. */
	char *alternatives[3];
	size_t n_alternatives;
};

/* Errors name the pod and the annotation or demand at fault. */
int provision_size(struct kiyot *k, const Runtime__V1__PodSandboxConfig *cfg,
		   struct size_choice *out, struct err *err);
/* The same with the pod's Pod object (NULL: none), already checked to be this sandbox's
 * (podobject_get). The reason starts with where the demand came from ("demand from the Pod
 * object; cheapest fitting ..."). */
int provision_size_pod(struct kiyot *k, const Runtime__V1__PodSandboxConfig *cfg,
		       const struct podspec *pod, struct size_choice *out, struct err *err);

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
#define ANN_RESTART_POLICY                                                                         \
	"pod.elotl.co/restart-policy" /* Always|OnFailure|Never, for cells
							  * run without a kubelet */

#endif
