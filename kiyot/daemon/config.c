/*
 * config.c: kiyot's settings: defaults, then a config file (YAML or JSON), then flags.
 *
 *	socket: /run/kiyot/kiyot.sock
 *	stateDir: /var/lib/kiyot
 *	logLevel: info
 *	region: us-east-1
 *	defaultInstanceType: ""
 *	fallbackRuntimeEndpoint: ""  (e.g. unix:///run/containerd/containerd.sock: pods without
 *	                              kubernetes.io/target-runtime: kiyot go there)
 *	streamingAddress: 127.0.0.1:0 (the streaming server Exec's URLs point at; the kubelet
 *	                              proxies to it; port 0 picks a free one)
 *	reserve: { cpu: "0", memory: "64Mi" }
 *	cells:
 *	  provider: local
 *	  cidr: 10.77.0.0/16
 *	  bridge: kiyot0
 *	  agent: /usr/local/bin/cell-agent
 *	  agentPort: 7443
 *	  restartBackoffMs: 10000     (first restart delay of a unit; doubles to 5 min)
 *	  gcIntervalSeconds: 30       (how often cells and sandboxes are reconciled)
 *	  gcGraceSeconds: 120         (how long a cell nothing owns may live)
 *	  bootTimeoutSeconds: 30      (how long a launched cell's agent may take to answer;
 *	                              default the provider's: local 30, ec2 600. A launch ends
 *	                              sooner when its instance stops being pending or running)
 *	  masquerade: false           (local cells: kiyot turns on forwarding and NAT on the node)
 *	  nodePorts: []               (local cells: the node's ports they may reach, e.g. [5000,
 *	                              "53/udp"]; nothing else on the node answers them)
 *	  kubeProxy:                  (a kube-proxy unit in every cell; see deploy/README.md)
 *	    image: registry.k8s.io/kube-proxy:v1.30.2
 *	    kubeconfig: /var/lib/kiyot/kube-proxy.kubeconfig  (node file, mounted read-only at
 *	                              /var/lib/kube-proxy/kubeconfig)
 *	    args: [...]               (appended to the default command)
 *	    command: [...]            (replaces the whole command)
 *	registries: { "<host>": { mirrors: [...], insecure: bool } }
 *	pulls:                        (image pulls, kiyot's and every cell's)
 *	  minBytes: 10240             (a transfer moving fewer bytes than this ...)
 *	  windowSeconds: 30           (... over this long fails, naming the registry and blob;
 *	                              0: no check)
 *	  deadlineBaseSeconds: 60     (a blob must arrive within this ...)
 *	  deadlineBytesPerSecond: 32768 (... plus its size at this rate)
 *	  maxTransfers: 8             (layer downloads at once in a cell, or in kiyot)
 *	  maxPerRegistry: 4           (of those, from one registry host)
 *	kubeconfig: ""                (API server for Cell objects; "": in-cluster if there)
 *	nodeName: ""                  (the node's name as its kubelet registers it, on Cell
 *	                              objects and Events; "": the host name in lower case)
 *	ec2:                          (when cells.provider is ec2)
 *	  region: us-east-1           (default: the top-level region; without a top-level region
 *	                              the instance catalog's prices follow it; with one, they
 *	                              must agree)
 *	  endpoint: ""                (a private endpoint; default EC2's public one)
 *	  imageId: ami-...            (the cell image, cell-agent reading user-data: x86_64)
 *	  imageIds: {x86_64: ami-..., arm64: ami-...} (a cell image per architecture; imageId
 *	                              is the x86_64 one; one of the two is required, and an
 *	                              architecture without an image gets no cells)
 *	  subnetIds: [...]            (tried in order when no type has capacity in one; subnetId:
 *	                              one subnet, after those)
 *	  subnetId, securityGroupIds: [...], instanceProfile
 *	  profile, credentialsFile, noInstanceMetadata: false
 *	  launchTimeoutSeconds: 600
 *	  priceList: true             (on-demand prices from the AWS Price List API, daily; false:
 *	                              the shipped snapshot's; a URL: a private endpoint of it)
 *	pool:                         (standby cells a pod starts in at once: see
 *	                              pool/pool_config.h; absent: none)
 *	metrics:                      (Prometheus' scrape endpoint, GET /metrics; off when absent)
 *	  listen: "127.0.0.1:9464"    (IPv4:PORT, or a port alone for 127.0.0.1; never the
 *	                              streaming server's port)
 */
