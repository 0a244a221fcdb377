/*
 * fake_provider.c: a cell provider in memory for kiyot's unit tests (see fake_provider.h).
 */
#include "fake_provider.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "cancel.h"
#include "clock.h"
#include "xalloc.h"

struct fp_cell {
	char *id, *ip, *instance_type, *pod_uid;
	char *prepull; /* the launch's images to pre-pull, ' '-joined */
	char *reason;  /* why it is in its phase (state), or NULL */
	enum cell_phase phase;
	int64_t launched_ns;
	struct fp_cell *next;
};

struct termination {
	char *cell_id;
	unsigned n;
};

struct fake_provider {
	struct provider_ops ops;
	struct fake_agent *fa;
	int agent_port;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fp_cell *cells;
	unsigned next_ip;
	int hold, hold_terminate, held, dead_agents, launch_failed;
	char *launch_as, *launch_note; /* a capacity fallback's type and note, or NULL */
	struct {
		int code, times;
		unsigned calls;
	} fail[FAKE_PROVIDER_N_OPS];
	struct termination *terms;
	size_t n_terms, cap_terms;
};

static const char *const op_names[FAKE_PROVIDER_N_OPS] = { "launch", "terminate", "list", "heal",
							   "state" };

/* Counts a call of op; the error the test asked it to fail with, or 0. */
static int op_enter(struct fake_provider *fp, enum fake_provider_op op, struct err *err)
{
	int code = 0;

	pthread_mutex_lock(&fp->lock);
	fp->fail[op].calls++;
	if (fp->fail[op].times) {
		code = fp->fail[op].code;
		if (fp->fail[op].times > 0)
			fp->fail[op].times--;
	}
	pthread_mutex_unlock(&fp->lock);
	if (code)
		return err_set(err, code, "fake provider: %s fails (as the test asked)",
			       op_names[op]);
	return 0;
}

static struct fp_cell *cell_find(struct fake_provider *fp, const char *id)
{
	for (struct fp_cell *c = fp->cells; c; c = c->next)
		if (strcmp(c->id, id) == 0)
			return c;
	return NULL;
}

static void cell_free(struct fp_cell *c)
{
	free(c->id);
	free(c->ip);
	free(c->instance_type);
	free(c->pod_uid);
	free(c->prepull);
	free(c->reason);
	free(c);
}

static void info_fill(const struct fp_cell *c, struct cell_info *out)
{
	out->cell_id = xstrdup(c->id);
	out->instance_id = xasprintf("fake-%s", c->id);
	out->instance_type = xstrdup(c->instance_type);
	out->ip = xstrdup(c->ip);
	out->pod_uid = xstrdup(c->pod_uid);
	out->launched_ns = c->launched_ns;
	out->phase = c->phase;
}

static struct fp_cell *cell_new(struct fake_provider *fp, const char *id, const char *type,
				const char *pod_uid, enum cell_phase phase)
{
	struct fp_cell *c = xcalloc(1, sizeof(*c));

	c->id = xstrdup(id);
	c->ip = xasprintf("10.99.%u.%u", fp->next_ip / 250, 1 + fp->next_ip % 250);
	fp->next_ip++;
	c->instance_type = xstrdup(type);
	c->pod_uid = xstrdup(pod_uid);
	c->phase = phase;
	c->launched_ns = clock_now_ns();
	c->next = fp->cells;
	fp->cells = c;
	return c;
}

/* Boots the cell's agent in the fake agent from the launch's bootstrap document. */
static int boot_agent(struct fake_provider *fp, const struct fp_cell *c, const char *bootstrap,
		      struct err *err)
{
	_cleanup_free_ char *target = xasprintf("%s:%d", c->ip, fp->agent_port);

	if (fake_agent_boot(fp->fa, target, bootstrap, err) < 0)
		return -err->code;
	if (c->phase == CELL_FAILED)
		fake_agent_set_serving(fp->fa, c->id, 0);
	return 0;
}

/* Counts itself held and waits for a hold to change. Needs fp->lock. */
static void wait_held(struct fake_provider *fp)
{
	fp->held++;
	pthread_cond_broadcast(&fp->cond);
	pthread_cond_wait(&fp->cond, &fp->lock);
	fp->held--;
}

