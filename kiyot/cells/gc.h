/*
 * gc.h: what tests reach of the garbage collector besides gc_start and gc_stop
 * (daemon/kiyot.h): the clock it judges grace periods by, and a pass asked for now instead of
 * at the end of the interval, so a test of its verdicts waits on neither.
 */
#ifndef KIYOT_GC_H
#define KIYOT_GC_H

#include <stdint.h>

struct gc;

/* The collector's clocks: mono_ns for how long a cell has been without an owner, wall_ns
 * against a sandbox's created_ns (an interrupted launch's grace). */
struct gc_clock {
	int64_t (*mono_ns)(void *ctx);
	int64_t (*wall_ns)(void *ctx);
	void *ctx;
};

/* The clock of the collectors started from now on; NULL: the real clocks. The clock must
 * outlive them. Call it while no gc_start runs. */
void gc_set_clock(const struct gc_clock *clock);

/* Asks for a pass now; with timeout_ms > 0, waits until a pass that began after the call
 * ended. Returns 0, or -ETIMEDOUT when none ended in time or no collector thread runs. The
 * interval to the next pass starts again after it. */
int gc_pass_now(struct gc *g, int timeout_ms);

/* How many passes have ended since gc_start (the first is the start-up pass). */
unsigned long gc_passes_ended(struct gc *g);

#endif
