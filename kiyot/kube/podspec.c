/*
 * podspec.c: a Pod manifest read into struct podspec: apiVersion and kind, metadata (name,
 * namespace, uid, labels, annotations), the pod-level spec fields and volumes; the containers
 * are read by podspec_container.c and the security settings by podspec_security.c. Also
 * freeing and lookups.
 */
#include "podspec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "podspec_internal.h"
#include "quantity.h"
#include "xalloc.h"
#include "yaml.h"

/* Largest total size of a pod's annotations, keys and values, as the API server allows. */
#define PODSPEC_MAX_ANNOTATIONS (256 * 1024)

/* True when s is a DNS-1123 subdomain as Kubernetes checks one (IsDNS1123Subdomain): at most
 * 253 chars of dot-separated parts of [a-z0-9-], alphanumeric at both ends. As there, a part
 * is not held to a label's 63: a Pod named with 64 or more characters and no dot is valid. */
static bool pis_subdomain(const char *s, size_t len)
{
	size_t start = 0;

	if (len == 0 || len > 253)
		return false;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '.')
			continue;
		if (!podspec_is_label_chars(s + start, i - start))
			return false;
		start = i + 1;
	}
	return true;
}

/* True for a label value or the name part of a key: [A-Za-z0-9] ends, [-_.A-Za-z0-9] inside. */
static bool pis_label_value(const char *s, size_t len)
{
	if (len > 63)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9');

		if (!alnum && (!strchr("-_.", c) || i == 0 || i == len - 1))
			return false;
	}
	return true;
}

/* True for a label or annotation key: an optional "<subdomain>/" prefix and a name. */
static bool pis_qualified_name(const char *s)
{
	const char *slash = strchr(s, '/');
	const char *name = slash ? slash + 1 : s;

	if (slash && !pis_subdomain(s, (size_t)(slash - s)))
		return false;
	return *name && pis_label_value(name, strlen(name));
}

/* Reads a string-to-string mapping (labels, annotations) into kv pairs. */
int podspec_kv_map(const json_t *obj, const char *key, const char *path, bool labels,
		   struct podspec_kv **out, size_t *n, struct err *err)
{
	const json_t *m = podspec_member(obj, key);
	_cleanup_free_ char *p = podspec_join(path, key);
	size_t total = 0, i = 0;
	const char *k;
	json_t *v;
	int ret;

	if (!m)
		return 0;
	ret = podspec_expect(m, JSON_OBJECT, p, err);
	if (ret < 0)
		return ret;
	*out = xcalloc(json_object_size(m) + 1, sizeof(**out));
	json_object_foreach ((json_t *)m, k, v) {
		_cleanup_free_ char *kp = xasprintf("%s.%s", p, k);

		if (!pis_qualified_name(k))
			return err_set(err, EINVAL,
				       "%s: invalid key: use an optional DNS prefix and '/', then "
				       "at most 63 characters of a-z, A-Z, 0-9, '-', '_' and '.'",
				       kp);
		ret = podspec_expect(v, JSON_STRING, kp, err);
		if (ret < 0)
			return ret;
		if (labels && !pis_label_value(json_string_value(v), json_string_length(v)))
			return err_set(err, EINVAL,
				       "%s: \"%s\" is not a valid label value: use at most 63 "
				       "characters of a-z, A-Z, 0-9, '-', '_' and '.'",
				       kp, json_string_value(v));
		total += strlen(k) + json_string_length(v);
		if (!labels && total > PODSPEC_MAX_ANNOTATIONS)
			return err_set(err, EINVAL, "%s: annotations are larger than %d bytes", p,
				       PODSPEC_MAX_ANNOTATIONS);
		(*out)[i].name = xstrdup(k);
		(*out)[i].value = xstrndup(json_string_value(v), json_string_length(v));
		*n = ++i;
	}
	return 0;
}

/* Reads spec.volumes: emptyDir only; a volume with no source is an emptyDir, as defaulted. */
static int pvolume(const json_t *v, const char *path, struct podspec *ps, size_t idx,
		   struct err *err)
{
	struct podspec_volume *vol = &ps->volumes[idx];
	_cleanup_free_ char *ed_path = podspec_join(path, "emptyDir");
	_cleanup_free_ char *medium = NULL;
	_cleanup_free_ char *np = podspec_join(path, "name");
	const json_t *ed;
	const char *k;
	json_t *it;
	int ret;

