/*
 * cost.c: what a reference mix of pods costs per hour under five rules, on one catalog.
 *
 *	build/bench/cost [MIX.json [REGION]]     (defaults: bench/cost/mix.json, us-east-1)
 *
 * (a) Kiyot's sizing (sizing_pick with the default cell reserve).
 * (b) A kip-style rule: the sum of the app containers only, no reserve, ranked by on-demand
 *     price (burstable types with surplus credits for the CPU over their baseline, as kip
 *     did); spot pods then pay the spot price of that type. Counts the pods it places on a
 *     type where the init containers or the cell reserve do not fit.
 * (c) EKS on Fargate: the pod's demand plus 256 MiB for the node's components, rounded up
 *     to the cheapest vCPU/memory combination Fargate offers, at its per-vCPU-hour and
 *     per-GB-hour prices. No GPUs and no spot for pods on Fargate.
 * (d) The per-pod optimum: for each pod, an exhaustive search of the catalog for the
 *     cheapest type that truly fits its demand plus the reserve (written apart from the
 *     sizing module, as a check on it).
 * (e) A fluid lower bound: the largest per-vCPU, per-GiB and per-GPU hourly prices that no
 *     instance type undercuts (a small linear program), times the pods' total demand;
 *     on-demand and spot pods separately.
 * Then the levers of the new catalog, on the same pods (us-east-1):
 *  today   Kiyot's sizing on the catalog shipped before (December 2020 prices, x86_64 only:
 *          kiyot/sizing/data/aws-instance-catalog-2020-us-east-1.json), what Kiyot charged;
 *  catalog the same rule on the catalog of today, x86_64 only;
 *  arm64   and arm64 allowed for the pods whose every image offers linux/arm64, by the table
 *          image -> platforms of bench/cost/platforms.json (an image it lacks: amd64 only);
 *  zone    and spot pods in the cheapest zone of their type (Kiyot orders the subnets by
 *          their zones' spot price): each spot pod's price times its type's lowest zone price
 *          over the mean of its zones (the price of a zone taken blindly), by the per-zone
 *          prices of bench/cost/spot-zones.json (us-east-1, 2022-05-31, written by
 *          gen-spot-zones.py from a public dataset; it names it); a type it lacks is as
 *          before. Assumes subnets in every zone the type's prices list.
 *  band    (beside the chain, not in it) what the EC2 provider's near-tie rule does to the spot
 *          pods after the zone lever: a runner-up of sizing whose spot price (times its zone
 *          factor) is within 5% of the chosen type's and whose interruption band is lower
 *          (both known: the catalog's Spot Instance Advisor table) is launched instead; what
 *          that costs, how many pods move, and the spot pods' bands before and after.
 *  burst   and the pods annotated pod.elotl.co/burst-sizing: observed whose owner has a
 *          history in bench/cost/usage.json (what kiyot's store would hold: its earlier pods'
 *          peaks, drawn by gen-mix.py) sized by the burst rule (sizing/burst.h: the peak plus
 *          the default 20% headroom, between the pod's requests and its limits); for them
 *          "below requests" is measured against their requests, not their limits.
 * Also today's choices priced at today's prices (how much of the catalog lever is the old
 * prices' drift), and the pods whose type is below their requests under each (must be 0).
 * Prints figures and ratios; asserts nothing.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sizing/catalog.h"
#include "err.h"
#include "fsutil.h"
#include "kube/podspec.h"
#include "kube/quantity.h"
#include "cells/usage_history.h"
#include "sizing/burst.h"
#include "sizing/sizing.h"
#include "xalloc.h"

#define COST_MAX_MIX (16u << 20)
#define COST_MAX_PODS 100000
#define COST_MAX_CLASSES 16
#define COST_CLASS_LABEL "bench.kiyot.elotl.co/class"
#define GIB 1073741824.0
#define MIB 1048576LL

/*
 * AWS Fargate, us-east-1, Linux/x86, on-demand: USD per vCPU-hour and per GB-hour (the
 * public pricing page; unchanged since January 2019).
 */
#define FARGATE_VCPU_HOUR 0.04048
#define FARGATE_GB_HOUR 0.004445
/* EKS on Fargate adds 256 MB to each pod's memory for kubelet, kube-proxy and containerd. */
#define FARGATE_POD_OVERHEAD (256 * MIB)

/*
 * The vCPU/memory combinations EKS on Fargate offers: for each vCPU size, memory from min
 * to max GB in steps of step GB (0.25 vCPU: 0.5, 1, 2 GB, listed as two ranges).
 */
static const struct fargate_size {
	double vcpu, min_gb, max_gb, step_gb;
} fargate_sizes[] = {
	{ 0.25, 0.5, 1, 0.5 }, { 0.25, 2, 2, 1 }, { 0.5, 1, 4, 1 }, { 1, 2, 8, 1 },
	{ 2, 4, 16, 1 },       { 4, 8, 30, 1 },	  { 8, 16, 60, 4 }, { 16, 32, 120, 8 },
};

/* One pod of the mix. */
struct cost_pod {
	char name[64];
	int class;
	bool spot;
	int64_t cpu, mem, gpus;		    /* whole demand: max(largest init, sum of apps) */
	int64_t app_cpu, app_mem, app_gpus; /* app containers only */
	bool arm64_ok;			    /* every image offers linux/arm64 (platforms.json) */
	int64_t req_cpu, req_mem;	    /* its requests alone */
	bool burst;			    /* annotated pod.elotl.co/burst-sizing: observed */
	struct burst_history hist;	    /* its owner's in usage.json (pods 0: none) */
};

enum {
	RULE_KIYOT,
	RULE_KIP,
	RULE_FARGATE,
	RULE_OPT,
	RULE_KIYOT_CPU,
	N_PRICED
};

