/*
 * Unit tests for kiyot/cri_validate: what a kubelet (and the CRI validation suite) sends
 * passes; what is past Kubernetes' limits, or large enough to hurt, is refused naming the field.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cri_api.pb-c.h"
#include "cri/cri_validate.h"
#include "xalloc.h"

/* A string of n copies of c (heap). */
static char *rep(char c, size_t n)
{
	char *s = xmalloc(n + 1);

	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* The entries of a map, built on the heap; every map entry of CRI has this layout. */
struct kv {
	ProtobufCMessage base;
	char *key;
	char *value;
};

static void **map_of(const ProtobufCMessageDescriptor *d, const char *const *kv, size_t n)
{
	void **m = xcalloc(n + 1, sizeof(*m));

	for (size_t i = 0; i < n; i++) {
		struct kv *e = xcalloc(1, d->sizeof_message);

		protobuf_c_message_init(d, e);
		e->key = (char *)kv[2 * i];
		e->value = (char *)kv[2 * i + 1];
		m[i] = e;
	}
	return m;
}

static void map_free(void **m, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(m[i]);
	free(m);
}

/* A pod sandbox as a v1.26 kubelet sends it, with a long (but valid) pod name. */
struct pod {
	Runtime__V1__RunPodSandboxRequest req;
	Runtime__V1__PodSandboxConfig cfg;
	Runtime__V1__PodSandboxMetadata md;
	Runtime__V1__DNSConfig dns;
	Runtime__V1__PortMapping pm[2], *pms[2];
	Runtime__V1__LinuxPodSandboxConfig lx;
	Runtime__V1__LinuxContainerResources res;
	char *servers[3], *searches[6], *options[1];
	char name[120];
};

static const char *const pod_labels[] = {
	"app",
	"web",
	"app.kubernetes.io/name",
	"web-frontend",
	"io.kubernetes.pod.name",
	NULL, /* the pod's name, set below */
	"io.kubernetes.pod.namespace",
	"kube-system",
	"io.kubernetes.pod.uid",
	"4b4ab27c-52f5-4b8e-9d8f-0e4f3d1e6a9c",
};
static const char *const pod_annotations[] = {
	"kubernetes.io/config.seen",
	"2024-05-01T10:00:00.123456789Z",
	"kubernetes.io/config.source",
	"api",
	"kubectl.kubernetes.io/last-applied-configuration",
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}",
	"kubernetes.io/target-runtime",
	"kiyot",
};

