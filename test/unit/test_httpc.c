/* test_httpc.c: common/httpc.c against a one-connection HTTP server on 127.0.0.1. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "cancel.h"
#include "clock.h"
#include "httpc.h"
#include "xalloc.h"

/* Accepts connections one at a time, up to conns of them: keeps the first request, answers
 * each with the next canned answer (the last again once they run out) and closes, or with
 * drip set sends a byte of body every 50 ms until the client closes the connection. */
struct server {
	int lfd;
	int port;
	const char *const *answers;
	size_t n_answers;
	int conns;
	bool drip;
	const char *one[1];
	char request[4096];
	pthread_t thread;
};

/* Reads a request's head (and whatever body came with it) into req, if req is not NULL. */
static void read_request(int fd, char *req, size_t size)
{
	char scratch[4096];
	size_t got = 0;

	if (!req) {
		req = scratch;
		size = sizeof(scratch);
	}
	req[0] = '\0';
	while (got < size - 1 && !strstr(req, "\r\n\r\n")) {
		ssize_t n = read(fd, req + got, size - 1 - got);

		if (n <= 0)
			break;
		got += (size_t)n;
		req[got] = '\0';
	}
}

static void write_all(int fd, const char *p, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = send(fd, p + off, len - off, MSG_NOSIGNAL);

		if (n <= 0)
			break;
		off += (size_t)n;
	}
}

static void *serve(void *arg)
{
	struct server *s = arg;

	for (int i = 0; i < s->conns; i++) {
		size_t k = (size_t)i < s->n_answers ? (size_t)i : s->n_answers - 1;
		int fd = accept(s->lfd, NULL, NULL);

		if (fd < 0)
			return NULL;
		read_request(fd, i == 0 ? s->request : NULL, sizeof(s->request));
		write_all(fd, s->answers[k], strlen(s->answers[k]));
		while (s->drip && send(fd, "x", 1, MSG_NOSIGNAL) == 1)
			nanosleep(&(struct timespec){ 0, 50 * 1000000L }, NULL);
		close(fd);
	}
	return NULL;
}

static void server_start_n(struct server *s, const char *const *answers, size_t n, int conns)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);

	memset(s->request, 0, sizeof(s->request));
	s->answers = answers;
	s->n_answers = n;
	s->conns = conns;
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->lfd >= 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->lfd, 4), 0);
	assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &al), 0);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void server_start(struct server *s, const char *answer)
{
	s->one[0] = answer;
	s->drip = false;
	server_start_n(s, s->one, 1, 1);
}

/* Ends the server once what it served is done; a connection it still waits for never comes. */
static void server_stop(struct server *s)
{
	shutdown(s->lfd, SHUT_RDWR);
	pthread_join(s->thread, NULL);
	close(s->lfd);
}

static void test_httpc__put_with_an_empty_body_and_a_header_gets_status_and_body(void **state)
{
	static const char answer[] = "HTTP/1.1 201 Created\r\nContent-Length: 5\r\n"
				     "Connection: close\r\n\r\nhello";
	struct server s;
	struct err err = ERR_INIT;
	struct httpc_answer a = { 0 };
	struct curl_slist *hdrs = curl_slist_append(NULL, "X-Test: yes");
	CURL *h = curl_easy_init();
	_cleanup_free_ char *url = NULL;

	(void)state;
	server_start(&s, answer);
	url = xasprintf("http://127.0.0.1:%d/token", s.port);
	httpc_prepare(h,
		      &(struct httpc_req){ .method = "PUT",
					   .url = url,
					   .headers = hdrs,
					   .body = "",
					   .max_answer = 64,
					   .connect_timeout_ms = 2000,
					   .timeout_ms = 5000 },
		      &a);
	if (httpc_perform(h, &a, "test", &err) < 0)
		fail_msg("%s", err.msg);
	server_stop(&s);
	assert_int_equal(a.status, 201);
	assert_string_equal(buf_str(&a.body), "hello");
	assert_non_null(strstr(s.request, "PUT /token HTTP/1.1\r\n"));
	assert_non_null(strstr(s.request, "X-Test: yes\r\n"));
	assert_non_null(strstr(s.request, "Content-Length: 0\r\n"));
	httpc_answer_release(&a);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
}

