/*
 * httpc.h: one HTTP exchange on a libcurl handle, made the way every client of the daemons
 * needs it (EC2's Query API, the API server, the instance metadata service): protocols limited
 * to http and https, no signals, connect and total timeouts, an answer bounded in size, and
 * libcurl's global state set up once for the process. What is a client's own (TLS material,
 * SigV4 signing, a connection share) it sets on the handle between httpc_prepare and
 * httpc_perform.
 *
 *	struct httpc_answer a;
 *	httpc_prepare(h, &req, &a);               resets h (its connections stay) and sets req
 *	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, ...);
 *	ret = httpc_perform(h, &a, "ec2 https://...", err);
 *	... a.status, buf_str(&a.body) ...
 *	httpc_answer_release(&a);
 */
#ifndef KIYOT_HTTPC_H
#define KIYOT_HTTPC_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "err.h"

struct httpc_req {
	const char *method; /* NULL or "GET"; else sent as the request method */
	const char *url;
	struct curl_slist *headers; /* borrowed until httpc_perform returns; may be NULL */
	const char *body;	    /* NULL: none; "" with a method: an empty body */
	size_t body_len;
	size_t max_answer; /* the largest answer body accepted, in bytes (required) */
	long connect_timeout_ms;
	long timeout_ms; /* the whole exchange */
};

struct httpc_answer {
	long status; /* the HTTP status, 0 when none came */
	struct buf body;
	bool overflow; /* the body outgrew max_answer (the transfer was cut) */
};

/* libcurl's global state, once per process; httpc_prepare calls it too. Thread safe. */
void httpc_global_init(void);
/* Resets h to req (the handle's connection cache and TLS sessions stay) with a as its sink. */
void httpc_prepare(CURL *h, const struct httpc_req *req, struct httpc_answer *a);
/* Runs the exchange. 0 when an HTTP answer came, whatever its status; -EFBIG ("<what>: the
 * answer exceeds N bytes") when the body outgrew max_answer, -EIO ("<what>: <curl's reason>")
 * when the exchange failed (no connection, timeout, TLS). The body is kept on failure too. */
int httpc_perform(CURL *h, struct httpc_answer *a, const char *what, struct err *err);
void httpc_answer_release(struct httpc_answer *a);

#endif
