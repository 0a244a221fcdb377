/*
 * fuzz_yaml: YAML text as kiyot reads manifests, kubeconfigs and its config (common/yaml.h).
 * Besides what the sanitizers catch, it checks the reader's promises: a refusal is EINVAL,
 * E2BIG, ENODATA or EFBIG with a message; an accepted document nests at most YAML_MAX_DEPTH
 * collections and holds at most YAML_MAX_NODES values; and what it reads reads the same when
 * written out as JSON (which YAML reads too, as long as no key is longer than YAML lets an
 * implicit key be: 1024 characters).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"
#include "yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *text, size_t len)
{
	fprintf(stderr, "%s\n%.*s\n", what, (int)len, text);
	abort();
}

/* Collections nested (a scalar is 0) and values held (the document's own included). */
static int measure(const json_t *v, size_t *nodes)
{
	const char *key;
	json_t *c;
	size_t i;
	int deepest = 0;

	++*nodes;
	if (json_is_object(v)) {
		json_object_foreach ((json_t *)v, key, c) {
			int d = measure(c, nodes);

			deepest = d > deepest ? d : deepest;
		}
	} else if (json_is_array(v)) {
		json_array_foreach (v, i, c) {
			int d = measure(c, nodes);

			deepest = d > deepest ? d : deepest;
		}
	} else {
		return 0;
	}
	return deepest + 1;
}

/* YAML reads a key of a flow mapping ("key": value, the JSON form) only if it spans at most
 * 1024 characters; whether every key of v does, written as below (kept short of the bound). */
#define YAML_IMPLICIT_KEY_MAX 1000

static int keys_fit(const json_t *v)
{
	const char *key;
	json_t *c;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach ((json_t *)v, key, c) {
			json_t *k = json_string(key);
			char *text = k ? json_dumps(k, JSON_ENSURE_ASCII | JSON_ENCODE_ANY) : NULL;
			int fits = text && strlen(text) <= YAML_IMPLICIT_KEY_MAX;

			free(text);
			json_decref(k);
			if (!fits || !keys_fit(c))
				return 0;
		}
	} else if (json_is_array(v)) {
		json_array_foreach (v, i, c)
			if (!keys_fit(c))
				return 0;
	}
	return 1;
}

/*
 * JSON text for YAML: jansson's, ASCII only, with each surrogate pair (\uD83D\uDE00), which
 * YAML does not take, as YAML's \U0001F600.
 */
static char *as_yaml(const json_t *j)
{
	char *json = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
	size_t n = strlen(json), o = 0;
	char *out = xmalloc(n + 1);

	for (size_t i = 0; i < n;) {
		unsigned hi, lo;

		if (i + 12 <= n && json[i] == '\\' && json[i + 1] == 'u' &&
		    sscanf(json + i + 2, "%4x", &hi) == 1 && hi >= 0xd800 && hi < 0xdc00 &&
		    json[i + 6] == '\\' && json[i + 7] == 'u' &&
		    sscanf(json + i + 8, "%4x", &lo) == 1) {
			o += (size_t)snprintf(out + o, n + 1 - o, "\\U%08X",
					      0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00));
			i += 12;
		} else if (json[i] == '\\') {
			out[o++] = json[i++]; /* an escape's second character is never a '\\' */
			out[o++] = json[i++];
		} else {
			out[o++] = json[i++];
		}
	}
	out[o] = '\0';
	free(json);
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct err err = ERR_INIT;
	json_t *j = NULL, *again = NULL;
	size_t nodes = 0;
	char *out;
	int ret = yaml_to_json(text, size, &j, &err);

	if (ret < 0) {
		if (ret != -err.code || !err.msg[0] ||
		    (err.code != EINVAL && err.code != E2BIG && err.code != ENODATA &&
		     err.code != EFBIG))
			fail("refused without a message or with another code", text, size);
		return 0;
	}
	if (measure(j, &nodes) > YAML_MAX_DEPTH || nodes > YAML_MAX_NODES)
		fail("accepted past the limits", text, size);
	if (!keys_fit(j)) {
		json_decref(j);
		return 0;
	}
	out = as_yaml(j);
	if (yaml_to_json(out, strlen(out), &again, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		fail("its JSON is refused", out, strlen(out));
	}
	if (!json_equal(j, again))
		fail("its JSON reads otherwise", out, strlen(out));
	free(out);
	json_decref(j);
	json_decref(again);
	return 0;
}
