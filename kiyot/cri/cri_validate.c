/*
 * cri_validate.c: the checks of cri_validate.h. Each check names the field in the CRI's own
 * words (config.labels, port_mappings[2].host_port) and shows a bad value quoted and cut, so a
 * hostile value never reaches a log whole.
 */
#include "cri_validate_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cri_api.pb-c.h"
#include "xalloc.h"

/* CPU and memory limits: what the kernel takes (0 leaves a value unset). A container's
 * memory limit has a floor (min_memory); a pod's overhead or total has none. */
static int check_resource_values(const char *path, const Runtime__V1__LinuxContainerResources *r,
				 int64_t min_memory, struct err *err)
{
	if (r->cpu_period && (r->cpu_period < CPU_PERIOD_MIN || r->cpu_period > CPU_PERIOD_MAX))
		return err_set(err, EINVAL,
			       "%s.cpu_period: %lld; 0 (unset) or %lld-%lld microseconds", path,
			       (long long)r->cpu_period, CPU_PERIOD_MIN, CPU_PERIOD_MAX);
	if (r->cpu_quota && r->cpu_quota != -1 &&
	    (r->cpu_quota < CPU_PERIOD_MIN || r->cpu_quota > CPU_QUOTA_MAX))
		return err_set(err, EINVAL,
			       "%s.cpu_quota: %lld; 0 (unset), -1 (unlimited) or %lld-%lld "
			       "microseconds",
			       path, (long long)r->cpu_quota, CPU_PERIOD_MIN, CPU_QUOTA_MAX);
	if (r->cpu_shares && (r->cpu_shares < CPU_SHARES_MIN || r->cpu_shares > CPU_SHARES_MAX))
		return err_set(err, EINVAL, "%s.cpu_shares: %lld; 0 (unset) or %lld-%lld", path,
			       (long long)r->cpu_shares, CPU_SHARES_MIN, CPU_SHARES_MAX);
	if (r->memory_limit_in_bytes < 0)
		return err_set(err, EINVAL, "%s.memory_limit_in_bytes: %lld; 0 (unset) or more",
			       path, (long long)r->memory_limit_in_bytes);
	if (r->memory_limit_in_bytes && r->memory_limit_in_bytes < min_memory)
		return err_set(
			err, EINVAL,
			"%s.memory_limit_in_bytes: %lld; a container's limit is 0 (unset) or "
			"at least %lld MiB (the floor Docker also keeps)",
			path, (long long)r->memory_limit_in_bytes, (long long)(min_memory >> 20));
	if (r->memory_swap_limit_in_bytes && r->memory_swap_limit_in_bytes != -1 &&
	    (r->memory_swap_limit_in_bytes < 0 ||
	     r->memory_swap_limit_in_bytes < r->memory_limit_in_bytes))
		return err_set(
			err, EINVAL,
			"%s.memory_swap_limit_in_bytes: %lld; 0 (unset), -1 (unlimited) or at "
			"least memory_limit_in_bytes (%lld)",
			path, (long long)r->memory_swap_limit_in_bytes,
			(long long)r->memory_limit_in_bytes);
	if (r->oom_score_adj < -1000 || r->oom_score_adj > 1000)
		return err_set(err, EINVAL, "%s.oom_score_adj: %lld; -1000-1000", path,
			       (long long)r->oom_score_adj);
	return 0;
}

