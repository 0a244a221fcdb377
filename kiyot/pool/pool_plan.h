/*
 * pool_plan.h: the pool's arithmetic, without threads, cells or clocks of its own (pool.c
 * calls it; unit tests call it directly): a shape's arrivals over the window, the adaptive
 * target they give, and the caps applied to every shape's target at once.
 */
#ifndef KIYOT_POOL_PLAN_H
#define KIYOT_POOL_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* The times (any clock, ns) pods of one shape arrived, oldest first, at most POOL_ARRIVALS_MAX
 * (the oldest go first when more come). */
#define POOL_ARRIVALS_MAX 4096
struct pool_arrivals {
	int64_t *t;
	size_t n, cap;
};

void pool_arrivals_add(struct pool_arrivals *a, int64_t now_ns);
/* Forgets arrivals before since_ns; how many are left. */
size_t pool_arrivals_since(struct pool_arrivals *a, int64_t since_ns);
void pool_arrivals_release(struct pool_arrivals *a);

/*
 * The adaptive target of a shape: the standby cells that cover its arrivals while its cells
 * come up, ceil(arrivals / window_s x ready_s) (arrivals over the last window_s seconds, a cell
 * ready ready_s after its launch), at most max (0: no such bound). 0 without arrivals.
 */
int pool_adaptive_target(size_t arrivals, int window_s, double ready_s, int max);

/* One shape as the caps see it: the cells it wants, what one costs an hour, and the cells the
 * caps allow it (filled by pool_plan_caps). */
struct pool_plan_shape {
	int want;
	double price;
	int allowed;
};

/*
 * Applies the caps to every shape's want at once: the cells are handed out one per shape in
 * turn (in the order given) while a shape wants more, the total stays within max_cells (0: no
 * cap) and the sum of their prices within max_dollars (0: no cap). Returns the cells allowed.
 */
int pool_plan_caps(struct pool_plan_shape *s, size_t n, int max_cells, double max_dollars);

/* The images the pods of one shape used, counted over about the last POOL_IMAGES_PODS pods
 * (counts halve as more come), at most POOL_IMAGES_MAX images (the least used goes). */
#define POOL_IMAGES_MAX 16
#define POOL_IMAGES_PODS 64
struct pool_images {
	char *ref[POOL_IMAGES_MAX];
	unsigned n[POOL_IMAGES_MAX];
	size_t len;
	unsigned pods;
};

/* One pod of the shape used refs (a ref listed twice counts once). */
void pool_images_add(struct pool_images *im, const char *const *refs, size_t n);
/* The images at least half of the counted pods used, most used first, at most max, into out
 * (borrowed from im until it changes); how many. */
size_t pool_images_common(const struct pool_images *im, const char **out, size_t max);
void pool_images_release(struct pool_images *im);

#endif
