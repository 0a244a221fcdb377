/*
 * testcert.h: keys and certificates of a test's own CA (pki.h), for the tests of the channels
 * kiyot and its agents talk over (gRPC with TLS, the cell feed).
 */
#ifndef KIYOT_TESTCERT_H
#define KIYOT_TESTCERT_H

#include "pki.h"

/* A key and the certificate a CA gave it. */
struct test_ident {
	char *key, *cert;
};

/* A new key and the certificate ca (with ca_key) signs for it, naming name, for usage u, for
 * a day; fails the test on an error. */
void test_ident_make(const char *ca, const char *ca_key, const char *name, enum pki_usage u,
		     struct test_ident *id);
void test_ident_release(struct test_ident *id);

#endif
