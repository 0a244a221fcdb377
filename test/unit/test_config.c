/*
 * Unit tests for kiyot/daemon/config.c: defaults, then a config file in YAML or JSON. An operator's
 * mistake in the file must be refused with the key at fault, never silently ignored.
 * Fixtures: test/fixtures/config/.
 */
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "providers/local/cellnet.h"
#include "daemon/kiyot.h"

#include "reader_fixture.h"

#define FIX "test/fixtures/config/"
#define MIB (1024LL * 1024)

/* Loads a fixture over the defaults; fails the test on an error. */
static void load_ok(struct kiyot_config *c, const char *name)
{
	struct err err = ERR_INIT;

	kiyot_config_defaults(c);
	if (kiyot_config_load_file(c, name, &err) < 0)
		fail_msg("%s: %s", name, err.msg);
}

/* Loads a fixture that must be refused; returns the message in err. */
static void load_bad(const char *name, struct err *err)
{
	struct kiyot_config c;

	kiyot_config_defaults(&c);
	assert_true(kiyot_config_load_file(&c, name, err) < 0);
	assert_int_equal(err->code, EINVAL);
	kiyot_config_release(&c);
}

/* The defaults a kiyot started without a file runs with. */
static void test_config__defaults(void **state)
{
	struct kiyot_config c;

	(void)state;
	kiyot_config_defaults(&c);
	assert_string_equal(c.socket, "/run/kiyot/kiyot.sock");
	assert_string_equal(c.state_dir, "/var/lib/kiyot");
	assert_string_equal(c.log_level, "info");
	assert_string_equal(c.region, "us-east-1");
	assert_string_equal(c.default_instance_type, "");
	assert_string_equal(c.provider, "local");
	assert_string_equal(c.cell_cidr, "10.77.0.0/16");
	assert_string_equal(c.bridge, "kiyot0");
	assert_non_null(c.agent_path);
	assert_true(strlen(c.agent_path) > strlen("/cell-agent"));
	assert_string_equal(c.agent_path + strlen(c.agent_path) - strlen("/cell-agent"),
			    "/cell-agent");
	assert_int_equal(c.agent_port, 7443);
	/* the sizing module's documented default reserve: 0 CPU, 64 MiB */
	assert_int_equal(c.reserve_cpu_milli, 0);
	assert_int_equal(c.reserve_memory_bytes, 64LL << 20);
	assert_int_equal(c.burst_headroom_percent, 20); /* the burst rule's headroom */
	assert_int_equal(c.restart_backoff_ms, 10000);
	assert_null(c.registries);
	kiyot_config_release(&c);
}

/* A YAML file sets every field. */
static void test_config__full_yaml_sets_every_field(void **state)
{
	struct kiyot_config c;
	json_t *k8s;

	(void)state;
	load_ok(&c, FIX "full.yaml");
	assert_string_equal(c.socket, "/run/kiyot-test/cri.sock");
	assert_string_equal(c.state_dir, "/var/lib/kiyot-test");
	assert_string_equal(c.log_level, "debug");
	assert_string_equal(c.region, "eu-west-1");
	assert_string_equal(c.default_instance_type, "t3.small");
	assert_int_equal(c.reserve_cpu_milli, 250);
	assert_int_equal(c.reserve_memory_bytes, 64 * MIB);
	assert_string_equal(c.provider, "local");
	assert_string_equal(c.cell_cidr, "10.99.0.0/16");
	assert_string_equal(c.bridge, "kiyotx0");
	assert_string_equal(c.agent_path, "/opt/kiyot/bin/cell-agent");
	assert_int_equal(c.agent_port, 9443);
	assert_int_equal(c.restart_backoff_ms, 2500);
	assert_true(c.masquerade);
	assert_string_equal(c.kube_proxy.image, "registry.k8s.io/kube-proxy:v1.30.2");
	assert_string_equal(c.kube_proxy.kubeconfig, "/etc/kiyot/kube-proxy.kubeconfig");
	assert_int_equal(c.kube_proxy.n_args, 1);
	assert_string_equal(c.kube_proxy.args[0], "--proxy-mode=iptables");
	assert_int_equal(c.kube_proxy.n_command, 0);
	assert_non_null(c.registries);
	assert_true(json_is_true(
		json_object_get(json_object_get(c.registries, "10.99.0.1:5000"), "insecure")));
	k8s = json_object_get(json_object_get(c.registries, "registry.k8s.io"), "mirrors");
	assert_int_equal(json_array_size(k8s), 1);
	assert_string_equal(json_string_value(json_array_get(k8s, 0)), "http://10.99.0.1:5000");
	kiyot_config_release(&c);
}

