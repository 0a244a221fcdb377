/*
 * podspec.c: a Pod manifest read into struct podspec: apiVersion and kind, metadata (name,
 * namespace, uid, labels, annotations, the controller among the owner references), the
 * pod-level spec fields and volumes, by the tables below (common/jfields.h), which take in the
 * tables of podspec_container.c (containers), podspec_security.c (security settings) and
 * podspec_node.c (where the pod may run). Also freeing and lookups.
 */
#include "podspec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "jfields.h"
#include "podspec_internal.h"
#include "quantity.h"
#include "xalloc.h"
#include "yaml.h"

/* Largest total size of a pod's annotations, keys and values, as the API server allows. */
#define PODSPEC_MAX_ANNOTATIONS (256 * 1024)
/* The most labels, annotations or nodeSelector entries read (the API server bounds them only
 * by the object's size), and the most volumes. Other lists take jfields' 4096 entries. */
#define PODSPEC_MAX_MAP (64 * 1024)
#define PODSPEC_MAX_VOLUMES 1024

/* read_enum stores an int. */
_Static_assert(sizeof(enum podspec_restart) == sizeof(int), "restartPolicy is read as an int");

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

/* The pairs of the mapping m at path (labels, annotations, nodeSelector), its values already
 * checked to be strings: every key a qualified name; labels: every value a label value; else
 * keys and values at most PODSPEC_MAX_ANNOTATIONS bytes in all. */
static int check_kv(const json_t *m, const char *path, bool labels, struct err *err)
{
	size_t total = 0;
	const char *k;
	char kp[256];
	json_t *v;

	json_object_foreach ((json_t *)m, k, v) {
		jf_join(kp, sizeof(kp), path, k);
		if (!pis_qualified_name(k))
			return err_set(err, EINVAL,
				       "%s: invalid key: use an optional DNS prefix and '/', then "
				       "at most 63 characters of a-z, A-Z, 0-9, '-', '_' and '.'",
				       kp);
		if (labels && !pis_label_value(json_string_value(v), json_string_length(v)))
			return err_set(err, EINVAL,
				       "%s: \"%s\" is not a valid label value: use at most 63 "
				       "characters of a-z, A-Z, 0-9, '-', '_' and '.'",
				       kp, json_string_value(v));
		total += strlen(k) + json_string_length(v);
		if (!labels && total > PODSPEC_MAX_ANNOTATIONS)
			return err_set(err, EINVAL,
				       "%s: its keys and values are larger than %d bytes in all",
				       path, PODSPEC_MAX_ANNOTATIONS);
	}
	return 0;
}

static int check_labels(void *obj, const json_t *v, const char *path, struct err *err)
{
	(void)obj;
	return check_kv(v, path, true, err);
}

/* spec.nodeSelector: keys as labels', values bounded as annotations' are. */
static int check_node_selector(void *obj, const json_t *v, const char *path, struct err *err)
{
	(void)obj;
	return check_kv(v, path, false, err);
}

/* metadata.annotations: as any annotations, and none asking for a seccomp or AppArmor profile
 * (obj: the podspec, its annotations stored). */
static int check_pod_annotations(void *obj, const json_t *v, const char *path, struct err *err)
{
	int ret = check_kv(v, path, false, err);

	return ret < 0 ? ret : podspec_check_security_annotations(obj, err);
}

/* metadata.name: a DNS subdomain, in the API server's words. */
static int check_pod_name(void *obj, const json_t *v, const char *path, struct err *err)
{
	(void)obj;
	if (pis_subdomain(json_string_value(v), json_string_length(v)))
		return 0;
	return err_set(err, EINVAL,
		       "%s: \"%s\" is not a valid pod name: use at most 253 characters of a-z, "
		       "0-9, '-' and '.', starting and ending with a letter or digit",
		       path, json_string_value(v));
}

/* metadata.ownerReferences' controller: read leniently, since it only names whose usage a
 * pod's cell is sized from (a reference that is not a mapping with a kind and a name of
 * sensible length is skipped, and so is a list that is none). */
static int read_owner(const json_t *refs, void *dst, const char *path, struct err *err)
{
	struct podspec *ps = dst;
	const json_t *r;
	size_t i;

	(void)path;
	(void)err;
	json_array_foreach ((json_t *)refs, i, r) {
		const json_t *kind = json_object_get(r, "kind"), *name = json_object_get(r, "name");

		if (!json_is_true(json_object_get(r, "controller")) || !json_is_string(kind) ||
		    !json_is_string(name) || json_string_length(kind) == 0 ||
		    json_string_length(kind) > 63 || json_string_length(name) == 0 ||
		    json_string_length(name) > 253)
			continue;
		ps->owner_kind = xstrdup(json_string_value(kind));
		ps->owner_name = xstrdup(json_string_value(name));
		break;
	}
	return 0;
}