/* The CPU reserve of the sensitivity line (a'). */
#define COST_CPU_RESERVE_MILLI 50

/* What one pod costs under each rule; negative: the rule cannot place it. */
struct cost_result {
	double price[N_PRICED];
	char kiyot_type[64];
	char kip_type[64];
	bool kip_init_short;	/* kip's type cannot hold the init containers */
	bool kip_reserve_short; /* it holds the pod but not the pod plus the reserve */
	bool kiyot_is_opt;	/* sizing found the optimum's price */
};

/* Sums of demand (vCPUs, GiB, GPUs) for the lower bound, on-demand and spot apart. */
struct cost_sums {
	double v[2][3];
};

/* The table image -> platforms (a JSON object of lists), or NULL. */
static json_t *cost_platforms;

/* Whether an image's platforms (cost_platforms) include linux/arm64. */
static bool cost_image_arm64(const char *image)
{
	const json_t *l = json_object_get(cost_platforms, image), *v;
	size_t i;

	json_array_foreach (l, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), "linux/arm64") == 0)
			return true;
	return false;
}

/* Whether every image of a pod, init containers included, offers linux/arm64. */
static bool cost_pod_arm64(const struct podspec *spec)
{
	for (size_t i = 0; i < spec->n_init_containers; i++)
		if (!cost_image_arm64(spec->init_containers[i].image))
			return false;
	for (size_t i = 0; i < spec->n_containers; i++)
		if (!cost_image_arm64(spec->containers[i].image))
			return false;
	return true;
}

/* The burst rule's history per owner (bench/cost/usage.json's "owners"), or NULL. */
static json_t *cost_usage;

/* The history of an owner key in cost_usage; pods 0 when it has none (or it does not read). */
static struct burst_history cost_history(const char *owner)
{
	const json_t *o = owner ? json_object_get(cost_usage, owner) : NULL;
	struct burst_history h = { 0 };
	struct err err = ERR_INIT;
	const char *cpu = json_string_value(json_object_get(o, "cpu"));
	const char *mem = json_string_value(json_object_get(o, "memory"));

	if (!o || !cpu || !mem || quantity_parse_milli(cpu, &h.peak_cpu_milli, &err) < 0 ||
	    quantity_parse_bytes(mem, &h.peak_memory_bytes, &err) < 0)
		return (struct burst_history){ 0 };
	h.pods = json_integer_value(json_object_get(o, "pods"));
	return h;
}

/* Per-zone spot prices by type (bench/cost/spot-zones.json's "types"), or NULL. */
static json_t *cost_zones;

/* A type's lowest zone spot price over the mean of its zones; 1 when unknown. */
static double cost_zone_factor(const char *type)
{
	const json_t *z = json_object_get(cost_zones, type), *v;
	double lo = 0, sum = 0;
	size_t n = 0;
	const char *k;

	json_object_foreach ((json_t *)z, k, v) {
		double x = json_number_value(v);

		(void)k;
		if (x <= 0)
			continue;
		lo = n == 0 || x < lo ? x : lo;
		sum += x;
		n++;
	}
	return n >= 2 ? lo / (sum / (double)n) : 1;
}

/* The whole run. */
struct cost_run {
	const struct catalog *cat;
	struct sizing_reserve reserve;
	struct cost_pod *pods;
	struct cost_result *res;
	size_t n;
	char classes[COST_MAX_CLASSES][32];
	int n_classes;
};

/* The index of a class name, added at its first sight (the last slot collects the rest). */
static int cost_class(struct cost_run *r, const char *name)
{
	for (int i = 0; i < r->n_classes; i++) {
		if (strcmp(r->classes[i], name) == 0)
			return i;
	}
	if (r->n_classes == COST_MAX_CLASSES)
		return COST_MAX_CLASSES - 1;
	snprintf(r->classes[r->n_classes], sizeof(r->classes[0]), "%s", name);
	return r->n_classes++;
}

/* Reads one Pod object of the mix into p. */
static int cost_read_pod(struct cost_run *r, const json_t *j, struct cost_pod *p, struct err *err)
{
	struct podspec *spec = NULL;
	struct pod_demand d, app = { 0 }, req;
	const char *cls, *burst;
	char *owner;

	if (podspec_from_json(j, &spec, err) < 0)
		return -err->code;
	if (sizing_demand_from_podspec(spec, &d, err) < 0) {
		podspec_free(spec);
		return -err->code;
	}
	sizing_demand_from_containers(NULL, 0, spec->containers, spec->n_containers, &app);
	snprintf(p->name, sizeof(p->name), "%s", spec->name);
	cls = podspec_label(spec, COST_CLASS_LABEL);
	p->class = cost_class(r, cls ? cls : "other");
	p->spot = d.spot;
	p->cpu = d.cpu_milli;
	p->mem = d.memory_bytes;
	p->gpus = d.gpus;
	p->app_cpu = app.cpu_milli;
	p->app_mem = app.memory_bytes;
	p->app_gpus = app.gpus;
	p->arm64_ok = cost_pod_arm64(spec);
	sizing_requests_from_pod(spec, &req);
	p->req_cpu = req.cpu_milli;
	p->req_mem = req.memory_bytes;
	burst = podspec_annotation(spec, ANN_BURST_SIZING);
	p->burst = burst && strcmp(burst, "observed") == 0;
	owner = usage_history_owner(spec);
	if (p->burst)
		p->hist = cost_history(owner);
	free(owner);
	podspec_free(spec);
	return 0;
}

