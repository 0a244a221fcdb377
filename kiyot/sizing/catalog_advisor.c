#include "catalog_advisor.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "xalloc.h"

/* Orders advice by type, for qsort and bsearch. */
static int advice_cmp(const void *a, const void *b)
{
	return strcmp(((const struct catalog_advice *)a)->type,
		      ((const struct catalog_advice *)b)->type);
}

/* Whether s is a date written YYYY-MM-DD. */
static bool advisor_date_valid(const char *s)
{
	if (strlen(s) != 10)
		return false;
	for (int i = 0; i < 10; i++) {
		bool dash = i == 4 || i == 7;

		if (dash ? s[i] != '-' : (s[i] < '0' || s[i] > '9'))
			return false;
	}
	return true;
}

/* Reads one entry, [band] or [band, savings], of type name into *out. */
static int advisor_entry(const char *region, const char *name, const json_t *v,
			 struct catalog_advice *out, struct err *err)
{
	const json_t *b = json_array_get(v, 0), *s = json_array_get(v, 1);

	if (name[0] == '\0' || strlen(name) >= sizeof(out->type))
		return err_set(err, EINVAL,
			       "spot advisor table: region %s: an instance type name must have 1 "
			       "to %zu characters",
			       region, sizeof(out->type) - 1);
	if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > 2)
		return err_set(err, EINVAL,
			       "spot advisor table: region %s, \"%s\": must be [band] or [band, "
			       "savings]",
			       region, name);
	if (!json_is_integer(b) || json_integer_value(b) < 0 ||
	    json_integer_value(b) > CATALOG_ADVISOR_MAX_BAND)
		return err_set(err, EINVAL,
			       "spot advisor table: region %s, \"%s\": the band must be a whole "
			       "number from 0 to %d",
			       region, name, CATALOG_ADVISOR_MAX_BAND);
	if (s && (!json_is_integer(s) || json_integer_value(s) < 0 || json_integer_value(s) > 99))
		return err_set(err, EINVAL,
			       "spot advisor table: region %s, \"%s\": the savings must be a whole "
			       "percentage from 0 to 99",
			       region, name);
	snprintf(out->type, sizeof(out->type), "%s", name);
	out->band = (int)json_integer_value(b);
	out->savings = s ? (int)json_integer_value(s) : CATALOG_ADVISOR_NO_SAVINGS;
	return 0;
}

/* Reads the parsed table's region into out. */
static int advisor_from_root(const json_t *root, const char *region, struct catalog_advisor *out,
			     struct err *err)
{
	const json_t *date = json_object_get(root, "date");
	const json_t *regions = json_object_get(root, "regions");
	const json_t *list, *v;
	const char *name;
	size_t n = 0;
	int ret;

	if (!json_is_object(root) || !json_is_string(date) || !json_is_object(regions))
		return err_set(err, EINVAL,
			       "spot advisor table: must be an object with \"date\" and "
			       "\"regions\"");
	if (!advisor_date_valid(json_string_value(date)))
		return err_set(err, EINVAL, "spot advisor table: \"date\" must be YYYY-MM-DD");
	snprintf(out->date, sizeof(out->date), "%s", json_string_value(date));
	list = json_object_get(regions, region);
	if (!list)
		return 0;
	if (!json_is_object(list))
		return err_set(err, EINVAL,
			       "spot advisor table: region %s: must be an object of instance types",
			       region);
	if (json_object_size(list) > CATALOG_MAX_TYPES)
		return err_set(err, E2BIG, "spot advisor table: region %s: more than %d types",
			       region, CATALOG_MAX_TYPES);
	out->advice = xcalloc(json_object_size(list) + 1, sizeof(*out->advice));
	json_object_foreach ((json_t *)list, name, v) {
		ret = advisor_entry(region, name, v, &out->advice[n], err);
		if (ret < 0)
			return ret;
		out->n = ++n;
	}
	qsort(out->advice, out->n, sizeof(*out->advice), advice_cmp);
	return 0;
}

int catalog_advisor_parse(const char *text, size_t len, const char *region,
			  struct catalog_advisor *out, struct err *err)
{
	struct catalog_advisor a = CATALOG_ADVISOR_INIT;
	json_error_t jerr;
	json_t *root;
	int ret;

	*out = a;
	if (len > CATALOG_ADVISOR_MAX_TEXT)
		return err_set(err, E2BIG, "spot advisor table: larger than %u bytes",
			       CATALOG_ADVISOR_MAX_TEXT);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(err, EINVAL, "spot advisor table: line %d, column %d: %s", jerr.line,
			       jerr.column, jerr.text);
	ret = advisor_from_root(root, region, &a, err);
	json_decref(root);
	if (ret < 0) {
		catalog_advisor_release(&a);
		return ret;
	}
	*out = a;
	return 0;
}

void catalog_advisor_release(struct catalog_advisor *a)
{
	free(a->advice);
	a->advice = NULL;
	a->n = 0;
}

const struct catalog_advice *catalog_advisor_find(const struct catalog_advisor *a, const char *type)
{
	struct catalog_advice key;

	if (!a->n || strlen(type) >= sizeof(key.type))
		return NULL;
	snprintf(key.type, sizeof(key.type), "%s", type);
	return bsearch(&key, a->advice, a->n, sizeof(*a->advice), advice_cmp);
}
