/*
 * yaml.c: libyaml's event stream folded into a jansson tree by recursive descent.
 *
 * The header common/yaml.h shadows libyaml's <yaml.h> on the -Icommon include path, so this file
 * asks the header to pull the library's one in with #include_next (see the end of yaml.h).
 */
#define KIYOT_YAML_WANT_LIBYAML 1
#include "yaml.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "xalloc.h"

#define YTAG_PREFIX "tag:yaml.org,2002:"

/* An anchored value kept for later aliases: the value and how many values it holds. */
struct yanchor {
	char *name;
	json_t *value;
	size_t count;
	int height; /* levels of collections in value, for the depth limit of copies */
};

/* Parser state for one text. */
struct yctx {
	yaml_parser_t parser;
	const char *text;
	size_t len;
	size_t nodes; /* values created so far, alias copies included */
	struct yanchor *anchors;
	size_t n_anchors, cap_anchors;
	struct err *err;
};

/* Sets an error located at a libyaml mark (0-based) as 1-based "line L, column C: ...". */
__attribute__((format(printf, 4, 5))) static int yerr_at(struct yctx *c, int code, yaml_mark_t mark,
							 const char *fmt, ...)
{
	char what[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return err_set(c->err, code, "line %zu, column %zu: %s", mark.line + 1, mark.column + 1,
		       what);
}

/* Turns libyaml's parser error into ours, with the position and libyaml's own words. */
static int yerr_parser(struct yctx *c)
{
	yaml_parser_t *p = &c->parser;
	const char *problem = p->problem ? p->problem : "malformed YAML";

	if (p->error == YAML_MEMORY_ERROR)
		abort();
	if (p->error == YAML_READER_ERROR) {
		yaml_mark_t m = { p->problem_offset, 0, 0 };

		for (size_t i = 0; i < p->problem_offset && i < c->len; i++) {
			if (c->text[i] == '\n') {
				m.line++;
				m.column = 0;
			} else {
				m.column++;
			}
		}
		return yerr_at(c, EINVAL, m, "%s (the text must be UTF-8)", problem);
	}
	if (p->context)
		return yerr_at(c, EINVAL, p->problem_mark, "%s %s (line %zu, column %zu)", problem,
			       p->context, p->context_mark.line + 1, p->context_mark.column + 1);
	return yerr_at(c, EINVAL, p->problem_mark, "%s", problem);
}

/* Reads the next event; the caller deletes it. */
static int ynext(struct yctx *c, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&c->parser, ev))
		return yerr_parser(c);
	return 0;
}

/* Counts n more values against the document limit. */
static int ycount(struct yctx *c, size_t n, yaml_mark_t mark)
{
	if (n > YAML_MAX_NODES || c->nodes + n > YAML_MAX_NODES)
		return yerr_at(c, E2BIG, mark,
			       "more than %d values (each alias counts its whole copy); the "
			       "document is too large",
			       YAML_MAX_NODES);
	c->nodes += n;
	return 0;
}

/* How many levels a value spans: 1 for a scalar, 1 + its deepest child for a collection. */
static int yheight(const json_t *v)
{
	int h = 0;

	if (json_is_array(v)) {
		size_t i;
		json_t *it;

		json_array_foreach (v, i, it) {
			int ih = yheight(it);

			h = ih > h ? ih : h;
		}
	} else if (json_is_object(v)) {
		const char *k;
		json_t *it;

		json_object_foreach ((json_t *)v, k, it) {
			int ih = yheight(it);

			h = ih > h ? ih : h;
		}
	}
	return h + 1;
}

/* Remembers an anchored value; a later anchor of the same name hides the earlier one. */
static void yanchor_add(struct yctx *c, const char *name, json_t *value, size_t count)
{
	xgrow((void **)&c->anchors, &c->cap_anchors, c->n_anchors + 1, sizeof(*c->anchors));
	c->anchors[c->n_anchors].name = xstrdup(name);
	c->anchors[c->n_anchors].value = json_incref(value);
	c->anchors[c->n_anchors].count = count;
	c->anchors[c->n_anchors].height = yheight(value);
	c->n_anchors++;
}

