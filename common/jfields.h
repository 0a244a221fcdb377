/*
 * jfields.h: a JSON tree (jansson's json_t; YAML becomes one through yaml.h) read into a C
 * struct by a table of field descriptors, instead of a walker written by hand for every
 * section of a config or a manifest.
 *
 *	struct pulls { int max; char **hosts; size_t n_hosts; };
 *	static const struct jf_field pull_fields[] = {
 *		{ JF_INT("maxTransfers", struct pulls, max, 1, 256) },
 *		{ JF_STRV("hosts", struct pulls, hosts, n_hosts, 16), .required = true },
 *		JF_END,
 *	};
 *	static const struct jf_table pull_table = { .fields = pull_fields, .strict = true };
 *
 *	if (jf_read(&pull_table, json, "pulls", &p, err) < 0)
 *		return -1;   err: "pulls.maxTransfers: must be an integer from 1 to 256, not "x""
 *
 * Each field names its key, its kind, where its value goes (an offset in the struct jf_read
 * writes, the one the table describes), its bounds and whether it is required. Errors name the
 * full path of the value at fault ("pool.shapes[2].count"), what it must be and what it is;
 * a field's hint says more (an example). Fields are read in the table's order, so the first
 * error follows it; a table that is strict refuses a key it does not list, first of all.
 *
 * Bounded: strings at most the field's max bytes (len_max in lists and maps; JF_STR_MAX when
 * 0) and without NUL; lists and maps at most the field's max entries (JF_LIST_MAX when 0); nesting at most JF_DEPTH_MAX
 * tables deep.
 *
 * Ownership: what a field stores belongs to the struct and replaces what the field held
 * (a string or list there before is freed; tables of list entries give the release that
 * frees one). On an error the fields read before it keep their new values and the struct is
 * still whole: its own release frees everything. Nothing points into the json_t.
 * Errors: EINVAL, or what a custom reader or a check returns. Thread safety: none needed;
 * tables are constant.
 */
#ifndef KIYOT_JFIELDS_H
#define KIYOT_JFIELDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Defaults when a field gives no max: a string's bytes, a list's or a map's entries. */
#define JF_STR_MAX (64 * 1024)
#define JF_LIST_MAX 4096
/* Tables nested in tables at most (objects, lists of objects). */
#define JF_DEPTH_MAX 16

enum jf_kind {
	JF_K_STR,    /* char *: a string (min, max: its length in bytes) */
	JF_K_STRV,   /* char ** NULL-terminated, size_t count at n_off: a list of strings */
	JF_K_INT,    /* an integer from min to max into int64_t, int, or uint64_t (size) */
	JF_K_BOOL,   /* true or false into bool or int (size) */
	JF_K_DOUBLE, /* a number from dmin to dmax into double */
	JF_K_ENUM,   /* one of names into int: the name's index */
	JF_K_OBJECT, /* a mapping read by table into the struct at off */
	JF_K_LIST,   /* a list of mappings read by table into an array of size-byte entries */
	JF_K_MAP,    /* a mapping of strings into an array of size-byte entries with a name and a
		      * value (char *) at key_off and val_off; count at n_off */
	JF_K_CUSTOM, /* anything else: custom reads it */
};

/* Reads v, the value at path, into dst (the struct's address plus the field's offset). */
typedef int (*jf_custom_fn)(const json_t *v, void *dst, const char *path, struct err *err);
/* After a mapping's fields: rules across them. obj is the struct, j the mapping read. */
typedef int (*jf_check_fn)(void *obj, const json_t *j, const char *path, struct err *err);
/* Frees what one entry of a list owns (not the entry). */
typedef void (*jf_release_fn)(void *entry);

struct jf_table;

struct jf_field {
	const char *key; /* NULL ends a table */
	enum jf_kind kind;
	size_t off;	   /* where the value goes */
	size_t size;	   /* int, bool: the destination's size; list, map: an entry's size */
	size_t n_off;	   /* strv, list, map: where the count goes (size_t) */
	int64_t min, max;  /* int: bounds; str: length; strv, list, map: entries (max 0: the
			     * default); lists and maps refuse fewer than min entries */
	int64_t len_max;   /* strv, map: a string's most bytes (0: JF_STR_MAX) */
	double dmin, dmax; /* double: bounds */
	size_t key_off;	   /* map: an entry's name */
	size_t val_off;	   /* map: an entry's value */
	const char *const *names;     /* enum: the names, NULL-terminated */
	const struct jf_table *table; /* object, list */
	jf_custom_fn custom;
	jf_check_fn check; /* optional, after the value is stored: obj is the table's struct */
	bool required;
	const char *hint; /* added to this field's errors: "(e.g. 64Mi)" */
	bool mark_given;  /* a bool at given_off (in the table's struct) is set true once the
			   * field is read, before its check: a has_x beside x (JF_GIVEN) */
	size_t given_off;
};

