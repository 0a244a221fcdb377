/*
 * pidlock.h: a lock file that names its holder. One process holds an exclusive lock on the
 * file for as long as it lives and writes its pid into it; a second one is refused, told the
 * holder's pid; anyone may ask whether a live process holds it without taking it from them.
 *
 * The lock is an open file description lock (fcntl F_OFD_SETLK): the kernel drops it when the
 * holder dies, however it dies, and never hands it to a child that executes another program
 * (the descriptor is O_CLOEXEC). Two descriptors of one process conflict like two processes.
 *
 * Thread safety: the functions hold no state; call them from any thread.
 */
#ifndef KIYOT_PIDLOCK_H
#define KIYOT_PIDLOCK_H

#include "err.h"

/* The lock in a cell-agent's state directory: held by the cell's one agent for its life, and
 * checked by whoever starts agents (kiyot's local provider) before starting another. */
#define PIDLOCK_AGENT_FILE "agent.lock"

/* Takes the lock at path (the file is created 0600 when missing) and writes the caller's pid
 * into it. Returns the descriptor holding it, which the caller keeps open for as long as it
 * holds the lock. -EBUSY when another process (or descriptor) holds it; the message names its
 * pid ("... is held by pid 4242"), or says it is not known yet. */
int pidlock_take(const char *path, struct err *err);

/* Whether a live process holds the lock at path, without disturbing it: 1 with *pid its pid
 * (0 when the holder has not written it yet), 0 when nobody holds it or the file does not
 * exist, negative when the file cannot be read. */
int pidlock_holder(const char *path, long *pid, struct err *err);

#endif
