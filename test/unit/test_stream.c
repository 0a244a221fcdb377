/*
 * Unit tests for kiyot/stream/server.c and session.c, the streaming server of Exec and
 * Attach: first up to the cell, with kiyot's CRI server (crihost.h) and a cell manager that
 * runs no cell, so every session gets as far as opening the agent's stream and must tell the
 * client why it cannot; then through to the fake agent of a whole kiyot (kiyot_fixture.h),
 * whose exec runs echo, exit N and cat (which echoes its input). Clients: `kiyot exec`/`kiyot
 * attach` (SPDY/3.1, as kubectl) and a raw socket for what a client may get wrong (unknown
 * tokens, no upgrade, protocols) and for WebSocket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clirun.h"
#include "clock.h"
#include "crihost.h"
#include "fsutil.h"
#include "kiyot_fixture.h"

#define CELL "cell-gone"
#define NOT_RUNNING "cell " CELL " is not running"

struct fix {
	struct crihost h;
	struct clirun run;
};

/* The fixture with a streaming server of limits (NULL: the defaults). */
static int setup_limits(void **state, const struct stream_limits *limits)
{
	struct fix *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;
	_cleanup_free_ char *sock = NULL;
	struct sandbox *sb;

	if (crihost_start(&f->h) < 0)
		return -1;
	if (cells_new(&f->h.k, NULL, &f->h.k.cells, &err) < 0 ||
	    stream_server_start("127.0.0.1:0", f->h.k.cells, limits, &f->h.k.stream, &err) < 0) {
		fprintf(stderr, "setup: %s\n", err.msg);
		return -1;
	}
	sb = crihost_add_sandbox(&f->h,
				 "5b00000000000000000000000000000000000000000000000000000000000001",
				 "web", SANDBOX_READY, CELL);
	crihost_add_container(&f->h,
			      "c000000000000000000000000000000000000000000000000000000000000001",
			      sb->id, "app", "busybox", CTR_RUNNING);
	sock = xasprintf("%s/kiyot.sock", f->h.dir);
	setenv("KIYOT_SOCKET", sock, 1);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_limits(state, NULL);
}

/* Small bounds to reach in a test: two connections from one client, eight in all. */
static int setup_small(void **state)
{
	static const struct stream_limits l = {
		.max_connections = 8,
		.max_client_connections = 2,
		.max_pod_sessions = 64,
		.head_timeout_ms = 60000,
	};

	return setup_limits(state, &l);
}

/* One connection from a client, which must send its request within 200 ms. */
static int setup_short_deadline(void **state)
{
	static const struct stream_limits l = {
		.max_connections = 8,
		.max_client_connections = 1,
		.max_pod_sessions = 64,
		.head_timeout_ms = 200,
	};

	return setup_limits(state, &l);
}

static int teardown(void **state)
{
	struct fix *f = *state;

	crihost_stop(&f->h);
	clirun_release(&f->run);
	free(f);
	return 0;
}

/* kubectl exec's way: Exec's URL upgraded to SPDY; the session cannot reach the cell and says
 * so on the error channel, and the command fails with that message. */
static void test_stream__exec_to_a_cell_that_is_gone_says_why(void **state)
{
	struct fix *f = *state;

	assert_int_equal(clirun(&f->run, "exec", "web", "--", "ls", "/", NULL), 1);
	if (!strstr(f->run.err, NOT_RUNNING))
		fail_msg("stderr \"%s\" does not say \"%s\"", f->run.err, NOT_RUNNING);
	assert_string_equal(f->run.out, "");
	assert_int_equal(clirun(&f->run, "exec", "-i", "web", "-c", "app", "--", "cat", NULL), 1);
	assert_non_null(strstr(f->run.err, NOT_RUNNING));
	assert_int_equal(clirun(&f->run, "attach", "web", NULL), 1);
	assert_non_null(strstr(f->run.err, NOT_RUNNING));
}

/* ---- a raw client ---- */

