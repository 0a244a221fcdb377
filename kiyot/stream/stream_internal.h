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

#endif
