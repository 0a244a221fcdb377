/*
 * cri_validate.c: the checks of cri_validate.h. Each check names the field in the CRI's own
 * words (config.labels, port_mappings[2].host_port) and shows a bad value quoted and cut, so a
 * hostile value never reaches a log whole.
 */
#include "cri_validate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cri_api.pb-c.h"
#include "xalloc.h"

#define MAX_MAP_ENTRIES 4096	   /* labels, annotations, sysctls, unified */
#define MAX_LABEL_VALUE 63	   /* a label value; also the name part of a key */
#define MAX_SUBDOMAIN 253	   /* a DNS-1123 subdomain */
#define MAX_HOSTNAME 64		   /* HOST_NAME_MAX */
#define MAX_PATH 4095		   /* PATH_MAX, its NUL aside */
#define MAX_ID 128		   /* kiyot's ids have 64, containerd's too */
#define MAX_IMAGE_REF 520	   /* a 255-character name, ':' a 128 tag, '@' a sha512 digest */
#define MAX_AUTH_FIELD (16 * 1024) /* a JWT or a service account key is a few KiB */
#define MAX_DNS_SERVERS 3	   /* what the kubelet passes, and glibc reads (MAXNS) */
#define MAX_DNS_SEARCHES 32	   /* Kubernetes' MaxDNSSearchPaths */
#define MAX_DNS_SEARCH_CHARS 2048  /* Kubernetes' MaxDNSSearchListChars */
#define MAX_DNS_OPTIONS 32
#define MAX_SYSCTL_VALUE 4095 /* a /proc/sys write is one page */
#define MAX_PORT_MAPPINGS 1024
#define MAX_PORTS 65535 /* PortForward's list: there are no more ports */
#define MAX_MOUNTS 1024
#define MAX_ID_MAPPINGS 340 /* the kernel's limit of lines in a uid_map */
#define MAX_DEVICES 1024
#define MAX_GROUPS 65536 /* NGROUPS_MAX */
#define MAX_CAPABILITIES 64
#define MAX_MASKED_PATHS 1024
#define MAX_HUGEPAGE_LIMITS 16
#define MAX_CGROUP_VALUE 4095
#define MAX_SHORT 1024 /* short free-form strings: runtime handler, cpusets, profile names */
#define SHOW 64	       /* bytes of a bad value shown in a message */

#define CPU_PERIOD_MIN 1000LL		/* us: the kernel's min_cfs_quota_period */
#define CPU_PERIOD_MAX 1000000LL	/* us: max_cfs_quota_period */
#define CPU_QUOTA_MAX ((1LL << 44) - 1) /* us: max_cfs_runtime */
#define CPU_SHARES_MIN 2LL
#define CPU_SHARES_MAX 262144LL

/* A map entry of any CRI map (labels, annotations, sysctls): they share this layout. */
struct kv {
	ProtobufCMessage base;
	char *key;
	char *value;
};

/* Writes s quoted into buf, at most SHOW bytes of it, bytes that are not printable ASCII as
 * \xNN, "..." when cut; returns buf. */
static const char *show(char buf[static SHOW * 4 + 8], const char *s)
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
static bool is_container_name(const char *s, size_t len, size_t max)
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
static int __attribute__((format(printf, 4, 5)))
check_len(const char *s, size_t max, struct err *err, const char *fmt, ...)
{
	char field[160];
	size_t n = strlen(s);

	if (n <= max)
		return 0;
	FIELD_NAME(field, fmt);
	return err_set(err, EINVAL, "%s: %zu bytes; at most %zu", field, n, max);
}

/* Fails when a list or map has more than max entries; the rest names the field. */
static int __attribute__((format(printf, 4, 5)))
check_count(size_t n, size_t max, struct err *err, const char *fmt, ...)
{
	char field[160];

	if (n <= max)
		return 0;
	FIELD_NAME(field, fmt);
	return err_set(err, EINVAL, "%s: %zu entries; at most %zu", field, n, max);
}

/* A container or sandbox id: required, short, of the characters ids are made of. */
static int check_id(const char *field, const char *id, struct err *err)
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
			       field, show(b, id), n, MAX_ID);
	return 0;
}

/* A path kiyot joins or opens: bounded, with no ".." component; absolute when asked. */
static int check_path(const char *field, const char *p, bool absolute, struct err *err)
{
	char b[SHOW * 4 + 8];
	size_t n = strlen(p);

	if (check_len(p, MAX_PATH, err, "%s", field) < 0)
		return -err->code;
	if (absolute && n && p[0] != '/')
		return err_set(err, EINVAL, "%s: %s is not an absolute path", field, show(b, p));
	for (const char *c = p; (c = strstr(c, "..")); c += 2)
		if ((c == p || c[-1] == '/') && (c[2] == '/' || c[2] == '\0'))
			return err_set(err, EINVAL, "%s: %s: a \"..\" component is not allowed",
				       field, show(b, p));
	return 0;
}

