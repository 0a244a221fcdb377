#include "podspec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "quantity.h"
#include "xalloc.h"
#include "yaml.h"

/* Largest total size of a pod's annotations, keys and values, as the API server allows. */
#define PODSPEC_MAX_ANNOTATIONS (256 * 1024)

#define HINT_QUOTE "(quote numbers and booleans in YAML, e.g. \"8080\")"

/* "a.b" from a path and a key; a key alone at the root. The caller frees. */
static char *pjoin(const char *path, const char *key)
{
	return *path ? xasprintf("%s.%s", path, key) : xstrdup(key);
}

/* "a[3]" from a path and an index. The caller frees. */
static char *pindex(const char *path, size_t i)
{
	return xasprintf("%s[%zu]", path, i);
}

/* Names the JSON type of v for error messages. */
static const char *ptype_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "a mapping";
	case JSON_ARRAY:
		return "a list";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

/* The member key of obj, or NULL when missing or null (both mean "not given"). */
static const json_t *pmember(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	return json_is_null(v) ? NULL : v;
}

/* Checks that v (at path) has the given type; a wrong type is an error naming both types. */
static int pexpect(const json_t *v, json_type t, const char *path, struct err *err)
{
	static const char *const names[] = {
		[JSON_OBJECT] = "a mapping",   [JSON_ARRAY] = "a list",	 [JSON_STRING] = "a string",
		[JSON_INTEGER] = "an integer", [JSON_REAL] = "a number", [JSON_TRUE] = "a boolean",
		[JSON_FALSE] = "a boolean",    [JSON_NULL] = "null",
	};

	if (json_typeof(v) == t || (t == JSON_TRUE && json_is_boolean(v)))
		return 0;
	if (t == JSON_STRING && (json_is_number(v) || json_is_boolean(v)))
		return err_set(err, EINVAL, "%s: must be a string, not %s " HINT_QUOTE, path,
			       ptype_name(v));
	return err_set(err, EINVAL, "%s: must be %s, not %s", path, names[t], ptype_name(v));
}

/* Copies an optional string member into *out (NULL when not given). */
static int pstring(const json_t *obj, const char *key, const char *path, bool required, char **out,
		   struct err *err)
{
	const json_t *v = pmember(obj, key);
	_cleanup_free_ char *p = pjoin(path, key);
	int ret;

	if (!v) {
		if (required)
			return err_set(err, EINVAL, "%s: required", p);
		return 0;
	}
	ret = pexpect(v, JSON_STRING, p, err);
	if (ret < 0)
		return ret;
	if (required && json_string_length(v) == 0)
		return err_set(err, EINVAL, "%s: required (it is empty)", p);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return err_set(err, EINVAL, "%s: contains a NUL character", p);
	*out = xstrdup(json_string_value(v));
	return 0;
}

/* Reads an optional integer member within [min, max]; *given says whether it was there. */
static int pint(const json_t *obj, const char *key, const char *path, int64_t min, int64_t max,
		int64_t *out, bool *given, struct err *err)
{
	const json_t *v = pmember(obj, key);
	_cleanup_free_ char *p = pjoin(path, key);
	int ret;

	if (given)
		*given = v != NULL;
	if (!v)
		return 0;
	ret = pexpect(v, JSON_INTEGER, p, err);
	if (ret < 0)
		return ret;
	if (json_integer_value(v) < min || json_integer_value(v) > max)
		return err_set(err, EINVAL,
			       "%s: %lld is out of range; must be between %lld and %lld", p,
			       (long long)json_integer_value(v), (long long)min, (long long)max);
	*out = json_integer_value(v);
	return 0;
}

/* True when s is an RFC 1123 label: [a-z0-9-], 1-63 chars, alphanumeric at both ends. */
static bool pis_label(const char *s, size_t len)
{
	if (len == 0 || len > 63)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

		if (!alnum && (c != '-' || i == 0 || i == len - 1))
			return false;
	}
	return true;
}

