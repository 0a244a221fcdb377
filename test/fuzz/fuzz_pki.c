/*
 * fuzz_pki: certificate requests and certificates from untrusted text, as an agent's
 * enrollment sends them to kiyot. Each input is read as a request (its key id) and as a
 * certificate checked against a CA made once; besides what the sanitizers catch, it checks the
 * promises of pki.h: a refusal is -EINVAL or -EKEYREJECTED with a message, and an accepted
 * request has a 64-digit hex key id and can be signed.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pki.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *ca, *ca_key;

static void refused(int ret, const struct err *err)
{
	if (ret != -EINVAL && ret != -EKEYREJECTED)
		abort();
	if (!err->msg[0])
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err err = ERR_INIT;
	char *text, *cert = NULL;
	char id[65];
	int ret;

	if (!ca && pki_ca_new("fuzz-ca", 1, &ca, &ca_key, &err) < 0)
		abort();
	text = xstrndup((const char *)data, size);
	ret = pki_csr_key_id(text, id, &err);
	if (ret < 0) {
		refused(ret, &err);
	} else {
		if (strlen(id) != 64 || strspn(id, "0123456789abcdef") != 64)
			abort();
		if (pki_sign(ca, ca_key, text, "cell-f", PKI_SERVER, 1, &cert, &err) < 0)
			abort(); /* a request whose key id was read must be signable */
		free(cert);
	}
	err = (struct err)ERR_INIT;
	ret = pki_verify(ca, text, "cell-f", PKI_SERVER, NULL, &err);
	if (ret < 0)
		refused(ret, &err);
	free(text);
	return 0;
}
