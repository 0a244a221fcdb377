/*
 * cells_calls.c: the calls kiyot makes of a running cell's agent (see cells.h): each holds the
 * cell's entry for its length, goes through the agent client (agent_client.h: gRPC, or a
 * test's fake) and says which cell an unreachable agent belongs to.
 */
#include "cells_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "metrics/metrics.h"
#include "rpc.h"
#include "daemon/kiyot.h"
#include "xalloc.h"

int cells_dial(struct cellmgr *m, const char *cell_id, uint16_t port, int host_network,
	       struct err *err)
{
	const struct provider *pv = &m->k->provider;

	if (!pv->ops->dial)
		return err_set(err, ENOTSUP, "%s cells are reached through their agent",
			       pv->ops->name);
	return pv->ops->dial(pv->self, cell_id, port, host_network, err);
}

struct cell_entry *cells_apply_lock(struct cellmgr *m, const char *cell_id)
{
	struct err err = ERR_INIT;
	struct cell_entry *e = cell_entry_get(m, cell_id, &err);

	if (e)
		pthread_mutex_lock(&e->apply_lock);
	return e;
}

void cells_apply_unlock(struct cellmgr *m, struct cell_entry *e)
{
	if (!e)
		return;
	pthread_mutex_unlock(&e->apply_lock);
	cell_entry_put(m, e);
}

/* A running cell's entry for one call to its agent, held until call_end; NULL (ENOENT) when
 * the cell is not running, or ENOTCONN when it has no connection. */
static struct cell_entry *call_begin(struct cellmgr *m, const char *cell_id, struct err *err)
{
	struct cell_entry *e = cell_entry_get(m, cell_id, err);

	if (e && !e->conn) {
		cell_entry_put(m, e);
		err_set(err, ENOTCONN, "cell %s: no connection to its agent", cell_id);
		return NULL;
	}
	return e;
}

/* Ends a call begun with call_begin that returned ret. A call that could not reach the agent
 * is also a warning in kiyot's log, naming the cell: the caller (the kubelet) sees only the
 * call's failure, the node's operator the cell it came from. */
static int call_end(struct cellmgr *m, struct cell_entry *e, const char *cell_id, int ret,
		    struct err *err)
{
	cell_entry_put(m, e);
	if (ret >= 0 || err->code != ECONNREFUSED)
		return ret;
	ret = err_wrap(err, "cell %s: agent unreachable", cell_id);
	log_warn("%s", err->msg);
	return ret;
}

struct cell_stream {
	struct cellmgr *m;
	struct cell_entry *e;
	struct agent_stream *as;
};

int cells_stream_open(struct cellmgr *m, const char *cell_id, const char *method,
		      const ProtobufCMessage *first, const ProtobufCMessageDescriptor *out_desc,
		      const struct agent_stream_cbs *cbs, void *arg, struct cell_stream **out,
		      struct err *err)
{
	struct cell_entry *e = call_begin(m, cell_id, err);
	struct cell_stream *s;

	if (!e)
		return -err->code;
	s = xcalloc(1, sizeof(*s));
	s->m = m;
	s->e = e;
	if (m->agent.ops->open_stream(m->agent.self, e->conn, method, first, out_desc, cbs, arg,
				      &s->as, err) < 0) {
		cell_entry_put(m, e);
		free(s);
		return err_wrap(err, "cell %s", cell_id);
	}
	*out = s;
	return 0;
}

void cells_stream_read(struct cell_stream *s)
{
	s->m->agent.ops->stream_read(s->m->agent.self, s->as);
}

int cells_stream_send(struct cell_stream *s, const ProtobufCMessage *msg, struct err *err)
{
	return s->m->agent.ops->stream_send(s->m->agent.self, s->as, msg, err);
}

void cells_stream_close_send(struct cell_stream *s)
{
	s->m->agent.ops->stream_close_send(s->m->agent.self, s->as);
}

void cells_stream_cancel(struct cell_stream *s)
{
	s->m->agent.ops->stream_cancel(s->m->agent.self, s->as);
}

void cells_stream_free(struct cell_stream *s)
{
	if (!s)
		return;
	s->m->agent.ops->stream_free(s->m->agent.self, s->as);
	cell_entry_put(s->m, s->e);
	free(s);
}

