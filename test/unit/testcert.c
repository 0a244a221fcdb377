/*
 * testcert.c: keys and certificates for tests (see testcert.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>

#include "testcert.h"

void test_ident_make(const char *ca, const char *ca_key, const char *name, enum pki_usage u,
		     struct test_ident *id)
{
	struct err err = ERR_INIT;
	char *csr = NULL;

	if (pki_key_new(&id->key, &err) < 0 || pki_csr_new(id->key, name, &csr, &err) < 0 ||
	    pki_sign(ca, ca_key, csr, name, u, 1, &id->cert, &err) < 0)
		fail_msg("%s: %s", name, err.msg);
	free(csr);
}

void test_ident_release(struct test_ident *id)
{
	free(id->key);
	free(id->cert);
	id->key = id->cert = NULL;
}
