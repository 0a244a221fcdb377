/*
 * portforward.c: a port-forward session of the streaming server, in the two forms the
 * kubelet's streaming server serves.
 *
 * SPDY/3.1, protocol portforward.k8s.io (kubectl): for every connection the client opens a
 * pair of streams with the same requestID header, "error" and "data", each naming the port.
 * Once both are there, the pair becomes one PortForward stream to the cell's agent (a TCP
 * connection to 127.0.0.1:port in the pod): the data stream's bytes go in, the pod's bytes
 * come back on it; a failure is written on the error stream. Any number of pairs at once, up
 * to the session's stream bound.
 *
 * WebSocket (subprotocols v4.channel.k8s.io, v4.base64.channel.k8s.io, or none: binary): the
 * ports are fixed by the request, from its query (?port=80&port=81,82) or else from the CRI
 * request; port i gets channel 2i for data and 2i+1 for errors, and each channel starts with
 * the port as 2 little-endian bytes. Every port is one connection, made at once. v4 cannot
 * close a channel, so a connection that ends says nothing; once all have ended the WebSocket
 * is closed.
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
#include "stream_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "cells/cells.h"
#include "clock.h"
#include "http.h"
#include "log.h"
#include "spdy.h"
#include "ws.h"
#include "xalloc.h"

/* Bytes queued per direction and pair before the producer waits. */
#define PF_QUEUE_MAX (1024 * 1024)
/* The most of the client's bytes joined into one message to the agent. */
#define PF_SEND_MAX (256 * 1024)
/* The most of the pod's bytes read at once from a pair's own connection. */
#define PF_READ_MAX (128 * 1024)
/* After the pod's side ended its output, how long the connection lasts without a byte moving
 * from the client to the pod. */
#define PF_HALF_CLOSE_IDLE_NS (1000 * (int64_t)1000000)
/* Pairs at once (two streams each, within the SPDY session's bound). */
#define PF_MAX_PAIRS 32

struct pf_msg {
	struct pf_msg *next;
	struct pf_pair *pair;
	bool end;    /* to the client: the pod's side ended (error set if it failed) */
	bool fin;    /* to the client: the pod's output ended (it may still read) */
	char *error; /* to the client, with end */
	size_t len;
	uint8_t data[];
};

struct pf_pair {
	struct pf *pf;
	char *request_id;
	uint32_t port;
	uint32_t data_sid, error_sid; /* SPDY streams; over WebSocket, channels */
	struct cell_stream *cs;	      /* the pod side: the agent's stream, */
	int sock;		      /* or a connection of kiyot's own (-1 when none) */
	bool started, dropped;
	pthread_t reader, writer;
	/* client bytes for the agent; guarded by pf->mu */
	struct pf_msg *in_head, *in_tail;
	size_t in_bytes;
	bool in_closed;
	int64_t moved_ns; /* when the client's bytes last moved toward the pod */
	bool client_done; /* the client's end reached the pod */
	bool pod_failed;  /* the pod's side took no more of the client's bytes */
	size_t out_bytes; /* of this pair in pf->out */
};

struct pf {
	struct cellmgr *cells;
	const char *cell_id;
	bool host_network;
	int fd;
	struct spdy_session *sp; /* the client's protocol: one of the two */
	struct ws_session *ws;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct pf_msg *out_head, *out_tail; /* agent bytes for the client, all pairs */
	struct pf_pair *pairs[PF_MAX_PAIRS];
	int wake[2];
	bool gone;
	int live;  /* WebSocket: pairs whose connection has not ended */
	bool over; /* WebSocket: all ended, the close is sent */
};

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
	p->moved_ns = clock_mono_ns();
	pthread_cond_broadcast(&pf->cond);
	pthread_mutex_unlock(&pf->mu);
}

/* A pair for a connection to port, its pod side not yet made. */
static struct pf_pair *pair_new(struct pf *pf, const char *request_id, uint32_t port)
{
	struct pf_pair *p = xcalloc(1, sizeof(*p));

