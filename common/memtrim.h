/*
 * memtrim.h: a long-running server gives back the memory a burst of calls made it take.
 *
 * glibc keeps what a process frees. A large buffer (a 12 MiB request) freed once raises the
 * dynamic mmap threshold, so later large buffers come from an arena and stay there when freed;
 * and the free chunks small allocations leave in the arenas (one per worker thread, up to 8 per
 * core) stay resident. Under 60 s of mutated CRI requests kiyot's RSS went from 32 MiB to
 * 446 MiB and stayed there; with large buffers mapped on their own, 149 MiB stayed, of which
 * glibc counted 11 MiB in use.
 *
 *	mem_tune();                      at start-up, before any thread: large buffers are
 *	                                 mapped on their own and unmapped when freed
 *	struct mem_trim t = { 0 };
 *	... every MEM_TRIM_PERIOD_S or so, from a housekeeping loop:
 *	mem_trim_check(&t);              gives the arenas' free pages back
 *
 * Thread safety: mem_tune once, before threads start; a struct mem_trim belongs to one thread
 * (mem_trim_check itself may run while other threads allocate).
 */
#ifndef KIYOT_MEMTRIM_H
#define KIYOT_MEMTRIM_H

#include <stdint.h>

/* Allocations of this size and more are mapped on their own and unmapped when freed. */
#define MEM_MMAP_THRESHOLD (128 * 1024)
/* Memory above the first figure mem_trim_check saw that is worth a trim. */
#define MEM_TRIM_SLACK (8u << 20)
#define MEM_TRIM_PERIOD_S 10

struct mem_trim {
	uint64_t floor;	   /* RSS after the first check's trim (0: none yet) */
	uint64_t released; /* what the trims gave back, in all (RSS before - after) */
	unsigned trims;
};

/* Fixes the mmap threshold at MEM_MMAP_THRESHOLD. */
void mem_tune(void);

/* The process's resident memory in bytes, from /proc/self/statm; 0 when unreadable. */
uint64_t mem_rss(void);

/* When RSS is more than MEM_TRIM_SLACK above t's floor, gives the free memory of every arena
 * back to the kernel (malloc_trim) and logs what it released at debug level. Returns the bytes
 * RSS dropped by (0 when it did not trim). The first call trims (what start-up left free) and
 * takes the RSS after it as the floor. */
uint64_t mem_trim_check(struct mem_trim *t);

#endif
