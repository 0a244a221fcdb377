/* test_httpc.c: common/httpc.c against a one-connection HTTP server on 127.0.0.1. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "httpc.h"
#include "xalloc.h"

/* Accepts one connection, keeps its request, answers with the canned response. */
struct server {
	int lfd;
	int port;
	const char *answer;
	size_t answer_len;
	char request[4096];
	pthread_t thread;
};

static void *serve_one(void *arg)
{
	struct server *s = arg;
	int fd = accept(s->lfd, NULL, NULL);
	size_t got = 0;

	if (fd < 0)
		return NULL;
	/* the request: headers, then whatever body arrived with them */
	while (got < sizeof(s->request) - 1 && !strstr(s->request, "\r\n\r\n")) {
		ssize_t n = read(fd, s->request + got, sizeof(s->request) - 1 - got);

		if (n <= 0)
			break;
		got += (size_t)n;
		s->request[got] = '\0';
	}
	for (size_t off = 0; off < s->answer_len;) {
		ssize_t n = write(fd, s->answer + off, s->answer_len - off);

		if (n <= 0)
			break;
		off += (size_t)n;
	}
	close(fd);
	return NULL;
}

static void server_start(struct server *s, const char *answer, size_t len)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);

	memset(s->request, 0, sizeof(s->request));
	s->answer = answer;
	s->answer_len = len;
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->lfd >= 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->lfd, 1), 0);
	assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &al), 0);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&s->thread, NULL, serve_one, s), 0);
}

static void server_stop(struct server *s)
{
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
	server_start(&s, answer, strlen(answer));
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
	server_start(&s, answer, n + 100000);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			test_httpc__put_with_an_empty_body_and_a_header_gets_status_and_body),
		cmocka_unit_test(test_httpc__an_answer_over_the_cap_is_efbig_naming_the_cap),
		cmocka_unit_test(test_httpc__no_listener_is_eio_naming_what),
		cmocka_unit_test(test_httpc__other_protocols_are_refused),
	};

	httpc_global_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
