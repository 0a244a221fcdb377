/*
 * image_strv.c: NULL-terminated string vectors, the shape of an image config's Entrypoint, Cmd
 * and Env and of the store's reference lists, with their JSON form.
 */
#include "image_internal.h"

#include <errno.h>
#include <string.h>

#include "xalloc.h"

#define IMAGE_MAX_STRV 4096

/* Number of strings before the NULL. */
size_t image_strv_len(char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

/* Frees the strings and the vector. */
void image_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* A deep copy; never NULL. */
char **image_strv_dup(char *const *v)
{
	size_t n = image_strv_len(v);
	char **out = xcalloc(n + 1, sizeof(*out));

	for (size_t i = 0; i < n; i++)
		out[i] = xstrdup(v[i]);
	return out;
}

/* Whether s is one of the strings. */
bool image_strv_has(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (!strcmp(v[i], s))
			return true;
	return false;
}

/* Appends a copy of s unless present. */
char **image_strv_add(char **v, const char *s)
{
	size_t n = image_strv_len(v);

	if (image_strv_has(v, s))
		return v;
	v = xrealloc(v, (n + 2) * sizeof(*v));
	v[n] = xstrdup(s);
	v[n + 1] = NULL;
	return v;
}

/* Removes s; returns whether it was there. */
bool image_strv_remove(char **v, const char *s)
{
	size_t n = image_strv_len(v);

	for (size_t i = 0; i < n; i++) {
		if (strcmp(v[i], s))
			continue;
		free(v[i]);
		memmove(&v[i], &v[i + 1], (n - i) * sizeof(*v));
		return true;
	}
	return false;
}

/* A JSON array of strings (or null/absent) as a vector; what names the field in errors. */
int image_strv_from_json(const json_t *j, const char *what, char ***out, struct err *err)
{
	size_t i;
	json_t *v;
	char **res;

	if (!j || json_is_null(j)) {
		*out = xcalloc(1, sizeof(char *));
		return 0;
	}
	if (!json_is_array(j) || json_array_size(j) > IMAGE_MAX_STRV)
		return err_set(err, EPROTO, "%s: expected a list of at most %d strings", what,
			       IMAGE_MAX_STRV);
	res = xcalloc(json_array_size(j) + 1, sizeof(*res));
	json_array_foreach (j, i, v) {
		if (!json_is_string(v)) {
			image_strv_free(res);
			return err_set(err, EPROTO, "%s[%zu]: expected a string", what, i);
		}
		res[i] = xstrdup(json_string_value(v));
	}
	*out = res;
	return 0;
}

/* The vector as a new JSON array. */
json_t *image_strv_to_json(char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}