	p->pf = pf;
	p->request_id = xstrdup(request_id);
	p->port = port;
	p->sock = -1;
	p->moved_ns = clock_mono_ns();
	return p;
}

/* Whether the pair's pod side is there (its threads run). */
static bool pair_live(const struct pf_pair *p)
{
	return p->cs || p->sock >= 0;
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
		p = pair_new(pf, rid, (uint32_t)n);
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

/* Writes out what the client's protocol has queued; false when the client is gone. */
static bool pf_flush(struct pf *pf)
{
	const uint8_t *o;
	size_t n;

	for (;;) {
		o = pf->sp ? spdy_output(pf->sp, &n) : ws_output(pf->ws, &n);
		if (!o || !n)
			return true;
		if (!stream_write_all(pf->fd, o, n))
			return false;
		if (pf->sp)
			spdy_output_consume(pf->sp, n);
		else
			ws_output_consume(pf->ws, n);
	}
}

/* The bytes the client's protocol has queued. */
static size_t pf_pending(const struct pf *pf)
{
	size_t n = 0;

	if (pf->sp)
		spdy_output(pf->sp, &n);
	else
		ws_output(pf->ws, &n);
	return n;
}

/* Sends bytes on a pair's data or error stream (channel, over WebSocket). */
static void pf_send(struct pf *pf, uint32_t id, const void *data, size_t len)
{
	struct err err = ERR_INIT;

	if (pf->sp)
		spdy_send(pf->sp, id, data, len, false, &err);
	else if (len)
		ws_send(pf->ws, (uint8_t)id, data, len, &err);
}

/* A pair's connection ended: its error said, its streams closed (SPDY), the pair finished.
 * Over WebSocket the last one to end closes the session. */
static void pf_pair_ended(struct pf *pf, struct pf_pair *p, const char *error)
{
	struct err err = ERR_INIT;

	if (error)
		pf_send(pf, p->error_sid, error, strlen(error));
	if (pf->sp) {
		spdy_send(pf->sp, p->error_sid, NULL, 0, true, &err);
		spdy_send(pf->sp, p->data_sid, NULL, 0, true, &err);
	}
	pair_finish(pf, p, false);
	if (pf->ws && --pf->live == 0) {
		ws_close(pf->ws, WS_CLOSE_NORMAL, "", &err);
		pf->over = true;
	}
}

/* The pod's output ended: over SPDY the data stream's end (a second one, when the pair
 * ends, is refused by the session and says nothing); WebSocket v4 cannot end a channel. */
static void pf_output_ended(struct pf *pf, struct pf_pair *p)
{
	struct err err = ERR_INIT;

	if (pf->sp)
		spdy_send(pf->sp, p->data_sid, NULL, 0, true, &err);
}

/* Sends what the pods' sides queued; a pair whose pod side ended is finished. */
static bool pf_drain(struct pf *pf)
{
	for (;;) {
		struct pf_msg *m;

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
		if (m->end)
			pf_pair_ended(pf, m->pair, m->error);
		else if (m->fin)
			pf_output_ended(pf, m->pair);
		else
			pf_send(pf, m->pair->data_sid, m->data, m->len);
		free(m->error);
		free(m);
		/* what queued up goes out together, in writes of some size */
		if (pf_pending(pf) >= PF_SEND_MAX && !pf_flush(pf))
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
		if (p && pair_live(p) && ev->stream_id == p->data_sid)
			in_put(p, ev->data, ev->len, false);
		return true;
	case SPDY_EV_END:
		if (p && pair_live(p) && ev->stream_id == p->data_sid)
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

/* One WebSocket message: bytes for a port's connection (channel 2i); what the client sends
 * on an error channel or an unknown one is dropped, as the kubelet drops it. */
static bool pf_ws_event(struct pf *pf, const struct ws_event *ev)
{
	struct pf_pair *p;

	if (ev->type == WS_EV_CLOSE)
		return false;
	if (ev->type != WS_EV_DATA || ev->channel % 2 || ev->channel / 2 >= PF_MAX_PAIRS)
		return true;
	p = pf->pairs[ev->channel / 2];
	if (p && pair_live(p) && ev->len)
		in_put(p, ev->data, ev->len, false);
	return true;
}

/* Feeds bytes from the client; false when it ended the session or broke the protocol. */
static bool pf_feed(struct pf *pf, const uint8_t *data, size_t len)
{
	struct err err = ERR_INIT;
	size_t off = 0;

	for (;;) {
		struct spdy_event ev;
		struct ws_event wev;
		ssize_t n;
		bool more, none;

		if (pf->sp) {
			n = spdy_feed(pf->sp, data + off, len - off, &ev, &err);
			more = n >= 0 && pf_event(pf, &ev);
			none = ev.type == SPDY_EV_NONE;
		} else {
			n = ws_feed(pf->ws, data + off, len - off, &wev, &err);
			more = n >= 0 && pf_ws_event(pf, &wev);
			none = wev.type == WS_EV_NONE;
		}
		if (!more)
			return false;
		off += (size_t)n;
		if (none && off >= len)
			return true;
	}
}

/* Whether every pair's queue toward the agent has room for more of the client's bytes. */
static bool pf_room(struct pf *pf)
{
	bool room = true;

	pthread_mutex_lock(&pf->mu);
	for (int i = 0; i < PF_MAX_PAIRS; i++)
		if (pf->pairs[i] && pf->pairs[i]->in_bytes > PF_QUEUE_MAX)
			room = false;
	pthread_mutex_unlock(&pf->mu);
	return room;
}

/* The socket loop: client bytes in, the pods' bytes out, until either side ends it; then
 * every pair is finished. */
static int pf_run(struct pf *pf, const uint8_t *rest, size_t rest_len, struct err *err)
{
	uint8_t buf[65536];
	int ret = 0;

	if ((rest_len && !pf_feed(pf, rest, rest_len)) || !pf_flush(pf))
		ret = err_set(err, EPIPE, "the client went away");
	while (ret == 0 && !pf->over) {
		struct pollfd p[2] = { { pf->fd, pf_room(pf) ? POLLIN : 0, 0 },
				       { pf->wake[0], POLLIN, 0 } };
		ssize_t n;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents) {
			char drain[64];

			if (read(pf->wake[0], drain, sizeof(drain)) < 0) {
				/* nothing */
			}
			if (!pf_drain(pf))
				break;
		}
		if (!p[0].revents || pf->over)
			continue;
		n = read(pf->fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		if (!pf_feed(pf, buf, (size_t)n)) {
			pf_flush(pf); /* the GOAWAY or close saying why */
			break;
		}
		if (!pf_flush(pf))
			break;
	}
	pthread_mutex_lock(&pf->mu);
	pf->gone = true;
	pthread_cond_broadcast(&pf->cond);
	pthread_mutex_unlock(&pf->mu);
	for (int i = 0; i < PF_MAX_PAIRS; i++)
		if (pf->pairs[i])
			pair_finish(pf, pf->pairs[i], true);
	while (pf->out_head) {
		struct pf_msg *m = pf->out_head;

		pf->out_head = m->next;
		free(m->error);
		free(m);
	}
	return ret;
}

static int pf_init(struct pf *pf, struct cellmgr *cells, int fd, const struct stream_request *req,
		   struct err *err)
{
	*pf = (struct pf){
		.cells = cells, .cell_id = req->cell_id, .host_network = req->host_network, .fd = fd
	};
	if (pipe2(pf->wake, O_CLOEXEC | O_NONBLOCK) < 0)
		return err_errno(err, "pipe");
	pthread_mutex_init(&pf->mu, NULL);
	pthread_cond_init(&pf->cond, NULL);
	return 0;
}

static void pf_release(struct pf *pf)
{
	close(pf->wake[0]);
	close(pf->wake[1]);
	pthread_mutex_destroy(&pf->mu);
	pthread_cond_destroy(&pf->cond);
}

int stream_port_forward(struct cellmgr *cells, int fd, const struct stream_request *req,
			struct spdy_session *sp, const uint8_t *rest, size_t rest_len,
			struct err *err)
{
	struct pf pf;
	int ret = pf_init(&pf, cells, fd, req, err);

	if (ret < 0)
		return ret;
	pf.sp = sp;
	ret = pf_run(&pf, rest, rest_len, err);
	pf_release(&pf);
	return ret;
}

/* ---- over WebSocket ---- */

/* The subprotocols the kubelet's port-forward accepts (and none at all, which is binary). */
static const char *const pf_ws_protocols[] = { "v4.channel.k8s.io", "v4.base64.channel.k8s.io",
					       NULL };

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
		return (c | 0x20) - 'a' + 10;
	return -1;
}

/* Decodes the %XX escapes and '+' of a query's name or value s[0..n) into a new string, as
 * Go's url.ParseQuery does; NULL when an escape is broken (Go then skips the parameter). */
static char *query_unescape(const char *s, size_t n)
{
	char *out = xmalloc(n + 1), *o = out;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '+') {
			*o++ = ' ';
		} else if (s[i] != '%') {
			*o++ = s[i];
		} else if (n - i > 2 && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
			*o++ = (char)(hex_digit(s[i + 1]) << 4 | hex_digit(s[i + 2]));
			i += 2;
		} else {
			free(out);
			return NULL;
		}
	}
	*o = '\0';
	return out;
}