/* deploy/kiyot.yaml, the config operators install, loads; what it says are the defaults are
 * (its registries are an example, not a default). */
static void test_config__shipped_config_loads_with_the_defaults_it_states(void **state)
{
	struct kiyot_config c, d;

	(void)state;
	load_ok(&c, "deploy/kiyot.yaml");
	kiyot_config_defaults(&d);
	assert_string_equal(c.socket, d.socket);
	assert_string_equal(c.state_dir, d.state_dir);
	assert_string_equal(c.log_level, d.log_level);
	assert_string_equal(c.streaming_address, d.streaming_address);
	assert_string_equal(c.region, d.region);
	assert_string_equal(c.default_instance_type, d.default_instance_type);
	assert_int_equal(c.reserve_cpu_milli, d.reserve_cpu_milli);
	assert_int_equal(c.reserve_memory_bytes, d.reserve_memory_bytes);
	assert_string_equal(c.provider, d.provider);
	assert_string_equal(c.cell_cidr, d.cell_cidr);
	assert_string_equal(c.bridge, d.bridge);
	assert_int_equal(c.agent_port, d.agent_port);
	assert_int_equal(c.restart_backoff_ms, d.restart_backoff_ms);
	assert_int_equal(c.masquerade, d.masquerade);
	assert_true(json_is_true(
		json_object_get(json_object_get(c.registries, "10.77.0.1:5000"), "insecure")));
	kiyot_config_release(&d);
	kiyot_config_release(&c);
}

/* The same settings in JSON; a CPU reserve given as a number of cores. */
static void test_config__full_json_sets_every_field(void **state)
{
	struct kiyot_config c;

	(void)state;
	load_ok(&c, FIX "full.json");
	assert_string_equal(c.socket, "/run/kiyot-json/cri.sock");
	assert_string_equal(c.state_dir, "/var/lib/kiyot-json");
	assert_string_equal(c.log_level, "warn");
	assert_string_equal(c.region, "us-west-2");
	assert_string_equal(c.default_instance_type, "c5.large");
	assert_int_equal(c.reserve_cpu_milli, 500);
	assert_int_equal(c.reserve_memory_bytes, 1024 * MIB);
	assert_string_equal(c.provider, "local");
	assert_string_equal(c.cell_cidr, "10.98.0.0/16");
	assert_string_equal(c.bridge, "kiyotj0");
	assert_string_equal(c.agent_path, "/srv/cell-agent");
	assert_int_equal(c.agent_port, 8443);
	assert_int_equal(c.restart_backoff_ms, 100);
	assert_true(json_is_true(json_object_get(
		json_object_get(c.registries, "registry.example:5000"), "insecure")));
	kiyot_config_release(&c);
}

/* What the file leaves out keeps its default. */
static void test_config__omitted_settings_keep_defaults(void **state)
{
	struct kiyot_config c, d;

	(void)state;
	load_ok(&c, FIX "partial.yaml");
	kiyot_config_defaults(&d);
	assert_string_equal(c.log_level, "error");
	assert_string_equal(c.socket, d.socket);
	assert_string_equal(c.state_dir, d.state_dir);
	assert_string_equal(c.region, d.region);
	assert_string_equal(c.default_instance_type, d.default_instance_type);
	assert_string_equal(c.provider, d.provider);
	assert_string_equal(c.cell_cidr, d.cell_cidr);
	assert_string_equal(c.bridge, d.bridge);
	assert_string_equal(c.agent_path, d.agent_path);
	assert_int_equal(c.agent_port, d.agent_port);
	assert_int_equal(c.reserve_cpu_milli, d.reserve_cpu_milli);
	assert_int_equal(c.reserve_memory_bytes, d.reserve_memory_bytes);
	assert_int_equal(c.restart_backoff_ms, d.restart_backoff_ms);
	assert_null(c.registries);
	kiyot_config_release(&c);
	kiyot_config_release(&d);
}

