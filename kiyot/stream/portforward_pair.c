/*
 * portforward_pair.c: the pod's side of a port-forward connection (see portforward.c for
 * the client's).
 *
 * A pair's pod side is a TCP connection kiyot makes itself in the pod's network when the
 * provider's cells share the node (local cells: cells_dial), as other runtimes connect; else
 * a PortForward stream to the cell's agent, which makes the connection in the cell. Each pair
 * has a reader thread (pod side to a shared queue) and a writer thread (its own queue to the
 * pod side), so a slow connection stalls only itself; when a pair's queue toward the pod is
 * full, this side stops reading the client's socket until it drains (neither SPDY peer of
 * Kubernetes keeps to flow-control windows, so TCP is the only back-pressure).
 *
 * When the pod's side ends its output, the client gets the end of the data stream at once;
 * the pod may still be reading (a half-close, as `nc` makes when its stdin ends), so the
 * connection lasts while the client's bytes still flow to it, and ends when the client ends
 * its side, the pod stops taking bytes, or nothing has moved for PF_HALF_CLOSE_IDLE_NS.
 * (kubectl closes its local connection only once the error stream ends, and a client waiting
 * for the connection's end, as an HTTP client does, sends nothing: so the wait is on the
 * client's silence, not on its end. containerd waits a fixed second, however busy the client.)
 */
#include "portforward_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cells/cells.h"
#include "clock.h"
#include "stream_internal.h"
#include "xalloc.h"

static struct pf_msg *pf_msg_new(struct pf_pair *p, const void *data, size_t len)
{
	struct pf_msg *m = xcalloc(1, sizeof(*m) + len);

	m->pair = p;
	m->len = len;
	if (len && data) /* without data, the caller fills it */
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

/* The end of a pair's pod side, for the client: an error when it failed. */
static void pod_ended(struct pf_pair *p, const char *error)
{
	struct pf_msg *end = pf_msg_new(p, NULL, 0);

	end->end = true;
	if (error)
		end->error = xasprintf("an error occurred forwarding %u: %s", p->port, error);
	out_put(p->pf, end);
}

/*
 * The pod's side ended its output: the client learns it now, and the pair lives on while the
 * client's bytes still move to the pod (see the top of the file). Called on a pair's reader;
 * true when it ended because the client's end reached the pod's side.
 */
static bool pod_output_ended(struct pf_pair *p)
{
	struct pf *pf = p->pf;
	struct pf_msg *fin = pf_msg_new(p, NULL, 0);
	bool done;

	fin->fin = true;
	out_put(pf, fin);
	pthread_mutex_lock(&pf->mu);
	while (!pf->gone && !p->dropped && !p->client_done && !p->pod_failed) {
		int64_t left = p->moved_ns + PF_HALF_CLOSE_IDLE_NS - clock_mono_ns();
		struct timespec until;

		if (left <= 0)
			break;
		clock_gettime(CLOCK_REALTIME, &until);
		left += until.tv_nsec;
		until.tv_sec += (time_t)(left / 1000000000);
		until.tv_nsec = (long)(left % 1000000000);
		pthread_cond_timedwait(&pf->cond, &pf->mu, &until);
	}
	done = p->client_done;
	pthread_mutex_unlock(&pf->mu);
	return done;
}

/* The pod's bytes from kiyot's own connection. */
static void *sock_reader(void *arg)
{
	struct pf_pair *p = arg;
	uint8_t *buf = xmalloc(PF_READ_MAX);
	ssize_t n;

	while ((n = read(p->sock, buf, PF_READ_MAX)) > 0 || (n < 0 && errno == EINTR))
		if (n > 0)
			out_put(p->pf, pf_msg_new(p, buf, (size_t)n));
	free(buf);
	if (n == 0)
		pod_output_ended(p);
	pod_ended(p, n < 0 ? strerror(errno) : NULL);
	return NULL;
}

static void *pair_reader(void *arg)
{
	struct pf_pair *p = arg;
	struct err err = ERR_INIT;
	ProtobufCMessage *m = NULL;
	int ret;

	while ((ret = cells_stream_next(p->cs, &m, &err)) == 1) {
		const Kiyot__Cell__V1__PortForwardOutput *o = (const void *)m;
		bool closed = o->closed;

		if (o->data.len)
			out_put(p->pf, pf_msg_new(p, o->data.data, o->data.len));
		protobuf_c_message_free_unpacked(m, NULL);
		if (closed)
			break;
	}
	/* the pod's output ended: the agent still writes what the client sends, and ends the
	 * call once the client's end reached the pod (until then, ending it would lose what is
	 * still on its way) */
	if (ret == 1 && pod_output_ended(p))
		while ((ret = cells_stream_next(p->cs, &m, &err)) == 1)
			protobuf_c_message_free_unpacked(m, NULL);
	pod_ended(p, ret < 0 ? err.msg : NULL);
	return NULL;
}

/*
 * Takes what the client queued for a pair's agent stream, as one message: those that wait
 * are joined up to PF_SEND_MAX bytes (and the end, when it follows), since each message sent
 * costs a round through gRPC. NULL when nothing waits. Called with pf->mu held; *unblocked
 * says the queue dropped below its bound.
 */
static struct pf_msg *in_take(struct pf_pair *p, bool *unblocked)
{
	struct pf_msg *first = p->in_head, *last = first, *m;
	size_t total, off = 0;

