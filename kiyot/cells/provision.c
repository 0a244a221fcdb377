/*
 * provision.c: the demand of a sandbox and the instance type for it. Where the demand comes
 * from, per resource, best first: the pod.elotl.co/cpu|memory|gpu annotations (written by
 * `kiyot run` from the whole Pod, init containers included), then the Pod object read from the
 * API server (its containers and init containers, exactly), then the sandbox's Linux resources
 * (CPU shares give the request, the memory limit the memory; lossy), then nothing (the
 * cheapest type). The choice's reason starts with where the demand came from.
 */
#include "provision.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sizing/burst.h"
#include "sizing/catalog.h"
#include "state/crimap.h"
#include "daemon/kiyot.h"
#include "kube/quantity.h"
#include "providers/provider.h"
#include "sizing/sizing.h"
#include "platforms.h"
#include "state/records.h"
#include "usage_history.h"
#include "xalloc.h"

static int ann_quantity(const Runtime__V1__PodSandboxConfig *cfg, const char *key, int milli,
			int64_t *out, struct err *err)
{
	const char *v = cri_map_get((void **)cfg->annotations, cfg->n_annotations, key);
	int ret;

	if (!v)
		return 0;
	ret = milli ? quantity_parse_milli(v, out, err) : quantity_parse_bytes(v, out, err);
	if (ret < 0)
		return err_wrap(err, "annotation %s", key);
	return 1;
}

int provision_demand(const Runtime__V1__PodSandboxConfig *cfg, const struct podspec *pod,
		     struct pod_demand *d, unsigned *from, struct err *err)
{
	const char *launch =
		cri_map_get((void **)cfg->annotations, cfg->n_annotations, ANN_LAUNCH_TYPE);
	const char *type =
		cri_map_get((void **)cfg->annotations, cfg->n_annotations, ANN_INSTANCE_TYPE);
	int64_t gpu_milli = 0;
	int has_cpu, has_mem, has_gpu;

	memset(d, 0, sizeof(*d));
	*from = 0;
	if (launch && strcmp(launch, "spot") != 0 && strcmp(launch, "on-demand") != 0)
		return err_set(err, EINVAL,
			       "annotation %s: \"%s\" is not a launch type; use spot or on-demand",
			       ANN_LAUNCH_TYPE, launch);
	d->spot = launch && strcmp(launch, "spot") == 0;
	d->instance_type = type && type[0] ? type : NULL;
	if ((has_cpu = ann_quantity(cfg, ANN_CPU_REQUEST, 1, &d->cpu_milli, err)) < 0 ||
	    (has_mem = ann_quantity(cfg, ANN_MEMORY_REQUEST, 0, &d->memory_bytes, err)) < 0 ||
	    (has_gpu = ann_quantity(cfg, ANN_GPU_REQUEST, 1, &gpu_milli, err)) < 0)
		return -err->code;
	d->gpus = gpu_milli / 1000 + (gpu_milli % 1000 != 0); /* up, without overflow */
	if (has_cpu || has_mem || has_gpu)
		*from |= PROVISION_FROM_ANNOTATIONS;
	if (pod) {
		struct pod_demand pd = { 0 };

		sizing_demand_from_pod(pod, &pd);
		if (!has_cpu)
			d->cpu_milli = pd.cpu_milli;
		if (!has_mem)
			d->memory_bytes = pd.memory_bytes;
		if (!has_gpu)
			d->gpus = pd.gpus;
		if (!has_cpu || !has_mem || !has_gpu)
			*from |= PROVISION_FROM_POD_OBJECT;
	} else if (cfg->linux && cfg->linux->resources) {
		const Runtime__V1__LinuxContainerResources *r = cfg->linux->resources;
		int64_t cpu = 0;

		/* the kubelet writes shares = milli * 1024 / 1000 (2 for no request) */
		if (r->cpu_shares > 2)
			cpu = r->cpu_shares * 1000 / 1024;
		if (r->cpu_quota > 0 && r->cpu_period > 0 &&
		    r->cpu_quota * 1000 / r->cpu_period > cpu)
			cpu = r->cpu_quota * 1000 / r->cpu_period;
		if (!has_cpu && cpu > 0) {
			d->cpu_milli = cpu;
			*from |= PROVISION_FROM_SANDBOX;
		}
		if (!has_mem && r->memory_limit_in_bytes > 0) {
			d->memory_bytes = r->memory_limit_in_bytes;
			*from |= PROVISION_FROM_SANDBOX;
		}
	}
	return 0;
}

