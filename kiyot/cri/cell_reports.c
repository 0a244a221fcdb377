/*
 * cell_reports.c: what the cells report back, applied to kiyot's records: unit status changes
 * (then published as container events), log bytes (handed to their container's log writer,
 * state/ctrlog.h) and the log offsets a cell's Watch resumes from.
 */
#include "cri.h"

#include <stdlib.h>
#include <string.h>

#include "cells/cells.h"
#include "events.h"
#include "fsutil.h"
#include "log.h"
#include "state/ctrlog.h"
#include "xalloc.h"

static enum container_state state_from_unit(Kiyot__Cell__V1__UnitState s)
{
	switch (s) {
	case KIYOT__CELL__V1__UNIT_STATE__UNIT_CREATED:
		return CTR_CREATED;
	case KIYOT__CELL__V1__UNIT_STATE__UNIT_RUNNING:
		return CTR_RUNNING;
	case KIYOT__CELL__V1__UNIT_STATE__UNIT_EXITED:
		return CTR_EXITED;
	default:
		return CTR_UNKNOWN;
	}
}

static void set_str(char **dst, const char *src)
{
	if (src && strcmp(*dst ? *dst : "", src) != 0) {
		free(*dst);
		*dst = xstrdup(src);
	}
}

/*
 * A remote cell's unit exited with a termination message: it goes into the node file the
 * kubelet reads (the mount at the container's terminationMessagePath). Local cells write
 * that file themselves.
 */
static void write_termination_message(struct kiyot *k, const struct container *c, const char *msg)
{
	const char *path = cri_map_get((void **)c->config->annotations, c->config->n_annotations,
				       ANN_TERMINATION_MESSAGE_PATH);
	struct err err = ERR_INIT;

	if (!k->provider.ops->remote_files || !path || !msg[0])
		return;
	for (size_t i = 0; i < c->config->n_mounts; i++) {
		const Runtime__V1__Mount *m = c->config->mounts[i];

		if (strcmp(m->container_path, path) != 0 || m->host_path[0] != '/')
			continue;
		if (fs_write_file(m->host_path, msg, strlen(msg), 0644, &err) < 0)
			log_warn("container %s: termination message: %s", c->id, err.msg);
		return;
	}
}

/* Applies a unit status to its container record; returns non-zero if anything changed.
 * Call with the records' lock held. */
int kiyot_apply_unit_status(struct kiyot *k, struct container *c,
			    const Kiyot__Cell__V1__UnitStatus *st)
{
	enum container_state ns = state_from_unit(st->state);
	int changed = 0;
	struct err err = ERR_INIT;

	if (ns == CTR_UNKNOWN)
		return 0; /* the unit is gone from the cell; the record stays as it was */
	if (c->state != ns || c->started_ns != st->started_at_ns ||
	    c->finished_ns != st->finished_at_ns || c->restart_count != st->restart_count)
		changed = 1;
	c->state = ns;
	if (st->created_at_ns)
		c->created_ns = c->created_ns ? c->created_ns : st->created_at_ns;
	c->started_ns = st->started_at_ns;
	c->finished_ns = st->finished_at_ns;
	c->exit_code = st->exit_code;
	c->restart_count = st->restart_count;
	c->pid = ns == CTR_RUNNING ? st->pid : 0;
	set_str(&c->reason, st->reason);
	set_str(&c->message, st->message);
	/* a digest reference the cell resolved; not the tag an older agent reports over one */
	if (st->image_ref[0] && (strchr(st->image_ref, '@') || !strchr(c->image_ref, '@')))
		set_str(&c->image_ref, st->image_ref);
	if (st->image_id[0])
		set_str(&c->image_id, st->image_id);
	c->error_status = st->error_status;
	if (changed && ns == CTR_EXITED) {
		write_termination_message(k, c, st->termination_message);
		if (c->log)
			ctrlog_idle(c->log);
	}
	if (changed) {
		if (records_save_container(k->records, c, &err) < 0)
			log_error("container %s: %s", c->id, err.msg);
		events_publish_container(k, c);
	}
	return changed;
}

void kiyot_on_unit_status(struct kiyot *k, const char *cell_id,
			  const Kiyot__Cell__V1__UnitStatus *st)
{
	struct container *c;

	records_lock(k->records);
	c = records_container_exact(k->records, st->id);
	if (c) {
		struct sandbox *sb = records_sandbox_exact(k->records, c->sandbox_id);

		/* a sandbox that is not ready (its cell lost, or stopped) has its containers'
		 * exits for good: a status its cell sent before, arriving late, changes none */
		if (sb && strcmp(sb->cell_id, cell_id) == 0 &&
		    !(sb->state != SANDBOX_READY && c->state == CTR_EXITED))
			kiyot_apply_unit_status(k, c, st);
	}
	records_unlock(k->records);
}