	ret = podspec_expect(v, JSON_OBJECT, path, err);
	if (ret < 0)
		return ret;
	ret = podspec_string(v, "name", path, true, &vol->name, err);
	if (ret < 0)
		return ret;
	ret = podspec_check_label(vol->name, np, err);
	if (ret < 0)
		return ret;
	for (size_t i = 0; i < idx; i++) {
		if (strcmp(ps->volumes[i].name, vol->name) == 0)
			return err_set(err, EINVAL, "%s: duplicate volume name \"%s\"", np,
				       vol->name);
	}
	json_object_foreach ((json_t *)v, k, it) {
		if (strcmp(k, "name") != 0 && strcmp(k, "emptyDir") != 0 && !json_is_null(it))
			return err_set(err, ENOTSUP,
				       "%s: volume \"%s\" is a %s volume; only emptyDir volumes "
				       "are supported by kiyot run",
				       path, vol->name, k);
	}
	ed = podspec_member(v, "emptyDir");
	if (!ed)
		return 0;
	ret = podspec_expect(ed, JSON_OBJECT, ed_path, err);
	if (ret < 0)
		return ret;
	ret = podspec_string(ed, "medium", ed_path, false, &medium, err);
	if (ret >= 0 && medium && *medium && strcmp(medium, "Memory") != 0)
		return err_set(err, ENOTSUP,
			       "%s.medium: \"%s\" is not supported; use \"\" (disk) or \"Memory\"",
			       ed_path, medium);
	if (ret < 0)
		return ret;
	vol->memory = medium && strcmp(medium, "Memory") == 0;
	return 0;
}