/* A resources message: its values (check_resource_values) and its strings and lists. */
static int check_resources(const char *path, const Runtime__V1__LinuxContainerResources *r,
			   int64_t min_memory, struct err *err)
{
	char b[SHOW * 4 + 8];

	if (!r)
		return 0;
	if (cv_check_len(r->cpuset_cpus, MAX_SHORT, err, "%s.cpuset_cpus", path) < 0 ||
	    cv_check_len(r->cpuset_mems, MAX_SHORT, err, "%s.cpuset_mems", path) < 0 ||
	    cv_check_count(r->n_hugepage_limits, MAX_HUGEPAGE_LIMITS, err, "%s.hugepage_limits",
			   path) < 0 ||
	    cv_check_count(r->n_unified, MAX_MAP_ENTRIES, err, "%s.unified", path) < 0)
		return -err->code;
	for (size_t i = 0; i < r->n_hugepage_limits; i++)
		if (cv_check_len(r->hugepage_limits[i]->page_size, 16, err,
				 "%s.hugepage_limits[%zu].page_size", path, i) < 0)
			return -err->code;
	for (size_t i = 0; i < r->n_unified; i++) {
		const char *k = r->unified[i]->key;

		if (!k[0] || strlen(k) > 255 || strchr(k, '/') || !strcmp(k, ".") ||
		    !strcmp(k, ".."))
			return err_set(err, EINVAL, "%s.unified: key %zu is not a cgroup file name",
				       path, i);
		if (cv_check_len(r->unified[i]->value, MAX_CGROUP_VALUE, err, "%s.unified[%s]",
				 path, cv_show(b, k)) < 0)
			return -err->code;
	}
	return check_resource_values(path, r, min_memory, err);
}

/* One port mapping: ports in range, a known protocol, an address or nothing. */
static int check_port_mapping(const char *path, size_t i, const Runtime__V1__PortMapping *pm,
			      struct err *err)
{
	char b[SHOW * 4 + 8];
	unsigned char addr[16];

	if (pm->container_port < 1 || pm->container_port > 65535)
		return err_set(err, EINVAL,
			       "%s.port_mappings[%zu].container_port: %d is not a port (1-65535)",
			       path, i, pm->container_port);
	if (pm->host_port < 0 || pm->host_port > 65535)
		return err_set(err, EINVAL,
			       "%s.port_mappings[%zu].host_port: %d is not a port (1-65535, or 0 "
			       "for none)",
			       path, i, pm->host_port);
	if (pm->protocol != RUNTIME__V1__PROTOCOL__TCP &&
	    pm->protocol != RUNTIME__V1__PROTOCOL__UDP &&
	    pm->protocol != RUNTIME__V1__PROTOCOL__SCTP)
		return err_set(err, EINVAL,
			       "%s.port_mappings[%zu].protocol: %d is not TCP (0), UDP (1) or SCTP "
			       "(2)",
			       path, i, (int)pm->protocol);
	if (pm->host_ip[0] && inet_pton(AF_INET, pm->host_ip, addr) != 1 &&
	    inet_pton(AF_INET6, pm->host_ip, addr) != 1)
		return err_set(err, EINVAL,
			       "%s.port_mappings[%zu].host_ip: %s is not an IP address", path, i,
			       cv_show(b, pm->host_ip));
	return 0;
}

/* The DNS settings of a pod: as many servers and search domains as Kubernetes passes. */
static int check_dns(const char *path, const Runtime__V1__DNSConfig *d, struct err *err)
{
	size_t chars = 0;

	if (!d)
		return 0;
	if (cv_check_count(d->n_servers, MAX_DNS_SERVERS, err, "%s.dns_config.servers", path) < 0 ||
	    cv_check_count(d->n_searches, MAX_DNS_SEARCHES, err, "%s.dns_config.searches", path) <
		    0 ||
	    cv_check_count(d->n_options, MAX_DNS_OPTIONS, err, "%s.dns_config.options", path) < 0)
		return -err->code;
	for (size_t i = 0; i < d->n_servers; i++)
		if (cv_check_len(d->servers[i], 64, err, "%s.dns_config.servers[%zu]", path, i) < 0)
			return -err->code;
	for (size_t i = 0; i < d->n_options; i++)
		if (cv_check_len(d->options[i], MAX_SUBDOMAIN, err, "%s.dns_config.options[%zu]",
				 path, i) < 0)
			return -err->code;
	for (size_t i = 0; i < d->n_searches; i++)
		chars += strlen(d->searches[i]) + (i ? 1 : 0);
	if (chars > MAX_DNS_SEARCH_CHARS)
		return err_set(err, EINVAL,
			       "%s.dns_config.searches: %zu characters; at most %d together", path,
			       chars, MAX_DNS_SEARCH_CHARS);
	return 0;
}

