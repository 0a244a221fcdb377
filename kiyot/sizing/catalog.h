/*
 * catalog.h: EC2 instance types of one region, with their size and prices.
 *
 * The catalog shipped inside the binary is kiyot/sizing/data/aws-instance-catalog.json (a December
 * 2020 public pricing snapshot), embedded by kiyot/sizing/catalog_data.c and parsed at each
 * catalog_load() (kiyot loads once; the parsed tree is not kept). A refreshed catalog in the
 * same format can be read from a file instead:
 *
 *	{"<region>": [{"instanceType": "t3.nano", "cpu": 2, "memory": 0.5, "gpu": 0,
 *	               "burstable": true, "baseline": 0.1, "price": 0.0052,
 *	               "spotPrice": 0.0016, "generation": "current"}, ...], ...}
 *
 * cpu is in vCPUs, memory in GiB, baseline in sustained vCPUs (= cpu unless burstable), prices
 * in USD per hour.
 *
 *	struct catalog *c;
 *	if (catalog_load("us-east-1", &c, err) < 0)
 *		return -1;   err: unknown region "mars-1"; known regions: af-south-1, ...
 *	for (size_t i = 0; i < catalog_count(c); i++)
 *		use(catalog_at(c, i));
 *	catalog_free(c);
 *
 * The types of a catalog never change once it is built: it may be read from several threads at
 * once. catalog_load is thread-safe.
 *
 * Refreshing (catalog_refresh.h). A refresh never touches the types of the catalog it refreshes:
 * it builds a new catalog and publishes it as that catalog's current one. Readers that want the
 * refreshed data take the current one for the length of one use and give it back:
 *
 *	struct catalog *now = catalog_acquire(k->catalog);
 *	ret = sizing_pick(now, &demand, &reserve, &choice, err);
 *	catalog_release(now);
 *
 * Catalogs are reference counted. catalog_acquire takes a reference to the current catalog
 * under the catalog's mutex, and catalog_publish swaps the current pointer under the same
 * mutex and drops the reference the catalog held on the one it replaces; whoever releases last
 * frees it. So a reader's catalog is never changed nor freed under it, however long it takes,
 * and a refresh never waits for readers. Code that reads a catalog directly (catalog_at,
 * catalog_find, sizing_pick on k->catalog itself) keeps working as before and keeps seeing the
 * data that catalog was loaded with.
 */
#ifndef KIYOT_CATALOG_H
#define KIYOT_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Largest catalog file catalog_load_file reads. */
#define CATALOG_MAX_FILE (16u << 20)
/* Most instance types one region may list. */
#define CATALOG_MAX_TYPES 10000

struct catalog_type {
	char *name;	      /* "t3.nano" */
	double cpu;	      /* vCPUs */
	double memory_gib;    /* as listed */
	int64_t cpu_milli;    /* cpu * 1000, rounded */
	int64_t memory_bytes; /* memory_gib * 2^30, rounded */
	int gpus;
	bool burstable;
	double baseline;   /* sustained vCPUs */
	double price;	   /* on-demand, USD/hour */
	double spot_price; /* USD/hour, a snapshot */
	char *generation;  /* "current", "previous" */
};

struct catalog;

/* Loads a region of the embedded catalog. Unknown region: ENOENT, listing the known ones. */
int catalog_load(const char *region, struct catalog **out, struct err *err);

/* Loads a region of a catalog file (same format, at most CATALOG_MAX_FILE bytes). */
int catalog_load_file(const char *path, const char *region, struct catalog **out, struct err *err);

/* Loads a region from catalog JSON text of len bytes; what the two above use. */
int catalog_load_text(const char *text, size_t len, const char *region, struct catalog **out,
		      struct err *err);

/* Drops the loader's reference: the same as catalog_release. NULL is fine. */
void catalog_free(struct catalog *c);

/*
 * The current catalog of c: the one last published for it, or c itself when none was. The
 * caller holds a reference and gives it back with catalog_release. Thread-safe.
 */
struct catalog *catalog_acquire(struct catalog *c);

/* Drops one reference; the last one frees the catalog. NULL is fine. Thread-safe. */
void catalog_release(struct catalog *c);

/*
 * Makes next the current catalog of c, taking over the caller's reference to next (NULL goes
 * back to c's own data). Readers holding the previous one keep it until they release it.
 * next must not be c, nor a catalog whose current one is c. Thread-safe.
 */
void catalog_publish(struct catalog *c, struct catalog *next);

/*
 * A catalog of region made of the n types of the array types, which it takes over with every
 * name and generation in it (all from malloc). One reference, the caller's. For building a
 * refreshed catalog; a name must appear only once.
 */
struct catalog *catalog_new(const char *region, struct catalog_type *types, size_t n);

const char *catalog_region(const struct catalog *c);
size_t catalog_count(const struct catalog *c);
/* The i-th type (i < catalog_count), in the order of the file. */
const struct catalog_type *catalog_at(const struct catalog *c, size_t i);
/* The type of that exact name, or NULL. */
const struct catalog_type *catalog_find(const struct catalog *c, const char *name);
/* True when the type's name matches pattern: an exact name or a glob ("c5*", "t3?.nano"). */
bool catalog_type_matches(const struct catalog_type *t, const char *pattern);
/* How many types match pattern. */
size_t catalog_count_matching(const struct catalog *c, const char *pattern);

/* The embedded catalog text (NUL-terminated) and its length; defined in catalog_data.c. */
const char *catalog_embedded(size_t *len);

#endif
