/*
 * cri_validate_fields.c: the checks every CRI message shares (see cri_validate_internal.h):
 * Kubernetes' rules for names, labels and annotations, ids, paths, and the bounds of strings
 * and lists, each naming the field and showing a bad value quoted and cut.
 */
#include "cri_validate_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Writes s quoted into buf, at most SHOW bytes of it, bytes that are not printable ASCII as
 * \xNN, "..." when cut; returns buf. */
const char *cv_show(char buf[static SHOW * 4 + 8], const char *s)
{
	size_t n = 0, i;

	buf[n++] = '"';
	for (i = 0; s[i] && i < SHOW; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
			buf[n++] = (char)c;
		else
			n += (size_t)snprintf(buf + n, 5, "\\x%02x", c);
	}
	buf[n++] = '"';
	if (s[i]) {
		memcpy(buf + n, "...", 3);
		n += 3;
	}
	buf[n] = '\0';
	return buf;
}

static bool is_alnum(char c, bool any_case)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       (any_case && c >= 'A' && c <= 'Z');
}

/* A DNS-1123 label of at most max characters (Kubernetes: 63): letters, digits and '-', a
 * letter or digit at both ends; lower case letters only unless any_case. */
static bool is_dns_label(const char *s, size_t len, size_t max, bool any_case)
{
	if (len == 0 || len > max)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!is_alnum(s[i], any_case) && (s[i] != '-' || i == 0 || i == len - 1))
			return false;
	return true;
}

/* A container's name as runtimes take it: the kubelet sends DNS-1123 labels, the CRI
 * validation suite also dots and underscores (names built from file names), which containerd
 * takes; never a '/' or anything that is not printable ASCII. */
bool cv_is_container_name(const char *s, size_t len, size_t max)
{
	if (len == 0 || len > max || !is_alnum(s[0], true))
		return false;
	for (size_t i = 1; i < len; i++)
		if (!is_alnum(s[i], true) && s[i] != '-' && s[i] != '.' && s[i] != '_')
			return false;
	return true;
}

/* A DNS-1123 subdomain: labels joined by '.', at most 253 characters. As in Kubernetes' own
 * check, a label in it is not held to 63 characters (the CRI validation suite's pod names
 * have parts of up to ~70). */
static bool is_dns_subdomain(const char *s, size_t len, bool any_case)
{
	size_t start = 0;

	if (len == 0 || len > MAX_SUBDOMAIN)
		return false;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '.')
			continue;
		if (!is_dns_label(s + start, i - start, MAX_SUBDOMAIN, any_case))
			return false;
		start = i + 1;
	}
	return true;
}

/* A label value, or the name part of a label key when it must not be empty: at most 63 of
 * [A-Za-z0-9] at both ends and [-_.A-Za-z0-9] inside. */
static bool is_label_value(const char *s, size_t len)
{
	if (len > MAX_LABEL_VALUE)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!is_alnum(s[i], true) && (!strchr("-_.", s[i]) || i == 0 || i == len - 1))
			return false;
	return true;
}

/* A label or annotation key: an optional DNS-1123 subdomain and '/', then a name. Annotation
 * keys are compared in any case, as the API server lower-cases them before it checks. */
static bool is_qualified_name(const char *s, bool any_case)
{
	const char *slash = strchr(s, '/');
	const char *name = slash ? slash + 1 : s;

	if (slash && !is_dns_subdomain(s, (size_t)(slash - s), any_case))
		return false;
	return name[0] && is_label_value(name, strlen(name));
}

/* The name of a field from a format and its arguments (an index, a parent's path). */
#define FIELD_NAME(buf, fmt)                                                                       \
	do {                                                                                       \
		va_list ap_;                                                                       \
		va_start(ap_, fmt);                                                                \
		vsnprintf(buf, sizeof(buf), fmt, ap_);                                             \
		va_end(ap_);                                                                       \
	} while (0)