/* Appends the ports of one "port" value ("80" or "80,81") to ports[*n..max). */
static int parse_port_list(const char *v, int32_t *ports, size_t max, size_t *n, struct err *err)
{
	const char *s = v;

	if (!*v)
		return err_set(err, EINVAL, "query parameter \"port\" cannot be empty");
	for (;;) {
		size_t len = strcspn(s, ",");
		unsigned long port = 0;
		size_t i;

		for (i = 0; i < len && s[i] >= '0' && s[i] <= '9' && port <= 65535; i++)
			port = port * 10 + (unsigned long)(s[i] - '0');
		if (len == 0 || i < len || port > 65535)
			return err_set(err, EINVAL, "unable to parse \"%s\" as a port", v);
		if (port < 1)
			return err_set(err, EINVAL, "port \"%s\" must be > 0", v);
		if (*n == max)
			return err_set(err, E2BIG, "more than %zu ports in one port-forward", max);
		ports[(*n)++] = (int32_t)port;
		if (!s[len])
			return 0;
		s += len + 1;
	}
}

int stream_ports_of_query(const char *target, int32_t *ports, size_t max, size_t *n,
			  struct err *err)
{
	const char *q = strchr(target, '?');

	*n = 0;
	while (q && *q) {
		size_t len = strcspn(++q, "&");
		const char *eq = memchr(q, '=', len);
		size_t klen = eq ? (size_t)(eq - q) : len;
		_cleanup_free_ char *key = query_unescape(q, klen);
		_cleanup_free_ char *value = eq ? query_unescape(eq + 1, len - klen - 1) : NULL;
		int ret = 0;

		if (key && strcmp(key, "port") == 0 && (value || !eq))
			ret = parse_port_list(value ? value : "", ports, max, n, err);
		if (ret < 0)
			return ret;
		q += len;
	}
	return 0;
}

