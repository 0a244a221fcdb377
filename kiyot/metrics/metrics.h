/*
 * metrics.h: kiyot's figures for Prometheus: a small registry of counters, gauges and
 * histograms with label sets, its text exposition (format 0.0.4), and the figures the rest of
 * kiyot reports.
 *
 *	struct metrics_family *f = metrics_counter(r, "kiyot_x_total", "What it counts.",
 *						   (const char *const[]){ "kind", NULL });
 *	metrics_add(f, (const char *const[]){ "a" }, 1);          from any thread
 *	metrics_render(r, &buf, &err);                           what GET /metrics answers
 *
 * A family is made once (its name, help, type, label names and buckets are fixed) and lives
 * as long as its registry; a series (one set of label values) is made at its first update and
 * kept. An update takes the family's own mutex for a lookup and an addition, nothing else, so
 * CRI calls observed at once wait only for each other, and only when they land in the same
 * family. A family holds at most METRICS_MAX_SERIES series: updates of further label sets are
 * dropped (logged once), so label values taken from outside input cannot grow it without end.
 *
 * Figures known only at scrape time (counted from kiyot's records, read from /proc) come from
 * collectors: functions the registry calls at each render, which write whole families with
 * metrics_write_family and metrics_write_sample. A collector's family names must not be the
 * registry's own or another collector's.
 *
 * Names follow Prometheus' conventions: a kiyot_ prefix, base units (seconds, bytes, dollars),
 * counters ending in _total. Label values are escaped (\\, \", \n); help text too (\\, \n).
 *
 * Thread safety: everything here may be called from any thread. A collector runs with the
 * registry's lock held: it may take kiyot's locks (the records' lock) but must not update or render
 * the registry itself. Lock order: the registry's lock, then the records' lock, then a family's lock
 * (innermost: nothing is taken under it).
 */
#ifndef KIYOT_METRICS_H
#define KIYOT_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"

#define METRICS_MAX_LABELS 8
#define METRICS_MAX_BUCKETS 32
#define METRICS_MAX_SERIES 4096

enum metrics_type {
	METRICS_COUNTER,
	METRICS_GAUGE,
	METRICS_HISTOGRAM,
};

struct metrics_registry;
struct metrics_family;
struct metrics_writer;
struct metrics_collector;

struct metrics_registry *metrics_registry_new(void);
/* Frees the registry, its families and its collectors (no thread may still use them). */
void metrics_registry_free(struct metrics_registry *r);
/* The process's registry: what kiyot serves, and where the figures below go. */
struct metrics_registry *metrics_default(void);

/* A new family. labels: NULL-terminated label names (NULL: none), at most METRICS_MAX_LABELS;
 * buckets: a histogram's upper bounds, increasing, at most METRICS_MAX_BUCKETS (+Inf is
 * implied). name, help and labels are copied. A name made twice in one registry, or a bad
 * name, aborts: families are made by kiyot's code, not from input. */
struct metrics_family *metrics_counter(struct metrics_registry *r, const char *name,
				       const char *help, const char *const *labels);
struct metrics_family *metrics_gauge(struct metrics_registry *r, const char *name, const char *help,
				     const char *const *labels);
struct metrics_family *metrics_histogram(struct metrics_registry *r, const char *name,
					 const char *help, const char *const *labels,
					 const double *buckets, size_t n_buckets);

/* Updates the series of values (one per label name, in their order; NULL for a family without
 * labels; a NULL value counts as ""): a counter grows by v (v < 0 is ignored), a gauge is set
 * to v or grows by v, a histogram observes v. */
void metrics_add(struct metrics_family *f, const char *const *values, double v);
void metrics_set(struct metrics_family *f, const char *const *values, double v);
void metrics_observe(struct metrics_family *f, const char *const *values, double v);

/* Collectors: fn(ctx, w) at each render, in the order added. metrics_collector_remove returns
 * once no call of fn is under way and none will come. */
typedef void metrics_collect_fn(void *ctx, struct metrics_writer *w);
struct metrics_collector *metrics_collector_add(struct metrics_registry *r, metrics_collect_fn *fn,
						void *ctx);
void metrics_collector_remove(struct metrics_registry *r, struct metrics_collector *c);
/* In a collector: a family's HELP and TYPE lines (type: counter or gauge), then its samples:
 * n label names and values (values escaped here). */
void metrics_write_family(struct metrics_writer *w, const char *name, const char *help,
			  enum metrics_type type);
void metrics_write_sample(struct metrics_writer *w, const char *name, const char *const *labels,
			  const char *const *values, size_t n, double v);

/* Appends the exposition of every family (in the order made) and then of every collector to
 * out. Fails only when out's cap is reached (EFBIG). */
int metrics_render(struct metrics_registry *r, struct buf *out, struct err *err);
/* The exposition's content type. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Helpers the exposition is made with (exposed for tests): a value as Prometheus writes
 * it (shortest text that reads back the same; +Inf, -Inf, NaN), and a label value escaped. */
void metrics_format_value(double v, char *out, size_t size);
int metrics_escape(struct buf *out, const char *s, struct err *err);

/* ---- kiyot's figures, in metrics_default() ---- */

/* rpc_server_config.observe for the CRI server: kiyot_cri_requests_total{method,code} and
 * kiyot_cri_request_duration_seconds{method}. method is the table's path (its last element
 * is the label) or NULL for a method the server does not know ("unknown"); status a gRPC
 * status code. arg is unused. */
void metrics_cri_observe(void *arg, const char *method, int status, double seconds);

/* A step of a cell's launch took seconds: kiyot_cell_launch_duration_seconds{step}, step one
 * of sizing, provider (the launch call), boot (until the agent answered, enrolled). */
void metrics_launch_step(const char *step, double seconds);
/* A launch failed: kiyot_cell_launch_failures_total{reason}; reason a short fixed word
 * (sizing, provider, boot, cancelled, ...), never an error message. */
void metrics_launch_failure(const char *reason);
/* A call to a provider's API: kiyot_provider_calls_total{provider,action,outcome} and
 * kiyot_provider_call_duration_seconds{provider,action}; outcome one of ok, throttled,
 * capacity, error. */
void metrics_provider_call(const char *provider, const char *action, const char *outcome,
			   double seconds);
/* An image pull (the node's, or one asked of a cell): kiyot_image_pulls_total{outcome}
 * (ok or error), kiyot_image_pull_bytes_total (bytes brought in, 0 when none were) and
 * kiyot_image_pull_duration_seconds. */
void metrics_image_pull(const char *outcome, uint64_t bytes, double seconds);

/* Makes the families above now, so that a scrape lists them before their first update. */
void metrics_figures_init(void);

/* kiyot_cells{phase,provider,instance_type,market}, kiyot_cells_price_dollars_per_hour
 * {namespace} and kiyot_spend_dollars_total, counted from k's records at each scrape of
 * metrics_default() (cellfigures.c says how prices are known) until metrics_cells_remove. */
struct kiyot;
struct metrics_cells;
struct metrics_cells *metrics_cells_add(struct kiyot *k);
void metrics_cells_remove(struct metrics_cells *mc);

/* The gRPC status code's name ("OK", "NOT_FOUND"; "UNKNOWN" for one out of range). */
const char *metrics_grpc_code_name(int status);

#endif
