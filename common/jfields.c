/*
 * jfields.c: reading a JSON mapping into a struct by a table of field descriptors (jfields.h).
 * One function a kind; each checks the value's type and bounds, names the path when it does
 * not fit, and stores it replacing what the field held.
 */
#include "jfields.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "strvec.h"
#include "xalloc.h"

/* Paths longer than this are cut in errors (the message holds 512 bytes anyway). */
#define PATH_LEN 256
#define HINT_QUOTE " (quote numbers and booleans in YAML, e.g. \"8080\")"

static int read_table(const struct jf_table *t, const json_t *v, const char *path, void *dst,
		      int depth, struct err *err);

const char *jf_type_name(const json_t *v)
{
	if (!v)
		return "nothing";
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "a mapping";
	case JSON_ARRAY:
		return "a list";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

const char *jf_value_text(const json_t *v, char buf[64])
{
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		size_t n = json_string_length(v), k = n > 40 ? 40 : n;
		char text[41];

		for (size_t i = 0; i < k; i++)
			text[i] = s[i] >= 0x20 && s[i] != 0x7f ? s[i] : '?';
		text[k] = '\0';
		snprintf(buf, 64, "\"%s%s\"", text, n > k ? "..." : "");
	} else if (json_is_integer(v)) {
		snprintf(buf, 64, "%lld", (long long)json_integer_value(v));
	} else if (json_is_real(v)) {
		snprintf(buf, 64, "%g", json_real_value(v));
	} else if (json_is_boolean(v)) {
		snprintf(buf, 64, "%s", json_is_true(v) ? "true" : "false");
	} else { /* a mapping, a list, null, nothing */
		snprintf(buf, 64, "%s", jf_type_name(v));
	}
	return buf;
}

/* A path that did not fit ends in "..." (size is at least 4). */
static const char *cut(char *buf, size_t size, int n)
{
	if (n < 0 || (size_t)n >= size)
		memcpy(buf + size - 4, "...", 4);
	return buf;
}

const char *jf_join(char *buf, size_t size, const char *path, const char *key)
{
	return cut(buf, size, snprintf(buf, size, "%s%s%s", path, *path ? "." : "", key));
}

const char *jf_index(char *buf, size_t size, const char *path, size_t i)
{
	return cut(buf, size, snprintf(buf, size, "%s[%zu]", path, i));
}

/* "PATH: must be WHAT[ HINT], not VALUE": v is not what field f (NULL: none) takes. */
__attribute__((format(printf, 5, 6))) static int want(struct err *err, const char *path,
						      const struct jf_field *f, const json_t *v,
						      const char *fmt, ...)
{
	char what[256], val[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return err_set(err, EINVAL, "%s: must be %s%s%s, not %s", path, what,
		       f && f->hint ? " " : "", f && f->hint ? f->hint : "", jf_value_text(v, val));
}

/* The entries of a list or map between the field's min and max (or the default). */
static int count_ok(const struct jf_field *f, size_t n, const char *path, struct err *err)
{
	int64_t most = f->max > 0 ? f->max : JF_LIST_MAX;

	if ((int64_t)n > most)
		return err_set(err, EINVAL, "%s: %zu entries, at most %lld", path, n,
			       (long long)most);
	if ((int64_t)n < f->min)
		return err_set(err, EINVAL, "%s: %zu entries, at least %lld", path, n,
			       (long long)f->min);
	return 0;
}

/* A string of at most most bytes (at least least), without NUL. */
static int string_ok(const json_t *v, const char *path, const struct jf_field *f, int64_t least,
		     int64_t most, struct err *err)
{
	size_t n;

	if (!json_is_string(v))
		return want(err, path, f, v, "a string%s",
			    json_is_number(v) || json_is_boolean(v) ? HINT_QUOTE : "");
	n = json_string_length(v);
	if (strlen(json_string_value(v)) != n)
		return err_set(err, EINVAL, "%s: must not contain a NUL character", path);
	if ((int64_t)n > (most > 0 ? most : JF_STR_MAX))
		return err_set(err, EINVAL, "%s: %zu bytes, at most %lld", path, n,
			       (long long)(most > 0 ? most : JF_STR_MAX));
	if (n == 0 && least > 0)
		return err_set(err, EINVAL, "%s: %s%s%s", path,
			       f && f->required ? "required (it is empty)" : "must not be empty",
			       f && f->hint ? " " : "", f && f->hint ? f->hint : "");
	if ((int64_t)n < least)
		return err_set(err, EINVAL, "%s: %zu bytes, at least %lld", path, n,
			       (long long)least);
	return 0;
}

static int read_str(const struct jf_field *f, const json_t *v, const char *path, char **dst,
		    struct err *err)
{
	int ret = string_ok(v, path, f, f->min, f->max, err);

	if (ret < 0)
		return ret;
	free(*dst);
	*dst = xstrndup(json_string_value(v), json_string_length(v));
	return 0;
}

static int read_strv(const struct jf_field *f, const json_t *v, const char *path, char ***dst,
		     size_t *n, struct err *err)
{
	struct strvec sv = STRVEC_INIT;
	char ip[PATH_LEN];
	json_t *s;
	size_t i;
	int ret;

	if (!json_is_array(v))
		return want(err, path, f, v, "a list of strings");
	ret = count_ok(f, json_array_size(v), path, err);
	json_array_foreach ((json_t *)v, i, s) {
		if (ret < 0)
			break;
		ret = string_ok(s, jf_index(ip, sizeof(ip), path, i), NULL, 0, f->len_max, err);
	}
	if (ret < 0)
		return ret;
	json_array_foreach ((json_t *)v, i, s)
		strvec_push(&sv, json_string_value(s));
	strv_free(*dst);
	*n = sv.nr;
	*dst = strvec_detach(&sv);
	return 0;
}

static int read_int(const struct jf_field *f, const json_t *v, const char *path, void *dst,
		    struct err *err)
{
	json_int_t x = json_is_integer(v) ? json_integer_value(v) : 0;

	if (!json_is_integer(v) || x < f->min || x > f->max)
		return want(err, path, f, v, "an integer from %lld to %lld", (long long)f->min,
			    (long long)f->max);
	if (f->size == sizeof(int64_t)) {
		int64_t w = x;

		memcpy(dst, &w, sizeof(w));
	} else if (f->size == sizeof(int)) {
		int w = (int)x;

		memcpy(dst, &w, sizeof(w));
	} else {
		abort(); /* a table's mistake: JF_INT takes int, int64_t or uint64_t */
	}
	return 0;
}

static int read_bool(const struct jf_field *f, const json_t *v, const char *path, void *dst,
		     struct err *err)
{
	if (!json_is_boolean(v))
		return want(err, path, f, v, "true or false");
	if (f->size == sizeof(bool)) {
		bool b = json_is_true(v);

		memcpy(dst, &b, sizeof(b));
	} else if (f->size == sizeof(int)) {
		int b = json_is_true(v);

		memcpy(dst, &b, sizeof(b));
	} else {
		abort(); /* a table's mistake: JF_BOOL takes bool or int */
	}
	return 0;
}

static int read_double(const struct jf_field *f, const json_t *v, const char *path, double *dst,
		       struct err *err)
{
	if (!json_is_number(v) || json_number_value(v) < f->dmin || json_number_value(v) > f->dmax)
		return want(err, path, f, v, "a number from %g to %g", f->dmin, f->dmax);
	*dst = json_number_value(v);
	return 0;
}

/* "A, B, C" from a NULL-terminated list of names. */
static const char *names_text(const char *const *names, char *buf, size_t size)
{
	buf[0] = '\0';
	for (size_t i = 0; names[i]; i++)
		snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i ? ", " : "", names[i]);
	return buf;
}