/* The ports of a WebSocket port-forward: the URL's, else the CRI request's. */
static int ws_ports(const struct http_req *http, const struct stream_request *req, int32_t *ports,
		    size_t *n, struct err *err)
{
	int ret = stream_ports_of_query(http->target, ports, PF_MAX_PAIRS, n, err);

	if (ret < 0 || *n)
		return ret;
	if (req->n_ports > PF_MAX_PAIRS)
		return err_set(err, E2BIG, "more than %d ports in one port-forward", PF_MAX_PAIRS);
	for (size_t i = 0; i < req->n_ports; i++)
		ports[(*n)++] = req->ports[i];
	if (*n == 0)
		return err_set(err, EINVAL, "query parameter \"port\" is required");
	return 0;
}

/* Answers the upgrade with a subprotocol the kubelet's port-forward speaks (403 when the
 * client offers none of them), or an HTTP error; the session is then in pf->ws. */
static int ws_upgrade(struct pf *pf, const struct http_req *http, size_t nports, struct err *err)
{
	const char *offered = http_header_get(http, "Sec-WebSocket-Protocol");
	const char *proto = http_negotiate(http, "Sec-WebSocket-Protocol", pf_ws_protocols);
	struct buf out = BUF_INIT;
	enum ws_codec codec = WS_CODEC_BINARY;
	int ret;

	if (offered && *offered && !proto) {
		ret = err_set(err, EPROTO,
			      "requested protocol(s) are not supported: %s; port-forward speaks "
			      "v4.channel.k8s.io, v4.base64.channel.k8s.io",
			      offered);
		stream_answer_error(pf->fd, 403, err->msg);
		return ret;
	}
	ws_codec_of(proto, &codec);
	/* base64 names a channel with one digit */
	if (codec == WS_CODEC_BASE64 && nports > 5) {
		ret = err_set(err, EINVAL,
			      "%zu ports: v4.base64.channel.k8s.io carries at most 5; use "
			      "v4.channel.k8s.io",
			      nports);
		stream_answer_error(pf->fd, 400, err->msg);
		return ret;
	}
	ret = http_answer_ws(&out, http, proto, err);
	if (ret < 0) {
		stream_answer_error(pf->fd, 400, err->msg);
	} else if (!stream_write_all(pf->fd, (const uint8_t *)out.data, out.len)) {
		ret = err_set(err, EPIPE, "the client went away");
	} else {
		pf->ws = ws_session_new(codec, err);
		ret = pf->ws ? 0 : -err->code;
	}
	buf_release(&out);
	return ret;
}