/* Fails when a string is longer than max; the rest names the field, printf-style. */
int cv_check_len(const char *s, size_t max, struct err *err, const char *fmt, ...)
{
	char field[160];
	size_t n = strlen(s);

	if (n <= max)
		return 0;
	FIELD_NAME(field, fmt);
	return err_set(err, EINVAL, "%s: %zu bytes; at most %zu", field, n, max);
}

/* Fails when a list or map has more than max entries; the rest names the field. */
int cv_check_count(size_t n, size_t max, struct err *err, const char *fmt, ...)
{
	char field[160];

	if (n <= max)
		return 0;
	FIELD_NAME(field, fmt);
	return err_set(err, EINVAL, "%s: %zu entries; at most %zu", field, n, max);
}

/* A container or sandbox id: required, short, of the characters ids are made of. */
int cv_check_id(const char *field, const char *id, struct err *err)
{
	char b[SHOW * 4 + 8];
	size_t n = strlen(id);

	if (n == 0)
		return err_set(err, EINVAL, "%s: required", field);
	if (n > MAX_ID || strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				     "0123456789-_.") != n)
		return err_set(err, EINVAL,
			       "%s: %s (%zu bytes) is not an id: ids have at most %d letters, "
			       "digits, '-', '_' and '.'",
			       field, cv_show(b, id), n, MAX_ID);
	return 0;
}

/* A path kiyot joins or opens: bounded, with no ".." component; absolute when asked. */
int cv_check_path(const char *field, const char *p, bool absolute, struct err *err)
{
	char b[SHOW * 4 + 8];
	size_t n = strlen(p);

	if (cv_check_len(p, MAX_PATH, err, "%s", field) < 0)
		return -err->code;
	if (absolute && n && p[0] != '/')
		return err_set(err, EINVAL, "%s: %s is not an absolute path", field, cv_show(b, p));
	for (const char *c = p; (c = strstr(c, "..")); c += 2)
		if ((c == p || c[-1] == '/') && (c[2] == '/' || c[2] == '\0'))
			return err_set(err, EINVAL, "%s: %s: a \"..\" component is not allowed",
				       field, cv_show(b, p));
	return 0;
}

/* The metadata of a pod: name, namespace and uid, each when set (the handler requires them). */
int cv_check_pod_metadata(const char *path, const Runtime__V1__PodSandboxMetadata *md,
			  struct err *err)
{
	char b[SHOW * 4 + 8];
	size_t n;

	if (!md)
		return 0;
	n = strlen(md->name);
	if (n > CRI_MAX_POD_NAME)
		return err_set(err, EINVAL,
			       "%s.metadata.name: %zu bytes; a pod name has at most %d (a DNS-1123 "
			       "subdomain)",
			       path, n, CRI_MAX_POD_NAME);
	if (n && !is_dns_subdomain(md->name, n, true))
		return err_set(err, EINVAL,
			       "%s.metadata.name: %s is not a DNS-1123 subdomain: letters, digits, "
			       "'-' and '.', each part between dots starting and ending with a "
			       "letter or digit",
			       path, cv_show(b, md->name));
	n = strlen(md->namespace_);
	if (n && !is_dns_label(md->namespace_, n, CRI_MAX_NAMESPACE, true))
		return err_set(err, EINVAL,
			       "%s.metadata.namespace: %s (%zu bytes) is not a DNS-1123 label: at "
			       "most %d letters, digits and '-', starting and ending with a letter "
			       "or digit",
			       path, cv_show(b, md->namespace_), n, CRI_MAX_NAMESPACE);
	n = strlen(md->uid);
	for (size_t i = 0; i < n && n <= CRI_MAX_UID; i++)
		if (md->uid[i] <= 0x20 || md->uid[i] >= 0x7f || md->uid[i] == '/')
			n = CRI_MAX_UID + 1;
	if (n > CRI_MAX_UID)
		return err_set(err, EINVAL,
			       "%s.metadata.uid: %s (%zu bytes) is not a uid: at most %d printable "
			       "characters, no spaces or '/'",
			       path, cv_show(b, md->uid), strlen(md->uid), CRI_MAX_UID);
	return 0;
}

