/*
 * supervisor_state.c: what the supervisor keeps on disk so that a new agent can take over:
 * the desired pod (pod.pb) and each unit's status.json, and the adoption of the unit
 * directories a previous agent left in the state directory.
 */
#include "supervisor_internal.h"

#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fsutil.h"
#include "log.h"
#include "xalloc.h"

#define POD_FILE_MAX (16 * 1024 * 1024)

/* Writes the packed desired pod to pod.pb, read back by supervisor_adopt after a restart of
 * the agent, which the page cache survives. Not flushed to disk: every CRI call that changes
 * a container rewrites it, and an fsync took 1 to 20 ms of each; a machine crash ends the
 * cell's units with it, and kiyot, whose store holds the desired pod, sends it again. */
int supervisor_save_pod(struct supervisor *s, const uint8_t *packed, size_t len, struct err *err)
{
	_cleanup_free_ char *podp = xasprintf("%s/pod.pb", s->state_dir);

	return fs_replace_file(podp, packed, len, 0600, err);
}

/* Writes a unit's status.json (atomically). Called with mu held. */
void unit_persist(struct unit *u)
{
	_cleanup_free_ char *path = xasprintf("%s/status.json", u->dir);
	struct err err = ERR_INIT;
	json_t *j;
	char *text;

	j = json_pack("{s:s,s:i,s:I,s:I,s:I,s:i,s:s,s:s,s:i,s:s,s:s,s:i,s:b,s:s,s:i,s:b,s:s?,s:I}",
		      "id", u->id, "state", (int)u->st.state, "created_at_ns",
		      (json_int_t)u->st.created_at_ns, "started_at_ns",
		      (json_int_t)u->st.started_at_ns, "finished_at_ns",
		      (json_int_t)u->st.finished_at_ns, "exit_code", u->st.exit_code, "reason",
		      u->st.reason, "message", u->st.message, "restart_count",
		      (int)u->st.restart_count, "image_ref", u->st.image_ref, "image_id",
		      u->st.image_id, "pid", u->st.pid, "prepared", u->prepared, "image_rootfs",
		      u->image_rootfs ? u->image_rootfs : "", "backoff_n", (int)u->backoff_n,
		      "starting", u->starting, "termination_message", u->st.termination_message,
		      "log_start", (json_int_t)u->log_start);
	if (!j)
		return;
	if (u->podns.pid)
		json_object_set_new(j, "podns",
				    json_pack("[I,I]", (json_int_t)u->podns.pid,
					      (json_int_t)u->podns.start));
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (fs_replace_file(path, text, strlen(text), 0644, &err) < 0)
		log_warn("unit %s: %s", u->id, err.msg);
	free(text);
}

/* Restores a unit's status from status.json. Called with mu held. */
static void unit_load(struct supervisor *s, struct unit *u)
{
	_cleanup_free_ char *path = xasprintf("%s/status.json", u->dir), *text = NULL;
	_cleanup_free_ char *logp = xasprintf("%s/log", u->dir);
	struct err err = ERR_INIT;
	struct stat lst;
	json_t *j;

	if (fs_read_file(path, STATUS_FILE_MAX, &text, NULL, &err) < 0)
		return;
	j = json_loads(text, 0, NULL);
	if (!j)
		return;
	u->st.state = (enum unit_state)json_integer_value(json_object_get(j, "state"));
	u->st.created_at_ns = json_integer_value(json_object_get(j, "created_at_ns"));
	u->st.started_at_ns = json_integer_value(json_object_get(j, "started_at_ns"));
	u->st.finished_at_ns = json_integer_value(json_object_get(j, "finished_at_ns"));
	u->st.exit_code = (int32_t)json_integer_value(json_object_get(j, "exit_code"));
	u->st.restart_count = (uint32_t)json_integer_value(json_object_get(j, "restart_count"));
	u->st.pid = (int32_t)json_integer_value(json_object_get(j, "pid"));
	unit_set_str(&u->st.reason, json_string_value(json_object_get(j, "reason")));
	unit_set_str(&u->st.message, json_string_value(json_object_get(j, "message")));
	unit_set_str(&u->st.image_ref, json_string_value(json_object_get(j, "image_ref")));
	unit_set_str(&u->st.image_id, json_string_value(json_object_get(j, "image_id")));
	unit_set_str(&u->st.termination_message,
		     json_string_value(json_object_get(j, "termination_message")));
	u->log_start = (uint64_t)json_integer_value(json_object_get(j, "log_start"));
	unit_set_str(&u->image_rootfs, json_string_value(json_object_get(j, "image_rootfs")));
	u->prepared = json_is_true(json_object_get(j, "prepared"));
	u->backoff_n = (uint32_t)json_integer_value(json_object_get(j, "backoff_n"));
	u->starting = json_is_true(json_object_get(j, "starting"));
	u->podns.pid = (long)json_integer_value(json_array_get(json_object_get(j, "podns"), 0));
	u->podns.start = (unsigned long long)json_integer_value(
		json_array_get(json_object_get(j, "podns"), 1));
	json_decref(j);
	if (u->st.state > UNIT_STATE_UNKNOWN)
		u->st.state = UNIT_STATE_UNKNOWN;
	/* Only output written from now on is pushed; earlier output is read with log_read. */
	if (stat(logp, &lst) == 0)
		u->log_sent = (uint64_t)lst.st_size;
	/* An exit seen by nobody yet is read on the first pass; a unit that exited while no
	 * agent ran gets its restart decision then. */
	if (u->st.state == UNIT_STATE_EXITED) {
		unit_schedule_restart(s, u);
	}
}

/* Loads the persisted pod and adopts the unit directories in state_dir/units. */
int supervisor_adopt(struct supervisor *s, struct err *err)
{
	_cleanup_free_ char *podp = xasprintf("%s/pod.pb", s->state_dir);
	_cleanup_free_ char *units = xasprintf("%s/units", s->state_dir);
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	DIR *d;
	struct dirent *e;

	if (fs_exists(podp)) {
		if (fs_read_file(podp, POD_FILE_MAX, &data, &len, err) < 0)
			return err_wrap(err, "saved pod");
		s->pod = kiyot__cell__v1__pod__unpack(NULL, len, (const uint8_t *)data);
		if (!s->pod)
			log_warn("supervisor: %s does not decode; starting without a pod", podp);
	}
	d = opendir(units);
	if (!d)
		return err_errno(err, "open %s", units);
	while ((e = readdir(d))) {
		struct unit *u;

		if (e->d_name[0] == '.' || !unit_id_valid(e->d_name))
			continue;
		u = unit_add(s, e->d_name, err);
		if (!u) {
			closedir(d);
			return -err->code;
		}
		for (size_t i = 0; s->pod && i < s->pod->n_units; i++) {
			if (strcmp(s->pod->units[i]->id, u->id) == 0)
				u->spec = unit_spec_copy(s->pod->units[i]);
		}
		if (!u->spec)
			u->removing = true;
		unit_load(s, u);
	}
	closedir(d);
	return 0;
}