/* Finds the latest anchor of that name, or NULL. */
static const struct yanchor *yanchor_find(const struct yctx *c, const char *name)
{
	for (size_t i = c->n_anchors; i > 0; i--) {
		if (strcmp(c->anchors[i - 1].name, name) == 0)
			return &c->anchors[i - 1];
	}
	return NULL;
}

/* True when s (len bytes) equals one of the NULL-terminated words. */
static bool yis_one_of(const char *s, size_t len, const char *const *words)
{
	for (; *words; words++) {
		if (strlen(*words) == len && memcmp(s, *words, len) == 0)
			return true;
	}
	return false;
}

/* Parses an integer in the given base from digits only; false on overflow or a bad digit. */
static bool yparse_uint(const char *s, size_t len, int base, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		int d;

		if (s[i] >= '0' && s[i] <= '9')
			d = s[i] - '0';
		else if (s[i] >= 'a' && s[i] <= 'f')
			d = s[i] - 'a' + 10;
		else if (s[i] >= 'A' && s[i] <= 'F')
			d = s[i] - 'A' + 10;
		else
			return false;
		if (d >= base || v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return false;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	*out = v;
	return true;
}

/* Resolves an integer scalar: [-+]? then decimal, 0x hex, 0o octal or 0-led octal. */
static json_t *yresolve_int(const char *s, size_t len)
{
	bool neg = false;
	uint64_t v;
	int base = 10;

	if (len && (*s == '-' || *s == '+')) {
		neg = *s == '-';
		s++;
		len--;
	}
	if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
		base = s[1] == 'x' ? 16 : 8;
		s += 2;
		len -= 2;
	} else if (len > 1 && s[0] == '0' && strspn(s, "01234567") >= len) {
		base = 8;
	}
	if (base != 16 && strspn(s, "0123456789") < len)
		return NULL;
	if (!yparse_uint(s, len, base, &v))
		return NULL;
	if (!neg && v > (uint64_t)INT64_MAX)
		return NULL;
	if (neg && v > (uint64_t)INT64_MAX + 1)
		return NULL;
	if (neg)
		return json_integer(v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(json_int_t)v);
	return json_integer((json_int_t)v);
}

/* Resolves a real: [-+]?(.D+|D+(.D*)?)([eE][-+]?D+)? with a '.' or an exponent; finite only. */
static json_t *yresolve_real(const char *s, size_t len)
{
	char buf[128];
	size_t i = 0, digits = 0;
	bool dot = false, exp = false;
	double d;

	if (len == 0 || len >= sizeof(buf))
		return NULL;
	if (s[i] == '-' || s[i] == '+')
		i++;
	for (; i < len && ((s[i] >= '0' && s[i] <= '9') || (s[i] == '.' && !dot)); i++) {
		if (s[i] == '.')
			dot = true;
		else
			digits++;
	}
	if (!digits)
		return NULL;
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		size_t ed = 0;

		exp = true;
		i++;
		if (i < len && (s[i] == '-' || s[i] == '+'))
			i++;
		for (; i < len && s[i] >= '0' && s[i] <= '9'; i++)
			ed++;
		if (!ed)
			return NULL;
	}
	if (i != len || (!dot && !exp))
		return NULL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	d = strtod(buf, NULL);
	if (!isfinite(d))
		return NULL;
	return json_real(d);
}

/* The JSON value of a plain scalar under the core schema, or NULL when it is a string. */
static json_t *yresolve_plain(const char *s, size_t len)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
	static const char *const trues[] = { "true", "True", "TRUE", NULL };
	static const char *const falses[] = { "false", "False", "FALSE", NULL };
	json_t *v;

	if (yis_one_of(s, len, nulls))
		return json_null();
	if (yis_one_of(s, len, trues))
		return json_true();
	if (yis_one_of(s, len, falses))
		return json_false();
	v = yresolve_int(s, len);
	if (!v)
		v = yresolve_real(s, len);
	return v;
}

/* Builds a JSON string; libyaml hands us UTF-8, but escapes can still produce bad code points. */
static int ystring(struct yctx *c, const yaml_event_t *ev, json_t **out)
{
	*out = json_stringn((const char *)ev->data.scalar.value, ev->data.scalar.length);
	if (!*out)
		return yerr_at(c, EINVAL, ev->start_mark, "scalar is not valid UTF-8 text");
	return 0;
}

