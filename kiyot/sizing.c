#include "sizing.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "xalloc.h"

#define GIB 1073741824.0
#define TIB 1099511627776.0

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

/* Human form of a demand, as the error messages print it. */
void sizing_format_demand(int64_t cpu_milli, int64_t memory_bytes, int64_t gpus, char *buf,
			  size_t size)
{
	char cpu[48], mem[48];
	bool tib = (double)memory_bytes >= TIB;

	sizing_format_number((double)cpu_milli / 1000.0, cpu, sizeof(cpu));
	sizing_format_number((double)memory_bytes / (tib ? TIB : GIB), mem, sizeof(mem));
	if (gpus > 0)
		snprintf(buf, size, "%s vCPU / %s %s / %lld GPU", cpu, mem, tib ? "TiB" : "GiB",
			 (long long)gpus);
	else
		snprintf(buf, size, "%s vCPU / %s %s", cpu, mem, tib ? "TiB" : "GiB");
}

/* The price that counts for this pod. */
static double sizing_price(const struct catalog_type *t, bool spot)
{
	return spot ? t->spot_price : t->price;
}

/* Orders candidates by (price, memory, cpu, name), cheapest first. */
static int sizing_cmp(const struct catalog_type *a, const struct catalog_type *b, bool spot)
{
	double pa = sizing_price(a, spot), pb = sizing_price(b, spot);

	if (pa != pb)
		return pa < pb ? -1 : 1;
	if (a->memory_bytes != b->memory_bytes)
		return a->memory_bytes < b->memory_bytes ? -1 : 1;
	if (a->cpu_milli != b->cpu_milli)
		return a->cpu_milli < b->cpu_milli ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* Inserts t into the sorted top list (at most SIZING_RUNNERS_UP + 1 entries). */
static void sizing_keep(const struct catalog_type **top, size_t *n, const struct catalog_type *t,
			bool spot)
{
	size_t max = SIZING_RUNNERS_UP + 1, i = *n;

	if (*n == max && sizing_cmp(t, top[max - 1], spot) >= 0)
		return;
	if (*n < max)
		(*n)++;
	else
		i = max - 1;
	while (i > 0 && sizing_cmp(t, top[i - 1], spot) < 0) {
		top[i] = top[i - 1];
		i--;
	}
	top[i] = t;
}

/* Says why the type was chosen, naming the runners-up. */
static void sizing_reason(const struct catalog_type *const *top, size_t n, int64_t cpu_milli,
			  int64_t memory_bytes, int64_t gpus, const struct pod_demand *d,
			  struct sizing_choice *out)
{
	struct err err = ERR_INIT;
	struct buf b = BUF_INIT;

	buf_appendf(&b, &err, "cheapest fitting %.2f vCPU/%.2f GiB", (double)cpu_milli / 1000.0,
		    (double)memory_bytes / GIB);
	if (gpus > 0)
		buf_appendf(&b, &err, "/%lld GPU", (long long)gpus);
	if (d->instance_type)
		buf_appendf(&b, &err, " matching \"%s\"", d->instance_type);
	buf_appendf(&b, &err, ": %s $%.4f/h%s", top[0]->name, sizing_price(top[0], d->spot),
		    d->spot ? " spot" : "");
	if (top[0]->burstable)
		buf_appendf(&b, &err, ", burstable with baseline %.2f vCPU", top[0]->baseline);
	for (size_t i = 1; i < n; i++)
		buf_appendf(&b, &err, "%s%s $%.4f/h", i == 1 ? " (runners-up: " : ", ",
			    top[i]->name, sizing_price(top[i], d->spot));
	if (n > 1)
		buf_append(&b, ")", 1, &err);
	snprintf(out->reason, sizeof(out->reason), "%s", buf_str(&b));
	buf_release(&b);
}

/* The error when nothing fits: the demand, the pattern if any, and what to do. */
static int sizing_no_fit(const struct catalog *c, const struct pod_demand *d, int64_t cpu_milli,
			 int64_t memory_bytes, const struct sizing_reserve *r, struct err *err)
{
	char demand[160], res[160] = "";

	sizing_format_demand(cpu_milli, memory_bytes, d->gpus, demand, sizeof(demand));
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

/* Chooses the cheapest type that fits the demand plus the reserve. */
int sizing_pick(const struct catalog *c, const struct pod_demand *d,
		const struct sizing_reserve *reserve, struct sizing_choice *out, struct err *err)
{
	static const struct sizing_reserve none = SIZING_RESERVE_DEFAULT;
	const struct sizing_reserve *r = reserve ? reserve : &none;
	const struct catalog_type *top[SIZING_RUNNERS_UP + 1];
	int64_t cpu = sat_add(max64(d->cpu_milli, 0), max64(r->cpu_milli, 0));
	int64_t mem = sat_add(max64(d->memory_bytes, 0), max64(r->memory_bytes, 0));
	size_t n = 0, matched = 0;

	for (size_t i = 0; i < catalog_count(c); i++) {
		const struct catalog_type *t = catalog_at(c, i);

		if (d->instance_type && !catalog_type_matches(t, d->instance_type))
			continue;
		matched++;
		if (t->cpu_milli >= cpu && t->memory_bytes >= mem && t->gpus >= d->gpus)
			sizing_keep(top, &n, t, d->spot);
	}
	if (d->instance_type && !matched)
		return err_set(err, ENOENT,
			       "annotation " SIZING_ANNOTATION_INSTANCE_TYPE
			       ": \"%s\" matches no instance type in %s",
			       d->instance_type, catalog_region(c));
	if (n == 0)
		return sizing_no_fit(c, d, d->cpu_milli, d->memory_bytes, r, err);
	memset(out, 0, sizeof(*out));
	snprintf(out->instance_type, sizeof(out->instance_type), "%s", top[0]->name);
	out->price = sizing_price(top[0], d->spot);
	out->spot = d->spot;
	out->cpu = top[0]->cpu;
	out->cpu_milli = top[0]->cpu_milli;
	out->memory_bytes = top[0]->memory_bytes;
	out->gpus = top[0]->gpus;
	out->burstable = top[0]->burstable;
	out->baseline = top[0]->baseline;
	sizing_reason(top, n, cpu, mem, d->gpus, d, out);
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

	for (size_t i = 0; i < n_init; i++) {
		const struct podspec_resources *q = &init[i].requests, *l = &init[i].limits;

		icpu = max64(icpu, sizing_need(q->has_cpu, q->cpu_milli, l->has_cpu, l->cpu_milli));
		imem = max64(imem, sizing_need(q->has_memory, q->memory_bytes, l->has_memory,
					       l->memory_bytes));
		igpu = max64(igpu, sizing_need(q->has_gpus, q->gpus, l->has_gpus, l->gpus));
	}
	for (size_t i = 0; i < n_app; i++) {
		const struct podspec_resources *q = &app[i].requests, *l = &app[i].limits;

		acpu = sat_add(acpu,
			       sizing_need(q->has_cpu, q->cpu_milli, l->has_cpu, l->cpu_milli));
		amem = sat_add(amem, sizing_need(q->has_memory, q->memory_bytes, l->has_memory,
						 l->memory_bytes));
		agpu = sat_add(agpu, sizing_need(q->has_gpus, q->gpus, l->has_gpus, l->gpus));
	}
	out->cpu_milli = max64(icpu, acpu);
	out->memory_bytes = max64(imem, amem);
	out->gpus = max64(igpu, agpu);
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
	sizing_demand_from_containers(p->init_containers, p->n_init_containers, p->containers,
				      p->n_containers, &d);
	d.spot = launch && strcmp(launch, "spot") == 0;
	d.instance_type = type && *type ? type : NULL;
	*out = d;
	return 0;
}
