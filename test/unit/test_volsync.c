/*
 * Unit tests for kiyot/cells/volsync.c: shipped volumes of remote cells kept equal to the
 * node's copies. A whole kiyot with the fake provider (remote files, like EC2) and the fake
 * agent (kiyot_fixture.h); volumes are directories under the test's state directory laid out
 * as the kubelet lays out a pod's configMap, and the fake agent says what WriteVolume gave it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cells/cells.h"
#include "cells/shipvol.h"
#include "cells/volsync.h"
#include "fsutil.h"
#include "kiyot_fixture.h"
#include "xalloc.h"

#define VOL "sv-0123456789abcdef"

struct fix {
	struct kfix *k;
	char *sandbox, *cell;
	char *dir; /* the node's copy */
};

static void write_file(const char *dir, const char *name, const char *text)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
	struct err err = ERR_INIT;

	if (fs_write_file(path, text, strlen(text), 0644, &err) < 0)
		fail_msg("%s", err.msg);
}

static int setup(void **state)
{
	struct fix *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;
	void *k;

	if (kfix_setup(&k) < 0)
		return -1;
	f->k = k;
	if (kfix_run_pod(f->k, "web", "uid-web", 0, &f->sandbox, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	f->cell = kfix_cell_of(f->k, f->sandbox);
	f->dir = xasprintf("%s/pods/uid-web/volumes/kubernetes.io~configmap/cfg", f->k->dir);
	if (!f->cell || !f->cell[0] || fs_mkdir_p(f->dir, 0755, &err) < 0)
		return -1;
	write_file(f->dir, "a.conf", "a=1\n");
	write_file(f->dir, "b.conf", "b=2\n");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	void *k = f->k;

	kfix_teardown(&k);
	free(f->sandbox);
	free(f->cell);
	free(f->dir);
	free(f);
	return 0;
}

static unsigned writes(struct fix *f)
{
	return fake_agent_calls(f->k->fa, FAKE_AGENT_WRITE_VOLUME);
}

static int entries(struct fix *f)
{
	return fake_agent_volume_entries(f->k->fa, f->cell, VOL);
}

/* The entries the node's copy has now, as a ship would send them. */
static int node_entries(struct fix *f)
{
	struct shipvol_snapshot s;
	struct err err = ERR_INIT;
	int n;

	if (shipvol_snapshot(f->dir, VOL, &s, &err) < 0)
		fail_msg("%s", err.msg);
	n = (int)s.req.n_entries;
	shipvol_snapshot_release(&s);
	return n;
}

static int ship(struct fix *f, const char *cell, const char *path, struct err *err)
{
	*err = (struct err)ERR_INIT;
	return volsync_ship(f->k->k.volsync, cell, VOL, path, err);
}

/* A ship sends the node's copy; the same content again is not sent twice. */
static void test_volsync__ships_what_the_node_has_once(void **state)
{
	struct fix *f = *state;
	struct err err;
	unsigned before = writes(f);

	assert_int_equal(entries(f), -1);
	if (ship(f, f->cell, f->dir, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(writes(f), before + 1);
	assert_int_equal(entries(f), node_entries(f));
	assert_true(entries(f) >= 2);
	assert_int_equal(ship(f, f->cell, f->dir, &err), 0);
	assert_int_equal(writes(f), before + 1);
}

/* A file the kubelet adds or rewrites reaches the cell without another ship, after the
 * debounce. */
static void test_volsync__a_change_on_the_node_is_shipped(void **state)
{
	struct fix *f = *state;
	struct err err;
	unsigned before;
	int n;

	assert_int_equal(ship(f, f->cell, f->dir, &err), 0);
	before = writes(f);
	n = entries(f);
	write_file(f->dir, "c.conf", "c=3\n");
	assert_true(KFIX_WAIT(entries(f) == n + 1, 3000));
	assert_true(writes(f) >= before + 1);
	/* a rewrite of the same size is a change too */
	before = writes(f);
	write_file(f->dir, "a.conf", "a=9\n");
	assert_true(KFIX_WAIT(writes(f) >= before + 1, 3000));
	assert_int_equal(entries(f), n + 1);
}

/* The kubelet's atomic writer: the files live in a timestamped directory that ..data points
 * to, and an update swaps ..data for a new directory. */
static void test_volsync__an_atomic_swap_is_shipped(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *v1 = xasprintf("%s/..2026_01", f->dir);
	_cleanup_free_ char *v2 = xasprintf("%s/..2026_02", f->dir);
	_cleanup_free_ char *data = xasprintf("%s/..data", f->dir);
	_cleanup_free_ char *tmp = xasprintf("%s/..data_tmp", f->dir);
	_cleanup_free_ char *key = xasprintf("%s/key", f->dir);
	struct err err;
	unsigned before;

	assert_int_equal(mkdir(v1, 0755), 0);
	write_file(v1, "key", "one\n");
	assert_int_equal(symlink("..2026_01", data), 0);
	assert_int_equal(symlink("..data/key", key), 0);
	assert_int_equal(ship(f, f->cell, f->dir, &err), 0);
	assert_int_equal(entries(f), node_entries(f));
	before = writes(f);
	assert_int_equal(mkdir(v2, 0755), 0);
	write_file(v2, "key", "two, longer\n");
	assert_int_equal(symlink("..2026_02", tmp), 0);
	assert_int_equal(rename(tmp, data), 0);
	assert_true(KFIX_WAIT(writes(f) >= before + 1, 3000));
	assert_true(KFIX_WAIT(entries(f) == node_entries(f), 3000));
}

/* A cell that is not running, or a node copy that is not there, is an error naming the
 * volume. */
static void test_volsync__errors_name_the_volume(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *missing = xasprintf("%s/none", f->k->dir);
	_cleanup_free_ char *want = xasprintf("volume %s: cell cell-nope is not running", f->dir);
	struct err err;

	assert_int_equal(ship(f, "cell-nope", f->dir, &err), -ENOENT);
	assert_string_equal(err.msg, want);
	assert_true(ship(f, f->cell, missing, &err) < 0);
	assert_non_null(strstr(err.msg, missing));
}

/* The pod's address in kiyot's records (caller frees). */
static char *ip_of(struct fix *f)
{
	struct sandbox *sb;
	char *ip;

	records_lock(f->k->k.records);
	sb = records_sandbox(f->k->k.records, f->sandbox);
	ip = xstrdup(sb ? sb->ip : "");
	records_unlock(f->k->k.records);
	return ip;
}

/* When the pod's cell goes, its volumes are forgotten at their next change: should a cell of
 * that id serve again, nothing is shipped to it. */
static void test_volsync__volumes_of_a_gone_cell_are_forgotten(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *ip = ip_of(f);
	_cleanup_free_ char *target = xasprintf("%s:%d", ip, f->k->k.cfg.agent_port);
	struct err err = ERR_INIT;
	unsigned before;

	assert_int_equal(ship(f, f->cell, f->dir, &err), 0);
	assert_int_equal(kfix_stop_pod(f->k, f->sandbox, &err), 0);
	assert_int_equal(kfix_remove_pod(f->k, f->sandbox, &err), 0);
	write_file(f->dir, "c.conf", "c=3\n"); /* tried once: no such cell */
	usleep(500000);
	fake_agent_add_cell(f->k->fa, f->cell, target);
	cells_resume(f->k->k.cells, f->cell, ip);
	before = writes(f);
	write_file(f->dir, "d.conf", "d=4\n");
	usleep(500000);
	assert_int_equal(writes(f), before);
	assert_int_equal(entries(f), -1); /* the new agent never got it */
}

/* A volume whose node copy is removed (the pod's volumes went) is forgotten: the same
 * content shipped again later is sent again, as to a cell that never had it. */
static void test_volsync__a_removed_node_copy_is_forgotten(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	unsigned before;

	assert_int_equal(ship(f, f->cell, f->dir, &err), 0);
	assert_int_equal(fs_remove_tree(f->dir, &err), 0);
	usleep(500000);
	assert_int_equal(fs_mkdir_p(f->dir, 0755, &err), 0);
	write_file(f->dir, "a.conf", "a=1\n");
	write_file(f->dir, "b.conf", "b=2\n");
	before = writes(f);
	assert_int_equal(ship(f, f->cell, f->dir, &err), 0);
	assert_int_equal(writes(f), before + 1);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(test_volsync__##name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(ships_what_the_node_has_once),
		T(a_change_on_the_node_is_shipped),
		T(an_atomic_swap_is_shipped),
		T(errors_name_the_volume),
		T(volumes_of_a_gone_cell_are_forgotten),
		T(a_removed_node_copy_is_forgotten),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
