/*
 * pool_config.c: the `pool` section of kiyot's config (pool_config.h), read by tables
 * (jfields.h).
 */
#include "pool_config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jfields.h"
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
	if (c->adaptive || c->rebalance_replacement || c->cron_jobs)
		return true;
	for (size_t i = 0; i < c->n_shapes; i++)
		if (c->shapes[i].count > 0)
			return true;
	return false;
}

/* A shape without a count keeps one standby cell. */
static int shape_check(void *obj, const json_t *j, const char *path, struct err *err)
{
	struct pool_shape_config *s = obj;

	(void)path;
	(void)err;
	if (!json_object_get(j, "count"))
		s->count = 1;
	return 0;
}

static void shape_release(void *entry)
{
	free(((struct pool_shape_config *)entry)->instance_type);
}

static const struct jf_field shape_fields[] = {
	{ JF_STR("instanceType", struct pool_shape_config, instance_type), .min = 1, .max = 64,
	  .required = true, .hint = "(an instance type such as t3.small)" },
	{ JF_BOOL("spot", struct pool_shape_config, spot) },
	{ JF_INT("count", struct pool_shape_config, count, 0, POOL_COUNT_MAX) },
	JF_END,
};

static const struct jf_table shape_table = {
	.fields = shape_fields,
	.strict = true,
	.example = "{ instanceType: t3.small, count: 2 }",
	.check = shape_check,
	.release = shape_release,
};

/* An adaptive pool's standby cells expire after POOL_ADAPTIVE_LIFETIME_DEFAULT_S unless the
 * lifetime is given. */
static int adaptive_check(void *obj, const json_t *j, const char *path, struct err *err)
{
	struct pool_config *c = obj;

	(void)path;
	(void)err;
	if (!json_object_get(j, "idleLifetimeSeconds") && c->adaptive)
		c->idle_lifetime_s = POOL_ADAPTIVE_LIFETIME_DEFAULT_S;
	return 0;
}

static const struct jf_field adaptive_fields[] = {
	{ JF_BOOL("enabled", struct pool_config, adaptive) },
	{ JF_INT("windowSeconds", struct pool_config, window_s, 1, 7 * 86400) },
	{ JF_INT("targetHitPercent", struct pool_config, target_hit_percent, 50, 99) },
	{ JF_INT("burstSeconds", struct pool_config, burst_s, 0, 3600) },
	{ JF_INT("maxCells", struct pool_config, max_cells, 0, 10000) },
	{ JF_DOUBLE("maxDollarsPerHour", struct pool_config, max_dollars_per_hour, 0, 1e6),
	  .hint = "(US dollars; 0: no cap; such as 0.5)" },
	{ JF_INT("idleLifetimeSeconds", struct pool_config, idle_lifetime_s, 0, 30 * 86400) },
	JF_END,
};

static const struct jf_table adaptive_table = {
	.fields = adaptive_fields,
	.strict = true,
	.check = adaptive_check,
};

/* Each shape once: a second entry of the same type and market would only confuse counts.
 * cronJobs follows adaptive.enabled unless it is given. */
static int pool_check(void *obj, const json_t *j, const char *path, struct err *err)
{
	struct pool_config *c = obj;

	if (!json_object_get(j, "cronJobs"))
		c->cron_jobs = c->adaptive;
	for (size_t i = 1; i < c->n_shapes; i++)
		for (size_t k = 0; k < i; k++)
			if (!strcmp(c->shapes[k].instance_type, c->shapes[i].instance_type) &&
			    c->shapes[k].spot == c->shapes[i].spot)
				return err_set(err, EINVAL,
					       "%s.shapes[%zu]: %s (%s) is %s.shapes[%zu] again; "
					       "give each shape one entry",
					       path, i, c->shapes[i].instance_type,
					       c->shapes[i].spot ? "spot" : "on-demand", path, k);
	return 0;
}

static const struct jf_field pool_fields[] = {
	{ JF_LIST("shapes", struct pool_config, shapes, n_shapes, struct pool_shape_config,
		  POOL_SHAPES_MAX, &shape_table) },
	{ JF_OBJECT("adaptive", 0, &adaptive_table) },
	{ JF_BOOL("rebalanceReplacement", struct pool_config, rebalance_replacement) },
	{ JF_BOOL("cronJobs", struct pool_config, cron_jobs) },
	JF_END,
};

static const struct jf_table pool_table = {
	.fields = pool_fields,
	.strict = true,
	.example = "{ shapes: [...], adaptive: {...}, rebalanceReplacement: true, cronJobs: true }",
	.check = pool_check,
};

int pool_config_load(struct pool_config *c, json_t *v, struct err *err)
{
	struct pool_config n = { .window_s = POOL_WINDOW_DEFAULT_S,
				 .target_hit_percent = POOL_HIT_DEFAULT_PERCENT };

	if (jf_read(&pool_table, v, "pool", &n, err) < 0) {
		pool_config_release(&n);
		return -err->code;
	}
	pool_config_release(c);
	*c = n;
	return 0;
}