/* The hostname a cell gives the pod. */
static int check_hostname(const char *path, const char *h, struct err *err)
{
	char b[SHOW * 4 + 8];
	size_t n = strlen(h);

	if (n > MAX_HOSTNAME ||
	    strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") != n)
		return err_set(
			err, EINVAL,
			"%s.hostname: %s (%zu bytes) is not a host name: at most %d letters, "
			"digits, '-' and '.'",
			path, cv_show(b, h), n, MAX_HOSTNAME);
	return 0;
}

/* What a pod's Linux settings may carry: sysctls, groups, cgroup parent, resources. */
static int check_linux_sandbox(const char *path, const Runtime__V1__LinuxPodSandboxConfig *lx,
			       struct err *err)
{
	char b[SHOW * 4 + 8], f[160];

	if (!lx)
		return 0;
	if (cv_check_len(lx->cgroup_parent, MAX_PATH, err, "%s.linux.cgroup_parent", path) < 0 ||
	    cv_check_count(lx->n_sysctls, MAX_MAP_ENTRIES, err, "%s.linux.sysctls", path) < 0 ||
	    (lx->security_context &&
	     cv_check_count(lx->security_context->n_supplemental_groups, MAX_GROUPS, err,
			    "%s.linux.security_context.supplemental_groups", path) < 0))
		return -err->code;
	for (size_t i = 0; i < lx->n_sysctls; i++) {
		const char *k = lx->sysctls[i]->key;

		if (strlen(k) > MAX_SUBDOMAIN)
			return err_set(
				err, EINVAL,
				"%s.linux.sysctls: key %s: %zu bytes; a sysctl name has at most "
				"%d",
				path, cv_show(b, k), strlen(k), MAX_SUBDOMAIN);
		if (cv_check_len(lx->sysctls[i]->value, MAX_SYSCTL_VALUE, err,
				 "%s.linux.sysctls[%s]", path, cv_show(b, k)) < 0)
			return -err->code;
	}
	snprintf(f, sizeof(f), "%s.linux.resources", path);
	if (check_resources(f, lx->resources, 0, err) < 0)
		return -err->code;
	snprintf(f, sizeof(f), "%s.linux.overhead", path);
	return check_resources(f, lx->overhead, 0, err);
}

/* A whole config message, packed, as it will be stored. */
static int check_packed(const char *field, const ProtobufCMessage *m, struct err *err)
{
	size_t n = protobuf_c_message_get_packed_size(m);

	if (n > CRI_MAX_CONFIG_BYTES)
		return err_set(err, EINVAL, "%s: %zu bytes packed; at most %d", field, n,
			       CRI_MAX_CONFIG_BYTES);
	return 0;
}

/* A pod sandbox config, in RunPodSandbox and (when there is one) PullImage. */
static int check_sandbox_config(const char *path, const Runtime__V1__PodSandboxConfig *c,
				struct err *err)
{
	char f[160];

	if (!c)
		return 0;
	snprintf(f, sizeof(f), "%s.log_directory", path);
	if (cv_check_pod_metadata(path, c->metadata, err) < 0 ||
	    check_hostname(path, c->hostname, err) < 0 ||
	    cv_check_path(f, c->log_directory, true, err) < 0 ||
	    check_dns(path, c->dns_config, err) < 0 ||
	    cv_check_count(c->n_port_mappings, MAX_PORT_MAPPINGS, err, "%s.port_mappings", path) <
		    0)
		return -err->code;
	for (size_t i = 0; i < c->n_port_mappings; i++)
		if (check_port_mapping(path, i, c->port_mappings[i], err) < 0)
			return -err->code;
	snprintf(f, sizeof(f), "%s.labels", path);
	if (cv_check_labels(f, (struct kv **)c->labels, c->n_labels, err) < 0)
		return -err->code;
	snprintf(f, sizeof(f), "%s.annotations", path);
	if (cv_check_annotations(f, (struct kv **)c->annotations, c->n_annotations, err) < 0 ||
	    check_linux_sandbox(path, c->linux, err) < 0)
		return -err->code;
	return check_packed(path, &c->base, err);
}

/* An image reference: bounded, of the characters references, tags and digests are made of. */
static int check_image(const char *path, const Runtime__V1__ImageSpec *img, struct err *err)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				       "0123456789._-/:@+";
	char b[SHOW * 4 + 8], f[160];
	size_t n;

	if (!img)
		return 0;
	n = strlen(img->image);
	if (n > MAX_IMAGE_REF || strspn(img->image, alphabet) != n)
		return err_set(err, EINVAL,
			       "%s.image: %s (%zu bytes) is not an image reference: at most %d "
			       "letters, digits and \"._-/:@+\"",
			       path, cv_show(b, img->image), n, MAX_IMAGE_REF);
	if (cv_check_len(img->user_specified_image, MAX_IMAGE_REF, err, "%s.user_specified_image",
			 path) < 0 ||
	    cv_check_len(img->runtime_handler, MAX_SHORT, err, "%s.runtime_handler", path) < 0)
		return -err->code;
	snprintf(f, sizeof(f), "%s.annotations", path);
	return cv_check_annotations(f, (struct kv **)img->annotations, img->n_annotations, err);
}

