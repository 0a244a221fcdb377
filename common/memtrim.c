#include "memtrim.h"

#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

void mem_tune(void)
{
	/* setting the threshold also stops glibc from raising it (and the trim threshold) after
	 * each large free */
	mallopt(M_MMAP_THRESHOLD, MEM_MMAP_THRESHOLD);
}

uint64_t mem_rss(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	unsigned long long size, resident;
	int n;

	if (!f)
		return 0;
	n = fscanf(f, "%llu %llu", &size, &resident);
	fclose(f);
	return n == 2 ? (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

uint64_t mem_trim_check(struct mem_trim *t)
{
	uint64_t before = mem_rss(), after;
	int64_t t0;

	/* the first check gives back what start-up left free (kiyot's catalog is parsed into a
	 * 4 MB tree and let go) before it takes the floor */
	if (t->floor && (!before || before <= t->floor + MEM_TRIM_SLACK))
		return 0;
	t0 = clock_mono_ns();
	malloc_trim(0);
	after = mem_rss();
	t->trims++;
	if (!t->floor)
		t->floor = after ? after : 1;
	if (after >= before)
		return 0;
	t->released += before - after;
	log_debug("memory: gave back %" PRIu64 " KiB of %" PRIu64 " KiB resident in %.1f ms",
		  (before - after) >> 10, before >> 10, (double)(clock_mono_ns() - t0) / 1e6);
	return before - after;
}
