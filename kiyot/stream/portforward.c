/*
 * portforward.c: a port-forward session of the streaming server, in the two forms the
 * kubelet's streaming server serves.
 *
 * SPDY/3.1, protocol portforward.k8s.io (kubectl): for every connection the client opens a
 * pair of streams with the same requestID header, "error" and "data", each naming the port.
 * Once both are there, the pair becomes one TCP connection to 127.0.0.1:port in the pod: the
 * data stream's bytes go in, the pod's bytes come back on it; a failure is written on the
 * error stream. Any number of pairs at once, up
 * to the session's stream bound.
 *
 * WebSocket (subprotocols v4.channel.k8s.io, v4.base64.channel.k8s.io, or none: binary): the
 * ports are fixed by the request, from its query (?port=80&port=81,82) or else from the CRI
 * request; port i gets channel 2i for data and 2i+1 for errors, and each channel starts with
 * the port as 2 little-endian bytes. Every port is one connection, made at once. v4 cannot
 * close a channel, so a connection that ends says nothing; once all have ended the WebSocket
 * is closed.
 *
 * The pairs themselves, the pod's side of each connection, are portforward_pair.c's.
 */
#include "portforward_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "http.h"
#include "spdy.h"
#include "stream_internal.h"
#include "ws.h"
#include "xalloc.h"

static struct pf_pair *pair_of_stream(struct pf *pf, uint32_t sid)
{
	for (int i = 0; i < PF_MAX_PAIRS; i++)
		if (pf->pairs[i] &&
		    (pf->pairs[i]->data_sid == sid || pf->pairs[i]->error_sid == sid))
			return pf->pairs[i];
	return NULL;
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
			pair_input(p, ev->data, ev->len, false);
		return true;
	case SPDY_EV_END:
		if (p && pair_live(p) && ev->stream_id == p->data_sid)
			pair_input(p, NULL, 0, true);
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
		pair_input(p, ev->data, ev->len, false);
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
