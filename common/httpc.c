/*
 * httpc.c: the shared shape of a libcurl exchange (see httpc.h).
 */
#include "httpc.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void global_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

void httpc_global_init(void)
{
	pthread_once(&global_once, global_init);
}

/* Appends received bytes to the bounded body; a full body aborts the transfer. */
static size_t sink(char *p, size_t size, size_t n, void *ud)
{
	struct httpc_answer *a = ud;
	struct err e = ERR_INIT;

	if (buf_append(&a->body, p, size * n, &e) < 0) {
		a->overflow = true;
		return 0;
	}
	return size * n;
}

void httpc_prepare(CURL *h, const struct httpc_req *req, struct httpc_answer *a)
{
	httpc_global_init();
	a->status = 0;
	a->overflow = false;
	buf_init(&a->body, req->max_answer);
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, req->url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (req->method && strcmp(req->method, "GET") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
	if (req->body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)req->body_len);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
	}
	if (req->headers)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, req->headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, req->connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, req->timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
}

int httpc_perform(CURL *h, struct httpc_answer *a, const char *what, struct err *err)
{
	CURLcode rc = curl_easy_perform(h);

	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
	if (a->overflow)
		return err_set(err, EFBIG, "%s: the answer exceeds %zu bytes", what, a->body.max);
	if (rc != CURLE_OK)
		return err_set(err, EIO, "%s: %s", what, curl_easy_strerror(rc));
	return 0;
}

void httpc_answer_release(struct httpc_answer *a)
{
	buf_release(&a->body);
}