/* Loads the mix: a JSON List of Pods ({"items": [...]}) of at most COST_MAX_MIX bytes. */
static int cost_load_mix(struct cost_run *r, const char *path, struct err *err)
{
	_cleanup_free_ char *text = NULL;
	json_error_t jerr;
	json_t *root, *items, *item;
	size_t len = 0, i;
	int ret = fs_read_file(path, COST_MAX_MIX, &text, &len, err);

	if (ret < 0)
		return ret;
	root = json_loadb(text, len, 0, &jerr);
	if (!root)
		return err_set(err, EINVAL, "%s: line %d: %s", path, jerr.line, jerr.text);
	items = json_object_get(root, "items");
	if (!json_is_array(items) || json_array_size(items) == 0 ||
	    json_array_size(items) > COST_MAX_PODS) {
		json_decref(root);
		return err_set(err, EINVAL, "%s: \"items\" must list 1 to %d pods", path,
			       COST_MAX_PODS);
	}
	r->pods = xcalloc(json_array_size(items), sizeof(*r->pods));
	r->res = xcalloc(json_array_size(items), sizeof(*r->res));
	json_array_foreach (items, i, item) {
		ret = cost_read_pod(r, item, &r->pods[i], err);
		if (ret < 0) {
			json_decref(root);
			return err_wrap(err, "%s: pod %zu", path, i);
		}
	}
	r->n = json_array_size(items);
	json_decref(root);
	return 0;
}

/* (a) Kiyot: sizing_pick with a reserve. */
static double cost_kiyot(const struct cost_run *r, const struct cost_pod *p,
			 const struct sizing_reserve *reserve, char *type, size_t size)
{
	struct pod_demand d = {
		.cpu_milli = p->cpu, .memory_bytes = p->mem, .gpus = p->gpus, .spot = p->spot
	};
	struct sizing_choice ch;
	struct err err = ERR_INIT;

	if (sizing_pick(r->cat, &d, reserve, &ch, &err) < 0)
		return -1;
	if (type)
		snprintf(type, size, "%s", ch.instance_type);
	return ch.price;
}

/*
 * The price of type t for a sustained CPU need, burstable credits included; negative when t
 * cannot hold cpu_milli, mem and gpus. Written apart from sizing_fits on purpose.
 */
static double cost_type_price(const struct catalog_type *t, int64_t cpu_milli, int64_t mem,
			      int64_t gpus, bool spot)
{
	double price = spot ? t->spot_price : t->price;
	double need = (double)cpu_milli / 1000.0;

	if (!(t->arch & CATALOG_ARCH_X86_64)) /* (b) to (e) compare on x86_64, as (a) runs */
		return -1;
	if ((double)t->memory_bytes < (double)mem || t->gpus < gpus || t->cpu_milli < cpu_milli)
		return -1;
	if (t->burstable && need > t->baseline + 1e-9) {
		double rate = sizing_surplus_credit_price(t->name);

		if (rate < 0)
			return -1;
		price += (need - t->baseline) * rate;
	}
	return price;
}

/* (b) kip-style: apps only, no reserve, on-demand ranking; the bill uses the launch type. */
static double cost_kip(const struct cost_run *r, const struct cost_pod *p, struct cost_result *res)
{
	const struct catalog_type *best = NULL;
	double best_price = 0;

	for (size_t i = 0; i < catalog_count(r->cat); i++) {
		const struct catalog_type *t = catalog_at(r->cat, i);
		double pr = cost_type_price(t, p->app_cpu, p->app_mem, p->app_gpus, false);

		if (pr >= 0 && (!best || pr < best_price - 1e-9))
			best = t, best_price = pr;
	}
	if (!best)
		return -1;
	snprintf(res->kip_type, sizeof(res->kip_type), "%s", best->name);
	res->kip_init_short = cost_type_price(best, p->cpu, p->mem, p->gpus, false) < 0;
	res->kip_reserve_short = !res->kip_init_short &&
				 cost_type_price(best, p->cpu + r->reserve.cpu_milli,
						 p->mem + r->reserve.memory_bytes, p->gpus,
						 false) < 0;
	return cost_type_price(best, p->app_cpu, p->app_mem, p->app_gpus, p->spot);
}

/* (c) EKS on Fargate: the cheapest offered combination covering the demand plus 256 MiB. */
static double cost_fargate(const struct cost_pod *p)
{
	double cpu = (double)p->cpu / 1000.0;
	double gb = (double)(p->mem + FARGATE_POD_OVERHEAD) / GIB;
	double best = -1;

	if (p->gpus > 0)
		return -1;
	for (size_t i = 0; i < sizeof(fargate_sizes) / sizeof(fargate_sizes[0]); i++) {
		const struct fargate_size *s = &fargate_sizes[i];

		if (s->vcpu + 1e-9 < cpu)
			continue;
		for (double m = s->min_gb; m <= s->max_gb + 1e-9; m += s->step_gb) {
			double pr = s->vcpu * FARGATE_VCPU_HOUR + m * FARGATE_GB_HOUR;

			if (m + 1e-9 >= gb && (best < 0 || pr < best))
				best = pr;
		}
	}
	return best;
}

/* (d) The optimum: every type of the catalog, the cheapest that truly fits. */
static double cost_optimum(const struct cost_run *r, const struct cost_pod *p)
{
	double best = -1;

	for (size_t i = 0; i < catalog_count(r->cat); i++) {
		double pr = cost_type_price(catalog_at(r->cat, i), p->cpu + r->reserve.cpu_milli,
					    p->mem + r->reserve.memory_bytes, p->gpus, p->spot);

		if (pr >= 0 && (best < 0 || pr < best))
			best = pr;
	}
	return best;
}

/*
 * Maximises c.x subject to a x <= b, x >= 0 (b >= 0, so x = 0 is feasible): a dense simplex
 * with Bland's rule, for three variables. Returns the optimum and the prices in x, or -1
 * when unbounded.
 */