/* The metadata of a pod: name, namespace and uid, each when set (the handler requires them). */
static int check_pod_metadata(const char *path, const Runtime__V1__PodSandboxMetadata *md,
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
			       path, show(b, md->name));
	n = strlen(md->namespace_);
	if (n && !is_dns_label(md->namespace_, n, CRI_MAX_NAMESPACE, true))
		return err_set(err, EINVAL,
			       "%s.metadata.namespace: %s (%zu bytes) is not a DNS-1123 label: at "
			       "most %d letters, digits and '-', starting and ending with a letter "
			       "or digit",
			       path, show(b, md->namespace_), n, CRI_MAX_NAMESPACE);
	n = strlen(md->uid);
	for (size_t i = 0; i < n && n <= CRI_MAX_UID; i++)
		if (md->uid[i] <= 0x20 || md->uid[i] >= 0x7f || md->uid[i] == '/')
			n = CRI_MAX_UID + 1;
	if (n > CRI_MAX_UID)
		return err_set(err, EINVAL,
			       "%s.metadata.uid: %s (%zu bytes) is not a uid: at most %d printable "
			       "characters, no spaces or '/'",
			       path, show(b, md->uid), strlen(md->uid), CRI_MAX_UID);
	return 0;
}

/* Labels: Kubernetes' label keys and values; the kubelet's pod name label holds a pod name. */
static int check_labels(const char *path, struct kv **m, size_t n, struct err *err)
{
	char b[SHOW * 4 + 8];

	if (check_count(n, MAX_MAP_ENTRIES, err, "%s", path) < 0)
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
				path, show(b, k), MAX_LABEL_VALUE);
		if (strcmp(k, "io.kubernetes.pod.name") == 0
			    ? !(vn == 0 || is_dns_subdomain(v, vn, true))
			    : !is_label_value(v, vn))
			return err_set(
				err, EINVAL,
				"%s[\"%s\"]: %s (%zu bytes) is not a label value: at most %d "
				"letters, digits, '-', '_' or '.', starting and ending with a "
				"letter or digit",
				path, k, show(b, v), vn,
				strcmp(k, "io.kubernetes.pod.name") == 0 ? CRI_MAX_POD_NAME
									 : MAX_LABEL_VALUE);
	}
	return 0;
}

/* Annotations: keys as label keys in any case; keys and values together bounded. */
static int check_annotations(const char *path, struct kv **m, size_t n, struct err *err)
{
	char b[SHOW * 4 + 8];
	size_t total = 0;

	if (check_count(n, MAX_MAP_ENTRIES, err, "%s", path) < 0)
		return -err->code;
	for (size_t i = 0; i < n; i++) {
		if (!is_qualified_name(m[i]->key, true))
			return err_set(
				err, EINVAL,
				"%s: key %s is not an annotation key: an optional DNS-1123 "
				"subdomain and '/', then at most %d letters, digits, '-', '_' "
				"or '.', starting and ending with a letter or digit",
				path, show(b, m[i]->key), MAX_LABEL_VALUE);
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
static int check_strings(const char *field, char **v, size_t n, size_t *total, struct err *err)
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

static int check_process_total(const char *field, size_t total, struct err *err)
{
	if (total > CRI_MAX_PROCESS_BYTES)
		return err_set(err, EINVAL,
			       "%s: %zu bytes; a process starts with at most %d of arguments and "
			       "environment (the kernel's ARG_MAX under the default 8 MiB stack)",
			       field, total, CRI_MAX_PROCESS_BYTES);
	return 0;
}

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
	if (check_len(r->cpuset_cpus, MAX_SHORT, err, "%s.cpuset_cpus", path) < 0 ||
	    check_len(r->cpuset_mems, MAX_SHORT, err, "%s.cpuset_mems", path) < 0 ||
	    check_count(r->n_hugepage_limits, MAX_HUGEPAGE_LIMITS, err, "%s.hugepage_limits",
			path) < 0 ||
	    check_count(r->n_unified, MAX_MAP_ENTRIES, err, "%s.unified", path) < 0)
		return -err->code;
	for (size_t i = 0; i < r->n_hugepage_limits; i++)
		if (check_len(r->hugepage_limits[i]->page_size, 16, err,
			      "%s.hugepage_limits[%zu].page_size", path, i) < 0)
			return -err->code;
	for (size_t i = 0; i < r->n_unified; i++) {
		const char *k = r->unified[i]->key;

		if (!k[0] || strlen(k) > 255 || strchr(k, '/') || !strcmp(k, ".") ||
		    !strcmp(k, ".."))
			return err_set(err, EINVAL, "%s.unified: key %zu is not a cgroup file name",
				       path, i);
		if (check_len(r->unified[i]->value, MAX_CGROUP_VALUE, err, "%s.unified[%s]", path,
			      show(b, k)) < 0)
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
			       show(b, pm->host_ip));
	return 0;
}

/* The DNS settings of a pod: as many servers and search domains as Kubernetes passes. */
static int check_dns(const char *path, const Runtime__V1__DNSConfig *d, struct err *err)
{
	size_t chars = 0;

	if (!d)
		return 0;
	if (check_count(d->n_servers, MAX_DNS_SERVERS, err, "%s.dns_config.servers", path) < 0 ||
	    check_count(d->n_searches, MAX_DNS_SEARCHES, err, "%s.dns_config.searches", path) < 0 ||
	    check_count(d->n_options, MAX_DNS_OPTIONS, err, "%s.dns_config.options", path) < 0)
		return -err->code;
	for (size_t i = 0; i < d->n_servers; i++)
		if (check_len(d->servers[i], 64, err, "%s.dns_config.servers[%zu]", path, i) < 0)
			return -err->code;
	for (size_t i = 0; i < d->n_options; i++)
		if (check_len(d->options[i], MAX_SUBDOMAIN, err, "%s.dns_config.options[%zu]", path,
			      i) < 0)
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
			path, show(b, h), n, MAX_HOSTNAME);
	return 0;
}

