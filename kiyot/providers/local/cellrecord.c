#include "cellrecord.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"
#include "cellnet.h"
#include "cellspawn.h"
#include "fsutil.h"
#include "xalloc.h"

#define RECORD_MAX (64 * 1024)

/* Frees a record's strings and zeroes it. */
void cell_record_release(struct cell_record *r)
{
	free(r->cell_id);
	free(r->instance_id);
	free(r->ip);
	free(r->instance_type);
	free(r->pod_uid);
	free(r->cluster_id);
	*r = (struct cell_record){ 0 };
}

/* A JSON string member, or "" when it is missing or not a string. */
static char *json_str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return xstrdup(s ? s : "");
}

/* Parses the bounded file with jansson; unknown members are ignored. */
int cell_record_load(const char *dir, const char *id, struct cell_record *out, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/cell.json", dir);
	_cleanup_free_ char *data = NULL;
	struct cell_record r = { 0 };
	json_error_t jerr;
	json_t *o;
	size_t len;
	uint32_t ip;

	if (fs_read_file(path, RECORD_MAX, &data, &len, err) < 0)
		return -err->code;
	o = json_loadb(data, len, 0, &jerr);
	if (!o || !json_is_object(o)) {
		json_decref(o);
		return err_set(err, EINVAL,
			       "%s: not a cell record (%s); terminate the cell to remove it", path,
			       o ? "not an object" : jerr.text);
	}
	r.cell_id = json_str(o, "cell_id");
	r.instance_id = json_str(o, "instance_id");
	r.ip = json_str(o, "ip");
	r.instance_type = json_str(o, "instance_type");
	r.pod_uid = json_str(o, "pod_uid");
	r.cluster_id = json_str(o, "cluster_id");
	r.launched_ns = json_integer_value(json_object_get(o, "launched_ns"));
	r.agent_pid = (long)json_integer_value(json_object_get(o, "agent_pid"));
	r.agent_start = (unsigned long long)json_integer_value(json_object_get(o, "agent_start"));
	json_decref(o);
	if (strcmp(r.cell_id, id) || cellnet_parse_ip(r.ip, &ip, err) < 0) {
		cell_record_release(&r);
		return err_set(err, EINVAL,
			       "%s: cell id or ip is wrong; terminate the cell to remove it", path);
	}
	*out = r;
	return 0;
}

/* Sorted keys and indentation, so the file reads well with cat. Replaced whole (a rename), not
 * flushed to disk: it survives kiyot's crash as it is, and what it records (a netns, a veth,
 * an agent process) does not survive the node's, so an fsync (milliseconds on a busy disk,
 * twice in every launch) would keep nothing worth having. */
int cell_record_save(const char *dir, const struct cell_record *r, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/cell.json", dir);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I}", "cell_id",
			      r->cell_id, "instance_id", r->instance_id, "ip", r->ip,
			      "instance_type", r->instance_type, "pod_uid", r->pod_uid,
			      "cluster_id", r->cluster_id, "launched_ns",
			      (json_int_t)r->launched_ns, "agent_pid", (json_int_t)r->agent_pid,
			      "agent_start", (json_int_t)r->agent_start);
	_cleanup_free_ char *text = o ? json_dumps(o, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;

	json_decref(o);
	if (!text) /* only an allocation failure (or a NULL string, a bug) gets here */
		abort();
	return fs_replace_file(path, text, strlen(text), 0600, err);
}

/* The pid with the recorded start time still runs. */
int cell_record_agent_alive(const struct cell_record *r)
{
	return proc_alive(r->agent_pid, r->agent_start);
}

/* Copies every string, so the info outlives the record. */
void cell_record_to_info(const struct cell_record *r, enum cell_phase phase, struct cell_info *out)
{
	out->cell_id = xstrdup(r->cell_id);
	out->instance_id = xstrdup(r->instance_id);
	out->instance_type = xstrdup(r->instance_type);
	out->ip = xstrdup(r->ip);
	out->pod_uid = xstrdup(r->pod_uid);
	out->launched_ns = r->launched_ns;
	out->phase = phase;
}