const char *provision_demand_source(unsigned from)
{
	switch (from) {
	case PROVISION_FROM_ANNOTATIONS:
		return "demand from the pod.elotl.co annotations";
	case PROVISION_FROM_POD_OBJECT:
		return "demand from the Pod object";
	case PROVISION_FROM_SANDBOX:
		return "demand from the sandbox's resources";
	case PROVISION_FROM_ANNOTATIONS | PROVISION_FROM_POD_OBJECT:
		return "demand from the pod.elotl.co annotations and the Pod object";
	case PROVISION_FROM_ANNOTATIONS | PROVISION_FROM_SANDBOX:
		return "demand from the pod.elotl.co annotations and the sandbox's resources";
	default:
		return "no demand stated";
	}
}

/* Whether a spot pod may run on demand when spot has no capacity: 1 with
 * pod.elotl.co/spot-fallback: on-demand, 0 without it, EINVAL for another value. */
static int spot_fallback(const Runtime__V1__PodSandboxConfig *cfg, struct err *err)
{
	const char *v =
		cri_map_get((void **)cfg->annotations, cfg->n_annotations, ANN_SPOT_FALLBACK);

	if (!v)
		return 0;
	if (strcmp(v, "on-demand") == 0)
		return 1;
	return err_set(err, EINVAL,
		       "annotation %s: \"%s\" is not a fallback; use on-demand (or leave it out "
		       "to run on spot only)",
		       ANN_SPOT_FALLBACK, v);
}

/* ---- the pod's architectures ---- */

/* The image look-ups: a cache shared by every pod (answers by digest hold for any kiyot). */
static pthread_mutex_t platforms_lock = PTHREAD_MUTEX_INITIALIZER;
static struct oci_platforms *platforms_default, *platforms_test;

void provision_use_platforms(struct oci_platforms *pl)
{
	pthread_mutex_lock(&platforms_lock);
	platforms_test = pl;
	pthread_mutex_unlock(&platforms_lock);
}

static struct oci_platforms *platforms(void)
{
	struct oci_platforms *pl;

	pthread_mutex_lock(&platforms_lock);
	if (!platforms_test && !platforms_default)
		platforms_default = oci_platforms_new(NULL);
	pl = platforms_test ? platforms_test : platforms_default;
	pthread_mutex_unlock(&platforms_lock);
	return pl;
}

/* The architectures the provider launches cells of. */
static unsigned provider_archs(const struct kiyot *k)
{
	if (k->cfg.provider && strcmp(k->cfg.provider, "ec2") == 0)
		return CATALOG_ARCH_X86_64 |
		       (k->cfg.ec2.image_id_arm64 && k->cfg.ec2.image_id_arm64[0]
				? CATALOG_ARCH_ARM64
				: 0);
#if defined(__aarch64__)
	return CATALOG_ARCH_ARM64;
#else
	return CATALOG_ARCH_X86_64;
#endif
}

/* An architecture a label value or the annotation names: its bit, 0 for another one. */
static unsigned arch_of_value(const char *v)
{
	return catalog_arch_parse(v);
}

/* What the required node affinity allows of kubernetes.io/arch: the union over its terms of
 * each term's In and NotIn. */
