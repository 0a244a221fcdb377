/*
 * Unit tests for kiyot/state/records: the kubelet's ids and crictl's short ones find the same
 * records as a walk of the whole list would, lists come in the order the CRI answers them,
 * a record someone holds outlives its removal, and every change reaches the store a
 * restarted kiyot loads.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cri/cri.h"
#include "fsutil.h"
#include "state/records.h"
#include "state/store.h"
#include "xalloc.h"

struct fixture {
	char dir[64];
	char *path;
	struct store *st;
	struct records *r;
};

static int setup(void **state)
{
	struct fixture *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_records.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	f->path = xasprintf("%s/kiyot.db", f->dir);
	if (store_open(f->path, &f->st, &err) < 0) {
		print_error("%s\n", err.msg);
		return -1;
	}
	f->r = records_new(f->st);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;

	records_free(f->r);
	store_close(f->st);
	fs_remove_tree(f->dir, &err);
	free(f->path);
	free(f);
	return 0;
}

/* A container record of sandbox_id, with a config the store can write. */
static struct container *container_new(const char *id, const char *sandbox_id)
{
	Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
	struct container *c = xcalloc(1, sizeof(*c));

	md.name = "app";
	cfg.metadata = &md;
	c->id = xstrdup(id);
	c->sandbox_id = xstrdup(sandbox_id);
	c->config = cri_msg_copy(&cfg.base);
	return c;
}

static struct sandbox *sandbox_new(const char *id, const char *cell_id)
{
	Runtime__V1__PodSandboxConfig cfg = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
	Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
	struct sandbox *sb = xcalloc(1, sizeof(*sb));

	md.name = "web";
	cfg.metadata = &md;
	sb->id = xstrdup(id);
	sb->config = cri_msg_copy(&cfg.base);
	sb->cell_id = xstrdup(cell_id);
	return sb;
}

static const char *found(struct fixture *f, const char *id)
{
	struct container *c = records_container(f->r, id);

	return c ? c->id : NULL;
}

/* A whole id finds its record; so does a prefix only it has, short or long; a prefix two ids
 * share, "" and an unknown id find nothing. An id that is also the start of another finds
 * itself. The _exact lookups take whole ids only. */
static void test_records__lookup_by_id_and_unique_prefix(void **state)
{
	struct fixture *f = *state;
	static const char *const ids[] = {
		"3f2a1b9c00112233445566778899aabbccddeeff00112233445566778899aabb",
		"3f2a1b9c0f112233445566778899aabbccddeeff00112233445566778899aabb",
		"7e00000000000000",
		"7e00000000000000ff",
		"ab",
		"abc",
	};

	for (size_t i = 0; i < ARRAY_SIZE(ids); i++)
		records_add_container(f->r, container_new(ids[i], "sb"));
	assert_string_equal(found(f, ids[0]), ids[0]);
	assert_string_equal(found(f, "3f2a1b9c00"), ids[0]);
	assert_string_equal(found(f, "3f2a1b9c0f1"), ids[1]);
	assert_null(found(f, "3f2a1b9c0")); /* both */
	assert_null(found(f, "3f2"));	    /* both, shorter than a hash key */
	assert_string_equal(found(f, "7e00000000000000"), ids[2]);
	assert_string_equal(found(f, "7e00000000000000f"), ids[3]);
	assert_null(found(f, "7e0000"));
	assert_string_equal(found(f, "ab"), "ab");
	assert_string_equal(found(f, "abc"), "abc");
	assert_null(found(f, "a"));
	assert_null(found(f, ""));
	assert_null(found(f, "ffff"));
	assert_null(found(f, "3f2a1b9c00112233445566778899aabbccddeeff00112233445566778899aabbcc"));
	assert_null(records_container_exact(f->r, "3f2a1b9c00"));
	assert_non_null(records_container_exact(f->r, ids[1]));
}