static void pod_init(struct pod *p)
{
	const char *labels[ARRAY_SIZE(pod_labels)];

	memset(p, 0, sizeof(*p));
	runtime__v1__run_pod_sandbox_request__init(&p->req);
	runtime__v1__pod_sandbox_config__init(&p->cfg);
	runtime__v1__pod_sandbox_metadata__init(&p->md);
	runtime__v1__dnsconfig__init(&p->dns);
	runtime__v1__linux_pod_sandbox_config__init(&p->lx);
	runtime__v1__linux_container_resources__init(&p->res);
	snprintf(p->name, sizeof(p->name), "web-frontend-%s",
		 "7d9f8b6c5d-x2x4z.a-long-name-that-is-still-a-subdomain.and-longer-than-63");
	p->md.name = p->name;
	p->md.namespace_ = "kube-system";
	p->md.uid = "4b4ab27c-52f5-4b8e-9d8f-0e4f3d1e6a9c";
	p->cfg.metadata = &p->md;
	p->cfg.hostname = "web-frontend-7d9f8b6c5d-x2x4z";
	p->cfg.log_directory = "/var/log/pods/kube-system_web_4b4ab27c-52f5-4b8e-9d8f-0e4f3d1e6a9c";
	p->servers[0] = "10.96.0.10";
	p->servers[1] = "fd00::10";
	p->servers[2] = "8.8.8.8";
	p->searches[0] = "kube-system.svc.cluster.local";
	p->searches[1] = "svc.cluster.local";
	p->searches[2] = "cluster.local";
	p->searches[3] = "ec2.internal";
	p->searches[4] = "example.com";
	p->searches[5] = "corp.example.com";
	p->options[0] = "ndots:5";
	p->dns.servers = p->servers;
	p->dns.n_servers = 3;
	p->dns.searches = p->searches;
	p->dns.n_searches = 6;
	p->dns.options = p->options;
	p->dns.n_options = 1;
	p->cfg.dns_config = &p->dns;
	for (int i = 0; i < 2; i++) {
		runtime__v1__port_mapping__init(&p->pm[i]);
		p->pms[i] = &p->pm[i];
	}
	p->pm[0].container_port = 8080;
	p->pm[1].container_port = 53;
	p->pm[1].host_port = 5353;
	p->pm[1].protocol = RUNTIME__V1__PROTOCOL__UDP;
	p->pm[1].host_ip = "127.0.0.1";
	p->cfg.port_mappings = p->pms;
	p->cfg.n_port_mappings = 2;
	memcpy(labels, pod_labels, sizeof(labels));
	labels[5] = p->name;
	p->cfg.labels = (void *)map_of(&runtime__v1__pod_sandbox_config__labels_entry__descriptor,
				       labels, ARRAY_SIZE(labels) / 2);
	p->cfg.n_labels = ARRAY_SIZE(labels) / 2;
	p->cfg.annotations =
		(void *)map_of(&runtime__v1__pod_sandbox_config__annotations_entry__descriptor,
			       pod_annotations, ARRAY_SIZE(pod_annotations) / 2);
	p->cfg.n_annotations = ARRAY_SIZE(pod_annotations) / 2;
	p->res.cpu_period = 100000;
	p->res.cpu_quota = 50000;
	p->res.cpu_shares = 512;
	p->res.memory_limit_in_bytes = 256 << 20;
	p->res.oom_score_adj = -998;
	p->lx.resources = &p->res;
	p->lx.cgroup_parent = "/kubepods/burstable/pod4b4ab27c-52f5-4b8e-9d8f-0e4f3d1e6a9c";
	p->cfg.linux = &p->lx;
	p->req.config = &p->cfg;
}

static void pod_release(struct pod *p)
{
	map_free((void **)p->cfg.labels, p->cfg.n_labels);
	map_free((void **)p->cfg.annotations, p->cfg.n_annotations);
}

/* The request must pass. */
static void assert_passes(const ProtobufCMessage *m)
{
	struct err err = ERR_INIT;
	int ret = cri_validate(m, &err);

	if (ret != 0)
		fail_msg("refused: %s", err.msg);
}

/* The request must be refused with EINVAL, a message that starts with field, holds want too,
 * and fits the error (never a whole hostile value). */
static void assert_refused(const ProtobufCMessage *m, const char *field, const char *want)
{
	struct err err = ERR_INIT;
	int ret = cri_validate(m, &err);

	if (ret != -EINVAL)
		fail_msg("%s: got %d (%s), want -EINVAL", field, ret, err.msg);
	if (strncmp(err.msg, field, strlen(field)) != 0)
		fail_msg("\"%s\" does not start with %s", err.msg, field);
	if (want && !strstr(err.msg, want))
		fail_msg("\"%s\" lacks \"%s\"", err.msg, want);
	assert_null(strchr(err.msg, '\n'));
}

static void test_cri_validate__kubelet_sandbox_passes(void **state)
{
	struct pod p;

	(void)state;
	pod_init(&p);
	assert_passes(&p.req.base);
	pod_release(&p);
}

