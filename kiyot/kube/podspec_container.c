/*
 * podspec_container.c: the containers of a Pod manifest (spec.initContainers and
 * spec.containers) as jfields tables: image and pull policy, command and args, env, ports,
 * resources, volume mounts (the securityContext's table is podspec_security.c's), validated
 * and defaulted as the API server does; and the quantities of spec.overhead.
 */
#include "podspec_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "quantity.h"
#include "strvec.h"
#include "xalloc.h"

#define CT struct podspec_container
#define RES struct podspec_resources

/* read_enum stores an int. */
_Static_assert(sizeof(enum podspec_pull) == sizeof(int), "imagePullPolicy is read as an int");

/* The quantity v (at path) into *out, milli-units or bytes; its text into text. */
static int quantity(const json_t *v, const char *path, bool bytes, int64_t *out, char text[128],
		    struct err *err)
{
	int ret = podspec_quantity_text(v, path, text, 128, err);

	if (ret < 0)
		return ret;
	ret = bytes ? quantity_parse_bytes(text, out, err) : quantity_parse_milli(text, out, err);
	return ret < 0 ? err_wrap(err, "%s", path) : 0;
}

static int read_cpu(const json_t *v, void *dst, const char *path, struct err *err)
{
	RES *r = dst;
	char text[128];
	int ret = quantity(v, path, false, &r->cpu_milli, text, err);

	r->has_cpu = ret >= 0;
	return ret;
}

static int read_memory(const json_t *v, void *dst, const char *path, struct err *err)
{
	RES *r = dst;
	char text[128];
	int ret = quantity(v, path, true, &r->memory_bytes, text, err);

	r->has_memory = ret >= 0;
	return ret;
}

/* nvidia.com/gpu: whole GPUs. */
static int read_gpus(const json_t *v, void *dst, const char *path, struct err *err)
{
	RES *r = dst;
	char text[128];
	int64_t milli;
	int ret = quantity(v, path, false, &milli, text, err);

	if (ret < 0)
		return ret;
	if (milli % 1000 != 0)
		return err_set(err, EINVAL, "%s: \"%s\" must be a whole number of GPUs", path,
			       text);
	r->gpus = milli / 1000;
	r->has_gpus = true;
	return 0;
}

/* ephemeral-storage: checked, not kept (a cell's disk is its instance type's). */
static int read_storage(const json_t *v, void *dst, const char *path, struct err *err)
{
	char text[128];
	int64_t bytes;

	(void)dst;
	return quantity(v, path, true, &bytes, text, err);
}

#define SUPPORTED_RESOURCES "cpu, memory, nvidia.com/gpu, ephemeral-storage"

/* A resource the table does not read is one kiyot cannot give: ENOTSUP, not ignored. */
static int check_resource_names(void *obj, const json_t *v, const char *path, struct err *err)
{
	static const char *const known[] = { "cpu", "memory", "nvidia.com/gpu", "ephemeral-storage",
					     NULL };
	char kp[256];
	const char *k;
	json_t *q;

	(void)obj;
	json_object_foreach ((json_t *)v, k, q) {
		if (json_is_null(q) || strv_has((char **)known, k))
			continue;
		return err_set(
			err, ENOTSUP,
			"%s: resource not supported by kiyot run (supported: " SUPPORTED_RESOURCES
			")",
			jf_join(kp, sizeof(kp), path, k));
	}
	return 0;
}

static const struct jf_field quantities_fields[] = {
	{ JF_CUSTOM("cpu", 0, read_cpu) },
	{ JF_CUSTOM("memory", 0, read_memory) },
	{ JF_CUSTOM("nvidia.com/gpu", 0, read_gpus) },
	{ JF_CUSTOM("ephemeral-storage", 0, read_storage) },
	JF_END,
};
const struct jf_table podspec_quantities_table = { .fields = quantities_fields,
						   .null_absent = true,
						   .example = "{cpu: 500m, memory: 256Mi}",
						   .check = check_resource_names };

