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
	strv_free(c->ec2.security_group_ids);
	strv_free(c->ec2.subnet_ids);
	free(c->kube_proxy.image);
	free(c->kube_proxy.kubeconfig);
	strv_free(c->kube_proxy.command);
	strv_free(c->kube_proxy.args);
	pool_config_release(&c->pool);
	memset(c, 0, sizeof(*c));
}

/* Sets *dst from a string member; errors name the key. */
static int take_str(json_t *obj, const char *key, const char *path, char **dst, struct err *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (!json_is_string(v))
		return err_set(err, EINVAL, "%s%s: must be a string", path, key);
	free(*dst);
	*dst = xstrdup(json_string_value(v));
	return 0;
}

/* A list of strings, replacing *dst. */
static int take_strv(json_t *obj, const char *key, const char *path, char ***dst, size_t *n,
		     struct err *err)
{
	json_t *l = json_object_get(obj, key), *v;
	struct strvec sv = STRVEC_INIT;
	size_t i;

	if (!l)
		return 0;
	if (!json_is_array(l))
		return err_set(err, EINVAL, "%s%s: must be a list of strings", path, key);
	json_array_foreach (l, i, v)
		if (!json_is_string(v))
			return err_set(err, EINVAL, "%s%s[%zu]: must be a string", path, key, i);
	json_array_foreach (l, i, v)
		strvec_push(&sv, json_string_value(v));
	strv_free(*dst);
	*n = sv.nr;
	*dst = strvec_detach(&sv);
	return 0;
}

static int take_int(json_t *obj, const char *key, const char *path, int64_t lo, int64_t hi,
		    int64_t *dst, struct err *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return err_set(err, EINVAL, "%s%s: must be an integer from %lld to %lld", path, key,
			       (long long)lo, (long long)hi);
	*dst = json_integer_value(v);
	return 0;
}

static int check_keys(json_t *obj, const char *path, const char *const *known, struct err *err)
{
	const char *key;
	json_t *v;

	json_object_foreach (obj, key, v) {
		int ok = 0;

		for (const char *const *k = known; *k; k++)
			if (strcmp(*k, key) == 0)
				ok = 1;
		if (!ok)
			return err_set(err, EINVAL, "%s%s: unknown setting", path, key);
	}
	return 0;
}

static int load_reserve(struct kiyot_config *c, json_t *r, struct err *err)
{
	static const char *const known[] = { "cpu", "memory", NULL };
	json_t *v;

	if (!json_is_object(r))
		return err_set(err, EINVAL, "reserve: must be a mapping");
	if (check_keys(r, "reserve.", known, err) < 0)
		return -err->code;
	if ((v = json_object_get(r, "cpu"))) {
		const char *s = json_is_string(v) ? json_string_value(v) : NULL;
		char buf[32];

		if (json_is_number(v)) {
			snprintf(buf, sizeof(buf), "%g", json_number_value(v));
			s = buf;
		}
		if (!s || quantity_parse_milli(s, &c->reserve_cpu_milli, err) < 0)
			return s ? err_wrap(err, "reserve.cpu")
				 : err_set(err, EINVAL, "reserve.cpu: must be a quantity");
	}
	if ((v = json_object_get(r, "memory"))) {
		if (!json_is_string(v))
			return err_set(err, EINVAL,
				       "reserve.memory: must be a quantity such as 64Mi");
		if (quantity_parse_bytes(json_string_value(v), &c->reserve_memory_bytes, err) < 0)
			return err_wrap(err, "reserve.memory");
	}
	return 0;
}

/* The sizing section: burstHeadroomPercent, what the burst rule adds to the peak it saw. */
static int load_sizing(struct kiyot_config *c, json_t *sz, struct err *err)
{
	static const char *const known[] = { "burstHeadroomPercent", NULL };
	int64_t pct = c->burst_headroom_percent;

	if (!json_is_object(sz))
		return err_set(err, EINVAL, "sizing: must be a mapping (burstHeadroomPercent: 20)");
	if (check_keys(sz, "sizing.", known, err) < 0 ||
	    take_int(sz, "burstHeadroomPercent", "sizing.", 0, BURST_HEADROOM_MAX_PERCENT, &pct,
		     err) < 0)
		return -err->code;
	c->burst_headroom_percent = (int)pct;
	return 0;
}