static void test_httpc__an_answer_over_the_cap_is_efbig_naming_the_cap(void **state)
{
	struct server s;
	struct err err = ERR_INIT;
	struct httpc_answer a = { 0 };
	CURL *h = curl_easy_init();
	_cleanup_free_ char *url = NULL;
	_cleanup_free_ char *answer = xmalloc(200000);
	size_t n = (size_t)snprintf(answer, 200000,
				    "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");

	(void)state;
	memset(answer + n, 'x', 100000);
	answer[n + 100000] = '\0';
	server_start(&s, answer);
	url = xasprintf("http://127.0.0.1:%d/", s.port);
	httpc_prepare(h,
		      &(struct httpc_req){ .url = url,
					   .max_answer = 1000,
					   .connect_timeout_ms = 2000,
					   .timeout_ms = 5000 },
		      &a);
	assert_int_equal(httpc_perform(h, &a, "GET big", &err), -EFBIG);
	server_stop(&s);
	assert_true(a.overflow);
	assert_true(a.body.len <= 1000);
	assert_string_equal(err.msg, "GET big: the answer exceeds 1000 bytes");
	assert_non_null(strstr(s.request, "GET / HTTP/1.1\r\n"));
	httpc_answer_release(&a);
	curl_easy_cleanup(h);
}

/* A port nothing listens on: bound, then closed without listening. */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static void test_httpc__no_listener_is_eio_naming_what(void **state)
{
	struct err err = ERR_INIT;
	struct httpc_answer a = { 0 };
	CURL *h = curl_easy_init();
	_cleanup_free_ char *url = NULL;

	(void)state;
	url = xasprintf("http://127.0.0.1:%d/", free_port());
	httpc_prepare(h,
		      &(struct httpc_req){ .url = url,
					   .max_answer = 10,
					   .connect_timeout_ms = 2000,
					   .timeout_ms = 5000 },
		      &a);
	assert_int_equal(httpc_perform(h, &a, "GET nowhere", &err), -EIO);
	assert_int_equal(a.status, 0);
	assert_non_null(strstr(err.msg, "GET nowhere: "));
	httpc_answer_release(&a);
	curl_easy_cleanup(h);
}

static void test_httpc__other_protocols_are_refused(void **state)
{
	struct err err = ERR_INIT;
	struct httpc_answer a = { 0 };
	CURL *h = curl_easy_init();

	(void)state;
	httpc_prepare(h,
		      &(struct httpc_req){ .url = "file:///etc/passwd",
					   .max_answer = 1 << 20,
					   .connect_timeout_ms = 1000,
					   .timeout_ms = 1000 },
		      &a);
	assert_int_equal(httpc_perform(h, &a, "file", &err), -EIO);
	assert_int_equal(a.body.len, 0);
	httpc_answer_release(&a);
	curl_easy_cleanup(h);
}

/* What a sink test collects; fail_with stops the exchange. */
struct sunk {
	struct buf got;
	int fail_with;
};

static int sink_write(void *ud, const void *p, size_t n)
{
	struct sunk *k = ud;
	struct err err = ERR_INIT;

	if (k->fail_with)
		return -k->fail_with;
	assert_int_equal(buf_append(&k->got, p, n, &err), 0);
	return 0;
}

/* GETs / from a server that answers answer (and with drip a byte every 50 ms after it), the
 * request's other fields from req; returns httpc_perform's result. */
static int serve_and_get(const char *answer, bool drip, struct httpc_req req,
			 struct httpc_answer *a, struct err *err)
{
	CURL *h = curl_easy_init();
	_cleanup_free_ char *url = NULL;
	struct server s;
	int ret;

	s.one[0] = answer;
	s.drip = drip;
	server_start_n(&s, s.one, 1, 1);
	url = xasprintf("http://127.0.0.1:%d/", s.port);
	req.url = url;
	req.connect_timeout_ms = 2000;
	httpc_prepare(h, &req, a);
	ret = httpc_perform(h, a, "GET", err);
	curl_easy_cleanup(h);
	server_stop(&s);
	return ret;
}