/* True when s is an RFC 1123 subdomain: dot-separated labels, at most 253 chars. */
static bool pis_subdomain(const char *s, size_t len)
{
	size_t start = 0;

	if (len == 0 || len > 253)
		return false;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '.')
			continue;
		if (!pis_label(s + start, i - start))
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
		bool alnum =
			(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

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

/* True for a port name (IANA service name): 1-15 of [a-z0-9-], a letter, no edge or double '-'. */
static bool pis_port_name(const char *s)
{
	size_t len = strlen(s);
	bool letter = false;

	if (len == 0 || len > 15 || s[0] == '-' || s[len - 1] == '-' || strstr(s, "--"))
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] >= 'a' && s[i] <= 'z')
			letter = true;
		else if (!(s[i] >= '0' && s[i] <= '9') && s[i] != '-')
			return false;
	}
	return letter;
}

/* Checks a name that must be an RFC 1123 label, in the API server's words. */
static int pcheck_label(const char *s, const char *path, struct err *err)
{
	if (pis_label(s, strlen(s)))
		return 0;
	return err_set(err, EINVAL,
		       "%s: \"%s\" is not a valid name: use at most 63 characters of a-z, 0-9 "
		       "and '-', starting and ending with a letter or digit",
		       path, s);
}

/* Reads a string-to-string mapping (labels, annotations) into kv pairs. */
static int pkv_map(const json_t *obj, const char *key, const char *path, bool labels,
		   struct podspec_kv **out, size_t *n, struct err *err)
{
	const json_t *m = pmember(obj, key);
	_cleanup_free_ char *p = pjoin(path, key);
	size_t total = 0, i = 0;
	const char *k;
	json_t *v;
	int ret;

	if (!m)
		return 0;
	ret = pexpect(m, JSON_OBJECT, p, err);
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
		ret = pexpect(v, JSON_STRING, kp, err);
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

/* Reads a list of strings (command, args) into a NULL-terminated array. */
static int pstring_list(const json_t *obj, const char *key, const char *path, char ***out,
			size_t *n, struct err *err)
{
	const json_t *l = pmember(obj, key);
	_cleanup_free_ char *p = pjoin(path, key);
	size_t i;
	json_t *v;
	int ret;

	if (!l)
		return 0;
	ret = pexpect(l, JSON_ARRAY, p, err);
	if (ret < 0)
		return ret;
	*out = xcalloc(json_array_size(l) + 1, sizeof(char *));
	json_array_foreach (l, i, v) {
		_cleanup_free_ char *ip = pindex(p, i);

		ret = pexpect(v, JSON_STRING, ip, err);
		if (ret < 0)
			return ret;
		(*out)[i] = xstrdup(json_string_value(v));
		*n = i + 1;
	}
	return 0;
}

/* Reads spec.volumes: emptyDir only; a volume with no source is an emptyDir, as defaulted. */
static int pvolume(const json_t *v, const char *path, struct podspec *ps, size_t idx,
		   struct err *err)
{
	struct podspec_volume *vol = &ps->volumes[idx];
	_cleanup_free_ char *ed_path = pjoin(path, "emptyDir");
	_cleanup_free_ char *medium = NULL, *size = NULL;
	_cleanup_free_ char *np = pjoin(path, "name");
	const json_t *ed;
	const char *k;
	json_t *it;
	int ret;

	ret = pexpect(v, JSON_OBJECT, path, err);
	if (ret < 0)
		return ret;
	ret = pstring(v, "name", path, true, &vol->name, err);
	if (ret < 0)
		return ret;
	ret = pcheck_label(vol->name, np, err);
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
	ed = pmember(v, "emptyDir");
	if (!ed)
		return 0;
	ret = pexpect(ed, JSON_OBJECT, ed_path, err);
	if (ret < 0)
		return ret;
	ret = pstring(ed, "medium", ed_path, false, &medium, err);
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
	const json_t *l = pmember(spec, "volumes");
	size_t i;
	json_t *v;
	int ret;