#include "kiyot.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "providers/local/cellnet.h"
#include "netaddr.h"
#include "fsutil.h"
#include "jfields.h"
#include "log.h"
#include "kube/quantity.h"
#include "sizing/burst.h"
#include "sizing/sizing.h"
#include "strvec.h"
#include "xalloc.h"
#include "yaml.h"

#define CONFIG_MAX (1u << 20)
/* cells.nodePorts holds at most this many ports (each is a rule every cell's packet to the
 * node passes) */
#define NODE_PORTS_MAX 256

/* The cell-agent next to the kiyot binary, else the installed one. */
static char *default_agent(void)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n > 0) {
		char *slash;
		char *cand;

		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			cand = xasprintf("%s/cell-agent", self);
			if (access(cand, X_OK) == 0)
				return cand;
			free(cand);
		}
	}
	return xstrdup("/usr/local/bin/cell-agent");
}

void kiyot_config_defaults(struct kiyot_config *c)
{
	memset(c, 0, sizeof(*c));
	c->socket = xstrdup("/run/kiyot/kiyot.sock");
	c->state_dir = xstrdup("/var/lib/kiyot");
	c->log_level = xstrdup("info");
	c->region = xstrdup("us-east-1");
	c->default_instance_type = xstrdup("");
	c->kubeconfig = xstrdup("");
	c->node_name = xstrdup("");
	c->fallback_runtime_endpoint = xstrdup("");
	c->streaming_address = xstrdup("127.0.0.1:0");
	c->metrics_listen = xstrdup("");
	c->provider = xstrdup("local");
	c->cell_cidr = xstrdup("10.77.0.0/16");
	c->bridge = xstrdup("kiyot0");
	c->agent_path = default_agent();
	c->agent_port = 7443;
	c->restart_backoff_ms = 10000;
	c->reserve_cpu_milli = SIZING_RESERVE_DEFAULT_CPU_MILLI;
	c->reserve_memory_bytes = SIZING_RESERVE_DEFAULT_MEMORY_BYTES;
	c->burst_headroom_percent = BURST_HEADROOM_DEFAULT_PERCENT;
	c->gc_interval_s = 30;
	c->gc_grace_s = 120;
	reg_policy_default(&c->pulls);
}

void kiyot_config_release(struct kiyot_config *c)
{
	free(c->socket);
	free(c->state_dir);
	free(c->log_level);
	free(c->region);
	free(c->default_instance_type);
	free(c->kubeconfig);
	free(c->node_name);
	free(c->fallback_runtime_endpoint);
	free(c->streaming_address);
	free(c->metrics_listen);
	free(c->provider);
	free(c->cell_cidr);
	free(c->bridge);
	free(c->node_ports);
	free(c->agent_path);
	json_decref(c->registries);
	free(c->ec2.region);
	free(c->ec2.endpoint);
	free(c->ec2.image_id);
	free(c->ec2.image_id_arm64);
	free(c->ec2.subnet_id);
	free(c->ec2.instance_profile);
	free(c->ec2.profile);
	free(c->ec2.credentials_file);
	free(c->ec2.price_list_endpoint);
	strv_free(c->ec2.security_group_ids);
	strv_free(c->ec2.subnet_ids);
	free(c->kube_proxy.image);
	free(c->kube_proxy.kubeconfig);
	strv_free(c->kube_proxy.command);
	strv_free(c->kube_proxy.args);
	pool_config_release(&c->pool);
	memset(c, 0, sizeof(*c));
}