/* Port i's pair on channels 2i and 2i+1, each starting with the port, its connection made. */
static void ws_start_pairs(struct pf *pf, const int32_t *ports, size_t nports)
{
	struct err err = ERR_INIT;

	for (size_t i = 0; i < nports; i++) {
		struct pf_pair *p = pair_new(pf, "", (uint32_t)ports[i]);
		const uint8_t le[2] = { (uint8_t)ports[i], (uint8_t)(ports[i] >> 8) };

		p->data_sid = (uint32_t)(2 * i);
		p->error_sid = (uint32_t)(2 * i + 1);
		pf->pairs[i] = p;
		ws_send(pf->ws, (uint8_t)p->data_sid, le, sizeof(le), &err);
		ws_send(pf->ws, (uint8_t)p->error_sid, le, sizeof(le), &err);
	}
	pf->live = (int)nports;
	for (size_t i = 0; i < nports; i++)
		pair_start(pf->pairs[i]);
}

int stream_port_forward_ws(struct cellmgr *cells, int fd, const struct http_req *http,
			   const struct stream_request *req, const uint8_t *rest, size_t rest_len,
			   struct err *err)
{
	int32_t ports[PF_MAX_PAIRS];
	size_t nports = 0;
	struct pf pf;
	int ret = pf_init(&pf, cells, fd, req, err);

	if (ret < 0)
		return ret;
	ret = ws_ports(http, req, ports, &nports, err);
	if (ret < 0)
		stream_answer_error(fd, 400, err->msg);
	else
		ret = ws_upgrade(&pf, http, nports, err);
	if (ret == 0) {
		ws_start_pairs(&pf, ports, nports);
		ret = pf_run(&pf, rest, rest_len, err);
		pf_flush(&pf); /* the close, when every connection ended */
	}
	ws_session_free(pf.ws);
	pf_release(&pf);
	return ret;
}