/* Mounts and devices: how many, and their paths. */
static int check_mounts(const Runtime__V1__ContainerConfig *c, struct err *err)
{
	if (cv_check_count(c->n_mounts, MAX_MOUNTS, err, "config.mounts") < 0 ||
	    cv_check_count(c->n_devices, MAX_DEVICES, err, "config.devices") < 0 ||
	    cv_check_count(c->n_cdi_devices, MAX_DEVICES, err, "config.CDI_devices") < 0)
		return -err->code;
	for (size_t i = 0; i < c->n_mounts; i++) {
		const Runtime__V1__Mount *m = c->mounts[i];

		if (cv_check_len(m->container_path, MAX_PATH, err,
				 "config.mounts[%zu].container_path", i) < 0 ||
		    cv_check_len(m->host_path, MAX_PATH, err, "config.mounts[%zu].host_path", i) <
			    0 ||
		    cv_check_count(m->n_uidmappings, MAX_ID_MAPPINGS, err,
				   "config.mounts[%zu].uidMappings", i) < 0 ||
		    cv_check_count(m->n_gidmappings, MAX_ID_MAPPINGS, err,
				   "config.mounts[%zu].gidMappings", i) < 0)
			return -err->code;
	}
	for (size_t i = 0; i < c->n_devices; i++) {
		const Runtime__V1__Device *d = c->devices[i];

		if (cv_check_len(d->container_path, MAX_PATH, err,
				 "config.devices[%zu].container_path", i) < 0 ||
		    cv_check_len(d->host_path, MAX_PATH, err, "config.devices[%zu].host_path", i) <
			    0)
			return -err->code;
		if (strlen(d->permissions) > 3 ||
		    strspn(d->permissions, "rwm") != strlen(d->permissions))
			return err_set(err, EINVAL,
				       "config.devices[%zu].permissions: want some of \"rwm\"", i);
	}
	for (size_t i = 0; i < c->n_cdi_devices; i++)
		if (cv_check_len(c->cdi_devices[i]->name, MAX_SHORT, err,
				 "config.CDI_devices[%zu].name", i) < 0)
			return -err->code;
	return 0;
}

/* The process of a container: command, args and environment together, as exec takes them. */
static int check_process(const Runtime__V1__ContainerConfig *c, struct err *err)
{
	char b[SHOW * 4 + 8];
	size_t total = 0;

	if (cv_check_strings("config.command", c->command, c->n_command, &total, err) < 0 ||
	    cv_check_strings("config.args", c->args, c->n_args, &total, err) < 0 ||
	    cv_check_len(c->working_dir, MAX_PATH, err, "config.working_dir") < 0)
		return -err->code;
	for (size_t i = 0; i < c->n_envs; i++) {
		const Runtime__V1__KeyValue *e = c->envs[i];
		size_t len = strlen(e->key) + 1 + strlen(e->value);

		if (!e->key[0] || strchr(e->key, '='))
			return err_set(
				err, EINVAL,
				"config.envs[%zu].key: %s is not a variable name (not empty, "
				"no '=')",
				i, cv_show(b, e->key));
		if (len > CRI_MAX_ARG_BYTES)
			return err_set(err, EINVAL,
				       "config.envs[%zu]: %zu bytes; one argument or variable has "
				       "at most %d (the kernel's MAX_ARG_STRLEN)",
				       i, len, CRI_MAX_ARG_BYTES);
		total += len + 1;
	}
	return cv_check_process_total("config.command, config.args and config.envs", total, err);
}

