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
 * The pairs themselves, the pod's side of each connection, are portforward_pair.c's. The
 * session runs on the streaming server's loop; it ends when the client leaves (SPDY) or once
 * every connection ended (WebSocket), and is freed once every pair wound down its pod side.
 */
#include "portforward_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "http.h"
#include "log.h"
#include "spdy.h"
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

struct pf *pf_enter(struct pf *pf)
{
	pf->depth++;
	return pf;
}

void pf_leave(struct pf *pf)
{
	if (--pf->depth)
		return;
	pairs_sweep(pf);
	if (pf->c || pf->all)
		return;
	stream_session_done(pf->srv, pf->req);
	stream_release(pf->srv);
	free(pf);
}

/* A new stream of the client: half of a pair, by requestID. */
static void pf_new_stream(struct pf *pf, const struct spdy_event *ev)
{
	struct spdy_session *sp = pf->c->sp;
	const char *type = spdy_header_get(ev->headers, ev->nheaders, "streamtype");
	const char *port = spdy_header_get(ev->headers, ev->nheaders, "port");
	const char *rid = spdy_header_get(ev->headers, ev->nheaders, "requestid");
	struct pf_pair *p = NULL;
	struct err err = ERR_INIT;
	char *end = NULL;
	long n = port ? strtol(port, &end, 10) : 0;

	if (!type || !rid || (strcmp(type, "data") != 0 && strcmp(type, "error") != 0) || !end ||
	    *end || n < 1 || n > 65535) {
		spdy_reset(sp, ev->stream_id, SPDY_PROTOCOL_ERROR, &err);
		return;
	}
	for (int i = 0; i < PF_MAX_PAIRS && !p; i++)
		if (pf->pairs[i] && strcmp(pf->pairs[i]->request_id, rid) == 0)
			p = pf->pairs[i];
	if (!p && !(p = pair_new(pf, rid, (uint32_t)n))) {
		spdy_reset(sp, ev->stream_id, SPDY_REFUSED_STREAM, &err);
		return;
	}
	if (strcmp(type, "data") == 0)
		p->data_sid = ev->stream_id;
	else
		p->error_sid = ev->stream_id;
	spdy_reply(sp, ev->stream_id, NULL, 0, false, &err);
	if (p->data_sid && p->error_sid && !p->started)
		pair_start(p);
}

/* Sends bytes on a pair's data or error stream (channel, over WebSocket). */
static void pf_send(struct pf *pf, uint32_t id, const void *data, size_t len)
{
	struct err err = ERR_INIT;

	if (pf->c->sp)
		spdy_send(pf->c->sp, id, data, len, false, &err);
	else if (len)
		ws_send(pf->c->ws, (uint8_t)id, data, len, &err);
}

void pf_update_pause(struct pf *pf)
{
	bool full = false;

	if (!pf->c)
		return;
	for (int i = 0; i < PF_MAX_PAIRS; i++)
		if (pf->pairs[i] && pair_full(pf->pairs[i]))
			full = true;
	conn_pause(pf->c, full);
}

/* Whether the client has room for the pods' output; the pods are told when that changes. */
static void pf_output_room(struct pf *pf)
{
	bool paused = pf->c && conn_pending(pf->c) > CONN_OUT_HIGH;

	if (paused == pf->out_paused)
		return;
	pf->out_paused = paused;
	for (int i = 0; i < PF_MAX_PAIRS; i++)
		if (pf->pairs[i])
			pair_output_update(pf->pairs[i]);
}

void pf_pod_data(struct pf *pf, struct pf_pair *p, const uint8_t *data, size_t len)
{
	if (!pf->c)
		return;
	pf_send(pf, p->data_sid, data, len);
	conn_flush(pf->c);
	pf_output_room(pf);
}

/* The pod's output ended: over SPDY the data stream's end (a second one, when the pair
 * ends, is refused by the session and says nothing); WebSocket v4 cannot end a channel. */