/* cells.kubeProxy: a kube-proxy unit in every cell, so the pod reaches Service IPs. */
static int load_kube_proxy(struct kiyot_config *c, json_t *kp, struct err *err)
{
	static const char *const known[] = { "image", "kubeconfig", "command", "args", NULL };
	const char *p = "cells.kubeProxy.";

	if (!json_is_object(kp))
		return err_set(err, EINVAL, "cells.kubeProxy: must be a mapping");
	if (check_keys(kp, p, known, err) < 0 ||
	    take_str(kp, "image", p, &c->kube_proxy.image, err) < 0 ||
	    take_str(kp, "kubeconfig", p, &c->kube_proxy.kubeconfig, err) < 0 ||
	    take_strv(kp, "command", p, &c->kube_proxy.command, &c->kube_proxy.n_command, err) <
		    0 ||
	    take_strv(kp, "args", p, &c->kube_proxy.args, &c->kube_proxy.n_args, err) < 0)
		return -err->code;
	if (!c->kube_proxy.image || !c->kube_proxy.image[0])
		return err_set(err, EINVAL,
			       "cells.kubeProxy.image: required (e.g. registry.k8s.io/kube-proxy:"
			       "v1.30.2, the version of the cluster)");
	if (c->kube_proxy.kubeconfig && c->kube_proxy.kubeconfig[0] &&
	    c->kube_proxy.kubeconfig[0] != '/')
		return err_set(err, EINVAL,
			       "cells.kubeProxy.kubeconfig: \"%s\" must be an "
			       "absolute path on the node",
			       c->kube_proxy.kubeconfig);
	return 0;
}

/* cells.nodePorts: ports of the node cells may reach, each a number (TCP) or "PORT/tcp",
 * "PORT/udp". The list replaces the one before. */
static int load_node_ports(struct kiyot_config *c, json_t *v, struct err *err)
{
	size_t i;
	json_t *p;

	if (!json_is_array(v))
		return err_set(
			err, EINVAL,
			"cells.nodePorts: must be a list of ports (e.g. [5000, \"53/udp\"])");
	if (json_array_size(v) > NODE_PORTS_MAX)
		return err_set(err, EINVAL, "cells.nodePorts: %zu ports, at most %d",
			       json_array_size(v), NODE_PORTS_MAX);
	free(c->node_ports);
	c->node_ports = xcalloc(json_array_size(v) + 1, sizeof(*c->node_ports));
	c->n_node_ports = 0;
	json_array_foreach (v, i, p) {
		char num[32];
		const char *s = num;

		if (json_is_integer(p))
			snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(p));
		else if (json_is_string(p))
			s = json_string_value(p);
		else
			return err_set(err, EINVAL,
				       "cells.nodePorts[%zu]: want a port (5000) or a string "
				       "(\"53/udp\")",
				       i);
		if (cellnet_parse_port(s, &c->node_ports[c->n_node_ports], err) < 0)
			return err_wrap(err, "cells.nodePorts[%zu]", i);
		c->n_node_ports++;
	}
	return 0;
}

static int load_cells(struct kiyot_config *c, json_t *cells, struct err *err)
{
	static const char *const known[] = { "provider",
					     "cidr",
					     "bridge",
					     "agent",
					     "agentPort",
					     "restartBackoffMs",
					     "gcIntervalSeconds",
					     "gcGraceSeconds",
					     "bootTimeoutSeconds",
					     "kubeProxy",
					     "masquerade",
					     "nodePorts",
					     NULL };
	int64_t port = c->agent_port, interval = c->gc_interval_s, grace = c->gc_grace_s;
	int64_t boot = c->boot_timeout_s;
	json_t *v;

	if (!json_is_object(cells))
		return err_set(err, EINVAL, "cells: must be a mapping");
	if (check_keys(cells, "cells.", known, err) < 0 ||
	    take_str(cells, "provider", "cells.", &c->provider, err) < 0 ||
	    take_str(cells, "cidr", "cells.", &c->cell_cidr, err) < 0 ||
	    take_str(cells, "bridge", "cells.", &c->bridge, err) < 0 ||
	    take_str(cells, "agent", "cells.", &c->agent_path, err) < 0 ||
	    take_int(cells, "agentPort", "cells.", 1, 65534, &port, err) < 0 ||
	    take_int(cells, "restartBackoffMs", "cells.", 10, 3600000, &c->restart_backoff_ms,
		     err) < 0 ||
	    take_int(cells, "gcIntervalSeconds", "cells.", 1, 86400, &interval, err) < 0 ||
	    take_int(cells, "gcGraceSeconds", "cells.", 0, 86400, &grace, err) < 0 ||
	    take_int(cells, "bootTimeoutSeconds", "cells.", 1, 86400, &boot, err) < 0)
		return -err->code;
	if ((v = json_object_get(cells, "masquerade"))) {
		if (!json_is_boolean(v))
			return err_set(err, EINVAL, "cells.masquerade: must be true or false");
		c->masquerade = json_is_true(v);
	}
	if ((v = json_object_get(cells, "nodePorts")) && load_node_ports(c, v, err) < 0)
		return -err->code;
	if (json_object_get(cells, "kubeProxy") &&
	    load_kube_proxy(c, json_object_get(cells, "kubeProxy"), err) < 0)
		return -err->code;
	c->agent_port = (int)port;
	c->gc_interval_s = (int)interval;
	c->gc_grace_s = (int)grace;
	c->boot_timeout_s = (int)boot;
	return 0;
}