/* One GET of answer with the sink and a bound of 8 bytes for other answers. */
static int get_with_sink(const char *answer, struct sunk *k, struct httpc_answer *a,
			 struct err *err)
{
	const struct httpc_sink sink = { .status = 200, .write = sink_write, .ud = k };

	return serve_and_get(
		answer, false,
		(struct httpc_req){ .max_answer = 8, .timeout_ms = 5000, .sink = &sink }, a, err);
}

static void test_httpc__a_sink_takes_its_status_body_and_others_stay_bounded(void **state)
{
	struct sunk k = { BUF_INIT, 0 };
	struct httpc_answer a = { 0 };
	struct err err = ERR_INIT;

	(void)state;
	/* the 200 body is larger than max_answer: the sink takes it all, the answer nothing */
	assert_int_equal(get_with_sink("HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\n"
				       "abcdefghijklmnopqrstuvwxyz",
				       &k, &a, &err),
			 0);
	assert_int_equal(a.status, 200);
	assert_string_equal(buf_str(&k.got), "abcdefghijklmnopqrstuvwxyz");
	assert_int_equal(a.body.len, 0);
	httpc_answer_release(&a);
	/* another status: its body is for messages, cut at max_answer without failing */
	buf_reset(&k.got);
	assert_int_equal(get_with_sink("HTTP/1.1 404 Not Found\r\nContent-Length: 20\r\n\r\n"
				       "no such blob, really",
				       &k, &a, &err),
			 0);
	assert_int_equal(a.status, 404);
	assert_int_equal(k.got.len, 0);
	assert_string_equal(buf_str(&a.body), "no such ");
	assert_false(a.overflow);
	httpc_answer_release(&a);
	buf_release(&k.got);
}

static void test_httpc__a_sink_that_fails_stops_with_its_errno(void **state)
{
	struct sunk k = { BUF_INIT, ENOSPC };
	struct httpc_answer a = { 0 };
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(get_with_sink("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", &k, &a,
				       &err),
			 -ENOSPC);
	assert_int_equal(a.sink_err, ENOSPC);
	assert_string_equal(err.msg, "GET: No space left on device");
	httpc_answer_release(&a);
}

static void test_httpc__headers_of_the_last_answer_after_a_redirect(void **state)
{
	static const char *const answers[] = {
		"HTTP/1.1 302 Found\r\nLocation: /there\r\nX-First: yes\r\nContent-Length: 0\r\n"
		"Connection: close\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type:   text/plain; charset=utf-8  \r\n"
		"X-Twice: one\r\nx-twice: two\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
	};
	struct httpc_answer a = { 0 };
	struct err err = ERR_INIT;
	CURL *h = curl_easy_init();
	struct server s;
	_cleanup_free_ char *url = NULL;

	(void)state;
	s.drip = false;
	server_start_n(&s, answers, 2, 2);
	url = xasprintf("http://127.0.0.1:%d/here", s.port);
	httpc_prepare(h,
		      &(struct httpc_req){ .url = url,
					   .max_answer = 64,
					   .connect_timeout_ms = 2000,
					   .timeout_ms = 5000,
					   .max_redirects = 1,
					   .user_agent = "test-agent/1",
					   .user = "user",
					   .password = "pass" },
		      &a);
	if (httpc_perform(h, &a, "GET", &err) < 0)
		fail_msg("%s", err.msg);
	server_stop(&s);
	assert_int_equal(a.status, 200);
	assert_string_equal(buf_str(&a.body), "ok");
	assert_string_equal(httpc_header(h, "content-type"), "text/plain; charset=utf-8");
	assert_string_equal(httpc_header(h, "X-Twice"), "one");
	assert_null(httpc_header(h, "X-First")); /* the redirect's, not the answer's */
	assert_non_null(strstr(s.request, "GET /here HTTP/1.1\r\n"));
	assert_non_null(strstr(s.request, "User-Agent: test-agent/1\r\n"));
	assert_non_null(strstr(s.request, "Authorization: Basic dXNlcjpwYXNz\r\n"));
	httpc_answer_release(&a);
	curl_easy_cleanup(h);
}

/* What a guard saw: each address's port and the redirects made before it; refuses one port. */
struct seen {
	int refuse_port;
	int ports[4];
	long redirects[4];
	int n;
};

