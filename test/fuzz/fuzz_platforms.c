/*
 * fuzz_platforms: manifests, indexes and image configs as a hostile registry serves them, read
 * as a node reads them to learn which architectures an image offers (platforms.h). The first
 * byte picks the Content-Type the registry sent, the second whether the body is read as a
 * manifest or index, or as an image config; the rest is the body. Besides what the sanitizers
 * catch, it checks the readers' promises: a refusal is EINVAL with a message; an index gives
 * only the amd64 and arm64 bits and no config digest; an image manifest gives a sha256 config
 * digest and a size that is not negative.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platforms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const content_types[] = {
	"",
	"application/vnd.oci.image.manifest.v1+json",
	"application/vnd.oci.image.index.v1+json",
	"application/vnd.docker.distribution.manifest.v2+json",
	"application/vnd.docker.distribution.manifest.list.v2+json",
};

static void fail(const char *what, const struct err *err)
{
	fprintf(stderr, "%s (error %d \"%s\")\n", what, err->code, err->msg);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err err = ERR_INIT;
	const char *ct;
	char *digest = NULL;
	int64_t csize = -1;
	unsigned arch = 99;
	int ret;

	if (size < 2)
		return 0;
	ct = content_types[data[0] % (sizeof(content_types) / sizeof(content_types[0]))];
	if (data[1] & 1) {
		ret = oci_platforms_config((const char *)data + 2, size - 2, &arch, &err);
		if (ret < 0 && (ret != -EINVAL || err.code != EINVAL || !err.msg[0]))
			fail("config refused without EINVAL and a message", &err);
		if (ret == 0 && arch != 0 && arch != OCI_ARCH_AMD64 && arch != OCI_ARCH_ARM64)
			fail("config gave more than one architecture", &err);
		return 0;
	}
	ret = oci_platforms_parse((const char *)data + 2, size - 2, ct, &arch, &digest, &csize,
				  &err);
	if (ret < 0) {
		if (ret != -EINVAL || err.code != EINVAL || !err.msg[0] || digest)
			fail("manifest refused without EINVAL and a message", &err);
		return 0;
	}
	if (arch & ~(OCI_ARCH_AMD64 | OCI_ARCH_ARM64))
		fail("unknown architecture bits", &err);
	if (digest && (!image_digest_valid(digest) || csize < 0 || arch))
		fail("manifest with a bad config digest or size", &err);
	free(digest);
	(void)oci_arch_names(arch);
	return 0;
}
