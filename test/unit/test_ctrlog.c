/*
 * Unit tests for kiyot/state/ctrlog: a container's log file gets each byte of its unit's log
 * once, where it stands reaches the store in batches, and a writer made from an older mark
 * (a kiyot killed before its last batch) counts what the file got since, so the cell's Watch
 * resumes where the file ends.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cri/cri.h"
#include "fsutil.h"
#include "kiyot_fixture.h"
#include "state/ctrlog.h"
#include "state/store.h"
#include "xalloc.h"

#define ONE "2026-01-01T00:00:00Z stdout F one\n"
#define TWO "2026-01-01T00:00:01Z stdout F two\n"
#define THREE "2026-01-01T00:00:02Z stdout F three\n"

struct fixture {
	char dir[64];
	char *path; /* the log file, in a directory not made yet */
	struct store *st;
	struct ctrlogs *l;
};

/* A store with the row of container "c1", whose log goes to dir/pod/c1.log. */
static int setup(void **state)
{
	Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	struct fixture *f = xcalloc(1, sizeof(*f));
	struct container c = { .id = "c1", .sandbox_id = "sb1", .config = &cfg };
	_cleanup_free_ char *db = NULL;
	struct err err = ERR_INIT;

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_ctrlog.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	db = xasprintf("%s/kiyot.db", f->dir);
	f->path = xasprintf("%s/pod/c1.log", f->dir);
	if (store_open(db, &f->st, &err) < 0 || store_put_container(f->st, &c, &err) < 0) {
		print_error("%s\n", err.msg);
		return -1;
	}
	f->l = ctrlogs_new(f->st);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;

	ctrlogs_free(f->l);
	store_close(f->st);
	fs_remove_tree(f->dir, &err);
	free(f->path);
	free(f);
	return 0;
}

/* The mark of c1 in the store. */
static struct log_mark stored(struct fixture *f)
{
	struct store_contents got;
	struct err err = ERR_INIT;
	struct log_mark m;

	assert_int_equal(store_load(f->st, &got, &err), 0);
	assert_int_equal(got.n_containers, 1);
	m = got.containers[0]->log_mark;
	store_contents_release(&got);
	return m;
}

/* Whether this process has the file at path open. */
static bool held_open(const char *path)
{
	char fdpath[64], target[PATH_MAX];

	for (int fd = 0; fd < 1024; fd++) {
		ssize_t n;

		snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
		n = readlink(fdpath, target, sizeof(target) - 1);
		if (n < 0)
			continue;
		target[n] = '\0';
		if (strcmp(target, path) == 0)
			return true;
	}
	return false;
}

static void write_str(struct ctrlog *w, uint64_t offset, const char *s)
{
	ctrlog_write(w, offset, (const uint8_t *)s, strlen(s));
}

/* Chunks land in the file (its directory made) once each: one sent again, whole or in part,
 * adds only what the file lacks. */
static void test_ctrlog__each_byte_reaches_the_file_once(void **state)
{
	struct fixture *f = *state;
	struct ctrlog *w = ctrlog_new(f->l, "c1", f->path, &(struct log_mark){ 0 });

	write_str(w, 0, ONE);
	write_str(w, 0, ONE);
	write_str(w, 0, ONE TWO);
	write_str(w, strlen(ONE) + 4, TWO + 4);
	assert_true(kfix_file_is(f->path, ONE TWO));
	assert_int_equal(ctrlog_offset(w), strlen(ONE TWO));
	ctrlog_close(w);
	ctrlog_put(w);
}

/* Where the log stands reaches the store within the commit interval, without a call; a new
 * file's place at once. */
static void test_ctrlog__marks_reach_the_store_in_batches(void **state)
{
	struct fixture *f = *state;
	struct ctrlog *w = ctrlog_new(f->l, "c1", f->path, &(struct log_mark){ 0 });
	struct stat st;
	struct log_mark m;
	bool committed = false;

	assert_int_equal(ctrlog_open(w, &(struct err)ERR_INIT), 0);
	assert_int_equal(stat(f->path, &st), 0);
	m = stored(f);
	assert_int_equal(m.ino, st.st_ino); /* the file is known before any byte */
	assert_int_equal(m.dev, st.st_dev);
	assert_int_equal(m.offset, 0);
	write_str(w, 0, ONE);
	for (int i = 0; i < 300 && !committed; i++) {
		usleep(10000);
		m = stored(f);
		committed = m.offset == strlen(ONE);
	}
	assert_true(committed);
	assert_int_equal(m.pos, strlen(ONE));
	ctrlog_close(w);
	ctrlog_put(w);
}

/*
 * A kiyot killed before its last batch of marks: the store says one line was written, the
 * file holds two. The writer made from that mark counts the second as written: the Watch
 * asks from after it, and the agent sending both again adds nothing; the next line follows.
 */