/* Converts a scalar event, honouring the standard tags. */
static int yscalar(struct yctx *c, const yaml_event_t *ev, json_t **out)
{
	const char *tag = (const char *)ev->data.scalar.tag;
	const char *s = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	const char *want;
	json_t *v;

	if (!tag)
		tag = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? "?" : "!";
	if (strcmp(tag, "!") == 0 || strcmp(tag, YTAG_PREFIX "str") == 0)
		return ystring(c, ev, out);
	v = yresolve_plain(s, len);
	if (strcmp(tag, "?") == 0) {
		if (v) {
			*out = v;
			return 0;
		}
		return ystring(c, ev, out);
	}
	if (strncmp(tag, YTAG_PREFIX, strlen(YTAG_PREFIX)) != 0) {
		json_decref(v);
		return yerr_at(c, EINVAL, ev->start_mark, "unsupported tag %s", tag);
	}
	want = tag + strlen(YTAG_PREFIX);
	if (v && strcmp(want, "float") == 0 && json_is_integer(v)) {
		json_t *r = json_real((double)json_integer_value(v));

		json_decref(v);
		v = r;
	}
	if (v && ((strcmp(want, "int") == 0 && json_is_integer(v)) ||
		  (strcmp(want, "float") == 0 && json_is_real(v)) ||
		  (strcmp(want, "bool") == 0 && json_is_boolean(v)) ||
		  (strcmp(want, "null") == 0 && json_is_null(v)))) {
		*out = v;
		return 0;
	}
	json_decref(v);
	if (strcmp(want, "int") && strcmp(want, "float") && strcmp(want, "bool") &&
	    strcmp(want, "null"))
		return yerr_at(c, EINVAL, ev->start_mark, "unsupported tag !!%s", want);
	return yerr_at(c, EINVAL, ev->start_mark, "\"%.*s\" is not a valid !!%s",
		       (int)len > 64 ? 64 : (int)len, s, want);
}

/* Rejects collection tags other than the standard one for that kind. */
static int ycheck_collection_tag(struct yctx *c, const yaml_event_t *ev, const char *kind)
{
	const char *tag = ev->type == YAML_MAPPING_START_EVENT
				  ? (const char *)ev->data.mapping_start.tag
				  : (const char *)ev->data.sequence_start.tag;

	if (!tag || strcmp(tag, "!") == 0)
		return 0;
	if (strncmp(tag, YTAG_PREFIX, strlen(YTAG_PREFIX)) == 0 &&
	    strcmp(tag + strlen(YTAG_PREFIX), kind) == 0)
		return 0;
	return yerr_at(c, EINVAL, ev->start_mark, "unsupported tag %s on a %s", tag,
		       strcmp(kind, "map") == 0 ? "mapping" : "sequence");
}

static int ynode(struct yctx *c, yaml_event_t *ev, int depth, json_t **out, size_t *count);

/* Reads sequence items up to SEQUENCE-END into an array. */
static int ysequence(struct yctx *c, int depth, json_t *arr, size_t *count)
{
	for (;;) {
		yaml_event_t ev;
		json_t *item;
		size_t n = 0;
		int ret = ynext(c, &ev);

		if (ret < 0)
			return ret;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		ret = ynode(c, &ev, depth + 1, &item, &n);
		if (ret < 0)
			return ret;
		json_array_append_new(arr, item);
		*count += n;
	}
}

/* Applies a YAML merge key ("<<: *base"): keys the mapping does not set come from the source. */
static int ymerge(struct yctx *c, json_t *obj, json_t *src, yaml_mark_t mark)
{
	size_t i;
	json_t *it;

	if (json_is_object(src)) {
		json_object_update_missing(obj, src);
		return 0;
	}
	if (!json_is_array(src))
		return yerr_at(c, EINVAL, mark,
			       "a merge key (<<) needs a mapping or a list of them");
	json_array_foreach (src, i, it) {
		if (!json_is_object(it))
			return yerr_at(c, EINVAL, mark,
				       "a merge key (<<) needs a mapping or a list of them");
		json_object_update_missing(obj, it);
	}
	return 0;
}

