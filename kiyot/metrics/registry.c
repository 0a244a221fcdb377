/*
 * registry.c: families of series and their text exposition (metrics.h). Each family keeps
 * its series in a hash of their label values (for updates) and in a list in the order they
 * were made (for the exposition), under a mutex of its own.
 */
#include "metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "xalloc.h"

#define BUCKETS 256 /* hash buckets of a family's series */

struct series {
	struct series *next;  /* in the order made */
	struct series *hnext; /* in its hash bucket */
	uint32_t hash;
	char **values;
	double value;	  /* counter, gauge; a histogram's sum */
	uint64_t count;	  /* histogram: observations */
	uint64_t *counts; /* histogram: per bucket, not cumulative (+Inf last) */
};

struct metrics_family {
	struct metrics_family *next;
	enum metrics_type type;
	char *name, *help;
	char *labels[METRICS_MAX_LABELS];
	size_t n_labels;
	double buckets[METRICS_MAX_BUCKETS];
	size_t n_buckets;
	pthread_mutex_t lock;
	struct series *head, *tail;
	struct series *hash[BUCKETS];
	size_t n_series;
	bool full_told;
};

struct metrics_collector {
	struct metrics_collector *next;
	metrics_collect_fn *fn;
	void *ctx;
};

struct metrics_writer {
	struct buf *out;
	struct err *err;
	int failed;
};

struct metrics_registry {
	pthread_mutex_t lock; /* the lists; held across a render */
	struct metrics_family *families, *last;
	struct metrics_collector *collectors;
};

struct metrics_registry *metrics_registry_new(void)
{
	struct metrics_registry *r = xcalloc(1, sizeof(*r));

	pthread_mutex_init(&r->lock, NULL);
	return r;
}

static void series_free(struct series *s, size_t n_labels)
{
	for (size_t i = 0; i < n_labels; i++)
		free(s->values[i]);
	free(s->values);
	free(s->counts);
	free(s);
}

void metrics_registry_free(struct metrics_registry *r)
{
	if (!r)
		return;
	while (r->families) {
		struct metrics_family *f = r->families;

		r->families = f->next;
		while (f->head) {
			struct series *s = f->head;

			f->head = s->next;
			series_free(s, f->n_labels);
		}
		for (size_t i = 0; i < f->n_labels; i++)
			free(f->labels[i]);
		free(f->name);
		free(f->help);
		pthread_mutex_destroy(&f->lock);
		free(f);
	}
	while (r->collectors) {
		struct metrics_collector *c = r->collectors;

		r->collectors = c->next;
		free(c);
	}
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static struct metrics_registry *default_registry;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void)
{
	default_registry = metrics_registry_new();
}

struct metrics_registry *metrics_default(void)
{
	pthread_once(&default_once, default_init);
	return default_registry;
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* (labels: no colon) */
static bool name_valid(const char *s, bool label)
{
	if (!s || !s[0] || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || (*s == ':' && !label)))
			return false;
	return true;
}

static struct metrics_family *family_new(struct metrics_registry *r, enum metrics_type type,
					 const char *name, const char *help,
					 const char *const *labels, const double *buckets,
					 size_t n_buckets)
{
	struct metrics_family *f = xcalloc(1, sizeof(*f));

	if (!name_valid(name, false) || n_buckets > METRICS_MAX_BUCKETS) {
		log_error("metrics: family \"%s\": bad name or too many buckets", name);
		abort();
	}
	f->type = type;
	f->name = xstrdup(name);
	f->help = xstrdup(help ? help : "");
	for (; labels && labels[f->n_labels]; f->n_labels++) {
		if (f->n_labels == METRICS_MAX_LABELS || !name_valid(labels[f->n_labels], true) ||
		    strcmp(labels[f->n_labels], "le") == 0) {
			log_error("metrics: family %s: bad label %s", name, labels[f->n_labels]);
			abort();
		}
		f->labels[f->n_labels] = xstrdup(labels[f->n_labels]);
	}
	for (size_t i = 0; i < n_buckets; i++) {
		if (i > 0 && !(buckets[i] > buckets[i - 1])) {
			log_error("metrics: family %s: buckets must increase", name);
			abort();
		}
		f->buckets[i] = buckets[i];
	}
	f->n_buckets = n_buckets;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_lock(&r->lock);
	for (struct metrics_family *o = r->families; o; o = o->next)
		if (strcmp(o->name, name) == 0) {
			log_error("metrics: family %s made twice", name);
			abort();
		}
	if (r->last)
		r->last->next = f;
	else
		r->families = f;
	r->last = f;
	pthread_mutex_unlock(&r->lock);
	return f;
}

struct metrics_family *metrics_counter(struct metrics_registry *r, const char *name,
				       const char *help, const char *const *labels)
{
	return family_new(r, METRICS_COUNTER, name, help, labels, NULL, 0);
}

struct metrics_family *metrics_gauge(struct metrics_registry *r, const char *name, const char *help,
				     const char *const *labels)
{
	return family_new(r, METRICS_GAUGE, name, help, labels, NULL, 0);
}

