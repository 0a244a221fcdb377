/*
 * log.h: leveled logging to stderr (or a file), one line per record:
 *	2026-11-22T04:30:00.123Z info  cri: RunPodSandbox web/default -> 3f2a...
 * Thread-safe. Never log secrets (registry passwords, tokens, keys).
 */
#ifndef KIYOT_LOG_H
#define KIYOT_LOG_H

enum log_level {
	LOG_DEBUG,
	LOG_INFO,
	LOG_WARN,
	LOG_ERROR
};

void log_set_level(enum log_level l);
/* Parses "debug|info|warn|error"; returns -1 on anything else. */
int log_parse_level(const char *s);
void log_set_prefix(const char *prefix);
void log_msg(enum log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
