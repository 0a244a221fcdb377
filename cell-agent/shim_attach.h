/*
 * shim_attach.h: a unit's own stdio as its shim holds it, and the socket through which the
 * agent attaches to it (kubectl attach).
 *
 * The shim listens on <unit dir>/attach.sock (SOCK_SEQPACKET; one packet is one message: a
 * type byte, then at most SHIM_ATTACH_CHUNK bytes). A caller connects and sends OPEN; the
 * shim answers HELLO and from then on sends it every byte the unit writes (STDOUT, STDERR: the
 * same bytes every caller gets and the CRI log gets), and EXIT when the unit's run ended. A
 * caller whose input reaches the unit sends STDIN, STDIN_CLOSE and RESIZE.
 *
 * The unit's stdin: a pipe the shim holds open for the unit's whole run (a unit created with
 * stdin), or the terminal's master (a unit with tty). Input from callers is queued (bounded:
 * a caller whose input finds it full is read no further until there is room, while other
 * callers, their resizes and new callers are served on) and written as the unit reads it.
 * When a
 * caller's input ends (STDIN_CLOSE, or it goes away), with stdin_once the unit's stdin is
 * closed for good (a pipe's EOF; a terminal gets its EOF character) and later callers attach
 * without input; without stdin_once, a caller whose input ended is let go (its socket
 * closed), as containerd does, and one that left changes nothing.
 *
 * Backpressure: each caller's queue holds at most SHIM_ATTACH_QUEUE_MAX bytes. While one is
 * full, the shim stops reading the unit's output (which then waits, as with a slow terminal);
 * a caller that stays full for SHIM_ATTACH_STALL_MS is let go so it cannot hold the unit.
 *
 * Thread safety: a struct shim_attach belongs to the shim's one thread. The caller's
 * functions (attach_conn_*) are reentrant: one thread may send while another receives.
 */
#ifndef AGENT_SHIM_ATTACH_H
#define AGENT_SHIM_ATTACH_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

#define SHIM_ATTACH_SOCK "attach.sock"
/* Largest payload of one packet. */
#define SHIM_ATTACH_CHUNK (32 * 1024)
/* Callers attached to one unit at once; more are refused (their socket closed at once). */
#define SHIM_ATTACH_MAX_CALLERS 64
/* Output queued for one caller before the unit's output waits. */
#define SHIM_ATTACH_QUEUE_MAX (1024 * 1024)
/* How long a caller's full queue may hold the unit's output before it is let go. */
#define SHIM_ATTACH_STALL_MS 10000
/* Input queued for the unit before callers are read no further. */
#define SHIM_ATTACH_STDIN_MAX (256 * 1024)
/* Pollfds shim_attach_poll fills at most. */
#define SHIM_ATTACH_NPOLL (SHIM_ATTACH_MAX_CALLERS + 2)

/* Packet types. */
enum shim_attach_pkt {
	/* caller -> shim */
	ATTACH_PKT_OPEN = 1,	    /* [want stdin: u8], the first packet */
	ATTACH_PKT_STDIN = 2,	    /* input bytes */
	ATTACH_PKT_STDIN_CLOSE = 3, /* no more input from this caller */
	ATTACH_PKT_RESIZE = 4,	    /* [width: u16][height: u16], host order */
	/* shim -> caller */
	ATTACH_PKT_HELLO = 16,	/* [flags: u8], ATTACH_F_* */
	ATTACH_PKT_STDOUT = 17, /* output bytes */
	ATTACH_PKT_STDERR = 18,
	ATTACH_PKT_EXIT = 19, /* [exit code: i32, host order], the last packet */
};

/* HELLO's flags. */
#define ATTACH_F_TTY 0x1	/* the unit has a terminal: its output is all STDOUT */
#define ATTACH_F_STDIN 0x2	/* the unit was created with stdin */
#define ATTACH_F_STDIN_OPEN 0x4 /* this caller's input reaches the unit */

/* ---- the shim's side ---- */

struct shim_attach;

struct shim_attach_config {
	bool tty, stdin, stdin_once; /* as the unit was created */
};

/* Listens on <dir>/attach.sock (dirfd: the unit directory, borrowed; any path length).
 * stdin_fd is the unit's stdin for a unit with stdin (a pipe's write end, taken over) or -1;
 * with a terminal, the master comes later (shim_attach_set_terminal). */
int shim_attach_new(int dirfd, const struct shim_attach_config *cfg, int stdin_fd,
		    struct shim_attach **out, struct err *err);
/* The terminal's master once the runtime handed it over (borrowed: the shim keeps reading its
 * output). Input goes to a duplicate; the master is made non-blocking. */
void shim_attach_set_terminal(struct shim_attach *a, int master);
/* Fills up to SHIM_ATTACH_NPOLL pollfds for the next poll; returns how many. */
size_t shim_attach_poll(struct shim_attach *a, struct pollfd *p);
/* Handles what poll reported on the n pollfds shim_attach_poll filled. */
void shim_attach_handle(struct shim_attach *a, const struct pollfd *p, size_t n);
/* False while a caller's queue is full (read no output then); lets go callers stalled longer
 * than SHIM_ATTACH_STALL_MS. now_ns: a monotonic clock. */
bool shim_attach_output_room(struct shim_attach *a, int64_t now_ns);
/* Queues the unit's output for every attached caller (type ATTACH_PKT_STDOUT or _STDERR). */
void shim_attach_output(struct shim_attach *a, int type, const void *data, size_t len);
/* The run ended: sends EXIT to every caller, flushes their queues for at most timeout_ms,
 * closes them and the listener, and removes the socket. */
void shim_attach_finish(struct shim_attach *a, int exit_code, int timeout_ms);
void shim_attach_free(struct shim_attach *a);
/* Callers attached now (opened or not). */
size_t shim_attach_callers(const struct shim_attach *a);

/* ---- the caller's side (the agent) ---- */

struct attach_conn {
	int fd;
	bool tty;	 /* the unit has a terminal */
	bool has_stdin;	 /* the unit was created with stdin */
	bool stdin_open; /* this caller's input reaches the unit */
};

/* Connects to the shim of the unit in unit_dir, asks for input when want_stdin, and waits
 * (at most timeout_ms) for its HELLO. -ECONNREFUSED when no shim listens (the unit is not
 * running); -EINVAL when want_stdin and the unit has no stdin. */
int attach_conn_open(const char *unit_dir, bool want_stdin, int timeout_ms, struct attach_conn *c,
		     struct err *err);
/* Sends input (in packets of SHIM_ATTACH_CHUNK), its end, or a terminal size; blocks while
 * the shim's queue is full. 0, or -EPIPE once the shim is gone. */
int attach_conn_stdin(struct attach_conn *c, const uint8_t *data, size_t len);
int attach_conn_stdin_close(struct attach_conn *c);
int attach_conn_resize(struct attach_conn *c, unsigned width, unsigned height);
/* Receives one packet: its type and payload (buf holds at least SHIM_ATTACH_CHUNK bytes).
 * Returns the payload's length, 0 with *type 0 when the shim closed, -errno on errors. */
ssize_t attach_conn_recv(struct attach_conn *c, uint8_t *type, uint8_t *buf, size_t cap);
/* Makes a blocked attach_conn_recv return (the caller went away); any thread. */
void attach_conn_shutdown(struct attach_conn *c);
void attach_conn_close(struct attach_conn *c);

#endif
