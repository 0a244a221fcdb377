/*
 * pool_plan.c: the pool's arithmetic (pool_plan.h).
 */
#include "pool_plan.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kube/cronsched.h"
#include "xalloc.h"

void pool_arrivals_add(struct pool_arrivals *a, int64_t now_ns)
{
	if (a->n == POOL_ARRIVALS_MAX) {
		memmove(a->t, a->t + 1, (a->n - 1) * sizeof(*a->t));
		a->n--;
	}
	xgrow((void **)&a->t, &a->cap, a->n + 1, sizeof(*a->t));
	a->t[a->n++] = now_ns;
}

size_t pool_arrivals_since(struct pool_arrivals *a, int64_t since_ns)
{
	size_t old = 0;

	while (old < a->n && a->t[old] < since_ns)
		old++;
	if (old) {
		memmove(a->t, a->t + old, (a->n - old) * sizeof(*a->t));
		a->n -= old;
	}
	return a->n;
}

void pool_arrivals_release(struct pool_arrivals *a)
{
	free(a->t);
	*a = (struct pool_arrivals){ 0 };
}

double pool_arrival_rate(const struct pool_arrivals *a, int64_t now_ns, int window_s)
{
	double sum = 0;

	if (window_s <= 0)
		return 0;
	for (size_t i = a->n; i-- > 0;) {
		double age = a->t[i] < now_ns ? (double)(now_ns - a->t[i]) / 1e9 : 0;

		if (age > (double)POOL_RATE_HORIZON * window_s)
			break;
		sum += exp(-age / window_s);
	}
	return sum / window_s;
}

double pool_burst_size(const struct pool_arrivals *a, int64_t now_ns, double span_s, int window_s)
{
	double best = 0;
	int64_t span = (int64_t)(span_s * 1e9);
	size_t lo = a->n;

	if (window_s <= 0 || !(span_s >= 0))
		return 0;
	/* newest first: the arrivals within span before each one, the oldest of them at lo */
	for (size_t i = a->n; i-- > 0;) {
		double age = a->t[i] < now_ns ? (double)(now_ns - a->t[i]) / 1e9 : 0, size;

		if (age > (double)POOL_RATE_HORIZON * window_s)
			break;
		if (lo > i)
			lo = i;
		while (lo > 0 && a->t[i] - a->t[lo - 1] <= span)
			lo--;
		size = (double)(i - lo + 1) * exp(-age / window_s);
		if (size > best)
			best = size;
	}
	return best;
}

int pool_poisson_quantile(double mean, double q, int cap)
{
	double p, sum;
	int k = 0;

	if (!(mean > 0))
		return 0;
	if (mean >= cap || mean > 700) /* (exp(-mean) would be 0) */
		return cap;
	p = sum = exp(-mean);
	while (sum < q && k < cap) {
		k++;
		p *= mean / k;
		sum += p;
	}
	return k;
}

int pool_adaptive_target(const struct pool_arrivals *a, int64_t now_ns,
			 const struct pool_adaptive *p)
{
	int cap = p->max > 0 ? p->max : 1000000, want;
	double q = p->hit_percent / 100.0, burst;

	if (p->window_s <= 0 || !(p->ready_s > 0) || !a->n ||
	    now_ns - a->t[a->n - 1] > (int64_t)p->window_s * 1000000000LL)
		return 0;
	if (q <= 0 || q >= 1)
		q = q <= 0 ? 0.5 : 0.999;
	want = pool_poisson_quantile(pool_arrival_rate(a, now_ns, p->window_s) * p->ready_s, q,
				     cap);
	burst = p->burst_s > 0 ? pool_burst_size(a, now_ns, p->burst_s, p->window_s) : 0;
	/* (the small slack keeps an exact size from rounding up) */
	if (burst > want)
		want = burst - 1e-9 > cap ? cap : (int)ceil(burst - 1e-9);
	if (want < 1)
		want = 1;
	return want > cap ? cap : want;
}

int pool_plan_caps(struct pool_plan_shape *s, size_t n, int max_cells, double max_dollars)
{
	double dollars = 0;
	int total = 0;
	bool more = true;

	for (size_t i = 0; i < n; i++)
		s[i].allowed = 0;
	while (more) {
		more = false;
		for (size_t i = 0; i < n; i++) {
			if (s[i].allowed >= s[i].want)
				continue;
			if (max_cells > 0 && total + 1 > max_cells)
				return total;
			if (max_dollars > 0 && dollars + s[i].price > max_dollars + 1e-9)
				continue; /* a cheaper shape may still fit */
			s[i].allowed++;
			total++;
			dollars += s[i].price;
			more = true;
		}
	}
	return total;
}

