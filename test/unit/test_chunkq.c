/* test_chunkq.c: kiyot/stream/chunkq.c, a client's bytes on their way to an agent or a pod. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stream/chunkq.h"

/* Chunks join up to the bound and never past it; one over the bound goes alone. */
static void test_chunkq__take_joins_chunks_up_to_the_bound(void **state)
{
	struct chunkq q = { 0 };
	struct chunk *k;

	(void)state;
	chunkq_put(&q, "abc", 3, false);
	chunkq_put(&q, "de", 2, false);
	chunkq_put(&q, "fgh", 3, false);
	chunkq_put(&q, "0123456789", 10, false);
	assert_int_equal(q.bytes, 18);
	k = chunkq_take(&q, 6);
	assert_int_equal(k->len, 5);
	assert_memory_equal(k->data, "abcde", 5);
	assert_false(k->end);
	free(k);
	assert_int_equal(q.bytes, 13);
	k = chunkq_take(&q, 6); /* "fgh" and 10 more would pass 6 */
	assert_int_equal(k->len, 3);
	free(k);
	k = chunkq_take(&q, 6); /* over the bound alone: whole */
	assert_int_equal(k->len, 10);
	assert_memory_equal(k->data, "0123456789", 10);
	free(k);
	assert_null(chunkq_take(&q, 6));
	assert_int_equal(q.bytes, 0);
	assert_null(chunkq_head(&q));
}

/* The end goes with the bytes before it and nothing after joins it; an end alone is a chunk
 * of no bytes. */
static void test_chunkq__the_end_closes_a_message(void **state)
{
	struct chunkq q = { 0 };
	struct chunk *k;

	(void)state;
	chunkq_put(&q, "ab", 2, false);
	chunkq_put(&q, "cd", 2, true);
	chunkq_put(&q, "ef", 2, false);
	chunkq_put(&q, NULL, 0, true);
	k = chunkq_take(&q, 100);
	assert_int_equal(k->len, 4);
	assert_memory_equal(k->data, "abcd", 4);
	assert_true(k->end);
	free(k);
	k = chunkq_take(&q, 100);
	assert_int_equal(k->len, 2);
	assert_true(k->end);
	free(k);
	assert_int_equal(q.bytes, 0);
}

/* A socket takes part of a chunk: the rest stays, counted; the end shows when its chunk
 * leaves; what is left after a partial write joins from where it stopped. */
static void test_chunkq__advance_takes_part_of_a_chunk(void **state)
{
	struct chunkq q = { 0 };
	struct chunk *k;

	(void)state;
	chunkq_put(&q, "hello", 5, false);
	chunkq_put(&q, "!", 1, true);
	assert_false(chunkq_advance(&q, 2));
	assert_int_equal(q.bytes, 4);
	k = chunkq_head(&q);
	assert_memory_equal(k->data + k->off, "llo", 3);
	k = chunkq_take(&q, 100);
	assert_int_equal(k->len, 4);
	assert_memory_equal(k->data, "llo!", 4);
	assert_true(k->end);
	free(k);

	chunkq_put(&q, "x", 1, false);
	chunkq_put(&q, NULL, 0, true);
	assert_false(chunkq_advance(&q, 1));
	assert_true(chunkq_advance(&q, 0));
	assert_null(chunkq_head(&q));
	chunkq_put(&q, "left", 4, false);
	chunkq_drop(&q);
	assert_int_equal(q.bytes, 0);
	assert_null(chunkq_take(&q, 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chunkq__take_joins_chunks_up_to_the_bound),
		cmocka_unit_test(test_chunkq__the_end_closes_a_message),
		cmocka_unit_test(test_chunkq__advance_takes_part_of_a_chunk),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
