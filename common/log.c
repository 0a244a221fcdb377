#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum log_level level = LOG_INFO;
static char prefix[32];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void log_set_level(enum log_level l)
{
	level = l;
}

int log_parse_level(const char *s)
{
	static const char *names[] = { "debug", "info", "warn", "error" };

	for (int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

void log_set_prefix(const char *p)
{
	snprintf(prefix, sizeof(prefix), "%s", p);
}

void log_msg(enum log_level l, const char *fmt, ...)
{
	static const char *names[] = { "debug", "info ", "warn ", "error" };
	struct timespec ts;
	struct tm tm;
	char when[32];
	va_list ap;

	if (l < level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	pthread_mutex_lock(&lock);
	fprintf(stderr, "%s.%03ldZ %s %s%s", when, ts.tv_nsec / 1000000, names[l], prefix,
		prefix[0] ? ": " : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	pthread_mutex_unlock(&lock);
}
