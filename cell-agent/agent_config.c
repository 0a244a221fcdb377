/*
 * agent_config.c: the bootstrap document a cell boots with (JSON; see cells_bootstrap in
 * kiyot/cells/cells.c for the writer):
 *	{"version":1, "cell_id":..., "cluster_id":..., "pod":{"uid","name","namespace"},
 *	 "instance_type":..., "agent_port":7443, "state_dir":..., "log_level":"info",
 *	 "restart_backoff_ms":10000, "registries":{...}, "prepull":["image", ...],
 *	 "ca":"<kiyot's CA certificate, PEM>", "enroll_secret":"<one-time, hex>",
 *	 "host_netns":"/run/netns/kiyotnode",
 *	 "pulls":{"min_bytes":10240, "window_s":30, "deadline_base_s":60,
 *	          "deadline_rate":32768, "max_transfers":8, "max_per_registry":4},
 *	 "node_images":"/var/lib/kiyot/images"}
 * Everything in it is checked as untrusted input: types, ranges, and the size of the pre-pull
 * list (at most AGENT_MAX_PREPULL references of at most AGENT_MAX_PREPULL_REF printable bytes).
 */
#include "agent.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "jfields.h"
#include "pki.h"
#include "strvec.h"
#include "xalloc.h"

/* The pod the cell is for: "pod" read into the config itself. */
static const struct jf_field pod_fields[] = {
	{ JF_STR("uid", struct agent_config, pod_uid), .required = true, .max = 256 },
	{ JF_STR("name", struct agent_config, pod_name), .required = true, .max = 256 },
	{ JF_STR("namespace", struct agent_config, pod_namespace), .required = true, .max = 256 },
	JF_END,
};

static const struct jf_table pod_table = { .fields = pod_fields };

/* The registry client's policy (registry.h), checked whole once read. */
static int pulls_check(void *obj, const json_t *j, const char *path, struct err *err)
{
	(void)j;
	if (reg_policy_check(obj, err) < 0)
		return err_wrap(err, "%s", path);
	return 0;
}

static const struct jf_field pulls_fields[] = {
	{ JF_INT("min_bytes", struct reg_policy, min_bytes, 0, INT64_MAX) },
	{ JF_INT("window_s", struct reg_policy, window_s, 0, INT32_MAX) },
	{ JF_INT("deadline_base_s", struct reg_policy, deadline_base_s, 0, INT32_MAX) },
	{ JF_INT("deadline_rate", struct reg_policy, deadline_rate, 0, INT64_MAX) },
	{ JF_INT("max_transfers", struct reg_policy, max_transfers, 0, INT32_MAX) },
	{ JF_INT("max_per_registry", struct reg_policy, max_per_registry, 0, INT32_MAX) },
	JF_END,
};

static const struct jf_table pulls_table = { .fields = pulls_fields, .check = pulls_check };

/* Each pre-pull reference: printable ASCII only (an image reference has no other byte). */
static int prepull_check(void *obj, const json_t *j, const char *path, struct err *err)
{
	const struct agent_config *c = obj;

	(void)j;
	(void)path;
	for (size_t i = 0; i < c->n_prepull; i++)
		for (size_t b = 0; c->prepull[i][b]; b++)
			if ((unsigned char)c->prepull[i][b] <= ' ' ||
			    (unsigned char)c->prepull[i][b] >= 0x7f)
				return err_set(err, EINVAL,
					       "prepull[%zu]: byte %zu is not a printable ASCII "
					       "character; an image reference has none",
					       i, b);
	return 0;
}

static int node_images_check(void *obj, const json_t *j, const char *path, struct err *err)
{
	const struct agent_config *c = obj;

	(void)j;
	if (c->node_images[0] && c->node_images[0] != '/')
		return err_set(err, EINVAL, "%s: must be an absolute path, not \"%s\"", path,
			       c->node_images);
	return 0;
}

/* "registries": kept as given (regconf reads it). */
static int registries_read(const json_t *v, void *dst, const char *path, struct err *err)
{
	json_t **out = dst;

	if (!json_is_object(v))
		return err_set(err, EINVAL, "%s: must be a mapping of registry hosts", path);
	json_decref(*out);
	*out = json_incref((json_t *)v);
	return 0;
}