struct metrics_family *metrics_histogram(struct metrics_registry *r, const char *name,
					 const char *help, const char *const *labels,
					 const double *buckets, size_t n_buckets)
{
	return family_new(r, METRICS_HISTOGRAM, name, help, labels, buckets, n_buckets);
}

static const char *value_at(const char *const *values, size_t i)
{
	return values && values[i] ? values[i] : "";
}

/* FNV-1a over the values, each ended by a 0xff byte (which UTF-8 never holds). */
static uint32_t values_hash(const struct metrics_family *f, const char *const *values)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < f->n_labels; i++) {
		for (const unsigned char *p = (const unsigned char *)value_at(values, i); *p; p++)
			h = (h ^ *p) * 16777619u;
		h = (h ^ 0xffu) * 16777619u;
	}
	return h;
}

/* The series of values, made when new; NULL when the family is full. Needs f->lock. */
static struct series *series_of(struct metrics_family *f, const char *const *values)
{
	uint32_t h = values_hash(f, values);
	struct series *s;

	for (s = f->hash[h % BUCKETS]; s; s = s->hnext) {
		size_t i = 0;

		if (s->hash != h)
			continue;
		while (i < f->n_labels && strcmp(s->values[i], value_at(values, i)) == 0)
			i++;
		if (i == f->n_labels)
			return s;
	}
	if (f->n_series >= METRICS_MAX_SERIES) {
		if (!f->full_told)
			log_warn("metrics: %s has %d series, the most it keeps: updates of new "
				 "label "
				 "values are dropped",
				 f->name, METRICS_MAX_SERIES);
		f->full_told = true;
		return NULL;
	}
	s = xcalloc(1, sizeof(*s));
	s->hash = h;
	s->values = xcalloc(f->n_labels + 1, sizeof(char *));
	for (size_t i = 0; i < f->n_labels; i++)
		s->values[i] = xstrdup(value_at(values, i));
	if (f->type == METRICS_HISTOGRAM)
		s->counts = xcalloc(f->n_buckets + 1, sizeof(uint64_t));
	s->hnext = f->hash[h % BUCKETS];
	f->hash[h % BUCKETS] = s;
	if (f->tail)
		f->tail->next = s;
	else
		f->head = s;
	f->tail = s;
	f->n_series++;
	return s;
}

void metrics_add(struct metrics_family *f, const char *const *values, double v)
{
	struct series *s;

	if (f->type == METRICS_COUNTER && !(v >= 0))
		return;
	pthread_mutex_lock(&f->lock);
	if ((s = series_of(f, values)))
		s->value += v;
	pthread_mutex_unlock(&f->lock);
}

void metrics_set(struct metrics_family *f, const char *const *values, double v)
{
	struct series *s;

	pthread_mutex_lock(&f->lock);
	if ((s = series_of(f, values)))
		s->value = v;
	pthread_mutex_unlock(&f->lock);
}

void metrics_observe(struct metrics_family *f, const char *const *values, double v)
{
	struct series *s;
	size_t b = 0;

	if (isnan(v))
		return;
	while (b < f->n_buckets && v > f->buckets[b])
		b++;
	pthread_mutex_lock(&f->lock);
	if ((s = series_of(f, values))) {
		s->counts[b]++;
		s->count++;
		s->value += v;
	}
	pthread_mutex_unlock(&f->lock);
}

struct metrics_collector *metrics_collector_add(struct metrics_registry *r, metrics_collect_fn *fn,
						void *ctx)
{
	struct metrics_collector *c = xcalloc(1, sizeof(*c)), **pp;

	c->fn = fn;
	c->ctx = ctx;
	pthread_mutex_lock(&r->lock);
	for (pp = &r->collectors; *pp; pp = &(*pp)->next)
		;
	*pp = c;
	pthread_mutex_unlock(&r->lock);
	return c;
}

void metrics_collector_remove(struct metrics_registry *r, struct metrics_collector *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&r->lock);
	for (struct metrics_collector **pp = &r->collectors; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	pthread_mutex_unlock(&r->lock);
	free(c);
}

void metrics_format_value(double v, char *out, size_t size)
{
	if (isnan(v)) {
		snprintf(out, size, "NaN");
	} else if (isinf(v)) {
		snprintf(out, size, v > 0 ? "+Inf" : "-Inf");
	} else if (v == (double)(int64_t)v && fabs(v) < 1e15) {
		snprintf(out, size, "%lld", (long long)(int64_t)v);
	} else {
		/* the shortest of %.15g..%.17g that reads back as v */
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(out, size, "%.*g", prec, v);
			if (strtod(out, NULL) == v)
				break;
		}
	}
}