static double cost_lp(const double (*a)[3], const double *b, size_t m, const double c[3],
		      double x[3])
{
	size_t cols = 3 + m + 1, *basis = xcalloc(m, sizeof(*basis));
	double *t = xcalloc((m + 1) * cols, sizeof(*t)), value = -1;

#define T(i, j) t[(i)*cols + (j)]
	for (size_t i = 0; i < m; i++) {
		memcpy(&T(i, 0), a[i], 3 * sizeof(double));
		T(i, 3 + i) = 1;
		T(i, cols - 1) = b[i];
		basis[i] = 3 + i;
	}
	for (size_t j = 0; j < 3; j++)
		T(m, j) = -c[j];
	for (int iter = 0; iter < 100000; iter++) {
		size_t e = cols, row = m;

		for (size_t j = 0; j < cols - 1 && e == cols; j++)
			if (T(m, j) < -1e-12)
				e = j;
		if (e == cols) {
			value = T(m, cols - 1);
			break;
		}
		for (size_t i = 0; i < m; i++) {
			if (T(i, e) <= 1e-12)
				continue;
			if (row == m ||
			    T(i, cols - 1) / T(i, e) < T(row, cols - 1) / T(row, e) - 1e-15 ||
			    (fabs(T(i, cols - 1) / T(i, e) - T(row, cols - 1) / T(row, e)) <=
				     1e-15 &&
			     basis[i] < basis[row]))
				row = i;
		}
		if (row == m)
			break; /* unbounded */
		double pv = T(row, e);

		for (size_t j = 0; j < cols; j++)
			T(row, j) /= pv;
		for (size_t i = 0; i <= m; i++) {
			double f = T(i, e);

			if (i == row || f == 0)
				continue;
			for (size_t j = 0; j < cols; j++)
				T(i, j) -= f * T(row, j);
		}
		basis[row] = e;
	}
	x[0] = x[1] = x[2] = 0;
	for (size_t i = 0; i < m; i++)
		if (basis[i] < 3)
			x[basis[i]] = T(i, cols - 1);
#undef T
	free(t);
	free(basis);
	return value;
}

/*
 * (e) The fluid lower bound of a demand (vCPUs, GiB, GPUs) at on-demand or spot prices:
 * the best per-unit prices such that every type (a burstable one both at its baseline and at
 * its full vCPUs with credits) costs at least its vCPUs, GiB and GPUs at those prices.
 */
static double cost_bound(const struct catalog *cat, bool spot, const double demand[3],
			 double unit[3])
{
	size_t n = catalog_count(cat), m = 0;
	double(*a)[3] = xcalloc(2 * n, sizeof(*a));
	double *b = xcalloc(2 * n, sizeof(*b)), v;

	for (size_t i = 0; i < n; i++) {
		const struct catalog_type *t = catalog_at(cat, i);
		double price = spot ? t->spot_price : t->price;
		double rate = t->burstable ? sizing_surplus_credit_price(t->name) : 0;
		double mem = (double)t->memory_bytes / GIB;

		if (!(t->arch & CATALOG_ARCH_X86_64))
			continue;
		if (t->burstable) {
			a[m][0] = t->baseline, a[m][1] = mem, a[m][2] = t->gpus, b[m++] = price;
			if (rate < 0)
				continue;
			price += (t->cpu - t->baseline) * rate;
		}
		a[m][0] = t->cpu, a[m][1] = mem, a[m][2] = t->gpus, b[m++] = price;
	}
	v = cost_lp((const double(*)[3])a, b, m, demand, unit);
	free(a);
	free(b);
	return v;
}

/* The lower bound of a set of sums: on-demand and spot parts added. */
static double cost_bound_of(const struct cost_run *r, const struct cost_sums *s)
{
	double unit[3], total = 0;

	for (int k = 0; k < 2; k++) {
		if (s->v[k][0] == 0 && s->v[k][1] == 0 && s->v[k][2] == 0)
			continue;
		double v = cost_bound(r->cat, k == 1, s->v[k], unit);

		if (v < 0)
			return -1;
		total += v;
	}
	return total;
}

/* Adds a pod's demand (with or without the reserve) to sums. */
static void cost_add(struct cost_sums *s, const struct cost_pod *p, const struct sizing_reserve *r)
{
	double *v = s->v[p->spot];

	v[0] += (double)(p->cpu + (r ? r->cpu_milli : 0)) / 1000.0;
	v[1] += (double)(p->mem + (r ? r->memory_bytes : 0)) / GIB;
	v[2] += (double)p->gpus;
}

/* A ratio as text, or "-" when it has no meaning. */
static const char *cost_ratio(double num, double den, char *buf, size_t size)
{
	if (num < 0 || den <= 0)
		snprintf(buf, size, "%s", "-");
	else
		snprintf(buf, size, "%.3f", num / den);
	return buf;
}

/* Totals of one rule over the pods of a class (-1: all classes) it places, and the count. */
static double cost_total(const struct cost_run *r, int rule, int class, bool fargate_only,
			 size_t *placed)
{
	double total = 0;

	*placed = 0;
	for (size_t i = 0; i < r->n; i++) {
		if (class >= 0 && r->pods[i].class != class)
			continue;
		if (fargate_only && r->res[i].price[RULE_FARGATE] < 0)
			continue;
		if (r->res[i].price[rule] < 0)
			continue;
		total += r->res[i].price[rule];
		(*placed)++;
	}
	return total;
}