/* The agent's own deadline for the pod is timeout_ms; the call's is 10 s later. */
int cells_apply(struct cellmgr *m, const char *cell_id, const Kiyot__Cell__V1__Pod *pod,
		int64_t timeout_ms, Kiyot__Cell__V1__ApplyResponse **resp, struct err *err)
{
	Kiyot__Cell__V1__ApplyRequest req = KIYOT__CELL__V1__APPLY_REQUEST__INIT;
	struct cell_entry *e = call_begin(m, cell_id, err);
	int64_t t0 = clock_mono_ns();
	bool first;
	int ret;

	if (!e)
		return -err->code;
	req.pod = (Kiyot__Cell__V1__Pod *)pod;
	req.timeout_ms = timeout_ms;
	ret = m->agent.ops->apply(m->agent.self, e->conn, &req, timeout_ms + 10000, resp, err);
	/* units may have come or gone: the usage kept may not hold them, and the Watch's word of
	 * it may come after the caller's next stats call (crictl's, right after a start) */
	pthread_mutex_lock(&m->lock);
	e->stats_current = false;
	first = ret == 0 && !e->applied;
	if (ret == 0)
		e->applied = true;
	pthread_mutex_unlock(&m->lock);
	if (first)
		metrics_launch_step("apply", (double)(clock_mono_ns() - t0) / 1e9);
	return call_end(m, e, cell_id, ret, err);
}

int cells_pull_image(struct cellmgr *m, const char *cell_id,
		     const Kiyot__Cell__V1__PullImageRequest *req,
		     Kiyot__Cell__V1__PullImageResponse **resp, struct err *err)
{
	struct cell_entry *e = call_begin(m, cell_id, err);
	int ret;

	if (!e)
		return -err->code;
	ret = m->agent.ops->pull_image(m->agent.self, e->conn, req, PULL_TIMEOUT_MS, resp, err);
	return call_end(m, e, cell_id, ret, err);
}

/*
 * ExecSync's turns in a cell: at most CELL_EXECS_MAX in flight to its agent, the others
 * waiting in the order they came. A waiter is a CRI call parked without a thread (rpc_park:
 * its handler runs again once its turn came, and finds its waiter as the call's note), or a
 * thread outside any served call, which waits on the waiter's cond. A waiter holds its
 * reference to the cell's entry until its exec ended.
 */
struct exec_waiter {
	struct cell_entry *e;
	struct rpc_call *call; /* NULL: a thread waits on cond */
	pthread_cond_t cond;
	bool granted;
	struct exec_waiter *next;
};

/* Takes a turn in e for the caller (holding a reference to e): 0 when it has one, or
 * RPC_PARKED when its call waits for one, parked. */
static int exec_turn(struct cellmgr *m, struct cell_entry *e, struct rpc_call *call)
{
	struct exec_waiter *w, local;

	pthread_mutex_lock(&m->lock);
	if (e->execs < CELL_EXECS_MAX && !e->exec_head) {
		e->execs++;
		pthread_mutex_unlock(&m->lock);
		return 0;
	}
	w = call ? xcalloc(1, sizeof(*w)) : memset(&local, 0, sizeof(local));
	w->e = e;
	w->call = call;
	if (e->exec_tail)
		e->exec_tail->next = w;
	else
		e->exec_head = w;
	e->exec_tail = w;
	if (call) {
		rpc_set_note(call, w);
		rpc_park(call);
		pthread_mutex_unlock(&m->lock);
		return RPC_PARKED;
	}
	pthread_cond_init(&w->cond, NULL);
	while (!w->granted)
		pthread_cond_wait(&w->cond, &m->lock);
	pthread_mutex_unlock(&m->lock);
	pthread_cond_destroy(&w->cond);
	return 0;
}

/* Ends a turn in e: the oldest waiter takes it over. */
static void exec_turn_end(struct cellmgr *m, struct cell_entry *e)
{
	struct exec_waiter *w;

	pthread_mutex_lock(&m->lock);
	w = e->exec_head;
	if (!w) {
		e->execs--;
		pthread_mutex_unlock(&m->lock);
		return;
	}
	e->exec_head = w->next;
	if (!e->exec_head)
		e->exec_tail = NULL;
	w->granted = true;
	if (w->call)
		rpc_unpark(w->call); /* (w is the call's to free now) */
	else
		pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&m->lock);
}

/* The turn the CRI call this thread serves was given while it was parked, with the reference
 * to its cell's entry it held, or NULL when it has none. */
static struct cell_entry *exec_turn_given(void)
{
	struct rpc_call *call = rpc_current();
	struct exec_waiter *w = call ? rpc_note(call) : NULL;
	struct cell_entry *e;