/* The security context's lists and strings. */
static int check_container_security(const Runtime__V1__LinuxContainerSecurityContext *sc,
				    struct err *err)
{
	const Runtime__V1__Capability *caps = sc ? sc->capabilities : NULL;

	if (!sc)
		return 0;
	if (cv_check_count(sc->n_supplemental_groups, MAX_GROUPS, err,
			   "config.linux.security_context.supplemental_groups") < 0 ||
	    cv_check_count(sc->n_masked_paths, MAX_MASKED_PATHS, err,
			   "config.linux.security_context.masked_paths") < 0 ||
	    cv_check_count(sc->n_readonly_paths, MAX_MASKED_PATHS, err,
			   "config.linux.security_context.readonly_paths") < 0 ||
	    cv_check_len(sc->run_as_username, 256, err,
			 "config.linux.security_context.run_as_username") < 0)
		return -err->code;
	for (size_t i = 0; i < sc->n_masked_paths; i++)
		if (cv_check_len(sc->masked_paths[i], MAX_PATH, err,
				 "config.linux.security_context.masked_paths[%zu]", i) < 0)
			return -err->code;
	for (size_t i = 0; i < sc->n_readonly_paths; i++)
		if (cv_check_len(sc->readonly_paths[i], MAX_PATH, err,
				 "config.linux.security_context.readonly_paths[%zu]", i) < 0)
			return -err->code;
	if (caps &&
	    (cv_check_count(caps->n_add_capabilities, MAX_CAPABILITIES, err,
			    "config.linux.security_context.capabilities.add_capabilities") < 0 ||
	     cv_check_count(caps->n_drop_capabilities, MAX_CAPABILITIES, err,
			    "config.linux.security_context.capabilities.drop_capabilities") < 0 ||
	     cv_check_count(caps->n_add_ambient_capabilities, MAX_CAPABILITIES, err,
			    "config.linux.security_context.capabilities."
			    "add_ambient_capabilities") < 0))
		return -err->code;
	return 0;
}

/* A container config, in CreateContainer. */
static int check_container_config(const Runtime__V1__ContainerConfig *c, struct err *err)
{
	char b[SHOW * 4 + 8];
	size_t n;

	if (!c)
		return 0;
	n = c->metadata ? strlen(c->metadata->name) : 0;
	if (n && !cv_is_container_name(c->metadata->name, n, CRI_MAX_CONTAINER_NAME))
		return err_set(err, EINVAL,
			       "config.metadata.name: %s (%zu bytes) is not a container name: at "
			       "most %d letters, digits, '-', '.' and '_', starting with a letter "
			       "or digit",
			       cv_show(b, c->metadata->name), n, CRI_MAX_CONTAINER_NAME);
	if (check_image("config.image", c->image, err) < 0 || check_process(c, err) < 0 ||
	    check_mounts(c, err) < 0 ||
	    cv_check_labels("config.labels", (struct kv **)c->labels, c->n_labels, err) < 0 ||
	    cv_check_annotations("config.annotations", (struct kv **)c->annotations,
				 c->n_annotations, err) < 0 ||
	    cv_check_path("config.log_path", c->log_path, false, err) < 0)
		return -err->code;
	if (c->linux && (check_resources("config.linux.resources", c->linux->resources,
					 CRI_MIN_MEMORY_LIMIT, err) < 0 ||
			 check_container_security(c->linux->security_context, err) < 0))
		return -err->code;
	return check_packed("config", &c->base, err);
}

/* ---- requests ---- */

static int run_pod_sandbox(const void *m, struct err *err)
{
	const Runtime__V1__RunPodSandboxRequest *r = m;

	if (cv_check_len(r->runtime_handler, MAX_SHORT, err, "runtime_handler") < 0)
		return -err->code;
	return check_sandbox_config("config", r->config, err);
}