/* What a walk of the whole list answers, as kiyot did before the records had a hash. */
static const char *walk_find(char **ids, const bool *live, size_t n, const char *id)
{
	size_t len = strlen(id);
	const char *hit = NULL;

	if (len == 0)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (live[i] && strcmp(ids[i], id) == 0)
			return ids[i];
	for (size_t i = 0; i < n; i++) {
		if (!live[i] || strncmp(ids[i], id, len) != 0)
			continue;
		if (hit)
			return NULL;
		hit = ids[i];
	}
	return hit;
}

/* Ids of 1 to 20 characters of "01" (so they share prefixes all the time), some removed on
 * the way: every lookup, of an id, of any prefix of one or of something else, answers what a
 * walk of the list answers, past the hash's growth to many buckets. */
static void test_records__lookups_agree_with_a_walk_of_the_list(void **state)
{
	struct fixture *f = *state;
	enum {
		N = 3000
	};
	char **ids = xcalloc(N, sizeof(*ids));
	bool *live = xcalloc(N, sizeof(*live));
	size_t n = 0, checked = 0;
	unsigned seed = 7;

	while (n < N) {
		char id[24];
		size_t len = 1 + (size_t)rand_r(&seed) % 20;

		for (size_t i = 0; i < len; i++)
			id[i] = (char)('0' + rand_r(&seed) % 2);
		id[len] = '\0';
		if (walk_find(ids, live, n, id) && !strcmp(walk_find(ids, live, n, id), id))
			continue; /* ids are unique */
		ids[n] = xstrdup(id);
		live[n] = true;
		records_add_container(f->r, container_new(id, "sb"));
		n++;
		if (n % 5 == 0) { /* remove an earlier one */
			size_t k = (size_t)rand_r(&seed) % n;

			if (live[k]) {
				struct err err = ERR_INIT;

				live[k] = false;
				assert_int_equal(
					records_remove_container(
						f->r, records_container_exact(f->r, ids[k]), &err),
					0);
			}
		}
	}
	for (size_t q = 0; q < 20000; q++) {
		const char *id = ids[(size_t)rand_r(&seed) % N];
		size_t len = 1 + (size_t)rand_r(&seed) % (strlen(id) + 2);
		_cleanup_free_ char *query = xstrndup(id, len);
		const char *want = walk_find(ids, live, n, query);
		const char *got = found(f, query);

		if (want || got) {
			assert_non_null(want);
			assert_non_null(got);
			assert_string_equal(got, want);
			checked++;
		}
	}
	assert_true(checked > 1000); /* a good share of the queries found something */
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
	free(live);
}

/* Lists answer what was added last first, and records loaded at start in the order they
 * were made, after what was listed already: the order kiyot's lists always had. */
static void test_records__list_order(void **state)
{
	struct fixture *f = *state;
	struct records *again;
	struct container **v;
	struct err err = ERR_INIT;
	size_t n;

	for (int i = 0; i < 3; i++) {
		_cleanup_free_ char *id = xasprintf("c%d", i);
		struct container *c = container_new(id, "sb");

		records_add_container(f->r, c);
		assert_int_equal(records_save_container(f->r, c, &err), 0);
	}
	n = records_containers(f->r, NULL, &v);
	assert_int_equal(n, 3);
	assert_string_equal(v[0]->id, "c2");
	assert_string_equal(v[2]->id, "c0");
	assert_null(v[3]);
	containers_put(v, n);

	again = records_new(f->st);
	records_add_container(again, container_new("new", "sb"));
	assert_int_equal(records_load(again, &err), 0);
	n = records_containers(again, NULL, &v);
	assert_int_equal(n, 4);
	assert_string_equal(v[0]->id, "new");
	assert_string_equal(v[1]->id, "c0");
	assert_string_equal(v[3]->id, "c2");
	containers_put(v, n);
	records_free(again);
}

/* A snapshot's records stay readable after they are removed (ASan would see otherwise), and
 * lookups no longer find them at once. */
