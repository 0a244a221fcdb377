#include "crilog.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "xalloc.h"

#define CRILOG_MAX_RECORD_LIMIT (1024 * 1024)
#define CRILOG_TIME_MAX 40

struct crilog_held {
	char *data; /* max_record bytes */
	size_t len;
};

struct crilog_writer {
	int fd;
	size_t max_record;
	int64_t (*now)(void);
	struct crilog_held held[2];
	char *line; /* scratch for one formatted record */
	size_t line_cap;
};

/* The stream's name as it appears in a record. */
const char *crilog_stream_name(enum crilog_stream stream)
{
	return stream == CRILOG_STDERR ? "stderr" : "stdout";
}

/* Creates a writer; see the header for the arguments. */
struct crilog_writer *crilog_writer_new(int fd, size_t max_record, int64_t (*now)(void))
{
	struct crilog_writer *w = xcalloc(1, sizeof(*w));

	if (max_record == 0)
		max_record = CRILOG_MAX_RECORD_DEFAULT;
	if (max_record > CRILOG_MAX_RECORD_LIMIT)
		max_record = CRILOG_MAX_RECORD_LIMIT;
	w->fd = fd;
	w->max_record = max_record;
	w->now = now ? now : clock_now_ns;
	for (size_t i = 0; i < ARRAY_SIZE(w->held); i++)
		w->held[i].data = xmalloc(max_record);
	w->line_cap = max_record + 64;
	w->line = xmalloc(w->line_cap);
	return w;
}

/* Frees the writer; held text is dropped (close the streams first to keep it). */
void crilog_writer_free(struct crilog_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(w->held); i++)
		free(w->held[i].data);
	free(w->line);
	free(w);
}

/* Formats one record into out; the whole record or nothing. */
int crilog_format(char *out, size_t cap, int64_t ns, enum crilog_stream stream, bool partial,
		  const char *text, size_t len)
{
	char ts[CRILOG_TIME_MAX];
	const char *name = crilog_stream_name(stream);
	size_t tl, nl, need;

	clock_rfc3339nano(ns, ts, sizeof(ts));
	tl = strlen(ts);
	nl = strlen(name);
	need = tl + 1 + nl + 3 + len + 1;
	if (need > cap || need > INT32_MAX)
		return -ENOBUFS;
	memcpy(out, ts, tl);
	out[tl] = ' ';
	memcpy(out + tl + 1, name, nl);
	out[tl + 1 + nl] = ' ';
	out[tl + 2 + nl] = partial ? 'P' : 'F';
	out[tl + 3 + nl] = ' ';
	if (len)
		memcpy(out + tl + 4 + nl, text, len);
	out[need - 1] = '\n';
	return (int)need;
}

/* Writes all of data to fd, retrying short writes. */
static int write_all(int fd, const char *data, size_t len, struct err *err)
{
	while (len) {
		ssize_t n = write(fd, data, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return err_errno(err, "write log");
		}
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Writes the held text of a stream as one record (in a single write) and empties it. */
static int emit(struct crilog_writer *w, enum crilog_stream stream, bool partial, struct err *err)
{
	struct crilog_held *h = &w->held[stream];
	int n = crilog_format(w->line, w->line_cap, w->now(), stream, partial, h->data, h->len);

	h->len = 0;
	if (n < 0)
		return err_set(err, ENOBUFS, "log record larger than %zu bytes", w->line_cap);
	return write_all(w->fd, w->line, (size_t)n, err);
}

/* Splits data into lines and full chunks; see the header. */
int crilog_write(struct crilog_writer *w, enum crilog_stream stream, const char *data, size_t len,
		 struct err *err)
{
	struct crilog_held *h = &w->held[stream == CRILOG_STDERR ? 1 : 0];

	stream = stream == CRILOG_STDERR ? CRILOG_STDERR : CRILOG_STDOUT;
	while (len) {
		const char *nl = memchr(data, '\n', len);
		size_t seg = nl ? (size_t)(nl - data) : len;

		len -= seg;
		while (seg) {
			size_t n;
			int ret;

			if (h->len == w->max_record) {
				ret = emit(w, stream, true, err);
				if (ret < 0)
					return ret;
			}
			n = w->max_record - h->len;
			if (n > seg)
				n = seg;
			memcpy(h->data + h->len, data, n);
			h->len += n;
			data += n;
			seg -= n;
		}
		if (nl) {
			int ret = emit(w, stream, false, err);

			if (ret < 0)
				return ret;
			data++;
			len--;
		}
	}
	return 0;
}

/* Flushes held text of a stream that ended as a final P record: the output did not end its
 * line, and a reader that appends a newline after every F record (the kubelet's
 * FallbackToLogsOnError message, `kubectl logs`) must not invent one. containerd does the
 * same. */
int crilog_close_stream(struct crilog_writer *w, enum crilog_stream stream, struct err *err)
{
	stream = stream == CRILOG_STDERR ? CRILOG_STDERR : CRILOG_STDOUT;
	if (w->held[stream].len == 0)
		return 0;
	return emit(w, stream, true, err);
}

/* Checks that a timestamp looks like RFC 3339: digits, dashes, a 'T', colons, a zone. */
static bool time_plausible(const char *s, size_t n)
{
	if (n < 20 || n >= CRILOG_TIME_MAX || s[4] != '-' || s[10] != 'T')
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!strchr("0123456789-T:.Z+", s[i]))
			return false;
	}
	return true;
}

/* Parses one record; see the header. */
int crilog_parse(const char *line, size_t len, struct crilog_record *out, struct err *err)
{
	const char *p, *end, *sp;
	struct crilog_record r;

	memset(&r, 0, sizeof(r));
	if (len > CRILOG_MAX_LINE)
		return err_set(err, EINVAL, "log record longer than %d bytes", CRILOG_MAX_LINE);
	if (len && line[len - 1] == '\n')
		len--;
	end = line + len;
	sp = memchr(line, ' ', len);
	if (!sp || !time_plausible(line, (size_t)(sp - line)))
		return err_set(err, EINVAL, "log record does not start with an RFC 3339 time");
	r.time = line;
	r.time_len = (size_t)(sp - line);
	p = sp + 1;
	if (end - p >= 6 && memcmp(p, "stdout", 6) == 0)
		r.stream = CRILOG_STDOUT;
	else if (end - p >= 6 && memcmp(p, "stderr", 6) == 0)
		r.stream = CRILOG_STDERR;
	else
		return err_set(err, EINVAL, "log record has no stream (stdout or stderr)");
	p += 6;
	if (end - p < 2 || p[0] != ' ' || (p[1] != 'F' && p[1] != 'P'))
		return err_set(err, EINVAL, "log record has no F or P tag after the stream");
	r.partial = p[1] == 'P';
	p += 2;
	if (p < end) {
		if (*p != ' ')
			return err_set(err, EINVAL, "log record tag is not followed by a space");
		p++;
	}
	r.text = p;
	r.text_len = (size_t)(end - p);
	*out = r;
	return 0;
}