static unsigned affinity_archs(const struct podspec *pod)
{
	unsigned all = 0;

	if (!pod->n_node_terms)
		return CATALOG_ARCH_ALL;
	for (size_t i = 0; i < pod->n_node_terms; i++) {
		const struct podspec_node_term *t = &pod->node_terms[i];
		unsigned term = CATALOG_ARCH_ALL;

		for (size_t j = 0; j < t->n_reqs; j++) {
			const struct podspec_node_req *r = &t->reqs[j];
			unsigned named = 0;

			if (strcmp(r->key, LABEL_ARCH) != 0)
				continue;
			for (size_t v = 0; v < r->n_values; v++)
				named |= arch_of_value(r->values[v]);
			if (strcmp(r->op, "In") == 0)
				term &= named;
			else if (strcmp(r->op, "NotIn") == 0)
				term &= ~named;
			else if (strcmp(r->op, "DoesNotExist") == 0)
				term = 0; /* every cell has the label */
		}
		all |= term;
	}
	return all & CATALOG_ARCH_ALL;
}

/* The pins of a pod: the annotation, nodeSelector, node affinity. *pins gets what they allow
 * and *by which pinned (NULL: none). EINVAL for an annotation that names no architecture. */
static int arch_pins(const Runtime__V1__PodSandboxConfig *cfg, const struct podspec *pod,
		     unsigned *pins, const char **by, struct err *err)
{
	const char *ann =
		cri_map_get((void **)cfg->annotations, cfg->n_annotations, ANN_ARCHITECTURE);
	const char *sel = pod ? podspec_node_selector(pod, LABEL_ARCH) : NULL;
	unsigned a;

	*pins = CATALOG_ARCH_ALL;
	*by = NULL;
	if (ann) {
		a = arch_of_value(ann);
		if (!a)
			return err_set(err, EINVAL,
				       "annotation %s: \"%s\" is not an architecture; use amd64 "
				       "(x86_64) or arm64",
				       ANN_ARCHITECTURE, ann);
		*pins &= a;
		*by = "annotation " ANN_ARCHITECTURE;
	}
	if (sel) {
		*pins &= arch_of_value(sel);
		*by = *by ? *by : "nodeSelector " LABEL_ARCH;
	}
	if (pod && (a = affinity_archs(pod)) != CATALOG_ARCH_ALL) {
		*pins &= a;
		*by = *by ? *by : "required node affinity on " LABEL_ARCH;
	}
	return 0;
}

/* Copies of the credentials the node last pulled an image with. */
struct auth_copy {
	struct image_auth a;
	char *s[5];
};

static void auth_copy_release(struct auth_copy *c)
{
	for (size_t i = 0; i < ARRAY_SIZE(c->s); i++)
		free(c->s[i]);
	memset(c, 0, sizeof(*c));
}

/* Whether the newline-separated list holds s as a whole line. */
static bool lines_have(const char *list, const char *s)
{
	size_t n = strlen(s);

	for (const char *p = list; p && *p;) {
		size_t l = strcspn(p, "\n");

		if (l == n && strncmp(p, s, n) == 0)
			return true;
		p += l + (p[l] == '\n');
	}
	return false;
}

/* The credentials of the node's last pull of ref (by tag or digest); false: none known. */
static bool auth_of(struct kiyot *k, const char *ref, struct auth_copy *out)
{
	struct image_ref r = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *norm = NULL, *dig = NULL;
	struct image_rec **v;
	bool found = false;
	size_t n;

	memset(out, 0, sizeof(*out));
	if (!k->records || image_ref_parse(ref, &r, &err) < 0)
		return false;
	norm = image_ref_string(&r);
	if (r.digest)
		dig = xasprintf("%s/%s@%s", r.host, r.repository, r.digest);
	image_ref_release(&r);
	records_lock(k->records);
	n = records_images(k->records, &v);
	for (size_t i = 0; i < n && !found; i++) {
		const Kiyot__Cell__V1__RegistryAuth *a;

		if (!lines_have(v[i]->repo_tags, norm) &&
		    !(dig && lines_have(v[i]->repo_digests, dig)))
			continue;
		if (!(a = kiyot_auth_for(k, v[i]->id)))
			continue;
		out->a.username = out->s[0] = a->username ? xstrdup(a->username) : NULL;
		out->a.password = out->s[1] = a->password ? xstrdup(a->password) : NULL;
		out->a.auth = out->s[2] = a->auth ? xstrdup(a->auth) : NULL;
		out->a.identity_token = out->s[3] = a->identity_token ? xstrdup(a->identity_token)
								      : NULL;
		out->a.registry_token = out->s[4] = a->registry_token ? xstrdup(a->registry_token)
								      : NULL;
		found = true;
	}
	images_put(v, n);
	records_unlock(k->records);
	return found;
}

