/*
 * podspec_container.c: the containers of a Pod manifest (spec.initContainers and
 * spec.containers): image and pull policy, command and args, env, ports, resources, volume
 * mounts (the securityContext is read by podspec_security.c), validated and defaulted as the API
 * server does.
 */
#include "podspec_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "quantity.h"
#include "xalloc.h"

/* The quantity texts of one side of a container's resources, kept for messages. */
struct pres_text {
	char cpu[128], memory[128], gpus[128];
};

/* Reads resources.requests or resources.limits into r. */
static int presource_side(const json_t *res, const char *key, const char *path,
			  struct podspec_resources *r, struct pres_text *t, struct err *err)
{
	const json_t *m = podspec_member(res, key);
	_cleanup_free_ char *p = podspec_join(path, key);
	const char *k;
	json_t *v;
	int ret;

	if (!m)
		return 0;
	ret = podspec_expect(m, JSON_OBJECT, p, err);
	if (ret < 0)
		return ret;
	json_object_foreach ((json_t *)m, k, v) {
		_cleanup_free_ char *kp = xasprintf("%s.%s", p, k);
		char text[128];
		int64_t val;

		ret = podspec_quantity_text(v, kp, text, sizeof(text), err);
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
	const json_t *res = podspec_member(c, "resources");
	_cleanup_free_ char *p = podspec_join(path, "resources");
	struct pres_text rt = { { 0 }, { 0 }, { 0 } }, lt = rt;
	int ret;

	if (!res)
		return 0;
	ret = podspec_expect(res, JSON_OBJECT, p, err);
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
	int ret = podspec_expect(e, JSON_OBJECT, path, err);

	if (ret < 0)
		return ret;
	ret = podspec_string(e, "name", path, true, &kv->name, err);
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
	if (podspec_member(e, "valueFrom"))
		return err_set(err, ENOTSUP,
			       "%s.valueFrom: not supported by kiyot run; give the value inline "
			       "with \"value\"",
			       path);
	ret = podspec_string(e, "value", path, false, &kv->value, err);
	if (ret < 0)
		return ret;
	if (!kv->value)
		kv->value = xstrdup("");
	return 0;
}

/* Reads a container's env list. */
static int penv(const json_t *c, const char *path, struct podspec_container *ct, struct err *err)
{
	const json_t *l = podspec_member(c, "env");
	_cleanup_free_ char *p = podspec_join(path, "env");
	size_t i;
	json_t *e;
	int ret;

	if (podspec_member(c, "envFrom"))
		return err_set(
			err, ENOTSUP,
			"%s.envFrom: not supported by kiyot run; list the variables under env",
			path);
	if (!l)
		return 0;
	ret = podspec_expect(l, JSON_ARRAY, p, err);
	if (ret < 0)
		return ret;
	ct->env = xcalloc(json_array_size(l) + 1, sizeof(*ct->env));
	json_array_foreach (l, i, e) {
		_cleanup_free_ char *ip = podspec_index(p, i);

		ct->n_env = i + 1;
		ret = penv_one(e, ip, &ct->env[i], err);
		if (ret < 0)
			return ret;
	}
	return 0;
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

/* Reads one port: containerPort 1-65535, protocol TCP/UDP/SCTP, an optional unique name. */
static int pport_one(const json_t *o, const char *path, struct podspec_container *ct, size_t idx,
		     struct err *err)
{
	struct podspec_port *pt = &ct->ports[idx];
	int64_t port = 0;
	bool given;
	int ret = podspec_expect(o, JSON_OBJECT, path, err);

	if (ret >= 0)
		ret = podspec_int(o, "containerPort", path, 1, 65535, &port, &given, err);
	if (ret >= 0 && !given)
		ret = err_set(err, EINVAL, "%s.containerPort: required", path);
	if (ret >= 0)
		ret = podspec_string(o, "protocol", path, false, &pt->protocol, err);
	if (ret >= 0)
		ret = podspec_string(o, "name", path, false, &pt->name, err);
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
	const json_t *l = podspec_member(c, "ports");
	_cleanup_free_ char *p = podspec_join(path, "ports");
	size_t i;
	json_t *o;
	int ret;

	if (!l)
		return 0;
	ret = podspec_expect(l, JSON_ARRAY, p, err);
	if (ret < 0)
		return ret;
	ct->ports = xcalloc(json_array_size(l) + 1, sizeof(*ct->ports));
	json_array_foreach (l, i, o) {
		_cleanup_free_ char *ip = podspec_index(p, i);

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
	int ret = podspec_expect(o, JSON_OBJECT, path, err);

	if (ret >= 0)
		ret = podspec_string(o, "name", path, true, &m->name, err);
	if (ret >= 0)
		ret = podspec_string(o, "mountPath", path, true, &m->mount_path, err);
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
	if (podspec_member(o, "subPath") || podspec_member(o, "subPathExpr"))
		return err_set(err, ENOTSUP, "%s.subPath: not supported by kiyot run", path);
	ro = podspec_member(o, "readOnly");
	if (ro) {
		_cleanup_free_ char *rp = podspec_join(path, "readOnly");

		ret = podspec_expect(ro, JSON_TRUE, rp, err);
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
	const json_t *l = podspec_member(c, "volumeMounts");
	_cleanup_free_ char *p = podspec_join(path, "volumeMounts");
	size_t i;
	json_t *o;
	int ret;

	if (!l)
		return 0;
	ret = podspec_expect(l, JSON_ARRAY, p, err);
	if (ret < 0)
		return ret;
	ct->mounts = xcalloc(json_array_size(l) + 1, sizeof(*ct->mounts));
	json_array_foreach (l, i, o) {
		_cleanup_free_ char *ip = podspec_index(p, i);

		ct->n_mounts = i + 1;
		ret = pmount_one(o, ip, ps, ct, i, err);
		if (ret < 0)
			return ret;
	}
	return 0;
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
	int ret = podspec_string(c, "image", path, true, &ct->image, err);
	size_t len;

	if (ret < 0)
		return ret;
	len = strlen(ct->image);
	if (strchr(" \t\r\n", ct->image[0]) || strchr(" \t\r\n", ct->image[len - 1]))
		return err_set(err, EINVAL,
			       "%s.image: \"%s\" must not begin or end with whitespace", path,
			       ct->image);
	ret = podspec_string(c, "imagePullPolicy", path, false, &policy, err);
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
			return podspec_index("spec.initContainers", i);
	}
	for (size_t i = 0; i < ps->n_containers; i++) {
		if (ps->containers[i].name && strcmp(ps->containers[i].name, name) == 0)
			return podspec_index("spec.containers", i);
	}
	return NULL;
}

/* Reads one container; its name must be a label, unique among all the pod's containers. */
static int pcontainer(const json_t *c, const char *path, struct podspec *ps,
		      struct podspec_container *ct, struct err *err)
{
	_cleanup_free_ char *np = podspec_join(path, "name");
	_cleanup_free_ char *name = NULL, *dup = NULL;
	int ret = podspec_expect(c, JSON_OBJECT, path, err);

	if (ret >= 0)
		ret = podspec_string(c, "name", path, true, &name, err);
	if (ret >= 0)
		ret = podspec_check_label(name, np, err);
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
		ret = podspec_string_list(c, "command", path, &ct->command, &ct->n_command, err);
	if (ret >= 0)
		ret = podspec_string_list(c, "args", path, &ct->args, &ct->n_args, err);
	if (ret >= 0)
		ret = penv(c, path, ct, err);
	if (ret >= 0)
		ret = podspec_string(c, "workingDir", path, false, &ct->working_dir, err);
	if (ret >= 0)
		ret = pports(c, path, ct, err);
	if (ret >= 0)
		ret = presources(c, path, ct, err);
	if (ret >= 0)
		ret = pmounts(c, path, ps, ct, err);
	if (ret >= 0)
		ret = podspec_read_security(c, path, ct, err);
	return ret;
}

/* Reads a container's restartPolicy: only "Always", only on an init container (a sidecar). */
static int prestart(const json_t *c, const char *path, bool init, struct podspec_container *ct,
		    struct err *err)
{
	_cleanup_free_ char *policy = NULL;
	int ret = podspec_string(c, "restartPolicy", path, false, &policy, err);

	if (ret < 0 || !policy)
		return ret;
	if (!init || strcmp(policy, "Always") != 0)
		return err_set(err, EINVAL,
			       "%s.restartPolicy: \"%s\" is not allowed; a container may only set "
			       "\"Always\", and only as an init container (a sidecar)",
			       path, policy);
	ct->sidecar = true;
	return 0;
}

/* Reads spec.overhead (cpu and memory; what a RuntimeClass adds to the pod). */
int podspec_read_overhead(const json_t *spec, struct podspec *ps, struct err *err)
{
	struct pres_text t = { { 0 }, { 0 }, { 0 } };

	return presource_side(spec, "overhead", "spec", &ps->overhead, &t, err);
}

/* Reads spec.containers or spec.initContainers. */
int podspec_read_containers(const json_t *spec, const char *key, struct podspec *ps, bool init,
			    struct err *err)
{
	const json_t *l = podspec_member(spec, key);
	_cleanup_free_ char *p = podspec_join("spec", key);
	struct podspec_container **arr = init ? &ps->init_containers : &ps->containers;
	size_t *n = init ? &ps->n_init_containers : &ps->n_containers;
	size_t i;
	json_t *c;
	int ret;

	if (!l && init)
		return 0;
	if (!l)
		return err_set(err, EINVAL, "%s: required (a pod needs at least one container)", p);
	ret = podspec_expect(l, JSON_ARRAY, p, err);
	if (ret < 0)
		return ret;
	if (!init && json_array_size(l) == 0)
		return err_set(err, EINVAL, "%s: required (a pod needs at least one container)", p);
	*arr = xcalloc(json_array_size(l) + 1, sizeof(**arr));
	json_array_foreach (l, i, c) {
		_cleanup_free_ char *ip = podspec_index(p, i);

		*n = i + 1;
		ret = pcontainer(c, ip, ps, &(*arr)[i], err);
		if (ret >= 0)
			ret = prestart(c, ip, init, &(*arr)[i], err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Frees n containers. */
void podspec_containers_free(struct podspec_container *c, size_t n)
{
	for (size_t i = 0; c && i < n; i++) {
		free(c[i].name);
		free(c[i].image);
		strv_free(c[i].command);
		strv_free(c[i].args);
		podspec_kv_free(c[i].env, c[i].n_env);
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
		podspec_security_release(&c[i].security);
	}
	free(c);
}
