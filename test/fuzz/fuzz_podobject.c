/*
 * fuzz_podobject: Pod objects as the API server's JSON answer holds them, read the two ways
 * kiyot reads a Pod: podobject_from_json (sizing and pre-pulls from a real Pod; the uid it
 * expects is the object's own metadata.uid when that is a string) and podspec_from_json
 * (`kiyot run`, which refuses more). Besides what the sanitizers catch, it checks their
 * promises: a refusal has a message and is EINVAL, ENOTSUP or (a Pod of another uid) ESTALE;
 * what podspec_from_json accepts, podobject_from_json accepts with the same names, images and
 * resources; requests are within limits and GPUs are not overcommitted; the pre-pull list
 * keeps PODOBJECT_MAX_* bounds.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/podobject.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *text, size_t len)
{
	fprintf(stderr, "%s\n%.*s\n", what, (int)len, text);
	abort();
}

static int refusal_ok(int ret, const struct err *err, int other)
{
	return ret == -err->code && err->msg[0] &&
	       (err->code == EINVAL || err->code == ENOTSUP || err->code == other);
}

static int resources_ok(const struct podspec_container *c)
{
	const struct podspec_resources *r = &c->requests, *l = &c->limits;

	return c->name && c->image && r->cpu_milli >= 0 && r->memory_bytes >= 0 && r->gpus >= 0 &&
	       (!l->has_cpu || r->cpu_milli <= l->cpu_milli) &&
	       (!l->has_memory || r->memory_bytes <= l->memory_bytes) &&
	       (!r->has_gpus || (l->has_gpus && r->gpus == l->gpus));
}

static int same_resources(const struct podspec_resources *a, const struct podspec_resources *b)
{
	return a->has_cpu == b->has_cpu && a->has_memory == b->has_memory &&
	       a->has_gpus == b->has_gpus && a->cpu_milli == b->cpu_milli &&
	       a->memory_bytes == b->memory_bytes && a->gpus == b->gpus;
}

static int same_containers(const struct podspec_container *a, const struct podspec_container *b,
			   size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(a[i].name, b[i].name) || strcmp(a[i].image, b[i].image) ||
		    a[i].pull_policy != b[i].pull_policy || a[i].sidecar != b[i].sidecar ||
		    !same_resources(&a[i].requests, &b[i].requests) ||
		    !same_resources(&a[i].limits, &b[i].limits))
			return 0;
	return 1;
}

/* Bounds of the pod and of its pre-pull list. */
static void check_pod(const struct podspec *p, const char *text, size_t size)
{
	size_t dropped = 0, bytes = 0, i;
	json_t *list, *v;

	if (!p->name || !p->namespace || p->termination_grace_period_seconds < 0)
		fail("a pod without a name or namespace", text, size);
	for (i = 0; i < p->n_init_containers; i++)
		if (!resources_ok(&p->init_containers[i]))
			fail("an init container's resources out of bounds", text, size);
	for (i = 0; i < p->n_containers; i++)
		if (!resources_ok(&p->containers[i]))
			fail("a container's resources out of bounds", text, size);
	list = podobject_prepull(p, &dropped);
	if (!json_is_array(list) || json_array_size(list) > PODOBJECT_MAX_PREPULL ||
	    json_array_size(list) + dropped > p->n_containers + p->n_init_containers)
		fail("a pre-pull list out of bounds", text, size);
	json_array_foreach (list, i, v) {
		size_t len = json_string_length(v);

		if (!json_is_string(v) || !len || len > PODOBJECT_MAX_IMAGE)
			fail("a pre-pull image out of bounds", text, size);
		bytes += len;
	}
	if (bytes > PODOBJECT_MAX_PREPULL_BYTES)
		fail("a pre-pull list past its bytes", text, size);
	json_decref(list);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct podspec *object = NULL, *run = NULL;
	struct err err = ERR_INIT;
	json_t *pod = json_loadb(text, size, 0, NULL);
	const char *uid;
	int ret;

	if (!pod)
		return 0;
	uid = json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid"));
	ret = podobject_from_json(pod, uid ? uid : "fuzz-uid", &object, &err);
	if (ret < 0 && (!refusal_ok(ret, &err, ESTALE) || object))
		fail("podobject_from_json refused without a message or errno", text, size);
	if (ret == 0)
		check_pod(object, text, size);
	err = (struct err)ERR_INIT;
	ret = podspec_from_json(pod, &run, &err);
	if (ret < 0 && (!refusal_ok(ret, &err, EINVAL) || run))
		fail("podspec_from_json refused without a message or errno", text, size);
	if (ret == 0) {
		check_pod(run, text, size);
		if (uid && !object)
			fail("a Pod kiyot run takes that podobject_from_json refuses", text, size);
		if (object &&
		    (strcmp(object->name, run->name) || strcmp(object->namespace, run->namespace) ||
		     object->n_containers != run->n_containers ||
		     object->n_init_containers != run->n_init_containers ||
		     !same_containers(object->containers, run->containers, run->n_containers) ||
		     !same_containers(object->init_containers, run->init_containers,
				      run->n_init_containers) ||
		     !same_resources(&object->overhead, &run->overhead)))
			fail("the two readers read the Pod otherwise", text, size);
		for (size_t i = 0; i < run->n_containers; i++) {
			struct podspec_security eff;

			podspec_effective_security(run, &run->containers[i], &eff);
		}
		podspec_has_privileged(run);
	}
	podspec_free(object);
	podspec_free(run);
	json_decref(pod);
	return 0;
}
