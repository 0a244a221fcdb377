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
#include "pki.h"
#include "strvec.h"
#include "xalloc.h"

static int get_str(json_t *o, const char *key, int required, const char *def, char **out,
		   struct err *err)
{
	json_t *v = json_object_get(o, key);

	if (!v) {
		if (required)
			return err_set(err, EINVAL, "%s: required", key);
		*out = xstrdup(def);
		return 0;
	}
	if (!json_is_string(v))
		return err_set(err, EINVAL, "%s: must be a string", key);
	*out = xstrdup(json_string_value(v));
	return 0;
}

/* An integer member of o within lo..hi into *out, left alone when absent. */
static int get_int(json_t *o, const char *obj, const char *key, int64_t lo, int64_t hi,
		   int64_t *out, struct err *err)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return err_set(err, EINVAL, "%s.%s: must be an integer from %lld to %lld", obj, key,
			       (long long)lo, (long long)hi);
	*out = json_integer_value(v);
	return 0;
}

/* The optional "pulls" object: the registry client's policy (registry.h), checked whole. */
static int get_pulls(json_t *doc, struct reg_policy *p, struct err *err)
{
	json_t *o = json_object_get(doc, "pulls");
	int64_t min = 0, win = 0, base = 0, rate = 0, max = 0, per = 0;

	reg_policy_default(p);
	if (!o)
		return 0;
	if (!json_is_object(o))
		return err_set(err, EINVAL, "pulls: must be an object");
	min = (int64_t)p->min_bytes;
	win = p->window_s;
	base = p->deadline_base_s;
	rate = (int64_t)p->deadline_rate;
	max = p->max_transfers;
	per = p->max_per_registry;
	if (get_int(o, "pulls", "min_bytes", 0, INT64_MAX, &min, err) < 0 ||
	    get_int(o, "pulls", "window_s", 0, INT32_MAX, &win, err) < 0 ||
	    get_int(o, "pulls", "deadline_base_s", 0, INT32_MAX, &base, err) < 0 ||
	    get_int(o, "pulls", "deadline_rate", 0, INT64_MAX, &rate, err) < 0 ||
	    get_int(o, "pulls", "max_transfers", 0, INT32_MAX, &max, err) < 0 ||
	    get_int(o, "pulls", "max_per_registry", 0, INT32_MAX, &per, err) < 0)
		return -err->code;
	p->min_bytes = (uint64_t)min;
	p->window_s = (int)win;
	p->deadline_base_s = (int)base;
	p->deadline_rate = (uint64_t)rate;
	p->max_transfers = (int)max;
	p->max_per_registry = (int)per;
	if (reg_policy_check(p, err) < 0)
		return err_wrap(err, "pulls");
	return 0;
}

/* Checks prepull[i]: a string of printable ASCII, 1 to AGENT_MAX_PREPULL_REF bytes. */
static int check_prepull(const json_t *v, size_t i, struct err *err)
{
	const char *ref = json_string_value(v);
	size_t len = ref ? json_string_length(v) : 0;

	if (!json_is_string(v))
		return err_set(err, EINVAL, "prepull[%zu]: must be a string", i);
	if (len == 0 || len > AGENT_MAX_PREPULL_REF)
		return err_set(err, EINVAL, "prepull[%zu]: must be 1 to %d bytes long", i,
			       AGENT_MAX_PREPULL_REF);
	for (size_t j = 0; j < len; j++)
		if ((unsigned char)ref[j] <= ' ' || (unsigned char)ref[j] >= 0x7f)
			return err_set(err, EINVAL,
				       "prepull[%zu]: byte %zu is not a printable ASCII character; "
				       "an image reference has none",
				       i, j);
	return 0;
}

/* The optional "prepull" list: image references to pull at start (see the bounds above). */
static int get_prepull(json_t *doc, struct agent_config *c, struct err *err)
{
	json_t *list = json_object_get(doc, "prepull"), *v;
	struct strvec sv = STRVEC_INIT;
	size_t i;
	int ret = 0;

	if (!list)
		return 0;
	if (!json_is_array(list))
		return err_set(err, EINVAL, "prepull: must be an array of image references");
	if (json_array_size(list) > AGENT_MAX_PREPULL)
		return err_set(err, EINVAL, "prepull: %zu images; at most %d are accepted",
			       json_array_size(list), AGENT_MAX_PREPULL);
	json_array_foreach (list, i, v) {
		ret = check_prepull(v, i, err);
		if (ret < 0) {
			strvec_clear(&sv);
			return ret;
		}
		strvec_push(&sv, json_string_value(v));
	}
	c->n_prepull = sv.nr;
	c->prepull = strvec_detach(&sv);
	return 0;
}

int agent_config_parse(const char *text, size_t len, struct agent_config *c, struct err *err)
{
	json_error_t jerr;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	json_t *pod, *v;
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
	pod = json_object_get(doc, "pod");
	if (!json_is_object(pod)) {
		err_set(err, EINVAL, "pod: required object");
		goto out;
	}
	if (get_str(doc, "cell_id", 1, NULL, &c->cell_id, err) < 0 ||
	    get_str(doc, "cluster_id", 0, "", &c->cluster_id, err) < 0 ||
	    get_str(pod, "uid", 1, NULL, &c->pod_uid, err) < 0 ||
	    get_str(pod, "name", 1, NULL, &c->pod_name, err) < 0 ||
	    get_str(pod, "namespace", 1, NULL, &c->pod_namespace, err) < 0 ||
	    get_str(doc, "instance_type", 0, "", &c->instance_type, err) < 0 ||
	    get_str(doc, "state_dir", 0, "/var/lib/cell-agent", &c->state_dir, err) < 0 ||
	    get_str(doc, "log_level", 0, "info", &c->log_level, err) < 0 ||
	    get_str(doc, "runtime", 0, "crun", &c->runtime, err) < 0 ||
	    get_str(doc, "ca", 0, "", &c->ca, err) < 0 ||
	    get_str(doc, "enroll_secret", 0, "", &c->enroll_secret, err) < 0 ||
	    get_str(doc, "host_netns", 0, "", &c->host_netns, err) < 0 ||
	    get_str(doc, "node_images", 0, "", &c->node_images, err) < 0)
		goto out;
	if (strlen(c->ca) > PKI_MAX_PEM || strlen(c->enroll_secret) > 256) {
		err_set(err, EINVAL, "%s: too long",
			strlen(c->ca) > PKI_MAX_PEM ? "ca" : "enroll_secret");
		goto out;
	}
	if (c->node_images[0] && c->node_images[0] != '/') {
		err_set(err, EINVAL, "node_images: must be an absolute path, not \"%s\"",
			c->node_images);
		goto out;
	}
	v = json_object_get(doc, "agent_port");
	if (v && (json_integer_value(v) < 1 || json_integer_value(v) > 65534)) {
		err_set(err, EINVAL,
			"agent_port: must be 1-65534 (the cell feed takes the port after it)");
		goto out;
	}
	c->port = v ? (int)json_integer_value(v) : 7443;
	v = json_object_get(doc, "restart_backoff_ms");
	c->restart_backoff_ms = v ? json_integer_value(v) : 10000;
	if (c->restart_backoff_ms < 1) {
		err_set(err, EINVAL, "restart_backoff_ms: must be positive");
		goto out;
	}
	v = json_object_get(doc, "registries");
	if (v && !json_is_object(v)) {
		err_set(err, EINVAL, "registries: must be an object");
		goto out;
	}
	c->registries = v ? json_incref(v) : NULL;
	if (get_prepull(doc, c, err) < 0 || get_pulls(doc, &c->pulls, err) < 0)
		goto out;
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