/* The pulls section: how image pulls are bounded, kiyot's own and every cell's. */
static int load_pulls(struct kiyot_config *c, json_t *p, struct err *err)
{
	static const char *const known[] = { "minBytes",
					     "windowSeconds",
					     "deadlineBaseSeconds",
					     "deadlineBytesPerSecond",
					     "maxTransfers",
					     "maxPerRegistry",
					     NULL };
	struct reg_policy *pol = &c->pulls;
	int64_t min = (int64_t)pol->min_bytes, win = pol->window_s, base = pol->deadline_base_s;
	int64_t rate = (int64_t)pol->deadline_rate, max = pol->max_transfers;
	int64_t per = pol->max_per_registry;

	if (!json_is_object(p))
		return err_set(err, EINVAL, "pulls: must be a mapping");
	if (check_keys(p, "pulls.", known, err) < 0 ||
	    take_int(p, "minBytes", "pulls.", 0, INT64_MAX, &min, err) < 0 ||
	    take_int(p, "windowSeconds", "pulls.", 0, 3600, &win, err) < 0 ||
	    take_int(p, "deadlineBaseSeconds", "pulls.", 1, 86400, &base, err) < 0 ||
	    take_int(p, "deadlineBytesPerSecond", "pulls.", 1, INT64_MAX, &rate, err) < 0 ||
	    take_int(p, "maxTransfers", "pulls.", 1, 256, &max, err) < 0 ||
	    take_int(p, "maxPerRegistry", "pulls.", 1, 256, &per, err) < 0)
		return -err->code;
	if (per > max)
		return err_set(err, EINVAL,
			       "pulls.maxPerRegistry: %lld is more than pulls.maxTransfers (%lld)",
			       (long long)per, (long long)max);
	pol->min_bytes = (uint64_t)min;
	pol->window_s = (int)win;
	pol->deadline_base_s = (int)base;
	pol->deadline_rate = (uint64_t)rate;
	pol->max_transfers = (int)max;
	pol->max_per_registry = (int)per;
	return 0;
}

/* ec2.imageIds: {x86_64: ami-..., arm64: ami-...}; x86_64 must agree with ec2.imageId. */
static int load_ec2_images(struct kiyot_config *c, json_t *m, struct err *err)
{
	const char *key;
	json_t *v;

	if (!json_is_object(m))
		return err_set(err, EINVAL,
			       "ec2.imageIds: must be a mapping of architecture to image, e.g. "
			       "{x86_64: ami-..., arm64: ami-...}");
	json_object_foreach (m, key, v) {
		bool x86 = strcmp(key, "x86_64") == 0 || strcmp(key, "amd64") == 0;
		bool arm = strcmp(key, "arm64") == 0 || strcmp(key, "aarch64") == 0;
		char **dst = x86 ? &c->ec2.image_id : &c->ec2.image_id_arm64;

		if (!x86 && !arm)
			return err_set(err, EINVAL,
				       "ec2.imageIds: \"%s\" is not an architecture; use x86_64 or "
				       "arm64",
				       key);
		if (!json_is_string(v) || !json_string_length(v))
			return err_set(err, EINVAL, "ec2.imageIds.%s: must be an image id", key);
		if (x86 && *dst && strcmp(*dst, json_string_value(v)) != 0)
			return err_set(err, EINVAL,
				       "ec2.imageIds.%s \"%s\" is not ec2.imageId \"%s\"; give the "
				       "x86_64 image once",
				       key, json_string_value(v), *dst);
		free(*dst);
		*dst = xstrdup(json_string_value(v));
	}
	return 0;
}