static int fp_launch(void *self, const struct cell_spec *spec, struct cell_info *out,
		     struct err *err)
{
	struct fake_provider *fp = self;
	struct fp_cell *c;
	int ret = 0;

	if (op_enter(fp, FAKE_PROVIDER_LAUNCH, err) < 0)
		return -err->code;
	pthread_mutex_lock(&fp->lock);
	c = cell_find(fp, spec->cell_id);
	if (!c) {
		c = cell_new(fp, spec->cell_id, fp->launch_as ? fp->launch_as : spec->instance_type,
			     spec->pod_uid, fp->launch_failed ? CELL_FAILED : CELL_RUNNING);
		c->prepull = xstrdup("");
		for (size_t i = 0; i < spec->n_prepull; i++) {
			char *more =
				xasprintf("%s%s%s", c->prepull, i ? " " : "", spec->prepull[i]);

			free(c->prepull);
			c->prepull = more;
		}
		if (!fp->dead_agents)
			ret = boot_agent(fp, c, spec->bootstrap, err);
	}
	while (fp->hold && ret == 0)
		wait_held(fp);
	c = cell_find(fp, spec->cell_id); /* the test may have made it vanish meanwhile */
	if (ret == 0 && !c)
		ret = err_set(err, EIO, "cell %s vanished while it launched", spec->cell_id);
	if (ret == 0) {
		info_fill(c, out);
		if (fp->launch_note)
			out->launch_note = xstrdup(fp->launch_note);
	}
	pthread_mutex_unlock(&fp->lock);
	return ret;
}

static void count_termination(struct fake_provider *fp, const char *cell_id)
{
	for (size_t i = 0; i < fp->n_terms; i++)
		if (strcmp(fp->terms[i].cell_id, cell_id) == 0) {
			fp->terms[i].n++;
			return;
		}
	xgrow((void **)&fp->terms, &fp->cap_terms, fp->n_terms + 1, sizeof(*fp->terms));
	fp->terms[fp->n_terms].cell_id = xstrdup(cell_id);
	fp->terms[fp->n_terms++].n = 1;
}

static void cell_remove(struct fake_provider *fp, const char *cell_id)
{
	for (struct fp_cell **pp = &fp->cells; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->id, cell_id) == 0) {
			struct fp_cell *c = *pp;

			*pp = c->next;
			cell_free(c);
			break;
		}
	fake_agent_remove_cell(fp->fa, cell_id);
}

static int fp_terminate(void *self, const char *cell_id, struct err *err)
{
	struct fake_provider *fp = self;

	if (op_enter(fp, FAKE_PROVIDER_TERMINATE, err) < 0)
		return -err->code;
	pthread_mutex_lock(&fp->lock);
	while (fp->hold_terminate) {
		struct timespec ts;

		/* a held termination ends when its caller gives up, as EC2 calls do */
		fp->held++;
		pthread_cond_broadcast(&fp->cond);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&fp->cond, &fp->lock, &ts);
		fp->held--;
		if (cancel_requested()) {
			pthread_mutex_unlock(&fp->lock);
			return err_set(err, ECANCELED, "terminating cell %s: cancelled", cell_id);
		}
	}
	count_termination(fp, cell_id);
	cell_remove(fp, cell_id);
	pthread_mutex_unlock(&fp->lock);
	return 0;
}

static int fp_list(void *self, struct cell_info **out, size_t *n, struct err *err)
{
	struct fake_provider *fp = self;
	size_t count = 0, i = 0;

	if (op_enter(fp, FAKE_PROVIDER_LIST, err) < 0)
		return -err->code;
	pthread_mutex_lock(&fp->lock);
	for (struct fp_cell *c = fp->cells; c; c = c->next)
		count++;
	*out = xcalloc(count + 1, sizeof(**out));
	for (struct fp_cell *c = fp->cells; c; c = c->next)
		info_fill(c, &(*out)[i++]);
	*n = count;
	pthread_mutex_unlock(&fp->lock);
	return 0;
}