static void test_records__a_removed_record_lives_while_held(void **state)
{
	struct fixture *f = *state;
	struct container **v, *held;
	struct err err = ERR_INIT;
	size_t n;

	records_add_container(f->r, container_new("c1", "sb1"));
	records_add_container(f->r, container_new("c2", "sb2"));
	records_add_container(f->r, container_new("c3", "sb1"));
	n = records_containers(f->r, "sb1", &v);
	assert_int_equal(n, 2);
	held = container_get(records_container(f->r, "c2"));
	assert_int_equal(records_remove_container(f->r, v[0], &err), 0);
	assert_int_equal(records_remove_container(f->r, held, &err), 0);
	assert_null(records_container(f->r, "c3"));
	assert_null(records_container(f->r, "c2"));
	assert_string_equal(v[0]->id, "c3");
	assert_string_equal(v[0]->sandbox_id, "sb1");
	assert_string_equal(held->id, "c2");
	/* removing what is no longer listed changes nothing */
	assert_int_equal(records_remove_container(f->r, held, &err), 0);
	containers_put(v, n);
	container_put(held);
	n = records_containers(f->r, NULL, &v);
	assert_int_equal(n, 1);
	assert_string_equal(v[0]->id, "c1");
	containers_put(v, n);
}

/* Saved records are what a restarted kiyot loads; removed ones are gone from it. */
static void test_records__changes_reach_the_store(void **state)
{
	struct fixture *f = *state;
	struct records *again;
	struct sandbox *sb = sandbox_new("sb1", "cell1");
	struct image_rec *img = xcalloc(1, sizeof(*img));
	struct err err = ERR_INIT;

	img->id = xstrdup("sha256:1");
	img->repo_tags = xstrdup("a:1");
	img->repo_digests = xstrdup("");
	img->user = xstrdup("");
	records_add_sandbox(f->r, sb);
	records_add_image(f->r, img);
	records_add_container(f->r, container_new("c1", "sb1"));
	records_add_container(f->r, container_new("c2", "sb1"));
	assert_int_equal(records_save_sandbox(f->r, sb, &err), 0);
	assert_int_equal(records_save_image(f->r, img, &err), 0);
	assert_int_equal(records_save_container(f->r, records_container(f->r, "c1"), &err), 0);
	assert_int_equal(records_save_container(f->r, records_container(f->r, "c2"), &err), 0);
	assert_int_equal(records_remove_container(f->r, records_container(f->r, "c1"), &err), 0);

	again = records_new(f->st);
	assert_int_equal(records_load(again, &err), 0);
	assert_non_null(records_sandbox(again, "sb1"));
	assert_ptr_equal(records_sandbox_of_cell(again, "cell1"), records_sandbox(again, "sb1"));
	assert_null(records_sandbox_of_cell(again, "cell2"));
	assert_string_equal(records_image_exact(again, "sha256:1")->repo_tags, "a:1");
	assert_null(records_container(again, "c1"));
	assert_non_null(records_container(again, "c2"));
	assert_int_equal(records_remove_sandbox(again, records_sandbox(again, "sb1"), &err), 0);
	assert_int_equal(records_remove_image(again, records_image_exact(again, "sha256:1"), &err),
			 0);
	records_free(again);

	again = records_new(f->st);
	assert_int_equal(records_load(again, &err), 0);
	assert_null(records_sandbox(again, "sb1"));
	assert_null(records_image_exact(again, "sha256:1"));
	assert_non_null(records_container(again, "c2"));
	records_free(again);
}

/* A cell that no sandbox has any more (its cell id cleared at stop) is nobody's. */
static void test_records__sandbox_of_cell_skips_sandboxes_without_one(void **state)
{
	struct fixture *f = *state;
	struct sandbox *stopped = sandbox_new("sb1", "");
	struct sandbox *running = sandbox_new("sb2", "cell2");
	struct sandbox **v;
	size_t n;

	records_add_sandbox(f->r, stopped);
	records_add_sandbox(f->r, running);
	assert_null(records_sandbox_of_cell(f->r, ""));
	assert_ptr_equal(records_sandbox_of_cell(f->r, "cell2"), running);
	n = records_sandboxes(f->r, &v);
	assert_int_equal(n, 2);
	assert_ptr_equal(v[0], running);
	assert_ptr_equal(v[1], stopped);
	sandboxes_put(v, n);
}