int pool_cron_extra(const struct pool_cron_run *r, size_t n, int64_t now_s, double grace_s)
{
	int extra = 0;

	for (size_t i = 0; i < n; i++)
		if ((double)(now_s - r[i].at_s) <= grace_s && r[i].claimed < r[i].pods)
			extra += r[i].pods - r[i].claimed;
	return extra;
}

double pool_cron_lead(double ready_s, int pods, int launches_max)
{
	int waves = launches_max > 0 && pods > 0 ? (pods + launches_max - 1) / launches_max : 1;

	return ready_s * waves + POOL_CRON_MARGIN_S;
}

size_t pool_cron_advance(struct pool_cron_run *r, size_t *n, const struct cronsched *sched,
			 int pods, int64_t *seen_s, int64_t now_s, double lead_s, double grace_s)
{
	size_t w = 0, came = 0;

	for (size_t i = 0; i < *n; i++)
		if ((double)(now_s - r[i].at_s) <= grace_s)
			r[w++] = r[i];
	*n = w;
	if ((double)(now_s - *seen_s) > grace_s)
		*seen_s = now_s - (int64_t)grace_s; /* (older runs no longer matter) */
	while (*n < POOL_CRON_RUNS) {
		int64_t t = cronsched_next(sched, *seen_s);

		if (t < 0 || (double)(t - now_s) > lead_s)
			break;
		*seen_s = t;
		r[(*n)++] = (struct pool_cron_run){ t, pods, 0 };
		came++;
	}
	return came;
}

bool pool_cron_claim(struct pool_cron_run *r, size_t n, int64_t now_s, double grace_s)
{
	/* a run's pods come at its time or after it (a second's slack for the clocks) */
	for (size_t i = 0; i < n; i++)
		if (now_s >= r[i].at_s - 1 && (double)(now_s - r[i].at_s) <= grace_s &&
		    r[i].claimed < r[i].pods) {
			r[i].claimed++;
			return true;
		}
	return false;
}

/* The entry of ref, made (the least used one replaced when full); its index. */
static size_t image_slot(struct pool_images *im, const char *ref)
{
	size_t least = 0;

	for (size_t i = 0; i < im->len; i++)
		if (!strcmp(im->ref[i], ref))
			return i;
	if (im->len < POOL_IMAGES_MAX) {
		im->ref[im->len] = xstrdup(ref);
		im->n[im->len] = 0;
		return im->len++;
	}
	for (size_t i = 1; i < im->len; i++)
		if (im->n[i] < im->n[least])
			least = i;
	free(im->ref[least]);
	im->ref[least] = xstrdup(ref);
	im->n[least] = 0;
	return least;
}

void pool_images_add(struct pool_images *im, const char *const *refs, size_t n)
{
	if (im->pods >= POOL_IMAGES_PODS) {
		im->pods /= 2;
		for (size_t i = 0; i < im->len; i++)
			im->n[i] /= 2;
	}
	im->pods++;
	for (size_t i = 0; i < n; i++) {
		bool again = false;

		if (!refs[i] || !refs[i][0])
			continue;
		for (size_t j = 0; j < i && !again; j++)
			again = refs[j] && !strcmp(refs[j], refs[i]);
		if (!again)
			im->n[image_slot(im, refs[i])]++;
	}
}

size_t pool_images_common(const struct pool_images *im, const char **out, size_t max)
{
	size_t n = 0;
	bool taken[POOL_IMAGES_MAX] = { false };

	while (n < max) {
		size_t best = im->len;

		for (size_t i = 0; i < im->len; i++)
			if (!taken[i] && 2 * im->n[i] >= im->pods && im->n[i] > 0 &&
			    (best == im->len || im->n[i] > im->n[best]))
				best = i;
		if (best == im->len)
			break;
		taken[best] = true;
		out[n++] = im->ref[best];
	}
	return n;
}

void pool_images_release(struct pool_images *im)
{
	for (size_t i = 0; i < im->len; i++)
		free(im->ref[i]);
	*im = (struct pool_images){ 0 };
}