/*
 * The readers of settings no plain kind fits, and the checks of the tables below. Each gets
 * the value, where it goes and its path (jfields.h).
 */

/* reserve.cpu: a quantity of CPU, a string ("250m") or a number of cores (0.5). */
static int read_reserve_cpu(const json_t *v, void *dst, const char *path, struct err *err)
{
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	char buf[32], val[64];

	if (json_is_number(v)) {
		snprintf(buf, sizeof(buf), "%g", json_number_value(v));
		s = buf;
	}
	if (!s)
		return err_set(err, EINVAL,
			       "%s: must be a quantity such as \"250m\" or 0.5, not %s", path,
			       jf_value_text(v, val));
	if (quantity_parse_milli(s, dst, err) < 0)
		return err_wrap(err, "%s", path);
	return 0;
}

/* reserve.memory: a quantity of bytes, a string ("64Mi"). */
static int read_reserve_memory(const json_t *v, void *dst, const char *path, struct err *err)
{
	char val[64];

	if (!json_is_string(v))
		return err_set(err, EINVAL, "%s: must be a quantity such as 64Mi, not %s", path,
			       jf_value_text(v, val));
	if (quantity_parse_bytes(json_string_value(v), dst, err) < 0)
		return err_wrap(err, "%s", path);
	return 0;
}

/* cells.nodePorts: ports of the node cells may reach, each a number (TCP) or "PORT/tcp",
 * "PORT/udp". The list replaces the one before. */
static int read_node_ports(const json_t *v, void *dst, const char *path, struct err *err)
{
	struct kiyot_config *c = dst;
	char val[64];
	size_t i;
	json_t *p;

	if (!json_is_array(v))
		return err_set(err, EINVAL,
			       "%s: must be a list of ports (e.g. [5000, \"53/udp\"]), not %s",
			       path, jf_value_text(v, val));
	if (json_array_size(v) > NODE_PORTS_MAX)
		return err_set(err, EINVAL, "%s: %zu ports, at most %d", path, json_array_size(v),
			       NODE_PORTS_MAX);
	free(c->node_ports);
	c->node_ports = xcalloc(json_array_size(v) + 1, sizeof(*c->node_ports));
	c->n_node_ports = 0;
	json_array_foreach ((json_t *)v, i, p) {
		char num[32];
		const char *s = num;

		if (json_is_integer(p))
			snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(p));
		else if (json_is_string(p))
			s = json_string_value(p);
		else
			return err_set(
				err, EINVAL,
				"%s[%zu]: want a port (5000) or a string (\"53/udp\"), not %s",
				path, i, jf_value_text(p, val));
		if (cellnet_parse_port(s, &c->node_ports[c->n_node_ports], err) < 0)
			return err_wrap(err, "%s[%zu]", path, i);
		c->n_node_ports++;
	}
	return 0;
}

/* cells.kubeProxy.kubeconfig: a file on the node, so an absolute path. */
static int check_kube_proxy_kubeconfig(void *obj, const json_t *v, const char *path,
				       struct err *err)
{
	const struct kube_proxy_config *kp = obj;

	(void)v;
	if (kp->kubeconfig[0] && kp->kubeconfig[0] != '/')
		return err_set(err, EINVAL,
			       "%s: \"%s\" must be an absolute path on the node, such as "
			       "/var/lib/kiyot/kube-proxy.kubeconfig",
			       path, kp->kubeconfig);
	return 0;
}

/* pulls: no more downloads from one registry than from all of them. */
static int check_pulls(void *obj, const json_t *v, const char *path, struct err *err)
{
	const struct reg_policy *pol = obj;

	(void)v;
	if (pol->max_per_registry > pol->max_transfers)
		return err_set(err, EINVAL,
			       "%s.maxPerRegistry: %d is more than %s.maxTransfers (%d): lower it "
			       "or raise maxTransfers",
			       path, pol->max_per_registry, path, pol->max_transfers);
	return 0;
}

