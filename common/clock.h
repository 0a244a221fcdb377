/*
 * clock.h: time in nanoseconds and its RFC 3339 forms.
 */
#ifndef KIYOT_CLOCK_H
#define KIYOT_CLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

int64_t clock_now_ns(void);  /* wall clock, ns since the epoch */
int64_t clock_mono_ns(void); /* monotonic */
/* The time ms milliseconds from now on clock (CLOCK_MONOTONIC, CLOCK_REALTIME), as the
 * deadline pthread_cond_timedwait and pthread_timedjoin_np take. */
struct timespec clock_deadline(clockid_t clock, int64_t ms);
/* "2026-11-22T04:30:00.123456789Z" (always 9 fraction digits); out needs 40 bytes. */
void clock_rfc3339nano(int64_t ns, char *out, size_t size);

#endif
