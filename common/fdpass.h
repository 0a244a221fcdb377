/*
 * fdpass.h: passing a file descriptor over a unix socket (SCM_RIGHTS), or an errno in its
 * place, as a helper process and its parent, or a runtime and its console socket, do.
 *
 * Thread safety: reentrant; fdpass_send is async-signal-safe (usable in a forked child).
 */
#ifndef KIYOT_FDPASS_H
#define KIYOT_FDPASS_H

/* Sends fd with a one-byte message; 0 or -1 (errno set). */
int fdpass_send(int sock, int fd);
/* Sends code (a positive errno) instead of an fd; 0 or -1. */
int fdpass_send_errno(int sock, int code);
/* Receives one fd (close-on-exec); -errno for an errno sent instead, -EIO for anything else. */
int fdpass_recv(int sock);

#endif