/* What a pod's Linux settings may carry: sysctls, groups, cgroup parent, resources. */
static int check_linux_sandbox(const char *path, const Runtime__V1__LinuxPodSandboxConfig *lx,
			       struct err *err)
{
	char b[SHOW * 4 + 8], f[160];

	if (!lx)
		return 0;
	if (check_len(lx->cgroup_parent, MAX_PATH, err, "%s.linux.cgroup_parent", path) < 0 ||
	    check_count(lx->n_sysctls, MAX_MAP_ENTRIES, err, "%s.linux.sysctls", path) < 0 ||
	    (lx->security_context &&
	     check_count(lx->security_context->n_supplemental_groups, MAX_GROUPS, err,
			 "%s.linux.security_context.supplemental_groups", path) < 0))
		return -err->code;
	for (size_t i = 0; i < lx->n_sysctls; i++) {
		const char *k = lx->sysctls[i]->key;

		if (strlen(k) > MAX_SUBDOMAIN)
			return err_set(
				err, EINVAL,
				"%s.linux.sysctls: key %s: %zu bytes; a sysctl name has at most "
				"%d",
				path, show(b, k), strlen(k), MAX_SUBDOMAIN);
		if (check_len(lx->sysctls[i]->value, MAX_SYSCTL_VALUE, err, "%s.linux.sysctls[%s]",
			      path, show(b, k)) < 0)
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
	if (check_pod_metadata(path, c->metadata, err) < 0 ||
	    check_hostname(path, c->hostname, err) < 0 ||
	    check_path(f, c->log_directory, true, err) < 0 ||
	    check_dns(path, c->dns_config, err) < 0 ||
	    check_count(c->n_port_mappings, MAX_PORT_MAPPINGS, err, "%s.port_mappings", path) < 0)
		return -err->code;
	for (size_t i = 0; i < c->n_port_mappings; i++)
		if (check_port_mapping(path, i, c->port_mappings[i], err) < 0)
			return -err->code;
	snprintf(f, sizeof(f), "%s.labels", path);
	if (check_labels(f, (struct kv **)c->labels, c->n_labels, err) < 0)
		return -err->code;
	snprintf(f, sizeof(f), "%s.annotations", path);
	if (check_annotations(f, (struct kv **)c->annotations, c->n_annotations, err) < 0 ||
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
			       path, show(b, img->image), n, MAX_IMAGE_REF);
	if (check_len(img->user_specified_image, MAX_IMAGE_REF, err, "%s.user_specified_image",
		      path) < 0 ||
	    check_len(img->runtime_handler, MAX_SHORT, err, "%s.runtime_handler", path) < 0)
		return -err->code;
	snprintf(f, sizeof(f), "%s.annotations", path);
	return check_annotations(f, (struct kv **)img->annotations, img->n_annotations, err);
}

/* Mounts and devices: how many, and their paths. */
static int check_mounts(const Runtime__V1__ContainerConfig *c, struct err *err)
{
	if (check_count(c->n_mounts, MAX_MOUNTS, err, "config.mounts") < 0 ||
	    check_count(c->n_devices, MAX_DEVICES, err, "config.devices") < 0 ||
	    check_count(c->n_cdi_devices, MAX_DEVICES, err, "config.CDI_devices") < 0)
		return -err->code;
	for (size_t i = 0; i < c->n_mounts; i++) {
		const Runtime__V1__Mount *m = c->mounts[i];

		if (check_len(m->container_path, MAX_PATH, err, "config.mounts[%zu].container_path",
			      i) < 0 ||
		    check_len(m->host_path, MAX_PATH, err, "config.mounts[%zu].host_path", i) < 0 ||
		    check_count(m->n_uidmappings, MAX_ID_MAPPINGS, err,
				"config.mounts[%zu].uidMappings", i) < 0 ||
		    check_count(m->n_gidmappings, MAX_ID_MAPPINGS, err,
				"config.mounts[%zu].gidMappings", i) < 0)
			return -err->code;
	}
	for (size_t i = 0; i < c->n_devices; i++) {
		const Runtime__V1__Device *d = c->devices[i];

		if (check_len(d->container_path, MAX_PATH, err,
			      "config.devices[%zu].container_path", i) < 0 ||
		    check_len(d->host_path, MAX_PATH, err, "config.devices[%zu].host_path", i) < 0)
			return -err->code;
		if (strlen(d->permissions) > 3 ||
		    strspn(d->permissions, "rwm") != strlen(d->permissions))
			return err_set(err, EINVAL,
				       "config.devices[%zu].permissions: want some of \"rwm\"", i);
	}
	for (size_t i = 0; i < c->n_cdi_devices; i++)
		if (check_len(c->cdi_devices[i]->name, MAX_SHORT, err,
			      "config.CDI_devices[%zu].name", i) < 0)
			return -err->code;
	return 0;
}

/* The process of a container: command, args and environment together, as exec takes them. */
static int check_process(const Runtime__V1__ContainerConfig *c, struct err *err)
{
	char b[SHOW * 4 + 8];
	size_t total = 0;

	if (check_strings("config.command", c->command, c->n_command, &total, err) < 0 ||
	    check_strings("config.args", c->args, c->n_args, &total, err) < 0 ||
	    check_len(c->working_dir, MAX_PATH, err, "config.working_dir") < 0)
		return -err->code;
	for (size_t i = 0; i < c->n_envs; i++) {
		const Runtime__V1__KeyValue *e = c->envs[i];
		size_t len = strlen(e->key) + 1 + strlen(e->value);

		if (!e->key[0] || strchr(e->key, '='))
			return err_set(
				err, EINVAL,
				"config.envs[%zu].key: %s is not a variable name (not empty, "
				"no '=')",
				i, show(b, e->key));
		if (len > CRI_MAX_ARG_BYTES)
			return err_set(err, EINVAL,
				       "config.envs[%zu]: %zu bytes; one argument or variable has "
				       "at most %d (the kernel's MAX_ARG_STRLEN)",
				       i, len, CRI_MAX_ARG_BYTES);
		total += len + 1;
	}
	return check_process_total("config.command, config.args and config.envs", total, err);
}

/* The security context's lists and strings. */
static int check_container_security(const Runtime__V1__LinuxContainerSecurityContext *sc,
				    struct err *err)
{
	const Runtime__V1__Capability *caps = sc ? sc->capabilities : NULL;

