/*
 * pricing_parse.c: the Price List's GetProducts answers read into instance types' on-demand
 * prices (pricing.h). Pure: no I/O, no state but the caller's accumulator.
 */
#include "pricing.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

void pricing_list_release(struct pricing_list *l)
{
	free(l->items);
	*l = (struct pricing_list)PRICING_LIST_INIT;
}

const struct pricing_price *pricing_list_find(const struct pricing_list *l, const char *type)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->items[i].instance_type, type) == 0)
			return &l->items[i];
	return NULL;
}

/* Whether s is a plausible instance type name: "m5.large", "u-6tb1.metal", "c7gd.16xlarge". */
static bool type_name_ok(const char *s, size_t len)
{
	if (len == 0 || len >= PRICING_MAX_TYPE_NAME)
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' ||
		      ch == '-'))
			return false;
	}
	return true;
}

/* A decimal USD amount as the Price List writes it ("0.0104000000"): digits with at most one
 * point, at most 32 characters (no sign, exponent, hex or spaces). */
static bool usd_amount(const json_t *v, double *out)
{
	const char *s = json_string_value(v);
	size_t len = s ? strlen(s) : 0, points = 0;
	double d;

	if (len == 0 || len > 32 || s[0] == '.' || s[len - 1] == '.')
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '.')
			points++;
		else if (s[i] < '0' || s[i] > '9')
			return false;
	}
	if (points > 1)
		return false;
	d = strtod(s, NULL);
	if (!isfinite(d))
		return false;
	*out = d;
	return true;
}

/* The USD price of a term's first "Hrs" dimension, or false. */
static bool term_hourly(const json_t *term, double *out)
{
	const json_t *dims = json_object_get(term, "priceDimensions"), *dim;
	const char *key;

	if (!json_is_object(dims))
		return false;
	json_object_foreach ((json_t *)dims, key, dim) {
		const json_t *unit = json_object_get(dim, "unit");
		const json_t *ppu = json_object_get(dim, "pricePerUnit");

		if (!json_is_string(unit) || strcmp(json_string_value(unit), "Hrs") != 0)
			continue;
		if (json_is_object(ppu) && usd_amount(json_object_get(ppu, "USD"), out))
			return true;
	}
	return false;
}

/* The instance type and hourly on-demand price of one product document; false to skip it. */
static bool product_price(const char *doc, size_t len, struct pricing_price *out)
{
	json_t *root = json_loadb(doc, len, JSON_REJECT_DUPLICATES, NULL);
	const json_t *attrs, *itype, *ondemand, *term;
	const char *key;
	bool ok = false;
	double usd = 0;

	if (!root)
		return false;
	attrs = json_object_get(json_object_get(root, "product"), "attributes");
	itype = json_object_get(attrs, "instanceType");
	ondemand = json_object_get(json_object_get(root, "terms"), "OnDemand");
	if (!json_is_string(itype) ||
	    !type_name_ok(json_string_value(itype), json_string_length(itype)) ||
	    !json_is_object(ondemand))
		goto out;
	json_object_foreach ((json_t *)ondemand, key, term) {
		if (term_hourly(term, &usd))
			break;
		usd = 0;
	}
	if (usd > 0 && usd < PRICING_MAX_PRICE) {
		memcpy(out->instance_type, json_string_value(itype), json_string_length(itype) + 1);
		out->usd_per_hour = usd;
		ok = true;
	}
out:
	json_decref(root);
	return ok;
}

/* Reads one answer; acc changes only when the answer's shape is right. */
int pricing_parse_page(const char *body, size_t len, struct pricing_list *acc, char **next,
		       struct err *err)
{
	json_error_t jerr;
	json_t *root, *list, *tok, *item;
	size_t i;
	int ret = 0;

	*next = NULL;
	if (len > PRICING_MAX_RESPONSE)
		return err_set(err, EPROTO, "answer of %zu bytes exceeds %u", len,
			       PRICING_MAX_RESPONSE);
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(err, EPROTO, "answer is not JSON: line %d, column %d: %s", jerr.line,
			       jerr.column, jerr.text);
	list = json_object_get(root, "PriceList");
	tok = json_object_get(root, "NextToken");
	if (!json_is_object(root))
		ret = err_set(err, EPROTO, "answer is not a JSON object");
	else if (list && !json_is_array(list) && !json_is_null(list))
		ret = err_set(err, EPROTO, "PriceList is not a list");
	else if (tok && !json_is_null(tok) &&
		 (!json_is_string(tok) || json_string_length(tok) == 0 ||
		  json_string_length(tok) > PRICING_MAX_TOKEN ||
		  strlen(json_string_value(tok)) != json_string_length(tok)))
		ret = err_set(err, EPROTO, "NextToken is not a string of 1 to %d bytes",
			      PRICING_MAX_TOKEN);
	if (ret < 0) {
		json_decref(root);
		return ret;
	}
	json_array_foreach (json_is_array(list) ? list : NULL, i, item) {
		struct pricing_price p;

		acc->products++;
		if (!json_is_string(item) || json_string_length(item) > PRICING_MAX_PRODUCT ||
		    !product_price(json_string_value(item), json_string_length(item), &p) ||
		    pricing_list_find(acc, p.instance_type)) {
			acc->skipped++;
			continue;
		}
		if (acc->n >= PRICING_MAX_PRODUCTS) {
			ret = err_set(err, E2BIG, "more than %d instance types priced",
				      PRICING_MAX_PRODUCTS);
			break;
		}
		xgrow((void **)&acc->items, &acc->cap, acc->n + 1, sizeof(*acc->items));
		acc->items[acc->n++] = p;
	}
	if (ret == 0 && json_is_string(tok))
		*next = xstrdup(json_string_value(tok));
	json_decref(root);
	return ret;
}
