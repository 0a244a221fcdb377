/*
 * cli.c: kiyot for people without a kubelet: the client commands' dispatch and the CRI call
 * they share. `kiyot run` is cli_run.c's; get, logs and delete cli_pods.c's; exec, attach and
 * port-forward cli_exec.c's and cli_portforward.c's.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_stream.h"
#include "cri_api.pb-c.h"
#include "rpc.h"
#include "xalloc.h"

#define CALL_TIMEOUT_MS (10 * 60 * 1000)

int cli_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("kiyot: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

int cli_call(struct cli *c, const char *method, const ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *d, void *resp, struct err *err)
{
	int ret = rpc_unary(c->ch, method, req, d, CALL_TIMEOUT_MS, (ProtobufCMessage **)resp, err);

	if (ret == -ECONNREFUSED || ret == -ENOENT) {
		if (strstr(err->msg, "connect") || strstr(err->msg, "unavailable") ||
		    strstr(err->msg, "No such file"))
			err_set(err, ECONNREFUSED,
				"cannot reach kiyot at %s; start it with `kiyot serve` or pass "
				"--socket",
				c->socket);
	}
	return ret;
}

int cli_container_state(struct cli *c, const char *id, int *state, int *exit_code, struct err *err)
{
	Runtime__V1__ContainerStatusRequest req = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
	Runtime__V1__ContainerStatusResponse *resp = NULL;

	req.container_id = (char *)id;
	if (cli_call(c, CLI_RT "ContainerStatus", &req.base,
		     &runtime__v1__container_status_response__descriptor, &resp, err) < 0)
		return -err->code;
	*state = resp->status->state;
	*exit_code = resp->status->exit_code;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return 0;
}

int cli_main(int argc, char **argv)
{
	struct cli c = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *addr = NULL;
	int ret;
	int i, j;

	c.socket = getenv("KIYOT_SOCKET") ? getenv("KIYOT_SOCKET") : "/run/kiyot/kiyot.sock";
	c.ns = "default";
	/* global flags may stand anywhere before "--" (after it, a command's own arguments):
	 * --socket PATH, -n NAMESPACE */
	for (i = 1, j = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			while (i < argc)
				argv[j++] = argv[i++];
		else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc)
			c.socket = argv[++i];
		else if ((strcmp(argv[i], "-n") == 0 || strcmp(argv[i], "--namespace") == 0) &&
			 i + 1 < argc)
			c.ns = argv[++i];
		else
			argv[j++] = argv[i];
	}
	argc = j;
	argv[argc] = NULL;
	if (argc < 2)
		return cli_fail("usage: kiyot <command> [options]; see kiyot --help");
	addr = xasprintf("unix://%s", c.socket);
	if (access(c.socket, F_OK) < 0)
		return cli_fail(
			"cannot reach kiyot at %s; start it with `kiyot serve` or pass --socket",
			c.socket);
	if (rpc_channel_new(addr, &c.ch, &err) < 0)
		return cli_fail("%s", err.msg);
	if (strcmp(argv[1], "run") == 0)
		ret = cli_run(&c, argc - 1, argv + 1);
	else if (strcmp(argv[1], "get") == 0)
		ret = cli_get(&c, argc - 1, argv + 1);
	else if (strcmp(argv[1], "logs") == 0)
		ret = cli_logs(&c, argc - 1, argv + 1);
	else if (strcmp(argv[1], "delete") == 0)
		ret = cli_delete(&c, argc - 1, argv + 1);
	else if (strcmp(argv[1], "exec") == 0)
		ret = cli_exec(&c, argc - 1, argv + 1);
	else if (strcmp(argv[1], "attach") == 0)
		ret = cli_attach(&c, argc - 1, argv + 1);
	else if (strcmp(argv[1], "port-forward") == 0)
		ret = cli_port_forward(&c, argc - 1, argv + 1);
	else
		ret = cli_fail("unknown command \"%s\"; see kiyot --help", argv[1]);
	rpc_channel_free(c.ch);
	return ret;
}