/* The containers of one sandbox, as the whole list has them in its order: what the index by
 * sandbox must give. */
static void check_by_sandbox(struct records *r, const char *sandbox_id)
{
	struct container **all, **mine;
	size_t n_all = records_containers(r, NULL, &all);
	size_t n_mine = records_containers(r, sandbox_id, &mine), k = 0;

	for (size_t i = 0; i < n_all; i++) {
		if (strcmp(all[i]->sandbox_id, sandbox_id) != 0)
			continue;
		if (k >= n_mine || mine[k] != all[i])
			fail_msg("sandbox %s: container %zu of %zu is not %s", sandbox_id, k,
				 n_mine, all[i]->id);
		k++;
	}
	assert_int_equal(k, n_mine);
	containers_put(all, n_all);
	containers_put(mine, n_mine);
}

/* A sandbox's containers and a cell's sandbox come from indexes: 300 containers over 25
 * sandboxes (the tables grow past their first buckets, the index is rebuilt), some removed,
 * then the same from the store: each sandbox gets exactly its containers in list order, and
 * each cell (its sandbox id's first 20 characters, as kiyot names cells) its sandbox. */
static void test_records__indexes_agree_with_the_lists(void **state)
{
	struct fixture *f = *state;
	struct records *again;
	struct err err = ERR_INIT;
	char sbid[25][80], cell[25][21], cid[65];

	for (int s = 0; s < 25; s++) {
		struct sandbox *sb;

		snprintf(sbid[s], sizeof(sbid[s]), "%02d%062d", s, s);
		snprintf(cell[s], sizeof(cell[s]), "%.20s", sbid[s]);
		sb = sandbox_new(sbid[s], cell[s]);
		records_add_sandbox(f->r, sb);
		assert_int_equal(records_save_sandbox(f->r, sb, &err), 0);
	}
	for (int i = 0; i < 300; i++) {
		struct container *c;

		snprintf(cid, sizeof(cid), "c%03d", i);
		c = container_new(cid, sbid[(i * 7) % 25]);
		records_add_container(f->r, c);
		assert_int_equal(records_save_container(f->r, c, &err), 0);
	}
	for (int i = 0; i < 300; i += 3) {
		snprintf(cid, sizeof(cid), "c%03d", i);
		assert_int_equal(records_remove_container(f->r, records_container(f->r, cid), &err),
				 0);
	}
	for (int s = 0; s < 25; s++) {
		check_by_sandbox(f->r, sbid[s]);
		assert_ptr_equal(records_sandbox_of_cell(f->r, cell[s]),
				 records_sandbox_exact(f->r, sbid[s]));
	}
	check_by_sandbox(f->r, "no-such-sandbox");

	again = records_new(f->st);
	assert_int_equal(records_load(again, &err), 0);
	for (int i = 0; i < 20; i++) { /* newer ones, listed first */
		snprintf(cid, sizeof(cid), "n%03d", i);
		records_add_container(again, container_new(cid, sbid[i % 5]));
	}
	for (int s = 0; s < 25; s++) {
		check_by_sandbox(again, sbid[s]);
		assert_ptr_equal(records_sandbox_of_cell(again, cell[s]),
				 records_sandbox_exact(again, sbid[s]));
	}
	records_free(again);
}

struct stopper {
	struct fixture *f;
	struct sandbox *sb;
	pthread_t thread;
	bool done;
	int ret;
	struct err err;
};

static void *stop_thread(void *arg)
{
	struct stopper *s = arg;

	records_lock(s->f->r);
	s->ret = sandbox_begin(s->f->r, s->sb, SANDBOX_STOPPING, &s->err);
	s->done = true;
	records_unlock(s->f->r);
	return NULL;
}

/* Starts a stop of sb in a thread and says whether it is still waiting 100 ms later. */
static bool stop_waits(struct stopper *s, struct fixture *f, struct sandbox *sb)
{
	bool waiting;

	*s = (struct stopper){ .f = f, .sb = sb, .err = ERR_INIT };
	assert_int_equal(pthread_create(&s->thread, NULL, stop_thread, s), 0);
	usleep(100 * 1000);
	records_lock(f->r);
	waiting = !s->done;
	records_unlock(f->r);
	return waiting;
}

