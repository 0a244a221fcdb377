/*
 * feed_internal.h: what feed_client.c and feed_server.c share; not for feed's users.
 */
#ifndef KIYOT_FEED_INTERNAL_H
#define KIYOT_FEED_INTERNAL_H

#include "feed.h"

/* The ALPN list both sides offer, in wire form. */
#define FEED_ALPN_WIRE "\x0c" FEED_ALPN

/* Whether the handshake agreed on the feed's protocol (ALPN). */
bool feed_alpn_ok(SSL *ssl);
/* Keepalive, a user timeout and no delay on a feed's socket: a peer that vanished (a cell
 * cut off, a kiyot gone) ends the feed within about a minute on either side. */
void feed_tune_socket(int fd);
/* Blocks SIGPIPE in the calling thread: a write to a connection its peer closed fails with
 * EPIPE instead of killing a process that did not ignore the signal (OpenSSL writes with
 * write(2), which has no MSG_NOSIGNAL). */
void feed_block_sigpipe(void);
/* Sets err to "what: why", why being the peer's certificate's fault when it failed to verify,
 * else OpenSSL's error or errno; empties OpenSSL's error queue. Returns -code. */
int feed_tls_error(struct err *err, int code, const char *what, SSL *ssl);

#endif
