/*
 * fuzz_jfields: arbitrary JSON read by a table of every kind (common/jfields.h), as config.c
 * and the Pod reader use it. Besides what the sanitizers catch (and leaks: the struct is
 * released after every input, also after a refusal), it checks the reader's promises: a
 * refusal is a negative errno with a message that names the path it started from; an accepted
 * input holds every value within its field's bounds (integers, string lengths without NUL,
 * entries of lists and maps); and reading the same input again over the result stores the
 * same.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jfields.h"
#include "strvec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct entry {
	char *type;
	int count;
	bool spot;
	struct entry *kids;
	size_t n_kids;
};

struct pair {
	char *name, *value;
};

struct doc {
	char *name;
	char **args;
	size_t n_args;
	int port;
	int64_t big;
	uint64_t bytes;
	int flag;
	double price;
	int mode;
	struct entry *entries;
	size_t n_entries;
	struct pair *labels;
	size_t n_labels;
	struct {
		int64_t ceiling;
	} limits;
	int twice;
};

static const char *const modes[] = { "Always", "OnFailure", "Never", NULL };

static void fail(const char *what, const uint8_t *data, size_t size)
{
	fprintf(stderr, "%s\n%.*s\n", what, (int)size, (const char *)data);
	abort();
}

static void entry_release(void *e)
{
	struct entry *en = e;

	free(en->type);
	for (size_t i = 0; i < en->n_kids; i++)
		entry_release(&en->kids[i]);
	free(en->kids);
}

static void doc_release(struct doc *d)
{
	free(d->name);
	strv_free(d->args);
	for (size_t i = 0; i < d->n_entries; i++)
		entry_release(&d->entries[i]);
	free(d->entries);
	for (size_t i = 0; i < d->n_labels; i++) {
		free(d->labels[i].name);
		free(d->labels[i].value);
	}
	free(d->labels);
}

static int read_twice(const json_t *v, void *dst, const char *path, struct err *err)
{
	if (!json_is_integer(v) || json_integer_value(v) < -1000 || json_integer_value(v) > 1000)
		return err_set(err, EINVAL, "%s: must be an integer from -1000 to 1000", path);
	*(int *)dst = 2 * (int)json_integer_value(v);
	return 0;
}

static int check_entries(void *obj, const json_t *v, const char *path, struct err *err)
{
	const struct doc *d = obj;

	(void)v;
	for (size_t i = 1; i < d->n_entries; i++)
		if (!strcmp(d->entries[i].type, d->entries[0].type))
			return err_set(err, EINVAL, "%s[%zu]: the type of [0] again", path, i);
	return 0;
}

static const struct jf_table entry_table;
static const struct jf_field entry_fields[] = {
	{ JF_STR("type", struct entry, type), .required = true, .min = 1, .max = 16 },
	{ JF_INT("count", struct entry, count, 0, 1000) },
	{ JF_BOOL("spot", struct entry, spot) },
	{ JF_LIST("kids", struct entry, kids, n_kids, struct entry, 4, &entry_table) },
	JF_END,
};
static const struct jf_table entry_table = {
	.fields = entry_fields, .strict = true, .example = "{type: a}", .release = entry_release
};

static const struct jf_field limit_fields[] = {
	{ JF_INT("ceiling", struct doc, limits.ceiling, -5, INT64_MAX) },
	JF_END,
};
static const struct jf_table limit_table = { .fields = limit_fields, .null_absent = true };

static const struct jf_field doc_fields[] = {
	{ JF_STR("name", struct doc, name), .max = 8 },
	{ JF_STRV("args", struct doc, args, n_args, 3) },
	{ JF_INT("port", struct doc, port, 1, 65535) },
	{ JF_INT("big", struct doc, big, INT64_MIN, INT64_MAX) },
	{ JF_INT("bytes", struct doc, bytes, 0, INT64_MAX) },
	{ JF_BOOL("flag", struct doc, flag) },
	{ JF_DOUBLE("price", struct doc, price, 0, 1e6) },
	{ JF_ENUM("mode", struct doc, mode, modes) },
	{ JF_OBJECT("limits", 0, &limit_table) },
	{ JF_LIST("entries", struct doc, entries, n_entries, struct entry, 5, &entry_table),
	  .check = check_entries },
	{ JF_MAP("labels", struct doc, labels, n_labels, struct pair, name, value, 4) },
	{ JF_CUSTOM("twice", offsetof(struct doc, twice), read_twice) },
	JF_END,
};
static const struct jf_table doc_table = { .fields = doc_fields, .strict = true };

static int entry_ok(const struct entry *e, int depth)
{
	if (!e->type || !e->type[0] || strlen(e->type) > 16 || e->count < 0 || e->count > 1000 ||
	    e->n_kids > 4 || depth > JF_DEPTH_MAX)
		return 0;
	for (size_t i = 0; i < e->n_kids; i++)
		if (!entry_ok(&e->kids[i], depth + 1))
			return 0;
	return 1;
}

static int bounded(const struct doc *d)
{
	if ((d->name && strlen(d->name) > 8) || d->n_args > 3 || (d->n_args && !d->args) ||
	    d->port < 0 || d->port > 65535 || d->price < 0 || d->price > 1e6 || d->mode < 0 ||
	    d->mode > 2 || d->n_entries > 5 || d->n_labels > 4 || d->limits.ceiling < -5 ||
	    d->twice < -2000 || d->twice > 2000 || d->bytes > INT64_MAX)
		return 0;
	for (size_t i = 0; i < d->n_args; i++)
		if (!d->args[i])
			return 0;
	for (size_t i = 0; i < d->n_entries; i++)
		if (!entry_ok(&d->entries[i], 1))
			return 0;
	for (size_t i = 0; i < d->n_labels; i++)
		if (!d->labels[i].name || !d->labels[i].value)
			return 0;
	return 1;
}

static int same(const struct doc *a, const struct doc *b)
{
	return ((!a->name && !b->name) || (a->name && b->name && !strcmp(a->name, b->name))) &&
	       a->n_args == b->n_args && a->port == b->port && a->big == b->big &&
	       a->bytes == b->bytes && a->flag == b->flag && a->price == b->price &&
	       a->mode == b->mode && a->n_entries == b->n_entries && a->n_labels == b->n_labels &&
	       a->limits.ceiling == b->limits.ceiling && a->twice == b->twice;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	struct doc a = { 0 }, b = { 0 };
	struct err err = ERR_INIT;
	int ret;

	if (!j)
		return 0;
	ret = jf_read(&doc_table, j, "top", &a, &err);
	if (ret < 0) {
		if (ret != -err.code || !err.msg[0] ||
		    (strncmp(err.msg, "top", 3) != 0 && strncmp(err.msg, "the document", 12) != 0))
			fail("refused without an errno, or a message naming the path", data, size);
	} else {
		if (!bounded(&a))
			fail("accepted a value out of its field's bounds", data, size);
		if (jf_read(&doc_table, j, "top", &b, &err) < 0 ||
		    jf_read(&doc_table, j, "top", &b, &err) < 0 || !same(&a, &b))
			fail("reading it again over itself changed it", data, size);
	}
	doc_release(&a);
	doc_release(&b);
	json_decref(j);
	return 0;
}