static int guard_check(void *ud, CURL *h, const struct sockaddr *sa, socklen_t len)
{
	struct seen *g = ud;
	int port = ntohs(((const struct sockaddr_in *)sa)->sin_port);

	(void)len;
	if (g->n < 4) {
		g->ports[g->n] = port;
		curl_easy_getinfo(h, CURLINFO_REDIRECT_COUNT, &g->redirects[g->n]);
		g->n++;
	}
	return port == g->refuse_port ? -EPERM : 0;
}

static void test_httpc__guard_vets_every_hop_before_connecting(void **state)
{
	struct server s1, s2;
	struct seen seen = { 0 };
	const struct httpc_guard guard = { guard_check, &seen };
	struct httpc_answer a = { 0 };
	struct err err = ERR_INIT;
	CURL *h = curl_easy_init();
	_cleanup_free_ char *url = NULL, *answer = NULL;

	(void)state;
	server_start(&s2, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret");
	answer = xasprintf("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:%d/meta\r\n"
			   "Content-Length: 0\r\nConnection: close\r\n\r\n",
			   s2.port);
	server_start(&s1, answer);
	seen.refuse_port = s2.port;
	url = xasprintf("http://127.0.0.1:%d/", s1.port);
	httpc_prepare(h,
		      &(struct httpc_req){ .url = url,
					   .max_answer = 64,
					   .connect_timeout_ms = 2000,
					   .timeout_ms = 5000,
					   .max_redirects = 2,
					   .guard = &guard },
		      &a);
	assert_int_equal(httpc_perform(h, &a, "GET", &err), -EPERM);
	assert_true(a.refused);
	assert_string_equal(err.msg, "GET: the guard refused a connection");
	server_stop(&s1);
	server_stop(&s2);
	assert_string_equal(s2.request, ""); /* never connected to */
	assert_int_equal(seen.n, 2);
	assert_int_equal(seen.ports[0], s1.port);
	assert_int_equal(seen.redirects[0], 0);
	assert_int_equal(seen.ports[1], s2.port);
	assert_int_equal(seen.redirects[1], 1); /* a redirect's hop tells itself apart */
	httpc_answer_release(&a);
	curl_easy_cleanup(h);
}

static void test_httpc__redirects_past_the_bound_are_a_loop(void **state)
{
	static const char *const answers[] = {
		"HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\n"
		"Connection: close\r\n\r\n",
	};
	struct httpc_answer a = { 0 };
	CURL *h = curl_easy_init();
	struct server s;
	_cleanup_free_ char *url = NULL;

	(void)state;
	s.drip = false;
	server_start_n(&s, answers, 1, 3); /* the first request and two redirects */
	url = xasprintf("http://127.0.0.1:%d/", s.port);
	httpc_prepare(h,
		      &(struct httpc_req){ .url = url,
					   .max_answer = 64,
					   .connect_timeout_ms = 2000,
					   .timeout_ms = 5000,
					   .max_redirects = 2 },
		      &a);
	assert_int_equal(httpc_exchange(h, &a), CURLE_TOO_MANY_REDIRECTS);
	server_stop(&s);
	assert_int_equal(httpc_errno(a.rc), ELOOP);
	assert_non_null(strstr(httpc_reason(&a), "redirects"));
	httpc_answer_release(&a);
	curl_easy_cleanup(h);
}

static void test_httpc__without_max_redirects_a_redirect_is_the_answer(void **state)
{
	struct httpc_answer a = { 0 };
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(serve_and_get("HTTP/1.1 301 Moved\r\nLocation: /x\r\nContent-Length: "
				       "0\r\n\r\n",
				       false,
				       (struct httpc_req){ .max_answer = 64, .timeout_ms = 5000 },
				       &a, &err),
			 0);
	assert_int_equal(a.status, 301);
	httpc_answer_release(&a);
}

/* A server that sends the head and a few bytes of a large body, then a byte every 50 ms
 * (20 bytes/s): runs a watched GET of it and returns httpc_perform's result. */
static int get_stalled(struct httpc_watch *w, struct httpc_answer *a, struct err *err)
{
	return serve_and_get(
		"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nsome", true,
		(struct httpc_req){ .max_answer = 1 << 20, .timeout_ms = 20000, .watch = w }, a,
		err);
}

static void test_httpc__a_watch_stops_a_stalled_exchange(void **state)
{
	struct httpc_watch w = { .min_bytes = 1000, .window_s = 1 };
	struct httpc_answer a = { 0 };
	struct err err = ERR_INIT;
	int64_t t0 = clock_mono_ns();

	(void)state;
	assert_int_equal(get_stalled(&w, &a, &err), -ETIMEDOUT);
	assert_int_equal(w.stop, HTTPC_STALLED);
	assert_true(w.got >= 4 && w.window_got > 0 && w.window_got < 1000);
	assert_true(clock_mono_ns() - t0 < 5 * 1000000000LL);
	assert_non_null(strstr(err.msg, "GET: stalled: "));
	assert_non_null(strstr(err.msg, " bytes in the last 1 s, under the 1000 required"));
	httpc_answer_release(&a);
}

static void test_httpc__a_watch_stops_an_exchange_past_its_deadline(void **state)
{
	struct httpc_watch w = { .deadline_ns = clock_mono_ns() + 300 * 1000000LL };
	struct httpc_answer a = { 0 };
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(get_stalled(&w, &a, &err), -ETIMEDOUT);
	assert_int_equal(w.stop, HTTPC_LATE);
	assert_true(clock_mono_ns() < w.deadline_ns + 3 * 1000000000LL);
	assert_true(w.got >= 4);
	assert_non_null(strstr(err.msg, "GET: not done by its deadline; "));
	httpc_answer_release(&a);
}

static bool always(void *ctx)
{
	(void)ctx;
	return true;
}

static void test_httpc__a_watch_stops_when_the_caller_goes_away(void **state)
{
	struct httpc_watch w = { 0 };
	struct httpc_answer a = { 0 };
	struct err err = ERR_INIT;
	struct cancel_scope sc;

	(void)state;
	cancel_scope_enter(&sc, always, NULL);
	assert_int_equal(get_stalled(&w, &a, &err), -ECANCELED);
	cancel_scope_leave(&sc);
	assert_int_equal(w.stop, HTTPC_CANCELLED);
	assert_string_equal(err.msg, "GET: cancelled: the caller went away");
	httpc_answer_release(&a);
}

static void test_httpc__failures_map_to_errnos(void **state)
{
	(void)state;
	assert_int_equal(httpc_errno(CURLE_COULDNT_CONNECT), ECONNREFUSED);
	assert_int_equal(httpc_errno(CURLE_OPERATION_TIMEDOUT), ETIMEDOUT);
	assert_int_equal(httpc_errno(CURLE_COULDNT_RESOLVE_HOST), EHOSTUNREACH);
	assert_int_equal(httpc_errno(CURLE_TOO_MANY_REDIRECTS), ELOOP);
	assert_int_equal(httpc_errno(CURLE_SSL_CONNECT_ERROR), ENETUNREACH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_httpc__put_with_an_empty_body_and_a_header_gets_status_and_body),
		cmocka_unit_test(test_httpc__an_answer_over_the_cap_is_efbig_naming_the_cap),
		cmocka_unit_test(test_httpc__no_listener_is_eio_naming_what),
		cmocka_unit_test(test_httpc__other_protocols_are_refused),
		cmocka_unit_test(test_httpc__a_sink_takes_its_status_body_and_others_stay_bounded),
		cmocka_unit_test(test_httpc__a_sink_that_fails_stops_with_its_errno),
		cmocka_unit_test(test_httpc__headers_of_the_last_answer_after_a_redirect),
		cmocka_unit_test(test_httpc__guard_vets_every_hop_before_connecting),
		cmocka_unit_test(test_httpc__redirects_past_the_bound_are_a_loop),
		cmocka_unit_test(test_httpc__without_max_redirects_a_redirect_is_the_answer),
		cmocka_unit_test(test_httpc__a_watch_stops_a_stalled_exchange),
		cmocka_unit_test(test_httpc__a_watch_stops_an_exchange_past_its_deadline),
		cmocka_unit_test(test_httpc__a_watch_stops_when_the_caller_goes_away),
		cmocka_unit_test(test_httpc__failures_map_to_errnos),
	};

	httpc_global_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