static int fp_heal(void *self, const char *cell_id, struct err *err)
{
	struct fake_provider *fp = self;
	struct fp_cell *c;

	if (op_enter(fp, FAKE_PROVIDER_HEAL, err) < 0)
		return -err->code;
	pthread_mutex_lock(&fp->lock);
	c = cell_find(fp, cell_id);
	if (c)
		c->phase = CELL_RUNNING;
	pthread_mutex_unlock(&fp->lock);
	if (!c)
		return err_set(err, ENOENT, "cell %s does not exist", cell_id);
	fake_agent_set_serving(fp->fa, cell_id, 1);
	return 0;
}

static int fp_state(void *self, const char *cell_id, struct cell_info *out, struct err *err)
{
	struct fake_provider *fp = self;
	struct fp_cell *c;
	int ret = 0;

	if (op_enter(fp, FAKE_PROVIDER_STATE, err) < 0)
		return -err->code;
	pthread_mutex_lock(&fp->lock);
	c = cell_find(fp, cell_id);
	if (c) {
		info_fill(c, out);
		out->reason = c->reason ? xstrdup(c->reason) : NULL;
	} else {
		ret = err_set(err, ENOENT, "fake provider: no cell %s", cell_id);
	}
	pthread_mutex_unlock(&fp->lock);
	return ret;
}

static void fp_destroy(void *self)
{
	(void)self; /* the test frees it, after kiyot_close: cells outlive kiyot */
}

struct fake_provider *fake_provider_new(struct fake_agent *fa, int agent_port, int boot_timeout_s)
{
	struct fake_provider *fp = xcalloc(1, sizeof(*fp));

	fp->ops.name = "fake";
	fp->ops.boot_timeout_s = boot_timeout_s;
	fp->ops.remote_files = 1;
	fp->ops.standby_cells = 1;
	fp->ops.launch = fp_launch;
	fp->ops.state = fp_state;
	fp->ops.terminate = fp_terminate;
	fp->ops.list = fp_list;
	fp->ops.heal = fp_heal;
	fp->ops.destroy = fp_destroy;
	fp->fa = fa;
	fp->agent_port = agent_port;
	pthread_mutex_init(&fp->lock, NULL);
	pthread_cond_init(&fp->cond, NULL);
	return fp;
}

void fake_provider_free(struct fake_provider *fp)
{
	if (!fp)
		return;
	while (fp->cells) {
		struct fp_cell *c = fp->cells;

		fp->cells = c->next;
		cell_free(c);
	}
	for (size_t i = 0; i < fp->n_terms; i++)
		free(fp->terms[i].cell_id);
	free(fp->terms);
	free(fp->launch_as);
	free(fp->launch_note);
	pthread_mutex_destroy(&fp->lock);
	pthread_cond_destroy(&fp->cond);
	free(fp);
}

void fake_provider_install(struct fake_provider *fp, struct provider *out)
{
	out->ops = &fp->ops;
	out->self = fp;
}

void fake_provider_hold(struct fake_provider *fp, int hold)
{
	pthread_mutex_lock(&fp->lock);
	fp->hold = hold;
	pthread_cond_broadcast(&fp->cond);
	pthread_mutex_unlock(&fp->lock);
}

void fake_provider_hold_terminate(struct fake_provider *fp, int hold)
{
	pthread_mutex_lock(&fp->lock);
	fp->hold_terminate = hold;
	pthread_cond_broadcast(&fp->cond);
	pthread_mutex_unlock(&fp->lock);
}

int fake_provider_wait_held(struct fake_provider *fp, int n, int timeout_ms)
{
	struct timespec ts;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&fp->lock);
	while (fp->held < n && ret == 0)
		ret = pthread_cond_timedwait(&fp->cond, &fp->lock, &ts);
	ret = fp->held >= n ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&fp->lock);
	return ret;
}

void fake_provider_fail(struct fake_provider *fp, enum fake_provider_op op, int code, int times)
{
	pthread_mutex_lock(&fp->lock);
	fp->fail[op].code = code;
	fp->fail[op].times = times;
	pthread_mutex_unlock(&fp->lock);
}

void fake_provider_dead_agents(struct fake_provider *fp, int dead)
{
	pthread_mutex_lock(&fp->lock);
	fp->dead_agents = dead;
	pthread_mutex_unlock(&fp->lock);
}