/* The text of resources.<side>.<key> as written (read already), for messages. */
static const char *side_text(const json_t *res, const char *side, const char *key, char buf[128])
{
	const json_t *q = json_object_get(json_object_get(res, side), key);
	struct err ignored = ERR_INIT;

	buf[0] = '\0';
	podspec_quantity_text(q, "", buf, 128, &ignored);
	return buf;
}

/* The API server's defaults (a request missing where a limit is given takes the limit's value)
 * and rules: no request above its limit, GPUs requested only with a limit equal to it. */
static int check_resources(void *obj, const json_t *v, const char *path, struct err *err)
{
	RES *req = &((CT *)obj)->requests;
	const RES *lim = &((CT *)obj)->limits;
	char rt[128], lt[128];

	if (lim->has_cpu && !req->has_cpu) {
		req->has_cpu = true;
		req->cpu_milli = lim->cpu_milli;
	}
	if (lim->has_memory && !req->has_memory) {
		req->has_memory = true;
		req->memory_bytes = lim->memory_bytes;
	}
	if (lim->has_gpus && !req->has_gpus) {
		req->has_gpus = true;
		req->gpus = lim->gpus;
	}
	if (lim->has_cpu && req->cpu_milli > lim->cpu_milli)
		return err_set(
			err, EINVAL,
			"%s.requests.cpu: \"%s\" must be less than or equal to the cpu limit "
			"\"%s\"",
			path, side_text(v, "requests", "cpu", rt),
			side_text(v, "limits", "cpu", lt));
	if (lim->has_memory && req->memory_bytes > lim->memory_bytes)
		return err_set(
			err, EINVAL,
			"%s.requests.memory: \"%s\" must be less than or equal to the memory "
			"limit \"%s\"",
			path, side_text(v, "requests", "memory", rt),
			side_text(v, "limits", "memory", lt));
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
			path, side_text(v, "requests", "nvidia.com/gpu", rt),
			side_text(v, "limits", "nvidia.com/gpu", lt));
	return 0;
}

static const struct jf_field resources_fields[] = {
	{ JF_OBJECT("requests", offsetof(CT, requests), &podspec_quantities_table) },
	{ JF_OBJECT("limits", offsetof(CT, limits), &podspec_quantities_table) },
	JF_END,
};
static const struct jf_table resources_table = { .fields = resources_fields,
						 .null_absent = true,
						 .example = "{requests: {cpu: 500m}}",
						 .check = check_resources };

/* A field kiyot cannot honour (envFrom, valueFrom, subPath): refused with what to do. */
static int refuse(const char *path, const char *instead, struct err *err)
{
	return err_set(err, ENOTSUP, "%s: not supported by kiyot run%s", path, instead);
}

static int refuse_env_from(const json_t *v, void *dst, const char *path, struct err *err)
{
	(void)v;
	(void)dst;
	return refuse(path, "; list the variables under env", err);
}

static int refuse_value_from(const json_t *v, void *dst, const char *path, struct err *err)
{
	(void)v;
	(void)dst;
	return refuse(path, "; give the value inline with \"value\"", err);
}

static int refuse_sub_path(const json_t *v, void *dst, const char *path, struct err *err)
{
	(void)v;
	(void)dst;
	return refuse(path, "; mount the volume whole", err);
}

/* An env name: printable ASCII, no '=', not blank. */
static int check_env_name(void *obj, const json_t *v, const char *path, struct err *err)
{
	const char *s = json_string_value(v);

	(void)obj;
	if (strchr(s, '=') || strspn(s, " ") == strlen(s))
		return err_set(err, EINVAL, "%s: \"%s\" is not a valid variable name (no '=')",
			       path, s);
	for (; *s; s++)
		if (*s < 32 || *s > 126)
			return err_set(err, EINVAL,
				       "%s: must be printable ASCII characters other than '='",
				       path);
	return 0;
}

