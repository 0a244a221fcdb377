/* test_strvec.c: common/strvec.c, vectors of owned strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "strvec.h"
#include "xalloc.h"

static void test_strvec__an_empty_vector_is_a_terminated_array(void **state)
{
	struct strvec sv = STRVEC_INIT;

	(void)state;
	assert_non_null(sv.v);
	assert_null(sv.v[0]);
	assert_int_equal(sv.nr, 0);
	strvec_pop(&sv); /* nothing to pop */
	assert_null(sv.v[0]);
	strvec_clear(&sv);
	assert_null(strvec_empty[0]);
}

static void test_strvec__pushes_copy_and_keep_the_null(void **state)
{
	struct strvec sv = STRVEC_INIT;
	char word[] = "crun";
	char *more[] = { "a", "b", NULL };
	char *counted[] = { "x", "y", "z" };

	(void)state;
	assert_string_equal(strvec_push(&sv, word), "crun");
	word[0] = 'X'; /* the vector holds its own copy */
	assert_string_equal(strvec_pushf(&sv, "--log=%s/%d", "/tmp", 7), "--log=/tmp/7");
	strvec_pushv(&sv, more);
	strvec_pushv(&sv, NULL);
	strvec_pushn(&sv, counted, 2);
	assert_int_equal(sv.nr, 6);
	assert_string_equal(sv.v[0], "crun");
	assert_string_equal(sv.v[1], "--log=/tmp/7");
	assert_string_equal(sv.v[2], "a");
	assert_string_equal(sv.v[3], "b");
	assert_string_equal(sv.v[4], "x");
	assert_string_equal(sv.v[5], "y");
	assert_null(sv.v[6]);
	assert_int_equal(strv_len(sv.v), 6);
	strvec_pop(&sv);
	assert_int_equal(sv.nr, 5);
	assert_null(sv.v[5]);
	strvec_clear(&sv);
	assert_int_equal(sv.nr, 0);
	assert_null(sv.v[0]);
}

static void test_strvec__grows_past_many_strings(void **state)
{
	struct strvec sv = STRVEC_INIT;

	(void)state;
	for (int i = 0; i < 1000; i++)
		strvec_pushf(&sv, "%d", i);
	assert_int_equal(sv.nr, 1000);
	assert_string_equal(sv.v[0], "0");
	assert_string_equal(sv.v[999], "999");
	assert_null(sv.v[1000]);
	strvec_clear(&sv);
}

static void test_strvec__detach_hands_out_the_array_and_empties(void **state)
{
	struct strvec sv = STRVEC_INIT;
	char **v, **none;

	(void)state;
	strvec_push(&sv, "one");
	strvec_push(&sv, "two");
	v = strvec_detach(&sv);
	assert_int_equal(sv.nr, 0);
	assert_null(sv.v[0]);
	assert_int_equal(strv_len(v), 2);
	assert_string_equal(v[1], "two");
	/* an empty vector detaches into an array of its own, never the shared one */
	none = strvec_detach(&sv);
	assert_non_null(none);
	assert_ptr_not_equal(none, strvec_empty);
	assert_null(none[0]);
	strv_free(none);
	/* a detached vector can be attached again and grow */
	strvec_attach(&sv, v);
	assert_int_equal(sv.nr, 2);
	strvec_push(&sv, "three");
	assert_string_equal(sv.v[2], "three");
	assert_null(sv.v[3]);
	strvec_attach(&sv, NULL); /* clears */
	assert_int_equal(sv.nr, 0);
	assert_null(sv.v[0]);
}

static void test_strvec__strv_reads_null_as_empty(void **state)
{
	char *v[] = { "a", "b", NULL };
	char **copy, **empty;

	(void)state;
	assert_int_equal(strv_len(NULL), 0);
	assert_false(strv_has(NULL, "a"));
	strv_free(NULL);
	copy = strv_dup(v);
	assert_ptr_not_equal(copy[0], v[0]);
	assert_string_equal(copy[0], "a");
	assert_string_equal(copy[1], "b");
	assert_null(copy[2]);
	assert_true(strv_has(copy, "b"));
	assert_false(strv_has(copy, "c"));
	strv_free(copy);
	empty = strv_dup(NULL);
	assert_non_null(empty);
	assert_null(empty[0]);
	strv_free(empty);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strvec__an_empty_vector_is_a_terminated_array),
		cmocka_unit_test(test_strvec__pushes_copy_and_keep_the_null),
		cmocka_unit_test(test_strvec__grows_past_many_strings),
		cmocka_unit_test(test_strvec__detach_hands_out_the_array_and_empties),
		cmocka_unit_test(test_strvec__strv_reads_null_as_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
