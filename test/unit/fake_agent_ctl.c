/*
 * fake_agent_ctl.c: the tests' side of the fake agent (see fake_agent.h): cells booted and
 * taken away, what happens in them, and what kiyot asked.
 */
#include "fake_agent_internal.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "clock.h"
#include "cri/cri.h"
#include "xalloc.h"

static struct fake_cell *cell_add(struct fake_agent *fa, const char *id, const char *target)
{
	struct fake_cell *c = xcalloc(1, sizeof(*c));

	c->id = xstrdup(id);
	c->target = xstrdup(target);
	c->serving = true;
	c->next = fa->cells;
	fa->cells = c;
	return c;
}

static void cell_unlink(struct fake_agent *fa, const char *id)
{
	for (struct fake_cell **pp = &fa->cells; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->id, id) == 0) {
			struct fake_cell *c = *pp;

			*pp = c->next;
			fa_streams_end(fa, id, ECONNREFUSED);
			fa_cell_free(c);
			return;
		}
}

int fake_agent_boot(struct fake_agent *fa, const char *target, const char *bootstrap,
		    struct err *err)
{
	json_t *doc = json_loads(bootstrap, 0, NULL);
	const char *id = json_string_value(json_object_get(doc, "cell_id"));
	const char *ca = json_string_value(json_object_get(doc, "ca"));
	const char *secret = json_string_value(json_object_get(doc, "enroll_secret"));
	struct fake_cell *c;

	if (!id || !ca || !secret) {
		json_decref(doc);
		return err_set(err, EINVAL, "bootstrap: cell_id, ca and enroll_secret: required");
	}
	pthread_mutex_lock(&fa->lock);
	cell_unlink(fa, id); /* a cell booted again starts afresh */
	c = cell_add(fa, id, target);
	c->bootstrap = xstrdup(bootstrap);
	c->ca = xstrdup(ca);
	c->secret = xstrdup(secret);
	pthread_mutex_unlock(&fa->lock);
	json_decref(doc);
	return 0;
}

void fake_agent_add_cell(struct fake_agent *fa, const char *cell_id, const char *target)
{
	pthread_mutex_lock(&fa->lock);
	cell_unlink(fa, cell_id);
	cell_add(fa, cell_id, target)->enrolled = true;
	pthread_mutex_unlock(&fa->lock);
}

void fake_agent_remove_cell(struct fake_agent *fa, const char *cell_id)
{
	pthread_mutex_lock(&fa->lock);
	cell_unlink(fa, cell_id);
	pthread_mutex_unlock(&fa->lock);
}

void fake_agent_set_serving(struct fake_agent *fa, const char *cell_id, int serving)
{
	struct fake_cell *c;

	pthread_mutex_lock(&fa->lock);
	c = fa_cell_find(fa, cell_id);
	if (c) {
		c->serving = serving;
		if (!serving)
			fa_streams_end(fa, cell_id, ECONNREFUSED);
	}
	pthread_mutex_unlock(&fa->lock);
}

int fake_agent_has_cell(struct fake_agent *fa, const char *cell_id)
{
	int has;

	pthread_mutex_lock(&fa->lock);
	has = fa_cell_find(fa, cell_id) != NULL;
	pthread_mutex_unlock(&fa->lock);
	return has;
}

int fake_agent_enrolled(struct fake_agent *fa, const char *cell_id)
{
	struct fake_cell *c;
	int enrolled;

	pthread_mutex_lock(&fa->lock);
	c = fa_cell_find(fa, cell_id);
	enrolled = c && c->enrolled;
	pthread_mutex_unlock(&fa->lock);
	return enrolled;
}

char *fake_agent_bootstrap(struct fake_agent *fa, const char *cell_id)
{
	struct fake_cell *c;
	char *doc;

	pthread_mutex_lock(&fa->lock);
	c = fa_cell_find(fa, cell_id);
	doc = c && c->bootstrap ? xstrdup(c->bootstrap) : NULL;
	pthread_mutex_unlock(&fa->lock);
	return doc;
}

void fake_agent_fail(struct fake_agent *fa, enum fake_agent_op op, int code, int times)
{
	pthread_mutex_lock(&fa->lock);
	fa->ops[op].code = code;
	fa->ops[op].times = times;
	pthread_mutex_unlock(&fa->lock);
}

void fake_agent_delay(struct fake_agent *fa, enum fake_agent_op op, int ms)
{
	pthread_mutex_lock(&fa->lock);
	fa->ops[op].delay_ms = ms;
	pthread_mutex_unlock(&fa->lock);
}

