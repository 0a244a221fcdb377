/*
 * cellfigures.c: the figures of kiyot's cells, counted from its records at each scrape:
 * cells by phase, provider, instance type and market; the hourly price of the live ones by
 * namespace; and the spend since kiyot started, the price integrated over time.
 *
 * Prices: the records keep a cell's instance type and its pod's launch type (the
 * pod.elotl.co/launch-type annotation), not what it was sized at; the price is the catalog's
 * for that type now (its spot price for a spot cell, else its on-demand price), as on the
 * Cell objects (cellsync.c). A local cell is priced as the type it stands for. The spend grows
 * at each scrape by the price of the cells live then times the time since the scrape before
 * (or since start), so a cell that came and went between two scrapes is not counted.
 */
#include "metrics.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cells/provision.h"
#include "clock.h"
#include "cri/cri.h"
#include "sizing/catalog.h"
#include "daemon/kiyot.h"
#include "xalloc.h"

struct metrics_cells {
	struct kiyot *k;
	struct metrics_collector *col;
	int64_t last_ns; /* the spend counts up to here */
	double spend;	 /* dollars */
};

/* One line of kiyot_cells, or of the price by namespace. */
struct tally {
	const char *phase, *type, *market, *ns; /* borrowed from the snapshot's records */
	double n;
};

static const char *phase_of(const struct sandbox *sb)
{
	if (sb->phase == SANDBOX_LAUNCHING)
		return "Pending";
	if (sb->phase == SANDBOX_STOPPING)
		return "Terminating";
	return sb->state == SANDBOX_READY ? "Running" : "NotReady";
}

static bool is_spot(const struct sandbox *sb)
{
	const char *lt = cri_map_get((void **)sb->config->annotations, sb->config->n_annotations,
				     ANN_LAUNCH_TYPE);

	return lt && strcmp(lt, "spot") == 0;
}

/* Adds n to the entry with key's strings, made when new. */
static void tally_add(struct tally **v, size_t *nv, size_t *cap, struct tally key, double n)
{
	for (size_t i = 0; i < *nv; i++) {
		struct tally *t = &(*v)[i];

		if (strcmp(t->phase, key.phase) == 0 && strcmp(t->type, key.type) == 0 &&
		    strcmp(t->market, key.market) == 0 && strcmp(t->ns, key.ns) == 0) {
			t->n += n;
			return;
		}
	}
	xgrow((void **)v, cap, *nv + 1, sizeof(**v));
	key.n = n;
	(*v)[(*nv)++] = key;
}

static void cells_collect(void *ctx, struct metrics_writer *w)
{
	static const char *const cell_labels[] = { "phase", "provider", "instance_type", "market" };
	static const char *const price_labels[] = { "namespace" };
	struct metrics_cells *mc = ctx;
	struct kiyot *k = mc->k;
	struct catalog *cat = k->catalog ? catalog_acquire(k->catalog) : NULL;
	const char *provider = k->provider.ops ? k->provider.ops->name : "";
	struct tally *cells = NULL, *prices = NULL;
	size_t n_cells = 0, cap_cells = 0, n_prices = 0, cap_prices = 0;
	struct sandbox **v;
	double total = 0;
	int64_t now;
	size_t n;

	records_lock(k->records);
	n = records_sandboxes(k->records, &v);
	for (size_t i = 0; i < n; i++) {
		const struct sandbox *sb = v[i];
		const struct catalog_type *t;
		bool spot;
		double price;

		/* a sandbox whose cell was torn down (or not yet asked for) has none */
		if (!sb->cell_id[0] && sb->phase != SANDBOX_LAUNCHING)
			continue;
		spot = is_spot(sb);
		tally_add(&cells, &n_cells, &cap_cells,
			  (struct tally){ phase_of(sb), sb->instance_type ? sb->instance_type : "",
					  spot ? "spot" : "on-demand", "", 0 },
			  1);
		t = cat && sb->instance_type ? catalog_find(cat, sb->instance_type) : NULL;
		price = t ? (spot ? t->spot_price : t->price) : 0;
		total += price;
		tally_add(&prices, &n_prices, &cap_prices,
			  (struct tally){ "", "", "", sb->config->metadata->namespace_, 0 }, price);
	}
	/* what the tallies point at is fixed in the records, which the snapshot holds */
	records_unlock(k->records);
	now = clock_mono_ns();
	mc->spend += total * (double)(now - mc->last_ns) / 3600e9;
	mc->last_ns = now;
	metrics_write_family(w, "kiyot_cells",
			     "Cells kiyot keeps, by phase, provider, instance type and market.",
			     METRICS_GAUGE);
	for (size_t i = 0; i < n_cells; i++)
		metrics_write_sample(w, "kiyot_cells", cell_labels,
				     (const char *const[]){ cells[i].phase, provider, cells[i].type,
							    cells[i].market },
				     4, cells[i].n);
	metrics_write_family(w, "kiyot_cells_price_dollars_per_hour",
			     "The catalog's hourly price of the live cells, summed by namespace.",
			     METRICS_GAUGE);
	for (size_t i = 0; i < n_prices; i++)
		metrics_write_sample(w, "kiyot_cells_price_dollars_per_hour", price_labels,
				     (const char *const[]){ prices[i].ns }, 1, prices[i].n);
	sandboxes_put(v, n);
	if (cat)
		catalog_release(cat);
	free(cells);
	free(prices);
	metrics_write_family(w, "kiyot_spend_dollars_total",
			     "The price of kiyot's cells integrated over time since it started "
			     "(counted at each scrape).",
			     METRICS_COUNTER);
	metrics_write_sample(w, "kiyot_spend_dollars_total", NULL, NULL, 0, mc->spend);
}

struct metrics_cells *metrics_cells_add(struct kiyot *k)
{
	struct metrics_cells *mc = xcalloc(1, sizeof(*mc));

	mc->k = k;
	mc->last_ns = clock_mono_ns();
	mc->col = metrics_collector_add(metrics_default(), cells_collect, mc);
	return mc;
}

void metrics_cells_remove(struct metrics_cells *mc)
{
	if (!mc)
		return;
	metrics_collector_remove(metrics_default(), mc->col);
	free(mc);
}
