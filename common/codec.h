/*
 * codec.h: the byte encodings the daemons share: base64 (OpenSSL's, standard alphabet with
 * padding), lowercase hex, and RFC 3986 percent-encoding. Pure functions; thread safe.
 */
#ifndef KIYOT_CODEC_H
#define KIYOT_CODEC_H

#include <stddef.h>

#include "err.h"

/* Standard base64 of n bytes, NUL-terminated; the caller frees it. */
char *b64_encode(const void *p, size_t n);
/* Decodes base64 text, whitespace anywhere ignored (PEM, kubeconfig data). *out is
 * NUL-terminated (for text) and *len excludes the NUL; the caller frees *out. -EINVAL, saying
 * why, for empty input, a length that is not a multiple of 4, bad characters or misplaced
 * padding. */
int b64_decode(const char *in, char **out, size_t *len, struct err *err);
/* Lowercase hex of n bytes into out, which holds 2 * n + 1 bytes (NUL-terminated). */
void hex_encode(const void *p, size_t n, char *out);
/* Percent-encodes s keeping only RFC 3986's unreserved characters (ALPHA DIGIT - . _ ~), with
 * uppercase hex digits, as SigV4 and URL query values want; the caller frees it. */
char *pct_encode(const char *s);

#endif
