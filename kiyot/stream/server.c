/*
 * server.c: the streaming server's listener, its single-use URLs and its connections (see
 * server.h). A connection reads one HTTP request head, takes its token, upgrades and hands
 * the socket to the session of the token's kind (stream_internal.h).
 */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/rand.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "codec.h"
#include "http.h"
#include "log.h"
#include "stream_internal.h"
#include "xalloc.h"

/* How long a client has to send its request head. */
#define HEAD_TIMEOUT_MS 10000

struct token {
	char id[33];
	int64_t expires_ns;
	size_t bytes;		   /* what its request holds, for the server's bound */
	struct stream_request req; /* owned copies */
	struct token *next;
};

struct stream_server {
	struct cellmgr *cells;
	int lfd;
	int port;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t idle;
	struct token *tokens; /* newest first */
	size_t ntokens, token_bytes;
	size_t forgotten;	  /* URLs forgotten for room since the last warning */
	int64_t forgotten_log_ns; /* when that warning was written */
	int conns;
	int fds[STREAM_MAX_CONNECTIONS]; /* the connections' sockets (-1: free), shut at stop */
	bool stopping;
};

struct conn_arg {
	struct stream_server *s;
	int fd;
	int slot;
};

static void request_free(struct stream_request *r)
{
	free((char *)r->cell_id);
	free((char *)r->unit_id);
	for (size_t i = 0; i < r->n_cmd; i++)
		free(r->cmd[i]);
	free((char **)r->cmd);
	free((int32_t *)r->ports);
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
	request_free(&t->req);
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
	t->req = *req;
	t->req.cell_id = xstrdup(req->cell_id ? req->cell_id : "");
	t->req.unit_id = xstrdup(req->unit_id ? req->unit_id : "");
	t->bytes = sizeof(*t) + req->n_ports * sizeof(int32_t);
	for (size_t i = 0; i < req->n_cmd; i++) {
		cmd[i] = xstrdup(req->cmd[i]);
		t->bytes += sizeof(char *) + strlen(cmd[i]) + 1;
	}
	t->req.cmd = cmd;
	t->req.ports = NULL;
	if (req->n_ports) {
		int32_t *ports = xcalloc(req->n_ports, sizeof(*ports));

		memcpy(ports, req->ports, req->n_ports * sizeof(*ports));
		t->req.ports = ports;
	}
	t->expires_ns = clock_mono_ns() + (int64_t)STREAM_TOKEN_TTL_S * 1000000000LL;
	pthread_mutex_lock(&s->mu);
	tokens_make_room(s, t->bytes);
	t->next = s->tokens;
	s->tokens = t;
	s->ntokens++;
	s->token_bytes += t->bytes;
	pthread_mutex_unlock(&s->mu);
	return xasprintf("http://127.0.0.1:%d/%s/%s", s->port, kind_paths[req->kind], t->id);
}

/* Takes the token id out of the table: it is good once. NULL if unknown or expired. */
static struct token *token_take(struct stream_server *s, const char *id, size_t len)
{
	struct token *found = NULL;