/* Prints the summary table. */
static void cost_print_summary(const struct cost_run *r)
{
	struct cost_sums all = { 0 }, all_res = { 0 }, far = { 0 };
	size_t n_opt, n_kiyot, n_kiyot_cpu, n_kip, n_far, n_far_opt, init_short = 0, res_short = 0,
								     same = 0;
	double opt = cost_total(r, RULE_OPT, -1, false, &n_opt);
	double kiyot = cost_total(r, RULE_KIYOT, -1, false, &n_kiyot);
	double kip = cost_total(r, RULE_KIP, -1, false, &n_kip);
	double kiyot_cpu = cost_total(r, RULE_KIYOT_CPU, -1, false, &n_kiyot_cpu);
	double fargate = cost_total(r, RULE_FARGATE, -1, false, &n_far);
	double opt_far = cost_total(r, RULE_OPT, -1, true, &n_far_opt);
	double lb, lb_res, lb_far, unit[3];
	char q1[16], q2[16];

	for (size_t i = 0; i < r->n; i++) {
		cost_add(&all, &r->pods[i], NULL);
		cost_add(&all_res, &r->pods[i], &r->reserve);
		if (r->res[i].price[RULE_FARGATE] >= 0)
			cost_add(&far, &r->pods[i], NULL);
		init_short += r->res[i].kip_init_short;
		res_short += r->res[i].kip_reserve_short;
		same += r->res[i].kiyot_is_opt;
	}
	lb = cost_bound_of(r, &all);
	lb_res = cost_bound_of(r, &all_res);
	lb_far = cost_bound_of(r, &far);
	printf("%-48s %10s %10s %9s  %s\n", "rule", "USD/hour", "vs optimum", "vs bound", "notes");
	printf("%-48s %10.4f %10s %9s  %zu/%zu pods placed; %zu at the optimum's price\n",
	       "(a) kiyot sizing", kiyot, cost_ratio(kiyot, opt, q1, sizeof(q1)),
	       cost_ratio(kiyot, lb, q2, sizeof(q2)), n_kiyot, r->n, same);
	printf("%-48s %10.4f %10s %9s  %zu/%zu placed; the same with a CPU reserve of %dm\n",
	       "(a') kiyot sizing, 50m CPU reserve", kiyot_cpu,
	       cost_ratio(kiyot_cpu, opt, q1, sizeof(q1)),
	       cost_ratio(kiyot_cpu, lb, q2, sizeof(q2)), n_kiyot_cpu, r->n,
	       COST_CPU_RESERVE_MILLI);
	printf("%-48s %10.4f %10s %9s  %zu/%zu placed; %zu where the init containers do not "
	       "fit, %zu more where the reserve does not\n",
	       "(b) kip-style (apps only, on-demand, no reserve)", kip,
	       cost_ratio(kip, opt, q1, sizeof(q1)), cost_ratio(kip, lb, q2, sizeof(q2)), n_kip,
	       r->n, init_short, res_short);
	printf("%-48s %10.4f %10s %9s  %zu/%zu placed (no GPUs on Fargate); ratios against "
	       "(d) %.4f and (e) %.4f on those pods\n",
	       "(c) EKS on Fargate", fargate, cost_ratio(fargate, opt_far, q1, sizeof(q1)),
	       cost_ratio(fargate, lb_far, q2, sizeof(q2)), n_far, r->n, opt_far, lb_far);
	printf("%-48s %10.4f %10s %9s  %zu/%zu placed\n", "(d) per-pod optimum", opt, "1.000",
	       cost_ratio(opt, lb, q2, sizeof(q2)), n_opt, r->n);
	printf("%-48s %10.4f %10s %9s  the pods' demand, no reserve; %.4f with it\n",
	       "(e) fluid lower bound", lb, cost_ratio(lb, opt, q1, sizeof(q1)), "1.000", lb_res);
	for (int k = 0; k < 2; k++) {
		double v = cost_bound(r->cat, k == 1, all.v[k], unit);

		printf("    (e) %-9s %8.1f vCPU %8.1f GiB %3.0f GPU at $%.5f/vCPU-h, $%.5f/GiB-h, "
		       "$%.4f/GPU-h = $%.4f/h\n",
		       k ? "spot" : "on-demand", all.v[k][0], all.v[k][1], all.v[k][2], unit[0],
		       unit[1], unit[2], v);
	}
}

/* Prints the totals per class of pod. */
static void cost_print_classes(const struct cost_run *r)
{
	printf("\n%-8s %5s %10s %10s %10s %10s %10s %8s %8s\n", "class", "pods", "(a) kiyot",
	       "(b) kip", "(c) fargt", "(d) opt", "(e) bound", "(a)/(d)", "(b)/(d)");
	for (int c = 0; c < r->n_classes; c++) {
		struct cost_sums s = { 0 };
		size_t n, na, nb, nc, nd;
		double a = cost_total(r, RULE_KIYOT, c, false, &na);
		double b = cost_total(r, RULE_KIP, c, false, &nb);
		double f = cost_total(r, RULE_FARGATE, c, false, &nc);
		double d = cost_total(r, RULE_OPT, c, false, &nd);
		char q1[16], q2[16], fs[32];

		n = 0;
		for (size_t i = 0; i < r->n; i++) {
			if (r->pods[i].class == c) {
				cost_add(&s, &r->pods[i], NULL);
				n++;
			}
		}
		if (nc == n)
			snprintf(fs, sizeof(fs), "%.4f", f);
		else
			snprintf(fs, sizeof(fs), "%zu/%zu", nc, n);
		printf("%-8s %5zu %10.4f %10.4f %10s %10.4f %10.4f %8s %8s\n", r->classes[c], n, a,
		       b, fs, d, cost_bound_of(r, &s), cost_ratio(a, d, q1, sizeof(q1)),
		       cost_ratio(b, d, q2, sizeof(q2)));
	}
}