/* A misspelt key is refused by name (stateDirectory for stateDir), with the file's path. */
static void test_config__unknown_key_is_named(void **state)
{
	struct err err = ERR_INIT;

	(void)state;
	load_bad(FIX "unknown-key.yaml", &err);
	assert_non_null(strstr(err.msg, "stateDirectory"));
	assert_non_null(strstr(err.msg, "unknown"));
	assert_non_null(strstr(err.msg, "unknown-key.yaml"));
}

/* A nested misspelt key is named with its section: cells.agentport. */
static void test_config__unknown_nested_key_is_named(void **state)
{
	struct err err = ERR_INIT;

	(void)state;
	load_bad(FIX "unknown-cells-key.yaml", &err);
	assert_non_null(strstr(err.msg, "cells.agentport"));
}

/* Values of the wrong type name the key and what it must be. */
static void test_config__wrong_types_name_the_key(void **state)
{
	struct err err = ERR_INIT;

	(void)state;
	load_bad(FIX "wrong-type-socket.yaml", &err);
	assert_non_null(strstr(err.msg, "socket"));
	assert_non_null(strstr(err.msg, "string"));

	err_clear(&err);
	load_bad(FIX "wrong-type-port.yaml", &err);
	assert_non_null(strstr(err.msg, "cells.agentPort"));
	assert_non_null(strstr(err.msg, "integer"));

	err_clear(&err);
	load_bad(FIX "port-out-of-range.json", &err);
	assert_non_null(strstr(err.msg, "cells.agentPort"));
	assert_non_null(strstr(err.msg, "65534"));

	err_clear(&err);
	load_bad(FIX "bad-reserve-cpu.yaml", &err);
	assert_non_null(strstr(err.msg, "reserve.cpu"));

	err_clear(&err);
	load_bad(FIX "registries-list.yaml", &err);
	assert_non_null(strstr(err.msg, "registries"));

	err_clear(&err);
	load_bad(FIX "not-a-mapping.yaml", &err);
	assert_non_null(strstr(err.msg, "mapping"));

	err_clear(&err);
	load_bad(FIX "bad-masquerade.yaml", &err);
	assert_non_null(strstr(err.msg, "cells.masquerade: must be true or false"));

	/* kubeProxy: the image is required, the kubeconfig absolute */
	err_clear(&err);
	load_bad(FIX "bad-kube-proxy.yaml", &err);
	assert_non_null(strstr(err.msg, "cells.kubeProxy.image: required"));
}

/* A reserve that is no quantity names reserve.memory. */
static void test_config__bad_reserve_quantity_is_named(void **state)
{
	struct err err = ERR_INIT;

	(void)state;
	load_bad(FIX "bad-reserve-memory.yaml", &err);
	assert_non_null(strstr(err.msg, "reserve.memory"));
}

/* An unknown log level names the level and the ones there are. */
static void test_config__bad_log_level(void **state)
{
	struct err err = ERR_INIT;

	(void)state;
	load_bad(FIX "bad-log-level.yaml", &err);
	assert_non_null(strstr(err.msg, "logLevel"));
	assert_non_null(strstr(err.msg, "loud"));
	assert_non_null(strstr(err.msg, "debug"));
}

/* A missing file is an error naming it. */
static void test_config__missing_file_is_named(void **state)
{
	struct kiyot_config c;
	struct err err = ERR_INIT;

	(void)state;
	kiyot_config_defaults(&c);
	assert_true(kiyot_config_load_file(&c, FIX "no-such-file.yaml", &err) < 0);
	assert_non_null(strstr(err.msg, "no-such-file.yaml"));
	kiyot_config_release(&c);
}

/* pulls: bounds kiyot's pulls and every cell's; what it omits keeps the default. */
static void test_config__pulls_section_sets_the_policy(void **state)
{
	struct kiyot_config c;
	struct reg_policy def;

	(void)state;
	reg_policy_default(&def);
	kiyot_config_defaults(&c);
	assert_memory_equal(&c.pulls, &def, sizeof(def));
	kiyot_config_release(&c);
	load_ok(&c, FIX "pulls.yaml");
	assert_int_equal(c.pulls.min_bytes, 4096);
	assert_int_equal(c.pulls.window_s, 5);
	assert_int_equal(c.pulls.deadline_base_s, 120);
	assert_int_equal(c.pulls.deadline_rate, 65536);
	assert_int_equal(c.pulls.max_transfers, 6);
	assert_int_equal(c.pulls.max_per_registry, 2);
	kiyot_config_release(&c);
}