/* A variable without a value has the empty one. */
static int default_env_value(void *obj, const json_t *v, const char *path, struct err *err)
{
	struct podspec_kv *kv = obj;

	(void)v;
	(void)path;
	(void)err;
	if (!kv->value)
		kv->value = xstrdup("");
	return 0;
}

static const struct jf_field env_fields[] = {
	{ PODSPEC_STR("name", struct podspec_kv, name), .required = true, .min = 1,
	  .check = check_env_name },
	{ JF_CUSTOM("valueFrom", 0, refuse_value_from) },
	{ PODSPEC_STR("value", struct podspec_kv, value) },
	JF_END,
};
static const struct jf_table env_table = { .fields = env_fields,
					   .null_absent = true,
					   .example = "{name: MODE, value: production}",
					   .check = default_env_value,
					   .release = podspec_kv_release };

static int check_protocol(void *obj, const json_t *v, const char *path, struct err *err)
{
	static const char *const known[] = { "TCP", "UDP", "SCTP", NULL };
	char val[64];

	(void)obj;
	if (strv_has((char **)known, json_string_value(v)))
		return 0;
	return err_set(err, EINVAL, "%s: %s is not one of TCP, UDP, SCTP", path,
		       jf_value_text(v, val));
}

/* A port name (IANA service name): 1-15 of [a-z0-9-], a letter, no edge or double '-'. */
static int check_port_name(void *obj, const json_t *v, const char *path, struct err *err)
{
	const char *s = json_string_value(v);
	size_t len = strlen(s);
	bool letter = false,
	     ok = len > 0 && len <= 15 && s[0] != '-' && s[len - 1] != '-' && !strstr(s, "--");

	(void)obj;
	for (size_t i = 0; ok && i < len; i++) {
		letter |= s[i] >= 'a' && s[i] <= 'z';
		ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-';
	}
	if (ok && letter)
		return 0;
	return err_set(err, EINVAL,
		       "%s: \"%s\" is not a valid port name: use at most 15 characters of a-z, 0-9 "
		       "and '-', with at least one letter",
		       path, s);
}

static int default_protocol(void *obj, const json_t *v, const char *path, struct err *err)
{
	struct podspec_port *pt = obj;

	(void)v;
	(void)path;
	(void)err;
	if (!pt->protocol)
		pt->protocol = xstrdup("TCP");
	return 0;
}

static void port_release(void *e)
{
	free(((struct podspec_port *)e)->name);
	free(((struct podspec_port *)e)->protocol);
}

static const struct jf_field port_fields[] = {
	{ JF_INT("containerPort", struct podspec_port, container_port, 1, 65535),
	  .required = true },
	{ PODSPEC_STR("protocol", struct podspec_port, protocol), .check = check_protocol },
	{ PODSPEC_STR("name", struct podspec_port, name), .check = check_port_name },
	JF_END,
};
static const struct jf_table port_table = { .fields = port_fields,
					    .null_absent = true,
					    .example = "{containerPort: 8080}",
					    .check = default_protocol,
					    .release = port_release };

/* Port names are unique in a container. */
static int check_port_names(void *obj, const json_t *v, const char *path, struct err *err)
{
	const CT *ct = obj;

	(void)v;
	for (size_t i = 1; i < ct->n_ports; i++)
		for (size_t j = 0; ct->ports[i].name && j < i; j++)
			if (ct->ports[j].name && strcmp(ct->ports[i].name, ct->ports[j].name) == 0)
				return err_set(err, EINVAL,
					       "%s[%zu].name: duplicate port name \"%s\"", path, i,
					       ct->ports[i].name);
	return 0;
}

static int check_absolute(void *obj, const json_t *v, const char *path, struct err *err)
{
	(void)obj;
	if (json_string_value(v)[0] == '/')
		return 0;
	return err_set(err, EINVAL, "%s: \"%s\" must be an absolute path", path,
		       json_string_value(v));
}

static void mount_release(void *e)
{
	free(((struct podspec_mount *)e)->name);
	free(((struct podspec_mount *)e)->mount_path);
}

