/*
 * portforward.c: a port-forward session of the streaming server (SPDY/3.1, protocol
 * portforward.k8s.io, as kubectl and the kubelet speak it). For every connection the client
 * opens a pair of streams with the same requestID header: "error" and "data", each naming the
 * port. Once both are there, the pair becomes one PortForward stream to the cell's agent (a
 * TCP connection to 127.0.0.1:port in the pod): the data stream's bytes go in, the pod's
 * bytes come back on it; a failure is written on the error stream. Any number of pairs at
 * once, up to the session's stream bound; each has a reader thread (agent to a shared queue)
 * and a writer thread (its own queue to the agent), so a slow connection stalls only itself.
 */
#include "stream_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cells.h"
#include "log.h"
#include "spdy.h"
#include "xalloc.h"

/* Bytes queued per direction and pair before the producer waits. */
#define PF_QUEUE_MAX (1024 * 1024)
/* Pairs at once (two streams each, within the SPDY session's bound). */
#define PF_MAX_PAIRS 32

struct pf_msg {
	struct pf_msg *next;
	struct pf_pair *pair;
	bool end;    /* to the client: the pod's side ended (error set if it failed) */
	char *error; /* to the client, with end */
	size_t len;
	uint8_t data[];
};

struct pf_pair {
	struct pf *pf;
	char *request_id;
	uint32_t port;
	uint32_t data_sid, error_sid;
	struct cell_stream *cs;
	bool started, dropped;
	pthread_t reader, writer;
	/* client bytes for the agent; guarded by pf->mu */
	struct pf_msg *in_head, *in_tail;
	size_t in_bytes;
	bool in_closed;
	size_t out_bytes; /* of this pair in pf->out */
};

struct pf {
	struct cellmgr *cells;
	const char *cell_id;
	bool host_network;
	int fd;
	struct spdy_session *sp;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct pf_msg *out_head, *out_tail; /* agent bytes for the client, all pairs */
	struct pf_pair *pairs[PF_MAX_PAIRS];
	int wake[2];
	bool gone;
};

static struct pf_msg *pf_msg_new(struct pf_pair *p, const void *data, size_t len)
{
	struct pf_msg *m = xcalloc(1, sizeof(*m) + len);

	m->pair = p;
	m->len = len;
	if (len)
		memcpy(m->data, data, len);
	return m;
}

static void pf_poke(struct pf *pf)
{
	if (write(pf->wake[1], "x", 1) < 0) {
		/* full: the socket thread is awake anyway */
	}
}

/* The pod's bytes for the client; waits while this pair has too much queued. */
static void out_put(struct pf *pf, struct pf_msg *m)
{
	pthread_mutex_lock(&pf->mu);
	while (m->pair->out_bytes > PF_QUEUE_MAX && !pf->gone && !m->pair->dropped)
		pthread_cond_wait(&pf->cond, &pf->mu);
	if (pf->gone || m->pair->dropped) {
		pthread_mutex_unlock(&pf->mu);
		free(m->error);
		free(m);
		return;
	}
	if (pf->out_tail)
		pf->out_tail->next = m;
	else
		pf->out_head = m;
	pf->out_tail = m;
	m->pair->out_bytes += m->len;
	pthread_mutex_unlock(&pf->mu);
	pf_poke(pf);
}

static void *pair_reader(void *arg)
{
	struct pf_pair *p = arg;
	struct err err = ERR_INIT;
	ProtobufCMessage *m = NULL;
	struct pf_msg *end;
	int ret;

	while ((ret = cells_stream_next(p->cs, &m, &err)) == 1) {
		const Kiyot__Cell__V1__PortForwardOutput *o = (const void *)m;

		if (o->data.len)
			out_put(p->pf, pf_msg_new(p, o->data.data, o->data.len));
		protobuf_c_message_free_unpacked(m, NULL);
	}
	end = pf_msg_new(p, NULL, 0);
	end->end = true;
	if (ret < 0)
		end->error = xasprintf("an error occurred forwarding %u: %s", p->port, err.msg);
	out_put(p->pf, end);
	return NULL;
}