/* cells.bootTimeoutSeconds: unset by default (0: the provider's own, local 30 s, ec2 600 s);
 * a number of seconds sets it; one out of range is refused naming the key. */
static void test_config__boot_timeout_is_a_cells_setting(void **state)
{
	static const char good[] = "cells:\n  bootTimeoutSeconds: 90\n";
	static const char zero[] = "cells:\n  bootTimeoutSeconds: 0\n";
	struct kiyot_config c;
	struct err err = ERR_INIT;

	(void)state;
	kiyot_config_defaults(&c);
	assert_int_equal(c.boot_timeout_s, 0);
	assert_int_equal(kiyot_config_load_text(&c, good, sizeof(good) - 1, "k.yaml", &err), 0);
	assert_int_equal(c.boot_timeout_s, 90);
	assert_true(kiyot_config_load_text(&c, zero, sizeof(zero) - 1, "k.yaml", &err) < 0);
	assert_non_null(strstr(err.msg, "cells.bootTimeoutSeconds"));
	assert_int_equal(c.boot_timeout_s, 90);
	kiyot_config_release(&c);
}

/* nodeName: the host's name in lower case by default (the kubelet's), else the name given,
 * which must be a node name. */
static void test_config__node_name_is_the_kubelets(void **state)
{
	static const char good[] = "nodeName: ip-10-0-1-7.ec2.internal\n";
	static const char *const bad[] = { "nodeName: Node_A\n", "nodeName: -a\n",
					   "nodeName: a.\n" };
	struct kiyot_config c;
	struct err err = ERR_INIT;
	char host[256] = "";
	char *name;

	(void)state;
	kiyot_config_defaults(&c);
	assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
	name = kiyot_node_name(&c);
	for (char *p = host; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	assert_string_equal(name, host);
	free(name);
	assert_int_equal(kiyot_config_load_text(&c, good, sizeof(good) - 1, "k.yaml", &err), 0);
	name = kiyot_node_name(&c);
	assert_string_equal(name, "ip-10-0-1-7.ec2.internal");
	free(name);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_true(kiyot_config_load_text(&c, bad[i], strlen(bad[i]), "k.yaml", &err) < 0);
		assert_non_null(strstr(err.msg, "nodeName"));
	}
	kiyot_config_release(&c);
}

/* cells.nodePorts: none by default; numbers are TCP ports, strings name the protocol; a port
 * that is none is refused naming the entry and the forms taken. */
static void test_config__node_ports_are_what_cells_may_reach_on_the_node(void **state)
{
	struct kiyot_config c;
	struct err err = ERR_INIT;

	(void)state;
	kiyot_config_defaults(&c);
	assert_int_equal(c.n_node_ports, 0);
	kiyot_config_release(&c);
	load_ok(&c, FIX "node-ports.yaml");
	assert_int_equal(c.n_node_ports, 3);
	assert_int_equal(c.node_ports[0].port, 5000);
	assert_string_equal(c.node_ports[0].protocol, "tcp");
	assert_int_equal(c.node_ports[1].port, 53);
	assert_string_equal(c.node_ports[1].protocol, "udp");
	assert_string_equal(c.node_ports[2].protocol, "tcp");
	kiyot_config_release(&c);
	load_bad(FIX "bad-node-port.yaml", &err);
	assert_non_null(strstr(err.msg, "cells.nodePorts[1]"));
	assert_non_null(strstr(err.msg, "53/sctp"));
	assert_non_null(strstr(err.msg, "PORT/udp"));
	err_clear(&err);
	load_bad(FIX "node-ports-not-a-list.yaml", &err);
	assert_non_null(strstr(err.msg, "cells.nodePorts: must be a list"));
}

/* More downloads from one registry than from all of them is refused, naming both settings. */
static void test_config__pulls_per_registry_over_the_total_is_refused(void **state)
{
	struct err err = ERR_INIT;

	(void)state;
	load_bad(FIX "pulls-per-registry.yaml", &err);
	assert_non_null(strstr(err.msg, "pulls.maxPerRegistry"));
	assert_non_null(strstr(err.msg, "pulls.maxTransfers"));
}

