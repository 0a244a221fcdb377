#include "catalog.h"

#include <errno.h>
#include <fnmatch.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "catalog_advisor.h"
#include "fsutil.h"
#include "xalloc.h"

/*
 * The types are fixed once the catalog is built. refs counts the holders (the loader and every
 * catalog_acquire); lock guards current, the catalog published for this one by a refresh, which
 * this one holds a reference to.
 */
struct catalog {
	char *region;
	char *price_note; /* a derived region's estimate, or NULL */
	char *estimate;	  /* the same, short: "estimated as us-east-1's x 1.115", or NULL */
	/* the words of catalog_price_source: the loaded data's, the Price List's, the spot
	 * price history's (NULL: not set) */
	char *shipped_source, *price_api_source, *spot_api_source;
	/* the words of a spot price from the Spot Instance Advisor's savings (NULL: none) */
	char *advisor_source;
	struct catalog_type *types;
	size_t n;
	atomic_size_t refs;
	pthread_mutex_t lock;
	struct catalog *current;
};

/* Compares two C strings through pointers, for qsort. */
static int catalog_strcmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The error for a region the catalog does not have, listing the regions it has, sorted. */
static int catalog_unknown_region(const json_t *root, const char *region, struct err *err)
{
	size_t n = json_object_size(root), i = 0;
	_cleanup_free_ const char **names = xcalloc(n + 1, sizeof(*names));
	struct buf b = BUF_INIT;
	const char *k;
	json_t *v;
	int ret;

	json_object_foreach ((json_t *)root, k, v)
		names[i++] = k;
	qsort(names, n, sizeof(*names), catalog_strcmp);
	for (i = 0; i < n; i++)
		buf_appendf(&b, err, "%s%s", i ? ", " : "", names[i]);
	ret = err_set(err, ENOENT, "unknown region \"%s\"; known regions: %s", region,
		      n ? buf_str(&b) : "(none)");
	buf_release(&b);
	return ret;
}

/* Reads a number member (integer or real) of an entry. */
static int catalog_number(const json_t *e, const char *key, double *out, const char *where,
			  struct err *err)
{
	const json_t *v = json_object_get(e, key);

	if (!json_is_number(v))
		return err_set(err, EINVAL, "%s: \"%s\" must be a number", where, key);
	*out = json_number_value(v);
	if (!isfinite(*out) || *out < 0)
		return err_set(err, EINVAL, "%s: \"%s\" must not be negative", where, key);
	return 0;
}

/* Reads the optional "arch" list of an entry: the known names' bits (others, such as EC2's
 * "i386" or "x86_64_mac", are skipped); x86_64 when absent. */
static int catalog_arch(const json_t *e, const char *where, unsigned *out, struct err *err)
{
	const json_t *a = json_object_get(e, "arch"), *v;
	size_t i;

	*out = 0;
	if (!a) {
		*out = CATALOG_ARCH_X86_64;
		return 0;
	}
	if (!json_is_array(a))
		return err_set(err, EINVAL, "%s: \"arch\" must be a list of architectures", where);
	json_array_foreach (a, i, v) {
		if (!json_is_string(v))
			return err_set(err, EINVAL, "%s: \"arch\" must list strings", where);
		*out |= catalog_arch_parse(json_string_value(v));
	}
	if (!*out)
		return err_set(err, EINVAL, "%s: \"arch\" must list x86_64 or arm64", where);
	return 0;
}

/* Reads the optional "spotBand" of an entry: 0 to 4, unknown when absent. */
static int catalog_spot_band(const json_t *e, const char *where, int *out, struct err *err)
{
	const json_t *b = json_object_get(e, "spotBand");

	*out = CATALOG_SPOT_BAND_UNKNOWN;
	if (!b)
		return 0;
	if (!json_is_integer(b) || json_integer_value(b) < 0 || json_integer_value(b) > 4)
		return err_set(err, EINVAL, "%s: \"spotBand\" must be a whole number from 0 to 4",
			       where);
	*out = (int)json_integer_value(b);
	return 0;
}