static int read_enum(const struct jf_field *f, const json_t *v, const char *path, int *dst,
		     struct err *err)
{
	char list[256], val[64];

	for (int i = 0; json_is_string(v) && f->names[i]; i++) {
		if (strcmp(json_string_value(v), f->names[i]) == 0) {
			*dst = i;
			return 0;
		}
	}
	names_text(f->names, list, sizeof(list));
	if (!json_is_string(v))
		return want(err, path, f, v, "one of %s", list);
	return err_set(err, EINVAL, "%s: %s is not one of %s%s%s", path, jf_value_text(v, val),
		       list, f->hint ? " " : "", f->hint ? f->hint : "");
}

/* " such as EXAMPLE" for a table that gives one. */
static const char *example(const struct jf_table *t, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s", t->example ? " such as " : "", t->example ? t->example : "");
	return buf;
}

/* A list of mappings: an array of entries of f->size bytes, each read by f->table. */
static int read_list(const struct jf_field *f, const json_t *v, const char *path, void *base,
		     int depth, struct err *err)
{
	char **arr = (char **)((char *)base + f->off);
	size_t *n = (size_t *)((char *)base + f->n_off);
	char ip[PATH_LEN], ex[160];
	json_t *e;
	size_t i;
	int ret;

	if (!json_is_array(v))
		return want(err, path, f, v, "a list of mappings%s",
			    example(f->table, ex, sizeof(ex)));
	ret = count_ok(f, json_array_size(v), path, err);
	if (ret < 0)
		return ret;
	for (i = 0; *arr && i < *n; i++)
		if (f->table->release)
			f->table->release(*arr + i * f->size);
	free(*arr);
	*arr = xcalloc(json_array_size(v) + 1, f->size);
	*n = 0;
	json_array_foreach ((json_t *)v, i, e) {
		*n = i + 1; /* an entry read in part is still released with the others */
		ret = read_table(f->table, e, jf_index(ip, sizeof(ip), path, i), *arr + i * f->size,
				 depth + 1, err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* A mapping of strings: entries of f->size bytes with a name and a value. */
static int read_map(const struct jf_field *f, const json_t *v, const char *path, void *base,
		    struct err *err)
{
	char **arr = (char **)((char *)base + f->off);
	size_t *n = (size_t *)((char *)base + f->n_off);
	char kp[PATH_LEN];
	const char *k;
	json_t *s;
	int ret;

	if (!json_is_object(v))
		return want(err, path, f, v, "a mapping of strings to strings");
	ret = count_ok(f, json_object_size(v), path, err);
	json_object_foreach ((json_t *)v, k, s) {
		if (ret < 0)
			break;
		ret = string_ok(s, jf_join(kp, sizeof(kp), path, k), NULL, 0, f->len_max, err);
	}
	if (ret < 0)
		return ret;
	for (size_t i = 0; *arr && i < *n; i++) {
		free(*(char **)(*arr + i * f->size + f->key_off));
		free(*(char **)(*arr + i * f->size + f->val_off));
	}
	free(*arr);
	*arr = xcalloc(json_object_size(v) + 1, f->size);
	*n = 0;
	json_object_foreach ((json_t *)v, k, s) {
		char *entry = *arr + *n * f->size;

		*(char **)(entry + f->key_off) = xstrdup(k);
		*(char **)(entry + f->val_off) =
			xstrndup(json_string_value(s), json_string_length(s));
		++*n;
	}
	return 0;
}

/* One field's value v (present) at path into the struct at base. */
static int read_field(const struct jf_field *f, const json_t *v, const char *path, void *base,
		      int depth, struct err *err)
{
	void *dst = (char *)base + f->off;
	char ex[160];

	switch (f->kind) {
	case JF_K_STR:
		return read_str(f, v, path, dst, err);
	case JF_K_STRV:
		return read_strv(f, v, path, dst, (size_t *)((char *)base + f->n_off), err);
	case JF_K_INT:
		return read_int(f, v, path, dst, err);
	case JF_K_BOOL:
		return read_bool(f, v, path, dst, err);
	case JF_K_DOUBLE:
		return read_double(f, v, path, dst, err);
	case JF_K_ENUM:
		return read_enum(f, v, path, dst, err);
	case JF_K_OBJECT:
		if (!json_is_object(v))
			return want(err, path, f, v, "a mapping%s",
				    example(f->table, ex, sizeof(ex)));
		return read_table(f->table, v, path, dst, depth + 1, err);
	case JF_K_LIST:
		return read_list(f, v, path, base, depth, err);
	case JF_K_MAP:
		return read_map(f, v, path, base, err);
	case JF_K_CUSTOM:
		return f->custom(v, dst, path, err);
	}
	abort();
}

/* A member of the mapping: NULL when missing, or null in a table where that means missing. */
static const json_t *member(const struct jf_table *t, const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	return v && t->null_absent && json_is_null(v) ? NULL : v;
}

/* Refuses a key t does not list, suggesting the one it differs from only in case, else naming
 * the keys known there. */
static int unknown_keys(const struct jf_table *t, const json_t *obj, const char *path,
			struct err *err)
{
	char kp[PATH_LEN], list[384];
	const struct jf_field *f;
	const char *key;
	json_t *v;

	json_object_foreach ((json_t *)obj, key, v) {
		if (t->null_absent && json_is_null(v))
			continue;
		for (f = t->fields; f->key && strcmp(f->key, key) != 0; f++)
			;
		if (f->key)
			continue;
		jf_join(kp, sizeof(kp), path, key);
		for (f = t->fields; f->key; f++)
			if (strcasecmp(f->key, key) == 0)
				return err_set(err, EINVAL, "%s: unknown key; did you mean %s?", kp,
					       f->key);
		list[0] = '\0';
		for (f = t->fields; f->key; f++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
				 f == t->fields ? "" : ", ", f->key);
		return err_set(err, EINVAL, "%s: unknown key (known here: %s)", kp, list);
	}
	return 0;
}

static int read_table(const struct jf_table *t, const json_t *v, const char *path, void *dst,
		      int depth, struct err *err)
{
	char fp[PATH_LEN], ex[160];
	int ret;

	if (depth > JF_DEPTH_MAX)
		return err_set(err, EINVAL, "%s: nested deeper than %d mappings", path,
			       JF_DEPTH_MAX);
	if (!json_is_object(v))
		return want(err, *path ? path : "the document", NULL, v, "a mapping%s",
			    example(t, ex, sizeof(ex)));
	if (t->strict && (ret = unknown_keys(t, v, path, err)) < 0)
		return ret;
	for (const struct jf_field *f = t->fields; f->key; f++) {
		const json_t *m = member(t, v, f->key);

		jf_join(fp, sizeof(fp), path, f->key);
		if (!m && f->required)
			return err_set(err, EINVAL, "%s: required%s%s", fp, f->hint ? " " : "",
				       f->hint ? f->hint : "");
		if (!m)
			continue;
		ret = read_field(f, m, fp, dst, depth, err);
		if (ret >= 0 && f->mark_given)
			*(bool *)((char *)dst + f->given_off) = true;
		if (ret >= 0 && f->check)
			ret = f->check(dst, m, fp, err);
		if (ret < 0)
			return ret;
	}
	return t->check ? t->check(dst, v, path, err) : 0;
}

int jf_read(const struct jf_table *t, const json_t *v, const char *path, void *dst, struct err *err)
{
	return read_table(t, v, path, dst, 0, err);
}