/* Reads spec.volumes into ps->volumes. */
static int pvolumes(const json_t *spec, struct podspec *ps, struct err *err)
{
	const json_t *l = podspec_member(spec, "volumes");
	size_t i;
	json_t *v;
	int ret;

	if (!l)
		return 0;
	ret = podspec_expect(l, JSON_ARRAY, "spec.volumes", err);
	if (ret < 0)
		return ret;
	ps->volumes = xcalloc(json_array_size(l) + 1, sizeof(*ps->volumes));
	json_array_foreach (l, i, v) {
		_cleanup_free_ char *p = podspec_index("spec.volumes", i);

		ps->n_volumes = i + 1;
		ret = pvolume(v, p, ps, i, err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Reads the size limit of emptyDir volumes, a quantity in bytes. */
static int pvolume_sizes(const json_t *spec, struct podspec *ps, struct err *err)
{
	const json_t *l = podspec_member(spec, "volumes");

	for (size_t i = 0; i < ps->n_volumes; i++) {
		const json_t *ed = podspec_member(json_array_get(l, i), "emptyDir");
		const json_t *sz = ed ? podspec_member(ed, "sizeLimit") : NULL;
		_cleanup_free_ char *p = xasprintf("spec.volumes[%zu].emptyDir.sizeLimit", i);
		char text[128];
		int ret;

		if (!sz)
			continue;
		ret = podspec_quantity_text(sz, p, text, sizeof(text), err);
		if (ret < 0)
			return ret;
		ret = quantity_parse_bytes(text, &ps->volumes[i].size_limit_bytes, err);
		if (ret < 0)
			return err_wrap(err, "%s", p);
	}
	return 0;
}

/* metadata.ownerReferences' controller: read leniently, since it only names whose usage a
 * pod's cell is sized from (a reference that is not a mapping with a kind and a name of
 * sensible length is skipped). */
static void pmeta_owner(const json_t *md, struct podspec *ps)
{
	const json_t *refs = podspec_member(md, "ownerReferences"), *r;
	size_t i;

	if (!json_is_array(refs))
		return;
	json_array_foreach (refs, i, r) {
		const json_t *kind = json_object_get(r, "kind"), *name = json_object_get(r, "name");

		if (!json_is_true(json_object_get(r, "controller")) || !json_is_string(kind) ||
		    !json_is_string(name) || json_string_length(kind) == 0 ||
		    json_string_length(kind) > 63 || json_string_length(name) == 0 ||
		    json_string_length(name) > 253)
			continue;
		ps->owner_kind = xstrdup(json_string_value(kind));
		ps->owner_name = xstrdup(json_string_value(name));
		return;
	}
}

/* Reads apiVersion, kind and metadata. */
static int pheader(const json_t *j, struct podspec *ps, struct err *err)
{
	_cleanup_free_ char *api = NULL, *kind = NULL;
	const json_t *md;
	int ret = podspec_string(j, "apiVersion", "", true, &api, err);

	if (ret < 0)
		return ret;
	if (strcmp(api, "v1") != 0)
		return err_set(
			err, EINVAL,
			"apiVersion: \"%s\" is not supported; kiyot run takes apiVersion: v1, "
			"kind: Pod",
			api);
	ret = podspec_string(j, "kind", "", true, &kind, err);
	if (ret < 0)
		return ret;
	if (strcmp(kind, "Pod") != 0)
		return err_set(
			err, EINVAL,
			"kind: \"%s\" is not supported; kiyot run takes a Pod (apiVersion: v1, "
			"kind: Pod)",
			kind);
	md = podspec_member(j, "metadata");
	if (!md)
		return err_set(err, EINVAL, "metadata: required (with a name)");
	ret = podspec_expect(md, JSON_OBJECT, "metadata", err);
	if (ret >= 0)
		ret = podspec_string(md, "name", "metadata", true, &ps->name, err);
	if (ret < 0)
		return ret;
	if (!pis_subdomain(ps->name, strlen(ps->name)))
		return err_set(err, EINVAL,
			       "metadata.name: \"%s\" is not a valid pod name: use at most 253 "
			       "characters of a-z, 0-9, '-' and '.', starting and ending with a "
			       "letter or digit",
			       ps->name);
	ret = podspec_string(md, "namespace", "metadata", false, &ps->namespace, err);
	if (ret >= 0 && ps->namespace)
		ret = podspec_check_label(ps->namespace, "metadata.namespace", err);
	if (ret >= 0)
		ret = podspec_string(md, "uid", "metadata", false, &ps->uid, err);
	if (ret >= 0)
		ret = podspec_kv_map(md, "labels", "metadata", true, &ps->labels, &ps->n_labels,
				     err);
	if (ret >= 0)
		ret = podspec_kv_map(md, "annotations", "metadata", false, &ps->annotations,
				     &ps->n_annotations, err);
	if (ret >= 0 && !ps->namespace)
		ps->namespace = xstrdup("default");
	if (ret >= 0)
		pmeta_owner(md, ps);
	return ret;
}

/* Reads restartPolicy, hostname and terminationGracePeriodSeconds. */
static int pspec_scalars(const json_t *spec, struct podspec *ps, struct err *err)
{
	_cleanup_free_ char *restart = NULL;
	int ret = podspec_string(spec, "restartPolicy", "spec", false, &restart, err);

	if (ret < 0)
		return ret;
	if (!restart || strcmp(restart, "Always") == 0)
		ps->restart_policy = PODSPEC_RESTART_ALWAYS;
	else if (strcmp(restart, "OnFailure") == 0)
		ps->restart_policy = PODSPEC_RESTART_ON_FAILURE;
	else if (strcmp(restart, "Never") == 0)
		ps->restart_policy = PODSPEC_RESTART_NEVER;
	else
		return err_set(err, EINVAL,
			       "spec.restartPolicy: \"%s\" is not one of Always, OnFailure, Never",
			       restart);
	ret = podspec_string(spec, "hostname", "spec", false, &ps->hostname, err);
	if (ret >= 0 && ps->hostname)
		ret = podspec_check_label(ps->hostname, "spec.hostname", err);
	ps->termination_grace_period_seconds = 30;
	if (ret >= 0)
		ret = podspec_int(spec, "terminationGracePeriodSeconds", "spec", 0, INT32_MAX,
				  &ps->termination_grace_period_seconds, NULL, err);
	return ret;
}

/* Reads and validates a Pod; stops at the first error. */
int podspec_from_json(const json_t *j, struct podspec **out, struct err *err)
{
	struct podspec *ps;
	const json_t *spec;
	int ret;

	if (!json_is_object(j))
		return err_set(err, EINVAL, "manifest: must be a mapping (a Pod object), not %s",
			       j ? podspec_type_name(j) : "empty");
	ps = xcalloc(1, sizeof(*ps));
	ret = pheader(j, ps, err);
	spec = podspec_member(j, "spec");
	if (ret >= 0 && !spec)
		ret = err_set(err, EINVAL, "spec: required (with containers)");
	if (ret >= 0)
		ret = podspec_expect(spec, JSON_OBJECT, "spec", err);
	if (ret >= 0)
		ret = pspec_scalars(spec, ps, err);
	if (ret >= 0)
		ret = podspec_read_pod_security(spec, ps, err);
	if (ret >= 0)
		ret = podspec_check_security_annotations(ps, err);
	if (ret >= 0)
		ret = pvolumes(spec, ps, err);
	if (ret >= 0)
		ret = pvolume_sizes(spec, ps, err);
	if (ret >= 0)
		ret = podspec_read_containers(spec, "initContainers", ps, true, err);
	if (ret >= 0)
		ret = podspec_read_containers(spec, "containers", ps, false, err);
	if (ret >= 0)
		ret = podspec_read_overhead(spec, ps, err);
	if (ret >= 0)
		ret = podspec_read_node(spec, ps, err);
	if (ret < 0) {
		podspec_free(ps);
		return ret;
	}
	*out = ps;
	return 0;
}

/* Reads a manifest file (YAML or JSON) and the Pod in it. */
int podspec_from_yaml_file(const char *path, struct podspec **out, struct err *err)
{
	json_t *j = NULL;
	int ret = yaml_file_to_json(path, PODSPEC_MAX_FILE, &j, err);

	if (ret < 0)
		return ret;
	ret = podspec_from_json(j, out, err);
	json_decref(j);
	if (ret < 0)
		return err_wrap(err, "%s", path);
	return 0;
}

/* Frees n name/value pairs. */
void podspec_kv_free(struct podspec_kv *kv, size_t n)
{
	for (size_t i = 0; kv && i < n; i++) {
		free(kv[i].name);
		free(kv[i].value);
	}
	free(kv);
}

/* Frees a podspec and everything it owns; NULL is fine. */
void podspec_free(struct podspec *p)
{
	if (!p)
		return;
	free(p->name);
	free(p->namespace);
	free(p->uid);
	free(p->owner_kind);
	free(p->owner_name);
	podspec_kv_free(p->labels, p->n_labels);
	podspec_kv_free(p->annotations, p->n_annotations);
	free(p->hostname);
	for (size_t i = 0; p->volumes && i < p->n_volumes; i++)
		free(p->volumes[i].name);
	free(p->volumes);
	podspec_pod_security_release(&p->security);
	podspec_containers_free(p->init_containers, p->n_init_containers);
	podspec_containers_free(p->containers, p->n_containers);
	podspec_node_release(p);
	free(p);
}

/* Looks a key up in name/value pairs. */
static const char *pkv_get(const struct podspec_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(kv[i].name, key) == 0)
			return kv[i].value;
	}
	return NULL;
}

/* A label's value, or NULL. */
const char *podspec_label(const struct podspec *p, const char *key)
{
	return pkv_get(p->labels, p->n_labels, key);
}

/* An annotation's value, or NULL. */
const char *podspec_annotation(const struct podspec *p, const char *key)
{
	return pkv_get(p->annotations, p->n_annotations, key);
}

/* A nodeSelector's value, or NULL. */
const char *podspec_node_selector(const struct podspec *p, const char *key)
{
	return pkv_get(p->node_selector, p->n_node_selector, key);
}

/* The Kubernetes spelling of a restart policy. */
const char *podspec_restart_name(enum podspec_restart r)
{
	switch (r) {
	case PODSPEC_RESTART_ON_FAILURE:
		return "OnFailure";
	case PODSPEC_RESTART_NEVER:
		return "Never";
	default:
		return "Always";
	}
}

/* The Kubernetes spelling of a pull policy. */
const char *podspec_pull_name(enum podspec_pull p)
{
	switch (p) {
	case PODSPEC_PULL_IF_NOT_PRESENT:
		return "IfNotPresent";
	case PODSPEC_PULL_NEVER:
		return "Never";
	default:
		return "Always";
	}
}
