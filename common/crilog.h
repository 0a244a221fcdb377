/*
 * crilog.h: the CRI container log format, as the kubelet reads it.
 *
 * Each record is one line: `<RFC3339Nano> <stdout|stderr> <F|P> <text>\n`, for example
 *	2026-11-22T04:30:00.123456789Z stdout F hello
 * A line longer than the maximum record text (16 KiB by default) is split into P (partial)
 * records followed by one F (full) record that ends the line. Output that does not end in a
 * newline is held per stream until the newline arrives, the held text reaches the maximum, or
 * the stream is closed (then it is written as a P record: the line never ended, as containerd
 * writes it, so a reader adds no newline the output did not have).
 *
 * Thread safety: a writer belongs to one thread; the parser is pure.
 */
#ifndef KIYOT_CRILOG_H
#define KIYOT_CRILOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define CRILOG_MAX_RECORD_DEFAULT (16 * 1024)
/* Longest record line: timestamp, stream, tag, text of at most 1 MiB, newline. */
#define CRILOG_MAX_LINE (1024 * 1024 + 64)

enum crilog_stream {
	CRILOG_STDOUT,
	CRILOG_STDERR
};

struct crilog_writer;

/* Writes records to fd (not owned; opened O_APPEND by the caller). max_record: longest record
 * text, 0 for the default, at most 1 MiB. now: clock for the timestamps, NULL for
 * clock_now_ns (tests pass a fixed clock). */
struct crilog_writer *crilog_writer_new(int fd, size_t max_record, int64_t (*now)(void));
void crilog_writer_free(struct crilog_writer *w);

/* Appends output of one stream; writes every completed line and every full chunk. */
int crilog_write(struct crilog_writer *w, enum crilog_stream stream, const char *data, size_t len,
		 struct err *err);
/* The stream reached EOF: held text without a newline is written as a P record. */
int crilog_close_stream(struct crilog_writer *w, enum crilog_stream stream, struct err *err);

/* Formats one record (text must not contain a newline) and appends it to the caller's buffer
 * of cap bytes; returns the record length, or -ENOBUFS when it does not fit. */
int crilog_format(char *out, size_t cap, int64_t ns, enum crilog_stream stream, bool partial,
		  const char *text, size_t len);

/* One parsed record. Pointers point into the parsed line; text excludes the newline. */
struct crilog_record {
	const char *time; /* the timestamp as written */
	size_t time_len;
	enum crilog_stream stream;
	bool partial;
	const char *text;
	size_t text_len;
};

/* Parses one record line (with or without its trailing newline). -EINVAL with a message
 * naming what is wrong when the line is not a CRI log record. */
int crilog_parse(const char *line, size_t len, struct crilog_record *out, struct err *err);

const char *crilog_stream_name(enum crilog_stream stream);

#endif