/* Labels: Kubernetes' label keys and values; the kubelet's pod name label holds a pod name. */
int cv_check_labels(const char *path, struct kv **m, size_t n, struct err *err)
{
	char b[SHOW * 4 + 8];

	if (cv_check_count(n, MAX_MAP_ENTRIES, err, "%s", path) < 0)
		return -err->code;
	for (size_t i = 0; i < n; i++) {
		const char *k = m[i]->key, *v = m[i]->value;
		size_t vn = strlen(v);

		if (!is_qualified_name(k, false))
			return err_set(
				err, EINVAL,
				"%s: key %s is not a label key: an optional lower-case "
				"DNS-1123 subdomain and '/', then at most %d letters, digits, "
				"'-', '_' or '.', starting and ending with a letter or digit",
				path, cv_show(b, k), MAX_LABEL_VALUE);
		if (strcmp(k, "io.kubernetes.pod.name") == 0
			    ? !(vn == 0 || is_dns_subdomain(v, vn, true))
			    : !is_label_value(v, vn))
			return err_set(
				err, EINVAL,
				"%s[\"%s\"]: %s (%zu bytes) is not a label value: at most %d "
				"letters, digits, '-', '_' or '.', starting and ending with a "
				"letter or digit",
				path, k, cv_show(b, v), vn,
				strcmp(k, "io.kubernetes.pod.name") == 0 ? CRI_MAX_POD_NAME
									 : MAX_LABEL_VALUE);
	}
	return 0;
}

/* Annotations: keys as label keys in any case; keys and values together bounded. */
int cv_check_annotations(const char *path, struct kv **m, size_t n, struct err *err)
{
	char b[SHOW * 4 + 8];
	size_t total = 0;

	if (cv_check_count(n, MAX_MAP_ENTRIES, err, "%s", path) < 0)
		return -err->code;
	for (size_t i = 0; i < n; i++) {
		if (!is_qualified_name(m[i]->key, true))
			return err_set(
				err, EINVAL,
				"%s: key %s is not an annotation key: an optional DNS-1123 "
				"subdomain and '/', then at most %d letters, digits, '-', '_' "
				"or '.', starting and ending with a letter or digit",
				path, cv_show(b, m[i]->key), MAX_LABEL_VALUE);
		total += strlen(m[i]->key) + strlen(m[i]->value);
	}
	if (total > CRI_MAX_ANNOTATIONS_BYTES)
		return err_set(err, EINVAL,
			       "%s: %zu bytes of keys and values; at most %d (Kubernetes' 256 KiB "
			       "and 4 KiB for the kubelet's own)",
			       path, total, CRI_MAX_ANNOTATIONS_BYTES);
	return 0;
}

/* A string list of a process (command, args, environment), added to *total. */
int cv_check_strings(const char *field, char **v, size_t n, size_t *total, struct err *err)
{
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(v[i]);

		if (len > CRI_MAX_ARG_BYTES)
			return err_set(
				err, EINVAL,
				"%s[%zu]: %zu bytes; one argument or variable has at most %d "
				"(the kernel's MAX_ARG_STRLEN)",
				field, i, len, CRI_MAX_ARG_BYTES);
		*total += len + 1;
	}
	return 0;
}

int cv_check_process_total(const char *field, size_t total, struct err *err)
{
	if (total > CRI_MAX_PROCESS_BYTES)
		return err_set(err, EINVAL,
			       "%s: %zu bytes; a process starts with at most %d of arguments and "
			       "environment (the kernel's ARG_MAX under the default 8 MiB stack)",
			       field, total, CRI_MAX_PROCESS_BYTES);
	return 0;
}
