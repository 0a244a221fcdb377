/*
 * server.c: the streaming server's listener, its single-use URLs, its connections and its
 * bounds (see server.h). All of it but the URLs runs on one event loop: a connection reads
 * one HTTP request head (within the limits' head_timeout_ms), takes its token on the token's
 * own path and becomes the session of the token's kind (stream_internal.h).
 */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "codec.h"
#include "evloop.h"
#include "http.h"
#include "log.h"
#include "netaddr.h"
#include "stream_internal.h"
#include "xalloc.h"

/* The least time between two warnings of refusals at the bounds. */
#define REFUSAL_NOTE_NS 10000000000LL

struct token {
	char id[33];
	int64_t expires_ns;
	size_t bytes;		    /* what its request holds, for the server's bound */
	struct stream_request *req; /* owned copies, handed to the session that uses it */
	struct token *next;
};

/* The sessions open for one pod (its cell), the loop's. */
struct pod_count {
	struct pod_count *next;
	int n;
	char cell_id[];
};

struct stream_server {
	struct cellmgr *cells;
	struct evloop *loop;
	struct stream_limits lim;
	int lfd;
	struct evloop_io *lio;
	int port;
	char url_host[INET_ADDRSTRLEN]; /* what the URLs name: the address, 127.0.0.1 for any */
	pthread_mutex_t mu;
	pthread_cond_t idle;
	struct token *tokens; /* newest first */
	size_t ntokens, token_bytes;
	size_t forgotten;	  /* URLs forgotten for room since the last warning */
	int64_t forgotten_log_ns; /* when that warning was written */
	int work;		  /* connections and sessions not yet ended (under mu) */
	int conns;		  /* connections (the loop's) */
	struct conn *conn_list;	  /* the loop's */
	struct astream *astreams; /* agent streams open (the loop's) */
	struct pod_count *pods;	  /* the loop's */
	size_t refused;		  /* refusals at the bounds since the last warning (the loop's) */
	int64_t refused_log_ns;	  /* when that warning was written */
	bool stopping;
};

/* A connection reading its request head. */
struct head {
	struct conn *c;
	struct buf b;
	struct evloop_timer *timer;
};

void stream_request_free(struct stream_request *r)
{
	if (!r)
		return;
	free((char *)r->cell_id);
	free((char *)r->unit_id);
	for (size_t i = 0; i < r->n_cmd; i++)
		free(r->cmd[i]);
	free((char **)r->cmd);
	free((int32_t *)r->ports);
	free(r);
}

/* The URL path's first element, and the name in messages, of each kind. */
static const char *const kind_paths[] = {
	[STREAM_EXEC] = "exec", [STREAM_PORTFORWARD] = "portforward", [STREAM_ATTACH] = "attach"
};
static const char *const kind_names[] = {
	[STREAM_EXEC] = "exec", [STREAM_PORTFORWARD] = "port-forward", [STREAM_ATTACH] = "attach"
};

static void token_free(struct token *t)
{
	stream_request_free(t->req);
	free(t);
}

/* Unlinks *pp, a token of the table, and frees it. */
static void token_drop(struct stream_server *s, struct token **pp)
{
	struct token *t = *pp;

	*pp = t->next;
	s->ntokens--;
	s->token_bytes -= t->bytes;
	token_free(t);
}

/* Makes room for a token of bytes: the expired ones go, then the oldest while the table is
 * past its bounds. Called with s->mu held. */