static const struct jf_field mount_fields[] = {
	{ PODSPEC_STR("name", struct podspec_mount, name), .required = true, .min = 1 },
	{ PODSPEC_STR("mountPath", struct podspec_mount, mount_path), .required = true, .min = 1,
	  .check = check_absolute },
	{ JF_CUSTOM("subPath", 0, refuse_sub_path) },
	{ JF_CUSTOM("subPathExpr", 0, refuse_sub_path) },
	{ JF_BOOL("readOnly", struct podspec_mount, read_only) },
	JF_END,
};
static const struct jf_table mount_table = { .fields = mount_fields,
					     .null_absent = true,
					     .example = "{name: scratch, mountPath: /scratch}",
					     .release = mount_release };

/* A path is mounted once in a container. */
static int check_mount_paths(void *obj, const json_t *v, const char *path, struct err *err)
{
	const CT *ct = obj;

	(void)v;
	for (size_t i = 1; i < ct->n_mounts; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(ct->mounts[i].mount_path, ct->mounts[j].mount_path) == 0)
				return err_set(err, EINVAL,
					       "%s[%zu].mountPath: \"%s\" is already mounted", path,
					       i, ct->mounts[i].mount_path);
	return 0;
}

static int check_image(void *obj, const json_t *v, const char *path, struct err *err)
{
	const char *image = json_string_value(v);
	size_t len = json_string_length(v);

	(void)obj;
	if (!strchr(" \t\r\n", image[0]) && !strchr(" \t\r\n", image[len - 1]))
		return 0;
	return err_set(err, EINVAL, "%s: \"%s\" must not begin or end with whitespace", path,
		       image);
}

/* restartPolicy: only Always, which makes an init container a sidecar; podspec_check_containers
 * refuses it on an app container. */
static int read_restart(const json_t *v, void *dst, const char *path, struct err *err)
{
	char val[64];

	if (json_is_string(v) && strcmp(json_string_value(v), "Always") == 0 &&
	    json_string_length(v) == strlen("Always")) {
		*(bool *)dst = true;
		return 0;
	}
	return err_set(err, EINVAL,
		       "%s: %s is not allowed; a container may only set \"Always\", and only as an "
		       "init container (a sidecar)",
		       path, jf_value_text(v, val));
}

/* The API server's default pull policy: Always for ":latest" or no tag, else IfNotPresent. */
static enum podspec_pull default_pull(const char *image)
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

static int check_container(void *obj, const json_t *v, const char *path, struct err *err)
{
	CT *ct = obj;
	const json_t *policy = json_object_get(v, "imagePullPolicy");

	(void)path;
	(void)err;
	if (!policy || json_is_null(policy))
		ct->pull_policy = default_pull(ct->image);
	return 0;
}

static void container_release(void *e)
{
	CT *c = e;

	free(c->name);
	free(c->image);
	strv_free(c->command);
	strv_free(c->args);
	podspec_kv_free(c->env, c->n_env);
	free(c->working_dir);
	for (size_t k = 0; c->ports && k < c->n_ports; k++)
		port_release(&c->ports[k]);
	free(c->ports);
	for (size_t k = 0; c->mounts && k < c->n_mounts; k++)
		mount_release(&c->mounts[k]);
	free(c->mounts);
	podspec_security_release(&c->security);
}

static const char *const pull_names[] = { "Always", "IfNotPresent", "Never", NULL };