static int dial(const char *url)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int port = 0, fd;

	assert_int_equal(sscanf(url, "http://127.0.0.1:%d/", &port), 1);
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* A connection to url's port from the loopback address src ("127.0.0.2": another client). */
static int dial_from(const char *url, const char *src)
{
	struct sockaddr_in a = { .sin_family = AF_INET }, me = { .sin_family = AF_INET };
	int port = 0, fd;

	assert_int_equal(sscanf(url, "http://127.0.0.1:%d/", &port), 1);
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(inet_pton(AF_INET, src, &me.sin_addr), 1);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Everything the server sends until it closes (5 s at most); *len its length. */
static char *read_all(int fd, size_t *len)
{
	char *buf = xcalloc(1, 65537);
	size_t n = 0;

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t r;

		if (poll(&p, 1, 5000) <= 0)
			break;
		r = read(fd, buf + n, 65536 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	*len = n;
	return buf;
}

/* Sends a request for url's path with extra header lines from the client at src; the answer
 * until the close. */
static char *ask_from(const char *src, const char *url, const char *headers, size_t *len)
{
	const char *path = strchr(url + 7, '/');
	_cleanup_free_ char *req =
		xasprintf("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", path, headers);
	int fd = dial_from(url, src);
	char *answer;

	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	answer = read_all(fd, len);
	close(fd);
	return answer;
}

static char *ask(const char *url, const char *headers, size_t *len)
{
	return ask_from("127.0.0.1", url, headers, len);
}

static char *exec_url(struct fix *f)
{
	static char *const cmd[] = { "ls" };
	struct stream_request r = { .kind = STREAM_EXEC };

	r.cell_id = CELL;
	r.unit_id = "c000000000000000000000000000000000000000000000000000000000000001";
	r.cmd = cmd;
	r.n_cmd = 1;
	r.out = r.err = true;
	return stream_server_url(f->h.k.stream, &r);
}

static char *pf_url(struct fix *f, const int32_t *ports, size_t n)
{
	struct stream_request r = { .kind = STREAM_PORTFORWARD };

	r.cell_id = CELL;
	r.ports = ports;
	r.n_ports = n;
	return stream_server_url(f->h.k.stream, &r);
}

/* A URL is good once: a second use, or a made-up token, is 404 saying to ask again. */
static void test_stream__urls_are_single_use(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *url = exec_url(f);
	_cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *bad = NULL;
	size_t len;

	assert_int_equal(strncmp(url, "http://127.0.0.1:", 17), 0);
	assert_non_null(strstr(url, "/exec/"));
	a = ask(url, "", &len); /* used, though it asks for no upgrade */
	assert_int_equal(strncmp(a, "HTTP/1.1 400", 12), 0);
	assert_non_null(strstr(a, "upgrade to SPDY/3.1 or websocket to use this stream"));
	b = ask(url, "Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n", &len);
	assert_int_equal(strncmp(b, "HTTP/1.1 404", 12), 0);
	assert_non_null(strstr(b, "unknown or expired stream URL: ask the runtime for a new one"));
	bad = xstrdup(url);
	memcpy(strstr(bad, "/exec/") + 6, "0000", 4);
	c = ask(bad, "", &len);
	assert_int_equal(strncmp(c, "HTTP/1.1 404", 12), 0);
}

/* URLs forgotten for room are logged once in a while, not one line each: a flood of Exec
 * requests would flood the log too. */
static void test_stream__forgotten_urls_are_logged_once_in_a_while(void **state)
{
	struct fix *f = *state;
	char path[] = "/tmp/kiyot-test-stream-log.XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	_cleanup_free_ char *text = NULL;
	size_t len = 0, lines = 0;
	struct err err = ERR_INIT;

	assert_true(fd >= 0 && saved >= 0);
	fflush(stderr);
	assert_int_equal(dup2(fd, 2), 2);
	for (size_t i = 0; i < 3 * STREAM_MAX_TOKENS; i++)
		free(exec_url(f));
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	assert_int_equal(fs_read_file(path, 1 << 20, &text, &len, &err), 0);
	unlink(path);
	for (const char *p = text; (p = strstr(p, "unused URL(s) forgotten")); p++)
		lines++;
	assert_int_equal(lines, 1); /* 2048 forgotten: one line each before */
}

/* Unused URLs are bounded: past STREAM_MAX_TOKENS the oldest is forgotten (404 as an expired
 * one), the newest still work; and by the bytes their commands hold. */
static void test_stream__unused_urls_are_bounded(void **state)
{
	struct fix *f = *state;
	char **urls = xcalloc(STREAM_MAX_TOKENS + 1, sizeof(*urls));
	_cleanup_free_ char *first = NULL, *last = NULL, *big_a = NULL, *big_b = NULL;
	_cleanup_free_ char *huge = xmalloc(STREAM_MAX_TOKEN_BYTES / 2 + 1);
	char *const cmd[] = { huge };
	struct stream_request r = { .kind = STREAM_EXEC };
	size_t len;

	for (size_t i = 0; i <= STREAM_MAX_TOKENS; i++)
		urls[i] = exec_url(f);
	first = ask(urls[0], "Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n", &len);
	assert_int_equal(strncmp(first, "HTTP/1.1 404", 12), 0);
	last = ask(urls[STREAM_MAX_TOKENS], "", &len); /* known: 400, it asks for no upgrade */
	assert_int_equal(strncmp(last, "HTTP/1.1 400", 12), 0);
	for (size_t i = 0; i <= STREAM_MAX_TOKENS; i++)
		free(urls[i]);
	free(urls);

	/* two commands of half the byte bound each cannot both wait */
	memset(huge, 'x', STREAM_MAX_TOKEN_BYTES / 2);
	huge[STREAM_MAX_TOKEN_BYTES / 2] = '\0';
	r.cell_id = CELL;
	r.unit_id = "c000000000000000000000000000000000000000000000000000000000000001";
	r.cmd = cmd;
	r.n_cmd = 1;
	r.out = true;
	big_a = stream_server_url(f->h.k.stream, &r);
	big_b = stream_server_url(f->h.k.stream, &r);
	free(first);
	first = ask(big_a, "Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n", &len);
	assert_int_equal(strncmp(first, "HTTP/1.1 404", 12), 0);
	free(last);
	last = ask(big_b, "", &len);
	assert_int_equal(strncmp(last, "HTTP/1.1 400", 12), 0);
}

/* A head that is not HTTP is 400; a SPDY upgrade with no protocol in common is 403 and
 * lists the ones the server speaks. */
static void test_stream__bad_requests_are_answered(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *url = exec_url(f);
	_cleanup_free_ char *a = NULL, *b = NULL;
	int fd = dial(url);
	size_t len;

	assert_int_equal(write(fd, "BLAH\r\n\r\n", 8), 8);
	a = read_all(fd, &len);
	close(fd);
	assert_int_equal(strncmp(a, "HTTP/1.1 400", 12), 0);
	b = ask(url,
		"Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
		"X-Stream-Protocol-Version: v9.channel.k8s.io\r\n",
		&len);
	assert_int_equal(strncmp(b, "HTTP/1.1 403", 12), 0);
	assert_non_null(strstr(b, "X-Accepted-Stream-Protocol-Versions: v4.channel.k8s.io"));
	assert_non_null(strstr(b, "no stream protocol in common"));
}

/* The payloads of the unmasked WebSocket frames in data (after the upgrade's head),
 * concatenated; a close frame's too. */
static char *ws_payloads(const char *data, size_t len)
{
	const uint8_t *p = (const uint8_t *)data;
	char *out = xcalloc(1, len + 1);
	size_t o = 0, i = 0;

	while (i + 2 <= len) {
		uint64_t n = p[i + 1] & 0x7f;
		size_t h = 2;

		if (n == 126) {
			n = (uint64_t)p[i + 2] << 8 | p[i + 3];
			h = 4;
		} else if (n == 127) {
			break; /* nothing here is that large */
		}
		if (i + h + n > len)
			break;
		memcpy(out + o, p + i + h, n);
		o += n;
		i += h + n;
	}
	return out;
}

/* A WebSocket exec of url with v4.channel.k8s.io, to its end: the upgrade's answer (*head,
 * the caller frees it) and the payloads of the frames after it (the caller frees them). */
static char *ws_exec(const char *url, char **head)
{
	const char *body;
	size_t len;

	*head = ask(url,
		    "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
		    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
		    "Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n",
		    &len);
	assert_int_equal(strncmp(*head, "HTTP/1.1 101", 12), 0);
	body = strstr(*head, "\r\n\r\n") + 4;
	return ws_payloads(body, len - (size_t)(body - *head));
}

/* Over WebSocket (v4.channel.k8s.io, as kubectl 1.30 and later) the failure comes as a Status
 * on the error channel, then a close. */
static void test_stream__websocket_exec_gets_the_failure_as_a_status(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *url = exec_url(f);
	_cleanup_free_ char *a = NULL, *frames = NULL;

	frames = ws_exec(url, &a);
	assert_non_null(strstr(a, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
	assert_non_null(strstr(a, "Sec-WebSocket-Protocol: v4.channel.k8s.io"));
	/* channel 3 (error), then the Status */
	if (!strstr(frames,
		    "\x03{\"metadata\":{},\"status\":\"Failure\",\"message\":\"" NOT_RUNNING))
		fail_msg("no failure Status in \"%s\"", frames);
}

/* Stopping the server ends the connections it serves and frees its URLs. */
static void test_stream__stop_ends_open_connections(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *url = exec_url(f);
	_cleanup_free_ char *unused = exec_url(f);
	_cleanup_free_ char *rest = NULL;
	int fd = dial(url);
	int64_t t0;
	size_t len;

	/* a connection that never sends its head: it would wait 10 s for one */
	usleep(50000);
	t0 = clock_mono_ns();
	stream_server_stop(f->h.k.stream);
	f->h.k.stream = NULL;
	rest = read_all(fd, &len);
	close(fd);
	assert_true(clock_mono_ns() - t0 < 3000LL * 1000 * 1000);
	assert_null(strstr(rest, "HTTP/1.1 101"));
}

/* ---- bounds, deadlines, paths ---- */

/* One client holding its bound of connections (two here, sending nothing yet) is refused a
 * third, 429 saying which bound and what to do, while another client (another address) is
 * served with the same URL: the refusal did not use it. Once the first client's connections
 * close, it is served again. */
static void test_stream__one_client_at_its_bound_does_not_block_another(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *url = exec_url(f), *url2 = exec_url(f);
	_cleanup_free_ char *refused = NULL, *other = NULL, *again = NULL;
	int a1 = dial(url), a2 = dial(url);
	size_t len;

	refused = ask(url, "Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n", &len);
	assert_int_equal(strncmp(refused, "HTTP/1.1 429", 12), 0);
	assert_non_null(strstr(refused, "\r\nRetry-After: 1\r\n"));
	if (!strstr(refused, "client 127.0.0.1 has 2 connections open to the streaming server, "
			     "the most for one address: close some, or send their requests"))
		fail_msg("the refusal does not say which bound: \"%s\"", refused);
	other = ask_from("127.0.0.2", url, "", &len);
	assert_int_equal(strncmp(other, "HTTP/1.1 400", 12), 0);
	assert_non_null(strstr(other, "upgrade to SPDY/3.1 or websocket to use this stream"));
	close(a1);
	close(a2);
	for (int i = 0; i < 500; i++) { /* until the server has seen them close */
		free(again);
		again = ask(url2, "", &len);
		if (strncmp(again, "HTTP/1.1 429", 12) != 0)
			break;
		usleep(10000);
	}
	assert_int_equal(strncmp(again, "HTTP/1.1 400", 12), 0);
}

/* A connection that does not send its request line and headers within the deadline is told
 * so (408) and closed, so it no longer holds its client's bound (one connection here): the
 * same client's next connection is served. */
static void test_stream__a_half_open_connection_is_closed_after_the_deadline(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *url = exec_url(f);
	_cleanup_free_ char *answer = NULL, *later = NULL;
	int fd = dial(url);
	struct pollfd p = { fd, POLLIN, 0 };
	char c;
	size_t len;

	assert_int_equal(write(fd, "GET /exec/", 10), 10); /* and no more */
	answer = read_all(fd, &len);
	assert_int_equal(strncmp(answer, "HTTP/1.1 408", 12), 0);
	assert_non_null(strstr(answer, "no request line and headers within 200 ms"));
	/* closed: the end is there to read, not a poll that ran out */
	assert_int_equal(poll(&p, 1, 0), 1);
	assert_true(read(fd, &c, 1) <= 0);
	close(fd);
	later = ask(url, "", &len);
	assert_int_equal(strncmp(later, "HTTP/1.1 400", 12), 0);
	assert_non_null(strstr(later, "upgrade to SPDY/3.1 or websocket to use this stream"));
}

/* url with its first path element replaced by kind ("portforward"), or with extra before
 * the token. */
static char *url_on_path(const char *url, const char *path)
{
	const char *token = strrchr(url, '/') + 1;
	const char *first = strchr(url + 7, '/');

	return xasprintf("%.*s/%s/%s", (int)(first - url), url, path, token);
}

/* A token is good only on its own kind's path: an exec's on /portforward/ or /attach/, a
 * port-forward's on /exec/, or either under more path elements, is refused 404 saying whose
 * token it is, and stays good on its own path (once). */
static void test_stream__a_token_on_another_path_is_refused_and_kept(void **state)
{
	static const int32_t ports[] = { 80 };
	struct fix *f = *state;
	_cleanup_free_ char *url = exec_url(f), *pf = pf_url(f, ports, 1);
	_cleanup_free_ char *as_pf = url_on_path(url, "portforward");
	_cleanup_free_ char *as_attach = url_on_path(url, "attach");
	_cleanup_free_ char *nested = url_on_path(url, "exec/more");
	_cleanup_free_ char *pf_as_exec = url_on_path(pf, "exec");
	_cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL, *g = NULL;
	_cleanup_free_ char *h = NULL;
	size_t len;

	a = ask(as_pf, "Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n", &len);
	assert_int_equal(strncmp(a, "HTTP/1.1 404", 12), 0);
	if (!strstr(a, "this stream URL's token is for exec, not port-forward: use it as the "
		       "runtime returned it, on /exec/"))
		fail_msg("the refusal does not say why: \"%s\"", a);
	b = ask(as_attach, "", &len);
	assert_int_equal(strncmp(b, "HTTP/1.1 404", 12), 0);
	assert_non_null(strstr(b, "token is for exec, not attach"));
	c = ask(nested, "", &len);
	assert_int_equal(strncmp(c, "HTTP/1.1 404", 12), 0);
	/* still good where it belongs, then used */
	d = ask(url, "", &len);
	assert_int_equal(strncmp(d, "HTTP/1.1 400", 12), 0);
	assert_non_null(strstr(d, "upgrade to SPDY/3.1 or websocket to use this stream"));
	e = ask(url, "", &len);
	assert_int_equal(strncmp(e, "HTTP/1.1 404", 12), 0);
	assert_non_null(strstr(e, "unknown or expired stream URL"));
	/* a port-forward's token does not run on /exec/ */
	g = ask(pf_as_exec, "", &len);
	assert_int_equal(strncmp(g, "HTTP/1.1 404", 12), 0);
	assert_non_null(strstr(g, "token is for port-forward, not exec"));
	h = ask(pf, "", &len);
	assert_int_equal(strncmp(h, "HTTP/1.1 400", 12), 0);
}

/* The start-up log names the address the server listens on (0.0.0.0 said to be every
 * address) and the one its URLs carry; a server on one address gives URLs of it. */
static void test_stream__start_up_names_the_address_it_listens_on(void **state)
{
	struct fix *f = *state;
	char path[] = "/tmp/kiyot-test-stream-log.XXXXXX";
	int fd = mkstemp(path), saved = dup(2), port_any = 0, port_two = 0;
	_cleanup_free_ char *text = NULL, *url_any = NULL, *url_two = NULL;
	_cleanup_free_ char *want_any = NULL, *want_two = NULL;
	static char *const cmd[] = { "ls" };
	struct stream_request r = { .kind = STREAM_EXEC, .cmd = cmd, .n_cmd = 1 };
	struct stream_server *any = NULL, *two = NULL;
	struct err err = ERR_INIT;
	size_t len = 0;

	r.cell_id = CELL;
	assert_true(fd >= 0 && saved >= 0);
	fflush(stderr);
	assert_int_equal(dup2(fd, 2), 2);
	assert_int_equal(stream_server_start("0.0.0.0:0", f->h.k.cells, NULL, &any, &err), 0);
	url_any = stream_server_url(any, &r);
	stream_server_stop(any);
	assert_int_equal(stream_server_start("127.0.0.2:0", f->h.k.cells, NULL, &two, &err), 0);
	url_two = stream_server_url(two, &r);
	stream_server_stop(two);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	assert_int_equal(fs_read_file(path, 1 << 20, &text, &len, &err), 0);
	unlink(path);
	assert_int_equal(sscanf(url_any, "http://127.0.0.1:%d/exec/", &port_any), 1);
	assert_int_equal(sscanf(url_two, "http://127.0.0.2:%d/exec/", &port_two), 1);
	want_any = xasprintf("streaming server on 0.0.0.0:%d, every address of the node (exec, "
			     "attach, port-forward); its URLs name 127.0.0.1:%d;",
			     port_any, port_any);
	want_two = xasprintf("streaming server on 127.0.0.2:%d (exec, attach, port-forward); its "
			     "URLs name 127.0.0.2:%d;",
			     port_two, port_two);
	if (!strstr(text, want_any) || !strstr(text, want_two))
		fail_msg("the log \"%s\" does not say \"%s\" and \"%s\"", text, want_any, want_two);
}

/* ---- port-forward, with a provider whose cells share the node ---- */

/* An echo server on 127.0.0.1 standing in for the pod's port 80: it answers every
 * connection with what it reads, until the connection ends. */
struct echo {
	int lfd, port;
	pthread_t thread;
};

static void *echo_main(void *arg)
{
	struct echo *e = arg;
	int fd;

	while ((fd = accept(e->lfd, NULL, NULL)) >= 0) {
		char buf[4096];
		ssize_t n;

		while ((n = read(fd, buf, sizeof(buf))) > 0)
			if (write(fd, buf, (size_t)n) != n)
				break;
		close(fd);
	}
	return NULL;
}

static int listen_any(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* The provider's dial: port 80 of cell CELL is the echo server; any other port refuses. */
static int echo_dial(void *self, const char *cell_id, uint16_t port, int host_network,
		     struct err *err)
{
	struct echo *e = self;
	struct sockaddr_in a = { .sin_family = AF_INET };
	int fd;

	(void)host_network;
	if (strcmp(cell_id, CELL) != 0 || port != 80)
		return err_set(err, ECONNREFUSED, "connect to port %u of cell %s: refused", port,
			       cell_id);
	a.sin_port = htons((uint16_t)e->port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return err_errno(err, "connect to the echo server");
	}
	return fd;
}

static const struct provider_ops echo_ops = { .name = "echo", .dial = echo_dial };

static struct echo echo;

static int setup_pf_limits(void **state, const struct stream_limits *limits)
{
	struct fix *f;

	if (setup_limits(state, limits) < 0)
		return -1;
	f = *state;
	echo.lfd = listen_any(&echo.port);
	assert_int_equal(pthread_create(&echo.thread, NULL, echo_main, &echo), 0);
	f->h.k.provider.ops = &echo_ops;
	f->h.k.provider.self = &echo;
	return 0;
}

static int setup_pf(void **state)
{
	return setup_pf_limits(state, NULL);
}

/* One session open for a pod at once. */
static int setup_pf_one_a_pod(void **state)
{
	static const struct stream_limits l = {
		.max_connections = 8,
		.max_client_connections = 8,
		.max_pod_sessions = 1,
		.head_timeout_ms = 60000,
	};

	return setup_pf_limits(state, &l);
}

static int teardown_pf(void **state)
{
	struct fix *f = *state;

	/* the server first: a session a failed test left open holds a connection to the echo
	 * server, whose thread would not end */
	stream_server_stop(f->h.k.stream);
	f->h.k.stream = NULL;
	shutdown(echo.lfd, SHUT_RDWR);
	pthread_join(echo.thread, NULL);
	close(echo.lfd);
	f->h.k.provider.ops = NULL;
	return teardown(state);
}

struct pf_run {
	struct fix *f;
	char port[16], refused[16]; /* LOCAL:80 and LOCAL:81 */
	int status;
};

static void *pf_main(void *arg)
{
	struct pf_run *r = arg;

	r->status = clirun(&r->f->run, "port-forward", "web", r->port, r->refused, NULL);
	return NULL;
}

/* A connection to 127.0.0.1:port once something listens there (5 s at most), or -1. */
static int connect_local(int port)
{
	for (int i = 0; i < 500; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET };
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		a.sin_port = htons((uint16_t)port);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			return fd;
		close(fd);
		usleep(10000);
	}
	return -1;
}

/* Reads until n bytes or the end (5 s at most). */
static size_t read_n(int fd, char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t r;

		if (poll(&p, 1, 5000) <= 0 || (r = read(fd, buf + got, n - got)) <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* kiyot port-forward as kubectl's: bytes to a local port reach the pod's port and its
 * answers come back, on several connections in turn; a port the pod refuses ends that
 * connection and says why, the others go on; an interrupt ends it with 0. */
static void test_stream__port_forward_carries_bytes_both_ways(void **state)
{
	struct fix *f = *state;
	struct pf_run r = { f, "", "", -1 };
	pthread_t t;
	int lport, rport, lfd = listen_any(&lport), rfd = listen_any(&rport), fd;
	char buf[64 * 1024], big[64 * 1024];

	close(lfd); /* free ports for kiyot port-forward to take */
	close(rfd);
	snprintf(r.port, sizeof(r.port), "%d:80", lport);
	snprintf(r.refused, sizeof(r.refused), "%d:81", rport);
	assert_int_equal(pthread_create(&t, NULL, pf_main, &r), 0);
	for (int round = 0; round < 2; round++) {
		fd = connect_local(lport);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, "ping\n", 5), 5);
		assert_int_equal(read_n(fd, buf, 5), 5);
		assert_memory_equal(buf, "ping\n", 5);
		close(fd);
	}
	/* 64 KiB each way at once */
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + i % 26);
	fd = connect_local(lport);
	assert_int_equal(write(fd, big, sizeof(big)), (ssize_t)sizeof(big));
	assert_int_equal(read_n(fd, buf, sizeof(buf)), sizeof(buf));
	assert_memory_equal(buf, big, sizeof(big));
	/* the pod refuses port 81: that connection ends at once */
	{
		int rf = connect_local(rport);

		assert_true(rf >= 0);
		assert_int_equal(read_n(rf, buf, 1), 0);
		close(rf);
	}
	/* the first connection still works */
	assert_int_equal(write(fd, "more", 4), 4);
	assert_int_equal(read_n(fd, buf, 4), 4);
	assert_memory_equal(buf, "more", 4);
	close(fd);
	kill(getpid(), SIGTERM);
	pthread_join(t, NULL);
	assert_int_equal(r.status, 0);
	if (!strstr(f->run.err, "refused"))
		fail_msg("stderr \"%s\" does not say the pod refused", f->run.err);
	assert_non_null(strstr(f->run.out, "Forwarding from 127.0.0.1:"));
}

/* ---- port-forward over WebSocket (kubectl 1.31 and later) ---- */

/* Sends one masked binary frame: the channel byte, then data (a client's frames are
 * masked). */
static void ws_write(int fd, uint8_t ch, const char *data, size_t len)
{
	uint8_t frame[256];
	const uint8_t mask[4] = { 0x12, 0x34, 0x56, 0x78 };
	size_t n = 0;

	assert_true(len + 1 < 126);
	frame[n++] = 0x82;
	frame[n++] = (uint8_t)(0x80 | (len + 1));
	memcpy(frame + n, mask, 4);
	n += 4;
	frame[n] = ch ^ mask[0];
	for (size_t i = 0; i < len; i++)
		frame[n + 1 + i] = (uint8_t)data[i] ^ mask[(i + 1) % 4];
	n += len + 1;
	assert_int_equal(write(fd, frame, n), (ssize_t)n);
}

/* Reads one unmasked frame of the server: 1 with its payload (NUL-terminated) in buf, 0 at
 * the end or a close frame. */
static int ws_read(int fd, char *buf, size_t size, size_t *len)
{
	uint8_t h[4];
	size_t n;

	if (read_n(fd, (char *)h, 2) != 2)
		return 0;
	n = h[1] & 0x7f;
	if (n == 126) {
		assert_int_equal(read_n(fd, (char *)h + 2, 2), 2);
		n = (size_t)h[2] << 8 | h[3];
	}
	assert_true(n < size);
	assert_int_equal(read_n(fd, buf, n), n);
	buf[n] = '\0';
	*len = n;
	return (h[0] & 0x0f) != 0x8;
}

static int ws_upgrade_pf(const char *url, const char *query, const char *proto, char **head)
{
	const char *path = strchr(url + 7, '/');
	_cleanup_free_ char *req = xasprintf(
		"GET %s%s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\n"
		"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
		path, query, proto);
	int fd = dial(url);
	char buf[4096];
	size_t n = 0;

	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	while (n < sizeof(buf) - 1 && read_n(fd, buf + n, 1) == 1) {
		n++;
		buf[n] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	*head = xstrndup(buf, n);
	return fd;
}

/* Each port's pair of channels starts with the port (little endian); bytes on the data
 * channel reach the pod's port and come back; a port the pod refuses says so on its error
 * channel while the others carry on. */
static void test_stream__websocket_port_forward(void **state)
{
	static const int32_t ports[] = { 80 };
	struct fix *f = *state;
	_cleanup_free_ char *url = pf_url(f, ports, 1);
	_cleanup_free_ char *head = NULL;
	char buf[1024];
	size_t len;
	int fd = ws_upgrade_pf(url, "?port=80&port=81", "v4.channel.k8s.io", &head);
	int got_error = 0;

	assert_int_equal(strncmp(head, "HTTP/1.1 101", 12), 0);
	assert_non_null(strstr(head, "Sec-WebSocket-Protocol: v4.channel.k8s.io"));
	for (int i = 0; i < 4; i++) { /* channels 0-3, each announcing its port */
		assert_int_equal(ws_read(fd, buf, sizeof(buf), &len), 1);
		assert_int_equal(len, 3);
		assert_int_equal((uint8_t)buf[0], i);
		assert_int_equal((uint8_t)buf[1], i < 2 ? 80 : 81);
		assert_int_equal((uint8_t)buf[2], 0);
	}
	ws_write(fd, 0, "ping", 4);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(ws_read(fd, buf, sizeof(buf), &len), 1);
		if (buf[0] == 3 && strstr(buf + 1, "refused"))
			got_error = 1;
		if (buf[0] == 0 && len == 5) {
			assert_memory_equal(buf + 1, "ping", 4);
			break;
		}
	}
	if (!got_error) /* port 81's refusal, if it came after the echo */
		for (int i = 0; i < 8 && !got_error; i++)
			if (ws_read(fd, buf, sizeof(buf), &len) == 1 && buf[0] == 3)
				got_error = strstr(buf + 1, "refused") != NULL;
	assert_true(got_error);
	close(fd);
}

/* What a WebSocket port-forward cannot serve is refused before the upgrade, saying why. */
static void test_stream__websocket_port_forward_refusals(void **state)
{
	static const int32_t ports[] = { 80 };
	static const struct {
		const char *query, *proto, *status, *why;
	} cases[] = {
		{ "", "v9.channel.k8s.io", "HTTP/1.1 403",
		  "requested protocol(s) are not supported: v9.channel.k8s.io" },
		{ "?port=1,2,3,4,5,6", "v4.base64.channel.k8s.io", "HTTP/1.1 400",
		  "6 ports: v4.base64.channel.k8s.io carries at most 5" },
		{ "?port=http", "v4.channel.k8s.io", "HTTP/1.1 400",
		  "unable to parse \"http\" as a port" },
	};
	struct fix *f = *state;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		_cleanup_free_ char *url = pf_url(f, ports, 1);
		_cleanup_free_ char *head = NULL, *body = NULL;
		int fd = ws_upgrade_pf(url, cases[i].query, cases[i].proto, &head);
		size_t len;

		body = read_all(fd, &len);
		close(fd);
		assert_int_equal(strncmp(head, cases[i].status, 12), 0);
		if (!strstr(body, cases[i].why))
			fail_msg("%s: \"%s\" does not say \"%s\"", cases[i].query, body,
				 cases[i].why);
	}
}

/* A pod with its most sessions open (one here) is refused another, 429 saying so, while
 * another pod's session opens; the refused URL was not used: once the first session ended,
 * it opens. */
static void test_stream__one_pod_at_its_bound_does_not_block_another(void **state)
{
	static const int32_t ports[] = { 80 };
	struct fix *f = *state;
	struct stream_request r = { .kind = STREAM_PORTFORWARD, .ports = ports, .n_ports = 1 };
	_cleanup_free_ char *first = pf_url(f, ports, 1), *second = pf_url(f, ports, 1);
	_cleanup_free_ char *other = NULL, *h1 = NULL, *h2 = NULL, *h3 = NULL, *body = NULL;
	int fd1, fd2, fd3;
	size_t len;

	r.cell_id = "cell-other";
	other = stream_server_url(f->h.k.stream, &r);
	fd1 = ws_upgrade_pf(first, "", "v4.channel.k8s.io", &h1);
	assert_int_equal(strncmp(h1, "HTTP/1.1 101", 12), 0);
	fd2 = ws_upgrade_pf(second, "", "v4.channel.k8s.io", &h2);
	body = read_all(fd2, &len);
	close(fd2);
	assert_int_equal(strncmp(h2, "HTTP/1.1 429", 12), 0);
	if (!strstr(body, "pod sandbox " CELL " has 1 exec, attach and port-forward sessions "
			  "open, the most for one pod: close some and try again"))
		fail_msg("the refusal does not say which bound: \"%s\"", body);
	fd3 = ws_upgrade_pf(other, "", "v4.channel.k8s.io", &h3);
	assert_int_equal(strncmp(h3, "HTTP/1.1 101", 12), 0);
	close(fd3);
	close(fd1);
	for (int i = 0; i < 500; i++) { /* until the first session ended */
		free(h2);
		fd2 = ws_upgrade_pf(second, "", "v4.channel.k8s.io", &h2);
		close(fd2);
		if (strncmp(h2, "HTTP/1.1 429", 12) != 0)
			break;
		usleep(10000);
	}
	assert_int_equal(strncmp(h2, "HTTP/1.1 101", 12), 0);
}

/* ---- through to an agent ---- */

struct live {
	struct kfix *k;
	char *sb, *ctr;
	struct clirun run;
};

static int setup_live(void **state)
{
	struct live *l = xcalloc(1, sizeof(*l));
	void *k;

	if (kfix_setup(&k) < 0)
		return -1;
	l->k = k;
	kfix_pod_with_container(l->k, "web", &l->sb, &l->ctr);
	setenv("KIYOT_SOCKET", l->k->sock, 1);
	*state = l;
	return 0;
}

static int teardown_live(void **state)
{
	struct live *l = *state;
	void *k = l->k;

	kfix_teardown(&k);
	clirun_release(&l->run);
	free(l->sb);
	free(l->ctr);
	free(l);
	return 0;
}

/* kubectl exec's way, through to the agent: the command's output, and its exit code as the
 * command's own (127 for one the container lacks, with its message on stderr). */
static void test_stream__exec_runs_the_command(void **state)
{
	struct live *l = *state;

	assert_int_equal(clirun(&l->run, "exec", "web", "--", "echo", "hello", "cell", NULL), 0);
	assert_string_equal(l->run.out, "hello cell\n");
	assert_int_equal(clirun(&l->run, "exec", "web", "--", "exit", "3", NULL), 3);
	assert_int_equal(clirun(&l->run, "exec", "web", "--", "nosuch", NULL), 127);
	assert_non_null(strstr(l->run.err, "nosuch: command not found"));
}

/* Input goes through: cat echoes 100 KiB of it back, and ends when the input does; attach
 * refuses input to a container made without stdin. */
static void test_stream__exec_carries_input(void **state)
{
	struct live *l = *state;
	_cleanup_free_ char *in = xasprintf("%s/stdin", l->k->dir);
	_cleanup_free_ char *data = xmalloc(100 * 1024 + 1);
	struct err err = ERR_INIT;

	for (size_t i = 0; i < 100 * 1024; i++)
		data[i] = (char)('a' + i % 26);
	data[100 * 1024] = '\0';
	assert_int_equal(fs_write_file(in, data, 100 * 1024, 0600, &err), 0);
	l->run.in = in;
	assert_int_equal(clirun(&l->run, "exec", "-i", "web", "--", "cat", NULL), 0);
	assert_int_equal(strlen(l->run.out), 100 * 1024);
	assert_string_equal(l->run.out, data);
	/* a container made without stdin takes none through attach */
	assert_int_equal(clirun(&l->run, "attach", "-i", "web", NULL), 1);
	assert_non_null(strstr(l->run.err, "was not created with stdin: attach without stdin"));
}

struct big_writer {
	int fd;
	const char *data;
	size_t len;
};

static void *big_write(void *arg)
{
	struct big_writer *w = arg;

	for (size_t off = 0; off < w->len;) {
		ssize_t n = write(w->fd, w->data + off, w->len - off);

		if (n <= 0)
			break;
		off += (size_t)n;
	}
	return NULL;
}

struct pf_live_run {
	struct live *l;
	char port[16];
	int status;
};

static void *pf_live_main(void *arg)
{
	struct pf_live_run *r = arg;

	r->status = clirun(&r->l->run, "port-forward", "web", r->port, NULL);
	return NULL;
}

/* Port-forward through the agent's PortForward stream (the fake provider's cells do not share
 * the node): 8 MiB each way at once, over eight times what either side queues, come back
 * whole and in order while the client writes faster than it reads; a second connection then
 * works too. */
static void test_stream__port_forward_through_the_agent(void **state)
{
	struct live *l = *state;
	struct pf_live_run r = { l, "", -1 };
	const size_t len = 8u << 20;
	char *big = xmalloc(len), *back = xmalloc(len);
	struct big_writer w;
	pthread_t t, wt;
	int lport, lfd = listen_any(&lport), fd;

	close(lfd);
	snprintf(r.port, sizeof(r.port), "%d:80", lport);
	for (size_t i = 0; i < len; i++)
		big[i] = (char)(i * 7 + i / 4096);
	assert_int_equal(pthread_create(&t, NULL, pf_live_main, &r), 0);
	fd = connect_local(lport);
	assert_true(fd >= 0);
	w = (struct big_writer){ fd, big, len };
	assert_int_equal(pthread_create(&wt, NULL, big_write, &w), 0);
	assert_int_equal(read_n(fd, back, len), len);
	pthread_join(wt, NULL);
	assert_memory_equal(back, big, len);
	close(fd);
	fd = connect_local(lport);
	assert_int_equal(write(fd, "again", 5), 5);
	assert_int_equal(read_n(fd, back, 5), 5);
	assert_memory_equal(back, "again", 5);
	close(fd);
	kill(getpid(), SIGTERM);
	pthread_join(t, NULL);
	assert_int_equal(r.status, 0);
	free(big);
	free(back);
}

/* Appends one masked WebSocket frame of opcode op with payload p[0..n) to b. */
static size_t ws_frame(uint8_t *b, uint8_t op, const uint8_t *p, size_t n)
{
	const uint8_t mask[4] = { 0x21, 0x43, 0x65, 0x87 };
	size_t k = 0;

	assert_true(n < 126);
	b[k++] = (uint8_t)(0x80 | op);
	b[k++] = (uint8_t)(0x80 | n);
	memcpy(b + k, mask, 4);
	k += 4;
	for (size_t i = 0; i < n; i++)
		b[k + i] = p[i] ^ mask[i % 4];
	return k + n;
}

/* A client may leave at any byte of its session: an exec of cat over WebSocket cut after
 * every byte of the request head, its frames and its close, the connection then closed at
 * once or half-closed and read to its end. The server goes on serving (an exec afterwards
 * works) and its stop finds nothing left running (under ASan, nothing freed twice or used
 * after). */
static void test_stream__clients_leaving_at_every_step(void **state)
{
	struct live *l = *state;
	static char *const cmd[] = { "cat" };
	struct stream_request r = { .kind = STREAM_EXEC };
	_cleanup_free_ char *cell = kfix_cell_of(l->k, l->sb);
	uint8_t script[1024];
	size_t len = 0;

	r.cell_id = cell;
	r.unit_id = l->ctr;
	r.cmd = cmd;
	r.n_cmd = 1;
	r.in = r.out = r.err = true;
	for (size_t cut = 0;; cut++) {
		_cleanup_free_ char *url = stream_server_url(l->k->k.stream, &r);
		_cleanup_free_ char *rest = NULL;
		const char *path = strchr(url + 7, '/');
		int fd;

		if (cut == 0) { /* the script, once: the head names the first URL's token */
			const uint8_t in[][3] = { { 0, 'a', '\n' }, { 0, 'b', '\n' } };

			len = (size_t)snprintf((char *)script, sizeof(script),
					       "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
					       "Connection: Upgrade\r\nUpgrade: websocket\r\n"
					       "Sec-WebSocket-Version: 13\r\n"
					       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
					       "Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n",
					       path);
			for (size_t i = 0; i < ARRAY_SIZE(in); i++)
				len += ws_frame(script + len, 0x2, in[i], sizeof(in[i]));
			len += ws_frame(script + len, 0x8, (const uint8_t *)"\x03\xe8", 2);
		} else if (cut > len) {
			break;
		} else {
			/* the same script under this URL's token (of the same length) */
			memcpy(strstr((char *)script, "/exec/") + 6, strstr(path, "/exec/") + 6,
			       32);
		}
		fd = dial(url);
		assert_int_equal(write(fd, script, cut), (ssize_t)cut);
		if (cut % 2) {
			size_t n;

			shutdown(fd, SHUT_WR);
			rest = read_all(fd, &n);
		}
		close(fd);
	}
	assert_true(len > 250); /* every cut above ran, up to the whole script */
	assert_int_equal(clirun(&l->run, "exec", "web", "--", "echo", "still", "here", NULL), 0);
	assert_string_equal(l->run.out, "still here\n");
}

struct stopper {
	struct stream_server *srv;
	volatile int done;
};

static void *stopper_main(void *arg)
{
	struct stopper *st = arg;

	stream_server_stop(st->srv);
	st->done = 1;
	return NULL;
}

/* The streaming server stops whatever state its sessions are in: 16 execs of cat over
 * WebSocket, their heads and an input frame written, and the stop asked 0 to 20 ms after,
 * while the sessions' agent streams are being opened, carry input or wait for output. Each
 * stop returns (a hang fails after 60 s), and the next server serves. */
static void test_stream__stop_ends_sessions_just_opened(void **state)
{
	struct live *l = *state;
	static char *const cmd[] = { "cat" };
	static const int delays_us[] = { 0, 200, 1000, 3000, 8000, 20000 };
	struct stream_request r = { .kind = STREAM_EXEC };
	_cleanup_free_ char *cell = kfix_cell_of(l->k, l->sb);
	struct err err = ERR_INIT;

	r.cell_id = cell;
	r.unit_id = l->ctr;
	r.cmd = cmd;
	r.n_cmd = 1;
	r.in = r.out = r.err = true;
	for (size_t d = 0; d < ARRAY_SIZE(delays_us); d++) {
		int fds[16];
		struct stopper st = { l->k->k.stream, 0 };
		pthread_t t;
		int64_t until;

		for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
			_cleanup_free_ char *url = stream_server_url(l->k->k.stream, &r);
			const char *path = strchr(url + 7, '/');
			const uint8_t in[3] = { 0, 'a', '\n' };
			uint8_t head[1024];
			size_t len = (size_t)snprintf(
				(char *)head, sizeof(head),
				"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
				"Connection: Upgrade\r\nUpgrade: websocket\r\n"
				"Sec-WebSocket-Version: 13\r\n"
				"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
				"Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n",
				path);

			len += ws_frame(head + len, 0x2, in, sizeof(in));
			fds[i] = dial(url);
			assert_int_equal(write(fds[i], head, len), (ssize_t)len);
		}
		usleep((useconds_t)delays_us[d]);
		assert_int_equal(pthread_create(&t, NULL, stopper_main, &st), 0);
		until = clock_mono_ns() + 60LL * 1000 * 1000 * 1000;
		while (!st.done && clock_mono_ns() < until)
			usleep(10000);
		if (!st.done)
			fail_msg("the streaming server's stop %d us after 16 sessions opened has "
				 "not returned in 60 s",
				 delays_us[d]);
		pthread_join(t, NULL);
		for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
			close(fds[i]);
		l->k->k.stream = NULL;
		assert_int_equal(stream_server_start("127.0.0.1:0", l->k->k.cells, NULL,
						     &l->k->k.stream, &err),
				 0);
	}
	assert_int_equal(clirun(&l->run, "exec", "web", "--", "echo", "still", "here", NULL), 0);
	assert_string_equal(l->run.out, "still here\n");
}

/* Over WebSocket v4: stdout on channel 1, then a Success Status on channel 3. */
static void test_stream__websocket_exec_through_to_the_agent(void **state)
{
	struct live *l = *state;
	static char *const cmd[] = { "echo", "over", "ws" };
	struct stream_request r = { .kind = STREAM_EXEC };
	_cleanup_free_ char *cell = kfix_cell_of(l->k, l->sb);
	_cleanup_free_ char *url = NULL, *a = NULL, *frames = NULL;

	r.cell_id = cell;
	r.unit_id = l->ctr;
	r.cmd = cmd;
	r.n_cmd = 3;
	r.out = r.err = true;
	url = stream_server_url(l->k->k.stream, &r);
	frames = ws_exec(url, &a);
	if (!strstr(frames, "\x01over ws"))
		fail_msg("no output on channel 1 in \"%s\"", frames);
	if (!strstr(frames, "\x03{\"metadata\":{},\"status\":\"Success\"}"))
		fail_msg("no Success Status in \"%s\"", frames);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(test_stream__##name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(exec_to_a_cell_that_is_gone_says_why),
		T(urls_are_single_use),
		T(unused_urls_are_bounded),
		T(forgotten_urls_are_logged_once_in_a_while),
		T(bad_requests_are_answered),
		T(websocket_exec_gets_the_failure_as_a_status),
		T(stop_ends_open_connections),
		T(a_token_on_another_path_is_refused_and_kept),
		T(start_up_names_the_address_it_listens_on),
		cmocka_unit_test_setup_teardown(
			test_stream__one_client_at_its_bound_does_not_block_another, setup_small,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_stream__a_half_open_connection_is_closed_after_the_deadline,
			setup_short_deadline, teardown),
		cmocka_unit_test_setup_teardown(
			test_stream__one_pod_at_its_bound_does_not_block_another,
			setup_pf_one_a_pod, teardown_pf),
		cmocka_unit_test_setup_teardown(test_stream__port_forward_carries_bytes_both_ways,
						setup_pf, teardown_pf),
		cmocka_unit_test_setup_teardown(test_stream__websocket_port_forward, setup_pf,
						teardown_pf),
		cmocka_unit_test_setup_teardown(test_stream__websocket_port_forward_refusals,
						setup_pf, teardown_pf),
		cmocka_unit_test_setup_teardown(test_stream__exec_runs_the_command, setup_live,
						teardown_live),
		cmocka_unit_test_setup_teardown(test_stream__exec_carries_input, setup_live,
						teardown_live),
		cmocka_unit_test_setup_teardown(test_stream__websocket_exec_through_to_the_agent,
						setup_live, teardown_live),
		cmocka_unit_test_setup_teardown(test_stream__port_forward_through_the_agent,
						setup_live, teardown_live),
		cmocka_unit_test_setup_teardown(test_stream__stop_ends_sessions_just_opened,
						setup_live, teardown_live),
		cmocka_unit_test_setup_teardown(test_stream__clients_leaving_at_every_step,
						setup_live, teardown_live),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
