/*
 * cli_stream.c: what kiyot's streaming commands share (see cli_stream.h): the upgrade of a
 * streaming URL to SPDY/3.1 and the client session on it, caught signals, and which pod and
 * container a command names. The commands are in cli_exec.c and cli_portforward.c.
 */
#include "cli_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "cri_api.pb-c.h"
#include "xalloc.h"

/* How long the streaming server has to answer the upgrade. */
#define UPGRADE_TIMEOUT_MS 10000

/* ---- signals: a handler writes the signal's number into a pipe the loops poll ---- */

static int sig_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
	unsigned char b = (unsigned char)sig;
	int saved = errno;

	if (write(sig_pipe[1], &b, 1) < 0) {
		/* full: a signal is pending there already */
	}
	errno = saved;
}

/* The handler is the process's, so a signal that lands on one of gRPC's threads is caught too. */
int cli_catch_signals(const int *sigs, struct err *err)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };

	if (sig_pipe[0] < 0 && pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return err_errno(err, "pipe");
	sigemptyset(&sa.sa_mask);
	for (; *sigs; sigs++)
		sigaction(*sigs, &sa, NULL);
	return 0;
}

int cli_signal_fd(void)
{
	return sig_pipe[0];
}

int cli_next_signal(void)
{
	unsigned char b;

	return read(sig_pipe[0], &b, 1) == 1 ? b : 0;
}

/* ---- the upgrade ---- */

ssize_t cli_stream_parse_answer(const char *data, size_t len, int *status, char *proto,
				size_t proto_size)
{
	size_t scan = len < CLI_STREAM_MAX_HEAD ? len : CLI_STREAM_MAX_HEAD;
	const char *end = memmem(data, scan, "\r\n\r\n", 4), *line;

	if (!end)
		return len >= CLI_STREAM_MAX_HEAD ? -EBADMSG : 0;
	if (end - data < 12 || memcmp(data, "HTTP/1.", 7) != 0 || data[8] != ' ' || data[9] < '1' ||
	    data[9] > '5' || data[10] < '0' || data[10] > '9' || data[11] < '0' || data[11] > '9')
		return -EBADMSG;
	*status = (data[9] - '0') * 100 + (data[10] - '0') * 10 + (data[11] - '0');
	proto[0] = '\0';
	for (line = memmem(data, (size_t)(end - data) + 2, "\r\n", 2); line && line < end;) {
		const char *next = memmem(line + 2, (size_t)(end + 2 - (line + 2)), "\r\n", 2);
		const char *v = line + 2, *ve = next ? next : end;
		static const char name[] = "X-Stream-Protocol-Version:";

		if ((size_t)(ve - v) > sizeof(name) - 1 &&
		    strncasecmp(v, name, sizeof(name) - 1) == 0) {
			v += sizeof(name) - 1;
			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			if ((size_t)(ve - v) < proto_size) {
				memcpy(proto, v, (size_t)(ve - v));
				proto[ve - v] = '\0';
			}
		}
		line = next;
	}
	return end + 4 - data;
}

/* Splits "http://HOST[:PORT]/PATH" ("[V6]" hosts too) into host, port and path. */
static int split_url(const char *url, char *host, size_t hsize, char *port, size_t psize,
		     const char **path, struct err *err)
{
	const char *h = url + 7, *slash, *hend, *p = NULL;
	size_t plen;

	if (strncmp(url, "http://", 7) != 0 || !(slash = strchr(h, '/')))
		return err_set(err, EINVAL, "stream URL \"%s\": want http://HOST:PORT/PATH", url);
	if (*h == '[') {
		hend = memchr(h, ']', (size_t)(slash - h));
		if (hend && hend + 1 < slash && hend[1] == ':')
			p = hend + 2;
		h++;
	} else {
		hend = memchr(h, ':', (size_t)(slash - h));
		p = hend ? hend + 1 : NULL;
		if (!hend)
			hend = slash;
	}
	plen = p ? (size_t)(slash - p) : 0;
	if (!hend || hend <= h || (size_t)(hend - h) >= hsize || (p && (!plen || plen >= psize)))
		return err_set(err, EINVAL, "stream URL \"%s\": bad host or port", url);
	snprintf(host, hsize, "%.*s", (int)(hend - h), h);
	snprintf(port, psize, "%.*s", p ? (int)plen : 2, p ? p : "80");
	*path = slash;
	return 0;
}