/* Reads one catalog entry into t. */
static int catalog_entry(const json_t *e, const char *where, struct catalog_type *t,
			 struct err *err)
{
	const json_t *name = json_object_get(e, "instanceType");
	const json_t *gpu = json_object_get(e, "gpu");
	const json_t *burst = json_object_get(e, "burstable");
	const json_t *gen = json_object_get(e, "generation");
	int ret;

	if (!json_is_object(e))
		return err_set(err, EINVAL, "%s: must be an object", where);
	if (!json_is_string(name) || json_string_length(name) == 0)
		return err_set(err, EINVAL, "%s: \"instanceType\" must be a non-empty string",
			       where);
	t->name = xstrdup(json_string_value(name));
	ret = catalog_number(e, "cpu", &t->cpu, where, err);
	if (ret >= 0)
		ret = catalog_number(e, "memory", &t->memory_gib, where, err);
	if (ret >= 0)
		ret = catalog_number(e, "price", &t->price, where, err);
	if (ret >= 0 && json_object_get(e, "spotPrice"))
		ret = catalog_number(e, "spotPrice", &t->spot_price, where, err);
	else
		t->spot_price = t->price;
	if (ret >= 0 && json_object_get(e, "baseline"))
		ret = catalog_number(e, "baseline", &t->baseline, where, err);
	else
		t->baseline = t->cpu;
	if (ret >= 0)
		ret = catalog_arch(e, where, &t->arch, err);
	if (ret >= 0)
		ret = catalog_spot_band(e, where, &t->spot_band, err);
	if (ret < 0)
		return ret;
	if (t->cpu > 1e6 || t->memory_gib > 1e6)
		return err_set(err, EINVAL, "%s: \"cpu\" or \"memory\" is implausibly large",
			       where);
	if (gpu && (!json_is_integer(gpu) || json_integer_value(gpu) < 0 ||
		    json_integer_value(gpu) > 1024))
		return err_set(err, EINVAL, "%s: \"gpu\" must be a whole number from 0 to 1024",
			       where);
	if (burst && !json_is_boolean(burst))
		return err_set(err, EINVAL, "%s: \"burstable\" must be true or false", where);
	if (gen && !json_is_string(gen))
		return err_set(err, EINVAL, "%s: \"generation\" must be a string", where);
	t->gpus = gpu ? (int)json_integer_value(gpu) : 0;
	t->burstable = json_is_true(burst);
	t->generation = xstrdup(gen ? json_string_value(gen) : "current");
	t->cpu_milli = (int64_t)(t->cpu * 1000.0 + 0.5);
	t->memory_bytes = (int64_t)(t->memory_gib * 1073741824.0 + 0.5);
	return 0;
}

/* Most a derived region's prices may be scaled by (either way). */
#define CATALOG_MAX_PRICE_FACTOR 100.0

/*
 * A region given as {"from": "<region>", "priceFactor": f}: the other region's list, which
 * must be a list itself (no chains), into *list, and f into *factor.
 */
static int catalog_derived(const json_t *root, const char *region, const json_t *spec,
			   const json_t **list, double *factor, const char **from, struct err *err)
{
	const json_t *f = json_object_get(spec, "from");
	const json_t *k = json_object_get(spec, "priceFactor");

	if (!json_is_string(f) || !json_is_number(k))
		return err_set(err, EINVAL,
			       "region %s: must be a list of instance types, or {\"from\": "
			       "\"<region>\", \"priceFactor\": <number>}",
			       region);
	*from = json_string_value(f);
	*factor = json_number_value(k);
	if (!isfinite(*factor) || *factor < 1.0 / CATALOG_MAX_PRICE_FACTOR ||
	    *factor > CATALOG_MAX_PRICE_FACTOR)
		return err_set(err, EINVAL, "region %s: \"priceFactor\" must be from %g to %g",
			       region, 1.0 / CATALOG_MAX_PRICE_FACTOR, CATALOG_MAX_PRICE_FACTOR);
	*list = json_object_get(root, *from);
	if (!json_is_array(*list))
		return err_set(err, EINVAL,
			       "region %s: \"from\": region \"%s\" must be listed with its "
			       "instance types",
			       region, *from);
	return 0;
}