/* ec2.imageIds: {x86_64: ami-..., arm64: ami-...}; x86_64 must agree with ec2.imageId. */
static int read_ec2_images(const json_t *v, void *dst, const char *path, struct err *err)
{
	struct kiyot_config *c = dst;
	const char *key;
	char val[64];
	json_t *id;

	if (!json_is_object(v))
		return err_set(err, EINVAL,
			       "%s: must be a mapping of architecture to image, e.g. "
			       "{x86_64: ami-..., arm64: ami-...}, not %s",
			       path, jf_value_text(v, val));
	json_object_foreach ((json_t *)v, key, id) {
		bool x86 = strcmp(key, "x86_64") == 0 || strcmp(key, "amd64") == 0;
		bool arm = strcmp(key, "arm64") == 0 || strcmp(key, "aarch64") == 0;
		char **image = x86 ? &c->ec2.image_id : &c->ec2.image_id_arm64;

		if (!x86 && !arm)
			return err_set(err, EINVAL,
				       "%s: \"%s\" is not an architecture; use x86_64 or arm64",
				       path, key);
		if (!json_is_string(id) || !json_string_length(id))
			return err_set(err, EINVAL, "%s.%s: must be an image id (ami-...), not %s",
				       path, key, jf_value_text(id, val));
		if (x86 && *image && strcmp(*image, json_string_value(id)) != 0)
			return err_set(err, EINVAL,
				       "%s.%s \"%s\" is not ec2.imageId \"%s\"; give the x86_64 "
				       "image once",
				       path, key, json_string_value(id), *image);
		free(*image);
		*image = xstrdup(json_string_value(id));
	}
	return 0;
}

/* ec2.priceList: true, false, or the URL of a private endpoint of the Price List. */
static int read_price_list(const json_t *v, void *dst, const char *path, struct err *err)
{
	struct kiyot_config *c = dst;
	const char *url = json_string_value(v);
	char val[64];

	if (json_is_boolean(v)) {
		c->ec2.price_list_off = json_is_false(v);
		return 0;
	}
	if (!url || (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0))
		return err_set(err, EINVAL,
			       "%s: must be true, false or an http:// or https:// URL of a Price "
			       "List endpoint, not %s",
			       path, jf_value_text(v, val));
	free(c->ec2.price_list_endpoint);
	c->ec2.price_list_endpoint = xstrdup(url);
	c->ec2.price_list_off = 0;
	return 0;
}

/* The port of an "IPv4:PORT" address; -1 when it has none. */
static long address_port(const char *a)
{
	const char *colon = strrchr(a, ':');
	char *end;
	long port;

	if (!colon || !colon[1])
		return -1;
	port = strtol(colon + 1, &end, 10);
	return *end || port < 0 || port > 65535 ? -1 : port;
}

/* metrics.listen: where GET /metrics is served, IPv4:PORT; a port alone means 127.0.0.1. */
static int read_metrics_listen(const json_t *v, void *dst, const char *path, struct err *err)
{
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	struct sockaddr_storage ss;
	socklen_t len;
	char *addr, val[64];

	if (json_is_integer(v))
		addr = xasprintf("127.0.0.1:%lld", (long long)json_integer_value(v));
	else if (s && strspn(s, "0123456789") == strlen(s))
		addr = xasprintf("127.0.0.1:%s", s);
	else if (s)
		addr = xstrdup(s);
	else
		return err_set(err, EINVAL, "%s: must be IPv4:PORT or a port, not %s", path,
			       jf_value_text(v, val));
	if (netaddr_parse(addr, &ss, &len, err) < 0 || ss.ss_family != AF_INET ||
	    address_port(addr) < 1) {
		err_set(err, EINVAL,
			"%s: \"%s\" is not IPv4:PORT with a port from 1 to 65535 "
			"(e.g. \"127.0.0.1:9464\", or 9464)",
			path, addr);
		free(addr);
		return -EINVAL;
	}
	free(*(char **)dst);
	*(char **)dst = addr;
	return 0;
}