/* What one image offers, asked at its registry. */
static int image_archs(struct kiyot *k, const char *ref, unsigned *arch, struct err *err)
{
	struct auth_copy auth;
	bool have = auth_of(k, ref, &auth);
	unsigned oci = 0;
	int ret = oci_platforms_get(platforms(), k->regconf, ref, have ? &auth.a : NULL, &oci, err);

	auth_copy_release(&auth);
	if (ret < 0)
		return ret;
	*arch = (oci & OCI_ARCH_AMD64 ? CATALOG_ARCH_X86_64 : 0) |
		(oci & OCI_ARCH_ARM64 ? CATALOG_ARCH_ARM64 : 0);
	return 0;
}

/* Whether every image of the pod offers arm64; why says which does not, or what failed. */
static bool images_offer_arm64(struct kiyot *k, const struct podspec *pod, char *why,
			       size_t why_size)
{
	const struct podspec_container *lists[2] = { pod->init_containers, pod->containers };
	size_t counts[2] = { pod->n_init_containers, pod->n_containers };

	for (size_t l = 0; l < 2; l++) {
		for (size_t i = 0; i < counts[l]; i++) {
			const char *ref = lists[l][i].image;
			struct err err = ERR_INIT;
			unsigned a = 0;

			if (image_archs(k, ref, &a, &err) < 0) {
				snprintf(why, why_size, "arm64 not checked: %.200s", err.msg);
				return false;
			}
			if (!(a & CATALOG_ARCH_ARM64)) {
				snprintf(why, why_size, "image %.200s offers %s only", ref,
					 a ? catalog_arch_name(a) : "neither x86_64 nor arm64");
				return false;
			}
		}
	}
	snprintf(why, why_size, "every image offers linux/arm64");
	return true;
}

int provision_arch(struct kiyot *k, const Runtime__V1__PodSandboxConfig *cfg,
		   const struct podspec *pod, unsigned *arch, char *why, size_t why_size,
		   struct err *err)
{
	unsigned can = provider_archs(k), pins;
	const char *by;
	int ret = arch_pins(cfg, pod, &pins, &by, err);

	if (ret < 0)
		return ret;
	if (!(pins & can)) {
		if (pins & CATALOG_ARCH_ARM64)
			return err_set(err, EINVAL,
				       "%s asks for arm64, and no arm64 cell can be launched (%s); "
				       "add an arm64 image to ec2.imageIds or remove the pin",
				       by,
				       strcmp(k->cfg.provider, "ec2") == 0
					       ? "ec2.imageIds has no arm64 image"
					       : "local cells run the node's architecture");
		return err_set(err, EINVAL,
			       "%s allows %s, which kiyot's cells cannot run (they run %s); remove "
			       "or widen it",
			       by, pins ? catalog_arch_name(pins) : "no architecture",
			       catalog_arch_name(can));
	}
	*arch = pins & can;
	if (by && *arch != can) {
		snprintf(why, why_size, "pinned by %s", by);
		return 0;
	}
	if (*arch != CATALOG_ARCH_ALL) {
		snprintf(why, why_size, "%s",
			 can == CATALOG_ARCH_ALL ? "pinned"
			 : strcmp(k->cfg.provider, "ec2") == 0
				 ? "no arm64 cell image in ec2.imageIds"
				 : "local cells run the node's architecture");
		return 0;
	}
	if (!pod) {
		*arch = CATALOG_ARCH_X86_64;
		snprintf(why, why_size, "arm64 not checked: no Pod object names the images");
		return 0;
	}
	if (!images_offer_arm64(k, pod, why, why_size))
		*arch = CATALOG_ARCH_X86_64;
	return 0;
}

