/*
 * console.h: the socket a runtime hands a container's terminal over (its --console-socket),
 * for the supervisor's execs and the shim's units. Apart from the supervisor, so that the shim
 * (cell-shim) links without it.
 */
#ifndef AGENT_CONSOLE_H
#define AGENT_CONSOLE_H

#include "err.h"

/* A unix socket listening as <dir>/<name> (bound through dirfd, whatever dir's length), for a
 * runtime's --console-socket; the fd, or -errno. */
int console_listen(int dirfd, const char *name, struct err *err);

#endif
