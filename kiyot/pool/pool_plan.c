/*
 * pool_plan.c: the pool's arithmetic (pool_plan.h).
 */
#include "pool_plan.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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

int pool_adaptive_target(size_t arrivals, int window_s, double ready_s, int max)
{
	double want;

	if (!arrivals || window_s <= 0 || !(ready_s > 0))
		return 0;
	/* (the small slack keeps an exact product, 2 x 0.5, from rounding up to 2) */
	want = ceil((double)arrivals / window_s * ready_s - 1e-9);
	if (want < 1)
		want = 1;
	if (max > 0 && want > max)
		return max;
	return want > 1e6 ? 1000000 : (int)want;
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