	if (!sc)
		return 0;
	if (check_count(sc->n_supplemental_groups, MAX_GROUPS, err,
			"config.linux.security_context.supplemental_groups") < 0 ||
	    check_count(sc->n_masked_paths, MAX_MASKED_PATHS, err,
			"config.linux.security_context.masked_paths") < 0 ||
	    check_count(sc->n_readonly_paths, MAX_MASKED_PATHS, err,
			"config.linux.security_context.readonly_paths") < 0 ||
	    check_len(sc->run_as_username, 256, err,
		      "config.linux.security_context.run_as_username") < 0)
		return -err->code;
	for (size_t i = 0; i < sc->n_masked_paths; i++)
		if (check_len(sc->masked_paths[i], MAX_PATH, err,
			      "config.linux.security_context.masked_paths[%zu]", i) < 0)
			return -err->code;
	for (size_t i = 0; i < sc->n_readonly_paths; i++)
		if (check_len(sc->readonly_paths[i], MAX_PATH, err,
			      "config.linux.security_context.readonly_paths[%zu]", i) < 0)
			return -err->code;
	if (caps &&
	    (check_count(caps->n_add_capabilities, MAX_CAPABILITIES, err,
			 "config.linux.security_context.capabilities.add_capabilities") < 0 ||
	     check_count(caps->n_drop_capabilities, MAX_CAPABILITIES, err,
			 "config.linux.security_context.capabilities.drop_capabilities") < 0 ||
	     check_count(caps->n_add_ambient_capabilities, MAX_CAPABILITIES, err,
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
	if (n && !is_container_name(c->metadata->name, n, CRI_MAX_CONTAINER_NAME))
		return err_set(err, EINVAL,
			       "config.metadata.name: %s (%zu bytes) is not a container name: at "
			       "most %d letters, digits, '-', '.' and '_', starting with a letter "
			       "or digit",
			       show(b, c->metadata->name), n, CRI_MAX_CONTAINER_NAME);
	if (check_image("config.image", c->image, err) < 0 || check_process(c, err) < 0 ||
	    check_mounts(c, err) < 0 ||
	    check_labels("config.labels", (struct kv **)c->labels, c->n_labels, err) < 0 ||
	    check_annotations("config.annotations", (struct kv **)c->annotations, c->n_annotations,
			      err) < 0 ||
	    check_path("config.log_path", c->log_path, false, err) < 0)
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

	if (check_len(r->runtime_handler, MAX_SHORT, err, "runtime_handler") < 0)
		return -err->code;
	return check_sandbox_config("config", r->config, err);
}

/* The sandbox config a kubelet sends along is kiyot's own record's copy: not checked again. */
static int create_container(const void *m, struct err *err)
{
	const Runtime__V1__CreateContainerRequest *r = m;

	if (check_id("pod_sandbox_id", r->pod_sandbox_id, err) < 0)
		return -err->code;
	return check_container_config(r->config, err);
}

static int update_container_resources(const void *m, struct err *err)
{
	const Runtime__V1__UpdateContainerResourcesRequest *r = m;

	if (check_id("container_id", r->container_id, err) < 0 ||
	    check_resources("linux", r->linux, CRI_MIN_MEMORY_LIMIT, err) < 0)
		return -err->code;
	return check_annotations("annotations", (struct kv **)r->annotations, r->n_annotations,
				 err);
}

/* A command run in a container (ExecSync, Exec): what a process may start with. */
static int check_cmd(char **cmd, size_t n, struct err *err)
{
	size_t total = 0;

	if (check_strings("cmd", cmd, n, &total, err) < 0)
		return -err->code;
	return check_process_total("cmd", total, err);
}

static int exec_sync(const void *m, struct err *err)
{
	const Runtime__V1__ExecSyncRequest *r = m;

	if (check_id("container_id", r->container_id, err) < 0)
		return -err->code;
	return check_cmd(r->cmd, r->n_cmd, err);
}

static int exec(const void *m, struct err *err)
{
	const Runtime__V1__ExecRequest *r = m;

	if (check_id("container_id", r->container_id, err) < 0)
		return -err->code;
	return check_cmd(r->cmd, r->n_cmd, err);
}

static int attach(const void *m, struct err *err)
{
	const Runtime__V1__AttachRequest *r = m;

	return check_id("container_id", r->container_id, err);
}

static int port_forward(const void *m, struct err *err)
{
	const Runtime__V1__PortForwardRequest *r = m;

	if (check_id("pod_sandbox_id", r->pod_sandbox_id, err) < 0)
		return -err->code;
	return check_count(r->n_port, MAX_PORTS, err, "port");
}

static int pull_image(const void *m, struct err *err)
{
	const Runtime__V1__PullImageRequest *r = m;
	const Runtime__V1__AuthConfig *a = r->auth;

	if (check_image("image", r->image, err) < 0)
		return -err->code;
	if (a && (check_len(a->username, MAX_AUTH_FIELD, err, "auth.username") < 0 ||
		  check_len(a->password, MAX_AUTH_FIELD, err, "auth.password") < 0 ||
		  check_len(a->auth, MAX_AUTH_FIELD, err, "auth.auth") < 0 ||
		  check_len(a->server_address, MAX_SHORT, err, "auth.server_address") < 0 ||
		  check_len(a->identity_token, MAX_AUTH_FIELD, err, "auth.identity_token") < 0 ||
		  check_len(a->registry_token, MAX_AUTH_FIELD, err, "auth.registry_token") < 0))
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