/* registries: kept as the mapping it is, sent to every cell (regconf.c reads it). */
static int read_registries(const json_t *v, void *dst, const char *path, struct err *err)
{
	char val[64];

	if (!json_is_object(v))
		return err_set(err, EINVAL,
			       "%s: must be a mapping of registry hosts, such as "
			       "{\"10.0.0.1:5000\": {insecure: true}}, not %s",
			       path, jf_value_text(v, val));
	json_decref(*(json_t **)dst);
	*(json_t **)dst = json_incref((json_t *)v);
	return 0;
}

/* pool: the warm pool's section, read by pool_config.c. */
static int read_pool(const json_t *v, void *dst, const char *path, struct err *err)
{
	(void)path;
	return pool_config_load(dst, (json_t *)v, err);
}

/* logLevel: one of the levels log.h knows. */
static int check_log_level(void *obj, const json_t *v, const char *path, struct err *err)
{
	const struct kiyot_config *c = obj;

	(void)v;
	if (log_parse_level(c->log_level) < 0)
		return err_set(err, EINVAL, "%s: \"%s\" is not one of debug, info, warn, error",
			       path, c->log_level);
	return 0;
}

/* nodeName: a DNS subdomain, as a Node's name must be ("" for the host's name). */
static int check_node_name(void *obj, const json_t *v, const char *path, struct err *err)
{
	const char *name = ((const struct kiyot_config *)obj)->node_name;
	size_t n = strlen(name);
	bool ok = n <= 253;

	(void)v;
	for (size_t i = 0; ok && i < n; i++) {
		char ch = name[i];
		bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');

		ok = alnum || ((ch == '-' || ch == '.') && i > 0 && i + 1 < n);
	}
	if (!ok)
		return err_set(err, EINVAL,
			       "%s \"%s\": not a node name (lower-case letters, digits, '-' "
			       "and '.', at most 253, starting and ending with a letter or digit): "
			       "give the name the node's kubelet registers",
			       path, name);
	return 0;
}

/* Across sections: ec2.region and the top-level region (the instance catalog's prices) agree,
 * or the catalog follows ec2.region when the file gives no region; the metrics server and the
 * streaming server do not share a port. */
static int check_config(void *obj, const json_t *doc, const char *path, struct err *err)
{
	struct kiyot_config *c = obj;
	long port = c->metrics_listen[0] ? address_port(c->metrics_listen) : -1;

	(void)path;
	if (c->ec2.region && c->ec2.region[0] && strcmp(c->ec2.region, c->region) != 0) {
		if (json_object_get(doc, "region"))
			return err_set(err, EINVAL,
				       "ec2.region \"%s\" is not region \"%s\", whose instance "
				       "prices sizing uses: set region to %s too, or leave one of "
				       "them out",
				       c->ec2.region, c->region, c->ec2.region);
		free(c->region);
		c->region = xstrdup(c->ec2.region);
	}
	if (port > 0 && port == address_port(c->streaming_address))
		return err_set(err, EINVAL,
			       "metrics.listen: port %ld is the streaming server's "
			       "(streamingAddress %s): give the metrics another port, e.g. 9464",
			       port, c->streaming_address);
	return 0;
}

/*
 * The tables: every setting's key, kind, bounds and destination, section by section, in the
 * order docs/configuration.md lists them. Unknown keys are errors at every level but inside
 * registries, which regconf.c reads.
 */
#define CFG struct kiyot_config

static const struct jf_field reserve_fields[] = {
	{ JF_CUSTOM("cpu", offsetof(CFG, reserve_cpu_milli), read_reserve_cpu) },
	{ JF_CUSTOM("memory", offsetof(CFG, reserve_memory_bytes), read_reserve_memory) },
	JF_END,
};