/* Builds a catalog of one region from a parsed root object. */
/* Names the data c was loaded from, with its estimate if any. */
static void catalog_shipped_as(struct catalog *c, const char *what)
{
	free(c->shipped_source);
	c->shipped_source = c->estimate ? xasprintf("%s, %s", what, c->estimate) : xstrdup(what);
}

static int catalog_from_root(const json_t *root, const char *region, struct catalog **out,
			     struct err *err)
{
	const json_t *list = json_object_get(root, region);
	const char *from = NULL;
	double factor = 1;
	struct catalog *c;
	size_t i;
	json_t *e;

	if (!json_is_object(root))
		return err_set(err, EINVAL, "catalog must be an object of regions");
	if (!list)
		return catalog_unknown_region(root, region, err);
	if (json_is_object(list) &&
	    catalog_derived(root, region, list, &list, &factor, &from, err) < 0)
		return -err->code;
	if (!json_is_array(list))
		return err_set(err, EINVAL, "region %s: must be a list of instance types", region);
	if (json_array_size(list) > CATALOG_MAX_TYPES)
		return err_set(err, E2BIG, "region %s: more than %d instance types", region,
			       CATALOG_MAX_TYPES);
	c = catalog_new(region, xcalloc(json_array_size(list) + 1, sizeof(*c->types)), 0);
	json_array_foreach (list, i, e) {
		const json_t *name = json_object_get(e, "instanceType");
		_cleanup_free_ char *where =
			xasprintf("region %s, entry %zu (%s)", region, i,
				  json_is_string(name) ? json_string_value(name) : "no name");
		int ret;

		c->n = i + 1;
		ret = catalog_entry(e, where, &c->types[i], err);
		c->types[i].price *= factor;
		c->types[i].spot_price *= factor;
		if (ret >= 0 && catalog_find(c, c->types[i].name) != &c->types[i])
			ret = err_set(err, EINVAL, "%s: listed twice", where);
		if (ret < 0) {
			catalog_free(c);
			return ret;
		}
	}
	if (from) {
		c->price_note = xasprintf("on-demand and spot prices estimated as %s's x %.4g",
					  from, factor);
		c->estimate = xasprintf("estimated as %s's x %.4g", from, factor);
	}
	catalog_shipped_as(c, "instance catalog");
	*out = c;
	return 0;
}

/* Loads a region of the embedded catalog. Its text is parsed at each load and the tree let go:
 * kept, the tree of every region would hold 4 MB of kiyot's heap for its one load. */
int catalog_load(const char *region, struct catalog **out, struct err *err)
{
	size_t len;
	const char *text = catalog_embedded(&len);
	int ret = catalog_load_text(text, len, region, out, err);

	/* an unknown region is the caller's; anything else, the embedded text's */
	if (ret < 0 && ret != -ENOENT)
		return err_wrap(err, "embedded instance catalog");
	if (ret < 0)
		return ret;
	catalog_shipped_as(*out, "shipped snapshot of " CATALOG_SNAPSHOT_DATE);
	text = catalog_advisor_embedded(&len);
	ret = catalog_apply_advisor(*out, text, len, err);
	if (ret < 0) {
		catalog_free(*out);
		*out = NULL;
		return err_wrap(err, "embedded spot advisor table");
	}
	return 0;
}