/* The ec2 section: where EC2 cells are launched and with which credentials. */
static void test_config__ec2_section_sets_every_field(void **state)
{
	struct kiyot_config c;

	(void)state;
	load_ok(&c, FIX "ec2.yaml");
	assert_string_equal(c.provider, "ec2");
	assert_string_equal(c.ec2.region, "eu-west-1");
	assert_string_equal(c.region, "eu-west-1"); /* the catalog's prices follow it */
	assert_int_equal(c.ec2.n_subnet_ids, 2);
	assert_string_equal(c.ec2.subnet_ids[1], "subnet-0c");
	assert_string_equal(c.ec2.endpoint, "http://127.0.0.1:4566/");
	assert_string_equal(c.ec2.image_id, "ami-0cell");
	assert_string_equal(c.ec2.subnet_id, "subnet-0a");
	assert_int_equal(c.ec2.n_security_group_ids, 2);
	assert_string_equal(c.ec2.security_group_ids[1], "sg-2");
	assert_string_equal(c.ec2.instance_profile, "kiyot-cell");
	assert_string_equal(c.ec2.profile, "kiyot");
	assert_string_equal(c.ec2.credentials_file, "/etc/kiyot/aws-credentials");
	assert_true(c.ec2.no_imds);
	assert_int_equal(c.ec2.launch_timeout_s, 900);
	kiyot_config_release(&c);
}

/* ec2.imageIds gives a cell image per architecture; its x86_64 one is ec2.imageId. */
static void test_config__ec2_image_ids_per_architecture(void **state)
{
	const char *text = "ec2: {imageId: ami-x, imageIds: {x86_64: ami-x, arm64: ami-a}}";
	const char *arm_only = "ec2: {imageIds: {arm64: ami-a}}";
	struct kiyot_config c;
	struct err err = ERR_INIT;

	(void)state;
	kiyot_config_defaults(&c);
	assert_int_equal(kiyot_config_load_text(&c, text, strlen(text), "t.yaml", &err), 0);
	assert_string_equal(c.ec2.image_id, "ami-x");
	assert_string_equal(c.ec2.image_id_arm64, "ami-a");
	kiyot_config_release(&c);
	kiyot_config_defaults(&c);
	assert_int_equal(kiyot_config_load_text(&c, arm_only, strlen(arm_only), "t.yaml", &err), 0);
	assert_null(c.ec2.image_id);
	assert_string_equal(c.ec2.image_id_arm64, "ami-a");
	kiyot_config_release(&c);
}

/* ec2.priceList: on by default (the public endpoint), false turns it off, a URL points it at a
 * private endpoint. */
static void test_config__ec2_price_list(void **state)
{
	static const char *const texts[] = { "ec2: {region: us-east-1}", "ec2: {priceList: false}",
					     "ec2: {priceList: \"http://127.0.0.1:4566/\"}" };
	struct kiyot_config c;
	struct err err = ERR_INIT;

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		kiyot_config_defaults(&c);
		assert_int_equal(
			kiyot_config_load_text(&c, texts[i], strlen(texts[i]), "t.yaml", &err), 0);
		assert_int_equal(c.ec2.price_list_off, i == 1);
		if (i == 2)
			assert_string_equal(c.ec2.price_list_endpoint, "http://127.0.0.1:4566/");
		else
			assert_null(c.ec2.price_list_endpoint);
		kiyot_config_release(&c);
	}
}

/* sizing.burstHeadroomPercent sets the burst rule's headroom. */
static void test_config__burst_headroom_is_read(void **state)
{
	static const char text[] = "sizing:\n  burstHeadroomPercent: 35\n";
	struct kiyot_config c;
	struct err err = ERR_INIT;

	(void)state;
	kiyot_config_defaults(&c);
	assert_int_equal(kiyot_config_load_text(&c, text, strlen(text), "t.yaml", &err), 0);
	assert_int_equal(c.burst_headroom_percent, 35);
	kiyot_config_release(&c);
}

/* Each section of the wrong shape, and each value out of its bounds, is refused naming the
 * setting and what it must be. */