/* Prints one line per pod: its demand and what each rule chose or charges. */
static void cost_print_pods(const struct cost_run *r)
{
	printf("\n%-12s %-28s %-14s %9s %-14s %9s %9s %9s\n", "pod", "demand (spot: *)",
	       "(a) kiyot", "USD/h", "(b) kip", "USD/h", "(c) USD/h", "(d) USD/h");
	for (size_t i = 0; i < r->n; i++) {
		const struct cost_pod *p = &r->pods[i];
		const struct cost_result *res = &r->res[i];
		char dem[96], pr[N_PRICED][16];

		sizing_format_demand(p->cpu, p->mem, p->gpus, dem, sizeof(dem));
		for (int k = 0; k < N_PRICED; k++) {
			if (res->price[k] < 0)
				snprintf(pr[k], sizeof(pr[k]), "%s", "-");
			else
				snprintf(pr[k], sizeof(pr[k]), "%.4f", res->price[k]);
		}
		printf("%-12s %-27s%s %-14s %9s %-14s %9s %9s %9s%s\n", p->name, dem,
		       p->spot ? "*" : " ", res->kiyot_type, pr[RULE_KIYOT], res->kip_type,
		       pr[RULE_KIP], pr[RULE_FARGATE], pr[RULE_OPT],
		       res->kip_init_short	? "  kip: init does not fit"
		       : res->kip_reserve_short ? "  kip: reserve does not fit"
						: "");
	}
}

/* What one pod costs by Kiyot's sizing on cat with the architectures arch; -1 when nothing
 * fits. *type gets the chosen type; *short_of is set when it is below the pod's demand. */
static double cost_lever(const struct catalog *cat, const struct cost_pod *p,
			 const struct sizing_reserve *reserve, unsigned arch, char *type,
			 size_t size, bool *short_of)
{
	struct pod_demand d = { .cpu_milli = p->cpu,
				.memory_bytes = p->mem,
				.gpus = p->gpus,
				.spot = p->spot,
				.arch = arch };
	struct sizing_choice ch;
	struct err err = ERR_INIT;
	const struct catalog_type *t;

	if (sizing_pick(cat, &d, reserve, &ch, &err) < 0)
		return -1;
	snprintf(type, size, "%s", ch.instance_type);
	t = catalog_find(cat, ch.instance_type);
	*short_of = !t || t->cpu_milli < p->cpu || t->memory_bytes < p->mem || t->gpus < p->gpus;
	return ch.price;
}

/* A pod's price under the burst rule on top of the other levers: as before (then, with
 * *short_of as before) unless it asked for the rule and its owner has a history; then sized
 * to the owner's peak + 20% within its requests and limits, on the same architectures and
 * zone rule, and *short_of says whether its type is below its requests. */
static double cost_burst(const struct cost_run *r, const struct cost_pod *p, double before,
			 bool short_before, bool *short_of)
{
	struct pod_demand today = { .cpu_milli = p->cpu, .memory_bytes = p->mem, .gpus = p->gpus };
	struct pod_demand req = { .cpu_milli = p->req_cpu, .memory_bytes = p->req_mem };
	struct cost_pod q = *p;
	const struct catalog_type *t;
	char type[64];
	bool s = false;
	double v;

	*short_of = short_before;
	if (!p->burst ||
	    !sizing_burst(&today, &req, &p->hist, BURST_HEADROOM_DEFAULT_PERCENT, &today))
		return before;
	q.cpu = today.cpu_milli;
	q.mem = today.memory_bytes;
	v = cost_lever(r->cat, &q, &r->reserve,
		       p->arm64_ok ? CATALOG_ARCH_ALL : CATALOG_ARCH_X86_64, type, sizeof(type),
		       &s);
	if (v < 0)
		return before;
	t = catalog_find(r->cat, type);
	*short_of = !t || t->cpu_milli < p->req_cpu || t->memory_bytes < p->req_mem ||
		    t->gpus < p->gpus;
	return v * (p->spot ? cost_zone_factor(type) : 1);
}

/* The EC2 provider's near-tie (provider_ec2.c, SPOT_NEAR_TIE). */
#define COST_NEAR_TIE 0.05

/*
 * A spot pod's type and price after the provider's near-tie rule, from sizing's choice on cat
 * with arch: the runner-up whose spot price (times its zone factor) is within COST_NEAR_TIE of
 * the chosen type's and whose band is lower (both known), the lowest band winning. *band0 and
 * *band get the chosen type's band and the launched one's; returns the launched type's price
 * times its zone factor (-1 when nothing fits), *moved whether it is another type.
 */
static double cost_band_tie(const struct catalog *cat, const struct cost_pod *p,
			    const struct sizing_reserve *reserve, unsigned arch, int *band0,
			    int *band, bool *moved)
{
	struct pod_demand d = { .cpu_milli = p->cpu,
				.memory_bytes = p->mem,
				.gpus = p->gpus,
				.spot = true,
				.arch = arch };
	struct sizing_choice ch;
	struct err err = ERR_INIT;
	const struct catalog_type *t0, *t;
	double p0, v, price;

	*moved = false;
	if (sizing_pick(cat, &d, reserve, &ch, &err) < 0)
		return -1;
	t0 = catalog_find(cat, ch.instance_type);
	*band0 = *band = t0->spot_band;
	p0 = t0->spot_price * cost_zone_factor(t0->name);
	price = ch.price * cost_zone_factor(t0->name);
	for (size_t i = 0; i < ch.n_runners_up; i++) {
		t = catalog_find(cat, ch.runners_up[i].instance_type);
		v = t->spot_price * cost_zone_factor(t->name);
		if (t->spot_band >= 0 && *band >= 0 && t->spot_band < *band &&
		    fabs(v - p0) <= COST_NEAR_TIE * (v < p0 ? v : p0)) {
			*band = t->spot_band;
			price = ch.runners_up[i].price * cost_zone_factor(t->name);
			*moved = true;
		}
	}
	return price;
}