static int dial(const char *url, const char **path, struct err *err)
{
	char host[256], port[16];
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	int fd = -1, r, one = 1;

	if (split_url(url, host, sizeof(host), port, sizeof(port), path, err) < 0)
		return -err->code;
	r = getaddrinfo(host, port, &hints, &res);
	if (r != 0)
		return err_set(err, EHOSTUNREACH, "stream URL %s: %s", url, gai_strerror(r));
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return err_errno(err, "connect to the streaming server at %s", url);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* Writes all of data to fd, waiting while it is full; -1 when its reader is gone (SIGPIPE is
 * ignored while these commands run). */
int cli_write_full(int fd, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);
		struct pollfd w = { fd, POLLOUT, 0 };

		if (n < 0 && errno == EAGAIN && poll(&w, 1, -1) >= 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads the answer's head (bounded in size and time) into b; -errno with err set on failure. */
static ssize_t read_answer(int fd, struct buf *b, int *status, char *proto, size_t psize,
			   struct err *err)
{
	int64_t deadline = clock_mono_ns() + (int64_t)UPGRADE_TIMEOUT_MS * 1000000;

	for (;;) {
		char chunk[4096];
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = (deadline - clock_mono_ns()) / 1000000;
		ssize_t n, h;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return err_set(err, ETIMEDOUT,
				       "the streaming server did not answer in %d ms",
				       UPGRADE_TIMEOUT_MS);
		n = read(fd, chunk, sizeof(chunk));
		if (n <= 0)
			return err_set(err, EPIPE, "the streaming server closed without an answer");
		buf_append(b, chunk, (size_t)n, NULL);
		h = cli_stream_parse_answer(b->data, b->len, status, proto, psize);
		if (h < 0)
			return err_set(err, EBADMSG, "the streaming server's answer is not HTTP");
		if (h > 0)
			return h;
	}
}

/* What a refusal's body says (up to 1 KiB, read for at most 2 s), trimmed. */
static void refusal_text(int fd, struct buf *b, size_t from, char *out, size_t size)
{
	int64_t deadline = clock_mono_ns() + 2000000000LL;

	while (b->len - from < 1024) {
		char chunk[1024];
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = (deadline - clock_mono_ns()) / 1000000;
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0 ||
		    (n = read(fd, chunk, sizeof(chunk))) <= 0)
			break;
		buf_append(b, chunk, (size_t)n, NULL);
	}
	snprintf(out, size, "%.*s", (int)(b->len - from < 1024 ? b->len - from : 1024),
		 b->data + from);
	for (size_t n = strlen(out); n && (out[n - 1] == '\n' || out[n - 1] == '\r'); n--)
		out[n - 1] = '\0';
}

/* Connects to url and upgrades to SPDY/3.1 with protocol; sc's session is a client's. */
int cli_sconn_open(struct cli_sconn *sc, const char *url, const char *protocol,
		   unsigned max_streams, struct err *err)
{
	const struct spdy_opts opts = { .client = true, .max_streams = max_streams };
	struct buf b = BUF_INIT;
	const char *path = NULL;
	char proto[64];
	int status = 0, fd = dial(url, &path, err);
	ssize_t h;
	_cleanup_free_ char *req = NULL;

	if (fd < 0)
		return fd;
	req = xasprintf("POST %s HTTP/1.1\r\nHost: streaming\r\nConnection: Upgrade\r\n"
			"Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: %s\r\n"
			"Content-Length: 0\r\n\r\n",
			path, protocol);
	if (cli_write_full(fd, req, strlen(req)) < 0) {
		h = err_errno(err, "the streaming server at %s", url);
	} else if ((h = read_answer(fd, &b, &status, proto, sizeof(proto), err)) > 0) {
		if (status != 101) {
			char text[1100];

			refusal_text(fd, &b, (size_t)h, text, sizeof(text));
			h = err_set(err, EPROTO, "the streaming server refused the stream: %d%s%s",
				    status, text[0] ? ": " : "", text);
		} else if (strcmp(proto, protocol) != 0) {
			h = err_set(err, EPROTO,
				    "the streaming server answered protocol \"%s\", not %s", proto,
				    protocol);
		}
	}
	if (h < 0) {
		close(fd);
		buf_release(&b);
		return (int)h;
	}
	sc->fd = fd;
	sc->nearly = b.len - (size_t)h;
	sc->early = xmalloc(sc->nearly + 1);
	memcpy(sc->early, b.data + h, sc->nearly);
	buf_release(&b);
	sc->sp = spdy_session_new(&opts, err);
	if (!sc->sp) {
		close(fd);
		free(sc->early);
		return -err->code;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

void cli_sconn_close(struct cli_sconn *sc)
{
	if (sc->fd >= 0)
		close(sc->fd);
	spdy_session_free(sc->sp);
	free(sc->early);
	sc->fd = -1;
	sc->sp = NULL;
	sc->early = NULL;
}

/* Writes what the session queued, as much as the socket takes; -1 when the server is gone. */
int cli_sconn_flush(struct cli_sconn *sc)
{
	const uint8_t *o;
	size_t n;

	while ((o = spdy_output(sc->sp, &n)) && n) {
		ssize_t w = send(sc->fd, o, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return 0;
		if (w <= 0)
			return -1;
		spdy_output_consume(sc->sp, (size_t)w);
	}
	return 0;
}

size_t cli_sconn_pending(const struct cli_sconn *sc)
{
	size_t n = 0;

	spdy_output(sc->sp, &n);
	return n;
}

/* Feeds data to the session and hands each event to fn; false on a protocol error. */
static bool sconn_feed(struct cli_sconn *sc, const uint8_t *data, size_t len,
		       void (*fn)(void *, const struct spdy_event *), void *arg)
{
	struct err err = ERR_INIT;
	size_t off = 0;

	for (;;) {
		struct spdy_event ev;
		ssize_t n = spdy_feed(sc->sp, data + off, len - off, &ev, &err);

		if (n < 0)
			return false;
		off += (size_t)n;
		if (ev.type == SPDY_EV_DATA)
			spdy_consume(sc->sp, ev.stream_id, ev.len);
		if (ev.type != SPDY_EV_NONE)
			fn(arg, &ev);
		else if (off >= len)
			return true;
	}
}

/* Reads what the server sent and feeds it: 1 read, 0 at its end, -1 on an error (in err). */
int cli_sconn_read(struct cli_sconn *sc, void (*fn)(void *, const struct spdy_event *), void *arg,
		   struct err *err)
{
	uint8_t buf[CLI_IO_CHUNK];
	ssize_t n;

	if (sc->nearly) {
		bool ok = sconn_feed(sc, sc->early, sc->nearly, fn, arg);

		sc->nearly = 0;
		if (!ok)
			return err_set(err, EPROTO, "the streaming server broke SPDY"), -1;
	}
	n = read(sc->fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 1;
	if (n < 0)
		return err_errno(err, "the streaming server"), -1;
	if (n == 0)
		return 0;
	if (!sconn_feed(sc, buf, (size_t)n, fn, arg))
		return err_set(err, EPROTO, "the streaming server broke SPDY"), -1;
	return 1;
}

/* ---- which pod and container ---- */

/* A pod by name in the namespace, else by sandbox id. */
int cli_resolve_pod(struct cli *c, const char *pod, char **id, struct err *err)
{
	Runtime__V1__PodSandboxStatusRequest req = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
	Runtime__V1__PodSandboxStatusResponse *resp = NULL;
	struct err as_id = ERR_INIT;
	int ret = cli_find_pod(c, pod, id, err);

	if (ret != -ENOENT)
		return ret;
	req.pod_sandbox_id = (char *)pod;
	if (cli_call(c, CLI_RT "PodSandboxStatus", &req.base,
		     &runtime__v1__pod_sandbox_status_response__descriptor, &resp, &as_id) < 0)
		return ret; /* not an id either: the name's error says it */
	*id = xstrdup(resp->status && resp->status->id[0] ? resp->status->id : pod);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return 0;
}

int cli_pick_container(struct cli *c, const char *pod, const char *name, char **id, struct err *err)
{
	Runtime__V1__ListContainersRequest req = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
	Runtime__V1__ContainerFilter f = RUNTIME__V1__CONTAINER_FILTER__INIT;
	Runtime__V1__ListContainersResponse *resp = NULL;
	const Runtime__V1__Container *pick = NULL;
	_cleanup_free_ char *sid = NULL;
	int ret = 0;

	if (cli_resolve_pod(c, pod, &sid, err) < 0)
		return -err->code;
	f.pod_sandbox_id = sid;
	req.filter = &f;
	if (cli_call(c, CLI_RT "ListContainers", &req.base,
		     &runtime__v1__list_containers_response__descriptor, &resp, err) < 0)
		return -err->code;
	for (size_t i = 0; i < resp->n_containers && ret == 0; i++) {
		const Runtime__V1__Container *ct = resp->containers[i];

		if (name && strcmp(ct->metadata->name, name) != 0)
			continue;
		if (!name && pick && strcmp(pick->metadata->name, ct->metadata->name) != 0)
			ret = err_set(err, EINVAL,
				      "pod %s has several containers; name one with -c", pod);
		else if (!pick || ct->created_at > pick->created_at)
			pick = ct;
	}
	if (ret == 0 && !pick)
		ret = err_set(err, ENOENT, "pod %s has no container%s%s", pod,
			      name ? " named " : "", name ? name : "");
	if (ret == 0)
		*id = xstrdup(pick->id);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return ret;
}