void pf_pod_output_ended(struct pf *pf, struct pf_pair *p)
{
	struct err err = ERR_INIT;

	if (pf->c && pf->c->sp) {
		spdy_send(pf->c->sp, p->data_sid, NULL, 0, true, &err);
		conn_flush(pf->c);
	}
}

/* Whether the client still addresses any pair. */
static bool pf_any_pair(const struct pf *pf)
{
	for (int i = 0; i < PF_MAX_PAIRS; i++)
		if (pf->pairs[i])
			return true;
	return false;
}

/* A pair's connection ended: its error said, its streams closed (SPDY), its slot free. Over
 * WebSocket the last one to end closes the session. */
void pf_pair_ended(struct pf *pf, struct pf_pair *p, const char *error, bool tell)
{
	struct err err = ERR_INIT;
	_cleanup_free_ char *text =
		error ? xasprintf("an error occurred forwarding %u: %s", p->port, error) : NULL;

	for (int i = 0; i < PF_MAX_PAIRS; i++)
		if (pf->pairs[i] == p)
			pf->pairs[i] = NULL;
	if (!pf->c || !tell)
		return;
	if (text)
		pf_send(pf, p->error_sid, text, strlen(text));
	if (pf->c->sp) {
		spdy_send(pf->c->sp, p->error_sid, NULL, 0, true, &err);
		spdy_send(pf->c->sp, p->data_sid, NULL, 0, true, &err);
	}
	pf_update_pause(pf);
	conn_flush(pf->c);
	if (pf->c->ws && !pf_any_pair(pf)) {
		ws_close(pf->c->ws, WS_CLOSE_NORMAL, "", &err);
		conn_end(pf->c, CONN_LINGER_MS);
		pf->c = NULL;
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
		spdy_consume(pf->c->sp, ev->stream_id, ev->len);
		if (p && pair_live(p) && ev->stream_id == p->data_sid)
			pair_input(p, ev->data, ev->len, false);
		return true;
	case SPDY_EV_END:
		if (p && pair_live(p) && ev->stream_id == p->data_sid)
			pair_input(p, NULL, 0, true);
		return true;
	case SPDY_EV_RESET:
		if (p)
			pair_drop(p);
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

		if (!pf->c) /* every connection ended (WebSocket) */
			return true;
		if (pf->c->sp) {
			n = spdy_feed(pf->c->sp, data + off, len - off, &ev, &err);
			more = n >= 0 && pf_event(pf, &ev);
			none = ev.type == SPDY_EV_NONE;
		} else {
			n = ws_feed(pf->c->ws, data + off, len - off, &wev, &err);
			more = n >= 0 && pf_ws_event(pf, &wev);
			none = wev.type == WS_EV_NONE;
		}
		if (!more) {
			if (n < 0)
				log_debug("stream port-forward: %s", err.msg);
			return false;
		}
		off += (size_t)n;
		if (none && off >= len)
			return true;
	}
}

/* The client's side ends: every pair still open is dropped. */
static void pf_end(struct pf *pf, int linger_ms)
{
	conn_end(pf->c, linger_ms);
	pf->c = NULL;
	for (int i = 0; i < PF_MAX_PAIRS; i++)
		if (pf->pairs[i])
			pair_drop(pf->pairs[i]);
}

static void pf_input(void *arg, const uint8_t *data, size_t len)
{
	struct pf *pf = pf_enter(arg);

	if (!pf_feed(pf, data, len))
		pf_end(pf, CONN_LINGER_MS); /* the GOAWAY or close saying why goes first */
	else if (pf->c)
		conn_flush(pf->c);
	pf_leave(pf);
}

static void pf_writable(void *arg)
{
	struct pf *pf = pf_enter(arg);

	pf_output_room(pf);
	pf_leave(pf);
}

static void pf_gone(void *arg)
{
	struct pf *pf = pf_enter(arg);

	pf_end(pf, 0);
	pf_leave(pf);
}