/* The largest values Kubernetes allows pass. */
static void test_cri_validate__limits_themselves_pass(void **state)
{
	_cleanup_free_ char *name = rep('a', 253), *ns = rep('b', 63), *uid = rep('c', 128);
	_cleanup_free_ char *val = rep('v', 63), *big = rep('x', 256 * 1024 - 40);
	_cleanup_free_ char *host = rep('h', 64), *key = NULL;
	const char *kv[] = { NULL, val, "io.kubernetes.pod.name", name };
	const char *ann[] = { "example.com/big", big };
	struct pod p;

	(void)state;
	pod_init(&p);
	for (size_t i = 61; i < 253; i += 62)
		name[i] = '.';
	kv[0] = key = xasprintf("%s/%s", name, val);
	pod_release(&p);
	p.md.name = name;
	p.md.namespace_ = ns;
	p.md.uid = uid;
	p.cfg.hostname = host;
	p.cfg.labels =
		(void *)map_of(&runtime__v1__pod_sandbox_config__labels_entry__descriptor, kv, 2);
	p.cfg.n_labels = 2;
	p.cfg.annotations = (void *)map_of(
		&runtime__v1__pod_sandbox_config__annotations_entry__descriptor, ann, 1);
	p.cfg.n_annotations = 1;
	p.pm[0].host_port = 65535;
	p.pm[0].container_port = 65535;
	p.pm[0].protocol = RUNTIME__V1__PROTOCOL__SCTP;
	assert_passes(&p.req.base);
	pod_release(&p);
}

/* What the CRI validation suite (critest v1.26) names its pods and containers. */
static void test_cri_validate__critest_names_pass(void **state)
{
	Runtime__V1__CreateContainerRequest cr = RUNTIME__V1__CREATE_CONTAINER_REQUEST__INIT;
	Runtime__V1__ContainerConfig cc = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	Runtime__V1__ContainerMetadata cm = RUNTIME__V1__CONTAINER_METADATA__INIT;
	Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
	struct pod p;

	(void)state;
	pod_init(&p);
	p.md.name = "create-PodSandbox-for-container-5a2a0c4e-2f3b-4d3c-9a6e-2b7f0d8e1c3a";
	p.md.namespace_ = "cri-test-namespace5a2a0c4e-2f3b-4d3c-9a6e-2b7f0d8e1c3a";
	p.md.uid = "cri-test-uid5a2a0c4e-2f3b-4d3c-9a6e-2b7f0d8e1c3a";
	assert_passes(&p.req.base);
	cm.name = "container-with-SupplementalGroups-and-predefined-group-image-test-"
		  "5a2a0c4e-2f3b-4d3c-9a6e-2b7f0d8e1c3a";
	img.image = "registry.k8s.io/e2e-test-images/busybox:1.29-2";
	cc.metadata = &cm;
	cc.image = &img;
	cc.log_path = "container-with-SupplementalGroups/0.log";
	cr.pod_sandbox_id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	cr.config = &cc;
	assert_passes(&cr.base);
	pod_release(&p);
}

/* One change to the kubelet's pod, and the field a refusal must name. */
struct sandbox_case {
	const char *field, *want;
	void (*change)(struct pod *p, char **keep);
};