/* s with \, " and newlines escaped (label values; help text escapes the same but for ") */
static int escape(struct buf *out, const char *s, bool quote, struct err *err)
{
	const char *run = s;

	for (; *s; s++) {
		const char *esc = *s == '\\'		 ? "\\\\"
				  : *s == '\n'		 ? "\\n"
				  : (*s == '"' && quote) ? "\\\""
							 : NULL;

		if (!esc)
			continue;
		if (buf_append(out, run, (size_t)(s - run), err) < 0 ||
		    buf_append(out, esc, 2, err) < 0)
			return -err->code;
		run = s + 1;
	}
	return buf_append(out, run, (size_t)(s - run), err);
}

int metrics_escape(struct buf *out, const char *s, struct err *err)
{
	return escape(out, s, true, err);
}

static const char *type_name(enum metrics_type t)
{
	return t == METRICS_COUNTER ? "counter" : t == METRICS_GAUGE ? "gauge" : "histogram";
}

static int write_head(struct buf *out, const char *name, const char *help, enum metrics_type t,
		      struct err *err)
{
	if (buf_appendf(out, err, "# HELP %s ", name) < 0 || escape(out, help, false, err) < 0 ||
	    buf_appendf(out, err, "\n# TYPE %s %s\n", name, type_name(t)) < 0)
		return -err->code;
	return 0;
}

/* name{l1="v1",...,extra_name="extra"} value: extra (le) may be NULL */
static int write_line(struct buf *out, const char *name, const char *suffix, char *const *labels,
		      const char *const *values, size_t n, const char *extra_value, double v,
		      struct err *err)
{
	char num[64];
	bool braces = n > 0 || extra_value;

	if (buf_appendf(out, err, "%s%s%s", name, suffix, braces ? "{" : "") < 0)
		return -err->code;
	for (size_t i = 0; i < n; i++)
		if (buf_appendf(out, err, "%s%s=\"", i ? "," : "", labels[i]) < 0 ||
		    escape(out, values[i] ? values[i] : "", true, err) < 0 ||
		    buf_append(out, "\"", 1, err) < 0)
			return -err->code;
	if (extra_value && buf_appendf(out, err, "%sle=\"%s\"", n ? "," : "", extra_value) < 0)
		return -err->code;
	metrics_format_value(v, num, sizeof(num));
	return buf_appendf(out, err, "%s %s\n", braces ? "}" : "", num);
}

static int write_series(struct buf *out, const struct metrics_family *f, const struct series *s,
			struct err *err)
{
	const char *const *vals = (const char *const *)s->values;
	uint64_t cum = 0;
	char le[64];

	if (f->type != METRICS_HISTOGRAM)
		return write_line(out, f->name, "", f->labels, vals, f->n_labels, NULL, s->value,
				  err);
	for (size_t b = 0; b <= f->n_buckets; b++) {
		cum += s->counts[b];
		if (b < f->n_buckets)
			metrics_format_value(f->buckets[b], le, sizeof(le));
		else
			snprintf(le, sizeof(le), "+Inf");
		if (write_line(out, f->name, "_bucket", f->labels, vals, f->n_labels, le,
			       (double)cum, err) < 0)
			return -err->code;
	}
	if (write_line(out, f->name, "_sum", f->labels, vals, f->n_labels, NULL, s->value, err) <
		    0 ||
	    write_line(out, f->name, "_count", f->labels, vals, f->n_labels, NULL, (double)s->count,
		       err) < 0)
		return -err->code;
	return 0;
}

static int write_family(struct buf *out, struct metrics_family *f, struct err *err)
{
	int ret;

	if (write_head(out, f->name, f->help, f->type, err) < 0)
		return -err->code;
	/* a family without labels has its one series from the start: 0 until updated */
	pthread_mutex_lock(&f->lock);
	if (f->n_labels == 0 && !f->head)
		series_of(f, NULL);
	ret = 0;
	for (const struct series *s = f->head; s && ret == 0; s = s->next)
		ret = write_series(out, f, s, err);
	pthread_mutex_unlock(&f->lock);
	return ret;
}

void metrics_write_family(struct metrics_writer *w, const char *name, const char *help,
			  enum metrics_type type)
{
	if (!w->failed && write_head(w->out, name, help, type, w->err) < 0)
		w->failed = 1;
}

void metrics_write_sample(struct metrics_writer *w, const char *name, const char *const *labels,
			  const char *const *values, size_t n, double v)
{
	if (!w->failed &&
	    write_line(w->out, name, "", (char *const *)labels, values, n, NULL, v, w->err) < 0)
		w->failed = 1;
}

int metrics_render(struct metrics_registry *r, struct buf *out, struct err *err)
{
	struct metrics_writer w = { out, err, 0 };
	int ret = 0;

	pthread_mutex_lock(&r->lock);
	for (struct metrics_family *f = r->families; f && ret == 0; f = f->next)
		ret = write_family(out, f, err);
	for (struct metrics_collector *c = r->collectors; c && ret == 0 && !w.failed; c = c->next)
		c->fn(c->ctx, &w);
	pthread_mutex_unlock(&r->lock);
	if (ret == 0 && w.failed)
		ret = -err->code;
	return ret;
}