static void test_config__malformed_sections_are_named(void **state)
{
	static const struct {
		const char *text, *msg;
	} cases[] = {
		{ "reserve: 1", "reserve: must be a mapping" },
		{ "reserve: {disk: 1Gi}", "reserve.disk" },
		{ "reserve: {memory: 5}", "reserve.memory" },
		{ "sizing: 20", "sizing: must be a mapping" },
		{ "sizing: {burstHeadroomPercent: -1}",
		  "sizing.burstHeadroomPercent: must be an integer from 0 to 1000" },
		{ "sizing: {burstHeadroom: 20}", "sizing.burstHeadroom" },
		{ "cells: [local]", "cells: must be a mapping" },
		{ "cells: {kubeProxy: yes}", "cells.kubeProxy: must be a mapping" },
		{ "cells: {kubeProxy: {image: kp:1, args: x}}",
		  "cells.kubeProxy.args: must be a list of strings" },
		{ "cells: {kubeProxy: {image: kp:1, command: [kube-proxy, 7]}}",
		  "cells.kubeProxy.command[1]: must be a string" },
		{ "cells: {kubeProxy: {image: kp:1, kubeconfig: kp.conf}}", "cells.kubeProxy" },
		{ "pulls: 3", "pulls: must be a mapping" },
		{ "pulls: {maxTransfers: 0}", "pulls.maxTransfers" },
		{ "ec2: [a]", "ec2: must be a mapping" },
		{ "ec2: {imageID: ami-1}", "ec2.imageID" },
		{ "ec2: {launchTimeoutSeconds: 5}", "ec2.launchTimeoutSeconds" },
		{ "ec2: {noInstanceMetadata: 1}", "ec2.noInstanceMetadata: must be true or false" },
		{ "ec2: {priceList: pricing.example}",
		  "ec2.priceList: must be true, false or an http:// or https:// URL" },
		{ "ec2: {securityGroupIds: sg-1}",
		  "ec2.securityGroupIds: must be a list of strings" },
		{ "ec2: {subnetIds: subnet-1}", "ec2.subnetIds: must be a list of strings" },
		{ "ec2: {imageIds: ami-1}", "ec2.imageIds: must be a mapping of architecture" },
		{ "ec2: {imageIds: {ppc64le: ami-1}}", "\"ppc64le\" is not an architecture" },
		{ "ec2: {imageId: ami-1, imageIds: {x86_64: ami-2}}",
		  "ec2.imageIds.x86_64 \"ami-2\" is not ec2.imageId \"ami-1\"" },
		{ "region: us-east-1\nec2: {region: eu-west-1}",
		  "ec2.region \"eu-west-1\" is not region \"us-east-1\"" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kiyot_config c;
		struct err err = ERR_INIT;

		if (rfix_config(&c, cases[i].text, &err) == 0)
			fail_msg("\"%s\" was taken", cases[i].text);
		if (err.code != EINVAL || !strstr(err.msg, cases[i].msg))
			fail_msg("\"%s\": %s (code %d), want \"%s\"", cases[i].text, err.msg,
				 err.code, cases[i].msg);
		kiyot_config_release(&c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config__defaults),
		cmocka_unit_test(test_config__full_yaml_sets_every_field),
		cmocka_unit_test(test_config__full_json_sets_every_field),
		cmocka_unit_test(test_config__shipped_config_loads_with_the_defaults_it_states),
		cmocka_unit_test(test_config__omitted_settings_keep_defaults),
		cmocka_unit_test(test_config__unknown_key_is_named),
		cmocka_unit_test(test_config__unknown_nested_key_is_named),
		cmocka_unit_test(test_config__wrong_types_name_the_key),
		cmocka_unit_test(test_config__bad_reserve_quantity_is_named),
		cmocka_unit_test(test_config__bad_log_level),
		cmocka_unit_test(test_config__missing_file_is_named),
		cmocka_unit_test(test_config__pulls_section_sets_the_policy),
		cmocka_unit_test(test_config__boot_timeout_is_a_cells_setting),
		cmocka_unit_test(test_config__node_name_is_the_kubelets),
		cmocka_unit_test(test_config__pulls_per_registry_over_the_total_is_refused),
		cmocka_unit_test(test_config__node_ports_are_what_cells_may_reach_on_the_node),
		cmocka_unit_test(test_config__ec2_section_sets_every_field),
		cmocka_unit_test(test_config__ec2_image_ids_per_architecture),
		cmocka_unit_test(test_config__ec2_price_list),
		cmocka_unit_test(test_config__burst_headroom_is_read),
		cmocka_unit_test(test_config__malformed_sections_are_named),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
