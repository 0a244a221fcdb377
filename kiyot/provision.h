/*
 * provision.h: from a sandbox's config to the cell to launch: the pod's demand (annotations,
 * the sandbox's Linux resources), the instance type sizing picks for it, and why.
 */
#ifndef KIYOT_PROVISION_H
#define KIYOT_PROVISION_H

#include <stdint.h>

#include "cri_api.pb-c.h"
#include "err.h"

struct kiyot;

struct size_choice {
	char *instance_type;
	double cpus;
	int64_t memory_bytes;
	double price;
	int spot;
	char *reason;
	/* The next cheapest types, for a provider without capacity for the first. */
	char *alternatives[3];
	size_t n_alternatives;
};

/* Errors name the pod and the annotation or demand at fault. */
int provision_size(struct kiyot *k, const Runtime__V1__PodSandboxConfig *cfg,
		   struct size_choice *out, struct err *err);
void size_choice_release(struct size_choice *c);

/* Annotation keys kiyot reads from a sandbox. */
#define ANN_TARGET_RUNTIME "kubernetes.io/target-runtime"
#define ANN_LAUNCH_TYPE "pod.elotl.co/launch-type"
#define ANN_INSTANCE_TYPE "pod.elotl.co/instance-type"
#define ANN_CPU_REQUEST "pod.elotl.co/cpu"	 /* pod demand, a quantity: "250m" */
#define ANN_MEMORY_REQUEST "pod.elotl.co/memory" /* pod demand, a quantity: "400Mi" */
#define ANN_GPU_REQUEST "pod.elotl.co/gpu"
#define ANN_RESTART_POLICY                                                                         \
	"pod.elotl.co/restart-policy" /* Always|OnFailure|Never, for cells
							  * run without a kubelet */

#endif
