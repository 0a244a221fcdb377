/*
 * fuzz_http: HTTP/1.1 request heads from untrusted bytes, then everything a streaming server
 * asks of a parsed head (upgrade kind, tokens, negotiation, the answers). Besides what the
 * sanitizers catch, it checks the parser's promises: a head is found only within the first
 * 16 KiB and within the input, holds at most 100 fields of token names and clean values, and a
 * refusal is -EBADMSG or -EMSGSIZE with a message.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stream/http.h"
#include "stream/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_fields(const struct http_req *req)
{
	if (!req->method[0] || !req->target[0] || req->nheaders > HTTP_MAX_HEADERS)
		abort();
	for (size_t i = 0; i < req->nheaders; i++) {
		const char *n = req->headers[i].name, *v = req->headers[i].value;
		size_t vl = strlen(v);

		if (!n[0] || strpbrk(n, " \t:\r\n") || strpbrk(v, "\r\n"))
			abort();
		if (vl && (strchr(" \t", v[0]) || strchr(" \t", v[vl - 1])))
			abort(); /* values are trimmed */
	}
}

static void use(const struct http_req *req)
{
	static const char *const spdy_protocols[] = { "v4.channel.k8s.io", "channel.k8s.io", NULL };
	struct buf out = BUF_INIT;
	struct err err = ERR_INIT;
	const char *p;

	switch (http_upgrade_of(req)) {
	case HTTP_UPGRADE_SPDY:
		p = http_negotiate(req, "X-Stream-Protocol-Version", spdy_protocols);
		if (p && http_answer_spdy(&out, p, &err) < 0)
			abort();
		break;
	case HTTP_UPGRADE_WS:
		p = http_negotiate(req, "Sec-WebSocket-Protocol", ws_subprotocols);
		if (http_answer_ws(&out, req, p, &err) < 0)
			abort(); /* http_upgrade_of checked the key */
		break;
	default:
		if (http_answer_error(&out, 400, NULL, req->target, &err) < 0)
			abort();
		break;
	}
	http_header_has_token(req, "Connection", "upgrade");
	buf_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_req req;
	struct err err = ERR_INIT;
	ssize_t n = http_parse_head(data, size, &req, &err);

	if (n < 0) {
		if ((n != -EBADMSG && n != -EMSGSIZE) || !err.msg[0])
			abort();
		return 0;
	}
	if (n == 0) {
		if (size >= HTTP_MAX_HEAD)
			abort();
		return 0;
	}
	if ((size_t)n > size || n > HTTP_MAX_HEAD || memcmp(data + n - 4, "\r\n\r\n", 4) != 0)
		abort();
	check_fields(&req);
	use(&req);
	http_req_release(&req);
	return 0;
}