static const struct jf_field container_fields[] = {
	{ PODSPEC_STR("name", CT, name), .required = true, .min = 1, .check = podspec_check_label },
	{ PODSPEC_STR("image", CT, image), .required = true, .min = 1, .check = check_image },
	{ JF_ENUM("imagePullPolicy", CT, pull_policy, pull_names) },
	{ PODSPEC_STRV("command", CT, command, n_command) },
	{ PODSPEC_STRV("args", CT, args, n_args) },
	{ JF_CUSTOM("envFrom", 0, refuse_env_from) },
	{ JF_LIST("env", CT, env, n_env, struct podspec_kv, 0, &env_table) },
	{ PODSPEC_STR("workingDir", CT, working_dir) },
	{ JF_LIST("ports", CT, ports, n_ports, struct podspec_port, 0, &port_table),
	  .check = check_port_names },
	{ JF_OBJECT("resources", 0, &resources_table) },
	{ JF_LIST("volumeMounts", CT, mounts, n_mounts, struct podspec_mount, 0, &mount_table),
	  .check = check_mount_paths },
	{ JF_OBJECT("securityContext", offsetof(CT, security), &podspec_security_table) },
	{ JF_CUSTOM("restartPolicy", offsetof(CT, sidecar), read_restart) },
	JF_END,
};
const struct jf_table podspec_container_table = { .fields = container_fields,
						  .null_absent = true,
						  .example = "{name: app, image: busybox}",
						  .check = check_container,
						  .release = container_release };

/* An earlier container (init or app) named name: its path into buf, or NULL. */
static const char *other_container(const struct podspec *ps, const CT *self, const char *name,
				   char *buf, size_t size)
{
	for (size_t i = 0; i < ps->n_init_containers && &ps->init_containers[i] != self; i++)
		if (strcmp(ps->init_containers[i].name, name) == 0)
			return jf_index(buf, size, "spec.initContainers", i);
	for (size_t i = 0; i < ps->n_containers && &ps->containers[i] != self; i++)
		if (strcmp(ps->containers[i].name, name) == 0)
			return jf_index(buf, size, "spec.containers", i);
	return NULL;
}

/* What one container's fields cannot say alone: its name unique in the pod, its mounts
 * naming declared volumes, restartPolicy on an init container only. */
static int check_one(const struct podspec *ps, const CT *ct, bool init, const char *path,
		     struct err *err)
{
	char other[64];

	if (other_container(ps, ct, ct->name, other, sizeof(other)))
		return err_set(err, EINVAL,
			       "%s.name: duplicate container name \"%s\" (also used by %s); "
			       "container names must be unique in a pod",
			       path, ct->name, other);
	for (size_t m = 0; m < ct->n_mounts; m++) {
		bool found = false;

		for (size_t i = 0; i < ps->n_volumes; i++)
			found |= strcmp(ps->volumes[i].name, ct->mounts[m].name) == 0;
		if (!found)
			return err_set(err, EINVAL,
				       "%s.volumeMounts[%zu].name: \"%s\" is not a volume declared "
				       "in spec.volumes",
				       path, m, ct->mounts[m].name);
	}
	if (ct->sidecar && !init)
		return err_set(err, EINVAL,
			       "%s.restartPolicy: \"Always\" is not allowed; a container may only "
			       "set \"Always\", and only as an init container (a sidecar)",
			       path);
	return 0;
}

static int check_list(const struct podspec *ps, bool init, const char *path, struct err *err)
{
	const CT *c = init ? ps->init_containers : ps->containers;
	size_t n = init ? ps->n_init_containers : ps->n_containers;
	char ip[256];

	if (!init && n == 0)
		return err_set(err, EINVAL, "%s: required (a pod needs at least one container)",
			       path);
	for (size_t i = 0; i < n; i++) {
		int ret = check_one(ps, &c[i], init, jf_index(ip, sizeof(ip), path, i), err);

		if (ret < 0)
			return ret;
	}
	return 0;
}

int podspec_check_init_containers(void *obj, const json_t *v, const char *path, struct err *err)
{
	(void)v;
	return check_list(obj, true, path, err);
}

int podspec_check_containers(void *obj, const json_t *v, const char *path, struct err *err)
{
	(void)v;
	return check_list(obj, false, path, err);
}

/* Frees n containers. */
void podspec_containers_free(struct podspec_container *c, size_t n)
{
	for (size_t i = 0; c && i < n; i++)
		container_release(&c[i]);
	free(c);
}