/* Reads one key of a mapping; false in *end when the mapping ended instead. */
static int ykey(struct yctx *c, char **key, bool *merge, yaml_mark_t *mark, bool *end)
{
	yaml_event_t ev;
	int ret = ynext(c, &ev);

	if (ret < 0)
		return ret;
	*mark = ev.start_mark;
	*end = ev.type == YAML_MAPPING_END_EVENT;
	if (*end) {
		yaml_event_delete(&ev);
		return 0;
	}
	if (ev.type != YAML_SCALAR_EVENT) {
		yaml_event_delete(&ev);
		return yerr_at(c, EINVAL, *mark,
			       "mapping keys must be scalars (not lists, mappings or aliases)");
	}
	if (memchr(ev.data.scalar.value, '\0', ev.data.scalar.length)) {
		yaml_event_delete(&ev);
		return yerr_at(c, EINVAL, *mark, "mapping key contains a NUL character");
	}
	*merge = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev.data.scalar.tag &&
		 strcmp((const char *)ev.data.scalar.value, "<<") == 0;
	*key = xstrdup((const char *)ev.data.scalar.value);
	yaml_event_delete(&ev);
	return ycount(c, 1, *mark);
}

/* Reads key/value pairs up to MAPPING-END into an object; duplicate keys are errors. */
static int ymapping(struct yctx *c, int depth, json_t *obj, size_t *count)
{
	json_t *merges = json_array();
	int ret;

	for (;;) {
		_cleanup_free_ char *key = NULL;
		yaml_mark_t mark;
		yaml_event_t ev;
		bool end, merge = false;
		json_t *val;
		size_t n = 0;

		ret = ykey(c, &key, &merge, &mark, &end);
		if (ret < 0 || end)
			break;
		*count += 1;
		ret = ynext(c, &ev);
		if (ret < 0)
			break;
		ret = ynode(c, &ev, depth + 1, &val, &n);
		if (ret < 0)
			break;
		*count += n;
		if (merge) {
			json_array_append_new(merges, val);
			continue;
		}
		if (json_object_get(obj, key)) {
			json_decref(val);
			ret = yerr_at(c, EINVAL, mark, "duplicate key \"%.64s\"", key);
			break;
		}
		json_object_set_new(obj, key, val);
	}
	for (size_t i = 0; ret >= 0 && i < json_array_size(merges); i++)
		ret = ymerge(c, obj, json_array_get(merges, i), c->parser.mark);
	json_decref(merges);
	return ret;
}

/* Expands an alias into a copy of its anchored value. */
static int yalias(struct yctx *c, const yaml_event_t *ev, int depth, json_t **out, size_t *count)
{
	const struct yanchor *a = yanchor_find(c, (const char *)ev->data.alias.anchor);
	int ret;

	if (!a)
		return yerr_at(c, EINVAL, ev->start_mark, "alias *%s names no earlier anchor",
			       (const char *)ev->data.alias.anchor);
	if (depth + a->height - 1 > YAML_MAX_DEPTH)
		return yerr_at(c, E2BIG, ev->start_mark,
			       "alias *%s nests its copy deeper than %d levels", a->name,
			       YAML_MAX_DEPTH);
	ret = ycount(c, a->count, ev->start_mark);
	if (ret < 0)
		return ret;
	*out = json_deep_copy(a->value);
	*count = a->count;
	return 0;
}

/*
 * Converts the node that starts with ev (consumed and deleted here) and everything inside it.
 * *count receives how many values it holds, for aliases to charge later copies.
 */
