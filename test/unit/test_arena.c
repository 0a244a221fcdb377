/* test_arena.c: common/arena.c, allocations freed at once. */
#include <setjmp.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "arena.h"

static void test_arena__allocations_are_zeroed_aligned_and_distinct(void **state)
{
	struct arena a = ARENA_INIT;
	unsigned char *p[64];

	(void)state;
	for (size_t i = 0; i < 64; i++) {
		p[i] = arena_alloc(&a, i * 7 + 1);
		assert_non_null(p[i]);
		assert_int_equal((uintptr_t)p[i] % alignof(max_align_t), 0);
		for (size_t k = 0; k < i * 7 + 1; k++)
			assert_int_equal(p[i][k], 0);
		memset(p[i], (int)i, i * 7 + 1); /* each block its own: nothing overlaps */
	}
	for (size_t i = 0; i < 64; i++)
		for (size_t k = 0; k < i * 7 + 1; k++)
			assert_int_equal(p[i][k], i);
	assert_non_null(arena_alloc(&a, 0));
	arena_release(&a);
	assert_null(a.head);
	arena_release(&a); /* an empty arena releases nothing */
}

static void test_arena__strings_are_copies_and_null_is_empty(void **state)
{
	struct arena a = ARENA_INIT;
	char word[] = "cell";
	char *s, *n, *e;

	(void)state;
	s = arena_strdup(&a, word);
	word[0] = 'X';
	assert_string_equal(s, "cell");
	e = arena_strdup(&a, NULL);
	assert_string_equal(e, "");
	n = arena_strndup(&a, "agent:1234", 5);
	assert_string_equal(n, "agent");
	assert_string_equal(arena_strndup(&a, NULL, 0), "");
	arena_release(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arena__allocations_are_zeroed_aligned_and_distinct),
		cmocka_unit_test(test_arena__strings_are_copies_and_null_is_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