void fake_agent_refuse_image(struct fake_agent *fa, const char *image, const char *message)
{
	pthread_mutex_lock(&fa->lock);
	xgrow((void **)&fa->refused, &fa->cap_refused, fa->n_refused + 1, sizeof(*fa->refused));
	fa->refused[fa->n_refused].image = xstrdup(image);
	fa->refused[fa->n_refused].message = xstrdup(message);
	fa->n_refused++;
	pthread_mutex_unlock(&fa->lock);
}

/* The unit of a cell, with fa->lock held (the caller unlocks), or NULL with it released. */
static struct fake_unit *unit_locked(struct fake_agent *fa, const char *cell_id,
				     const char *unit_id, struct fake_cell **cell)
{
	struct fake_unit *u = NULL;

	pthread_mutex_lock(&fa->lock);
	*cell = fa_cell_find(fa, cell_id);
	if (*cell)
		u = fa_unit_find(*cell, unit_id);
	if (!u)
		pthread_mutex_unlock(&fa->lock);
	return u;
}

int fake_agent_unit_exit(struct fake_agent *fa, const char *cell_id, const char *unit_id,
			 int exit_code, const char *reason)
{
	return fake_agent_unit_exit_message(fa, cell_id, unit_id, exit_code, reason, "");
}

int fake_agent_unit_exit_message(struct fake_agent *fa, const char *cell_id, const char *unit_id,
				 int exit_code, const char *reason, const char *message)
{
	struct fake_cell *c;
	struct fake_unit *u = unit_locked(fa, cell_id, unit_id, &c);

	if (!u)
		return -ENOENT;
	u->state = KIYOT__CELL__V1__UNIT_STATE__UNIT_EXITED;
	u->finished_ns = clock_now_ns();
	u->exit_code = exit_code;
	fa_set_str(&u->reason, reason);
	fa_set_str(&u->termination_message, message);
	fa_notify_status(fa, c, u);
	pthread_mutex_unlock(&fa->lock);
	return 0;
}

int fake_agent_log(struct fake_agent *fa, const char *cell_id, const char *unit_id,
		   const char *text)
{
	struct fake_cell *c;
	struct fake_unit *u = unit_locked(fa, cell_id, unit_id, &c);
	size_t at, n = strlen(text);
	Kiyot__Cell__V1__WatchEvent *ev;

	if (!u)
		return -ENOENT;
	at = u->log_len;
	u->log = xrealloc(u->log, at + n + 1);
	memcpy(u->log + at, text, n + 1);
	u->log_len += n;
	ev = fa_log_event(u, at);
	fa_notify(fa, c, ev);
	protobuf_c_message_free_unpacked(&ev->base, NULL);
	pthread_mutex_unlock(&fa->lock);
	return 0;
}

int fake_agent_push_stats(struct fake_agent *fa, const char *cell_id)
{
	Kiyot__Cell__V1__WatchEvent *ev;
	struct fake_cell *c;

	pthread_mutex_lock(&fa->lock);
	c = fa_cell_find(fa, cell_id);
	if (!c) {
		pthread_mutex_unlock(&fa->lock);
		return -ENOENT;
	}
	ev = fa_stats_event(c);
	fa_notify(fa, c, ev);
	protobuf_c_message_free_unpacked(&ev->base, NULL);
	pthread_mutex_unlock(&fa->lock);
	return 0;
}

int fake_agent_push_event(struct fake_agent *fa, const char *cell_id,
			  const Kiyot__Cell__V1__WatchEvent *ev)
{
	struct fake_cell *c;

	pthread_mutex_lock(&fa->lock);
	c = fa_cell_find(fa, cell_id);
	if (c)
		fa_notify(fa, c, ev);
	pthread_mutex_unlock(&fa->lock);
	return c ? 0 : -ENOENT;
}

int fake_agent_unit_state(struct fake_agent *fa, const char *cell_id, const char *unit_id)
{
	struct fake_cell *c;
	struct fake_unit *u = unit_locked(fa, cell_id, unit_id, &c);
	int state;

	if (!u)
		return -1;
	state = (int)u->state;
	pthread_mutex_unlock(&fa->lock);
	return state;
}

int fake_agent_unit_desired(struct fake_agent *fa, const char *cell_id, const char *unit_id)
{
	struct fake_cell *c;
	struct fake_unit *u = unit_locked(fa, cell_id, unit_id, &c);
	int desired;

	if (!u)
		return -1;
	desired = u->desired;
	pthread_mutex_unlock(&fa->lock);
	return desired;
}