static void huge_name(struct pod *p, char **keep)
{
	p->md.name = *keep = rep('a', 1 << 20);
}
static void name_underscore(struct pod *p, char **keep)
{
	(void)keep;
	p->md.name = "web_1";
}
static void name_254(struct pod *p, char **keep)
{
	p->md.name = *keep = rep('a', 254);
	for (size_t i = 60; i < 254; i += 61)
		(*keep)[i] = '.';
}
static void ns_64(struct pod *p, char **keep)
{
	p->md.namespace_ = *keep = rep('n', 64);
}
static void ns_dot(struct pod *p, char **keep)
{
	(void)keep;
	p->md.namespace_ = "kube.system";
}
static void uid_slash(struct pod *p, char **keep)
{
	(void)keep;
	p->md.uid = "../../etc";
}
static void uid_129(struct pod *p, char **keep)
{
	p->md.uid = *keep = rep('u', 129);
}
static void labels_set(struct pod *p, const char *k, const char *v)
{
	const char *kv[] = { k, v };

	map_free((void **)p->cfg.labels, p->cfg.n_labels);
	p->cfg.labels =
		(void *)map_of(&runtime__v1__pod_sandbox_config__labels_entry__descriptor, kv, 1);
	p->cfg.n_labels = 1;
}
static void label_key_space(struct pod *p, char **keep)
{
	(void)keep;
	labels_set(p, "bad key!", "x");
}
static void label_key_upper_prefix(struct pod *p, char **keep)
{
	(void)keep;
	labels_set(p, "Example.com/app", "x");
}
static void label_key_64(struct pod *p, char **keep)
{
	*keep = rep('k', 64);
	labels_set(p, *keep, "x");
}
static void label_value_64(struct pod *p, char **keep)
{
	*keep = rep('v', 64);
	labels_set(p, "app", *keep);
}
static void label_value_dash(struct pod *p, char **keep)
{
	(void)keep;
	labels_set(p, "app", "-web");
}
static void label_pod_name_254(struct pod *p, char **keep)
{
	*keep = rep('p', 254);
	labels_set(p, "io.kubernetes.pod.name", *keep);
}
static void annotations_300k(struct pod *p, char **keep)
{
	const char *kv[] = { "example.com/a", NULL, "example.com/b", NULL };

	*keep = rep('x', 150 * 1024);
	kv[1] = kv[3] = *keep;
	map_free((void **)p->cfg.annotations, p->cfg.n_annotations);
	p->cfg.annotations = (void *)map_of(
		&runtime__v1__pod_sandbox_config__annotations_entry__descriptor, kv, 2);
	p->cfg.n_annotations = 2;
}
static void annotation_key_bad(struct pod *p, char **keep)
{
	const char *kv[] = { "a/b/c", "x" };

	(void)keep;
	map_free((void **)p->cfg.annotations, p->cfg.n_annotations);
	p->cfg.annotations = (void *)map_of(
		&runtime__v1__pod_sandbox_config__annotations_entry__descriptor, kv, 1);
	p->cfg.n_annotations = 1;
}
static void hostname_65(struct pod *p, char **keep)
{
	p->cfg.hostname = *keep = rep('h', 65);
}
static void hostname_space(struct pod *p, char **keep)
{
	(void)keep;
	p->cfg.hostname = "web 1";
}
static void logdir_relative(struct pod *p, char **keep)
{
	(void)keep;
	p->cfg.log_directory = "var/log/pods/x";
}
static void logdir_dotdot(struct pod *p, char **keep)
{
	(void)keep;
	p->cfg.log_directory = "/var/log/pods/../../etc";
}
static void dns_4_servers(struct pod *p, char **keep)
{
	static char *four[] = { "1.1.1.1", "1.0.0.1", "8.8.8.8", "8.8.4.4" };

	(void)keep;
	p->dns.servers = four;
	p->dns.n_servers = 4;
}
static void dns_search_chars(struct pod *p, char **keep)
{
	static char *s[10];

	*keep = rep('d', 250);
	for (int i = 0; i < 10; i++)
		s[i] = *keep;
	p->dns.searches = s;
	p->dns.n_searches = 10;
}
static void port_container_0(struct pod *p, char **keep)
{
	(void)keep;
	p->pm[0].container_port = 0;
}
static void port_container_70000(struct pod *p, char **keep)
{
	(void)keep;
	p->pm[0].container_port = 70000;
}
static void port_host_negative(struct pod *p, char **keep)
{
	(void)keep;
	p->pm[1].host_port = -1;
}
static void port_protocol_7(struct pod *p, char **keep)
{
	(void)keep;
	p->pm[1].protocol = 7;
}
static void port_host_ip(struct pod *p, char **keep)
{
	(void)keep;
	p->pm[1].host_ip = "localhost";
}
static void sysctl_value_big(struct pod *p, char **keep)
{
	const char *kv[] = { "net.core.somaxconn", NULL };

	*keep = rep('1', 5000);
	kv[1] = *keep;
	p->lx.sysctls = (void *)map_of(
		&runtime__v1__linux_pod_sandbox_config__sysctls_entry__descriptor, kv, 1);
	p->lx.n_sysctls = 1;
}
static void sysctl_key_newline(struct pod *p, char **keep)
{
	const char *kv[] = { "kernel.panic\nkernel.x", NULL };

	*keep = rep('1', 5000);
	kv[1] = *keep;
	p->lx.sysctls = (void *)map_of(
		&runtime__v1__linux_pod_sandbox_config__sysctls_entry__descriptor, kv, 1);
	p->lx.n_sysctls = 1;
}
static void shares_1(struct pod *p, char **keep)
{
	(void)keep;
	p->res.cpu_shares = 1;
}
static void whole_config_5m(struct pod *p, char **keep)
{
	static Runtime__V1__WindowsPodSandboxConfig w =
		RUNTIME__V1__WINDOWS_POD_SANDBOX_CONFIG__INIT;
	static Runtime__V1__WindowsSandboxSecurityContext sc =
		RUNTIME__V1__WINDOWS_SANDBOX_SECURITY_CONTEXT__INIT;

	sc.credential_spec = *keep = rep('w', 5 << 20);
	w.security_context = &sc;
	p->cfg.windows = &w;
}

