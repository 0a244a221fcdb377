/*
 * fuzz_config: kiyot's config file (YAML or JSON) from its text, over the defaults, as
 * `kiyot serve --config` reads it (kiyot_config_load_text). Besides what the sanitizers catch,
 * it checks the loader's promises: a refusal has a message and a negative errno; an accepted
 * config holds every setting, each within the range config.c gives it (ports, intervals,
 * back-off, reserve, a known log level, an absolute kubeconfig for kube-proxy, registries a
 * mapping); and loading the same text again over the result changes nothing.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/kiyot.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *text, size_t len)
{
	fprintf(stderr, "%s\n%.*s\n", what, (int)len, text);
	abort();
}

static int in(int64_t v, int64_t lo, int64_t hi)
{
	return v >= lo && v <= hi;
}

/* Every setting present and within its range. */
static int bounded(const struct kiyot_config *c)
{
	const char *const strs[] = { c->socket,
				     c->state_dir,
				     c->log_level,
				     c->region,
				     c->default_instance_type,
				     c->provider,
				     c->cell_cidr,
				     c->bridge,
				     c->agent_path,
				     c->kubeconfig,
				     c->fallback_runtime_endpoint,
				     c->streaming_address };

	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		if (!strs[i])
			return 0;
	return in(c->agent_port, 1, 65535) && in(c->restart_backoff_ms, 10, 3600000) &&
	       in(c->gc_interval_s, 1, 86400) && in(c->gc_grace_s, 0, 86400) &&
	       c->reserve_cpu_milli >= 0 && c->reserve_memory_bytes >= 0 &&
	       (c->ec2.launch_timeout_s == 0 || in(c->ec2.launch_timeout_s, 10, 3600)) &&
	       log_parse_level(c->log_level) >= 0 &&
	       (!c->registries || json_is_object(c->registries)) &&
	       (!c->kube_proxy.image || c->kube_proxy.image[0]) &&
	       (!c->kube_proxy.kubeconfig || !c->kube_proxy.kubeconfig[0] ||
		c->kube_proxy.kubeconfig[0] == '/');
}

/* The scalar settings, for comparing two loads. */
static int same(const struct kiyot_config *a, const struct kiyot_config *b)
{
	return !strcmp(a->socket, b->socket) && !strcmp(a->state_dir, b->state_dir) &&
	       !strcmp(a->log_level, b->log_level) && !strcmp(a->provider, b->provider) &&
	       !strcmp(a->cell_cidr, b->cell_cidr) && a->agent_port == b->agent_port &&
	       a->restart_backoff_ms == b->restart_backoff_ms &&
	       a->reserve_cpu_milli == b->reserve_cpu_milli &&
	       a->reserve_memory_bytes == b->reserve_memory_bytes &&
	       a->gc_interval_s == b->gc_interval_s && a->gc_grace_s == b->gc_grace_s &&
	       a->masquerade == b->masquerade &&
	       a->kube_proxy.n_command == b->kube_proxy.n_command &&
	       a->kube_proxy.n_args == b->kube_proxy.n_args &&
	       a->ec2.n_security_group_ids == b->ec2.n_security_group_ids &&
	       a->ec2.launch_timeout_s == b->ec2.launch_timeout_s &&
	       ((!a->registries && !b->registries) || json_equal(a->registries, b->registries));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct kiyot_config c, d;
	struct err err = ERR_INIT;
	int ret;

	kiyot_config_defaults(&c);
	ret = kiyot_config_load_text(&c, text, size, "fuzz.yaml", &err);
	if (ret < 0) {
		if (ret != -err.code || !err.msg[0] || !strstr(err.msg, "fuzz.yaml"))
			fail("refused without a message naming the file, or an errno", text, size);
	} else {
		if (!bounded(&c))
			fail("accepted a setting out of its range", text, size);
		kiyot_config_defaults(&d);
		if (kiyot_config_load_text(&d, text, size, "fuzz.yaml", &err) < 0 ||
		    kiyot_config_load_text(&d, text, size, "fuzz.yaml", &err) < 0 || !same(&c, &d))
			fail("loading it again over itself changed it", text, size);
		kiyot_config_release(&d);
	}
	kiyot_config_release(&c);
	return 0;
}
