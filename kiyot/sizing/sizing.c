#include "sizing.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "xalloc.h"

#define GIB 1073741824.0
#define TIB 1099511627776.0
#define MIB (1LL << 20)

/* a + b, stopping at INT64_MAX (both are non-negative). */
static int64_t sat_add(int64_t a, int64_t b)
{
	return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* The larger of two values. */
static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* Writes v with up to three decimals, trailing zeros dropped: 200, 0.25, 0.4. */
static void sizing_format_number(double v, char *buf, size_t size)
{
	size_t len;

	snprintf(buf, size, "%.3f", v);
	len = strlen(buf);
	while (len > 0 && buf[len - 1] == '0')
		buf[--len] = '\0';
	if (len > 0 && buf[len - 1] == '.')
		buf[--len] = '\0';
}

/* Human form of a demand, as the error messages print it: whole MiB below 1 GiB, else GiB. */
void sizing_format_demand(int64_t cpu_milli, int64_t memory_bytes, int64_t gpus, char *buf,
			  size_t size)
{
	char cpu[48], mem[48];
	bool tib = (double)memory_bytes >= TIB;
	bool mib = memory_bytes > 0 && memory_bytes < (1LL << 30) && memory_bytes % MIB == 0;
	const char *unit = tib ? "TiB" : mib ? "MiB" : "GiB";
	double unit_bytes = tib ? TIB : mib ? (double)MIB : GIB;

	sizing_format_number((double)cpu_milli / 1000.0, cpu, sizeof(cpu));
	sizing_format_number((double)memory_bytes / unit_bytes, mem, sizeof(mem));
	if (gpus > 0)
		snprintf(buf, size, "%s vCPU / %s %s / %lld GPU", cpu, mem, unit, (long long)gpus);
	else
		snprintf(buf, size, "%s vCPU / %s %s", cpu, mem, unit);
}

/*
 * Unlimited-mode surplus credits, USD per vCPU-hour for Linux, as EC2's public pricing lists
 * them: T2, T3 and T3a $0.05, T4g $0.04. T1 has no unlimited mode.
 */
static const struct sizing_credit {
	const char *family;
	double price;
} sizing_credits[] = {
	{ "t2", 0.05 },
	{ "t3", 0.05 },
	{ "t3a", 0.05 },
	{ "t4g", 0.04 },
};

/* Two prices closer than this are equal (catalog prices have at most six decimals). */
#define SIZING_PRICE_EPSILON 1e-9

/* A type that fits, with its effective price for the need. */
struct sizing_cand {
	const struct catalog_type *t;
	double price;	/* list + credits */
	double credits; /* USD/hour */
};

/* Looks the family of a type name ("t3a" of "t3a.nano") up in the credit table. */
double sizing_surplus_credit_price(const char *instance_type)
{
	size_t len = strcspn(instance_type, ".");

	for (size_t i = 0; i < sizeof(sizing_credits) / sizeof(sizing_credits[0]); i++) {
		if (strlen(sizing_credits[i].family) == len &&
		    strncmp(sizing_credits[i].family, instance_type, len) == 0)
			return sizing_credits[i].price;
	}
	return -1;
}

/* Applies the fit rule of one type and prices it, credits for CPU above a baseline included. */
bool sizing_fits(const struct catalog_type *t, int64_t cpu_milli, int64_t memory_bytes,
		 int64_t gpus, bool spot, double *price, double *credits)
{
	double extra = 0;

	if (t->memory_bytes < memory_bytes || t->gpus < gpus || t->cpu_milli < cpu_milli)
		return false;
	if (t->burstable) {
		int64_t base = (int64_t)(t->baseline * 1000.0 + 0.5);

		if (cpu_milli > base) {
			double rate = sizing_surplus_credit_price(t->name);

			if (rate < 0)
				return false;
			extra = (double)(cpu_milli - base) / 1000.0 * rate;
		}
	}
	*price = (spot ? t->spot_price : t->price) + extra;
	if (credits)
		*credits = extra;
	return true;
}

/* Orders candidates by (effective price, memory, vCPUs, name), cheapest first. */
static int sizing_cmp(const struct sizing_cand *a, const struct sizing_cand *b)
{
	if (a->price < b->price - SIZING_PRICE_EPSILON)
		return -1;
	if (a->price > b->price + SIZING_PRICE_EPSILON)
		return 1;
	if (a->t->memory_bytes != b->t->memory_bytes)
		return a->t->memory_bytes < b->t->memory_bytes ? -1 : 1;
	if (a->t->cpu_milli != b->t->cpu_milli)
		return a->t->cpu_milli < b->t->cpu_milli ? -1 : 1;
	return strcmp(a->t->name, b->t->name);
}

/* Inserts a candidate into the sorted top list (at most SIZING_RUNNERS_UP + 1 entries). */
static void sizing_keep(struct sizing_cand *top, size_t *n, const struct sizing_cand *c)
{
	size_t max = SIZING_RUNNERS_UP + 1, i = *n;

	if (*n == max && sizing_cmp(c, &top[max - 1]) >= 0)
		return;
	if (*n < max)
		(*n)++;
	else
		i = max - 1;
	while (i > 0 && sizing_cmp(c, &top[i - 1]) < 0) {
		top[i] = top[i - 1];
		i--;
	}
	top[i] = *c;
}

/* Says why the type was chosen: the need, the price and its parts, the runners-up. */
static void sizing_reason(const struct catalog *c, const struct sizing_cand *top, size_t n,
			  const struct pod_demand *d, const struct sizing_reserve *r,
			  int64_t cpu_milli, struct sizing_choice *out)
{
	const struct catalog_type *t = top[0].t;
	struct err err = ERR_INIT;
	struct buf b = BUF_INIT;
	char dem[160];

	sizing_format_demand(d->cpu_milli, d->memory_bytes, d->gpus, dem, sizeof(dem));
	buf_appendf(&b, &err, "cheapest fitting %s", dem);
	if (r->cpu_milli > 0 || r->memory_bytes > 0) {
		sizing_format_demand(r->cpu_milli, r->memory_bytes, 0, dem, sizeof(dem));
		buf_appendf(&b, &err, " + reserve %s", dem);
	}
	if (d->instance_type)
		buf_appendf(&b, &err, " matching \"%s\"", d->instance_type);
	if (d->arch & CATALOG_ARCH_ARM64 || d->arch_why)
		buf_appendf(&b, &err, " on %s%s%s%s",
			    catalog_arch_name(d->arch ? d->arch : CATALOG_ARCH_X86_64),
			    d->arch_why ? " (" : "", d->arch_why ? d->arch_why : "",
			    d->arch_why ? ")" : "");
	buf_appendf(&b, &err, ": %s%s%s%s $%.4f/h%s (%s)", t->name,
		    d->arch & CATALOG_ARCH_ARM64 ? " (" : "",
		    d->arch & CATALOG_ARCH_ARM64 ? catalog_arch_name(out->arch) : "",
		    d->arch & CATALOG_ARCH_ARM64 ? ")" : "", top[0].price, d->spot ? " spot" : "",
		    catalog_price_source(c, t, d->spot));
	/* a spot type's interruption band (the Spot Instance Advisor's), which the EC2
	 * provider's near-tie rule weighs */
	if (d->spot && t->spot_band != CATALOG_SPOT_BAND_UNKNOWN)
		buf_appendf(&b, &err, ", interruption %s", catalog_spot_band_name(t->spot_band));
	else if (d->spot)
		buf_appendf(&b, &err, ", interruption band unknown");
	if (top[0].credits > 0)
		buf_appendf(&b, &err,
			    ", burstable with baseline %.2f vCPU: $%.4f/h + $%.4f/h surplus "
			    "credits for %.2f vCPU above it",
			    t->baseline, top[0].price - top[0].credits, top[0].credits,
			    (double)cpu_milli / 1000.0 - t->baseline);
	else if (t->burstable)
		buf_appendf(&b, &err, ", burstable with baseline %.2f vCPU", t->baseline);
	for (size_t i = 1; i < n; i++)
		buf_appendf(&b, &err, "%s%s $%.4f/h", i == 1 ? " (runners-up: " : ", ",
			    top[i].t->name, top[i].price);
	if (n > 1)
		buf_append(&b, ")", 1, &err);
	snprintf(out->reason, sizeof(out->reason), "%s", buf_str(&b));
	buf_release(&b);
}

/* The error when nothing fits: the demand, the pattern if any, and what to do. */
static int sizing_no_fit(const struct catalog *c, const struct pod_demand *d,
			 const struct sizing_reserve *r, struct err *err)
{
	char demand[160], res[160] = "";

	sizing_format_demand(d->cpu_milli, d->memory_bytes, d->gpus, demand, sizeof(demand));
	if (r->cpu_milli || r->memory_bytes) {
		char rs[128];

		sizing_format_demand(r->cpu_milli, r->memory_bytes, 0, rs, sizeof(rs));
		snprintf(res, sizeof(res), " (with the cell reserve of %s)", rs);
	}
	if (d->instance_type)
		return err_set(err, ENOENT,
			       "pod demand %s%s fits no instance type matching \"%s\" in %s; lower "
			       "the pod's requests or limits, or change "
			       "annotation " SIZING_ANNOTATION_INSTANCE_TYPE,
			       demand, res, d->instance_type, catalog_region(c));
	return err_set(err, ENOENT,
		       "pod demand %s%s fits no instance type in %s; lower the pod's requests or "
		       "limits",
		       demand, res, catalog_region(c));
}

/* Fills a choice from the ranked candidates. */
static void sizing_fill(const struct sizing_cand *top, size_t n, const struct pod_demand *d,
			struct sizing_choice *out)
{
	const struct catalog_type *t = top[0].t;

	memset(out, 0, sizeof(*out));
	snprintf(out->instance_type, sizeof(out->instance_type), "%s", t->name);
	out->price = top[0].price;
	out->credit_price = top[0].credits;
	out->list_price = top[0].price - top[0].credits;
	out->spot = d->spot;
	out->cpu = t->cpu;
	out->cpu_milli = t->cpu_milli;
	out->memory_bytes = t->memory_bytes;
	out->gpus = t->gpus;
	out->burstable = t->burstable;
	out->baseline = t->baseline;
	for (size_t i = 1; i < n; i++) {
		snprintf(out->runners_up[i - 1].instance_type,
			 sizeof(out->runners_up[i - 1].instance_type), "%s", top[i].t->name);
		out->runners_up[i - 1].price = top[i].price;
	}
	out->n_runners_up = n - 1;
}

/* The architecture sets sizing ranks apart, in order: a type may be in both. */
static const unsigned sizing_archs[] = { CATALOG_ARCH_X86_64, CATALOG_ARCH_ARM64 };
#define SIZING_N_ARCHS (sizeof(sizing_archs) / sizeof(sizing_archs[0]))

/* The error when a pattern names types, but none of an architecture the pod may run on. */
static int sizing_wrong_arch(const struct catalog *c, const struct pod_demand *d, unsigned allowed,
			     unsigned named, struct err *err)
{
	return err_set(err, ENOENT,
		       "annotation " SIZING_ANNOTATION_INSTANCE_TYPE
		       ": \"%s\" matches only %s instance types in %s, and the pod runs on %s "
		       "only%s%s%s; name a type of that architecture",
		       d->instance_type, catalog_arch_name(named), catalog_region(c),
		       catalog_arch_name(allowed), d->arch_why ? " (" : "",
		       d->arch_why ? d->arch_why : "", d->arch_why ? ")" : "");
}

/* Chooses the cheapest type that fits the demand plus the reserve, of an allowed architecture;
 * its runners-up are of its architecture. */
int sizing_pick(const struct catalog *c, const struct pod_demand *d,
		const struct sizing_reserve *reserve, struct sizing_choice *out, struct err *err)
{
	static const struct sizing_reserve dflt = SIZING_RESERVE_DEFAULT;
	const struct sizing_reserve *r = reserve ? reserve : &dflt;
	struct sizing_cand top[SIZING_N_ARCHS][SIZING_RUNNERS_UP + 1];
	size_t n[SIZING_N_ARCHS] = { 0 }, best = SIZING_N_ARCHS, matched = 0;
	unsigned allowed = d->arch & CATALOG_ARCH_ALL ? d->arch & CATALOG_ARCH_ALL
						      : CATALOG_ARCH_X86_64;
	unsigned named = 0;
	int64_t cpu = sat_add(max64(d->cpu_milli, 0), max64(r->cpu_milli, 0));
	int64_t mem = sat_add(max64(d->memory_bytes, 0), max64(r->memory_bytes, 0));
	int64_t gpus = max64(d->gpus, 0);

	for (size_t i = 0; i < catalog_count(c); i++) {
		struct sizing_cand cand = { .t = catalog_at(c, i) };

		if (d->instance_type && !catalog_type_matches(cand.t, d->instance_type))
			continue;
		named |= cand.t->arch;
		if (!(cand.t->arch & allowed))
			continue;
		matched++;
		/* GPU types are for GPU pods, or for pods that name them */
		if (!d->instance_type && gpus == 0 && cand.t->gpus > 0)
			continue;
		if (!sizing_fits(cand.t, cpu, mem, gpus, d->spot, &cand.price, &cand.credits))
			continue;
		for (size_t a = 0; a < SIZING_N_ARCHS; a++)
			if (cand.t->arch & allowed & sizing_archs[a])
				sizing_keep(top[a], &n[a], &cand);
	}
	if (d->instance_type && !named)
		return err_set(err, ENOENT,
			       "annotation " SIZING_ANNOTATION_INSTANCE_TYPE
			       ": \"%s\" matches no instance type in %s",
			       d->instance_type, catalog_region(c));
	if (d->instance_type && !matched)
		return sizing_wrong_arch(c, d, allowed, named, err);
	for (size_t a = 0; a < SIZING_N_ARCHS; a++)
		if (n[a] && (best == SIZING_N_ARCHS || sizing_cmp(&top[a][0], &top[best][0]) < 0))
			best = a;
	if (best == SIZING_N_ARCHS)
		return sizing_no_fit(c, d, r, err);
	sizing_fill(top[best], n[best], d, out);
	out->arch = sizing_archs[best];
	sizing_reason(c, top[best], n[best], d, r, cpu, out);
	return 0;
}

/* A container's need for one resource: its limit where that exceeds its request. */
static int64_t sizing_need(bool has_req, int64_t req, bool has_lim, int64_t lim)
{
	return max64(has_req ? req : 0, has_lim ? lim : 0);
}

/* Sums app containers and takes the largest init container, per resource. */
void sizing_demand_from_containers(const struct podspec_container *init, size_t n_init,
				   const struct podspec_container *app, size_t n_app,
				   struct pod_demand *out)
{
	int64_t icpu = 0, imem = 0, igpu = 0, acpu = 0, amem = 0, agpu = 0;
	int64_t scpu = 0, smem = 0, sgpu = 0; /* the sidecars started so far */

	for (size_t i = 0; i < n_init; i++) {
		const struct podspec_resources *q = &init[i].requests, *l = &init[i].limits;
		int64_t c = sizing_need(q->has_cpu, q->cpu_milli, l->has_cpu, l->cpu_milli);
		int64_t m =
			sizing_need(q->has_memory, q->memory_bytes, l->has_memory, l->memory_bytes);
		int64_t g = sizing_need(q->has_gpus, q->gpus, l->has_gpus, l->gpus);

		if (init[i].sidecar) {
			/* it keeps running: with every later init container and the app */
			scpu = sat_add(scpu, c);
			smem = sat_add(smem, m);
			sgpu = sat_add(sgpu, g);
			c = m = g = 0;
		}
		icpu = max64(icpu, sat_add(scpu, c));
		imem = max64(imem, sat_add(smem, m));
		igpu = max64(igpu, sat_add(sgpu, g));
	}
	for (size_t i = 0; i < n_app; i++) {
		const struct podspec_resources *q = &app[i].requests, *l = &app[i].limits;

		acpu = sat_add(acpu,
			       sizing_need(q->has_cpu, q->cpu_milli, l->has_cpu, l->cpu_milli));
		amem = sat_add(amem, sizing_need(q->has_memory, q->memory_bytes, l->has_memory,
						 l->memory_bytes));
		agpu = sat_add(agpu, sizing_need(q->has_gpus, q->gpus, l->has_gpus, l->gpus));
	}
	out->cpu_milli = max64(icpu, sat_add(acpu, scpu));
	out->memory_bytes = max64(imem, sat_add(amem, smem));
	out->gpus = max64(igpu, sat_add(agpu, sgpu));
}

void sizing_demand_from_pod(const struct podspec *p, struct pod_demand *out)
{
	sizing_demand_from_containers(p->init_containers, p->n_init_containers, p->containers,
				      p->n_containers, out);
	out->cpu_milli = sat_add(out->cpu_milli, p->overhead.cpu_milli);
	out->memory_bytes = sat_add(out->memory_bytes, p->overhead.memory_bytes);
}

/* The demand of a Pod: its containers and its Kiyot annotations. */
int sizing_demand_from_podspec(const struct podspec *p, struct pod_demand *out, struct err *err)
{
	const char *launch = podspec_annotation(p, SIZING_ANNOTATION_LAUNCH_TYPE);
	const char *type = podspec_annotation(p, SIZING_ANNOTATION_INSTANCE_TYPE);
	struct pod_demand d = { 0 };

	if (launch && strcmp(launch, "spot") != 0 && strcmp(launch, "on-demand") != 0)
		return err_set(err, EINVAL,
			       "annotation " SIZING_ANNOTATION_LAUNCH_TYPE
			       ": \"%s\" is not one of spot, on-demand",
			       launch);
	sizing_demand_from_pod(p, &d);
	d.spot = launch && strcmp(launch, "spot") == 0;
	d.instance_type = type && *type ? type : NULL;
	*out = d;
	return 0;
}