static void *pair_writer(void *arg)
{
	struct pf_pair *p = arg;
	struct pf *pf = p->pf;
	struct err err = ERR_INIT;

	for (;;) {
		Kiyot__Cell__V1__PortForwardInput in = KIYOT__CELL__V1__PORT_FORWARD_INPUT__INIT;
		struct pf_msg *m;

		pthread_mutex_lock(&pf->mu);
		while (!p->in_head && !p->in_closed && !pf->gone)
			pthread_cond_wait(&pf->cond, &pf->mu);
		m = p->in_head;
		if (m) {
			p->in_head = m->next;
			if (!p->in_head)
				p->in_tail = NULL;
			p->in_bytes -= m->len;
			pthread_cond_broadcast(&pf->cond);
		}
		pthread_mutex_unlock(&pf->mu);
		if (!m) {
			if (!pf->gone)
				cells_stream_close_send(p->cs, &err);
			return NULL;
		}
		in.data = (ProtobufCBinaryData){ m->len, m->data };
		in.close = m->end;
		if (cells_stream_send(p->cs, &in.base, &err) < 0 ||
		    (m->end && cells_stream_close_send(p->cs, &err) < 0) || m->end) {
			free(m); /* the client's side is done: the agent's call may end */
			return NULL;
		}
		free(m);
	}
}

/* Client bytes (or the end of them) for a pair's agent stream. */
static void in_put(struct pf_pair *p, const uint8_t *data, size_t len, bool end)
{
	struct pf *pf = p->pf;
	struct pf_msg *m = pf_msg_new(p, data, len);

	m->end = end;
	pthread_mutex_lock(&pf->mu);
	if (p->in_tail)
		p->in_tail->next = m;
	else
		p->in_head = m;
	p->in_tail = m;
	p->in_bytes += len;
	pthread_cond_broadcast(&pf->cond);
	pthread_mutex_unlock(&pf->mu);
}

static struct pf_pair *pair_of_stream(struct pf *pf, uint32_t sid)
{
	for (int i = 0; i < PF_MAX_PAIRS; i++)
		if (pf->pairs[i] &&
		    (pf->pairs[i]->data_sid == sid || pf->pairs[i]->error_sid == sid))
			return pf->pairs[i];
	return NULL;
}

/* Starts a pair's agent stream once both its streams are there. */
static void pair_start(struct pf_pair *p)
{
	Kiyot__Cell__V1__PortForwardInput first = KIYOT__CELL__V1__PORT_FORWARD_INPUT__INIT;
	struct err err = ERR_INIT;

	first.port = p->port;
	first.host_network = p->pf->host_network;
	p->started = true;
	if (cells_stream_open(p->pf->cells, p->pf->cell_id, "PortForward", &first.base,
			      &kiyot__cell__v1__port_forward_output__descriptor, &p->cs,
			      &err) < 0) {
		struct pf_msg *end = pf_msg_new(p, NULL, 0);

		end->end = true;
		end->error = xasprintf("an error occurred forwarding %u: %s", p->port, err.msg);
		out_put(p->pf, end);
		return;
	}
	pthread_create(&p->reader, NULL, pair_reader, p);
	pthread_create(&p->writer, NULL, pair_writer, p);
}