struct jf_table {
	const struct jf_field *fields; /* ends with JF_END */
	bool strict;		       /* a key the table does not list is an error */
	bool null_absent;	       /* a member that is null counts as not given */
	const char *example;	       /* added to "must be a mapping": "{ count: 2 }" */
	jf_check_fn check;	       /* optional, after the fields */
	jf_release_fn release;	       /* list entries: frees what one owns */
};

/* Reads the mapping v (at path; "" at the root) into dst by table t. */
int jf_read(const struct jf_table *t, const json_t *v, const char *path, void *dst,
	    struct err *err);

/* For custom readers and checks: "a string", "a list", ... ; and v written for an error:
 * "x" quoted (at most 40 bytes), a number, true, a list. buf holds 64 bytes. */
const char *jf_type_name(const json_t *v);
const char *jf_value_text(const json_t *v, char buf[64]);
/* "path.key" (key alone when path is ""), or "path[i]", into buf of size bytes. */
const char *jf_join(char *buf, size_t size, const char *path, const char *key);
const char *jf_index(char *buf, size_t size, const char *path, size_t i);

#define JF_MEMBER_SIZE(T, m) sizeof(((T *)0)->m)

/*
 * The common kinds, as designators for a field's braces, where more may follow:
 *	{ JF_INT("agentPort", struct cfg, port, 1, 65534), .hint = "(7443 by default)" },
 */
#define JF_END                                                                                     \
	{                                                                                          \
		.key = NULL                                                                        \
	}
#define JF_STR(k, T, m) .key = (k), .kind = JF_K_STR, .off = offsetof(T, m)
#define JF_STRV(k, T, m, n, most)                                                                  \
	.key = (k), .kind = JF_K_STRV, .off = offsetof(T, m), .n_off = offsetof(T, n), .max = (most)
#define JF_INT(k, T, m, lo, hi)                                                                    \
	.key = (k), .kind = JF_K_INT, .off = offsetof(T, m), .size = JF_MEMBER_SIZE(T, m),         \
	.min = (lo), .max = (hi)
#define JF_BOOL(k, T, m)                                                                           \
	.key = (k), .kind = JF_K_BOOL, .off = offsetof(T, m), .size = JF_MEMBER_SIZE(T, m)
#define JF_DOUBLE(k, T, m, lo, hi)                                                                 \
	.key = (k), .kind = JF_K_DOUBLE, .off = offsetof(T, m), .dmin = (lo), .dmax = (hi)
#define JF_ENUM(k, T, m, nm) .key = (k), .kind = JF_K_ENUM, .off = offsetof(T, m), .names = (nm)
/* A nested mapping read by tbl into the struct at off_ (0: the same struct). */
#define JF_OBJECT(k, off_, tbl) .key = (k), .kind = JF_K_OBJECT, .off = (off_), .table = (tbl)
#define JF_LIST(k, T, m, n, E, most, tbl)                                                          \
	.key = (k), .kind = JF_K_LIST, .off = offsetof(T, m), .n_off = offsetof(T, n),             \
	.size = sizeof(E), .max = (most), .table = (tbl)
#define JF_MAP(k, T, m, n, E, name, value, most)                                                   \
	.key = (k), .kind = JF_K_MAP, .off = offsetof(T, m), .n_off = offsetof(T, n),              \
	.size = sizeof(E), .key_off = offsetof(E, name), .val_off = offsetof(E, value),            \
	.max = (most)
#define JF_CUSTOM(k, off_, fn) .key = (k), .kind = JF_K_CUSTOM, .off = (off_), .custom = (fn)
/* Added to a field: the bool m of T says whether it was given (read without an error). */
#define JF_GIVEN(T, m) .mark_given = true, .given_off = offsetof(T, m)

#endif