/* The ec2 section: where cells are launched when cells.provider is ec2. */
static int load_ec2(struct kiyot_config *c, json_t *e, struct err *err)
{
	static const char *const known[] = { "region",
					     "endpoint",
					     "imageId",
					     "imageIds",
					     "subnetId",
					     "subnetIds",
					     "securityGroupIds",
					     "instanceProfile",
					     "profile",
					     "credentialsFile",
					     "noInstanceMetadata",
					     "launchTimeoutSeconds",
					     NULL };
	int64_t timeout = c->ec2.launch_timeout_s;
	json_t *v;

	if (!json_is_object(e))
		return err_set(err, EINVAL, "ec2: must be a mapping");
	if (check_keys(e, "ec2.", known, err) < 0 ||
	    take_str(e, "region", "ec2.", &c->ec2.region, err) < 0 ||
	    take_str(e, "endpoint", "ec2.", &c->ec2.endpoint, err) < 0 ||
	    take_str(e, "imageId", "ec2.", &c->ec2.image_id, err) < 0 ||
	    take_str(e, "subnetId", "ec2.", &c->ec2.subnet_id, err) < 0 ||
	    take_str(e, "instanceProfile", "ec2.", &c->ec2.instance_profile, err) < 0 ||
	    take_str(e, "profile", "ec2.", &c->ec2.profile, err) < 0 ||
	    take_str(e, "credentialsFile", "ec2.", &c->ec2.credentials_file, err) < 0 ||
	    take_int(e, "launchTimeoutSeconds", "ec2.", 10, 3600, &timeout, err) < 0)
		return -err->code;
	c->ec2.launch_timeout_s = (int)timeout;
	if ((v = json_object_get(e, "noInstanceMetadata"))) {
		if (!json_is_boolean(v))
			return err_set(err, EINVAL,
				       "ec2.noInstanceMetadata: must be true or false");
		c->ec2.no_imds = json_is_true(v);
	}
	if ((v = json_object_get(e, "imageIds")) && load_ec2_images(c, v, err) < 0)
		return -err->code;
	if (take_strv(e, "subnetIds", "ec2.", &c->ec2.subnet_ids, &c->ec2.n_subnet_ids, err) < 0)
		return -err->code;
	return take_strv(e, "securityGroupIds", "ec2.", &c->ec2.security_group_ids,
			 &c->ec2.n_security_group_ids, err);
}

/* ec2.region and the top-level region (the instance catalog's prices): without a top-level
 * region the catalog follows ec2.region; two different ones are an error naming both. */