int fake_agent_unit_pid(struct fake_agent *fa, const char *cell_id, const char *unit_id)
{
	struct fake_cell *c;
	struct fake_unit *u = unit_locked(fa, cell_id, unit_id, &c);
	int pid;

	if (!u)
		return -1;
	pid = u->state == KIYOT__CELL__V1__UNIT_STATE__UNIT_RUNNING ? u->pid : 0;
	pthread_mutex_unlock(&fa->lock);
	return pid;
}

Kiyot__Cell__V1__Pod *fake_agent_pod(struct fake_agent *fa, const char *cell_id)
{
	struct fake_cell *c;
	Kiyot__Cell__V1__Pod *p = NULL;

	pthread_mutex_lock(&fa->lock);
	c = fa_cell_find(fa, cell_id);
	if (c && c->last_pod)
		p = cri_msg_copy(&c->last_pod->base);
	pthread_mutex_unlock(&fa->lock);
	return p;
}

void fake_agent_set_version(struct fake_agent *fa, const char *version)
{
	pthread_mutex_lock(&fa->lock);
	free(fa->version);
	fa->version = version ? xstrdup(version) : NULL;
	pthread_mutex_unlock(&fa->lock);
}

void fake_agent_resend_logs(struct fake_agent *fa, int resend)
{
	pthread_mutex_lock(&fa->lock);
	fa->resend_logs = resend;
	pthread_mutex_unlock(&fa->lock);
}

int fake_agent_n_units(struct fake_agent *fa, const char *cell_id)
{
	struct fake_cell *c;
	int n;

	pthread_mutex_lock(&fa->lock);
	c = fa_cell_find(fa, cell_id);
	n = c ? (int)c->n_units : -1;
	pthread_mutex_unlock(&fa->lock);
	return n;
}

unsigned fake_agent_calls(struct fake_agent *fa, enum fake_agent_op op)
{
	unsigned n;

	pthread_mutex_lock(&fa->lock);
	n = fa->ops[op].calls;
	pthread_mutex_unlock(&fa->lock);
	return n;
}

int64_t fake_agent_last_timeout(struct fake_agent *fa, enum fake_agent_op op)
{
	int64_t t;

	pthread_mutex_lock(&fa->lock);
	t = fa->ops[op].last_timeout;
	pthread_mutex_unlock(&fa->lock);
	return t;
}

int fake_agent_watching(struct fake_agent *fa, const char *cell_id)
{
	int n = 0;

	pthread_mutex_lock(&fa->lock);
	for (struct agent_stream *s = fa->streams; s; s = s->next)
		n += s->kind == STREAM_WATCH && !s->end && !s->cancelled &&
		     strcmp(s->cell_id, cell_id) == 0;
	pthread_mutex_unlock(&fa->lock);
	return n;
}

unsigned fake_agent_watches(struct fake_agent *fa, const char *cell_id)
{
	struct fake_cell *c;
	unsigned n;

	pthread_mutex_lock(&fa->lock);
	c = fa_cell_find(fa, cell_id);
	n = c ? c->watches : 0;
	pthread_mutex_unlock(&fa->lock);
	return n;
}

int fake_agent_watch_offset(struct fake_agent *fa, const char *cell_id, const char *unit_id,
			    uint64_t *offset)
{
	struct fake_cell *c;
	int found = 0;

	pthread_mutex_lock(&fa->lock);
	c = fa_cell_find(fa, cell_id);
	for (size_t i = 0; c && c->last_watch && i < c->last_watch->n_offsets && !found; i++)
		if (strcmp(c->last_watch->offsets[i]->unit_id, unit_id) == 0) {
			*offset = c->last_watch->offsets[i]->offset;
			found = 1;
		}
	pthread_mutex_unlock(&fa->lock);
	return found;
}

int fake_agent_volume_entries(struct fake_agent *fa, const char *cell_id, const char *volume)
{
	struct fake_cell *c;
	int n = -1;

	pthread_mutex_lock(&fa->lock);
	c = fa_cell_find(fa, cell_id);
	for (size_t i = 0; c && i < c->n_volumes; i++)
		if (strcmp(c->volumes[i].name, volume) == 0)
			n = c->volumes[i].entries;
	pthread_mutex_unlock(&fa->lock);
	return n;
}