static const struct sandbox_case sandbox_cases[] = {
	{ "config.metadata.name", "1048576 bytes", huge_name },
	{ "config.metadata.name", "DNS-1123 subdomain", name_underscore },
	{ "config.metadata.name", "254 bytes", name_254 },
	{ "config.metadata.namespace", "DNS-1123 label", ns_64 },
	{ "config.metadata.namespace", "DNS-1123 label", ns_dot },
	{ "config.metadata.uid", "no spaces or '/'", uid_slash },
	{ "config.metadata.uid", "129 bytes", uid_129 },
	{ "config.labels", "\"bad key!\" is not a label key", label_key_space },
	{ "config.labels", "not a label key", label_key_upper_prefix },
	{ "config.labels", "not a label key", label_key_64 },
	{ "config.labels[\"app\"]", "not a label value", label_value_64 },
	{ "config.labels[\"app\"]", "not a label value", label_value_dash },
	{ "config.labels[\"io.kubernetes.pod.name\"]", "at most 253", label_pod_name_254 },
	{ "config.annotations", "at most 266240", annotations_300k },
	{ "config.annotations", "not an annotation key", annotation_key_bad },
	{ "config.hostname", "not a host name", hostname_65 },
	{ "config.hostname", "not a host name", hostname_space },
	{ "config.log_directory", "not an absolute path", logdir_relative },
	{ "config.log_directory", "\"..\"", logdir_dotdot },
	{ "config.dns_config.servers", "4 entries; at most 3", dns_4_servers },
	{ "config.dns_config.searches", "at most 2048", dns_search_chars },
	{ "config.port_mappings[0].container_port", "0 is not a port", port_container_0 },
	{ "config.port_mappings[0].container_port", "70000", port_container_70000 },
	{ "config.port_mappings[1].host_port", "-1 is not a port", port_host_negative },
	{ "config.port_mappings[1].protocol", "7 is not TCP", port_protocol_7 },
	{ "config.port_mappings[1].host_ip", "not an IP address", port_host_ip },
	{ "config.linux.sysctls[\"net.core.somaxconn\"]", "5000 bytes", sysctl_value_big },
	{ "config.linux.sysctls[\"kernel.panic\\x0akernel.x\"]", "5000 bytes", sysctl_key_newline },
	{ "config.linux.resources.cpu_shares", "2-262144", shares_1 },
	{ "config", "bytes packed; at most 4194304", whole_config_5m },
};

static void test_cri_validate__sandbox_refusals_name_the_field(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(sandbox_cases); i++) {
		struct pod p;
		char *keep = NULL;

		pod_init(&p);
		sandbox_cases[i].change(&p, &keep);
		assert_refused(&p.req.base, sandbox_cases[i].field, sandbox_cases[i].want);
		free(keep);
		pod_release(&p);
		free(p.lx.sysctls ? p.lx.sysctls[0] : NULL);
		free(p.lx.sysctls);
	}
}