	if (!w)
		return NULL;
	rpc_set_note(call, NULL);
	e = w->e;
	free(w);
	return e;
}

void cells_exec_forgo(struct cellmgr *m)
{
	struct cell_entry *e = exec_turn_given();

	if (e) {
		exec_turn_end(m, e);
		cell_entry_put(m, e);
	}
}

int cells_exec_sync(struct cellmgr *m, const char *cell_id,
		    const Kiyot__Cell__V1__ExecSyncRequest *req,
		    Kiyot__Cell__V1__ExecSyncResponse **resp, struct err *err)
{
	int64_t s = req->timeout_s > 0 && req->timeout_s < EXEC_TIMEOUT_MAX_S ? req->timeout_s
									      : EXEC_TIMEOUT_MAX_S;
	struct cell_entry *e = exec_turn_given();
	int ret;

	if (!e) {
		e = call_begin(m, cell_id, err);
		if (!e)
			return -err->code;
		if (exec_turn(m, e, rpc_current()) == RPC_PARKED)
			return RPC_PARKED;
	}
	/* the call outlasts the command's own timeout, which the agent enforces */
	ret = m->agent.ops->exec_sync(m->agent.self, e->conn, req, s * 1000 + AGENT_CALL_TIMEOUT_MS,
				      resp, err);
	exec_turn_end(m, e);
	return call_end(m, e, cell_id, ret, err);
}

/* The cell's latest usage when it is fresh (a copy), else NULL. Needs the manager's lock. */
static Kiyot__Cell__V1__StatsResponse *stats_fresh(struct cell_entry *e)
{
	if (!e->stats || !e->stats_current ||
	    clock_mono_ns() - e->stats_ns >= (int64_t)STATS_MAX_AGE_MS * 1000000)
		return NULL;
	return kiyot__cell__v1__stats_response__unpack(NULL, e->stats_len, e->stats);
}

/* Answers from the usage the cell's Watch pushed while it is fresh, with no call to the agent;
 * else asks the agent, once for every caller that finds it stale meanwhile. */
int cells_stats(struct cellmgr *m, const char *cell_id, Kiyot__Cell__V1__StatsResponse **resp,
		struct err *err)
{
	struct cell_entry *e = call_begin(m, cell_id, err);
	Kiyot__Cell__V1__StatsResponse *kept = NULL;
	int ret;

	if (!e)
		return -err->code;
	pthread_mutex_lock(&m->lock);
	for (;;) {
		uint64_t gen = e->stats_gen;

		if ((kept = stats_fresh(e)) || !e->stats_asking)
			break;
		while (e->stats_asking && e->stats_gen == gen)
			pthread_cond_wait(&m->cond, &m->lock);
		/* the reading failed: its error is ours too, unless its own caller went away */
		if (!(kept = stats_fresh(e)) && e->stats_err.code &&
		    e->stats_err.code != ECANCELED) {
			*err = e->stats_err;
			pthread_mutex_unlock(&m->lock);
			return call_end(m, e, cell_id, -err->code, err);
		}
		if (kept)
			break;
	}
	if (kept) {
		pthread_mutex_unlock(&m->lock);
		*resp = kept;
		return call_end(m, e, cell_id, 0, err);
	}
	e->stats_asking = true;
	pthread_mutex_unlock(&m->lock);
	ret = m->agent.ops->stats(m->agent.self, e->conn, AGENT_CALL_TIMEOUT_MS, resp, err);
	if (ret == 0)
		cell_stats_keep(m, e, *resp);
	pthread_mutex_lock(&m->lock);
	e->stats_asking = false;
	e->stats_gen++;
	err_clear(&e->stats_err);
	if (ret < 0)
		e->stats_err = *err;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	return call_end(m, e, cell_id, ret, err);
}

int cells_write_volume(struct cellmgr *m, const char *cell_id,
		       const Kiyot__Cell__V1__WriteVolumeRequest *req, struct err *err)
{
	Kiyot__Cell__V1__WriteVolumeResponse *resp = NULL;
	struct cell_entry *e = call_begin(m, cell_id, err);
	int ret;

	if (!e)
		return -err->code;
	ret = m->agent.ops->write_volume(m->agent.self, e->conn, req, WRITE_VOLUME_TIMEOUT_MS,
					 &resp, err);
	if (ret == 0)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return call_end(m, e, cell_id, ret, err);
}
