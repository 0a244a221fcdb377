/*
 * fuzz_image_manifest: manifests, indexes and image configs as a hostile registry serves them,
 * read as the agent's registry client reads them (image_internal.h). The first byte picks the
 * Content-Type the registry sent, the second whether the body is read as a manifest that may
 * be an index, as the manifest an index pointed at, or as an image config blob; the rest is
 * the body. Besides what the sanitizers catch, it checks the readers' promises: a refusal is
 * EINVAL or ENOENT with a message; an accepted manifest has sha256 digests, sizes that are
 * not negative and at most 256 layers, an index gives a sha256 digest; and what was read
 * reads back the same when written out again.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_internal.h"
#include "registry.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const content_types[] = {
	"",
	"application/vnd.oci.image.manifest.v1+json",
	"application/vnd.oci.image.index.v1+json",
	"application/vnd.docker.distribution.manifest.v2+json",
	"application/vnd.docker.distribution.manifest.list.v2+json",
	"application/vnd.docker.distribution.manifest.v1+prettyjws",
	"application/json",
};

static const char digest[] = "sha256:0123456789abcdef0123456789abcdef"
			     "0123456789abcdef0123456789abcdef";

static void refused(int ret, const struct err *err, const char *what)
{
	if (ret != -err->code || (err->code != EINVAL && err->code != ENOENT) || !err->msg[0]) {
		fprintf(stderr, "%s: refused with %d, error %d \"%s\"\n", what, ret, err->code,
			err->msg);
		abort();
	}
}

static void fail(const char *what, const char *text)
{
	fprintf(stderr, "%s\n%s\n", what, text ? text : "");
	abort();
}

/* Reads text as a registry's answer of that type. */
static int read_doc(const char *text, size_t len, const char *type, bool index_ok,
		    struct img_manifest *m, char **pick, struct err *err)
{
	struct reg_manifest doc = { (char *)text, len, (char *)type, (char *)digest };

	return image_manifest_read(&doc, "fuzz", index_ok, m, pick, err);
}

/* m as an OCI manifest, read again: the same manifest. */
static void manifest_again(const struct img_manifest *m)
{
	json_t *layers = json_array();
	json_t *j = json_pack("{s:i, s:{s:s, s:I}, s:o}", "schemaVersion", 2, "config", "digest",
			      m->config_digest, "size", (json_int_t)m->config_size, "layers",
			      layers);
	struct img_manifest again = { 0 };
	struct err err = ERR_INIT;
	char *text, *pick = NULL;

	for (size_t i = 0; i < m->n_layers; i++)
		json_array_append_new(layers,
				      json_pack("{s:s, s:s, s:I}", "mediaType",
						"application/vnd.oci.image.layer.v1.tar+gzip",
						"digest", m->layers[i].digest, "size",
						(json_int_t)m->layers[i].size));
	text = json_dumps(j, JSON_COMPACT);
	if (read_doc(text, strlen(text), "", true, &again, &pick, &err) < 0 || pick)
		fail(err.msg, text);
	if (strcmp(again.config_digest, m->config_digest) || again.config_size != m->config_size ||
	    again.n_layers != m->n_layers)
		fail("read back otherwise", text);
	for (size_t i = 0; i < m->n_layers; i++)
		if (strcmp(again.layers[i].digest, m->layers[i].digest) ||
		    again.layers[i].size != m->layers[i].size)
			fail("a layer read back otherwise", text);
	image_manifest_release(&again);
	json_decref(j);
	free(text);
}

static void check_manifest(const char *text, size_t len, const char *type, bool index_ok)
{
	struct img_manifest m = { 0 };
	struct err err = ERR_INIT;
	char *pick = NULL;
	int ret = read_doc(text, len, type, index_ok, &m, &pick, &err);

	if (ret < 0) {
		refused(ret, &err, "manifest");
		if (pick)
			fail("a refusal picked a manifest", text);
	} else if (pick) {
		if (!index_ok || !image_digest_valid(pick) || m.config_digest || m.n_layers)
			fail("an index picked a bad digest or filled the manifest", text);
	} else {
		if (!image_digest_valid(m.config_digest) || m.config_size < 0 || m.n_layers > 256)
			fail("a manifest out of bounds", text);
		for (size_t i = 0; i < m.n_layers; i++)
			if (!image_digest_valid(m.layers[i].digest) || m.layers[i].size < 0)
				fail("a layer out of bounds", text);
		manifest_again(&m);
	}
	free(pick);
	image_manifest_release(&m);
}

static bool strv_equal(char *const *a, char *const *b)
{
	size_t i;

	for (i = 0; a[i] && b[i]; i++)
		if (strcmp(a[i], b[i]))
			return false;
	return !a[i] && !b[i];
}

static void check_config(const char *text, size_t len)
{
	struct image_info *info = xcalloc(1, sizeof(*info));
	struct image_info *again = xcalloc(1, sizeof(*again));
	struct err err = ERR_INIT;
	char *out;
	json_t *j;
	int ret = image_config_read(text, len, digest, info, &err);

	if (ret < 0) {
		refused(ret, &err, "config");
		if (err.code != EINVAL)
			fail("a config refused with another code than EINVAL", text);
		image_info_free(info);
		image_info_free(again);
		return;
	}
	if (!info->entrypoint || !info->cmd || !info->env || !info->user || !info->working_dir ||
	    strv_len(info->entrypoint) > 4096 || strv_len(info->cmd) > 4096 ||
	    strv_len(info->env) > 4096)
		fail("a config out of bounds", text);
	j = json_pack("{s:{s:o, s:o, s:o, s:s, s:s}}", "config", "Entrypoint",
		      image_strv_to_json(info->entrypoint), "Cmd", image_strv_to_json(info->cmd),
		      "Env", image_strv_to_json(info->env), "User", info->user, "WorkingDir",
		      info->working_dir);
	out = json_dumps(j, JSON_COMPACT);
	if (image_config_read(out, strlen(out), digest, again, &err) < 0)
		fail(err.msg, out);
	if (!strv_equal(info->entrypoint, again->entrypoint) ||
	    !strv_equal(info->cmd, again->cmd) || !strv_equal(info->env, again->env) ||
	    strcmp(info->user, again->user) || strcmp(info->working_dir, again->working_dir))
		fail("a config read back otherwise", out);
	free(out);
	json_decref(j);
	image_info_free(info);
	image_info_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *type, *text = (const char *)data + 2;

	if (size < 2)
		return 0;
	type = content_types[data[0] % (sizeof(content_types) / sizeof(content_types[0]))];
	switch (data[1] % 3) {
	case 0:
		check_manifest(text, size - 2, type, true);
		break;
	case 1:
		check_manifest(text, size - 2, type, false);
		break;
	default:
		check_config(text, size - 2);
	}
	return 0;
}