void fake_provider_launch_as(struct fake_provider *fp, const char *type, const char *note)
{
	pthread_mutex_lock(&fp->lock);
	free(fp->launch_as);
	free(fp->launch_note);
	fp->launch_as = type ? xstrdup(type) : NULL;
	fp->launch_note = note ? xstrdup(note) : NULL;
	pthread_mutex_unlock(&fp->lock);
}

void fake_provider_launch_failed(struct fake_provider *fp, int failed)
{
	pthread_mutex_lock(&fp->lock);
	fp->launch_failed = failed;
	pthread_mutex_unlock(&fp->lock);
}

void fake_provider_add_cell(struct fake_provider *fp, const char *cell_id, enum cell_phase phase)
{
	_cleanup_free_ char *target = NULL;
	struct fp_cell *c;

	pthread_mutex_lock(&fp->lock);
	c = cell_new(fp, cell_id, "t3.micro", "", phase);
	target = xasprintf("%s:%d", c->ip, fp->agent_port);
	pthread_mutex_unlock(&fp->lock);
	fake_agent_add_cell(fp->fa, cell_id, target);
	if (phase == CELL_FAILED)
		fake_agent_set_serving(fp->fa, cell_id, 0);
}

void fake_provider_set_phase(struct fake_provider *fp, const char *cell_id, enum cell_phase phase)
{
	struct fp_cell *c;

	pthread_mutex_lock(&fp->lock);
	c = cell_find(fp, cell_id);
	if (c)
		c->phase = phase;
	pthread_mutex_unlock(&fp->lock);
}

void fake_provider_end_cell(struct fake_provider *fp, const char *cell_id, enum cell_phase phase,
			    const char *reason)
{
	struct fp_cell *c;

	pthread_mutex_lock(&fp->lock);
	c = cell_find(fp, cell_id);
	if (c) {
		c->phase = phase;
		free(c->reason);
		c->reason = xstrdup(reason);
	}
	pthread_mutex_unlock(&fp->lock);
}

void fake_provider_vanish(struct fake_provider *fp, const char *cell_id)
{
	pthread_mutex_lock(&fp->lock);
	cell_remove(fp, cell_id);
	pthread_mutex_unlock(&fp->lock);
}

int fake_provider_has(struct fake_provider *fp, const char *cell_id)
{
	int has;

	pthread_mutex_lock(&fp->lock);
	has = cell_find(fp, cell_id) != NULL;
	pthread_mutex_unlock(&fp->lock);
	return has;
}

int fake_provider_n_cells(struct fake_provider *fp)
{
	int n = 0;

	pthread_mutex_lock(&fp->lock);
	for (struct fp_cell *c = fp->cells; c; c = c->next)
		n++;
	pthread_mutex_unlock(&fp->lock);
	return n;
}

char *fake_provider_instance_type(struct fake_provider *fp, const char *cell_id)
{
	struct fp_cell *c;
	char *type;

	pthread_mutex_lock(&fp->lock);
	c = cell_find(fp, cell_id);
	type = c ? xstrdup(c->instance_type) : NULL;
	pthread_mutex_unlock(&fp->lock);
	return type;
}

char *fake_provider_prepull(struct fake_provider *fp, const char *cell_id)
{
	struct fp_cell *c;
	char *refs;

	pthread_mutex_lock(&fp->lock);
	c = cell_find(fp, cell_id);
	refs = c ? xstrdup(c->prepull ? c->prepull : "") : NULL;
	pthread_mutex_unlock(&fp->lock);
	return refs;
}

unsigned fake_provider_calls(struct fake_provider *fp, enum fake_provider_op op)
{
	unsigned n;

	pthread_mutex_lock(&fp->lock);
	n = fp->fail[op].calls;
	pthread_mutex_unlock(&fp->lock);
	return n;
}

unsigned fake_provider_terminated(struct fake_provider *fp, const char *cell_id)
{
	unsigned n = 0;

	pthread_mutex_lock(&fp->lock);
	for (size_t i = 0; i < fp->n_terms; i++)
		if (strcmp(fp->terms[i].cell_id, cell_id) == 0)
			n = fp->terms[i].n;
	pthread_mutex_unlock(&fp->lock);
	return n;
}