/* The spot prices of a choice's types: anywhere, and per zone where the catalog has them. */
static void zone_prices_of(const struct catalog *cat, struct size_choice *out)
{
	const char *types[1 + ARRAY_SIZE(out->alternatives)];
	size_t n_types = 0, n = 0, cap = 0;

	types[n_types++] = out->instance_type;
	for (size_t i = 0; i < out->n_alternatives; i++)
		types[n_types++] = out->alternatives[i];
	for (size_t i = 0; i < n_types; i++) {
		const struct catalog_type *t = catalog_find(cat, types[i]);

		if (t)
			cap += 1 + t->n_zone_spot;
	}
	out->zone_prices = cap ? xcalloc(cap, sizeof(*out->zone_prices)) : NULL;
	for (size_t i = 0; i < n_types; i++) {
		const struct catalog_type *t = catalog_find(cat, types[i]);

		if (!t)
			continue;
		out->zone_prices[n++] =
			(struct cell_zone_price){ types[i], NULL, t->spot_price, t->spot_band };
		for (size_t z = 0; z < t->n_zone_spot; z++)
			out->zone_prices[n++] =
				(struct cell_zone_price){ types[i], xstrdup(t->zone_spot[z].zone),
							  t->zone_spot[z].price, t->spot_band };
	}
	out->n_zone_prices = n;
}

/* ---- the burst rule ---- */

/* Whether the pod asked for the burst rule: 1 for observed, 0 without the annotation, EINVAL
 * for another value. */
static int burst_asked(const Runtime__V1__PodSandboxConfig *cfg, struct err *err)
{
	const char *v =
		cri_map_get((void **)cfg->annotations, cfg->n_annotations, ANN_BURST_SIZING);

	if (!v)
		return 0;
	if (strcmp(v, ANN_BURST_SIZING_OBSERVED) == 0)
		return 1;
	return err_set(err, EINVAL,
		       "annotation %s: \"%s\" is not a burst sizing; use %s (or leave it out to "
		       "size the cell to the pod's limits)",
		       ANN_BURST_SIZING, v, ANN_BURST_SIZING_OBSERVED);
}

/*
 * The burst rule on d (the demand from the Pod object, as today) for a pod that asked for it:
 * d becomes the owner's observed peak plus headroom between the pod's requests and d, and
 * note says from which figures; without a record of the owner d stays and note says why.
 * *owner gets the owner's key (NULL: the pod has none). A history that cannot be read leaves
 * d as it is (said in note): sizing goes on as without the annotation.
 */
static void burst_size(struct kiyot *k, const struct podspec *pod, unsigned from,
		       struct pod_demand *d, char **owner, char *note, size_t note_size)
{
	struct burst_history h = { 0 };
	struct pod_demand req = { 0 }, today = *d;
	struct err err = ERR_INIT;
	char who[340], peak[96], got[96], reqs[96], lims[96];
	int pct = k->cfg.burst_headroom_percent;

	*owner = usage_history_owner(pod);
	if (!*owner) {
		snprintf(note, note_size, "burst sizing: %s; sized to the limits",
			 pod ? "the pod has no controller (ReplicaSet, StatefulSet, Job...)"
			     : "no Pod object names the pod's owner");
		return;
	}
	usage_history_owner_name(*owner, who, sizeof(who));
	if (from != PROVISION_FROM_POD_OBJECT) {
		snprintf(note, note_size, "burst sizing: demand not from the Pod object alone");
		return;
	}
	if (!k->store || usage_history_get(k->store, *owner, &h, &err) < 0) {
		snprintf(note, note_size, "burst sizing: %.200s; sized to the limits",
			 k->store ? err.msg : "no store");
		return;
	}
	sizing_requests_from_pod(pod, &req);
	if (!sizing_burst(&today, &req, &h, pct, d)) {
		snprintf(note, note_size,
			 "burst sizing: no usage of an earlier pod of %s seen yet; sized to the "
			 "limits",
			 who);
		return;
	}
	/* the peak's memory to a whole MiB, for reading */
	sizing_format_demand(h.peak_cpu_milli,
			     (h.peak_memory_bytes + (1LL << 20) - 1) / (1LL << 20) * (1LL << 20), 0,
			     peak, sizeof(peak));
	sizing_format_demand(d->cpu_milli, d->memory_bytes, 0, got, sizeof(got));
	sizing_format_demand(req.cpu_milli, req.memory_bytes, 0, reqs, sizeof(reqs));
	sizing_format_demand(today.cpu_milli, today.memory_bytes, 0, lims, sizeof(lims));
	snprintf(note, note_size,
		 "burst sized from observed peak %s of %lld earlier pod%s of %s + %d%%: %s "
		 "(requests %s, limits %s)",
		 peak, (long long)h.pods, h.pods == 1 ? "" : "s", who, pct, got, reqs, lims);
}

