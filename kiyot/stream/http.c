#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "xalloc.h"

/* RFC 6455 section 1.3: appended to the client's key before hashing */
static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* tchar of RFC 9110 section 5.6.2 */
static bool is_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_token(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!is_tchar((unsigned char)s[i]))
			return false;
	}
	return true;
}

/* field-value characters: visible ASCII, space, tab and obs-text; no other control characters */
static bool is_value_char(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/*
 * The next line of [*cur, end): NUL-terminated in place (its CR replaced), *cur moved past its
 * CRLF. A CR or LF inside the line is a bare one, which the head may not contain.
 */
static int next_line(char **cur, char *end, char **line, size_t *n, unsigned lineno,
		     struct err *err)
{
	char *eol = memmem(*cur, (size_t)(end - *cur), "\r\n", 2);

	if (!eol)
		return err_set(err, EBADMSG, "line %u: not ended by CRLF", lineno);
	*line = *cur;
	*n = (size_t)(eol - *cur);
	if (memchr(*line, '\r', *n) || memchr(*line, '\n', *n))
		return err_set(err, EBADMSG, "line %u: bare CR or LF", lineno);
	*eol = '\0';
	*cur = eol + 2;
	return 0;
}

/* method SP request-target SP HTTP-version */
static int parse_request_line(char *line, size_t n, struct http_req *r, struct err *err)
{
	char *sp1 = memchr(line, ' ', n);
	char *sp2 = sp1 ? memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - line)) : NULL;

	if (!sp2)
		return err_set(err, EBADMSG, "request line: not METHOD TARGET VERSION");
	if (!is_token(line, (size_t)(sp1 - line)))
		return err_set(err, EBADMSG, "request line: method is not a token");
	for (char *c = sp1 + 1; c < sp2; c++) {
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return err_set(err, EBADMSG, "request line: invalid character in target");
	}
	if (sp2 == sp1 + 1)
		return err_set(err, EBADMSG, "request line: empty target");
	if (strcmp(sp2 + 1, "HTTP/1.1") == 0)
		r->minor = 1;
	else if (strcmp(sp2 + 1, "HTTP/1.0") == 0)
		r->minor = 0;
	else
		return err_set(err, EBADMSG, "request line: version is not HTTP/1.1 or HTTP/1.0");
	*sp1 = *sp2 = '\0';
	r->method = line;
	r->target = sp1 + 1;
	return 0;
}

/* field-name ":" OWS field-value OWS */
static int parse_field(char *line, size_t n, unsigned lineno, struct http_req *r, struct err *err)
{
	char *colon = memchr(line, ':', n);
	char *v, *vend = line + n;

	if (line[0] == ' ' || line[0] == '\t')
		return err_set(err, EBADMSG, "line %u: obsolete line folding", lineno);
	if (!colon || !is_token(line, (size_t)(colon - line)))
		return err_set(err, EBADMSG, "line %u: field name is not a token", lineno);
	if (r->nheaders == HTTP_MAX_HEADERS)
		return err_set(err, EMSGSIZE, "more than %d header fields", HTTP_MAX_HEADERS);
	for (v = colon + 1; v < vend; v++) {
		if (!is_value_char((unsigned char)*v))
			return err_set(err, EBADMSG, "line %u: control character in value", lineno);
	}
	for (v = colon + 1; v < vend && (*v == ' ' || *v == '\t'); v++)
		;
	while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
		vend--;
	*colon = '\0';
	*vend = '\0';
	r->headers[r->nheaders].name = line;
	r->headers[r->nheaders++].value = v;
	return 0;
}

static int parse_lines(char *s, char *end, struct http_req *r, struct err *err)
{
	unsigned lineno = 1;
	char *line;
	size_t n;
	int ret;

	ret = next_line(&s, end, &line, &n, lineno, err);
	if (ret < 0)
		return ret;
	ret = parse_request_line(line, n, r, err);
	if (ret < 0)
		return ret;
	for (;;) {
		ret = next_line(&s, end, &line, &n, ++lineno, err);
		if (ret < 0)
			return ret;
		if (n == 0)
			return 0;
		ret = parse_field(line, n, lineno, r, err);
		if (ret < 0)
			return ret;
	}
}

ssize_t http_parse_head(const void *data, size_t len, struct http_req *req, struct err *err)
{
	size_t scan = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
	const char *end = memmem(data, scan, "\r\n\r\n", 4);
	struct http_req r = { 0 };
	size_t head_len;
	int ret;

	if (!end && len >= HTTP_MAX_HEAD)
		return err_set(err, EMSGSIZE, "request head longer than %d bytes", HTTP_MAX_HEAD);
	if (!end)
		return 0;
	head_len = (size_t)(end - (const char *)data) + 4;
	r.storage = xmalloc(head_len + 1);
	memcpy(r.storage, data, head_len);
	r.storage[head_len] = '\0';
	ret = parse_lines(r.storage, r.storage + head_len, &r, err);
	if (ret < 0) {
		free(r.storage);
		return ret;
	}
	*req = r;
	return (ssize_t)head_len;
}

void http_req_release(struct http_req *req)
{
	free(req->storage);
	memset(req, 0, sizeof(*req));
}

const char *http_header_get(const struct http_req *req, const char *name)
{
	for (size_t i = 0; i < req->nheaders; i++) {
		if (strcasecmp(req->headers[i].name, name) == 0)
			return req->headers[i].value;
	}
	return NULL;
}

/*
 * Calls match(element, length, arg) for each element of each field named name, in order,
 * until it returns true; returns whether one did.
 */
