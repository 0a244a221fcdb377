/*
 * hello.c: the test image's HTTP server. Listens on $PORT (default 8080), answers every
 * request with "hello from kiyot\n" and the host name, logs each request line to stdout, and
 * exits 0 on SIGTERM so a graceful stop is observable as exit code 0. Built static so the
 * image needs nothing else.
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define REQ_MAX 4096

static volatile sig_atomic_t hello_stop;

/* Records the stop request; accept() is interrupted because SA_RESTART is not set. */
static void hello_on_term(int sig)
{
	(void)sig;
	hello_stop = 1;
}

/* Parses $PORT, falling back to 8080 for anything that is not a port number. */
static int hello_port(void)
{
	const char *s = getenv("PORT");
	char *end;
	long v;

	if (!s || !*s)
		return 8080;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 1 || v > 65535)
		return 8080;
	return (int)v;
}

/* Writes all of buf, retrying on short writes; gives up quietly on errors. */
static void hello_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

/* Reads the request head (bounded), logs its first line and sends the greeting. */
static void hello_serve(int fd, const char *host)
{
	char req[REQ_MAX + 1];
	char resp[512];
	char body[320];
	size_t got = 0;
	char *eol;
	int blen, rlen;

	while (got < REQ_MAX) {
		ssize_t n = read(fd, req + got, REQ_MAX - got);

		if (n < 0 && errno == EINTR && !hello_stop)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		req[got] = '\0';
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			break;
	}
	req[got] = '\0';
	eol = strpbrk(req, "\r\n");
	if (eol)
		*eol = '\0';
	if (req[0])
		printf("request: %s\n", req);
	fflush(stdout);

	blen = snprintf(body, sizeof(body), "hello from kiyot\nhostname: %s\n", host);
	if (blen < 0 || (size_t)blen >= sizeof(body))
		return;
	rlen = snprintf(resp, sizeof(resp),
			"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
			"Connection: close\r\n\r\n%s",
			blen, body);
	if (rlen < 0 || (size_t)rlen >= sizeof(resp))
		return;
	hello_write_all(fd, resp, (size_t)rlen);
}

/* Binds the listening socket on all addresses. */
static int hello_listen(int port)
{
	struct sockaddr_in sa;
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int main(void)
{
	struct sigaction sa;
	struct timeval tv = { .tv_sec = 5 };
	char host[256] = "";
	int port = hello_port();
	int lfd;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = hello_on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (gethostname(host, sizeof(host) - 1) < 0)
		host[0] = '\0';

	lfd = hello_listen(port);
	if (lfd < 0) {
		fprintf(stderr, "hello: cannot listen on port %d: %s\n", port, strerror(errno));
		return 1;
	}
	printf("hello: listening on port %d\n", port);
	fflush(stdout);

	while (!hello_stop) {
		int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (cfd < 0)
			continue;
		setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		hello_serve(cfd, host);
		close(cfd);
	}
	printf("hello: stopping on SIGTERM\n");
	fflush(stdout);
	close(lfd);
	return 0;
}