/* The sandbox config a kubelet sends along is kiyot's own record's copy: not checked again. */
static int create_container(const void *m, struct err *err)
{
	const Runtime__V1__CreateContainerRequest *r = m;

	if (cv_check_id("pod_sandbox_id", r->pod_sandbox_id, err) < 0)
		return -err->code;
	return check_container_config(r->config, err);
}

static int update_container_resources(const void *m, struct err *err)
{
	const Runtime__V1__UpdateContainerResourcesRequest *r = m;

	if (cv_check_id("container_id", r->container_id, err) < 0 ||
	    check_resources("linux", r->linux, CRI_MIN_MEMORY_LIMIT, err) < 0)
		return -err->code;
	return cv_check_annotations("annotations", (struct kv **)r->annotations, r->n_annotations,
				    err);
}

/* A command run in a container (ExecSync, Exec): what a process may start with. */
static int check_cmd(char **cmd, size_t n, struct err *err)
{
	size_t total = 0;

	if (cv_check_strings("cmd", cmd, n, &total, err) < 0)
		return -err->code;
	return cv_check_process_total("cmd", total, err);
}

static int exec_sync(const void *m, struct err *err)
{
	const Runtime__V1__ExecSyncRequest *r = m;

	if (cv_check_id("container_id", r->container_id, err) < 0)
		return -err->code;
	return check_cmd(r->cmd, r->n_cmd, err);
}

static int exec(const void *m, struct err *err)
{
	const Runtime__V1__ExecRequest *r = m;

	if (cv_check_id("container_id", r->container_id, err) < 0)
		return -err->code;
	return check_cmd(r->cmd, r->n_cmd, err);
}

static int attach(const void *m, struct err *err)
{
	const Runtime__V1__AttachRequest *r = m;

	return cv_check_id("container_id", r->container_id, err);
}

static int port_forward(const void *m, struct err *err)
{
	const Runtime__V1__PortForwardRequest *r = m;

	if (cv_check_id("pod_sandbox_id", r->pod_sandbox_id, err) < 0)
		return -err->code;
	return cv_check_count(r->n_port, MAX_PORTS, err, "port");
}

static int pull_image(const void *m, struct err *err)
{
	const Runtime__V1__PullImageRequest *r = m;
	const Runtime__V1__AuthConfig *a = r->auth;

	if (check_image("image", r->image, err) < 0)
		return -err->code;
	if (a && (cv_check_len(a->username, MAX_AUTH_FIELD, err, "auth.username") < 0 ||
		  cv_check_len(a->password, MAX_AUTH_FIELD, err, "auth.password") < 0 ||
		  cv_check_len(a->auth, MAX_AUTH_FIELD, err, "auth.auth") < 0 ||
		  cv_check_len(a->server_address, MAX_SHORT, err, "auth.server_address") < 0 ||
		  cv_check_len(a->identity_token, MAX_AUTH_FIELD, err, "auth.identity_token") < 0 ||
		  cv_check_len(a->registry_token, MAX_AUTH_FIELD, err, "auth.registry_token") < 0))
		return -err->code;
	return check_sandbox_config("sandbox_config", r->sandbox_config, err);
}

/* The requests with checks, by message type. */
static const struct {
	const ProtobufCMessageDescriptor *desc;
	int (*check)(const void *req, struct err *err);
} checks[] = {
	{ &runtime__v1__run_pod_sandbox_request__descriptor, run_pod_sandbox },
	{ &runtime__v1__create_container_request__descriptor, create_container },
	{ &runtime__v1__update_container_resources_request__descriptor,
	  update_container_resources },
	{ &runtime__v1__exec_sync_request__descriptor, exec_sync },
	{ &runtime__v1__exec_request__descriptor, exec },
	{ &runtime__v1__attach_request__descriptor, attach },
	{ &runtime__v1__port_forward_request__descriptor, port_forward },
	{ &runtime__v1__pull_image_request__descriptor, pull_image },
};

int cri_validate(const ProtobufCMessage *req, struct err *err)
{
	for (size_t i = 0; req && i < ARRAY_SIZE(checks); i++)
		if (req->descriptor == checks[i].desc)
			return checks[i].check(req, err);
	return 0;
}