	pthread_mutex_lock(&s->mu);
	for (struct token **pp = &s->tokens; *pp; pp = &(*pp)->next) {
		if (strlen((*pp)->id) == len && memcmp((*pp)->id, id, len) == 0) {
			found = *pp;
			*pp = found->next;
			s->ntokens--;
			s->token_bytes -= found->bytes;
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	if (found && found->expires_ns < clock_mono_ns()) {
		token_free(found);
		return NULL;
	}
	return found;
}

/* Reads the request head (bounded in size and time) into buf; the bytes after it stay in buf
 * at *used. */
static int read_head(int fd, struct buf *b, struct http_req *req, size_t *used, struct err *err)
{
	int64_t deadline = clock_mono_ns() + (int64_t)HEAD_TIMEOUT_MS * 1000000;

	for (;;) {
		char chunk[4096];
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = (deadline - clock_mono_ns()) / 1000000;
		ssize_t n, h;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return err_set(err, ETIMEDOUT, "no request head within %d ms",
				       HEAD_TIMEOUT_MS);
		n = read(fd, chunk, sizeof(chunk));
		if (n <= 0)
			return err_set(err, EPIPE, "the client closed before its request");
		buf_append(b, chunk, (size_t)n, NULL);
		h = http_parse_head(b->data, b->len, req, err);
		if (h < 0)
			return (int)h;
		if (h > 0) {
			*used = (size_t)h;
			return 0;
		}
		if (b->len > HTTP_MAX_HEAD)
			return err_set(err, EFBIG, "request head over %d bytes", HTTP_MAX_HEAD);
	}
}

void stream_answer_error(int fd, int status, const char *text)
{
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;

	if (http_answer_error(&b, status, NULL, text, &err) == 0)
		stream_write_all(fd, (const uint8_t *)b.data, b.len);
	buf_release(&b);
}

static void serve(struct stream_server *s, int fd)
{
	struct buf b = BUF_INIT;
	struct http_req req = { 0 };
	struct err err = ERR_INIT;
	struct token *t = NULL;
	const char *target, *id;
	size_t used = 0, idlen;
	int ret;

	if (read_head(fd, &b, &req, &used, &err) < 0) {
		log_debug("stream: %s", err.msg);
		stream_answer_error(fd, 400, err.msg);
		goto out;
	}
	target = req.target;
	id = strrchr(target, '/');
	idlen = id ? strcspn(id + 1, "?") : 0;
	if (id && (strncmp(target, "/exec/", 6) == 0 || strncmp(target, "/attach/", 8) == 0 ||
		   strncmp(target, "/portforward/", 13) == 0))
		t = token_take(s, id + 1, idlen);
	if (!t) {
		stream_answer_error(fd, 404,
				    "unknown or expired stream URL: ask the runtime for a new one");
		goto out;
	}
	if (t->req.kind == STREAM_PORTFORWARD && http_upgrade_of(&req) == HTTP_UPGRADE_WS)
		ret = stream_port_forward_ws(s->cells, fd, &req, &t->req,
					     (const uint8_t *)b.data + used, b.len - used, &err);
	else
		ret = stream_session(s->cells, fd, &req, &t->req, (const uint8_t *)b.data + used,
				     b.len - used, &err);
	if (ret < 0)
		log_info("stream %s: %s", kind_names[t->req.kind], err.msg);
out:
	if (t)
		token_free(t);
	http_req_release(&req);
	buf_release(&b);
}

static void *conn_thread(void *arg)
{
	struct conn_arg *a = arg;
	struct stream_server *s = a->s;

	serve(s, a->fd);
	pthread_mutex_lock(&s->mu);
	s->fds[a->slot] = -1;
	close(a->fd);
	free(a);
	s->conns--;
	pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static void *accept_thread(void *arg)
{
	struct stream_server *s = arg;

	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC), one = 1;
		struct conn_arg *a;
		pthread_t t;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL; /* the listener was shut down */
		}
		/* small frames (a reply, an exit status) go out at once: with Nagle's algorithm
		 * they waited for the client's delayed ACK, 40 ms */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_mutex_lock(&s->mu);
		if (s->stopping || s->conns >= STREAM_MAX_CONNECTIONS) {
			pthread_mutex_unlock(&s->mu);
			stream_answer_error(fd, 500, "too many streams at once; try again");
			close(fd);
			continue;
		}
		s->conns++;
		a = xcalloc(1, sizeof(*a));
		a->s = s;
		a->fd = fd;
		for (a->slot = 0; s->fds[a->slot] >= 0; a->slot++)
			;
		s->fds[a->slot] = fd;
		pthread_mutex_unlock(&s->mu);
		if (pthread_create(&t, NULL, conn_thread, a) != 0) {
			pthread_mutex_lock(&s->mu);
			s->fds[a->slot] = -1;
			s->conns--;
			pthread_mutex_unlock(&s->mu);
			close(fd);
			free(a);
			continue;
		}
		pthread_detach(t);
	}
}

/* Parses "HOST:PORT" (IPv4). */
static int parse_address(const char *address, struct sockaddr_in *sa, struct err *err)
{
	const char *colon = strrchr(address, ':');
	char host[64];
	char *end;
	long port;

	if (!colon || (size_t)(colon - address) >= sizeof(host))
		return err_set(err, EINVAL, "streaming address \"%s\": want HOST:PORT", address);
	memcpy(host, address, (size_t)(colon - address));
	host[colon - address] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (*end || port < 0 || port > 65535 || inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return err_set(err, EINVAL, "streaming address \"%s\": want IPv4:PORT", address);
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return 0;
}

int stream_server_start(const char *address, struct cellmgr *cells, struct stream_server **out,
			struct err *err)
{
	struct sockaddr_in sa = { 0 };
	socklen_t len = sizeof(sa);
	struct stream_server *s;
	int fd, one = 1;

	if (parse_address(address, &sa, err) < 0)
		return -err->code;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(err, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		close(fd);
		return err_errno(err, "streaming server on %s", address);
	}
	s = xcalloc(1, sizeof(*s));
	s->cells = cells;
	s->lfd = fd;
	s->port = ntohs(sa.sin_port);
	for (int i = 0; i < STREAM_MAX_CONNECTIONS; i++)
		s->fds[i] = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->idle, NULL);
	if (pthread_create(&s->thread, NULL, accept_thread, s) != 0) {
		close(fd);
		free(s);
		return err_set(err, EAGAIN, "no thread for the streaming server");
	}
	log_info("streaming server on 127.0.0.1:%d (exec, attach, port-forward)", s->port);
	*out = s;
	return 0;
}

void stream_server_stop(struct stream_server *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	pthread_mutex_unlock(&s->mu);
	shutdown(s->lfd, SHUT_RDWR);
	pthread_join(s->thread, NULL);
	close(s->lfd);
	pthread_mutex_lock(&s->mu);
	/* every session sees its client leave: its command is killed, its threads end */
	for (int i = 0; i < STREAM_MAX_CONNECTIONS; i++)
		if (s->fds[i] >= 0)
			shutdown(s->fds[i], SHUT_RDWR);
	while (s->conns > 0)
		pthread_cond_wait(&s->idle, &s->mu);
	while (s->tokens) {
		struct token *t = s->tokens;

		s->tokens = t->next;
		token_free(t);
	}
	pthread_mutex_unlock(&s->mu);
	free(s);
}