/* apiVersion: v1, and kind: Pod, the only object kiyot reads. */
static int read_exactly(const json_t *v, const char *path, const char *want, const char *says,
			struct err *err)
{
	char val[64];

	if (json_is_string(v) && strcmp(json_string_value(v), want) == 0 &&
	    json_string_length(v) == strlen(want))
		return 0;
	return err_set(err, EINVAL, "%s: %s is not supported; kiyot run takes %s", path,
		       jf_value_text(v, val), says);
}

static int read_api_version(const json_t *v, void *dst, const char *path, struct err *err)
{
	(void)dst;
	return read_exactly(v, path, "v1", "apiVersion: v1, kind: Pod", err);
}

static int read_kind(const json_t *v, void *dst, const char *path, struct err *err)
{
	(void)dst;
	return read_exactly(v, path, "Pod", "a Pod (apiVersion: v1, kind: Pod)", err);
}

/* emptyDir.medium: "" (the node's disk) or Memory (a tmpfs). */
static int read_medium(const json_t *v, void *dst, const char *path, struct err *err)
{
	const char *m = json_is_string(v) ? json_string_value(v) : NULL;
	char val[64];

	if (!m)
		return err_set(err, EINVAL, "%s: must be a string, not %s", path,
			       jf_value_text(v, val));
	if (*m && strcmp(m, "Memory") != 0)
		return err_set(err, ENOTSUP,
			       "%s: %s is not supported; use \"\" (disk) or \"Memory\"", path,
			       jf_value_text(v, val));
	((struct podspec_volume *)dst)->memory = *m != '\0';
	return 0;
}

/* emptyDir.sizeLimit: a quantity of bytes. */
static int read_size_limit(const json_t *v, void *dst, const char *path, struct err *err)
{
	char text[128];
	int ret = podspec_quantity_text(v, path, text, sizeof(text), err);

	if (ret >= 0 && quantity_parse_bytes(text, dst, err) < 0)
		return err_wrap(err, "%s", path);
	return ret;
}

/* A volume of another kind than emptyDir (a non-null member besides name and emptyDir). */
static int check_volume_kind(void *obj, const json_t *v, const char *path, struct err *err)
{
	const char *k;
	json_t *it;

	json_object_foreach ((json_t *)v, k, it) {
		if (strcmp(k, "name") != 0 && strcmp(k, "emptyDir") != 0 && !json_is_null(it))
			return err_set(err, ENOTSUP,
				       "%s: volume \"%s\" is a %s volume; only emptyDir volumes "
				       "are supported by kiyot run",
				       path, ((struct podspec_volume *)obj)->name, k);
	}
	return 0;
}

/* Volume names are unique in a pod. */
static int check_volume_names(void *obj, const json_t *v, const char *path, struct err *err)
{
	const struct podspec *ps = obj;

	(void)v;
	for (size_t i = 1; i < ps->n_volumes; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(ps->volumes[i].name, ps->volumes[j].name) == 0)
				return err_set(err, EINVAL,
					       "%s[%zu].name: duplicate volume name \"%s\"", path,
					       i, ps->volumes[i].name);
	return 0;
}

static void volume_release(void *v)
{
	free(((struct podspec_volume *)v)->name);
}

/* spec.containers given: a pod needs one (an empty list is podspec_check_containers'). */
static int check_spec(void *obj, const json_t *v, const char *path, struct err *err)
{
	(void)v;
	if (((struct podspec *)obj)->n_containers > 0)
		return 0;
	return err_set(err, EINVAL, "%s.containers: required (a pod needs at least one container)",
		       path);
}

/*
 * The tables. As the API server does, a field kiyot does not know is dropped and null is "not
 * given"; what kiyot cannot honour is refused where it is read.
 */
#define POD struct podspec
#define VOL struct podspec_volume

static const struct jf_field empty_dir_fields[] = {
	{ JF_CUSTOM("medium", 0, read_medium) },
	{ JF_CUSTOM("sizeLimit", offsetof(VOL, size_limit_bytes), read_size_limit) },
	JF_END,
};
static const struct jf_table empty_dir_table = { .fields = empty_dir_fields, .null_absent = true };

static const struct jf_field volume_fields[] = {
	{ JF_STR("name", VOL, name), .required = true, .min = 1, .check = podspec_check_label },
	{ JF_OBJECT("emptyDir", 0, &empty_dir_table) },
	JF_END,
};
static const struct jf_table volume_table = { .fields = volume_fields,
					      .null_absent = true,
					      .example = "{name: scratch, emptyDir: {}}",
					      .check = check_volume_kind,
					      .release = volume_release };