/* PullImage's sandbox config is checked like RunPodSandbox's, and named as its own field. */
static void test_cri_validate__pull_image(void **state)
{
	Runtime__V1__PullImageRequest r = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
	Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
	Runtime__V1__AuthConfig auth = RUNTIME__V1__AUTH_CONFIG__INIT;
	_cleanup_free_ char *long_ref = rep('a', 521), *token = rep('t', 16 * 1024 + 1);
	struct pod p;

	(void)state;
	pod_init(&p);
	img.image = "registry.example.com:5000/team/app@sha256:"
		    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	r.image = &img;
	r.auth = &auth;
	auth.username = "user";
	auth.password = "a JWT of a few KiB would do";
	r.sandbox_config = &p.cfg;
	assert_passes(&r.base);
	img.image = long_ref;
	assert_refused(&r.base, "image.image", "521 bytes");
	img.image = "busybox\n:latest";
	assert_refused(&r.base, "image.image", "\\x0a");
	img.image = "busybox";
	auth.registry_token = token;
	assert_refused(&r.base, "auth.registry_token", "16385 bytes");
	auth.registry_token = "";
	p.md.name = "Not_A_Name";
	assert_refused(&r.base, "sandbox_config.metadata.name", "DNS-1123");
	pod_release(&p);
}

/* A container as the kubelet creates it, to change one field of. */
struct ctr {
	Runtime__V1__CreateContainerRequest req;
	Runtime__V1__ContainerConfig cfg;
	Runtime__V1__ContainerMetadata md;
	Runtime__V1__ImageSpec img;
	Runtime__V1__LinuxContainerConfig lx;
	Runtime__V1__LinuxContainerResources res;
	Runtime__V1__KeyValue env, *envs[1];
	char *cmd[2];
};

static void ctr_init(struct ctr *c)
{
	memset(c, 0, sizeof(*c));
	runtime__v1__create_container_request__init(&c->req);
	runtime__v1__container_config__init(&c->cfg);
	runtime__v1__container_metadata__init(&c->md);
	runtime__v1__image_spec__init(&c->img);
	runtime__v1__linux_container_config__init(&c->lx);
	runtime__v1__linux_container_resources__init(&c->res);
	runtime__v1__key_value__init(&c->env);
	c->md.name = "web";
	c->img.image = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	c->cmd[0] = "/bin/sh";
	c->cmd[1] = "-c";
	c->cfg.command = c->cmd;
	c->cfg.n_command = 2;
	c->env.key = "KUBERNETES_SERVICE_HOST";
	c->env.value = "10.96.0.1";
	c->envs[0] = &c->env;
	c->cfg.envs = c->envs;
	c->cfg.n_envs = 1;
	c->cfg.log_path = "web/0.log";
	c->res.cpu_period = 100000;
	c->res.cpu_quota = 1000;
	c->res.cpu_shares = 2;
	c->res.memory_limit_in_bytes = 64 << 20;
	c->res.memory_swap_limit_in_bytes = 64 << 20;
	c->res.oom_score_adj = 1000;
	c->lx.resources = &c->res;
	c->cfg.linux = &c->lx;
	c->cfg.metadata = &c->md;
	c->cfg.image = &c->img;
	c->req.config = &c->cfg;
	c->req.pod_sandbox_id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
}

