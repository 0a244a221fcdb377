/*
 * portforward_pair.c: the pod's side of a port-forward connection (see portforward.c for
 * the client's).
 *
 * A pair's pod side is a TCP connection kiyot makes itself in the pod's network when the
 * provider's cells share the node (local cells: cells_dial), as other runtimes connect; else
 * a PortForward stream to the cell's agent, which makes the connection in the cell. Either is
 * driven from the streaming server's loop: the socket non-blocking, the agent's stream one
 * message asked for and one sent at a time. Each pair queues the client's bytes for its pod;
 * when a queue is full the client is not read until it drains (neither SPDY peer of
 * Kubernetes keeps to flow-control windows, so TCP is the only back-pressure), and while the
 * client has too much to read no pod is read.
 *
 * When the pod's side ends its output, the client gets the end of the data stream at once;
 * the pod may still be reading (a half-close, as `nc` makes when its stdin ends), so the
 * connection lasts while the client's bytes still flow to it, and ends when the client ends
 * its side, the pod stops taking bytes, or nothing has moved for PF_HALF_CLOSE_IDLE_MS.
 * (kubectl closes its local connection only once the error stream ends, and a client waiting
 * for the connection's end, as an HTTP client does, sends nothing: so the wait is on the
 * client's silence, not on its end. containerd waits a fixed second, however busy the client.)
 */
#include "portforward_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cellagent.pb-c.h"
#include "cells/cells.h"
#include "clock.h"
#include "evloop.h"
#include "xalloc.h"

void pairs_sweep(struct pf *pf)
{
	for (struct pf_pair **pp = &pf->all; *pp;) {
		struct pf_pair *p = *pp;

		if (!p->ended || p->sock >= 0 || (p->as.cs && !p->as.ended)) {
			pp = &p->next_all;
			continue;
		}
		*pp = p->next_all;
		evloop_timer_del(p->idle);
		astream_free(&p->as);
		chunkq_drop(&p->in);
		free(p->request_id);
		free(p);
	}
}

static void sock_close(struct pf_pair *p)
{
	if (p->sock < 0)
		return;
	evloop_io_del(p->sio);
	p->sio = NULL;
	close(p->sock);
	p->sock = -1;
}

/* The pair is over: the client is told (tell: with error if any; not when it reset the pair
 * or left), and its pod side winds down: the socket closes, the agent's stream ends by itself
 * when the client's end reached it (ending it sooner would lose what is still on its way) and
 * is cancelled otherwise. pairs_sweep frees it once its stream ended. */
static void pair_close(struct pf_pair *p, const char *error, bool tell)
{
	if (p->ended)
		return;
	p->ended = true;
	evloop_timer_del(p->idle);
	p->idle = NULL;
	chunkq_drop(&p->in);
	sock_close(p);
	if (p->as.cs && !p->as.ended) {
		if (p->client_done && tell)
			astream_read(&p->as);
		else
			astream_cancel(&p->as);
	}
	pf_pair_ended(p->pf, p, error, tell);
}

static void pair_end(struct pf_pair *p, const char *error)
{
	pair_close(p, error, true);
}

void pair_drop(struct pf_pair *p)
{
	pair_close(p, NULL, false);
}

static void idle_check(void *arg);

/* After the pod's output ended: the pair ends once the client's end reached the pod, or
 * after PF_HALF_CLOSE_IDLE_MS without a byte of the client's moving. */
static void half_close_check(struct pf_pair *p)
{
	int64_t idle_ms;

	if (!p->out_ended || p->ended)
		return;
	if (p->client_done) {
		pair_end(p, NULL);
		return;
	}
	idle_ms = (clock_mono_ns() - p->moved_ns) / 1000000;
	if (idle_ms >= PF_HALF_CLOSE_IDLE_MS && !chunkq_head(&p->in)) {
		pair_end(p, NULL);
		return;
	}
	if (!p->idle)
		p->idle = evloop_timer_add(stream_loop(p->pf->srv), PF_HALF_CLOSE_IDLE_MS - idle_ms,
					   idle_check, p);
}

static void idle_check(void *arg)
{
	struct pf_pair *p = arg;
	struct pf *pf = pf_enter(p->pf);

	p->idle = NULL;
	half_close_check(p);
	pf_leave(pf);
}