/* The document; not strict: keys of a newer kiyot that this agent does not know are left. */
static const struct jf_field doc_fields[] = {
	{ JF_STR("cell_id", struct agent_config, cell_id), .required = true, .max = 256 },
	{ JF_OBJECT("pod", 0, &pod_table), .required = true },
	{ JF_STR("cluster_id", struct agent_config, cluster_id), .max = 256 },
	{ JF_STR("instance_type", struct agent_config, instance_type), .max = 256 },
	{ JF_STR("state_dir", struct agent_config, state_dir), .max = 4096 },
	{ JF_STR("log_level", struct agent_config, log_level), .max = 16 },
	{ JF_STR("runtime", struct agent_config, runtime), .max = 4096 },
	{ JF_STR("ca", struct agent_config, ca), .max = PKI_MAX_PEM },
	{ JF_STR("enroll_secret", struct agent_config, enroll_secret), .max = 256 },
	{ JF_STR("host_netns", struct agent_config, host_netns), .max = 4096 },
	{ JF_STR("node_images", struct agent_config, node_images), .max = 4096,
	  .check = node_images_check },
	{ JF_INT("agent_port", struct agent_config, port, 1, 65534),
	  .hint = "(the cell feed takes the port after it)" },
	{ JF_INT("restart_backoff_ms", struct agent_config, restart_backoff_ms, 1, INT64_MAX) },
	{ JF_CUSTOM("registries", offsetof(struct agent_config, registries), registries_read) },
	{ JF_STRV("prepull", struct agent_config, prepull, n_prepull, AGENT_MAX_PREPULL),
	  .len_max = AGENT_MAX_PREPULL_REF, .check = prepull_check },
	{ JF_OBJECT("pulls", offsetof(struct agent_config, pulls), &pulls_table) },
	JF_END,
};

static const struct jf_table doc_table = { .fields = doc_fields };

int agent_config_parse(const char *text, size_t len, struct agent_config *c, struct err *err)
{
	json_error_t jerr;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	json_t *v;
	int ret = -EINVAL;

	memset(c, 0, sizeof(*c));
	if (!doc)
		return err_set(err, EINVAL, "line %d: %s", jerr.line, jerr.text);
	if (!json_is_object(doc)) {
		err_set(err, EINVAL, "must be a JSON object");
		goto out;
	}
	v = json_object_get(doc, "version");
	if (!json_is_integer(v) || json_integer_value(v) != 1) {
		err_set(err, EINVAL, "version: must be 1; this agent reads bootstrap version 1");
		goto out;
	}
	/* the defaults of what the document may leave out */
	c->cluster_id = xstrdup("");
	c->instance_type = xstrdup("");
	c->state_dir = xstrdup("/var/lib/cell-agent");
	c->log_level = xstrdup("info");
	c->runtime = xstrdup("crun");
	c->ca = xstrdup("");
	c->enroll_secret = xstrdup("");
	c->host_netns = xstrdup("");
	c->node_images = xstrdup("");
	c->port = 7443;
	c->restart_backoff_ms = 10000;
	reg_policy_default(&c->pulls);
	if (jf_read(&doc_table, doc, "", c, err) < 0)
		goto out;
	for (size_t i = 0; i < c->n_prepull; i++)
		if (!c->prepull[i][0]) {
			err_set(err, EINVAL, "prepull[%zu]: must be 1 to %d bytes long", i,
				AGENT_MAX_PREPULL_REF);
			goto out;
		}
	ret = 0;
out:
	json_decref(doc);
	if (ret < 0)
		agent_config_release(c);
	return ret;
}

void agent_config_release(struct agent_config *c)
{
	free(c->cell_id);
	free(c->cluster_id);
	free(c->pod_uid);
	free(c->pod_name);
	free(c->pod_namespace);
	free(c->instance_type);
	free(c->state_dir);
	free(c->log_level);
	free(c->runtime);
	free(c->ca);
	if (c->enroll_secret)
		explicit_bzero(c->enroll_secret, strlen(c->enroll_secret));
	free(c->enroll_secret);
	free(c->host_netns);
	free(c->node_images);
	json_decref(c->registries);
	strv_free(c->prepull);
	memset(c, 0, sizeof(*c));
}

/* Overwrites and frees a document's text. */
static void text_wipe_free(char *text, size_t len)
{
	if (text)
		explicit_bzero(text, len);
	free(text);
}

int agent_config_drop_secret(const char *path, size_t max, struct err *err)
{
	char *text = NULL, *out = NULL;
	size_t len = 0;
	json_error_t jerr;
	json_t *doc;
	int ret = 0;

	if (fs_read_file(path, max, &text, &len, err) < 0)
		return err_wrap(err, "bootstrap %s", path);
	doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	text_wipe_free(text, len);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return err_set(err, EINVAL, "bootstrap %s: no longer a JSON object", path);
	}
	if (json_object_get(doc, "enroll_secret")) {
		json_object_del(doc, "enroll_secret");
		out = json_dumps(doc, JSON_COMPACT);
		if (!out)
			abort(); /* read as JSON above: only out of memory fails */
		if (fs_write_file(path, out, strlen(out), 0600, err) < 0)
			ret = err_wrap(err, "bootstrap %s", path);
		free(out);
	}
	json_decref(doc); /* the secret's string in it is gone with it, not overwritten */
	return ret;
}
