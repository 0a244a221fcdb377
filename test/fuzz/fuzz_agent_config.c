/*
 * fuzz_agent_config: the bootstrap document a cell boots with (EC2 user-data, which anything
 * in the instance can read and a hostile launcher could write), read as the agent reads it
 * (agent_config_parse). Besides what the sanitizers catch, it checks the reader's promises: a
 * refusal is EINVAL with a message naming the key, and leaves nothing to release; an accepted
 * document holds every string, a CA and an enrollment secret within their bounds, node_images
 * empty or absolute, the very port and back-off the document gives (1-65535, positive),
 * registries an object, pull bounds registry.h accepts, and a pre-pull list of at most
 * AGENT_MAX_PREPULL printable references of at most AGENT_MAX_PREPULL_REF bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "pki.h"
#include "registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *text, size_t len)
{
	fprintf(stderr, "%s\n%.*s\n", what, (int)len, text);
	abort();
}

/* The integer the document gives for key, or dflt when it gives none. */
static json_int_t given(const char *text, size_t len, const char *key, json_int_t dflt)
{
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *v = json_object_get(doc, key);
	json_int_t n = !v ? dflt : json_is_integer(v) ? json_integer_value(v) : -1;

	json_decref(doc);
	return n;
}

static int prepull_ok(const struct agent_config *c)
{
	if (c->n_prepull > AGENT_MAX_PREPULL || (c->n_prepull && !c->prepull))
		return 0;
	for (size_t i = 0; i < c->n_prepull; i++) {
		size_t n = strlen(c->prepull[i]);

		if (!n || n > AGENT_MAX_PREPULL_REF)
			return 0;
		for (size_t j = 0; j < n; j++)
			if ((unsigned char)c->prepull[i][j] <= ' ' ||
			    (unsigned char)c->prepull[i][j] >= 0x7f)
				return 0;
	}
	return !c->prepull || !c->prepull[c->n_prepull];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	static const struct agent_config none;
	struct agent_config c;
	struct err err = ERR_INIT;
	int ret = agent_config_parse(text, size, &c, &err);

	if (ret < 0) {
		if (ret != -EINVAL || err.code != EINVAL || !err.msg[0] ||
		    memcmp(&c, &none, sizeof(c)))
			fail("refused without EINVAL and a message, or left something", text, size);
		return 0;
	}
	if (!c.cell_id || !c.cluster_id || !c.pod_uid || !c.pod_name || !c.pod_namespace ||
	    !c.instance_type || !c.state_dir || !c.log_level || !c.runtime || !c.ca ||
	    !c.enroll_secret || !c.host_netns || !c.node_images)
		fail("a string missing", text, size);
	if (strlen(c.ca) > PKI_MAX_PEM || strlen(c.enroll_secret) > 256)
		fail("a CA or enrollment secret over its bound", text, size);
	if (c.node_images[0] && c.node_images[0] != '/')
		fail("a relative node_images", text, size);
	if (reg_policy_check(&c.pulls, &err) < 0)
		fail("pull bounds that registry.h refuses", text, size);
	if (c.port < 1 || c.port > 65535 || c.port != given(text, size, "agent_port", 7443))
		fail("a port that is not the document's, or out of range", text, size);
	if (c.restart_backoff_ms < 1 ||
	    c.restart_backoff_ms != given(text, size, "restart_backoff_ms", 10000))
		fail("a back-off that is not the document's, or not positive", text, size);
	if (c.registries && !json_is_object(c.registries))
		fail("registries not an object", text, size);
	if (!prepull_ok(&c))
		fail("a pre-pull list out of bounds", text, size);
	agent_config_release(&c);
	return 0;
}