static const struct conn_ops pf_conn_ops = { pf_input, pf_writable, pf_gone };

static struct pf *pf_new(struct conn *c, struct stream_request *req)
{
	struct pf *pf = xcalloc(1, sizeof(*pf));

	pf->srv = c->srv;
	pf->c = c;
	pf->req = req;
	stream_hold(pf->srv);
	return pf;
}

/* Runs the session on its connection: what the client sent with its request first. Called
 * with the session held. */
static void pf_run(struct pf *pf, const uint8_t *rest, size_t rest_len)
{
	if (pf->c)
		conn_attach(pf->c, &pf_conn_ops, pf);
	if (rest_len && pf->c)
		pf_input(pf, rest, rest_len);
	if (pf->c)
		conn_flush(pf->c);
}

void stream_port_forward(struct conn *c, struct stream_request *req, const uint8_t *rest,
			 size_t rest_len)
{
	struct pf *pf = pf_enter(pf_new(c, req));

	pf_run(pf, rest, rest_len);
	pf_leave(pf);
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
 * client offers none of them), or an HTTP error; the session is then in c->ws. */
static int ws_upgrade(struct conn *c, const struct http_req *http, size_t nports, struct err *err)
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
		conn_fail(c, 403, err->msg);
		return ret;
	}
	ws_codec_of(proto, &codec);
	/* base64 names a channel with one digit */
	if (codec == WS_CODEC_BASE64 && nports > 5) {
		ret = err_set(err, EINVAL,
			      "%zu ports: v4.base64.channel.k8s.io carries at most 5; use "
			      "v4.channel.k8s.io",
			      nports);
		conn_fail(c, 400, err->msg);
		return ret;
	}
	ret = http_answer_ws(&out, http, proto, err);
	if (ret < 0) {
		conn_fail(c, 400, err->msg);
	} else {
		conn_put(c, out.data, out.len);
		c->ws = ws_session_new(codec, err);
		ret = c->ws ? 0 : -err->code;
		if (ret < 0)
			conn_end(c, 0);
	}
	buf_release(&out);
	return ret;
}

/* Port i's pair on channels 2i and 2i+1, each starting with the port, its connection made. */
static void ws_start_pairs(struct pf *pf, const int32_t *ports, size_t nports)
{
	struct err err = ERR_INIT;
	struct pf_pair *pairs[PF_MAX_PAIRS];

	for (size_t i = 0; i < nports; i++) {
		struct pf_pair *p = pair_new(pf, "", (uint32_t)ports[i]);
		const uint8_t le[2] = { (uint8_t)ports[i], (uint8_t)(ports[i] >> 8) };

		p->data_sid = (uint32_t)(2 * i);
		p->error_sid = (uint32_t)(2 * i + 1);
		pairs[i] = p;
		ws_send(pf->c->ws, (uint8_t)p->data_sid, le, sizeof(le), &err);
		ws_send(pf->c->ws, (uint8_t)p->error_sid, le, sizeof(le), &err);
	}
	for (size_t i = 0; i < nports && pf->c; i++)
		pair_start(pairs[i]);
}

void stream_port_forward_ws(struct conn *c, const struct http_req *http, struct stream_request *req,
			    const uint8_t *rest, size_t rest_len)
{
	int32_t ports[PF_MAX_PAIRS];
	size_t nports = 0;
	struct err err = ERR_INIT;
	struct pf *pf = pf_enter(pf_new(c, req));

	if (ws_ports(http, req, ports, &nports, &err) < 0) {
		conn_fail(c, 400, err.msg);
	} else if (ws_upgrade(c, http, nports, &err) == 0) {
		ws_start_pairs(pf, ports, nports);
		pf_run(pf, rest, rest_len);
		pf_leave(pf);
		return;
	}
	log_info("stream port-forward: %s", err.msg);
	pf->c = NULL;
	pf_leave(pf);
}