static void output_ended(struct pf_pair *p)
{
	if (p->out_ended)
		return;
	p->out_ended = true;
	pf_pod_output_ended(p->pf, p);
	half_close_check(p);
}

/* ---- the pair's own connection ---- */

static void sock_update(struct pf_pair *p)
{
	uint32_t ev = 0;

	if (p->sock < 0)
		return;
	if (!p->out_ended && !p->pf->out_paused)
		ev |= EPOLLIN;
	if (chunkq_head(&p->in))
		ev |= EPOLLOUT;
	if (evloop_io_events(p->sio) != ev)
		evloop_io_set(p->sio, ev);
}

/* Writes the client's bytes to the pod as far as the socket takes them. */
static void sock_push(struct pf_pair *p)
{
	size_t before = p->in.bytes;
	struct chunk *k;

	while ((k = chunkq_head(&p->in))) {
		ssize_t n = 0;

		if (k->off < k->len) {
			n = send(p->sock, k->data + k->off, k->len - k->off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				break;
			if (n < 0) {
				pair_end(p, strerror(errno));
				return;
			}
			p->moved_ns = clock_mono_ns();
		}
		if (chunkq_advance(&p->in, (size_t)n)) {
			shutdown(p->sock, SHUT_WR);
			p->client_done = true;
		}
	}
	sock_update(p);
	if (before > PF_QUEUE_MAX && p->in.bytes <= PF_QUEUE_MAX)
		pf_update_pause(p->pf);
	if (p->client_done)
		half_close_check(p);
}

/* The error a socket reports, as text. */
static const char *sock_error(int fd)
{
	int e = 0;
	socklen_t len = sizeof(e);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0 || !e)
		e = ECONNRESET;
	return strerror(e);
}

static void sock_read(struct pf_pair *p, uint32_t events)
{
	bool hup = events & (EPOLLHUP | EPOLLERR);
	uint8_t buf[PF_READ_MAX]; /* the loop's thread has a stack to spare */
	ssize_t n;

	if (p->out_ended) {
		/* a socket shut both ways (or reset) is reported without end: the pod takes
		 * nothing more */
		if (hup)
			pair_end(p, (events & EPOLLERR) ? sock_error(p->sock) : NULL);
		return;
	}
	/* a hang-up is read even while the client is behind: it would be reported again and
	 * again, and what is left to read is at most the socket's buffer */
	if (!(events & EPOLLIN) && !hup)
		return;
	if (p->pf->out_paused && !hup)
		return;
	n = read(p->sock, buf, sizeof(buf));
	if (n > 0)
		pf_pod_data(p->pf, p, buf, (size_t)n);
	if (n == 0)
		output_ended(p);
	else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		pair_end(p, strerror(errno));
	else if (!p->ended)
		sock_update(p);
}

static void sock_io(void *arg, uint32_t events)
{
	struct pf_pair *p = arg;
	struct pf *pf = pf_enter(p->pf);

	if (events & EPOLLOUT)
		sock_push(p);
	if (!p->ended)
		sock_read(p, events);
	pf_leave(pf);
}

/* ---- the agent's stream ---- */

static void agent_push(struct pf_pair *p)
{
	Kiyot__Cell__V1__PortForwardInput in = KIYOT__CELL__V1__PORT_FORWARD_INPUT__INIT;
	struct err err = ERR_INIT;
	size_t before = p->in.bytes;
	struct chunk *k;

	/* what waits goes as one message: each costs a round through gRPC */
	if (p->as.sending || p->as.ended || p->ended || !(k = chunkq_take(&p->in, PF_SEND_MAX)))
		return;
	in.data = (ProtobufCBinaryData){ k->len, k->data };
	in.close = k->end;
	if (astream_send(&p->as, &in.base, &err) < 0) {
		free(k);
		pair_end(p, err.msg);
		return;
	}
	p->moved_ns = clock_mono_ns();
	if (k->end) {
		astream_close_send(&p->as);
		p->client_done = true;
	}
	free(k);
	if (before > PF_QUEUE_MAX && p->in.bytes <= PF_QUEUE_MAX)
		pf_update_pause(p->pf);
	if (p->client_done)
		half_close_check(p);
}