	if (!l)
		return 0;
	ret = pexpect(l, JSON_ARRAY, "spec.volumes", err);
	if (ret < 0)
		return ret;
	ps->volumes = xcalloc(json_array_size(l) + 1, sizeof(*ps->volumes));
	json_array_foreach (l, i, v) {
		_cleanup_free_ char *p = pindex("spec.volumes", i);

		ps->n_volumes = i + 1;
		ret = pvolume(v, p, ps, i, err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Turns a quantity given as a string or a number into its text form for the parser. */
static int pquantity_text(const json_t *v, const char *path, char *buf, size_t size,
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
			       ptype_name(v));
	return 0;
}

/* Reads the size limit of emptyDir volumes, a quantity in bytes. */
static int pvolume_sizes(const json_t *spec, struct podspec *ps, struct err *err)
{
	const json_t *l = pmember(spec, "volumes");

	for (size_t i = 0; i < ps->n_volumes; i++) {
		const json_t *ed = pmember(json_array_get(l, i), "emptyDir");
		const json_t *sz = ed ? pmember(ed, "sizeLimit") : NULL;
		_cleanup_free_ char *p = xasprintf("spec.volumes[%zu].emptyDir.sizeLimit", i);
		char text[128];
		int ret;

		if (!sz)
			continue;
		ret = pquantity_text(sz, p, text, sizeof(text), err);
		if (ret < 0)
			return ret;
		ret = quantity_parse_bytes(text, &ps->volumes[i].size_limit_bytes, err);
		if (ret < 0)
			return err_wrap(err, "%s", p);
	}
	return 0;
}

/* The quantity texts of one side of a container's resources, kept for messages. */
struct pres_text {
	char cpu[128], memory[128], gpus[128];
};

/* Reads resources.requests or resources.limits into r. */
static int presource_side(const json_t *res, const char *key, const char *path,
			  struct podspec_resources *r, struct pres_text *t, struct err *err)
{
	const json_t *m = pmember(res, key);
	_cleanup_free_ char *p = pjoin(path, key);
	const char *k;
	json_t *v;
	int ret;

	if (!m)
		return 0;
	ret = pexpect(m, JSON_OBJECT, p, err);
	if (ret < 0)
		return ret;
	json_object_foreach ((json_t *)m, k, v) {
		_cleanup_free_ char *kp = xasprintf("%s.%s", p, k);
		char text[128];
		int64_t val;

		ret = pquantity_text(v, kp, text, sizeof(text), err);
		if (ret < 0)
			return ret;
		if (strcmp(k, "cpu") == 0) {
			ret = quantity_parse_milli(text, &r->cpu_milli, err);
			r->has_cpu = true;
			snprintf(t->cpu, sizeof(t->cpu), "%s", text);
		} else if (strcmp(k, "memory") == 0) {
			ret = quantity_parse_bytes(text, &r->memory_bytes, err);
			r->has_memory = true;
			snprintf(t->memory, sizeof(t->memory), "%s", text);
		} else if (strcmp(k, "nvidia.com/gpu") == 0) {
			ret = quantity_parse_milli(text, &val, err);
			if (ret >= 0 && val % 1000 != 0)
				ret = err_set(err, EINVAL, "\"%s\" must be a whole number of GPUs",
					      text);
			r->gpus = val / 1000;
			r->has_gpus = true;
			snprintf(t->gpus, sizeof(t->gpus), "%s", text);
		} else if (strcmp(k, "ephemeral-storage") == 0) {
			ret = quantity_parse_bytes(text, &val, err);
		} else {
			return err_set(err, ENOTSUP,
				       "%s: resource not supported by kiyot run (supported: cpu, "
				       "memory, nvidia.com/gpu, ephemeral-storage)",
				       kp);
		}
		if (ret < 0)
			return err_wrap(err, "%s", kp);
	}
	return 0;
}

/* Applies the API server's defaults (request = limit when only the limit is given) and checks
 * that no request exceeds its limit and that GPUs are not overcommitted. */
static int presource_check(struct podspec_resources *req, const struct podspec_resources *lim,
			   struct pres_text *rt, const struct pres_text *lt, const char *path,
			   struct err *err)
{
	if (lim->has_cpu && !req->has_cpu) {
		req->has_cpu = true;
		req->cpu_milli = lim->cpu_milli;
		memcpy(rt->cpu, lt->cpu, sizeof(rt->cpu));
	}
	if (lim->has_memory && !req->has_memory) {
		req->has_memory = true;
		req->memory_bytes = lim->memory_bytes;
		memcpy(rt->memory, lt->memory, sizeof(rt->memory));
	}
	if (lim->has_gpus && !req->has_gpus) {
		req->has_gpus = true;
		req->gpus = lim->gpus;
		memcpy(rt->gpus, lt->gpus, sizeof(rt->gpus));
	}
	if (lim->has_cpu && req->cpu_milli > lim->cpu_milli)
		return err_set(
			err, EINVAL,
			"%s.requests.cpu: \"%s\" must be less than or equal to the cpu limit "
			"\"%s\"",
			path, rt->cpu, lt->cpu);
	if (lim->has_memory && req->memory_bytes > lim->memory_bytes)
		return err_set(
			err, EINVAL,
			"%s.requests.memory: \"%s\" must be less than or equal to the memory "
			"limit \"%s\"",
			path, rt->memory, lt->memory);
	if (req->has_gpus && !lim->has_gpus)
		return err_set(err, EINVAL,
			       "%s.limits.nvidia.com/gpu: required when GPUs are requested (set it "
			       "equal to the request)",
			       path);
	if (lim->has_gpus && req->gpus != lim->gpus)
		return err_set(
			err, EINVAL,
			"%s.requests.nvidia.com/gpu: \"%s\" must equal the limit \"%s\" (GPUs "
			"cannot be overcommitted)",
			path, rt->gpus, lt->gpus);
	return 0;
}

/* Reads a container's resources. */
static int presources(const json_t *c, const char *path, struct podspec_container *ct,
		      struct err *err)
{
	const json_t *res = pmember(c, "resources");
	_cleanup_free_ char *p = pjoin(path, "resources");
	struct pres_text rt = { { 0 }, { 0 }, { 0 } }, lt = rt;
	int ret;

	if (!res)
		return 0;
	ret = pexpect(res, JSON_OBJECT, p, err);
	if (ret >= 0)
		ret = presource_side(res, "requests", p, &ct->requests, &rt, err);
	if (ret >= 0)
		ret = presource_side(res, "limits", p, &ct->limits, &lt, err);
	if (ret >= 0)
		ret = presource_check(&ct->requests, &ct->limits, &rt, &lt, p, err);
	return ret;
}

/* Reads one env entry: name and an inline value; valueFrom is refused. */
static int penv_one(const json_t *e, const char *path, struct podspec_kv *kv, struct err *err)
{
	int ret = pexpect(e, JSON_OBJECT, path, err);

	if (ret < 0)
		return ret;
	ret = pstring(e, "name", path, true, &kv->name, err);
	if (ret < 0)
		return ret;
	if (strchr(kv->name, '=') || strspn(kv->name, " ") == strlen(kv->name))
		return err_set(err, EINVAL, "%s.name: \"%s\" is not a valid variable name (no '=')",
			       path, kv->name);
	for (const char *s = kv->name; *s; s++) {
		if (*s < 32 || *s > 126)
			return err_set(err, EINVAL,
				       "%s.name: must be printable ASCII characters other than '='",
				       path);
	}
	if (pmember(e, "valueFrom"))
		return err_set(err, ENOTSUP,
			       "%s.valueFrom: not supported by kiyot run; give the value inline "
			       "with \"value\"",
			       path);
	ret = pstring(e, "value", path, false, &kv->value, err);
	if (ret < 0)
		return ret;
	if (!kv->value)
		kv->value = xstrdup("");
	return 0;
}

/* Reads a container's env list. */
static int penv(const json_t *c, const char *path, struct podspec_container *ct, struct err *err)
{
	const json_t *l = pmember(c, "env");
	_cleanup_free_ char *p = pjoin(path, "env");
	size_t i;
	json_t *e;
	int ret;

	if (pmember(c, "envFrom"))
		return err_set(
			err, ENOTSUP,
			"%s.envFrom: not supported by kiyot run; list the variables under env",
			path);
	if (!l)
		return 0;
	ret = pexpect(l, JSON_ARRAY, p, err);
	if (ret < 0)
		return ret;
	ct->env = xcalloc(json_array_size(l) + 1, sizeof(*ct->env));
	json_array_foreach (l, i, e) {
		_cleanup_free_ char *ip = pindex(p, i);

		ct->n_env = i + 1;
		ret = penv_one(e, ip, &ct->env[i], err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Reads one port: containerPort 1-65535, protocol TCP/UDP/SCTP, an optional unique name. */
static int pport_one(const json_t *o, const char *path, struct podspec_container *ct, size_t idx,
		     struct err *err)
{
	struct podspec_port *pt = &ct->ports[idx];
	int64_t port = 0;
	bool given;
	int ret = pexpect(o, JSON_OBJECT, path, err);

	if (ret >= 0)
		ret = pint(o, "containerPort", path, 1, 65535, &port, &given, err);
	if (ret >= 0 && !given)
		ret = err_set(err, EINVAL, "%s.containerPort: required", path);
	if (ret >= 0)
		ret = pstring(o, "protocol", path, false, &pt->protocol, err);
	if (ret >= 0)
		ret = pstring(o, "name", path, false, &pt->name, err);
	if (ret < 0)
		return ret;
	pt->container_port = (int)port;
	if (!pt->protocol)
		pt->protocol = xstrdup("TCP");
	if (strcmp(pt->protocol, "TCP") && strcmp(pt->protocol, "UDP") &&
	    strcmp(pt->protocol, "SCTP"))
		return err_set(err, EINVAL, "%s.protocol: \"%s\" is not one of TCP, UDP, SCTP",
			       path, pt->protocol);
	if (!pt->name)
		return 0;
	if (!pis_port_name(pt->name))
		return err_set(err, EINVAL,
			       "%s.name: \"%s\" is not a valid port name: use at most 15 "
			       "characters of a-z, 0-9 and '-', with at least one letter",
			       path, pt->name);
	for (size_t i = 0; i < idx; i++) {
		if (ct->ports[i].name && strcmp(ct->ports[i].name, pt->name) == 0)
			return err_set(err, EINVAL, "%s.name: duplicate port name \"%s\"", path,
				       pt->name);
	}
	return 0;
}

/* Reads a container's ports. */
static int pports(const json_t *c, const char *path, struct podspec_container *ct, struct err *err)
{
	const json_t *l = pmember(c, "ports");
	_cleanup_free_ char *p = pjoin(path, "ports");
	size_t i;
	json_t *o;
	int ret;

	if (!l)
		return 0;
	ret = pexpect(l, JSON_ARRAY, p, err);
	if (ret < 0)
		return ret;
	ct->ports = xcalloc(json_array_size(l) + 1, sizeof(*ct->ports));
	json_array_foreach (l, i, o) {
		_cleanup_free_ char *ip = pindex(p, i);

		ct->n_ports = i + 1;
		ret = pport_one(o, ip, ct, i, err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Reads one volume mount; the volume must be declared and the path absolute and unique. */
static int pmount_one(const json_t *o, const char *path, const struct podspec *ps,
		      struct podspec_container *ct, size_t idx, struct err *err)
{
	struct podspec_mount *m = &ct->mounts[idx];
	const json_t *ro;
	bool found = false;
	int ret = pexpect(o, JSON_OBJECT, path, err);

	if (ret >= 0)
		ret = pstring(o, "name", path, true, &m->name, err);
	if (ret >= 0)
		ret = pstring(o, "mountPath", path, true, &m->mount_path, err);
	if (ret < 0)
		return ret;
	for (size_t i = 0; i < ps->n_volumes; i++)
		found |= strcmp(ps->volumes[i].name, m->name) == 0;
	if (!found)
		return err_set(err, EINVAL,
			       "%s.name: \"%s\" is not a volume declared in spec.volumes", path,
			       m->name);
	if (m->mount_path[0] != '/')
		return err_set(err, EINVAL, "%s.mountPath: \"%s\" must be an absolute path", path,
			       m->mount_path);
	for (size_t i = 0; i < idx; i++) {
		if (strcmp(ct->mounts[i].mount_path, m->mount_path) == 0)
			return err_set(err, EINVAL, "%s.mountPath: \"%s\" is already mounted", path,
				       m->mount_path);
	}
	if (pmember(o, "subPath") || pmember(o, "subPathExpr"))
		return err_set(err, ENOTSUP, "%s.subPath: not supported by kiyot run", path);
	ro = pmember(o, "readOnly");
	if (ro) {
		_cleanup_free_ char *rp = pjoin(path, "readOnly");

		ret = pexpect(ro, JSON_TRUE, rp, err);
		if (ret < 0)
			return ret;
		m->read_only = json_is_true(ro);
	}
	return 0;
}

/* Reads a container's volume mounts. */
static int pmounts(const json_t *c, const char *path, const struct podspec *ps,
		   struct podspec_container *ct, struct err *err)
{
	const json_t *l = pmember(c, "volumeMounts");
	_cleanup_free_ char *p = pjoin(path, "volumeMounts");
	size_t i;
	json_t *o;
	int ret;

	if (!l)
		return 0;
	ret = pexpect(l, JSON_ARRAY, p, err);
	if (ret < 0)
		return ret;
	ct->mounts = xcalloc(json_array_size(l) + 1, sizeof(*ct->mounts));
	json_array_foreach (l, i, o) {
		_cleanup_free_ char *ip = pindex(p, i);

		ct->n_mounts = i + 1;
		ret = pmount_one(o, ip, ps, ct, i, err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Reads securityContext.runAsUser/runAsGroup. */
static int psecurity(const json_t *c, const char *path, struct podspec_container *ct,
		     struct err *err)
{
	const json_t *sc = pmember(c, "securityContext");
	_cleanup_free_ char *p = pjoin(path, "securityContext");
	int ret;

	if (!sc)
		return 0;
	ret = pexpect(sc, JSON_OBJECT, p, err);
	if (ret >= 0)
		ret = pint(sc, "runAsUser", p, 0, INT32_MAX, &ct->run_as_user, &ct->has_run_as_user,
			   err);
	if (ret >= 0)
		ret = pint(sc, "runAsGroup", p, 0, INT32_MAX, &ct->run_as_group,
			   &ct->has_run_as_group, err);
	return ret;
}

/* The API server's default pull policy: Always for ":latest" or no tag, else IfNotPresent. */
static enum podspec_pull pdefault_pull(const char *image)
{
	const char *at = strchr(image, '@');
	size_t len = at ? (size_t)(at - image) : strlen(image);
	const char *slash = memrchr(image, '/', len);
	const char *colon = memrchr(image, ':', len);

	if (colon && slash && colon < slash)
		colon = NULL;
	if (!colon)
		return at ? PODSPEC_PULL_IF_NOT_PRESENT : PODSPEC_PULL_ALWAYS;
	if ((size_t)(image + len - colon - 1) == 6 && strncmp(colon + 1, "latest", 6) == 0)
		return PODSPEC_PULL_ALWAYS;
	return PODSPEC_PULL_IF_NOT_PRESENT;
}

/* Reads image and imagePullPolicy. */
static int pimage(const json_t *c, const char *path, struct podspec_container *ct, struct err *err)
{
	_cleanup_free_ char *policy = NULL;
	int ret = pstring(c, "image", path, true, &ct->image, err);
	size_t len;

	if (ret < 0)
		return ret;
	len = strlen(ct->image);
	if (strchr(" \t\r\n", ct->image[0]) || strchr(" \t\r\n", ct->image[len - 1]))
		return err_set(err, EINVAL,
			       "%s.image: \"%s\" must not begin or end with whitespace", path,
			       ct->image);
	ret = pstring(c, "imagePullPolicy", path, false, &policy, err);
	if (ret < 0)
		return ret;
	if (!policy)
		ct->pull_policy = pdefault_pull(ct->image);
	else if (strcmp(policy, "Always") == 0)
		ct->pull_policy = PODSPEC_PULL_ALWAYS;
	else if (strcmp(policy, "IfNotPresent") == 0)
		ct->pull_policy = PODSPEC_PULL_IF_NOT_PRESENT;
	else if (strcmp(policy, "Never") == 0)
		ct->pull_policy = PODSPEC_PULL_NEVER;
	else
		return err_set(
			err, EINVAL,
			"%s.imagePullPolicy: \"%s\" is not one of Always, IfNotPresent, Never",
			path, policy);
	return 0;
}

/* Finds an earlier container (init or app) with that name; returns its path or NULL. */
static char *pfind_container(const struct podspec *ps, const char *name)
{
	for (size_t i = 0; i < ps->n_init_containers; i++) {
		if (ps->init_containers[i].name && strcmp(ps->init_containers[i].name, name) == 0)
			return pindex("spec.initContainers", i);
	}
	for (size_t i = 0; i < ps->n_containers; i++) {
		if (ps->containers[i].name && strcmp(ps->containers[i].name, name) == 0)
			return pindex("spec.containers", i);
	}
	return NULL;
}

/* Reads one container; its name must be a label, unique among all the pod's containers. */
static int pcontainer(const json_t *c, const char *path, struct podspec *ps,
		      struct podspec_container *ct, struct err *err)
{
	_cleanup_free_ char *np = pjoin(path, "name");
	_cleanup_free_ char *name = NULL, *dup = NULL;
	int ret = pexpect(c, JSON_OBJECT, path, err);

	if (ret >= 0)
		ret = pstring(c, "name", path, true, &name, err);
	if (ret >= 0)
		ret = pcheck_label(name, np, err);
	if (ret < 0)
		return ret;
	dup = pfind_container(ps, name);
	if (dup)
		return err_set(err, EINVAL,
			       "%s: duplicate container name \"%s\" (also used by %s); container "
			       "names must be unique in a pod",
			       np, name, dup);
	ct->name = steal_ptr(name);
	ret = pimage(c, path, ct, err);
	if (ret >= 0)
		ret = pstring_list(c, "command", path, &ct->command, &ct->n_command, err);
	if (ret >= 0)
		ret = pstring_list(c, "args", path, &ct->args, &ct->n_args, err);
	if (ret >= 0)
		ret = penv(c, path, ct, err);
	if (ret >= 0)
		ret = pstring(c, "workingDir", path, false, &ct->working_dir, err);
	if (ret >= 0)
		ret = pports(c, path, ct, err);
	if (ret >= 0)
		ret = presources(c, path, ct, err);
	if (ret >= 0)
		ret = pmounts(c, path, ps, ct, err);
	if (ret >= 0)
		ret = psecurity(c, path, ct, err);
	return ret;
}

/* Reads spec.containers or spec.initContainers. */
static int pcontainers(const json_t *spec, const char *key, struct podspec *ps, bool init,
		       struct err *err)
{
	const json_t *l = pmember(spec, key);
	_cleanup_free_ char *p = pjoin("spec", key);
	struct podspec_container **arr = init ? &ps->init_containers : &ps->containers;
	size_t *n = init ? &ps->n_init_containers : &ps->n_containers;
	size_t i;
	json_t *c;
	int ret;

	if (!l && init)
		return 0;
	if (!l)
		return err_set(err, EINVAL, "%s: required (a pod needs at least one container)", p);
	ret = pexpect(l, JSON_ARRAY, p, err);
	if (ret < 0)
		return ret;
	if (!init && json_array_size(l) == 0)
		return err_set(err, EINVAL, "%s: required (a pod needs at least one container)", p);
	*arr = xcalloc(json_array_size(l) + 1, sizeof(**arr));
	json_array_foreach (l, i, c) {
		_cleanup_free_ char *ip = pindex(p, i);

		*n = i + 1;
		ret = pcontainer(c, ip, ps, &(*arr)[i], err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Reads apiVersion, kind and metadata. */
static int pheader(const json_t *j, struct podspec *ps, struct err *err)
{
	_cleanup_free_ char *api = NULL, *kind = NULL;
	const json_t *md;
	int ret = pstring(j, "apiVersion", "", true, &api, err);

	if (ret < 0)
		return ret;
	if (strcmp(api, "v1") != 0)
		return err_set(
			err, EINVAL,
			"apiVersion: \"%s\" is not supported; kiyot run takes apiVersion: v1, "
			"kind: Pod",
			api);
	ret = pstring(j, "kind", "", true, &kind, err);
	if (ret < 0)
		return ret;
	if (strcmp(kind, "Pod") != 0)
		return err_set(
			err, EINVAL,
			"kind: \"%s\" is not supported; kiyot run takes a Pod (apiVersion: v1, "
			"kind: Pod)",
			kind);
	md = pmember(j, "metadata");
	if (!md)
		return err_set(err, EINVAL, "metadata: required (with a name)");
	ret = pexpect(md, JSON_OBJECT, "metadata", err);
	if (ret >= 0)
		ret = pstring(md, "name", "metadata", true, &ps->name, err);
	if (ret < 0)
		return ret;
	if (!pis_subdomain(ps->name, strlen(ps->name)))
		return err_set(err, EINVAL,
			       "metadata.name: \"%s\" is not a valid pod name: use at most 253 "
			       "characters of a-z, 0-9, '-' and '.', starting and ending with a "
			       "letter or digit",
			       ps->name);
	ret = pstring(md, "namespace", "metadata", false, &ps->namespace, err);
	if (ret >= 0 && ps->namespace)
		ret = pcheck_label(ps->namespace, "metadata.namespace", err);
	if (ret >= 0)
		ret = pstring(md, "uid", "metadata", false, &ps->uid, err);
	if (ret >= 0)
		ret = pkv_map(md, "labels", "metadata", true, &ps->labels, &ps->n_labels, err);
	if (ret >= 0)
		ret = pkv_map(md, "annotations", "metadata", false, &ps->annotations,
			      &ps->n_annotations, err);
	if (ret >= 0 && !ps->namespace)
		ps->namespace = xstrdup("default");
	return ret;
}

/* Reads restartPolicy, hostname and terminationGracePeriodSeconds. */
static int pspec_scalars(const json_t *spec, struct podspec *ps, struct err *err)
{
	_cleanup_free_ char *restart = NULL;
	int ret = pstring(spec, "restartPolicy", "spec", false, &restart, err);

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
	ret = pstring(spec, "hostname", "spec", false, &ps->hostname, err);
	if (ret >= 0 && ps->hostname)
		ret = pcheck_label(ps->hostname, "spec.hostname", err);
	ps->termination_grace_period_seconds = 30;
	if (ret >= 0)
		ret = pint(spec, "terminationGracePeriodSeconds", "spec", 0, INT32_MAX,
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
			       j ? ptype_name(j) : "empty");
	ps = xcalloc(1, sizeof(*ps));
	ret = pheader(j, ps, err);
	spec = pmember(j, "spec");
	if (ret >= 0 && !spec)
		ret = err_set(err, EINVAL, "spec: required (with containers)");
	if (ret >= 0)
		ret = pexpect(spec, JSON_OBJECT, "spec", err);
	if (ret >= 0)
		ret = pspec_scalars(spec, ps, err);
	if (ret >= 0)
		ret = pvolumes(spec, ps, err);
	if (ret >= 0)
		ret = pvolume_sizes(spec, ps, err);
	if (ret >= 0)
		ret = pcontainers(spec, "initContainers", ps, true, err);
	if (ret >= 0)
		ret = pcontainers(spec, "containers", ps, false, err);
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

/* Frees a NULL-terminated or counted string array. */
static void pfree_strings(char **a, size_t n)
{
	for (size_t i = 0; a && i < n; i++)
		free(a[i]);
	free(a);
}

/* Frees n name/value pairs. */
static void pfree_kv(struct podspec_kv *kv, size_t n)
{
	for (size_t i = 0; kv && i < n; i++) {
		free(kv[i].name);
		free(kv[i].value);
	}
	free(kv);
}

/* Frees n containers. */
static void pfree_containers(struct podspec_container *c, size_t n)
{
	for (size_t i = 0; c && i < n; i++) {
		free(c[i].name);
		free(c[i].image);
		pfree_strings(c[i].command, c[i].n_command);
		pfree_strings(c[i].args, c[i].n_args);
		pfree_kv(c[i].env, c[i].n_env);
		free(c[i].working_dir);
		for (size_t k = 0; c[i].ports && k < c[i].n_ports; k++) {
			free(c[i].ports[k].name);
			free(c[i].ports[k].protocol);
		}
		free(c[i].ports);
		for (size_t k = 0; c[i].mounts && k < c[i].n_mounts; k++) {
			free(c[i].mounts[k].name);
			free(c[i].mounts[k].mount_path);
		}
		free(c[i].mounts);
	}
	free(c);
}

/* Frees a podspec and everything it owns; NULL is fine. */
void podspec_free(struct podspec *p)
{
	if (!p)
		return;
	free(p->name);
	free(p->namespace);
	free(p->uid);
	pfree_kv(p->labels, p->n_labels);
	pfree_kv(p->annotations, p->n_annotations);
	free(p->hostname);
	for (size_t i = 0; p->volumes && i < p->n_volumes; i++)
		free(p->volumes[i].name);
	free(p->volumes);
	pfree_containers(p->init_containers, p->n_init_containers);
	pfree_containers(p->containers, p->n_containers);
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