/* "<5% 3, 5-10% 1, ..., unknown 2": how many spot pods are in each band. */
static void cost_bands_text(const size_t *count, char *out, size_t size)
{
	size_t n = 0;

	out[0] = '\0';
	for (int b = -1; b <= 4; b++) {
		if (!count[b + 1])
			continue;
		n += (size_t)snprintf(out + n, n < size ? size - n : 0, "%s%s %zu", n ? ", " : "",
				      catalog_spot_band_name(b), count[b + 1]);
	}
}

/* Prints the near-tie rule's effect on the spot pods (the band line). */
static void cost_print_bands(const struct cost_run *r, double zone, double today)
{
	size_t before[6] = { 0 }, after[6] = { 0 }, moved = 0;
	double tied = zone;
	char b0[160], b1[160];

	for (size_t i = 0; i < r->n; i++) {
		const struct cost_pod *p = &r->pods[i];
		unsigned arch = p->arm64_ok ? CATALOG_ARCH_ALL : CATALOG_ARCH_X86_64;
		char type[64];
		int band0, band;
		bool m, s;
		double c, v;

		if (!p->spot)
			continue;
		c = cost_lever(r->cat, p, &r->reserve, arch, type, sizeof(type), &s);
		v = cost_band_tie(r->cat, p, &r->reserve, arch, &band0, &band, &m);
		if (c < 0 || v < 0)
			continue;
		tied += v - c * cost_zone_factor(type);
		moved += m;
		before[band0 + 1]++;
		after[band + 1]++;
	}
	cost_bands_text(before, b0, sizeof(b0));
	cost_bands_text(after, b1, sizeof(b1));
	printf("%-58s %10.4f %8.3f %10.4f  (%zu spot pods to a lower band)\n",
	       "  spot near-ties to a lower interruption band (5%)", tied, tied / today,
	       zone - tied, moved);
	printf("spot pods' interruption bands: %s; after the near-tie rule: %s\n", b0, b1);
}

/* Prints the levers of the new catalog against today's rule on the old one. */
static void cost_print_levers(const struct cost_run *r, const struct catalog *old)
{
	double today = 0, drift = 0, refreshed = 0, arm = 0, today_ng = 0, arm_ng = 0;
	double zone = 0, zone_ng = 0, burst = 0, burst_ng = 0, b_limits = 0, b_peaks = 0;
	size_t n = 0, arm_pods = 0, on_arm = 0, short_of[4] = { 0 }, missing = 0;
	size_t spot_pods = 0, zoned = 0, b_asked = 0, b_sized = 0;

	for (size_t i = 0; i < r->n; i++) {
		const struct cost_pod *p = &r->pods[i];
		char t_old[64], t_new[64], t_arm[64];
		bool s0 = false, s1 = false, s2 = false, s3 = false;
		double a = cost_lever(old, p, &r->reserve, CATALOG_ARCH_X86_64, t_old,
				      sizeof(t_old), &s0);
		double b = cost_lever(r->cat, p, &r->reserve, CATALOG_ARCH_X86_64, t_new,
				      sizeof(t_new), &s1);
		double c = cost_lever(r->cat, p, &r->reserve,
				      p->arm64_ok ? CATALOG_ARCH_ALL : CATALOG_ARCH_X86_64, t_arm,
				      sizeof(t_arm), &s2);
		const struct catalog_type *now = a >= 0 ? catalog_find(r->cat, t_old) : NULL;
		double d = a, credits, f, e;

		if (a < 0 || b < 0 || c < 0)
			continue;
		if (!now || !sizing_fits(now, p->cpu + r->reserve.cpu_milli,
					 p->mem + r->reserve.memory_bytes, p->gpus, p->spot, &d,
					 &credits)) {
			d = a; /* gone from today's catalog: its old price */
			missing++;
		}
		n++;
		today += a, drift += d, refreshed += b, arm += c;
		f = p->spot ? cost_zone_factor(t_arm) : 1;
		zone += c * f;
		spot_pods += p->spot;
		zoned += p->spot && f < 1;
		e = cost_burst(r, p, c * f, s2, &s3);
		burst += e;
		b_asked += p->burst;
		if (p->burst && p->hist.pods > 0)
			b_sized++, b_limits += c * f, b_peaks += e;
		if (p->gpus == 0)
			today_ng += a, arm_ng += c, zone_ng += c * f, burst_ng += e;
		short_of[0] += s0, short_of[1] += s1, short_of[2] += s2, short_of[3] += s3;
		arm_pods += p->arm64_ok;
		on_arm += catalog_find(r->cat, t_arm)->arch == CATALOG_ARCH_ARM64;
	}
	printf("\nLevers (%zu pods priced in all three; %zu may run on arm64 by their images' "
	       "platforms, %zu of them land on arm64):\n",
	       n, arm_pods, on_arm);
	printf("%-58s %10s %8s %10s  %s\n", "rule", "USD/hour", "vs today", "saved",
	       "pods below requests");
	printf("%-58s %10.4f %8.3f %10s  %zu\n",
	       "today: old catalog (Dec 2020 prices), x86_64 only", today, 1.0, "-", short_of[0]);
	printf("%-58s %10.4f %8.3f %10s  (%zu types no longer listed: old price)\n",
	       "  today's choices at today's prices", drift, drift / today, "-", missing);
	printf("%-58s %10.4f %8.3f %10.4f  %zu\n", "+ catalog of today, x86_64 only", refreshed,
	       refreshed / today, today - refreshed, short_of[1]);
	printf("%-58s %10.4f %8.3f %10.4f  %zu\n", "+ arm64 where every image offers it", arm,
	       arm / today, refreshed - arm, short_of[2]);
	printf("%-58s %10.4f %8.3f %10.4f  %zu (%zu of %zu spot pods' types have zone prices)\n",
	       "+ spot in the cheapest zone (2022-05-31 zone spreads)", zone, zone / today,
	       arm - zone, short_of[2], zoned, spot_pods);
	cost_print_bands(r, zone, today);
	printf("%-58s %10.4f %8.3f %10.4f  %zu (burst pods: against their requests)\n",
	       "+ burst sized from observed peaks (opt-in, +20%)", burst, burst / today,
	       zone - burst, short_of[3]);
	printf("burst: %zu pods asked for it, %zu with their owner's history: $%.4f/h sized to "
	       "their limits, $%.4f/h from their owners' peaks (%.3fx)\n",
	       b_asked, b_sized, b_limits, b_peaks, b_limits > 0 ? b_peaks / b_limits : 0);
	printf("new rule / today: %.3fx (against today's choices at today's prices: %.3fx); "
	       "without the GPU pods: %.3fx\n",
	       burst / today, burst / drift, today_ng > 0 ? burst_ng / today_ng : 0);
}