static void agent_msg(void *owner, ProtobufCMessage *m)
{
	struct pf_pair *p = owner;
	struct pf *pf = pf_enter(p->pf);
	const Kiyot__Cell__V1__PortForwardOutput *o = (const void *)m;
	bool closed = o->closed;

	if (!p->ended && o->data.len)
		pf_pod_data(pf, p, o->data.data, o->data.len);
	protobuf_c_message_free_unpacked(m, NULL);
	if (p->ended)
		astream_read(&p->as); /* on to the stream's end */
	else if (closed)
		output_ended(p);
	else if (!pf->out_paused)
		astream_read(&p->as);
	pf_leave(pf);
}

static void agent_sent(void *owner, int ret)
{
	struct pf_pair *p = owner;
	struct pf *pf = pf_enter(p->pf);

	if (ret < 0 && !p->ended) {
		/* the agent's side stopped taking bytes: its end says why */
		chunkq_drop(&p->in);
		pf_update_pause(pf);
	} else {
		agent_push(p);
	}
	pf_leave(pf);
}

static void agent_end(void *owner, int ret, const char *error)
{
	struct pf_pair *p = owner;
	struct pf *pf = pf_enter(p->pf);

	(void)ret;
	if (!p->ended)
		pair_end(p, error);
	pf_leave(pf);
}

static const struct astream_ops agent_ops = { agent_msg, agent_sent, agent_end };

/* ---- the pair ---- */

struct pf_pair *pair_new(struct pf *pf, const char *request_id, uint32_t port)
{
	struct pf_pair *p;
	int slot;

	for (slot = 0; slot < PF_MAX_PAIRS && pf->pairs[slot]; slot++)
		;
	if (slot == PF_MAX_PAIRS)
		return NULL;
	p = xcalloc(1, sizeof(*p));
	p->pf = pf;
	p->request_id = xstrdup(request_id);
	p->port = port;
	p->sock = -1;
	p->moved_ns = clock_mono_ns();
	pf->pairs[slot] = p;
	p->next_all = pf->all;
	pf->all = p;
	return p;
}

bool pair_live(const struct pf_pair *p)
{
	return !p->ended && (p->as.cs || p->sock >= 0);
}

bool pair_full(const struct pf_pair *p)
{
	return p->in.bytes > PF_QUEUE_MAX;
}

void pair_input(struct pf_pair *p, const uint8_t *data, size_t len, bool end)
{
	if (!pair_live(p) || p->end_queued || p->client_done)
		return;
	chunkq_put(&p->in, data, len, end);
	p->end_queued = end;
	p->moved_ns = clock_mono_ns();
	if (p->sock >= 0)
		sock_push(p);
	else
		agent_push(p);
	if (pair_full(p))
		pf_update_pause(p->pf);
}

void pair_output_update(struct pf_pair *p)
{
	if (p->ended || p->out_ended)
		return;
	if (p->sock >= 0)
		sock_update(p);
	else if (p->as.cs)
		astream_read(&p->as);
}

void pair_start(struct pf_pair *p)
{
	Kiyot__Cell__V1__PortForwardInput first = KIYOT__CELL__V1__PORT_FORWARD_INPUT__INIT;
	struct pf *pf = p->pf;
	struct err err = ERR_INIT;
	int ret;

	first.port = p->port;
	first.host_network = pf->req->host_network;
	p->started = true;
	ret = cells_dial(pf->c->cells, pf->req->cell_id, (uint16_t)p->port, pf->req->host_network,
			 &err);
	if (ret == -ENOTSUP) {
		err_clear(&err);
		ret = astream_open(&p->as, pf->c, pf->req->cell_id, "PortForward", &first.base,
				   &kiyot__cell__v1__port_forward_output__descriptor, &agent_ops, p,
				   &err);
		if (ret == 0) {
			if (!pf->out_paused)
				astream_read(&p->as);
			return;
		}
	}
	if (ret < 0) {
		pair_end(p, err.msg);
		return;
	}
	p->sock = ret;
	fcntl(p->sock, F_SETFL, fcntl(p->sock, F_GETFL) | O_NONBLOCK);
	p->sio = evloop_io_add(pf->c->loop, p->sock, 0, sock_io, p);
	sock_update(p);
}