static void tokens_make_room(struct stream_server *s, size_t bytes)
{
	int64_t now = clock_mono_ns();
	size_t dropped = 0;

	for (struct token **pp = &s->tokens; *pp;) {
		if ((*pp)->expires_ns < now)
			token_drop(s, pp);
		else
			pp = &(*pp)->next;
	}
	while (s->tokens && (s->ntokens >= STREAM_MAX_TOKENS ||
			     s->token_bytes + bytes > STREAM_MAX_TOKEN_BYTES)) {
		struct token **oldest = &s->tokens;

		while ((*oldest)->next)
			oldest = &(*oldest)->next;
		token_drop(s, oldest);
		dropped++;
	}
	/* one warning every 10 s at most: a flood of requests must not flood the log too */
	s->forgotten += dropped;
	if (s->forgotten && (!s->forgotten_log_ns || now - s->forgotten_log_ns >= 10000000000LL)) {
		log_warn("streaming server: %zu unused URL(s) forgotten to keep within %d URLs and "
			 "%u MiB; their clients must ask again",
			 s->forgotten, STREAM_MAX_TOKENS, STREAM_MAX_TOKEN_BYTES >> 20);
		s->forgotten = 0;
		s->forgotten_log_ns = now;
	}
}

char *stream_server_url(struct stream_server *s, const struct stream_request *req)
{
	struct token *t = xcalloc(1, sizeof(*t));
	unsigned char rnd[16];
	char **cmd = xcalloc(req->n_cmd + 1, sizeof(*cmd));

	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		abort(); /* no randomness: no unguessable URL */
	hex_encode(rnd, sizeof(rnd), t->id);
	t->req = xmalloc(sizeof(*t->req));
	*t->req = *req;
	t->req->cell_id = xstrdup(req->cell_id ? req->cell_id : "");
	t->req->unit_id = xstrdup(req->unit_id ? req->unit_id : "");
	t->bytes = sizeof(*t) + sizeof(*t->req) + req->n_ports * sizeof(int32_t);
	for (size_t i = 0; i < req->n_cmd; i++) {
		cmd[i] = xstrdup(req->cmd[i]);
		t->bytes += sizeof(char *) + strlen(cmd[i]) + 1;
	}
	t->req->cmd = cmd;
	t->req->ports = NULL;
	if (req->n_ports) {
		int32_t *ports = xcalloc(req->n_ports, sizeof(*ports));

		memcpy(ports, req->ports, req->n_ports * sizeof(*ports));
		t->req->ports = ports;
	}
	t->expires_ns = clock_mono_ns() + (int64_t)STREAM_TOKEN_TTL_S * 1000000000LL;
	pthread_mutex_lock(&s->mu);
	tokens_make_room(s, t->bytes);
	t->next = s->tokens;
	s->tokens = t;
	s->ntokens++;
	s->token_bytes += t->bytes;
	pthread_mutex_unlock(&s->mu);
	return xasprintf("http://%s:%d/%s/%s", s->url_host, s->port, kind_paths[req->kind], t->id);
}

/* ---- each pod's sessions (on the loop) ---- */

static struct pod_count *pod_find(struct stream_server *s, const char *cell_id)
{
	for (struct pod_count *p = s->pods; p; p = p->next)
		if (strcmp(p->cell_id, cell_id) == 0)
			return p;
	return NULL;
}

static int pod_sessions(struct stream_server *s, const char *cell_id)
{
	struct pod_count *p = pod_find(s, cell_id);

	return p ? p->n : 0;
}

static void pod_hold(struct stream_server *s, const char *cell_id)
{
	struct pod_count *p = pod_find(s, cell_id);

	if (!p) {
		size_t len = strlen(cell_id) + 1;

		p = xcalloc(1, sizeof(*p) + len);
		memcpy(p->cell_id, cell_id, len);
		p->next = s->pods;
		s->pods = p;
	}
	p->n++;
}

static void pod_put(struct stream_server *s, const char *cell_id)
{
	for (struct pod_count **pp = &s->pods; *pp; pp = &(*pp)->next) {
		struct pod_count *p = *pp;

		if (strcmp(p->cell_id, cell_id) != 0)
			continue;
		if (--p->n == 0) {
			*pp = p->next;
			free(p);
		}
		return;
	}
}

void stream_session_done(struct stream_server *s, struct stream_request *req)
{
	if (!req)
		return;
	pod_put(s, req->cell_id);
	stream_request_free(req);
}