static void test_cri_validate__container_refusals_name_the_field(void **state)
{
	_cleanup_free_ char *long_name = rep('c', 254), *arg = rep('a', 128 * 1024 + 1);
	_cleanup_free_ char *half = rep('a', 100 * 1024);
	char *many[21];
	struct ctr c;

	(void)state;
	ctr_init(&c);
	assert_passes(&c.req.base);
	/* what the CRI validation suite names containers (built from a profile's path) */
	c.md.name = "seccomp-container-localhost--tmp-seccomp-tests2581507042-block-chmod.json";
	assert_passes(&c.req.base);
	c.md.name = "web_1";
	assert_passes(&c.req.base);
	c.md.name = "a/b";
	assert_refused(&c.req.base, "config.metadata.name", "not a container name");
	c.md.name = ".hidden";
	assert_refused(&c.req.base, "config.metadata.name", "not a container name");
	c.md.name = "tab\there";
	assert_refused(&c.req.base, "config.metadata.name", "not a container name");
	c.md.name = long_name;
	assert_refused(&c.req.base, "config.metadata.name", "254 bytes");
	ctr_init(&c);
	c.req.pod_sandbox_id = "";
	assert_refused(&c.req.base, "pod_sandbox_id", "required");
	c.req.pod_sandbox_id = "../sandbox";
	assert_refused(&c.req.base, "pod_sandbox_id", "is not an id");
	ctr_init(&c);
	c.img.image = "busy box";
	assert_refused(&c.req.base, "config.image.image", "not an image reference");
	ctr_init(&c);
	c.cmd[1] = arg;
	assert_refused(&c.req.base, "config.command[1]", "131073 bytes");
	for (size_t i = 0; i < ARRAY_SIZE(many); i++)
		many[i] = half;
	c.cmd[1] = "-c";
	c.cfg.args = many;
	c.cfg.n_args = ARRAY_SIZE(many);
	assert_refused(&c.req.base, "config.command, config.args and config.envs",
		       "at most 2097152");
	ctr_init(&c);
	c.env.key = "A=B";
	assert_refused(&c.req.base, "config.envs[0].key", "no '='");
	c.env.key = "";
	assert_refused(&c.req.base, "config.envs[0].key", "not empty");
	ctr_init(&c);
	c.cfg.log_path = "../../../etc/cron.d/x";
	assert_refused(&c.req.base, "config.log_path", "\"..\"");
	ctr_init(&c);
	c.cfg.n_mounts = 1025;
	assert_refused(&c.req.base, "config.mounts", "1025 entries");
	c.cfg.n_mounts = 0;
	c.res.memory_limit_in_bytes = 1 << 20;
	assert_refused(&c.req.base, "config.linux.resources.memory_limit_in_bytes", "6 MiB");
	c.res.memory_limit_in_bytes = 64 << 20;
	c.res.memory_swap_limit_in_bytes = 32 << 20;
	assert_refused(&c.req.base, "config.linux.resources.memory_swap_limit_in_bytes",
		       "at least memory_limit_in_bytes");
	c.res.memory_swap_limit_in_bytes = -1;
	c.res.oom_score_adj = 1001;
	assert_refused(&c.req.base, "config.linux.resources.oom_score_adj", "-1000-1000");
}

/* UpdateContainerResources: what the kernel would refuse is INVALID_ARGUMENT here, naming it. */
static void test_cri_validate__update_resources(void **state)
{
	Runtime__V1__UpdateContainerResourcesRequest r =
		RUNTIME__V1__UPDATE_CONTAINER_RESOURCES_REQUEST__INIT;
	Runtime__V1__LinuxContainerResources res = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;

	(void)state;
	r.container_id = "0123456789abcdef";
	r.linux = &res;
	res.cpu_period = 100000;
	res.cpu_quota = 200000;
	res.cpu_shares = 1024;
	res.memory_limit_in_bytes = 512 << 20;
	assert_passes(&r.base);
	res.cpu_quota = -1;
	assert_passes(&r.base);
	res.cpu_shares = -5;
	assert_refused(&r.base, "linux.cpu_shares", "-5");
	res.cpu_shares = 1 << 20;
	assert_refused(&r.base, "linux.cpu_shares", "2-262144");
	res.cpu_shares = 1024;
	res.cpu_quota = INT64_MAX;
	assert_refused(&r.base, "linux.cpu_quota", "microseconds");
	res.cpu_quota = 999;
	assert_refused(&r.base, "linux.cpu_quota", "999");
	res.cpu_quota = 200000;
	res.cpu_period = 999;
	assert_refused(&r.base, "linux.cpu_period", "1000-1000000");
	res.cpu_period = 100000;
	res.memory_limit_in_bytes = -1;
	assert_refused(&r.base, "linux.memory_limit_in_bytes", "0 (unset) or more");
	res.memory_limit_in_bytes = 4096;
	assert_refused(&r.base, "linux.memory_limit_in_bytes", "at least 6 MiB");
	res.memory_limit_in_bytes = 0;
	assert_passes(&r.base);
	r.container_id = "";
	assert_refused(&r.base, "container_id", "required");
}

