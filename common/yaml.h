/*
 * yaml.h: YAML (and therefore JSON) text into a jansson tree, with limits.
 *
 *	json_t *j;
 *	if (yaml_to_json(text, len, &j, err) < 0)
 *		return err_wrap(err, "%s", path);
 *	...
 *	json_decref(j);
 *
 * Mappings become objects, sequences arrays, scalars strings. Plain (unquoted) scalars are
 * resolved as the YAML core schema does, so that manifests mean what kubectl makes of them:
 *	null, Null, NULL, ~, (empty)        -> JSON null
 *	true, True, TRUE, false, ...        -> JSON true/false (yes/no/on/off stay strings)
 *	123, -7, 0x1F, 0o17                 -> integers; a leading 0 with octal digits (0644) is
 *	                                       octal as in YAML 1.1, which is what kubectl reads
 *	1.5, -2e3, .5                       -> reals
 * Everything else, every quoted scalar and every scalar tagged !!str is a string. Integers that
 * do not fit in 64 bits, .inf and .nan stay strings (JSON has no such numbers). Mapping keys
 * must be scalars and unique; they are used as written. The standard tags !!str !!int !!float
 * !!bool !!null !!map !!seq are honoured; any other tag is an error.
 *
 * Limits: the text may be at most YAML_MAX_INPUT bytes (callers reading files should cap the
 * read themselves, see yaml_file_to_json), collections nest at most YAML_MAX_DEPTH deep, a
 * document holds at most YAML_MAX_NODES values. Anchors and aliases are expanded (copied), and
 * every copy counts against the node limit, so an exponential "billion laughs" document fails
 * after at most YAML_MAX_NODES copies.
 *
 * Streams: empty documents are skipped; the first non-empty one is returned. A second
 * non-empty document is an error (this reader takes one object per text).
 *
 * Errors read "line L, column C: <what>" (1-based), e.g.
 *	"line 3, column 8: mapping values are not allowed in this context"
 *	"line 9, column 1: a second YAML document starts here; give one document per file"
 * Codes: EINVAL (bad text), E2BIG (a limit), ENODATA (no non-empty document), EFBIG (too long).
 * Thread-safe; no global state.
 */
#ifndef KIYOT_YAML_H
#define KIYOT_YAML_H

#include <jansson.h>
#include <stddef.h>

#include "err.h"

#define YAML_MAX_INPUT (16u << 20)
#define YAML_MAX_DEPTH 64
#define YAML_MAX_NODES 100000

/* Parses len bytes of text (no NUL needed). On success *out is a new reference. */
int yaml_to_json(const char *text, size_t len, json_t **out, struct err *err);

/* Reads a file of at most max bytes (and at most YAML_MAX_INPUT) and parses it; errors are
 * prefixed with the path. */
int yaml_file_to_json(const char *path, size_t max, json_t **out, struct err *err);

#endif

/*
 * This header shadows libyaml's <yaml.h> on the -Icommon path. common/yaml.c defines
 * KIYOT_YAML_WANT_LIBYAML to get the library's header, found past this directory.
 */
#if defined(KIYOT_YAML_WANT_LIBYAML) && !defined(YAML_H)
#include_next <yaml.h>
#endif
