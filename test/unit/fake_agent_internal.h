/*
 * fake_agent_internal.h: what the fake agent's files share (see fake_agent.h): fake_agent.c
 * (cells, units, failures and the unary calls), fake_agent_stream.c (Watch and the
 * bidirectional streams), fake_agent_ctl.c (the tests' side). Functions here need fa->lock
 * held unless they say otherwise.
 */
#ifndef KIYOT_TEST_FAKE_AGENT_INTERNAL_H
#define KIYOT_TEST_FAKE_AGENT_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "fake_agent.h"

struct fake_unit {
	char *id, *image;
	Kiyot__Cell__V1__UnitState state;
	int desired;
	int64_t created_ns, started_ns, finished_ns;
	int32_t exit_code;
	int32_t pid; /* of its last start: 1000 and up, one more a start in the fake agent */
	char *reason, *message;
	char *termination_message;
	char *log;
	size_t log_len;
};

struct fake_volume {
	char *name;
	int entries;
};

struct fake_cell {
	char *id, *target, *bootstrap;
	char *ca, *secret; /* from the bootstrap document */
	char *key, *csr;   /* made at the first Enroll */
	bool enrolled, serving;
	struct fake_unit **units;
	size_t n_units, cap_units;
	struct fake_volume *volumes;
	size_t n_volumes, cap_volumes;
	Kiyot__Cell__V1__WatchRequest *last_watch; /* a copy */
	Kiyot__Cell__V1__Pod *last_pod;		   /* the last Apply's, a copy */
	unsigned watches;
	struct fake_cell *next;
};

struct agent_conn {
	char *cell_id;
	char *target;
};

enum stream_kind {
	STREAM_WATCH,
	STREAM_EXEC,
	STREAM_ATTACH,
	STREAM_PORTFORWARD
};

struct agent_stream {
	enum stream_kind kind;
	char *cell_id;
	ProtobufCMessage **q; /* messages for next, oldest first from head */
	size_t head, n, cap;
	bool cancelled;
	int end;  /* 0 open, 1 ends once q is empty, < 0 ended with that error */
	bool cat; /* an Exec of cat: stdin comes back as stdout */
	/* Exec, Attach, PortForward: the caller's callbacks, run by the stream's thread */
	struct fake_agent *fa;
	struct agent_stream_cbs cbs;
	void *arg;
	unsigned asked;	 /* messages asked for and not yet given */
	unsigned unsent; /* messages taken whose on_sent has not come */
	bool closed;	 /* kiyot's side closed */
	struct agent_stream *next;
};

struct refused {
	char *image, *message;
};

struct fake_agent {
	struct agent_client client;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fake_cell *cells;
	struct agent_stream *streams;
	struct {
		int code, times, delay_ms;
		unsigned calls;
		int64_t last_timeout;
	} ops[FAKE_AGENT_N_OPS];
	struct refused *refused;
	size_t n_refused, cap_refused;
	bool resend_logs;  /* Watch sends whole logs, whatever the offsets */
	char *version;	   /* what Hello says; NULL: this tree's release */
	int watch_threads; /* each stream runs its callbacks on a thread of its own */
};

/* Cells and units. */
struct fake_cell *fa_cell_find(struct fake_agent *fa, const char *id);
struct fake_unit *fa_unit_find(struct fake_cell *c, const char *id);
void fa_cell_free(struct fake_cell *c);
/* Replaces a heap string. */
void fa_set_str(char **dst, const char *v);
/* The unit as a wire status, borrowing its strings. */
void fa_unit_wire(const struct fake_unit *u, Kiyot__Cell__V1__UnitStatus *w);

/* Streams: queue a message (taken) for the stream's reader; queue a copy of a Watch event on
 * every open Watch of the cell; a unit's status event; a log event of the unit's bytes from
 * offset on (a heap message); end the cell's open streams with -code; free a stream. */
void fa_stream_push(struct fake_agent *fa, struct agent_stream *s, void *msg);
void fa_notify(struct fake_agent *fa, const struct fake_cell *c,
	       const Kiyot__Cell__V1__WatchEvent *ev);
void fa_notify_status(struct fake_agent *fa, const struct fake_cell *c, const struct fake_unit *u);
Kiyot__Cell__V1__WatchEvent *fa_log_event(const struct fake_unit *u, size_t offset);
/* What Stats answers for the cell (a heap message); needs fa->lock. */
Kiyot__Cell__V1__StatsResponse *fa_stats_msg(const struct fake_cell *c);
/* The same as a Watch's STATS event (a heap message); needs fa->lock. */
Kiyot__Cell__V1__WatchEvent *fa_stats_event(const struct fake_cell *c);
void fa_streams_end(struct fake_agent *fa, const char *cell_id, int code);
void fa_stream_release(struct agent_stream *s);

/* Counts a call of op and answers what the test asked of it: 0, or the error to fail with,
 * after the delay if any. Takes fa->lock itself. */
int fa_op_enter(struct fake_agent *fa, enum fake_agent_op op, int64_t timeout_ms, struct err *err);
/* The cell a connection reaches, as the real agent's TLS allows, or NULL with err set. */
struct fake_cell *fa_conn_cell(struct fake_agent *fa, const struct agent_conn *conn,
			       struct err *err);
/* The tiny shell of ExecSync and Exec (see fake_agent.h); fills *out and *errs (heap). */
int32_t fa_run_command(char *const *cmd, size_t n, char **out, char **errs);

/* The streaming operations of agent_ops (fake_agent_stream.c); they take fa->lock. */
int fa_watch(void *self, struct agent_conn *conn, const Kiyot__Cell__V1__WatchRequest *req,
	     agent_watch_event_fn *on_event, agent_watch_end_fn *on_end, void *arg,
	     struct agent_watch **out, struct err *err);
void fa_watch_cancel(void *self, struct agent_watch *w);
int fa_open_stream(void *self, struct agent_conn *conn, const char *method,
		   const ProtobufCMessage *first, const ProtobufCMessageDescriptor *out_desc,
		   const struct agent_stream_cbs *cbs, void *arg, struct agent_stream **out,
		   struct err *err);
void fa_stream_read(void *self, struct agent_stream *s);
int fa_stream_send(void *self, struct agent_stream *s, const ProtobufCMessage *msg,
		   struct err *err);
void fa_stream_close_send(void *self, struct agent_stream *s);
/* A Watch's reading (its thread's) and the end of a stream of either kind. */
int fa_next(void *self, struct agent_stream *s, ProtobufCMessage **msg, struct err *err);
void fa_cancel(void *self, struct agent_stream *s);
void fa_stream_free(void *self, struct agent_stream *s);

#endif
