/*
 * pool_config.c: the `pool` section of kiyot's config (pool_config.h).
 */
#include "pool_config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

void pool_config_release(struct pool_config *c)
{
	for (size_t i = 0; i < c->n_shapes; i++)
		free(c->shapes[i].instance_type);
	free(c->shapes);
	*c = (struct pool_config){ 0 };
}

bool pool_config_enabled(const struct pool_config *c)
{
	if (c->adaptive || c->rebalance_replacement)
		return true;
	for (size_t i = 0; i < c->n_shapes; i++)
		if (c->shapes[i].count > 0)
			return true;
	return false;
}

/* Refuses a member of obj that known does not list, naming it under path. */
static int known_keys(json_t *obj, const char *path, const char *const *known, struct err *err)
{
	const char *key;
	json_t *v;

	json_object_foreach (obj, key, v) {
		bool ok = false;

		for (const char *const *k = known; *k && !ok; k++)
			ok = strcmp(*k, key) == 0;
		if (!ok)
			return err_set(err, EINVAL, "%s.%s: unknown setting", path, key);
	}
	return 0;
}

static int take_int(json_t *obj, const char *path, const char *key, int64_t lo, int64_t hi,
		    int *dst, struct err *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return err_set(err, EINVAL, "%s.%s: must be an integer from %lld to %lld", path,
			       key, (long long)lo, (long long)hi);
	*dst = (int)json_integer_value(v);
	return 0;
}

static int take_bool(json_t *obj, const char *path, const char *key, bool *dst, struct err *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return err_set(err, EINVAL, "%s.%s: must be true or false", path, key);
	*dst = json_is_true(v);
	return 0;
}

/* One entry of pool.shapes. */
static int load_shape(json_t *s, size_t i, struct pool_shape_config *out, struct err *err)
{
	static const char *const known[] = { "instanceType", "spot", "count", NULL };
	char path[48];
	json_t *t;

	snprintf(path, sizeof(path), "pool.shapes[%zu]", i);
	if (!json_is_object(s))
		return err_set(err, EINVAL,
			       "%s: must be a mapping such as { instanceType: t3.small, count: 2 }",
			       path);
	if (known_keys(s, path, known, err) < 0)
		return -err->code;
	t = json_object_get(s, "instanceType");
	if (!json_is_string(t) || !json_string_value(t)[0] || strlen(json_string_value(t)) > 64)
		return err_set(err, EINVAL,
			       "%s.instanceType: required, an instance type such as t3.small",
			       path);
	out->count = 1;
	if (take_bool(s, path, "spot", &out->spot, err) < 0 ||
	    take_int(s, path, "count", 0, POOL_COUNT_MAX, &out->count, err) < 0)
		return -err->code;
	out->instance_type = xstrdup(json_string_value(t));
	return 0;
}

static int load_shapes(struct pool_config *c, json_t *l, struct err *err)
{
	size_t i;
	json_t *s;

	if (!json_is_array(l))
		return err_set(err, EINVAL,
			       "pool.shapes: must be a list of { instanceType, spot, count }");
	if (json_array_size(l) > POOL_SHAPES_MAX)
		return err_set(err, EINVAL, "pool.shapes: %zu shapes, at most %d",
			       json_array_size(l), POOL_SHAPES_MAX);
	c->shapes = xcalloc(json_array_size(l) + 1, sizeof(*c->shapes));
	json_array_foreach (l, i, s) {
		struct pool_shape_config *sh = &c->shapes[i];

		if (load_shape(s, i, sh, err) < 0)
			return -err->code;
		c->n_shapes++;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(c->shapes[j].instance_type, sh->instance_type) &&
			    c->shapes[j].spot == sh->spot)
				return err_set(err, EINVAL,
					       "pool.shapes[%zu]: %s (%s) is pool.shapes[%zu] "
					       "again; give each shape one entry",
					       i, sh->instance_type,
					       sh->spot ? "spot" : "on-demand", j);
	}
	return 0;
}

static int load_adaptive(struct pool_config *c, json_t *a, struct err *err)
{
	static const char *const known[] = {
		"enabled",  "windowSeconds",	 "targetHitPercent",	"burstSeconds",
		"maxCells", "maxDollarsPerHour", "idleLifetimeSeconds", NULL
	};
	json_t *v;

	if (!json_is_object(a))
		return err_set(err, EINVAL, "pool.adaptive: must be a mapping");
	if (known_keys(a, "pool.adaptive", known, err) < 0 ||
	    take_bool(a, "pool.adaptive", "enabled", &c->adaptive, err) < 0 ||
	    take_int(a, "pool.adaptive", "windowSeconds", 1, 7 * 86400, &c->window_s, err) < 0 ||
	    take_int(a, "pool.adaptive", "targetHitPercent", 50, 99, &c->target_hit_percent, err) <
		    0 ||
	    take_int(a, "pool.adaptive", "burstSeconds", 0, 3600, &c->burst_s, err) < 0 ||
	    take_int(a, "pool.adaptive", "maxCells", 0, 10000, &c->max_cells, err) < 0 ||
	    take_int(a, "pool.adaptive", "idleLifetimeSeconds", 0, 30 * 86400, &c->idle_lifetime_s,
		     err) < 0)
		return -err->code;
	if ((v = json_object_get(a, "maxDollarsPerHour"))) {
		if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1e6)
			return err_set(err, EINVAL,
				       "pool.adaptive.maxDollarsPerHour: must be a number of US "
				       "dollars from 0 (no cap) to 1000000, such as 0.5");
		c->max_dollars_per_hour = json_number_value(v);
	}
	if (!json_object_get(a, "idleLifetimeSeconds") && c->adaptive)
		c->idle_lifetime_s = POOL_ADAPTIVE_LIFETIME_DEFAULT_S;
	return 0;
}

int pool_config_load(struct pool_config *c, json_t *v, struct err *err)
{
	static const char *const known[] = { "shapes", "adaptive", "rebalanceReplacement", NULL };
	struct pool_config n = { .window_s = POOL_WINDOW_DEFAULT_S,
				 .target_hit_percent = POOL_HIT_DEFAULT_PERCENT };
	json_t *s;

	if (!json_is_object(v))
		return err_set(err, EINVAL,
			       "pool: must be a mapping (shapes, adaptive, rebalanceReplacement)");
	if (known_keys(v, "pool", known, err) < 0 ||
	    ((s = json_object_get(v, "shapes")) && load_shapes(&n, s, err) < 0) ||
	    ((s = json_object_get(v, "adaptive")) && load_adaptive(&n, s, err) < 0) ||
	    take_bool(v, "pool", "rebalanceReplacement", &n.rebalance_replacement, err) < 0) {
		pool_config_release(&n);
		return -err->code;
	}
	pool_config_release(c);
	*c = n;
	return 0;
}