int main(int argc, char **argv)
{
	bool verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
	const char *mix, *region;
	struct cost_run r = { .reserve = SIZING_RESERVE_DEFAULT };
	struct catalog *cat = NULL;
	struct err err = ERR_INIT;
	size_t spot = 0, gpu = 0;
	char reserve_text[96];
	struct sizing_reserve cpu_reserve = r.reserve;

	if (verbose)
		argc--, argv++;
	if (argc > 3) {
		fprintf(stderr, "usage: cost [-v] [MIX.json [REGION]]\n");
		return 2;
	}
	mix = argc > 1 ? argv[1] : "bench/cost/mix.json";
	region = argc > 2 ? argv[2] : "us-east-1";
	{
		json_error_t jerr;

		/* read before the mix: each pod's images are looked up in it */
		cost_platforms = json_load_file("bench/cost/platforms.json", 0, &jerr);
		if (!cost_platforms)
			fprintf(stderr,
				"cost: bench/cost/platforms.json: %s; every image is "
				"amd64 only\n",
				jerr.text);
	}
	{
		json_error_t jerr;
		json_t *z = json_load_file("bench/cost/spot-zones.json", 0, &jerr);

		cost_zones = json_incref(json_object_get(z, "types"));
		json_decref(z);
		if (!cost_zones)
			fprintf(stderr,
				"cost: bench/cost/spot-zones.json: %s; spot pods pay their "
				"catalog price in any zone\n",
				z ? "no \"types\"" : jerr.text);
	}
	{
		json_error_t jerr;
		json_t *u = json_load_file("bench/cost/usage.json", 0, &jerr);

		/* read before the mix: each burst pod's owner is looked up in it */
		cost_usage = json_incref(json_object_get(u, "owners"));
		json_decref(u);
		if (!cost_usage)
			fprintf(stderr,
				"cost: bench/cost/usage.json: %s; no owner has a history for the "
				"burst rule\n",
				u ? "no \"owners\"" : jerr.text);
	}
	if (catalog_load(region, &cat, &err) < 0 || cost_load_mix(&r, mix, &err) < 0) {
		fprintf(stderr, "cost: %s\n", err.msg);
		catalog_free(cat);
		return 1;
	}
	r.cat = cat;
	cpu_reserve.cpu_milli = COST_CPU_RESERVE_MILLI;
	for (size_t i = 0; i < r.n; i++) {
		const struct cost_pod *p = &r.pods[i];
		struct cost_result *res = &r.res[i];

		res->price[RULE_KIYOT] =
			cost_kiyot(&r, p, &r.reserve, res->kiyot_type, sizeof(res->kiyot_type));
		res->price[RULE_KIYOT_CPU] = cost_kiyot(&r, p, &cpu_reserve, NULL, 0);
		res->price[RULE_KIP] = cost_kip(&r, p, res);
		res->price[RULE_FARGATE] = cost_fargate(p);
		res->price[RULE_OPT] = cost_optimum(&r, p);
		res->kiyot_is_opt = res->price[RULE_KIYOT] >= 0 &&
				    fabs(res->price[RULE_KIYOT] - res->price[RULE_OPT]) < 1e-9;
		spot += p->spot;
		gpu += p->gpus > 0;
	}
	printf("Cost of %zu pods (%s: %zu spot, %zu with GPUs) in %s, on the shipped catalog "
	       "(%zu types, July 2026 prices; x86_64 only in (a) to (e))\n",
	       r.n, mix, spot, gpu, region, catalog_count(cat));
	sizing_format_demand(r.reserve.cpu_milli, r.reserve.memory_bytes, 0, reserve_text,
			     sizeof(reserve_text));
	printf("Cell reserve %s; burstable types pay surplus credits for sustained CPU over their "
	       "baseline; USD per hour\n\n",
	       reserve_text);
	cost_print_summary(&r);
	cost_print_classes(&r);
	if (verbose)
		cost_print_pods(&r);
	if (strcmp(region, "us-east-1") == 0) {
		struct catalog *old = NULL;

		if (catalog_load_file("kiyot/sizing/data/aws-instance-catalog-2020-us-east-1.json",
				      "us-east-1", &old, &err) < 0)
			fprintf(stderr, "cost: %s\n", err.msg);
		else
			cost_print_levers(&r, old);
		catalog_free(old);
	}
	json_decref(cost_platforms);
	json_decref(cost_zones);
	json_decref(cost_usage);
	free(r.pods);
	free(r.res);
	catalog_free(cat);
	return 0;
}
