/*
 * podspec_field.c: typed readers for single fields of a Pod manifest (strings, integers, string
 * lists, quantities) that name the offending JSON path in their errors, for the parts not yet
 * read by tables: each is a one-field table of common/jfields.h, so their errors are worded as
 * the tables' are. Also the RFC 1123 name check the pod and its containers share.
 */
#include "podspec_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "jfields.h"
#include "xalloc.h"

#define HINT_QUOTE "(quote numbers and booleans in YAML, e.g. \"8080\")"

/* "a.b" from a path and a key; a key alone at the root. The caller frees. */
char *podspec_join(const char *path, const char *key)
{
	return *path ? xasprintf("%s.%s", path, key) : xstrdup(key);
}

/* "a[3]" from a path and an index. The caller frees. */
char *podspec_index(const char *path, size_t i)
{
	return xasprintf("%s[%zu]", path, i);
}

/* Names the JSON type of v for error messages. */
const char *podspec_type_name(const json_t *v)
{
	return jf_type_name(v);
}

/* The member key of obj, or NULL when missing or null (both mean "not given"). */
const json_t *podspec_member(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_null(v) ? NULL : v;
}

/* Checks that v (at path) has the given type; a wrong type is an error naming what it must be
 * and what it is, in jfields.h's words. */
int podspec_expect(const json_t *v, json_type t, const char *path, struct err *err)
{
	static const char *const names[] = {
		[JSON_OBJECT] = "a mapping",	[JSON_ARRAY] = "a list",
		[JSON_STRING] = "a string",	[JSON_INTEGER] = "an integer",
		[JSON_REAL] = "a number",	[JSON_TRUE] = "true or false",
		[JSON_FALSE] = "true or false", [JSON_NULL] = "null",
	};
	bool quote = t == JSON_STRING && (json_is_number(v) || json_is_boolean(v));
	char val[64];

	if (json_typeof(v) == t || (t == JSON_TRUE && json_is_boolean(v)))
		return 0;
	return err_set(err, EINVAL, "%s: must be %s%s, not %s", path, names[t],
		       quote ? " " HINT_QUOTE : "", jf_value_text(v, val));
}

/* One field of obj read by jfields into d (the struct the field's offsets point into); null
 * is "not given". */
static int read_one(const struct jf_field *f, const json_t *obj, const char *path, void *d,
		    struct err *err)
{
	const struct jf_field fields[] = { *f, JF_END };
	const struct jf_table table = { .fields = fields, .null_absent = true };

	return jf_read(&table, obj, path, d, err);
}

/* Copies an optional string member into *out (NULL when not given). */
int podspec_string(const json_t *obj, const char *key, const char *path, bool required, char **out,
		   struct err *err)
{
	struct one {
		char *s;
	} d = { NULL };
	const struct jf_field f = { JF_STR(key, struct one, s), .required = required,
				    .min = required, .max = PODSPEC_MAX_FILE };
	int ret = read_one(&f, obj, path, &d, err);

	if (ret >= 0 && d.s)
		*out = d.s;
	return ret;
}

/* Reads an optional integer member within [min, max]; *given says whether it was there. */
int podspec_int(const json_t *obj, const char *key, const char *path, int64_t min, int64_t max,
		int64_t *out, bool *given, struct err *err)
{
	const struct jf_field f = {
		.key = key, .kind = JF_K_INT, .size = sizeof(*out), .min = min, .max = max
	};

	if (given)
		*given = podspec_member(obj, key) != NULL;
	return read_one(&f, obj, path, out, err);
}

/* Reads an optional boolean member; *given says whether it was there. */
int podspec_bool(const json_t *obj, const char *key, const char *path, bool *out, bool *given,
		 struct err *err)
{
	struct one {
		bool b;
	};
	const struct jf_field f = { JF_BOOL(key, struct one, b) };

	*given = podspec_member(obj, key) != NULL;
	return read_one(&f, obj, path, out, err);
}

/* Refuses a member of obj not named in known (NULL-terminated), naming the known ones. */
int podspec_check_keys(const json_t *obj, const char *path, const char *const *known,
		       struct err *err)
{
	const char *k;
	json_t *v;

	json_object_foreach ((json_t *)obj, k, v) {
		char list[512] = "";
		size_t i;

		for (i = 0; known[i] && strcmp(known[i], k) != 0; i++)
			;
		if (known[i] || json_is_null(v))
			continue;
		for (i = 0; known[i]; i++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
				 i ? ", " : "", known[i]);
		return err_set(err, EINVAL, "%s.%s: unknown field (known here: %s)", path, k, list);
	}
	return 0;
}

/* Reads a list of strings (command, args) into a NULL-terminated array. */
int podspec_string_list(const json_t *obj, const char *key, const char *path, char ***out,
			size_t *n, struct err *err)
{
	struct one {
		char **v;
		size_t n;
	} d = { NULL, 0 };
	const struct jf_field f = { JF_STRV(key, struct one, v, n, 0),
				    .len_max = PODSPEC_MAX_FILE };
	int ret = read_one(&f, obj, path, &d, err);

	if (ret >= 0 && d.v) {
		*out = d.v;
		*n = d.n;
	}
	return ret;
}

/* Turns a quantity given as a string or a number into its text form for the parser. */
int podspec_quantity_text(const json_t *v, const char *path, char *buf, size_t size,
			  struct err *err)
{
	if (json_is_string(v))
		snprintf(buf, size, "%s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(buf, size, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, size, "%.15g", json_real_value(v));
	else
		return err_set(err, EINVAL,
			       "%s: must be a quantity such as \"500m\" or \"1Gi\", not %s", path,
			       podspec_type_name(v));
	return 0;
}

/* True when s is made as an RFC 1123 label is, of any length: [a-z0-9-], alphanumeric at both
 * ends, not empty. */
bool podspec_is_label_chars(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

		if (!alnum && (c != '-' || i == 0 || i == len - 1))
			return false;
	}
	return true;
}

/* True when s is an RFC 1123 label: [a-z0-9-], 1-63 chars, alphanumeric at both ends. */
bool podspec_is_label(const char *s, size_t len)
{
	return len <= 63 && podspec_is_label_chars(s, len);
}

/* Checks a name that must be an RFC 1123 label, in the API server's words. */
int podspec_check_label(const char *s, const char *path, struct err *err)
{
	if (podspec_is_label(s, strlen(s)))
		return 0;
	return err_set(err, EINVAL,
		       "%s: \"%s\" is not a valid name: use at most 63 characters of a-z, 0-9 "
		       "and '-', starting and ending with a letter or digit",
		       path, s);
}