int catalog_apply_advisor(struct catalog *c, const char *text, size_t len, struct err *err)
{
	struct catalog_advisor a;
	size_t used = 0;
	int ret = catalog_advisor_parse(text, len, c->region, &a, err);

	if (ret < 0)
		return ret;
	for (size_t i = 0; i < c->n; i++) {
		struct catalog_type *t = &c->types[i];
		const struct catalog_advice *v = catalog_advisor_find(&a, t->name);

		if (!v)
			continue;
		t->spot_band = v->band;
		if (v->savings == CATALOG_ADVISOR_NO_SAVINGS)
			continue;
		t->spot_price = t->price * (100 - v->savings) / 100.0;
		t->spot_from = CATALOG_FROM_ADVISOR;
		used++;
	}
	if (used) {
		free(c->advisor_source);
		c->advisor_source =
			xasprintf("Spot Instance Advisor savings of %s off %s", a.date,
				  c->shipped_source ? c->shipped_source : "instance catalog");
	}
	catalog_advisor_release(&a);
	return 0;
}

/* The Spot Instance Advisor's ranges, by band. */
static const char *const catalog_band_names[] = { "<5%", "5-10%", "10-15%", "15-20%", ">20%" };

const char *catalog_spot_band_name(int band)
{
	if (band < 0 || band >= (int)(sizeof(catalog_band_names) / sizeof(catalog_band_names[0])))
		return "unknown";
	return catalog_band_names[band];
}

/* Loads a region from catalog JSON text. */
int catalog_load_text(const char *text, size_t len, const char *region, struct catalog **out,
		      struct err *err)
{
	json_error_t jerr;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	int ret;

	if (!root)
		return err_set(err, EINVAL, "line %d, column %d: %s", jerr.line, jerr.column,
			       jerr.text);
	ret = catalog_from_root(root, region, out, err);
	json_decref(root);
	return ret;
}

/* Loads a region from a catalog file; errors carry the path. */
int catalog_load_file(const char *path, const char *region, struct catalog **out, struct err *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int ret = fs_read_file(path, CATALOG_MAX_FILE, &text, &len, err);

	if (ret < 0)
		return ret;
	ret = catalog_load_text(text, len, region, out, err);
	if (ret < 0)
		return err_wrap(err, "instance catalog %s", path);
	{
		_cleanup_free_ char *what = xasprintf("catalog file %s", path);

		catalog_shipped_as(*out, what);
	}
	return 0;
}

/* A catalog of n types (owned from now on) with one reference, the caller's. */
struct catalog *catalog_new(const char *region, struct catalog_type *types, size_t n)
{
	struct catalog *c = xcalloc(1, sizeof(*c));