/* ---- taking a token ---- */

/* Why a token was not taken. */
enum claim {
	CLAIM_OK,
	CLAIM_UNKNOWN,	  /* no such token, or expired */
	CLAIM_WRONG_PATH, /* the token is another kind's; it stays */
	CLAIM_POD_FULL,	  /* its pod has its most sessions open; it stays */
};

/* Takes the token id, good once, for a request on kind's path; one of another kind, or of a
 * pod at its bound, stays for its own request (*has_kind, *pod: what it is). */
static enum claim token_claim(struct stream_server *s, enum stream_kind kind, const char *id,
			      size_t len, struct token **out, enum stream_kind *has_kind,
			      char **pod)
{
	enum claim why = CLAIM_UNKNOWN;
	struct token *found = NULL;

	pthread_mutex_lock(&s->mu);
	for (struct token **pp = &s->tokens; *pp; pp = &(*pp)->next) {
		struct token *t = *pp;

		if (strlen(t->id) != len || memcmp(t->id, id, len) != 0)
			continue;
		*has_kind = t->req->kind;
		if (t->expires_ns < clock_mono_ns()) {
			token_drop(s, pp);
		} else if (t->req->kind != kind) {
			why = CLAIM_WRONG_PATH;
		} else if (pod_sessions(s, t->req->cell_id) >= s->lim.max_pod_sessions) {
			*pod = xstrdup(t->req->cell_id);
			why = CLAIM_POD_FULL;
		} else {
			found = t;
			*pp = t->next;
			s->ntokens--;
			s->token_bytes -= t->bytes;
			why = CLAIM_OK;
		}
		break;
	}
	pthread_mutex_unlock(&s->mu);
	*out = found;
	return why;
}

/* The kind and token of a stream URL's target, "/KIND/TOKEN" then a query or nothing; false
 * for another path. */
static bool target_parse(const char *target, enum stream_kind *kind, const char **id, size_t *len)
{
	for (size_t k = 0; k < ARRAY_SIZE(kind_paths); k++) {
		size_t n = strlen(kind_paths[k]);

		if (target[0] != '/' || strncmp(target + 1, kind_paths[k], n) != 0 ||
		    target[n + 1] != '/')
			continue;
		*kind = (enum stream_kind)k;
		*id = target + n + 2;
		*len = strcspn(*id, "?");
		return *len && !memchr(*id, '/', *len);
	}
	return false;
}

void stream_hold(struct stream_server *s)
{
	pthread_mutex_lock(&s->mu);
	s->work++;
	pthread_mutex_unlock(&s->mu);
}

void stream_release(struct stream_server *s)
{
	pthread_mutex_lock(&s->mu);
	if (--s->work == 0)
		pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->mu);
}

struct evloop *stream_loop(const struct stream_server *s)
{
	return s->loop;
}

struct cellmgr *stream_cells(const struct stream_server *s)
{
	return s->cells;
}

