/*
 * aws_retry.h: how the AWS clients (ec2.c, pricing.c) wait between attempts: full-jitter
 * exponential back-off, and a sleep a cancellation (cancel.h) ends early.
 */
#ifndef KIYOT_AWS_RETRY_H
#define KIYOT_AWS_RETRY_H

#include <pthread.h>
#include <stdint.h>

struct aws_backoff {
	int64_t base_ns, cap_ns;
	pthread_mutex_t lock; /* guards rng: calls of any thread back off */
	uint64_t rng;
};

/* base_ns and cap_ns as given (both > 0), a seed of this process, this moment and b. */
void aws_backoff_init(struct aws_backoff *b, int64_t base_ns, int64_t cap_ns);
void aws_backoff_destroy(struct aws_backoff *b);
/* A random duration in [0, bound] (0 when bound <= 0). */
int64_t aws_backoff_random(struct aws_backoff *b, int64_t bound);
/* After the attempt-th failure: random in [0, min(cap, base * 2^(attempt-1))]. */
int64_t aws_backoff_ns(struct aws_backoff *b, int attempt);
/* Sleeps ns in slices of at most 100 ms, resuming after signals; a cancellation ends it early.
 * ctx is unused (the clients' sleep hook, which tests replace, has this shape). */
void aws_sleep(void *ctx, int64_t ns);

#endif