	if (!first)
		return NULL;
	total = first->len;
	while (!last->end && last->next && total + last->next->len <= PF_SEND_MAX) {
		last = last->next;
		total += last->len;
	}
	p->in_head = last->next;
	if (!p->in_head)
		p->in_tail = NULL;
	*unblocked = p->in_bytes > PF_QUEUE_MAX && p->in_bytes - total <= PF_QUEUE_MAX;
	p->in_bytes -= total;
	last->next = NULL;
	if (first == last)
		return first;
	m = pf_msg_new(p, NULL, total);
	for (struct pf_msg *q = first, *next; q; q = next) {
		next = q->next;
		memcpy(m->data + off, q->data, q->len);
		off += q->len;
		m->end = q->end;
		free(q);
	}
	return m;
}

/* The client's side is done: the pod learns it (the agent's call may end). */
static void pod_close_send(struct pf_pair *p, struct err *err)
{
	if (p->sock >= 0)
		shutdown(p->sock, SHUT_WR);
	else
		cells_stream_close_send(p->cs, err);
}

/* Hands the client's bytes (and their end) to the pod's side; false when nothing more goes:
 * the end was sent, or the pod's side failed (its reader tells the client why). */
static bool pod_send(struct pf_pair *p, const struct pf_msg *m, struct err *err)
{
	Kiyot__Cell__V1__PortForwardInput in = KIYOT__CELL__V1__PORT_FORWARD_INPUT__INIT;

	if (p->sock >= 0) {
		if (m->len && !stream_write_all(p->sock, m->data, m->len)) {
			shutdown(p->sock, SHUT_RDWR);
			return false;
		}
	} else {
		in.data = (ProtobufCBinaryData){ m->len, (uint8_t *)m->data };
		in.close = m->end;
		if (cells_stream_send(p->cs, &in.base, err) < 0)
			return false;
	}
	if (m->end)
		pod_close_send(p, err);
	return !m->end;
}

static void *pair_writer(void *arg)
{
	struct pf_pair *p = arg;
	struct pf *pf = p->pf;
	struct err err = ERR_INIT;

	for (;;) {
		struct pf_msg *m;
		bool unblocked = false, more, end;

		pthread_mutex_lock(&pf->mu);
		while (!p->in_head && !p->in_closed && !pf->gone)
			pthread_cond_wait(&pf->cond, &pf->mu);
		m = in_take(p, &unblocked);
		if (m)
			pthread_cond_broadcast(&pf->cond);
		pthread_mutex_unlock(&pf->mu);
		if (unblocked)
			pf_poke(pf); /* the socket thread may read the client again */
		if (!m) {
			if (!pf->gone)
				pod_close_send(p, &err);
			return NULL;
		}
		more = pod_send(p, m, &err);
		end = m->end;
		free(m);
		pthread_mutex_lock(&pf->mu);
		p->moved_ns = clock_mono_ns();
		if (!more) {
			p->client_done = end;
			p->pod_failed = !end;
			pthread_cond_broadcast(&pf->cond);
		}
		pthread_mutex_unlock(&pf->mu);
		if (!more)
			return NULL;
	}
}

void pair_input(struct pf_pair *p, const uint8_t *data, size_t len, bool end)
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
	p->moved_ns = clock_mono_ns();
	pthread_cond_broadcast(&pf->cond);
	pthread_mutex_unlock(&pf->mu);
}

struct pf_pair *pair_new(struct pf *pf, const char *request_id, uint32_t port)
{
	struct pf_pair *p = xcalloc(1, sizeof(*p));

	p->pf = pf;
	p->request_id = xstrdup(request_id);
	p->port = port;
	p->sock = -1;
	p->moved_ns = clock_mono_ns();
	return p;
}

bool pair_live(const struct pf_pair *p)
{
	return p->cs || p->sock >= 0;
}

void pair_start(struct pf_pair *p)
{
	Kiyot__Cell__V1__PortForwardInput first = KIYOT__CELL__V1__PORT_FORWARD_INPUT__INIT;
	struct err err = ERR_INIT;
	int ret;

	first.port = p->port;
	first.host_network = p->pf->host_network;
	p->started = true;
	ret = cells_dial(p->pf->cells, p->pf->cell_id, (uint16_t)p->port, p->pf->host_network,
			 &err);
	if (ret == -ENOTSUP) {
		err_clear(&err);
		ret = cells_stream_open(p->pf->cells, p->pf->cell_id, "PortForward", &first.base,
					&kiyot__cell__v1__port_forward_output__descriptor, &p->cs,
					&err);
		if (ret == 0) {
			pthread_create(&p->reader, NULL, pair_reader, p);
			pthread_create(&p->writer, NULL, pair_writer, p);
			return;
		}
	}
	if (ret < 0) {
		pod_ended(p, err.msg);
		return;
	}
	p->sock = ret;
	pthread_create(&p->reader, NULL, sock_reader, p);
	pthread_create(&p->writer, NULL, pair_writer, p);
}

void pair_finish(struct pf *pf, struct pf_pair *p, bool cancel)
{
	if (p->cs && cancel)
		cells_stream_cancel(p->cs);
	if (p->sock >= 0) /* the pair is over: a writer blocked on the pod returns */
		shutdown(p->sock, SHUT_RDWR);
	pthread_mutex_lock(&pf->mu);
	p->in_closed = true;
	p->dropped = true;
	pthread_cond_broadcast(&pf->cond);
	pthread_mutex_unlock(&pf->mu);
	if (pair_live(p)) {
		pthread_join(p->writer, NULL);
		pthread_join(p->reader, NULL);
	}
	if (p->cs)
		cells_stream_free(p->cs);
	if (p->sock >= 0)
		close(p->sock);
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
