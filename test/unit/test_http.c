/* Unit tests for kiyot/stream/http: request heads that open streaming connections, and answers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stream/http.h"

/* what kubectl exec sends, through the kubelet, to a runtime's streaming server */
static const char spdy_head[] =
	"POST /exec/3f2a?command=sh&input=1 HTTP/1.1\r\n"
	"Host: 127.0.0.1:10010\r\n"
	"Connection: Upgrade\r\n"
	"Upgrade: SPDY/3.1\r\n"
	"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n"
	"X-Stream-Protocol-Version: v3.channel.k8s.io, v2.channel.k8s.io\r\n"
	"X-Stream-Protocol-Version:channel.k8s.io\r\n"
	"\r\n";

static const char ws_head[] = "GET /attach/3f2a HTTP/1.1\r\n"
			      "Host: server.example.com\r\n"
			      "Upgrade: websocket\r\n"
			      "Connection: keep-alive, Upgrade\r\n"
			      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
			      "Sec-WebSocket-Protocol: v5.channel.k8s.io, base64.channel.k8s.io\r\n"
			      "Sec-WebSocket-Version: 13\r\n"
			      "\r\n";

static void parse_ok(const char *head, struct http_req *req)
{
	struct err err = ERR_INIT;
	ssize_t n = http_parse_head(head, strlen(head), req, &err);

	if (n < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(n, strlen(head));
}

/* A full head parses; what follows it is left for the upgraded protocol. */
static void test_http__parses_a_head(void **state)
{
	char buf[1024];
	struct http_req req;
	struct err err = ERR_INIT;
	(void)state;

	snprintf(buf, sizeof(buf), "%s%s", spdy_head, "\x80\x03\x00\x01");
	assert_int_equal(http_parse_head(buf, strlen(buf), &req, &err), strlen(spdy_head));
	assert_string_equal(req.method, "POST");
	assert_string_equal(req.target, "/exec/3f2a?command=sh&input=1");
	assert_int_equal(req.minor, 1);
	assert_int_equal(req.nheaders, 6);
	assert_string_equal(http_header_get(&req, "host"), "127.0.0.1:10010");
	assert_string_equal(http_header_get(&req, "UPGRADE"), "SPDY/3.1");
	assert_string_equal(req.headers[5].value, "channel.k8s.io"); /* no OWS needed */
	assert_null(http_header_get(&req, "Content-Length"));
	http_req_release(&req);
}

/* Values lose their surrounding whitespace; an empty value is "". */
static void test_http__value_whitespace(void **state)
{
	const char *head = "GET / HTTP/1.0\r\nA: \t x y \t\r\nB:\r\n\r\n";
	struct http_req req;
	(void)state;

	parse_ok(head, &req);
	assert_int_equal(req.minor, 0);
	assert_string_equal(http_header_get(&req, "a"), "x y");
	assert_string_equal(http_header_get(&req, "b"), "");
	http_req_release(&req);
}

/* Until the empty line arrives, more bytes are needed; past 16 KiB without one, it is refused. */
static void test_http__incomplete_and_too_long(void **state)
{
	struct http_req req;
	struct err err = ERR_INIT;
	char *big = malloc(HTTP_MAX_HEAD + 10);
	(void)state;

	assert_int_equal(http_parse_head(spdy_head, strlen(spdy_head) - 1, &req, &err), 0);
	assert_int_equal(http_parse_head(spdy_head, 0, &req, &err), 0);
	memset(big, 'a', HTTP_MAX_HEAD + 10);
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	assert_int_equal(http_parse_head(big, HTTP_MAX_HEAD - 1, &req, &err), 0);
	assert_int_equal(http_parse_head(big, HTTP_MAX_HEAD + 10, &req, &err), -EMSGSIZE);
	assert_string_equal(err.msg, "request head longer than 16384 bytes");
	/* an end just past the bound is not looked for */
	memcpy(big + HTTP_MAX_HEAD - 2, "\r\n\r\n", 4);
	assert_int_equal(http_parse_head(big, HTTP_MAX_HEAD + 2, &req, &err), -EMSGSIZE);
	free(big);
}

static void test_http__too_many_fields(void **state)
{
	char head[4096] = "GET / HTTP/1.1\r\n";
	struct http_req req;
	struct err err = ERR_INIT;
	(void)state;

	for (int i = 0; i <= HTTP_MAX_HEADERS; i++)
		snprintf(head + strlen(head), sizeof(head) - strlen(head), "X%d: y\r\n", i);
	snprintf(head + strlen(head), sizeof(head) - strlen(head), "\r\n");
	assert_int_equal(http_parse_head(head, strlen(head), &req, &err), -EMSGSIZE);
	assert_string_equal(err.msg, "more than 100 header fields");
}

struct bad {
	const char *head;
	const char *msg;
};

/* Each malformed head is refused, saying what is wrong. */
static void test_http__bad_heads(void **state)
{
	static const struct bad cases[] = {
		{ "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", "line 3: obsolete line folding" },
		{ "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", "line 2: bare CR or LF" },
		{ "GET / HTTP/1.1\r\nA: b\nC: d\r\n\r\n", "line 2: bare CR or LF" },
		{ "GET / HTTP/1.1\nA: b\r\n\r\n", "line 1: bare CR or LF" },
		{ "GET / HTTP/1.1\r\nA : b\r\n\r\n", "line 2: field name is not a token" },
		{ "GET / HTTP/1.1\r\nA(b): c\r\n\r\n", "line 2: field name is not a token" },
		{ "GET / HTTP/1.1\r\nno colon\r\n\r\n", "line 2: field name is not a token" },
		{ "GET / HTTP/1.1\r\n: b\r\n\r\n", "line 2: field name is not a token" },
		{ "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", "line 2: control character in value" },
		{ "GET / HTTP/1.1\r\nA: b\x7f\r\n\r\n", "line 2: control character in value" },
		{ "G(T / HTTP/1.1\r\n\r\n", "request line: method is not a token" },
		{ "GET / HTTP/2.0\r\n\r\n", "request line: version is not HTTP/1.1 or HTTP/1.0" },
		{ "GET /  HTTP/1.1\r\n\r\n", "request line: version is not HTTP/1.1 or HTTP/1.0" },
		{ "GET  HTTP/1.1\r\n\r\n", "request line: empty target" },
		{ "GET /\x01 HTTP/1.1\r\n\r\n", "request line: invalid character in target" },
		{ "GET\r\n\r\n", "request line: not METHOD TARGET VERSION" },
		{ "\r\n\r\n", "request line: not METHOD TARGET VERSION" },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct http_req req;
		struct err err = ERR_INIT;
		ssize_t n = http_parse_head(cases[i].head, strlen(cases[i].head), &req, &err);

		if (n != -EBADMSG)
			fail_msg("case %zu: %zd", i, n);
		if (strcmp(err.msg, cases[i].msg) != 0)
			fail_msg("case %zu: %s", i, err.msg);
	}
}

/* A NUL inside the head is a control character like any other. */
static void test_http__nul_refused(void **state)
{
	const char head[] = "GET / HTTP/1.1\r\nA: b\0c\r\n\r\n";
	struct http_req req;
	struct err err = ERR_INIT;
	(void)state;

	assert_int_equal(http_parse_head(head, sizeof(head) - 1, &req, &err), -EBADMSG);
}

/* Comma-separated tokens, across repeated fields, trimmed and compared without case. */
static void test_http__tokens(void **state)
{
	struct http_req req;
	(void)state;

	parse_ok(ws_head, &req);
	assert_true(http_header_has_token(&req, "connection", "upgrade"));
	assert_true(http_header_has_token(&req, "Connection", "KEEP-ALIVE"));
	assert_false(http_header_has_token(&req, "Connection", "close"));
	assert_false(http_header_has_token(&req, "Connection", "keep"));
	assert_false(http_header_has_token(&req, "Accept", "x"));
	http_req_release(&req);
}

/* The client's first subprotocol the server supports wins, in the client's order. */
static void test_http__negotiate(void **state)
{
	static const char *const server[] = { "v2.channel.k8s.io", "channel.k8s.io",
					      "v4.channel.k8s.io", NULL };
	static const char *const old[] = { "v1.channel.k8s.io", NULL };
	struct http_req req;
	(void)state;

	parse_ok(spdy_head, &req);
	assert_ptr_equal(http_negotiate(&req, "X-Stream-Protocol-Version", server), server[2]);
	assert_null(http_negotiate(&req, "X-Stream-Protocol-Version", old));
	assert_null(http_negotiate(&req, "Sec-WebSocket-Protocol", server));
	http_req_release(&req);
}

struct upgrade_case {
	const char *head;
	enum http_upgrade want;
};

static void test_http__upgrade_kinds(void **state)
{
	static const struct upgrade_case cases[] = {
		{ spdy_head, HTTP_UPGRADE_SPDY },
		{ ws_head, HTTP_UPGRADE_WS },
		{ "GET / HTTP/1.1\r\nHost: a\r\n\r\n", HTTP_UPGRADE_NONE },
		{ "GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", HTTP_UPGRADE_NONE },
		{ "GET / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n",
		  HTTP_UPGRADE_BAD },
		{ "GET / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n"
		  "Sec-WebSocket-Version: 13\r\n\r\n",
		  HTTP_UPGRADE_BAD },
		{ "GET / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n"
		  "Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		  HTTP_UPGRADE_BAD },
		{ "POST / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n"
		  "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "
		  "dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		  HTTP_UPGRADE_BAD },
		{ "GET / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n"
		  "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: short==\r\n\r\n",
		  HTTP_UPGRADE_BAD },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct http_req req;

		parse_ok(cases[i].head, &req);
		if (http_upgrade_of(&req) != cases[i].want)
			fail_msg("case %zu: %d", i, http_upgrade_of(&req));
		http_req_release(&req);
	}
}

/* RFC 6455's own example of a key and its accept value. */
static void test_http__ws_accept_rfc_example(void **state)
{
	char out[HTTP_WS_ACCEPT_LEN + 1];
	(void)state;

	http_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", out);
	assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static void test_http__answers(void **state)
{
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;
	struct http_req req;
	(void)state;

	assert_int_equal(http_answer_spdy(&b, "v4.channel.k8s.io", &err), 0);
	assert_string_equal(buf_str(&b), "HTTP/1.1 101 Switching Protocols\r\n"
					 "Connection: Upgrade\r\n"
					 "Upgrade: SPDY/3.1\r\n"
					 "X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n");
	buf_reset(&b);
	assert_int_equal(http_answer_spdy(&b, "a\r\nb", &err), -EINVAL);

	parse_ok(ws_head, &req);
	assert_int_equal(http_answer_ws(&b, &req, "v5.channel.k8s.io", &err), 0);
	assert_string_equal(buf_str(&b), "HTTP/1.1 101 Switching Protocols\r\n"
					 "Upgrade: websocket\r\n"
					 "Connection: Upgrade\r\n"
					 "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
					 "Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n");
	http_req_release(&req);
	buf_reset(&b);
	parse_ok(spdy_head, &req);
	assert_int_equal(http_answer_ws(&b, &req, NULL, &err), -EINVAL);
	http_req_release(&req);

	assert_int_equal(http_answer_error(&b, 403, "X-Accepted-Stream-Protocol-Versions: v4\r\n",
					   "no common protocol", &err),
			 0);
	assert_string_equal(buf_str(&b), "HTTP/1.1 403 Forbidden\r\n"
					 "Content-Type: text/plain; charset=utf-8\r\n"
					 "Content-Length: 19\r\n"
					 "Connection: close\r\n"
					 "X-Accepted-Stream-Protocol-Versions: v4\r\n"
					 "\r\n"
					 "no common protocol\n");
	buf_reset(&b);
	assert_int_equal(http_answer_error(&b, 410, NULL, "gone", &err), 0);
	assert_non_null(strstr(buf_str(&b), "HTTP/1.1 410 Gone\r\n"));
	assert_int_equal(http_answer_error(&b, 418, NULL, "teapot", &err), -EINVAL);
	assert_int_equal(http_answer_error(&b, 400, "X: y", "bad", &err), -EINVAL);
	buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_http__parses_a_head),
		cmocka_unit_test(test_http__value_whitespace),
		cmocka_unit_test(test_http__incomplete_and_too_long),
		cmocka_unit_test(test_http__too_many_fields),
		cmocka_unit_test(test_http__bad_heads),
		cmocka_unit_test(test_http__nul_refused),
		cmocka_unit_test(test_http__tokens),
		cmocka_unit_test(test_http__negotiate),
		cmocka_unit_test(test_http__upgrade_kinds),
		cmocka_unit_test(test_http__ws_accept_rfc_example),
		cmocka_unit_test(test_http__answers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
