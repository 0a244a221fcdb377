/*
 * stream_internal.h: what the streaming server's parts share (server.c, session.c).
 */
#ifndef KIYOT_STREAM_INTERNAL_H
#define KIYOT_STREAM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "http.h"
#include "server.h"

struct cellmgr;

/* Writes all of data to the socket fd (blocking); false when the peer is gone. */
bool stream_write_all(int fd, const uint8_t *data, size_t len);

/* Answers an HTTP error (http_answer_error's statuses) saying text, giving up the upgrade. */
void stream_answer_error(int fd, int status, const char *text);

/* Serves one upgraded connection for req: answers the upgrade (or an error), then carries the
 * session until either side ends it. head_rest is what the client sent after its request
 * head. Returns 0 or an error saying why the session ended early. */
int stream_session(struct cellmgr *cells, int fd, const struct http_req *http,
		   const struct stream_request *req, const uint8_t *head_rest, size_t rest_len,
		   struct err *err);

/* The port-forward half of stream_session, on an upgraded SPDY session. */
struct spdy_session;
int stream_port_forward(struct cellmgr *cells, int fd, const struct stream_request *req,
			struct spdy_session *sp, const uint8_t *rest, size_t rest_len,
			struct err *err);

/* A port-forward over WebSocket (the kubelet's v4 channels, two per port): answers the upgrade
 * of http (or an HTTP error), then carries the session until either side ends it. */
int stream_port_forward_ws(struct cellmgr *cells, int fd, const struct http_req *http,
			   const struct stream_request *req, const uint8_t *rest, size_t rest_len,
			   struct err *err);

/*
 * The ports a port-forward URL's query names, as the kubelet reads them: every "port"
 * parameter (escapes decoded), each a comma-separated list of ports 1-65535, into
 * ports[0..max), their count in *n (0 when none). -EINVAL saying which value is bad, -E2BIG
 * past max ports.
 */
int stream_ports_of_query(const char *target, int32_t *ports, size_t max, size_t *n,
			  struct err *err);

#endif