/* The calls that name a container or sandbox by id and carry a command. */
static void test_cri_validate__exec_attach_port_forward(void **state)
{
	Runtime__V1__ExecSyncRequest es = RUNTIME__V1__EXEC_SYNC_REQUEST__INIT;
	Runtime__V1__ExecRequest ex = RUNTIME__V1__EXEC_REQUEST__INIT;
	Runtime__V1__AttachRequest at = RUNTIME__V1__ATTACH_REQUEST__INIT;
	Runtime__V1__PortForwardRequest pf = RUNTIME__V1__PORT_FORWARD_REQUEST__INIT;
	_cleanup_free_ char *huge_id = rep('f', 1 << 20), *big = rep('b', 120 * 1024);
	_cleanup_free_ int32_t *ports = xcalloc(65536, sizeof(*ports));
	char *cmd[20], *ok[] = { "cat", "/etc/hostname" };

	(void)state;
	es.container_id = ex.container_id = at.container_id = "abc123";
	es.cmd = ex.cmd = ok;
	es.n_cmd = ex.n_cmd = 2;
	es.timeout = INT64_MAX;
	pf.pod_sandbox_id = "abc123";
	pf.port = ports;
	pf.n_port = 65535;
	assert_passes(&es.base);
	assert_passes(&ex.base);
	assert_passes(&at.base);
	assert_passes(&pf.base);
	es.container_id = ex.container_id = at.container_id = huge_id;
	assert_refused(&es.base, "container_id", "1048576 bytes");
	assert_refused(&ex.base, "container_id", "is not an id");
	assert_refused(&at.base, "container_id", "is not an id");
	pf.pod_sandbox_id = "a b";
	assert_refused(&pf.base, "pod_sandbox_id", "is not an id");
	pf.pod_sandbox_id = "abc123";
	pf.n_port = 65536;
	assert_refused(&pf.base, "port", "65536 entries");
	for (size_t i = 0; i < ARRAY_SIZE(cmd); i++)
		cmd[i] = big;
	es.container_id = ex.container_id = "abc123";
	es.cmd = ex.cmd = cmd;
	es.n_cmd = ex.n_cmd = ARRAY_SIZE(cmd);
	assert_refused(&es.base, "cmd", "at most 2097152");
	assert_refused(&ex.base, "cmd", "at most 2097152");
}

/* A message shows at most the start of a bad value, with what is not printable escaped. */
static void test_cri_validate__messages_show_values_cut_and_escaped(void **state)
{
	_cleanup_free_ char *id = rep('A', 4096);
	Runtime__V1__AttachRequest at = RUNTIME__V1__ATTACH_REQUEST__INIT;
	struct err err = ERR_INIT;

	(void)state;
	id[10] = '\n';
	id[11] = '\x1b';
	at.container_id = id;
	assert_int_equal(cri_validate(&at.base, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "AAAA\\x0a\\x1bAAAA"));
	assert_non_null(strstr(err.msg, "\"..."));
	assert_non_null(strstr(err.msg, "4096 bytes"));
	assert_null(strchr(err.msg, '\n'));
}

/* Requests without checks (and no request at all) pass. */
static void test_cri_validate__other_requests_pass(void **state)
{
	Runtime__V1__VersionRequest v = RUNTIME__V1__VERSION_REQUEST__INIT;
	Runtime__V1__RemovePodSandboxRequest rm = RUNTIME__V1__REMOVE_POD_SANDBOX_REQUEST__INIT;
	struct err err = ERR_INIT;

	(void)state;
	assert_passes(&v.base);
	assert_passes(&rm.base);
	assert_int_equal(cri_validate(NULL, &err), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cri_validate__kubelet_sandbox_passes),
		cmocka_unit_test(test_cri_validate__limits_themselves_pass),
		cmocka_unit_test(test_cri_validate__critest_names_pass),
		cmocka_unit_test(test_cri_validate__sandbox_refusals_name_the_field),
		cmocka_unit_test(test_cri_validate__pull_image),
		cmocka_unit_test(test_cri_validate__container_refusals_name_the_field),
		cmocka_unit_test(test_cri_validate__update_resources),
		cmocka_unit_test(test_cri_validate__exec_attach_port_forward),
		cmocka_unit_test(test_cri_validate__messages_show_values_cut_and_escaped),
		cmocka_unit_test(test_cri_validate__other_requests_pass),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
