/*
 * aws_retry.c: back-off and sleeps of the AWS clients (aws_retry.h).
 */
#include "aws_retry.h"

#include <errno.h>
#include <time.h>

#include "cancel.h"
#include "clock.h"

#define WAIT_SLICE_NS 100000000LL /* a sleep wakes this often to see a cancellation */

void aws_backoff_init(struct aws_backoff *b, int64_t base_ns, int64_t cap_ns)
{
	b->base_ns = base_ns;
	b->cap_ns = cap_ns;
	pthread_mutex_init(&b->lock, NULL);
	b->rng = (uint64_t)clock_mono_ns() ^ ((uint64_t)(uintptr_t)b << 16) ^ 0x9e3779b97f4a7c15ull;
}

void aws_backoff_destroy(struct aws_backoff *b)
{
	pthread_mutex_destroy(&b->lock);
}

int64_t aws_backoff_random(struct aws_backoff *b, int64_t bound)
{
	uint64_t x;

	pthread_mutex_lock(&b->lock);
	x = b->rng; /* xorshift64 */
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	b->rng = x;
	pthread_mutex_unlock(&b->lock);
	return bound > 0 ? (int64_t)(x % ((uint64_t)bound + 1)) : 0;
}

int64_t aws_backoff_ns(struct aws_backoff *b, int attempt)
{
	int64_t ceiling = b->base_ns;

	for (int i = 1; i < attempt && ceiling < b->cap_ns; i++)
		ceiling *= 2;
	if (ceiling > b->cap_ns)
		ceiling = b->cap_ns;
	return aws_backoff_random(b, ceiling);
}

void aws_sleep(void *ctx, int64_t ns)
{
	(void)ctx;
	while (ns > 0 && !cancel_requested()) {
		int64_t step = ns < WAIT_SLICE_NS ? ns : WAIT_SLICE_NS;
		struct timespec ts = { step / 1000000000, step % 1000000000 };

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		ns -= step;
	}
}