/* Where the kubelet reads a container's log: log_directory/log_path; NULL if not asked for. */
char *kiyot_log_file(struct kiyot *k, const struct container *c)
{
	struct sandbox *sb = records_sandbox_exact(k->records, c->sandbox_id);
	const char *lp = c->config->log_path;

	if (!lp || !lp[0])
		return NULL;
	if (lp[0] == '/')
		return xstrdup(lp);
	if (!sb || !sb->config->log_directory || !sb->config->log_directory[0])
		return NULL;
	return xasprintf("%s/%s", sb->config->log_directory, lp);
}

void kiyot_log_attach(struct kiyot *k, struct container *c)
{
	_cleanup_free_ char *path = NULL;

	if (!k->logs || c->log)
		return;
	path = kiyot_log_file(k, c);
	c->log = ctrlog_new(k->logs, c->id, path, &c->log_mark);
}

/* A log chunk from a cell's Watch callback: the writer is found under the records' lock, and written
 * without it. */
void kiyot_on_unit_log(struct kiyot *k, const char *unit_id, uint64_t offset, const uint8_t *data,
		       size_t len)
{
	struct container *c;
	struct ctrlog *w = NULL;

	records_lock(k->records);
	c = records_container_exact(k->records, unit_id);
	if (c && c->log)
		w = ctrlog_get(c->log);
	records_unlock(k->records);
	if (!w)
		return; /* unknown unit */
	ctrlog_write(w, offset, data, len);
	ctrlog_put(w);
}

void kiyot_log_offsets(struct kiyot *k, const char *cell_id, Kiyot__Cell__V1__LogOffset ***out,
		       size_t *n)
{
	struct container **cs = NULL;
	struct sandbox *sb;
	size_t ncs = 0;

	records_lock(k->records);
	sb = records_sandbox_of_cell(k->records, cell_id);
	if (sb)
		ncs = records_containers(k->records, sb->id, &cs);
	*out = xcalloc(ncs + 1, sizeof(**out));
	for (*n = 0; *n < ncs; (*n)++) {
		Kiyot__Cell__V1__LogOffset *o = xmalloc(sizeof(*o));

		kiyot__cell__v1__log_offset__init(o);
		o->unit_id = xstrdup(cs[*n]->id);
		o->offset = cs[*n]->log ? ctrlog_offset(cs[*n]->log) : cs[*n]->log_mark.offset;
		(*out)[*n] = o;
	}
	records_unlock(k->records);
	containers_put(cs, ncs);
}

void kiyot_log_offsets_free(Kiyot__Cell__V1__LogOffset **o, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(o[i]->unit_id);
		free(o[i]);
	}
	free(o);
}

static void hook_unit_status(void *ctx, const char *cell_id, const Kiyot__Cell__V1__UnitStatus *st)
{
	kiyot_on_unit_status(ctx, cell_id, st);
}

static void hook_unit_log(void *ctx, const char *unit_id, uint64_t offset, const uint8_t *data,
			  size_t len)
{
	kiyot_on_unit_log(ctx, unit_id, offset, data, len);
}

static void hook_log_offsets(void *ctx, const char *cell_id, Kiyot__Cell__V1__LogOffset ***out,
			     size_t *n)
{
	kiyot_log_offsets(ctx, cell_id, out, n);
}

static void hook_interruption(void *ctx, const char *cell_id, const struct cell_interruption *in)
{
	kiyot_on_interruption(ctx, cell_id, in);
}

static void hook_sandbox_lost(void *ctx, struct sandbox *sb, const char *reason)
{
	kiyot_sandbox_lost(ctx, sb, reason);
}

static void hook_pass_done(void *ctx)
{
	kiyot_node_images_sweep(ctx);
}

void cri_cells_hooks(struct kiyot *k, struct cells_hooks *out)
{
	*out = (struct cells_hooks){
		.ctx = k,
		.unit_status = hook_unit_status,
		.unit_log = hook_unit_log,
		.log_offsets = hook_log_offsets,
		.log_offsets_free = kiyot_log_offsets_free,
		.interruption = hook_interruption,
		.sandbox_lost = hook_sandbox_lost,
		.pass_done = hook_pass_done,
	};
}