static const char *const restart_names[] = { "Always", "OnFailure", "Never", NULL };

static const struct jf_field spec_fields[] = {
	{ JF_ENUM("restartPolicy", POD, restart_policy, restart_names) },
	{ JF_STR("hostname", POD, hostname), .check = podspec_check_label },
	{ JF_INT("terminationGracePeriodSeconds", POD, termination_grace_period_seconds, 0,
		 INT32_MAX) },
	{ JF_LIST("volumes", POD, volumes, n_volumes, VOL, PODSPEC_MAX_VOLUMES, &volume_table),
	  .check = check_volume_names },
	{ JF_BOOL("hostNetwork", POD, host_network) },
	{ JF_BOOL("hostPID", POD, host_pid) },
	{ JF_BOOL("hostIPC", POD, host_ipc) },
	{ JF_BOOL("shareProcessNamespace", POD, share_process_namespace),
	  .check = podspec_check_share_pid },
	{ JF_CUSTOM("hostUsers", 0, podspec_read_host_users) },
	{ JF_OBJECT("securityContext", offsetof(POD, security), &podspec_pod_security_table) },
	{ JF_LIST("initContainers", POD, init_containers, n_init_containers,
		  struct podspec_container, 0, &podspec_container_table),
	  .check = podspec_check_init_containers },
	{ JF_LIST("containers", POD, containers, n_containers, struct podspec_container, 0,
		  &podspec_container_table),
	  .check = podspec_check_containers },
	{ JF_OBJECT("overhead", offsetof(POD, overhead), &podspec_quantities_table) },
	{ JF_MAP("nodeSelector", POD, node_selector, n_node_selector, struct podspec_kv, name,
		 value, PODSPEC_MAX_MAP),
	  .len_max = PODSPEC_MAX_ANNOTATIONS, .check = check_node_selector },
	{ JF_OBJECT("affinity", 0, &podspec_affinity_table) },
	JF_END,
};
static const struct jf_table spec_table = { .fields = spec_fields,
					    .null_absent = true,
					    .check = check_spec };

static const struct jf_field metadata_fields[] = {
	{ JF_STR("name", POD, name), .required = true, .min = 1, .check = check_pod_name },
	{ JF_STR("namespace", POD, namespace), .check = podspec_check_label },
	{ JF_STR("uid", POD, uid) },
	{ JF_MAP("labels", POD, labels, n_labels, struct podspec_kv, name, value, PODSPEC_MAX_MAP),
	  .check = check_labels },
	{ JF_MAP("annotations", POD, annotations, n_annotations, struct podspec_kv, name, value,
		 PODSPEC_MAX_MAP),
	  .len_max = PODSPEC_MAX_ANNOTATIONS, .check = check_pod_annotations },
	{ JF_CUSTOM("ownerReferences", 0, read_owner) },
	JF_END,
};
static const struct jf_table metadata_table = { .fields = metadata_fields, .null_absent = true };

static const struct jf_field pod_fields[] = {
	{ JF_CUSTOM("apiVersion", 0, read_api_version), .required = true },
	{ JF_CUSTOM("kind", 0, read_kind), .required = true },
	{ JF_OBJECT("metadata", 0, &metadata_table), .required = true, .hint = "(with a name)" },
	{ JF_OBJECT("spec", 0, &spec_table), .required = true, .hint = "(with containers)" },
	JF_END,
};
static const struct jf_table pod_table = { .fields = pod_fields, .null_absent = true };

/* Reads and validates a Pod; stops at the first error. */
int podspec_from_json(const json_t *j, struct podspec **out, struct err *err)
{
	struct podspec *ps;
	int ret;

	if (!json_is_object(j))
		return err_set(err, EINVAL, "manifest: must be a mapping (a Pod object), not %s",
			       j ? jf_type_name(j) : "empty");
	ps = xcalloc(1, sizeof(*ps));
	ps->termination_grace_period_seconds = 30;
	ret = jf_read(&pod_table, j, "", ps, err);
	if (ret >= 0 && !ps->namespace)
		ps->namespace = xstrdup("default");
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

void podspec_kv_release(void *kv)
{
	free(((struct podspec_kv *)kv)->name);
	free(((struct podspec_kv *)kv)->value);
}

/* Frees n name/value pairs. */
void podspec_kv_free(struct podspec_kv *kv, size_t n)
{
	for (size_t i = 0; kv && i < n; i++)
		podspec_kv_release(&kv[i]);
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
