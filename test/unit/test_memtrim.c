/*
 * test_memtrim: a process that freed a lot of memory gives it back at the next check (the
 * first one included), and a check with nothing to give back does nothing. The figures are glibc's: under a sanitizer's
 * allocator the tests are skipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "memtrim.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif

#define CHUNK 4096
#define CHUNKS (16384) /* 64 MiB in small blocks, below the mmap threshold */

/* Room for CHUNKS blocks, with the allocator tuned as kiyot's. */
static char **blocks_new(void)
{
	char **blocks = calloc(CHUNKS, sizeof(*blocks));

	assert_non_null(blocks);
	mem_tune();
	return blocks;
}

/* CHUNKS blocks of CHUNK bytes, touched. */
static void fill(char **blocks)
{
	for (int i = 0; i < CHUNKS; i++) {
		blocks[i] = malloc(CHUNK);
		assert_non_null(blocks[i]);
		memset(blocks[i], 1, CHUNK);
	}
}

static void test_memtrim__freed_small_blocks_go_back_at_the_next_check(void **state)
{
	struct mem_trim t = { 0 };
	char **blocks;
	uint64_t peak, held, released;

	(void)state;
#ifdef SANITIZED
	skip();
#endif
	blocks = blocks_new();
	mem_trim_check(&t); /* the floor */
	fill(blocks);
	peak = mem_rss();
	/* all but the last block: the one at the top keeps glibc from trimming on free */
	for (int i = 0; i < CHUNKS - 1; i++)
		free(blocks[i]);
	held = mem_rss();
	assert_true(held + (8u << 20) > peak); /* free, still resident */
	released = mem_trim_check(&t);
	assert_true(released > 48u << 20);
	assert_true(mem_rss() + (48u << 20) < held);
	assert_int_equal(t.trims, 2);
	free(blocks[CHUNKS - 1]);
	free(blocks);
}

/* What start-up allocated and let go (kiyot's catalog tree) goes back at the first check,
 * which takes the floor after it. */
static void test_memtrim__the_first_check_gives_back_what_start_up_freed(void **state)
{
	struct mem_trim t = { 0 };
	char **blocks;
	uint64_t held;

	(void)state;
#ifdef SANITIZED
	skip();
#endif
	blocks = blocks_new();
	fill(blocks);
	for (int i = 0; i < CHUNKS - 1; i++)
		free(blocks[i]);
	held = mem_rss();
	assert_true(mem_trim_check(&t) > 48u << 20);
	assert_int_equal(t.trims, 1);
	assert_true(t.floor + (48u << 20) < held);
	assert_true(t.floor <= mem_rss() + (1u << 20));
	free(blocks[CHUNKS - 1]);
	free(blocks);
}

static void test_memtrim__a_check_below_the_slack_does_not_trim(void **state)
{
	struct mem_trim t = { 0 };

	(void)state;
	assert_true(mem_rss() > 0);
	mem_trim_check(&t);
	assert_true(t.floor > 0);
	assert_int_equal(t.trims, 1);
	assert_int_equal(mem_trim_check(&t), 0);
	assert_int_equal(t.trims, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memtrim__freed_small_blocks_go_back_at_the_next_check),
		cmocka_unit_test(test_memtrim__a_check_below_the_slack_does_not_trim),
		cmocka_unit_test(test_memtrim__the_first_check_gives_back_what_start_up_freed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
