/*
 * proc.h: what /proc says about a process. A pid can be reused, so callers that remember a
 * process keep its start time too and compare it.
 */
#ifndef KIYOT_PROC_H
#define KIYOT_PROC_H

/* State letter (field 3) and start time in clock ticks since boot (field 22) of pid;
 * -1 when the process does not exist. */
int proc_stat(long pid, char *state, unsigned long long *start);

/* 1 when pid exists, is not a zombie and (start non-zero) started at start; else 0. */
int proc_alive(long pid, unsigned long long start);

#endif