static void test_ctrlog__a_lost_batch_is_found_in_the_file(void **state)
{
	struct fixture *f = *state;
	struct ctrlog *w = ctrlog_new(f->l, "c1", f->path, &(struct log_mark){ 0 });
	struct log_mark m;

	write_str(w, 0, ONE);
	ctrlogs_commit(f->l);
	m = stored(f);
	assert_int_equal(m.offset, strlen(ONE));
	write_str(w, strlen(ONE), TWO);
	ctrlog_close(w); /* killed: its last mark never goes */
	ctrlog_put(w);

	w = ctrlog_new(f->l, "c1", f->path, &m);
	assert_int_equal(ctrlog_offset(w), strlen(ONE TWO));
	write_str(w, 0, ONE TWO);
	write_str(w, strlen(ONE TWO), THREE);
	assert_true(kfix_file_is(f->path, ONE TWO THREE));
	ctrlogs_commit(f->l);
	assert_int_equal(stored(f).offset, strlen(ONE TWO THREE));
	ctrlog_close(w);
	ctrlog_put(w);
}

/* A mark whose file is gone or was replaced counts nothing from the file at its path: its
 * bytes are not the unit's log past the mark. */
static void test_ctrlog__another_file_is_not_counted(void **state)
{
	struct fixture *f = *state;
	struct ctrlog *w = ctrlog_new(f->l, "c1", f->path, &(struct log_mark){ 0 });
	_cleanup_free_ char *moved = xasprintf("%s.1", f->path);
	struct err err = ERR_INIT;
	struct log_mark m;

	write_str(w, 0, ONE);
	ctrlogs_commit(f->l);
	m = stored(f);
	ctrlog_close(w);
	ctrlog_put(w);
	assert_int_equal(rename(f->path, moved), 0);
	assert_int_equal(fs_write_file(f->path, ONE TWO THREE, strlen(ONE TWO THREE), 0640, &err),
			 0);
	w = ctrlog_new(f->l, "c1", f->path, &m);
	assert_int_equal(ctrlog_offset(w), strlen(ONE));
	ctrlog_close(w);
	ctrlog_put(w);
}

/* ReopenContainerLog after a rename: the next bytes go to a new file at the path, known to
 * the store at once, and none of them to the renamed one. */
static void test_ctrlog__reopen_moves_to_a_new_file(void **state)
{
	struct fixture *f = *state;
	struct ctrlog *w = ctrlog_new(f->l, "c1", f->path, &(struct log_mark){ 0 });
	_cleanup_free_ char *rotated = xasprintf("%s.1", f->path);
	struct err err = ERR_INIT;
	struct stat st;

	write_str(w, 0, ONE);
	assert_int_equal(rename(f->path, rotated), 0);
	assert_int_equal(ctrlog_reopen(w, &err), 0);
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(stored(f).ino, st.st_ino);
	assert_int_equal(stored(f).pos, 0);
	assert_int_equal(stored(f).offset, strlen(ONE));
	write_str(w, strlen(ONE), TWO);
	assert_true(kfix_file_is(rotated, ONE));
	assert_true(kfix_file_is(f->path, TWO));
	ctrlog_close(w);
	ctrlog_put(w);
}

/* A container that exited has its file closed once its mark is committed (a late chunk
 * opens it again); a removed one's file is closed at once, and nothing makes it again. */
static void test_ctrlog__files_are_closed_at_exit_and_removal(void **state)
{
	struct fixture *f = *state;
	struct ctrlog *w = ctrlog_new(f->l, "c1", f->path, &(struct log_mark){ 0 });
	struct err err = ERR_INIT;

	write_str(w, 0, ONE);
	assert_true(held_open(f->path));
	ctrlog_idle(w);
	ctrlogs_commit(f->l);
	assert_false(held_open(f->path));
	assert_int_equal(stored(f).offset, strlen(ONE));
	write_str(w, strlen(ONE), TWO);
	assert_true(held_open(f->path));
	assert_true(kfix_file_is(f->path, ONE TWO));

	ctrlog_close(w);
	assert_false(held_open(f->path));
	assert_int_equal(unlink(f->path), 0);
	write_str(w, strlen(ONE TWO), THREE);
	assert_int_equal(ctrlog_reopen(w, &err), -ENOENT);
	assert_int_equal(access(f->path, F_OK), -1);
	assert_int_equal(ctrlog_offset(w), strlen(ONE TWO));
	ctrlog_put(w);
}

/* A container without a log file still knows how far its unit's log went. */
static void test_ctrlog__without_a_file_the_offset_is_kept(void **state)
{
	struct fixture *f = *state;
	struct ctrlog *w = ctrlog_new(f->l, "c1", NULL, &(struct log_mark){ .offset = 10 });

	assert_int_equal(ctrlog_open(w, &(struct err)ERR_INIT), 0);
	write_str(w, 0, ONE);
	assert_int_equal(ctrlog_offset(w), strlen(ONE));
	ctrlogs_commit(f->l);
	assert_int_equal(stored(f).offset, strlen(ONE));
	assert_int_equal(stored(f).ino, 0);
	ctrlog_close(w);
	ctrlog_put(w);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_ctrlog__each_byte_reaches_the_file_once),
		T(test_ctrlog__marks_reach_the_store_in_batches),
		T(test_ctrlog__a_lost_batch_is_found_in_the_file),
		T(test_ctrlog__another_file_is_not_counted),
		T(test_ctrlog__reopen_moves_to_a_new_file),
		T(test_ctrlog__files_are_closed_at_exit_and_removal),
		T(test_ctrlog__without_a_file_the_offset_is_kept),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