static bool each_element(const struct http_req *req, const char *name,
			 bool (*match)(const char *, size_t, const void *), const void *arg)
{
	for (size_t i = 0; i < req->nheaders; i++) {
		const char *s = req->headers[i].value;

		if (strcasecmp(req->headers[i].name, name) != 0)
			continue;
		while (*s) {
			size_t n = strcspn(s, ",");
			size_t b = 0, e = n;

			while (b < e && (s[b] == ' ' || s[b] == '\t'))
				b++;
			while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t'))
				e--;
			if (e > b && match(s + b, e - b, arg))
				return true;
			s += n + (s[n] == ',');
		}
	}
	return false;
}

static bool token_equal(const char *el, size_t n, const void *arg)
{
	const char *token = arg;

	return strlen(token) == n && strncasecmp(el, token, n) == 0;
}

bool http_header_has_token(const struct http_req *req, const char *name, const char *token)
{
	return each_element(req, name, token_equal, token);
}

struct negotiation {
	const char *const *supported;
	const char *chosen;
};

static bool supported_match(const char *el, size_t n, const void *arg)
{
	struct negotiation *ng = (struct negotiation *)arg;

	for (const char *const *s = ng->supported; *s; s++) {
		if (strlen(*s) == n && memcmp(*s, el, n) == 0) {
			ng->chosen = *s;
			return true;
		}
	}
	return false;
}

const char *http_negotiate(const struct http_req *req, const char *name,
			   const char *const *supported)
{
	struct negotiation ng = { supported, NULL };

	each_element(req, name, supported_match, &ng);
	return ng.chosen;
}

/* 16 bytes in base64: 22 characters of the alphabet and "==" */
static bool ws_key_valid(const char *key)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	return key && strlen(key) == 24 && strspn(key, alphabet) == 22 &&
	       strcmp(key + 22, "==") == 0;
}

enum http_upgrade http_upgrade_of(const struct http_req *req)
{
	if (!http_header_get(req, "Upgrade") ||
	    !http_header_has_token(req, "Connection", "upgrade"))
		return HTTP_UPGRADE_NONE;
	if (http_header_has_token(req, "Upgrade", "SPDY/3.1"))
		return HTTP_UPGRADE_SPDY;
	if (!http_header_has_token(req, "Upgrade", "websocket"))
		return HTTP_UPGRADE_BAD;
	if (strcmp(req->method, "GET") != 0 || req->minor != 1 ||
	    !http_header_has_token(req, "Sec-WebSocket-Version", "13") ||
	    !ws_key_valid(http_header_get(req, "Sec-WebSocket-Key")))
		return HTTP_UPGRADE_BAD;
	return HTTP_UPGRADE_WS;
}

void http_ws_accept(const char *key, char out[HTTP_WS_ACCEPT_LEN + 1])
{
	unsigned char digest[SHA_DIGEST_LENGTH];
	size_t klen = strlen(key);
	_cleanup_free_ char *s = xmalloc(klen + sizeof(ws_guid));

	memcpy(s, key, klen);
	memcpy(s + klen, ws_guid, sizeof(ws_guid));
	SHA1((const unsigned char *)s, klen + sizeof(ws_guid) - 1, digest);
	EVP_EncodeBlock((unsigned char *)out, digest, SHA_DIGEST_LENGTH);
}

int http_answer_spdy(struct buf *out, const char *protocol, struct err *err)
{
	if (!protocol || !is_token(protocol, strlen(protocol)))
		return err_set(err, EINVAL, "subprotocol %s is not a token",
			       protocol ? protocol : "");
	return buf_appendf(out, err,
			   "HTTP/1.1 101 Switching Protocols\r\n"
			   "Connection: Upgrade\r\n"
			   "Upgrade: SPDY/3.1\r\n"
			   "X-Stream-Protocol-Version: %s\r\n\r\n",
			   protocol);
}

int http_answer_ws(struct buf *out, const struct http_req *req, const char *protocol,
		   struct err *err)
{
	const char *key = http_header_get(req, "Sec-WebSocket-Key");
	char accept[HTTP_WS_ACCEPT_LEN + 1];
	int ret;

	if (!ws_key_valid(key))
		return err_set(err, EINVAL, "Sec-WebSocket-Key missing or not 16 bytes in base64");
	if (protocol && !is_token(protocol, strlen(protocol)))
		return err_set(err, EINVAL, "subprotocol %s is not a token", protocol);
	http_ws_accept(key, accept);
	ret = buf_appendf(out, err,
			  "HTTP/1.1 101 Switching Protocols\r\n"
			  "Upgrade: websocket\r\n"
			  "Connection: Upgrade\r\n"
			  "Sec-WebSocket-Accept: %s\r\n",
			  accept);
	if (ret == 0 && protocol)
		ret = buf_appendf(out, err, "Sec-WebSocket-Protocol: %s\r\n", protocol);
	return ret < 0 ? ret : buf_append(out, "\r\n", 2, err);
}

static const char *reason_of(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 410:
		return "Gone";
	case 429:
		return "Too Many Requests";
	case 500:
		return "Internal Server Error";
	case 503:
		return "Service Unavailable";
	default:
		return NULL;
	}
}

int http_answer_error(struct buf *out, int status, const char *extra, const char *text,
		      struct err *err)
{
	const char *reason = reason_of(status);
	size_t elen = extra ? strlen(extra) : 0;

	if (!reason)
		return err_set(err, EINVAL, "no error answer for status %d", status);
	if (elen && (elen < 2 || strcmp(extra + elen - 2, "\r\n") != 0))
		return err_set(err, EINVAL, "extra header lines do not end in CRLF");
	return buf_appendf(out, err,
			   "HTTP/1.1 %d %s\r\n"
			   "Content-Type: text/plain; charset=utf-8\r\n"
			   "Content-Length: %zu\r\n"
			   "Connection: close\r\n"
			   "%s\r\n%s\n",
			   status, reason, strlen(text) + 1, extra ? extra : "", text);
}