int provision_size(struct kiyot *k, const Runtime__V1__PodSandboxConfig *cfg,
		   struct size_choice *out, struct err *err)
{
	return provision_size_pod(k, cfg, NULL, out, err);
}

int provision_size_pod(struct kiyot *k, const Runtime__V1__PodSandboxConfig *cfg,
		       const struct podspec *pod, struct size_choice *out, struct err *err)
{
	struct sizing_reserve reserve = { k->cfg.reserve_cpu_milli, k->cfg.reserve_memory_bytes };
	struct pod_demand d;
	struct sizing_choice ch;
	struct catalog *cat;
	unsigned from;
	char why[320], burst[1024] = "";
	_cleanup_free_ char *owner = NULL;
	int fallback, asked;

	if (provision_demand(cfg, pod, &d, &from, err) < 0 ||
	    (fallback = spot_fallback(cfg, err)) < 0 || (asked = burst_asked(cfg, err)) < 0 ||
	    provision_arch(k, cfg, pod, &d.arch, why, sizeof(why), err) < 0)
		return err_wrap(err, "pod \"%s\"", cfg->metadata->name);
	d.arch_why = why;
	if (asked)
		burst_size(k, pod, from, &d, &owner, burst, sizeof(burst));
	if (!d.instance_type && k->cfg.default_instance_type[0] && !d.cpu_milli &&
	    !d.memory_bytes && !d.gpus)
		d.instance_type = k->cfg.default_instance_type;
	/* the current catalog, held while sizing reads it (a refresh may publish a newer one) */
	cat = catalog_acquire(k->catalog);
	if (sizing_pick(cat, &d, &reserve, &ch, err) < 0) {
		catalog_release(cat);
		return err_wrap(err, "pod \"%s\"", cfg->metadata->name);
	}
	out->instance_type = xstrdup(ch.instance_type);
	out->cpus = ch.cpu;
	out->memory_bytes = ch.memory_bytes;
	out->price = ch.price;
	out->spot = ch.spot ? (fallback ? CELL_SPOT_OR_ON_DEMAND : CELL_SPOT) : 0;
	out->arch = ch.arch;
	out->reason = xasprintf("%s; %s%s%s", provision_demand_source(from), burst,
				burst[0] ? "; " : "", ch.reason);
	out->burst_owner = steal_ptr(owner);
	out->n_alternatives = 0;
	for (size_t i = 0; i < ch.n_runners_up && i < ARRAY_SIZE(out->alternatives); i++)
		out->alternatives[out->n_alternatives++] = xstrdup(ch.runners_up[i].instance_type);
	out->zone_prices = NULL;
	out->n_zone_prices = 0;
	if (ch.spot)
		zone_prices_of(cat, out);
	catalog_release(cat);
	return 0;
}

void size_choice_release(struct size_choice *c)
{
	free(c->instance_type);
	free(c->reason);
	c->instance_type = c->reason = NULL;
	for (size_t i = 0; i < c->n_alternatives; i++)
		free(c->alternatives[i]);
	c->n_alternatives = 0;
	for (size_t i = 0; i < c->n_zone_prices; i++)
		free((char *)c->zone_prices[i].zone);
	free(c->zone_prices);
	c->zone_prices = NULL;
	c->n_zone_prices = 0;
	free(c->burst_owner);
	c->burst_owner = NULL;
}