/* A new stream of the client: half of a pair, by requestID. */
static void pf_new_stream(struct pf *pf, const struct spdy_event *ev)
{
	const char *type = spdy_header_get(ev->headers, ev->nheaders, "streamtype");
	const char *port = spdy_header_get(ev->headers, ev->nheaders, "port");
	const char *rid = spdy_header_get(ev->headers, ev->nheaders, "requestid");
	struct pf_pair *p = NULL;
	struct err err = ERR_INIT;
	char *end = NULL;
	long n = port ? strtol(port, &end, 10) : 0;
	int free_slot = -1;

	if (!type || !rid || (strcmp(type, "data") != 0 && strcmp(type, "error") != 0) || !end ||
	    *end || n < 1 || n > 65535) {
		spdy_reset(pf->sp, ev->stream_id, SPDY_PROTOCOL_ERROR, &err);
		return;
	}
	for (int i = 0; i < PF_MAX_PAIRS; i++) {
		if (pf->pairs[i] && strcmp(pf->pairs[i]->request_id, rid) == 0)
			p = pf->pairs[i];
		else if (!pf->pairs[i] && free_slot < 0)
			free_slot = i;
	}
	if (!p && free_slot < 0) {
		spdy_reset(pf->sp, ev->stream_id, SPDY_REFUSED_STREAM, &err);
		return;
	}
	if (!p) {
		p = xcalloc(1, sizeof(*p));
		p->pf = pf;
		p->request_id = xstrdup(rid);
		p->port = (uint32_t)n;
		pf->pairs[free_slot] = p;
	}
	if (strcmp(type, "data") == 0)
		p->data_sid = ev->stream_id;
	else
		p->error_sid = ev->stream_id;
	spdy_reply(pf->sp, ev->stream_id, NULL, 0, false, &err);
	if (p->data_sid && p->error_sid && !p->started)
		pair_start(p);
}

/* Ends a pair: its threads joined, its streams closed, its slot free. */
static void pair_finish(struct pf *pf, struct pf_pair *p, bool cancel)
{
	if (p->cs && cancel)
		cells_stream_cancel(p->cs);
	pthread_mutex_lock(&pf->mu);
	p->in_closed = true;
	p->dropped = true;
	pthread_cond_broadcast(&pf->cond);
	pthread_mutex_unlock(&pf->mu);
	if (p->cs) {
		pthread_join(p->writer, NULL);
		pthread_join(p->reader, NULL);
		cells_stream_free(p->cs);
	}
	/* what is still queued for the client from this pair goes with it */
	pthread_mutex_lock(&pf->mu);
	for (struct pf_msg **pp = &pf->out_head; *pp;) {
		struct pf_msg *m = *pp;

		if (m->pair == p) {
			*pp = m->next;
			free(m->error);
			free(m);
		} else {
			pp = &m->next;
		}
	}
	pf->out_tail = NULL;
	for (struct pf_msg *m = pf->out_head; m; m = m->next)
		pf->out_tail = m;
	pthread_mutex_unlock(&pf->mu);
	while (p->in_head) {
		struct pf_msg *m = p->in_head;

		p->in_head = m->next;
		free(m);
	}
	for (int i = 0; i < PF_MAX_PAIRS; i++)
		if (pf->pairs[i] == p)
			pf->pairs[i] = NULL;
	free(p->request_id);
	free(p);
}

static bool pf_flush(struct pf *pf)
{
	const uint8_t *o;
	size_t n;

	while ((o = spdy_output(pf->sp, &n)) && n) {
		if (!stream_write_all(pf->fd, o, n))
			return false;
		spdy_output_consume(pf->sp, n);
	}
	return true;
}

/* Sends what the pods' sides queued; a pair whose pod side ended is finished. */
static bool pf_drain(struct pf *pf)
{
	struct err err = ERR_INIT;

	for (;;) {
		struct pf_msg *m;
		struct pf_pair *p;

		pthread_mutex_lock(&pf->mu);
		m = pf->out_head;
		if (m) {
			pf->out_head = m->next;
			if (!pf->out_head)
				pf->out_tail = NULL;
			m->pair->out_bytes -= m->len;
			pthread_cond_broadcast(&pf->cond);
		}
		pthread_mutex_unlock(&pf->mu);
		if (!m)
			return pf_flush(pf);
		p = m->pair;
		if (!m->end) {
			spdy_send(pf->sp, p->data_sid, m->data, m->len, false, &err);
		} else {
			if (m->error)
				spdy_send(pf->sp, p->error_sid, m->error, strlen(m->error), false,
					  &err);
			spdy_send(pf->sp, p->error_sid, NULL, 0, true, &err);
			spdy_send(pf->sp, p->data_sid, NULL, 0, true, &err);
			pair_finish(pf, p, false);
		}
		free(m->error);
		free(m);
		if (!pf_flush(pf))
			return false;
	}
}

