/*
 * codec.c: base64 through OpenSSL's EVP block functions, hex and percent-encoding.
 */
#include "codec.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <string.h>

#include "xalloc.h"

char *b64_encode(const void *p, size_t n)
{
	char *out = xmalloc((n + 2) / 3 * 4 + 1);

	EVP_EncodeBlock((unsigned char *)out, p, (int)n);
	return out;
}

int b64_decode(const char *in, char **out, size_t *len, struct err *err)
{
	size_t n = strlen(in), w = 0, pad = 0;
	_cleanup_free_ char *clean = xmalloc(n + 1);
	char *dec;
	int got;

	for (size_t i = 0; i < n; i++)
		if (!isspace((unsigned char)in[i]))
			clean[w++] = in[i];
	clean[w] = '\0';
	if (w == 0 || w % 4 != 0)
		return err_set(err, EINVAL, "not base64 (length %zu is not a multiple of 4)", w);
	while (pad < 2 && clean[w - 1 - pad] == '=')
		pad++;
	if (strcspn(clean, "=") != w - pad)
		return err_set(err, EINVAL, "not base64 (padding inside the text)");
	dec = xmalloc(w / 4 * 3 + 1);
	got = EVP_DecodeBlock((unsigned char *)dec, (const unsigned char *)clean, (int)w);
	if (got < 0 || (size_t)got < pad) {
		free(dec);
		return err_set(err, EINVAL, "not base64 (a character outside its alphabet)");
	}
	*len = (size_t)got - pad;
	dec[*len] = '\0';
	*out = dec;
	return 0;
}

void hex_encode(const void *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

char *pct_encode(const char *s)
{
	static const char digits[] = "0123456789ABCDEF";
	size_t n = strlen(s), w = 0;
	char *o = xmalloc(n * 3 + 1);

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
			o[w++] = (char)ch;
		} else {
			o[w++] = '%';
			o[w++] = digits[ch >> 4];
			o[w++] = digits[ch & 15];
		}
	}
	o[w] = '\0';
	return o;
}