	for (size_t i = 0; i < n; i++) /* a type built without one runs x86_64 */
		if (!(types[i].arch & CATALOG_ARCH_ALL))
			types[i].arch = CATALOG_ARCH_X86_64;
	c->region = xstrdup(region);
	c->types = types;
	c->n = n;
	atomic_init(&c->refs, 1);
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

/* Frees what a catalog owns, its published successor's reference included. */
static void catalog_destroy(struct catalog *c)
{
	catalog_release(c->current);
	for (size_t i = 0; i < c->n; i++) {
		free(c->types[i].name);
		free(c->types[i].generation);
		free(c->types[i].zone_spot);
	}
	free(c->types);
	free(c->region);
	free(c->price_note);
	free(c->estimate);
	free(c->shipped_source);
	free(c->price_api_source);
	free(c->spot_api_source);
	free(c->advisor_source);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Drops one reference; the last one frees the catalog. NULL is fine. */
void catalog_release(struct catalog *c)
{
	if (c && atomic_fetch_sub(&c->refs, 1) == 1)
		catalog_destroy(c);
}

/* Drops the loader's reference (see catalog_release). */
void catalog_free(struct catalog *c)
{
	catalog_release(c);
}

/*
 * The newest published catalog of c (c itself until something was published), with a reference
 * for the caller. Taking the reference under c->lock keeps a concurrent publish from freeing the
 * snapshot between reading c->current and counting the new holder.
 */
struct catalog *catalog_acquire(struct catalog *c)
{
	struct catalog *s;

	pthread_mutex_lock(&c->lock);
	s = c->current ? c->current : c;
	atomic_fetch_add(&s->refs, 1);
	pthread_mutex_unlock(&c->lock);
	return s;
}

/* Makes next (whose reference the call takes over) what catalog_acquire(c) returns from now. */
void catalog_publish(struct catalog *c, struct catalog *next)
{
	struct catalog *old;

	pthread_mutex_lock(&c->lock);
	old = c->current;
	c->current = next;
	pthread_mutex_unlock(&c->lock);
	catalog_release(old);
}

/* The region the catalog was loaded for. */
const char *catalog_region(const struct catalog *c)
{
	return c->region;
}

/* A derived region's note, or NULL. */
const char *catalog_price_note(const struct catalog *c)
{
	return c->price_note;
}

/* Where a price of t came from, in words. */
const char *catalog_price_source(const struct catalog *c, const struct catalog_type *t, bool spot)
{
	const char *api = spot ? c->spot_api_source : c->price_api_source;

	if ((spot ? t->spot_from : t->price_from) == CATALOG_FROM_API && api)
		return api;
	if (spot && t->spot_from == CATALOG_FROM_ADVISOR && c->advisor_source)
		return c->advisor_source;
	return c->shipped_source ? c->shipped_source : "instance catalog";
}

/* Replaces one source's words with a copy of text, unless text is NULL. */
static void catalog_source_set(char **dst, const char *text)
{
	if (!text)
		return;
	free(*dst);
	*dst = xstrdup(text);
}

void catalog_set_sources(struct catalog *c, const char *shipped, const char *price_api,
			 const char *spot_api)
{
	catalog_source_set(&c->shipped_source, shipped);
	catalog_source_set(&c->price_api_source, price_api);
	catalog_source_set(&c->spot_api_source, spot_api);
}

void catalog_copy_sources(struct catalog *dst, const struct catalog *src)
{
	catalog_set_sources(dst, src->shipped_source, src->price_api_source, src->spot_api_source);
	catalog_source_set(&dst->advisor_source, src->advisor_source);
}

/* The number of instance types. */
size_t catalog_count(const struct catalog *c)
{
	return c->n;
}

/* The i-th instance type; NULL past the end. */
const struct catalog_type *catalog_at(const struct catalog *c, size_t i)
{
	return i < c->n ? &c->types[i] : NULL;
}

/* Finds a type by exact name (linear: a region has a few hundred types). */
const struct catalog_type *catalog_find(const struct catalog *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++) {
		if (c->types[i].name && strcmp(c->types[i].name, name) == 0)
			return &c->types[i];
	}
	return NULL;
}

/* Exact name or fnmatch(3) glob. */
bool catalog_type_matches(const struct catalog_type *t, const char *pattern)
{
	return strcmp(t->name, pattern) == 0 || fnmatch(pattern, t->name, 0) == 0;
}

/* Counts the types a pattern matches. */
size_t catalog_count_matching(const struct catalog *c, const char *pattern)
{
	size_t n = 0;

	for (size_t i = 0; i < c->n; i++)
		n += catalog_type_matches(&c->types[i], pattern);
	return n;
}

/* Names an architecture set. */
const char *catalog_arch_name(unsigned arch)
{
	switch (arch & CATALOG_ARCH_ALL) {
	case CATALOG_ARCH_X86_64:
		return "x86_64";
	case CATALOG_ARCH_ARM64:
		return "arm64";
	case CATALOG_ARCH_ALL:
		return "x86_64+arm64";
	default:
		return "none";
	}
}

/* The bit of one architecture name (EC2's and OCI's spellings). */
unsigned catalog_arch_parse(const char *name)
{
	if (strcmp(name, "x86_64") == 0 || strcmp(name, "amd64") == 0)
		return CATALOG_ARCH_X86_64;
	if (strcmp(name, "arm64") == 0 || strcmp(name, "aarch64") == 0)
		return CATALOG_ARCH_ARM64;
	return 0;
}

/* A zone's spot price, else the type's. */
double catalog_zone_spot_price(const struct catalog_type *t, const char *zone)
{
	for (size_t i = 0; zone && i < t->n_zone_spot; i++) {
		if (strcmp(t->zone_spot[i].zone, zone) == 0)
			return t->zone_spot[i].price;
	}
	return t->spot_price;
}