/* The records' lock is theirs: taken and released by records_lock/records_unlock, and by the
 * end of the scope of a _cleanup_records_unlock_ holder, however the scope is left. */
static int scoped_lookup(struct records *r, const char *id)
{
	_cleanup_records_unlock_ struct records *held = records_locked(r);

	if (!records_sandbox(held, id))
		return -ENOENT; /* an early return unlocks too */
	return 0;
}

static void *try_lock(void *arg)
{
	struct records *r = arg;

	records_lock(r);
	records_unlock(r);
	return (void *)1;
}

static void test_records__the_lock_is_the_records_and_a_scope_releases_it(void **state)
{
	struct fixture *f = *state;
	struct sandbox *sb = sandbox_new("sb1", "cell1");
	pthread_t t;
	void *got = NULL;

	records_add_sandbox(f->r, sb);
	assert_int_equal(scoped_lookup(f->r, "sb1"), 0);
	assert_int_equal(scoped_lookup(f->r, "none"), -ENOENT);
	/* both scopes left the lock free: another thread takes it */
	assert_int_equal(pthread_create(&t, NULL, try_lock, f->r), 0);
	assert_int_equal(pthread_join(t, &got), 0);
	assert_ptr_equal(got, (void *)1);
}

/* One thing at a time: nothing begins while a sandbox launches ("still starting"), a launch
 * does not begin while it stops, a second stop waits for the first and then stops; a stop
 * waiting for a sandbox that is removed meanwhile finds it gone. */
static void test_records__a_sandbox_does_one_thing_at_a_time(void **state)
{
	struct fixture *f = *state;
	struct sandbox *sb = sandbox_new("sb1", "cell1");
	struct err err = ERR_INIT;
	struct stopper s;

	records_add_sandbox(f->r, sandbox_get(sb)); /* and the test's reference */
	records_lock(f->r);
	assert_int_equal(sandbox_begin(f->r, sb, SANDBOX_LAUNCHING, &err), 0);
	assert_int_equal(sandbox_begin(f->r, sb, SANDBOX_STOPPING, &err), -EAGAIN);
	assert_non_null(strstr(err.msg, "sb1 is still starting"));
	assert_int_equal(sandbox_begin(f->r, sb, SANDBOX_LAUNCHING, &err), -EAGAIN);
	sandbox_end(f->r, sb);
	assert_int_equal(sandbox_begin(f->r, sb, SANDBOX_STOPPING, &err), 0);
	assert_int_equal(sandbox_begin(f->r, sb, SANDBOX_LAUNCHING, &err), -EAGAIN);
	assert_non_null(strstr(err.msg, "sb1 is stopping"));
	records_unlock(f->r);

	assert_true(stop_waits(&s, f, sb));
	records_lock(f->r);
	sandbox_end(f->r, sb);
	records_unlock(f->r);
	pthread_join(s.thread, NULL);
	assert_int_equal(s.ret, 0);
	assert_int_equal(sb->phase, SANDBOX_STOPPING);

	assert_true(stop_waits(&s, f, sb));
	records_lock(f->r);
	assert_int_equal(records_remove_sandbox(f->r, sb, &err), 0);
	records_unlock(f->r);
	pthread_join(s.thread, NULL);
	assert_int_equal(s.ret, -ENOENT);
	assert_false(sandbox_listed(sb));
	sandbox_put(sb);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_records__lookup_by_id_and_unique_prefix),
		T(test_records__lookups_agree_with_a_walk_of_the_list),
		T(test_records__list_order),
		T(test_records__a_removed_record_lives_while_held),
		T(test_records__changes_reach_the_store),
		T(test_records__sandbox_of_cell_skips_sandboxes_without_one),
		T(test_records__indexes_agree_with_the_lists),
		T(test_records__a_sandbox_does_one_thing_at_a_time),
		T(test_records__the_lock_is_the_records_and_a_scope_releases_it),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
