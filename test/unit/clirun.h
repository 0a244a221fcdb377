/*
 * clirun.h: runs a `kiyot` client command (cli_main) inside a unit test, as a person would
 * from a shell with no terminal: stdin from /dev/null (or the file r.in names), stdout and
 * stderr captured.
 *
 *	struct clirun r = { 0 };
 *	int status = clirun(&r, "get", "pods", NULL);    r.out, r.err: what it printed
 *	clirun_release(&r);
 *
 * Included by the unit tests that need it; everything here is static.
 */
#ifndef KIYOT_TEST_CLIRUN_H
#define KIYOT_TEST_CLIRUN_H

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "xalloc.h"

#define CLIRUN_MAX_OUTPUT (1 << 20)

struct clirun {
	const char *in;	 /* the file stdin reads, NULL for /dev/null */
	char *out, *err; /* what the last command printed, NUL-terminated */
};

/* The text of an unnamed file (at most CLIRUN_MAX_OUTPUT bytes of it). */
static __attribute__((unused)) char *clirun_text(int fd)
{
	char *s = xcalloc(1, CLIRUN_MAX_OUTPUT + 1);
	size_t n = 0;
	ssize_t r;

	lseek(fd, 0, SEEK_SET);
	while (n < CLIRUN_MAX_OUTPUT && (r = read(fd, s + n, CLIRUN_MAX_OUTPUT - n)) > 0)
		n += (size_t)r;
	return s;
}

/* fn (cli_main, localcell_main) on argv0 and the arguments of ap (NULL-terminated, at most
 * 30); returns its exit status. */
static __attribute__((unused)) int clirun_v(struct clirun *r, int (*fn)(int, char **),
					    const char *argv0, va_list ap)
{
	char *argv[32] = { (char *)argv0 };
	int argc = 1, ret, saved[3], fds[3];

	while (argc < 31 && (argv[argc] = va_arg(ap, char *)))
		argc++;
	argv[argc] = NULL;
	fflush(stdout);
	fflush(stderr);
	fds[0] = open(r->in ? r->in : "/dev/null", O_RDONLY | O_CLOEXEC);
	fds[1] = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	fds[2] = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	for (int i = 0; i < 3; i++) {
		saved[i] = dup(i);
		dup2(fds[i], i);
	}
	ret = fn(argc, argv);
	fflush(stdout);
	fflush(stderr);
	for (int i = 0; i < 3; i++) {
		dup2(saved[i], i);
		close(saved[i]);
	}
	free(r->out);
	free(r->err);
	r->out = clirun_text(fds[1]);
	r->err = clirun_text(fds[2]);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	return ret;
}

/* `kiyot ARGS...` (NULL-terminated); returns its exit status. */
static __attribute__((unused)) int clirun(struct clirun *r, ...)
{
	va_list ap;
	int ret;

	va_start(ap, r);
	ret = clirun_v(r, cli_main, "kiyot", ap);
	va_end(ap);
	return ret;
}

/* `kiyot local-cell ARGS...` (NULL-terminated); returns its exit status. */
static __attribute__((unused)) int clirun_localcell(struct clirun *r, ...)
{
	va_list ap;
	int ret;

	va_start(ap, r);
	ret = clirun_v(r, localcell_main, "local-cell", ap);
	va_end(ap);
	return ret;
}

static __attribute__((unused)) void clirun_release(struct clirun *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

#endif