static const struct jf_field sizing_fields[] = {
	{ JF_INT("burstHeadroomPercent", CFG, burst_headroom_percent, 0,
		 BURST_HEADROOM_MAX_PERCENT) },
	JF_END,
};

static const struct jf_field kube_proxy_fields[] = {
	{ JF_STR("image", struct kube_proxy_config, image), .required = true, .min = 1,
	  .hint = "(e.g. registry.k8s.io/kube-proxy:v1.30.2, the version of the cluster)" },
	{ JF_STR("kubeconfig", struct kube_proxy_config, kubeconfig),
	  .check = check_kube_proxy_kubeconfig },
	{ JF_STRV("command", struct kube_proxy_config, command, n_command, 0) },
	{ JF_STRV("args", struct kube_proxy_config, args, n_args, 0) },
	JF_END,
};

static const struct jf_table kube_proxy_table = {
	.fields = kube_proxy_fields,
	.strict = true,
	.example = "{image: registry.k8s.io/kube-proxy:v1.30.2}",
};

static const struct jf_field cells_fields[] = {
	{ JF_STR("provider", CFG, provider), .hint = "(local or ec2)" },
	{ JF_STR("cidr", CFG, cell_cidr) },
	{ JF_STR("bridge", CFG, bridge) },
	{ JF_STR("agent", CFG, agent_path) },
	{ JF_INT("agentPort", CFG, agent_port, 1, 65534) },
	{ JF_INT("restartBackoffMs", CFG, restart_backoff_ms, 10, 3600000) },
	{ JF_INT("gcIntervalSeconds", CFG, gc_interval_s, 1, 86400) },
	{ JF_INT("gcGraceSeconds", CFG, gc_grace_s, 0, 86400) },
	{ JF_INT("bootTimeoutSeconds", CFG, boot_timeout_s, 1, 86400) },
	{ JF_BOOL("masquerade", CFG, masquerade) },
	{ JF_CUSTOM("nodePorts", 0, read_node_ports) },
	{ JF_OBJECT("kubeProxy", offsetof(CFG, kube_proxy), &kube_proxy_table) },
	JF_END,
};

static const struct jf_field pulls_fields[] = {
	{ JF_INT("minBytes", struct reg_policy, min_bytes, 0, INT64_MAX) },
	{ JF_INT("windowSeconds", struct reg_policy, window_s, 0, 3600) },
	{ JF_INT("deadlineBaseSeconds", struct reg_policy, deadline_base_s, 1, 86400) },
	{ JF_INT("deadlineBytesPerSecond", struct reg_policy, deadline_rate, 1, INT64_MAX) },
	{ JF_INT("maxTransfers", struct reg_policy, max_transfers, 1, 256) },
	{ JF_INT("maxPerRegistry", struct reg_policy, max_per_registry, 1, 256) },
	JF_END,
};

static const struct jf_field ec2_fields[] = {
	{ JF_STR("region", CFG, ec2.region) },
	{ JF_STR("endpoint", CFG, ec2.endpoint) },
	{ JF_STR("imageId", CFG, ec2.image_id) },
	{ JF_CUSTOM("imageIds", 0, read_ec2_images) },
	{ JF_STRV("subnetIds", CFG, ec2.subnet_ids, ec2.n_subnet_ids, 0) },
	{ JF_STR("subnetId", CFG, ec2.subnet_id) },
	{ JF_STRV("securityGroupIds", CFG, ec2.security_group_ids, ec2.n_security_group_ids, 0) },
	{ JF_STR("instanceProfile", CFG, ec2.instance_profile) },
	{ JF_STR("profile", CFG, ec2.profile) },
	{ JF_STR("credentialsFile", CFG, ec2.credentials_file) },
	{ JF_BOOL("noInstanceMetadata", CFG, ec2.no_imds) },
	{ JF_INT("launchTimeoutSeconds", CFG, ec2.launch_timeout_s, 10, 3600) },
	{ JF_CUSTOM("priceList", 0, read_price_list) },
	JF_END,
};

