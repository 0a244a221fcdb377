/* cli.h: the client commands of kiyot (run in cli_run.c; get, logs, delete in cli_pods.c;
 * exec, attach and port-forward in cli_stream.h's files); see cli.c. */
#ifndef KIYOT_CLI_H
#define KIYOT_CLI_H

#include <protobuf-c/protobuf-c.h>

#include "err.h"

/* What the client commands share: kiyot's CRI socket and the namespace pods are named in. */
struct cli {
	struct rpc_channel *ch;
	const char *ns;
	const char *socket;
};

/* The CRI services' method paths: CLI_RT "Exec". */
#define CLI_RT "/runtime.v1.RuntimeService/"
#define CLI_IMG "/runtime.v1.ImageService/"
/* The label `kiyot run` gives an init container, which `kiyot get` counts apart. */
#define CLI_LABEL_INIT "kiyot.elotl.co/init-container"

/* argv[1] is the command. Returns the process exit status. */
int cli_main(int argc, char **argv);

/* The commands; argv[0] is the command's name. Each returns the process exit status. */
int cli_run(struct cli *c, int argc, char **argv);
int cli_get(struct cli *c, int argc, char **argv);
int cli_logs(struct cli *c, int argc, char **argv);
int cli_delete(struct cli *c, int argc, char **argv);

/* Prints "kiyot: " and the message on stderr; returns 1, the exit status of a failed command. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One CRI call (method: "/runtime.v1.RuntimeService/Exec"); *resp is the caller's to free. An
 * unreachable kiyot is said in words that tell how to start it. */
int cli_call(struct cli *c, const char *method, const ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *d, void *resp, struct err *err);

/* A container's CRI state and exit code. */
int cli_container_state(struct cli *c, const char *id, int *state, int *exit_code, struct err *err);

/* The newest sandbox of a pod by name in c->ns; *id is the caller's. -ENOENT naming the pod. */
int cli_find_pod(struct cli *c, const char *name, char **id, struct err *err);

/* `kiyot local-cell launch|terminate ...` (cmd_localcell.c); argv[0] is "local-cell". */
int localcell_main(int argc, char **argv);

#endif