static int ynode(struct yctx *c, yaml_event_t *ev, int depth, json_t **out, size_t *count)
{
	const char *anchor = NULL;
	json_t *v = NULL;
	int ret;

	*count = 1;
	ret = ycount(c, 1, ev->start_mark);
	if (ret >= 0 && depth > YAML_MAX_DEPTH)
		ret = yerr_at(c, E2BIG, ev->start_mark, "nesting deeper than %d levels",
			      YAML_MAX_DEPTH);
	if (ret < 0)
		goto out;
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		anchor = (const char *)ev->data.scalar.anchor;
		ret = yscalar(c, ev, &v);
		break;
	case YAML_ALIAS_EVENT:
		c->nodes--;
		ret = yalias(c, ev, depth, &v, count);
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = (const char *)ev->data.sequence_start.anchor;
		ret = ycheck_collection_tag(c, ev, "seq");
		v = json_array();
		if (ret >= 0)
			ret = ysequence(c, depth, v, count);
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = (const char *)ev->data.mapping_start.anchor;
		ret = ycheck_collection_tag(c, ev, "map");
		v = json_object();
		if (ret >= 0)
			ret = ymapping(c, depth, v, count);
		break;
	default:
		ret = yerr_at(c, EINVAL, ev->start_mark, "unexpected YAML event %d", ev->type);
		break;
	}
	if (ret >= 0 && anchor)
		yanchor_add(c, anchor, v, *count);
out:
	yaml_event_delete(ev);
	if (ret < 0) {
		json_decref(v);
		return ret;
	}
	*out = v;
	return 0;
}

/* Parses one document (after its DOCUMENT-START) up to and including DOCUMENT-END. */
static int ydocument(struct yctx *c, json_t **out, bool *empty)
{
	yaml_event_t ev, end;
	size_t n;
	int ret = ynext(c, &ev);

	if (ret < 0)
		return ret;
	*empty = ev.type == YAML_SCALAR_EVENT && ev.data.scalar.length == 0 &&
		 ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev.data.scalar.tag &&
		 !ev.data.scalar.anchor;
	ret = ynode(c, &ev, 1, out, &n);
	if (ret < 0)
		return ret;
	ret = ynext(c, &end);
	if (ret < 0) {
		json_decref(*out);
		return ret;
	}
	yaml_event_delete(&end);
	return 0;
}

/* Walks the stream: the first non-empty document wins, a second one is an error. */
static int ystream(struct yctx *c, json_t **out)
{
	json_t *doc = NULL;
	int ret = 0;

	for (;;) {
		yaml_event_t ev;
		yaml_mark_t mark;
		json_t *j = NULL;
		bool empty;

		ret = ynext(c, &ev);
		if (ret < 0)
			break;
		if (ev.type == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		mark = ev.start_mark;
		if (ev.type != YAML_DOCUMENT_START_EVENT) {
			yaml_event_delete(&ev);
			continue;
		}
		yaml_event_delete(&ev);
		ret = ydocument(c, &j, &empty);
		if (ret < 0)
			break;
		if (empty) {
			json_decref(j);
			continue;
		}
		if (doc) {
			json_decref(j);
			ret = yerr_at(c, EINVAL, mark,
				      "a second YAML document starts here; give one document per "
				      "file");
			break;
		}
		doc = j;
	}
	if (ret < 0) {
		json_decref(doc);
		return ret;
	}
	if (!doc)
		return err_set(c->err, ENODATA, "no YAML document (the text is empty)");
	*out = doc;
	return 0;
}

/* Parses text into a tree; see yaml.h for the mapping and the limits. */
int yaml_to_json(const char *text, size_t len, json_t **out, struct err *err)
{
	struct yctx c = { .text = text, .len = len, .err = err };
	int ret;

	if (len > YAML_MAX_INPUT)
		return err_set(err, EFBIG, "YAML text is larger than %u bytes", YAML_MAX_INPUT);
	if (!yaml_parser_initialize(&c.parser))
		abort();
	yaml_parser_set_input_string(&c.parser, (const unsigned char *)(len ? text : ""), len);
	ret = ystream(&c, out);
	yaml_parser_delete(&c.parser);
	for (size_t i = 0; i < c.n_anchors; i++) {
		free(c.anchors[i].name);
		json_decref(c.anchors[i].value);
	}
	free(c.anchors);
	return ret;
}

/* Reads and parses a file, bounded by max and by YAML_MAX_INPUT. */
int yaml_file_to_json(const char *path, size_t max, json_t **out, struct err *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int ret;

	if (max == 0 || max > YAML_MAX_INPUT)
		max = YAML_MAX_INPUT;
	ret = fs_read_file(path, max, &text, &len, err);
	if (ret < 0)
		return ret;
	ret = yaml_to_json(text, len, out, err);
	if (ret < 0)
		return err_wrap(err, "%s", path);
	return 0;
}
