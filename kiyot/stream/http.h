/*
 * http.h: the HTTP/1.1 request head that opens a streaming connection, and the answers to it.
 *
 * The streaming server reads a connection until its head is complete, then upgrades it to
 * SPDY/3.1 or WebSocket (RFC 6455) or answers an error and closes. Nothing here touches a socket.
 *
 *	struct http_req req;
 *	ssize_t n = http_parse_head(bytes, len, &req, err);
 *	n == 0: read more; n > 0: bytes[0..n) was the head, what follows belongs to the new protocol
 *	if (http_upgrade_of(&req) == HTTP_UPGRADE_SPDY) {
 *		proto = http_negotiate(&req, "X-Stream-Protocol-Version", supported);
 *		http_answer_spdy(&out, proto, err);
 *	}
 *	http_req_release(&req);
 *
 * Bounds: a head is at most HTTP_MAX_HEAD bytes with at most HTTP_MAX_HEADERS fields. Parsing is
 * strict: lines end in CRLF, no obsolete line folding, no bare CR or LF, no control characters,
 * field names and methods are tokens, no space before a field's colon.
 */
#ifndef KIYOT_STREAM_HTTP_H
#define KIYOT_STREAM_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "buf.h"
#include "err.h"

#define HTTP_MAX_HEAD (16 * 1024)
#define HTTP_MAX_HEADERS 100

struct http_header {
	const char *name;  /* as sent; compare with strcasecmp */
	const char *value; /* without surrounding whitespace; may be "" */
};

struct http_req {
	char *storage;	    /* the head, NUL-split; names and values point into it */
	const char *method; /* "GET", "POST" */
	const char *target; /* the request-target as sent: "/exec/3f2a?command=sh" */
	int minor;	    /* HTTP/1.<minor>: 0 or 1 */
	struct http_header headers[HTTP_MAX_HEADERS];
	size_t nheaders;
};

/*
 * Parses the head at the start of data[0..len). Returns its length (through the empty line)
 * when complete, 0 when more bytes are needed, or a negative errno: -EMSGSIZE when no head ends
 * within HTTP_MAX_HEAD bytes or it has too many fields, -EBADMSG when it is malformed (err says
 * where). *req is filled only on success; release it with http_req_release().
 */
ssize_t http_parse_head(const void *data, size_t len, struct http_req *req, struct err *err);
void http_req_release(struct http_req *req);

/* The value of the first field named name (case-insensitive), or NULL. */
const char *http_header_get(const struct http_req *req, const char *name);

/*
 * Whether any field named name holds token as an element of its comma-separated list
 * (elements trimmed of spaces and tabs, compared case-insensitively): Connection: keep-alive,
 * Upgrade holds "upgrade".
 */
bool http_header_has_token(const struct http_req *req, const char *name, const char *token);

/*
 * Subprotocol negotiation: the first element of the client's comma-separated lists in fields
 * named name, in the client's order, that equals (case-sensitively) an entry of supported
 * (NULL-terminated). Returns that entry of supported, or NULL when there is none in common.
 */
const char *http_negotiate(const struct http_req *req, const char *name,
			   const char *const *supported);

enum http_upgrade {
	HTTP_UPGRADE_NONE,
	HTTP_UPGRADE_SPDY, /* Connection: Upgrade, Upgrade: SPDY/3.1 */
	HTTP_UPGRADE_WS,   /* Connection: Upgrade, Upgrade: websocket, GET, version 13, a key */
	HTTP_UPGRADE_BAD,  /* asks for an upgrade this server cannot make */
};

/*
 * Which upgrade the request asks for. A WebSocket request must be an HTTP/1.1 GET with
 * Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key of 16 bytes in base64; a request naming
 * any other upgrade, or a WebSocket request missing those, is HTTP_UPGRADE_BAD.
 */
enum http_upgrade http_upgrade_of(const struct http_req *req);

#define HTTP_WS_ACCEPT_LEN 28

/* Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(SHA-1(key + RFC 6455's GUID)). */
void http_ws_accept(const char *key, char out[HTTP_WS_ACCEPT_LEN + 1]);

/* Appends 101 Switching Protocols to SPDY/3.1 with X-Stream-Protocol-Version: protocol. */
int http_answer_spdy(struct buf *out, const char *protocol, struct err *err);

/*
 * Appends 101 Switching Protocols to WebSocket for req, with Sec-WebSocket-Protocol: protocol
 * when protocol is not NULL. Fails with -EINVAL when req carries no usable Sec-WebSocket-Key.
 */
int http_answer_ws(struct buf *out, const struct http_req *req, const char *protocol,
		   struct err *err);

/*
 * Appends an error answer: status 400, 403, 404, 405, 408, 410, 429, 500 or 503, a text/plain
 * body of text and a newline, Connection: close. extra, when not NULL, is more header lines,
 * each ending in CRLF ("X-Accepted-Stream-Protocol-Versions: v4.channel.k8s.io\r\n"). Fails
 * with -EINVAL on another status or an extra that does not end in CRLF.
 */
int http_answer_error(struct buf *out, int status, const char *extra, const char *text,
		      struct err *err);

#endif
