/*
 * podspec_field.c: rules the parts of the Pod manifest reader share: a quantity's text, and
 * the RFC 1123 name check the pod, its volumes and its containers take.
 */
#include "podspec_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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
			       jf_type_name(v));
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

/* A name that must be an RFC 1123 label (a namespace, a hostname, a volume's or a container's
 * name), in the API server's words. */
int podspec_check_label(void *obj, const json_t *v, const char *path, struct err *err)
{
	(void)obj;
	if (podspec_is_label(json_string_value(v), json_string_length(v)))
		return 0;
	return err_set(err, EINVAL,
		       "%s: \"%s\" is not a valid name: use at most 63 characters of a-z, 0-9 "
		       "and '-', starting and ending with a letter or digit",
		       path, json_string_value(v));
}
