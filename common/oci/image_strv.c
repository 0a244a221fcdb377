/*
 * image_strv.c: the string vectors of an image (its config's Entrypoint, Cmd and Env, the
 * store's reference lists) in their JSON form, and the reference lists as sets.
 */
#include "image_internal.h"

#include <errno.h>
#include <string.h>

#include "xalloc.h"

#define IMAGE_MAX_STRV 4096

/* Appends a copy of s unless present. */
char **image_strv_add(char **v, const char *s)
{
	struct strvec sv = STRVEC_INIT;

	if (strv_has(v, s))
		return v;
	strvec_attach(&sv, v);
	strvec_push(&sv, s);
	return strvec_detach(&sv);
}

/* Removes s; returns whether it was there. */
bool image_strv_remove(char **v, const char *s)
{
	size_t n = strv_len(v);

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
	struct strvec sv = STRVEC_INIT;
	size_t i;
	json_t *v;

	if (j && !json_is_null(j) && (!json_is_array(j) || json_array_size(j) > IMAGE_MAX_STRV))
		return err_set(err, EINVAL, "%s: expected a list of at most %d strings", what,
			       IMAGE_MAX_STRV);
	json_array_foreach (j, i, v) {
		if (!json_is_string(v)) {
			strvec_clear(&sv);
			return err_set(err, EINVAL, "%s[%zu]: expected a string", what, i);
		}
		strvec_push(&sv, json_string_value(v));
	}
	*out = strvec_detach(&sv);
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
