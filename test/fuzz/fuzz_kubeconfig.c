/*
 * fuzz_kubeconfig: kubeconfig text as kiyot reads it for the API server (kube.h's
 * kube_kubeconfig_parse: YAML, the current context's cluster and user, *-data fields in
 * base64), read as the file /etc/kiyot/kubeconfig. No file is read. Besides what the
 * sanitizers catch, it checks the reader's promises: a refusal has a message naming the
 * kubeconfig and a negative errno, and leaves its outputs untouched; accepted credentials have
 * a server without a trailing slash, absolute file names (relative ones taken from
 * /etc/kiyot), a file or data for each of the CA, certificate and key but not both, decoded
 * data no longer than the text, and a token or a token file but not both.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *text, size_t len)
{
	fprintf(stderr, "%s\n%.*s\n", what, (int)len, text);
	abort();
}

static int absolute(const char *path)
{
	return !path || path[0] == '/';
}

/* A file and data are never both given, data is never longer than the text it came from. */
static int one_of(const char *file, const char *data, size_t len, size_t size)
{
	return !(file && data) && (!data || len < size) && absolute(file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	static const struct kube_auth none;
	struct kube_auth a;
	struct err err = ERR_INIT;
	char *token_file = NULL;
	size_t n;
	int ret;

	memset(&a, 0, sizeof(a));
	ret = kube_kubeconfig_parse(text, size, "/etc/kiyot/kubeconfig", &a, &token_file, &err);

	if (ret < 0) {
		if (ret != -err.code || !strstr(err.msg, "kubeconfig") || token_file ||
		    memcmp(&a, &none, sizeof(a)))
			fail("refused without a message or errno, or with outputs", text, size);
		return 0;
	}
	n = a.server ? strlen(a.server) : 0;
	if (!n || a.server[n - 1] == '/')
		fail("a server that is empty or ends in '/'", text, size);
	if (!one_of(a.ca_file, a.ca_data, a.ca_len, size) ||
	    !one_of(a.cert_file, a.cert_data, a.cert_len, size) ||
	    !one_of(a.key_file, a.key_data, a.key_len, size))
		fail("a file and data, data longer than the text or a relative file", text, size);
	if ((a.token && token_file) || !absolute(token_file))
		fail("a token and a token file, or a relative token file", text, size);
	free(token_file);
	kube_auth_release(&a);
	return 0;
}
