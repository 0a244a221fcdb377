/*
 * cli_stream.h: the streaming commands of kiyot: exec, attach and port-forward into a pod,
 * through the CRI calls a kubelet makes (Exec, Attach, PortForward over the CRI socket) and
 * the URL they answer, opened with SPDY/3.1 as kubectl opens it (remotecommand
 * v4.channel.k8s.io; portforward.k8s.io). Because they speak only CRI and the streaming
 * protocols, they work against any CRI runtime's socket (--socket), not only kiyot's.
 *
 *	kiyot exec [-i] [-t] POD [-c CONTAINER] -- CMD [ARG...]     (cli_exec.c)
 *	kiyot attach [-i] [-t] POD [-c CONTAINER]                   (cli_exec.c)
 *	kiyot port-forward POD [LOCAL:]REMOTE...                    (cli_portforward.c)
 *
 * POD is a pod's name in the namespace (-n), or a sandbox id. Each returns the process's
 * exit status: exec the command's exit code; 1 with a message on stderr when the command
 * could not be run or the stream failed; 2 on a usage error.
 *
 * The second half of this header is what the commands share (cli_stream.c): a client SPDY
 * session on a streaming URL, the signals their loops wait for, and which pod and container a
 * command names. A process runs one command: the signal pipe is the process's.
 */
#ifndef KIYOT_CLI_STREAM_H
#define KIYOT_CLI_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli.h"
#include "stream/spdy.h"

/* argv[0] is the command's name; argv is reordered by option parsing. */
int cli_exec(struct cli *c, int argc, char **argv);
int cli_attach(struct cli *c, int argc, char **argv);
int cli_port_forward(struct cli *c, int argc, char **argv);

/* Bytes a command queues for the server before it stops reading its own inputs. */
#define CLI_SEND_MAX (1024 * 1024)
/* What one read takes from a socket or a terminal. */
#define CLI_IO_CHUNK 65536
/* The most an upgrade answer's head may take. */
#define CLI_STREAM_MAX_HEAD 16384

/*
 * Parses the answer to an upgrade request at the start of data[0..len): the status code into
 * *status and the X-Stream-Protocol-Version it names into proto (NUL-terminated, "" when
 * none or longer than proto_size - 1 bytes). Returns the head's length when it is complete,
 * 0 when more bytes are needed, -EBADMSG when it is not an HTTP/1.x answer or has no end
 * within CLI_STREAM_MAX_HEAD bytes.
 */
ssize_t cli_stream_parse_answer(const char *data, size_t len, int *status, char *proto,
				size_t proto_size);

/* A client SPDY session on a streaming server's socket (non-blocking once open). */
struct cli_sconn {
	int fd;
	struct spdy_session *sp;
	uint8_t *early; /* what came after the answer's head, fed first */
	size_t nearly;
};

/*
 * Connects to url ("http://HOST:PORT/PATH", as runtimes answer), asks for the upgrade to
 * SPDY/3.1 with protocol and starts a client session of max_streams streams (0: the
 * default). Fails saying what the server answered instead: its status and the start of its
 * text, or another protocol; within 10 s.
 */
int cli_sconn_open(struct cli_sconn *sc, const char *url, const char *protocol,
		   unsigned max_streams, struct err *err);
/* Closes the socket and frees the session; sc may be one that never opened (fd -1). */
void cli_sconn_close(struct cli_sconn *sc);
/* Writes what the session queued, as much as the socket takes; -1 when the server is gone. */
int cli_sconn_flush(struct cli_sconn *sc);
/* The bytes queued for the server. */
size_t cli_sconn_pending(const struct cli_sconn *sc);
/*
 * Reads what the server sent and hands each event to fn (DATA already given back to the
 * receive windows). 1 when it read (or nothing was there), 0 at the end of the connection,
 * -1 with err set on an error or a broken frame.
 */
int cli_sconn_read(struct cli_sconn *sc, void (*fn)(void *, const struct spdy_event *), void *arg,
		   struct err *err);

/* Writes all of data to fd, waiting while it is full; -1 when its reader is gone (the
 * commands ignore SIGPIPE). */
int cli_write_full(int fd, const void *data, size_t len);

/*
 * Catches the signals of sigs (0-terminated) into a pipe: cli_signal_fd() turns readable and
 * cli_next_signal() gives them in order (0 when none is left).
 */
int cli_catch_signals(const int *sigs, struct err *err);
int cli_signal_fd(void);
int cli_next_signal(void);

/* The sandbox id of a pod by name in c->ns, else of a sandbox id itself; *id is the caller's.
 * -ENOENT naming the pod. */
int cli_resolve_pod(struct cli *c, const char *pod, char **id, struct err *err);
/* The container named name of the pod (the newest of that name), or without a name its only
 * one; *id is the caller's. Errors name the pod and say to use -c. */
int cli_pick_container(struct cli *c, const char *pod, const char *name, char **id,
		       struct err *err);

#endif