void stream_conn_track(struct stream_server *s, struct conn *c, bool live)
{
	if (live) {
		c->next = s->conn_list;
		if (c->next)
			c->next->prev = c;
		s->conn_list = c;
		s->conns++;
		return;
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conn_list = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->conns--;
}

void stream_astream_track(struct stream_server *s, struct astream *a, bool open)
{
	if (open) {
		a->prev = NULL;
		a->next = s->astreams;
		if (a->next)
			a->next->prev = a;
		s->astreams = a;
		return;
	}
	if (a->prev)
		a->prev->next = a->next;
	else if (s->astreams == a)
		s->astreams = a->next;
	if (a->next)
		a->next->prev = a->prev;
	a->prev = a->next = NULL;
}

bool stream_stopping(const struct stream_server *s)
{
	return s->stopping;
}

static void head_free(struct head *h)
{
	evloop_timer_del(h->timer);
	buf_release(&h->b);
	free(h);
}

/* Counts a refusal at a bound, and warns of those since the last warning once in a while: a
 * flood of clients must not flood the log too. */
static void refusal_note(struct stream_server *s, const char *text)
{
	int64_t now = clock_mono_ns();

	s->refused++;
	if (s->refused_log_ns && now - s->refused_log_ns < REFUSAL_NOTE_NS)
		return;
	log_warn("streaming server: %zu stream(s) refused at its bounds, the latest: %s",
		 s->refused, text);
	s->refused = 0;
	s->refused_log_ns = now;
}

/* An answer of status saying text with a Retry-After, then the end. */
static void conn_busy(struct conn *c, int status, const char *text)
{
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;

	refusal_note(c->srv, text);
	if (http_answer_error(&b, status, "Retry-After: 1\r\n", text, &err) == 0)
		conn_put(c, b.data, b.len);
	buf_release(&b);
	conn_end(c, CONN_LINGER_MS);
}

/* Refuses the request for a token that is not taken, saying why. */
static void claim_refuse(struct conn *c, enum claim why, enum stream_kind kind,
			 enum stream_kind has_kind, const char *pod)
{
	_cleanup_free_ char *text = NULL;

	switch (why) {
	case CLAIM_WRONG_PATH:
		text = xasprintf("this stream URL's token is for %s, not %s: use it as the runtime "
				 "returned it, on /%s/",
				 kind_names[has_kind], kind_names[kind], kind_paths[has_kind]);
		conn_fail(c, 404, text);
		return;
	case CLAIM_POD_FULL:
		text = xasprintf("pod sandbox %s has %d exec, attach and port-forward sessions "
				 "open, the most for one pod: close some and try again (this URL "
				 "stays good until it expires)",
				 pod, c->srv->lim.max_pod_sessions);
		conn_busy(c, 429, text);
		return;
	default:
		conn_fail(c, 404, "unknown or expired stream URL: ask the runtime for a new one");
		return;
	}
}

/* The request head is in: its token's session takes the connection. */
static void head_done(struct head *h, const struct http_req *req, size_t used)
{
	struct stream_server *s = h->c->srv;
	struct conn *c = h->c;
	enum stream_kind kind = STREAM_EXEC, has_kind = STREAM_EXEC;
	enum claim why = CLAIM_UNKNOWN;
	_cleanup_free_ char *pod = NULL;
	struct token *t = NULL;
	struct stream_request *r;
	const char *id;
	size_t idlen;

	if (target_parse(req->target, &kind, &id, &idlen))
		why = token_claim(s, kind, id, idlen, &t, &has_kind, &pod);
	if (why != CLAIM_OK) {
		claim_refuse(c, why, kind, has_kind, pod);
		return;
	}
	log_debug("stream %s for cell %s", kind_names[t->req->kind], t->req->cell_id);
	r = t->req; /* the session's now, counted for its pod until stream_session_done */
	t->req = NULL;
	token_free(t);
	pod_hold(s, r->cell_id);
	stream_session_start(c, req, r, (const uint8_t *)h->b.data + used, h->b.len - used);
}

static void head_input(void *arg, const uint8_t *data, size_t len)
{
	struct head *h = arg;
	struct http_req req = { 0 };
	struct err err = ERR_INIT;
	ssize_t n;

	buf_append(&h->b, data, len, NULL);
	n = http_parse_head(h->b.data, h->b.len, &req, &err);
	if (n == 0 && h->b.len > HTTP_MAX_HEAD)
		n = err_set(&err, EFBIG, "request head over %d bytes", HTTP_MAX_HEAD);
	if (n < 0) {
		log_debug("stream: %s", err.msg);
		conn_fail(h->c, 400, err.msg);
	} else if (n > 0) {
		head_done(h, &req, (size_t)n);
	}
	http_req_release(&req);
	if (n != 0)
		head_free(h);
}

static void head_gone(void *arg)
{
	struct head *h = arg;

	conn_end(h->c, 0);
	head_free(h);
}

/* A client that did not send its request head in time: told so, and closed at once, so that
 * connections sending nothing cannot hold the bounds. */
static void head_timeout(void *arg)
{
	struct head *h = arg;
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;

	h->timer = NULL;
	err_set(&err, ETIMEDOUT,
		"no request line and headers within %d ms of the connection: send the request "
		"as soon as connected",
		h->c->srv->lim.head_timeout_ms);
	log_debug("stream: %s", err.msg);
	if (http_answer_error(&b, 408, NULL, err.msg, &err) == 0)
		conn_put(h->c, b.data, b.len);
	buf_release(&b);
	conn_flush(h->c);
	conn_end(h->c, 0);
	head_free(h);
}

static const struct conn_ops head_ops = { .input = head_input, .gone = head_gone };

/* Answers a connection the server cannot take, without waiting for it. What the client sent
 * already is read first: a close with unread input would reset the connection, and the
 * client might lose the answer. */
static void refuse(struct stream_server *s, int fd, int status, const char *text)
{
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;
	char sink[4096];

	refusal_note(s, text);
	for (int i = 0; i < 16 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	if (http_answer_error(&b, status, "Retry-After: 1\r\n", text, &err) == 0 &&
	    send(fd, b.data, b.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* the client learns it from the close */
	}
	buf_release(&b);
	close(fd);
}

/* Connections open from peer. */
static int client_connections(const struct stream_server *s, uint32_t peer)
{
	int n = 0;

	for (const struct conn *c = s->conn_list; c; c = c->next)
		n += c->peer == peer;
	return n;
}

/* Whether the server takes a connection of peer; if not, it answered fd and closed it. */
static bool admit(struct stream_server *s, int fd, uint32_t peer)
{
	char addr[INET_ADDRSTRLEN] = "?";
	_cleanup_free_ char *text = NULL;

	if (s->stopping) {
		refuse(s, fd, 503, "the streaming server is stopping; try again once it is back");
		return false;
	}
	if (s->conns >= s->lim.max_connections) {
		text = xasprintf("the streaming server has %d connections open, the most it serves "
				 "at once: try again when some end",
				 s->lim.max_connections);
		refuse(s, fd, 503, text);
		return false;
	}
	if (client_connections(s, peer) >= s->lim.max_client_connections) {
		inet_ntop(AF_INET, &peer, addr, sizeof(addr));
		text = xasprintf("client %s has %d connections open to the streaming server, the "
				 "most for one address: close some, or send their requests (one "
				 "that sends none is closed after %d ms)",
				 addr, s->lim.max_client_connections, s->lim.head_timeout_ms);
		refuse(s, fd, 429, text);
		return false;
	}
	return true;
}

static void on_accept(void *arg, uint32_t events)
{
	struct stream_server *s = arg;

	(void)events;
	for (;;) {
		struct sockaddr_in peer = { 0 };
		socklen_t plen = sizeof(peer);
		int fd = accept4(s->lfd, (struct sockaddr *)&peer, &plen,
				 SOCK_CLOEXEC | SOCK_NONBLOCK),
		    one = 1;
		struct head *h;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return; /* EAGAIN: all taken; else the next turn tries again */
		}
		/* small frames (a reply, an exit status) go out at once: with Nagle's algorithm
		 * they waited for the client's delayed ACK, 40 ms */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (!admit(s, fd, peer.sin_addr.s_addr))
			continue;
		h = xcalloc(1, sizeof(*h));
		h->c = conn_new(s, fd, peer.sin_addr.s_addr);
		conn_attach(h->c, &head_ops, h);
		h->timer = evloop_timer_add(s->loop, s->lim.head_timeout_ms, head_timeout, h);
	}
}

static void listen_start(void *arg)
{
	struct stream_server *s = arg;

	s->lio = evloop_io_add(s->loop, s->lfd, EPOLLIN, on_accept, s);
}

/* The stop, on the loop: no more connections; every one left is told its client is gone,
 * so its session ends it and cancels what it has open. */
static void stop_all(void *arg)
{
	struct stream_server *s = arg;

	s->stopping = true;
	evloop_io_del(s->lio);
	s->lio = NULL;
	while (s->conn_list) {
		struct conn *c = s->conn_list;

		shutdown(c->fd, SHUT_RDWR);
		if (c->ops && c->ops->gone) {
			const struct conn_ops *ops = c->ops;

			c->ops = NULL;
			ops->gone(c->sess); /* ends c */
		} else {
			conn_end(c, 0);
		}
	}
	/* sessions left without a client wait for their agent streams, which end once
	 * cancelled; each end takes its stream off the list, on a later turn of the loop */
	for (struct astream *a = s->astreams; a; a = a->next)
		astream_cancel(a);
}

/* Says where the server listens, where its URLs point, and its bounds. */
static void log_start(const struct stream_server *s, const struct sockaddr_in *sa)
{
	char bound[INET_ADDRSTRLEN] = "?";
	const struct stream_limits *l = &s->lim;

	inet_ntop(AF_INET, &sa->sin_addr, bound, sizeof(bound));
	log_info("streaming server on %s:%d%s (exec, attach, port-forward); its URLs name %s:%d; "
		 "at most %d connections, %d from one client, %d sessions for one pod",
		 bound, s->port,
		 sa->sin_addr.s_addr == htonl(INADDR_ANY) ? ", every address of the node" : "",
		 s->url_host, s->port, l->max_connections, l->max_client_connections,
		 l->max_pod_sessions);
}

int stream_server_start(const char *address, struct cellmgr *cells,
			const struct stream_limits *limits, struct stream_server **out,
			struct err *err)
{
	static const struct stream_limits defaults = {
		.max_connections = STREAM_MAX_CONNECTIONS,
		.max_client_connections = STREAM_MAX_CLIENT_CONNECTIONS,
		.max_pod_sessions = STREAM_MAX_POD_SESSIONS,
		.head_timeout_ms = STREAM_HEAD_TIMEOUT_MS,
	};
	struct sockaddr_in sa = { 0 };
	struct stream_server *s;
	int fd = netaddr_listen_ipv4(address, 64, &sa, err);

	if (fd < 0)
		return err_wrap(err, "streaming server");
	s = xcalloc(1, sizeof(*s));
	s->cells = cells;
	s->lim = limits ? *limits : defaults;
	s->lfd = fd;
	s->port = ntohs(sa.sin_port);
	if (sa.sin_addr.s_addr == htonl(INADDR_ANY))
		snprintf(s->url_host, sizeof(s->url_host), "127.0.0.1"); /* the kubelet's node */
	else
		inet_ntop(AF_INET, &sa.sin_addr, s->url_host, sizeof(s->url_host));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->idle, NULL);
	if (evloop_new("kiyot-stream", &s->loop, err) < 0) {
		close(fd);
		free(s);
		return err_wrap(err, "streaming server");
	}
	evloop_post(s->loop, listen_start, s);
	log_start(s, &sa);
	*out = s;
	return 0;
}

void stream_server_stop(struct stream_server *s)
{
	if (!s)
		return;
	evloop_post(s->loop, stop_all, s);
	/* sessions end once their agent streams did, which cancel makes quick */
	pthread_mutex_lock(&s->mu);
	while (s->work > 0)
		pthread_cond_wait(&s->idle, &s->mu);
	pthread_mutex_unlock(&s->mu);
	evloop_free(s->loop);
	close(s->lfd);
	while (s->tokens) {
		struct token *t = s->tokens;

		s->tokens = t->next;
		token_free(t);
	}
	while (s->pods) { /* none: every session ended */
		struct pod_count *p = s->pods;

		s->pods = p->next;
		free(p);
	}
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->idle);
	free(s);
}