static int ec2_region_agrees(struct kiyot_config *c, json_t *doc, struct err *err)
{
	if (!c->ec2.region || !c->ec2.region[0] || strcmp(c->ec2.region, c->region) == 0)
		return 0;
	if (json_object_get(doc, "region"))
		return err_set(err, EINVAL,
			       "ec2.region \"%s\" is not region \"%s\", whose instance prices "
			       "sizing uses: set region to %s too, or leave one of them out",
			       c->ec2.region, c->region, c->ec2.region);
	free(c->region);
	c->region = xstrdup(c->ec2.region);
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

/* The metrics section: where GET /metrics is served. A port alone means 127.0.0.1. */
static int load_metrics(struct kiyot_config *c, json_t *m, struct err *err)
{
	static const char *const known[] = { "listen", NULL };
	json_t *v = json_is_object(m) ? json_object_get(m, "listen") : NULL;
	struct sockaddr_storage ss;
	socklen_t len;
	char *addr;

	if (!json_is_object(m))
		return err_set(err, EINVAL,
			       "metrics: must be a mapping (listen: \"127.0.0.1:9464\")");
	if (check_keys(m, "metrics.", known, err) < 0)
		return -err->code;
	if (!v)
		return err_set(err, EINVAL, "metrics.listen: required (e.g. \"127.0.0.1:9464\")");
	if (json_is_integer(v))
		addr = xasprintf("127.0.0.1:%lld", (long long)json_integer_value(v));
	else if (json_is_string(v) &&
		 strspn(json_string_value(v), "0123456789") == strlen(json_string_value(v)))
		addr = xasprintf("127.0.0.1:%s", json_string_value(v));
	else if (json_is_string(v))
		addr = xstrdup(json_string_value(v));
	else
		return err_set(err, EINVAL, "metrics.listen: must be IPv4:PORT or a port");
	if (netaddr_parse(addr, &ss, &len, err) < 0 || ss.ss_family != AF_INET ||
	    address_port(addr) < 1) {
		err_set(err, EINVAL,
			"metrics.listen: \"%s\" is not IPv4:PORT with a port from 1 to 65535 "
			"(e.g. \"127.0.0.1:9464\", or 9464)",
			addr);
		free(addr);
		return -EINVAL;
	}
	free(c->metrics_listen);
	c->metrics_listen = addr;
	return 0;
}

/* The metrics server and the streaming server cannot share a port. */
static int check_ports(const struct kiyot_config *c, struct err *err)
{
	long port = c->metrics_listen[0] ? address_port(c->metrics_listen) : -1;

	if (port > 0 && port == address_port(c->streaming_address))
		return err_set(err, EINVAL,
			       "metrics.listen: port %ld is the streaming server's "
			       "(streamingAddress %s): give the metrics another port, e.g. 9464",
			       port, c->streaming_address);
	return 0;
}

int kiyot_config_load_file(struct kiyot_config *c, const char *path, struct err *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;

	if (fs_read_file(path, CONFIG_MAX, &text, &len, err) < 0)
		return err_wrap(err, "config");
	return kiyot_config_load_text(c, text, len, path, err);
}

/* nodeName: a DNS subdomain, as a Node's name must be ("" for the host's name). */
static int check_node_name(const char *name, struct err *err)
{
	size_t n = strlen(name);
	bool ok = n <= 253;

	for (size_t i = 0; ok && i < n; i++) {
		char ch = name[i];
		bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');

		ok = alnum || ((ch == '-' || ch == '.') && i > 0 && i + 1 < n);
	}
	if (!ok)
		return err_set(err, EINVAL,
			       "nodeName \"%s\": not a node name (lower-case letters, digits, '-' "
			       "and '.', at most 253, starting and ending with a letter or digit): "
			       "give the name the node's kubelet registers",
			       name);
	return 0;
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
	static const char *const known[] = {
		"socket",
		"stateDir",
		"logLevel",
		"region",
		"defaultInstanceType",
		"reserve",
		"cells",
		"registries",
		"ec2",
		"fallbackRuntimeEndpoint",
		"kubeconfig",
		"nodeName",
		"streamingAddress",
		"pulls",
		"metrics",
		"pool",
		"sizing",
		NULL,
	};
	json_t *doc = NULL, *v;
	int ret = -1;

	if (len > CONFIG_MAX)
		return err_set(err, EFBIG, "config: %s: larger than %u bytes", path, CONFIG_MAX);
	if (yaml_to_json(text, len, &doc, err) < 0)
		return err_wrap(err, "config: %s", path);
	if (!json_is_object(doc)) {
		ret = err_set(err, EINVAL, "config %s: must be a mapping of settings", path);
		goto out;
	}
	if (check_keys(doc, "", known, err) < 0 ||
	    take_str(doc, "socket", "", &c->socket, err) < 0 ||
	    take_str(doc, "stateDir", "", &c->state_dir, err) < 0 ||
	    take_str(doc, "logLevel", "", &c->log_level, err) < 0 ||
	    take_str(doc, "region", "", &c->region, err) < 0 ||
	    take_str(doc, "defaultInstanceType", "", &c->default_instance_type, err) < 0 ||
	    take_str(doc, "fallbackRuntimeEndpoint", "", &c->fallback_runtime_endpoint, err) < 0 ||
	    take_str(doc, "streamingAddress", "127.0.0.1:0", &c->streaming_address, err) < 0 ||
	    take_str(doc, "kubeconfig", "", &c->kubeconfig, err) < 0 ||
	    take_str(doc, "nodeName", "", &c->node_name, err) < 0 ||
	    check_node_name(c->node_name, err) < 0)
		goto wrap;
	if ((v = json_object_get(doc, "reserve")) && load_reserve(c, v, err) < 0)
		goto wrap;
	if ((v = json_object_get(doc, "sizing")) && load_sizing(c, v, err) < 0)
		goto wrap;
	if ((v = json_object_get(doc, "cells")) && load_cells(c, v, err) < 0)
		goto wrap;
	if ((v = json_object_get(doc, "ec2")) &&
	    (load_ec2(c, v, err) < 0 || ec2_region_agrees(c, doc, err) < 0))
		goto wrap;
	if ((v = json_object_get(doc, "pulls")) && load_pulls(c, v, err) < 0)
		goto wrap;
	if ((v = json_object_get(doc, "metrics")) && load_metrics(c, v, err) < 0)
		goto wrap;
	if ((v = json_object_get(doc, "pool")) && pool_config_load(&c->pool, v, err) < 0)
		goto wrap;
	if (check_ports(c, err) < 0)
		goto wrap;
	if ((v = json_object_get(doc, "registries"))) {
		if (!json_is_object(v)) {
			err_set(err, EINVAL, "registries: must be a mapping of registry hosts");
			goto wrap;
		}
		json_decref(c->registries);
		c->registries = json_incref(v);
	}
	if (log_parse_level(c->log_level) < 0) {
		err_set(err, EINVAL, "logLevel: \"%s\" is not one of debug, info, warn, error",
			c->log_level);
		goto wrap;
	}
	ret = 0;
	goto out;
wrap:
	ret = err_wrap(err, "config %s", path);
out:
	json_decref(doc);
	return ret;
}
