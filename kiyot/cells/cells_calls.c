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
#include "state/kiyot.h"
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

/* Ends a call begun with call_begin that returned ret. */
static int call_end(struct cellmgr *m, struct cell_entry *e, const char *cell_id, int ret,
		    struct err *err)
{
	cell_entry_put(m, e);
	if (ret < 0 && err->code == ECONNREFUSED)
		return err_wrap(err, "cell %s: agent unreachable", cell_id);
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
	int ret;

	if (!e)
		return -err->code;
	req.pod = (Kiyot__Cell__V1__Pod *)pod;
	req.timeout_ms = timeout_ms;
	ret = m->agent.ops->apply(m->agent.self, e->conn, &req, timeout_ms + 10000, resp, err);
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

int cells_exec_sync(struct cellmgr *m, const char *cell_id,
		    const Kiyot__Cell__V1__ExecSyncRequest *req,
		    Kiyot__Cell__V1__ExecSyncResponse **resp, struct err *err)
{
	int64_t s = req->timeout_s > 0 && req->timeout_s < EXEC_TIMEOUT_MAX_S ? req->timeout_s
									      : EXEC_TIMEOUT_MAX_S;
	struct cell_entry *e = call_begin(m, cell_id, err);
	int ret;

	if (!e)
		return -err->code;
	/* the call outlasts the command's own timeout, which the agent enforces */
	ret = m->agent.ops->exec_sync(m->agent.self, e->conn, req, s * 1000 + AGENT_CALL_TIMEOUT_MS,
				      resp, err);
	return call_end(m, e, cell_id, ret, err);
}

int cells_stats(struct cellmgr *m, const char *cell_id, Kiyot__Cell__V1__StatsResponse **resp,
		struct err *err)
{
	struct cell_entry *e = call_begin(m, cell_id, err);
	_cleanup_free_ uint8_t *kept = NULL;
	size_t len = 0;
	int ret;

	if (!e)
		return -err->code;
	pthread_mutex_lock(&m->lock);
	if (e->stats && e->stats_current &&
	    clock_mono_ns() - e->stats_ns < (int64_t)STATS_MAX_AGE_MS * 1000000) {
		len = e->stats_len;
		kept = xmalloc(len ? len : 1);
		memcpy(kept, e->stats, len);
	}
	pthread_mutex_unlock(&m->lock);
	if (kept && (*resp = kiyot__cell__v1__stats_response__unpack(NULL, len, kept)))
		return call_end(m, e, cell_id, 0, err);
	ret = m->agent.ops->stats(m->agent.self, e->conn, AGENT_CALL_TIMEOUT_MS, resp, err);
	if (ret == 0)
		cell_stats_keep(m, e, *resp);
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