static bool pf_event(struct pf *pf, const struct spdy_event *ev)
{
	struct pf_pair *p = ev->type == SPDY_EV_STREAM ? NULL : pair_of_stream(pf, ev->stream_id);

	switch (ev->type) {
	case SPDY_EV_STREAM:
		pf_new_stream(pf, ev);
		return true;
	case SPDY_EV_DATA:
		spdy_consume(pf->sp, ev->stream_id, ev->len);
		if (p && p->cs && ev->stream_id == p->data_sid)
			in_put(p, ev->data, ev->len, false);
		return true;
	case SPDY_EV_END:
		if (p && p->cs && ev->stream_id == p->data_sid)
			in_put(p, NULL, 0, true);
		return true;
	case SPDY_EV_RESET:
		if (p)
			pair_finish(pf, p, true);
		return true;
	case SPDY_EV_GOAWAY:
		return false;
	default:
		return true;
	}
}

static bool pf_feed(struct pf *pf, const uint8_t *data, size_t len)
{
	struct err err = ERR_INIT;
	size_t off = 0;

	for (;;) {
		struct spdy_event ev;
		ssize_t n = spdy_feed(pf->sp, data + off, len - off, &ev, &err);

		if (n < 0 || !pf_event(pf, &ev))
			return false;
		off += (size_t)n;
		if (ev.type == SPDY_EV_NONE && off >= len)
			return true;
	}
}

int stream_port_forward(struct cellmgr *cells, int fd, const struct stream_request *req,
			struct spdy_session *sp, const uint8_t *rest, size_t rest_len,
			struct err *err)
{
	struct pf pf = { .cells = cells,
			 .cell_id = req->cell_id,
			 .host_network = req->host_network,
			 .fd = fd,
			 .sp = sp };
	uint8_t buf[16384];
	int ret = 0;

	pthread_mutex_init(&pf.mu, NULL);
	pthread_cond_init(&pf.cond, NULL);
	if (pipe2(pf.wake, O_CLOEXEC | O_NONBLOCK) < 0)
		return err_errno(err, "pipe");
	if ((rest_len && !pf_feed(&pf, rest, rest_len)) || !pf_flush(&pf))
		ret = err_set(err, EPIPE, "the client went away");
	while (ret == 0) {
		struct pollfd p[2] = { { fd, POLLIN, 0 }, { pf.wake[0], POLLIN, 0 } };
		ssize_t n;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents) {
			char drain[64];

			if (read(pf.wake[0], drain, sizeof(drain)) < 0) {
				/* nothing */
			}
			if (!pf_drain(&pf))
				break;
		}
		if (!p[0].revents)
			continue;
		n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		if (!pf_feed(&pf, buf, (size_t)n)) {
			pf_flush(&pf); /* the GOAWAY saying why */
			break;
		}
		if (!pf_flush(&pf))
			break;
	}
	pthread_mutex_lock(&pf.mu);
	pf.gone = true;
	pthread_cond_broadcast(&pf.cond);
	pthread_mutex_unlock(&pf.mu);
	for (int i = 0; i < PF_MAX_PAIRS; i++)
		if (pf.pairs[i])
			pair_finish(&pf, pf.pairs[i], true);
	while (pf.out_head) {
		struct pf_msg *m = pf.out_head;

		pf.out_head = m->next;
		free(m->error);
		free(m);
	}
	close(pf.wake[0]);
	close(pf.wake[1]);
	pthread_mutex_destroy(&pf.mu);
	pthread_cond_destroy(&pf.cond);
	return ret;
}