static const struct jf_field metrics_fields[] = {
	{ JF_CUSTOM("listen", offsetof(CFG, metrics_listen), read_metrics_listen), .required = true,
	  .hint = "(e.g. \"127.0.0.1:9464\")" },
	JF_END,
};

static const struct jf_table reserve_table = { .fields = reserve_fields, .strict = true };
static const struct jf_table sizing_table = { .fields = sizing_fields,
					      .strict = true,
					      .example = "{burstHeadroomPercent: 20}" };
static const struct jf_table cells_table = { .fields = cells_fields, .strict = true };
static const struct jf_table pulls_table = { .fields = pulls_fields,
					     .strict = true,
					     .check = check_pulls };
static const struct jf_table ec2_table = { .fields = ec2_fields, .strict = true };
static const struct jf_table metrics_table = { .fields = metrics_fields,
					       .strict = true,
					       .example = "{listen: \"127.0.0.1:9464\"}" };

static const struct jf_field config_fields[] = {
	{ JF_STR("socket", CFG, socket) },
	{ JF_STR("stateDir", CFG, state_dir) },
	{ JF_STR("logLevel", CFG, log_level), .check = check_log_level },
	{ JF_STR("region", CFG, region) },
	{ JF_STR("defaultInstanceType", CFG, default_instance_type) },
	{ JF_STR("fallbackRuntimeEndpoint", CFG, fallback_runtime_endpoint) },
	{ JF_STR("streamingAddress", CFG, streaming_address) },
	{ JF_STR("kubeconfig", CFG, kubeconfig) },
	{ JF_STR("nodeName", CFG, node_name), .check = check_node_name },
	{ JF_OBJECT("reserve", 0, &reserve_table) },
	{ JF_OBJECT("sizing", 0, &sizing_table) },
	{ JF_OBJECT("cells", 0, &cells_table) },
	{ JF_OBJECT("ec2", 0, &ec2_table) },
	{ JF_OBJECT("pulls", offsetof(CFG, pulls), &pulls_table) },
	{ JF_OBJECT("metrics", 0, &metrics_table) },
	{ JF_CUSTOM("pool", offsetof(CFG, pool), read_pool) },
	{ JF_CUSTOM("registries", offsetof(CFG, registries), read_registries) },
	JF_END,
};

static const struct jf_table config_table = {
	.fields = config_fields,
	.strict = true,
	.check = check_config,
};

int kiyot_config_load_file(struct kiyot_config *c, const char *path, struct err *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;

	if (fs_read_file(path, CONFIG_MAX, &text, &len, err) < 0)
		return err_wrap(err, "config");
	return kiyot_config_load_text(c, text, len, path, err);
}

char *kiyot_node_name(const struct kiyot_config *c)
{
	char h[256] = "";

	if (c->node_name && c->node_name[0])
		return xstrdup(c->node_name);
	if (gethostname(h, sizeof(h) - 1) < 0 || !h[0])
		return xstrdup("localhost");
	for (char *p = h; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return xstrdup(h);
}

int kiyot_config_load_text(struct kiyot_config *c, const char *text, size_t len, const char *path,
			   struct err *err)
{
	json_t *doc = NULL;
	char val[64];
	int ret;

	if (len > CONFIG_MAX)
		return err_set(err, EFBIG, "config: %s: larger than %u bytes", path, CONFIG_MAX);
	if (yaml_to_json(text, len, &doc, err) < 0)
		return err_wrap(err, "config: %s", path);
	if (!json_is_object(doc))
		ret = err_set(err, EINVAL, "config %s: must be a mapping of settings, not %s", path,
			      jf_value_text(doc, val));
	else if (jf_read(&config_table, doc, "", c, err) < 0)
		ret = err_wrap(err, "config %s", path);
	else
		ret = 0;
	json_decref(doc);
	return ret;
}
