/*
 * feed.c: what the cell feed's client and server share (see feed.h).
 */
#include "feed_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

int feed_address(const char *grpc_target, char **out, struct err *err)
{
	const char *colon = strrchr(grpc_target, ':');
	char *end = NULL;
	long port = colon ? strtol(colon + 1, &end, 10) : 0;

	if (!colon || !end || *end || port < 1 || port > 65534)
		return err_set(err, EINVAL, "agent address \"%s\": want ip:port, port 1-65534",
			       grpc_target);
	*out = xasprintf("%.*s:%ld", (int)(colon - grpc_target), grpc_target, FEED_PORT(port));
	return 0;
}

int feed_tls_error(struct err *err, int code, const char *what, SSL *ssl)
{
	long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
	unsigned long e = ERR_get_error();
	char reason[200] = "the peer closed the connection";

	if (v != X509_V_OK) {
		snprintf(reason, sizeof(reason), "the peer's certificate: %s",
			 X509_verify_cert_error_string(v));
	} else if (e) {
		ERR_error_string_n(e, reason, sizeof(reason));
	} else if (errno && errno != EAGAIN) {
		snprintf(reason, sizeof(reason), "%s", strerror(errno));
	}
	ERR_clear_error();
	return err_set(err, code, "%s: %s", what, reason);
}

/* A dead peer is noticed within about a minute: keepalive probes after 30 s of silence, and
 * TCP gives up on unacknowledged data after 60 s. */
#define KEEPALIVE_IDLE_S 30
#define KEEPALIVE_INTVL_S 10
#define KEEPALIVE_CNT 3
#define USER_TIMEOUT_MS 60000

void feed_tune_socket(int fd)
{
	int one = 1, idle = KEEPALIVE_IDLE_S, intvl = KEEPALIVE_INTVL_S, cnt = KEEPALIVE_CNT;
	unsigned int user = USER_TIMEOUT_MS;

	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof(user));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void feed_block_sigpipe(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

bool feed_alpn_ok(SSL *ssl)
{
	const unsigned char *p = NULL;
	unsigned int len = 0;

	SSL_get0_alpn_selected(ssl, &p, &len);
	return len == strlen(FEED_ALPN) && memcmp(p, FEED_ALPN, len) == 0;
}
