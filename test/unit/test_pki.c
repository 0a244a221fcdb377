/* test_pki.c: the CA, cell keys, requests and certificates of common/pki.c. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pki.h"
#include "xalloc.h"

struct fix {
	char *ca, *ca_key;
	char *key, *csr;
};

static int setup(void **state)
{
	struct fix *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;

	if (pki_ca_new("kiyot-ca", 3650, &f->ca, &f->ca_key, &err) < 0 ||
	    pki_key_new(&f->key, &err) < 0 || pki_csr_new(f->key, "cell-a", &f->csr, &err) < 0)
		fail_msg("%s", err.msg);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	free(f->ca);
	free(f->ca_key);
	free(f->key);
	free(f->csr);
	free(f);
	return 0;
}

static void test_pki__signed_cell_certificate_verifies_for_its_name_usage_and_key(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *cert = NULL;
	_cleanup_free_ char *other_key = NULL;

	if (pki_sign(f->ca, f->ca_key, f->csr, "cell-a", PKI_SERVER, 30, &cert, &err) < 0)
		fail_msg("%s", err.msg);
	assert_non_null(strstr(cert, "-----BEGIN CERTIFICATE-----"));
	if (pki_verify(f->ca, cert, "cell-a", PKI_SERVER, f->key, &err) < 0)
		fail_msg("%s", err.msg);
	/* another cell's name */
	assert_int_equal(pki_verify(f->ca, cert, "cell-b", PKI_SERVER, NULL, &err), -EKEYREJECTED);
	assert_string_equal(err.msg, "certificate names cell-a, not cell-b");
	/* a server certificate is no client certificate */
	assert_int_equal(pki_verify(f->ca, cert, "cell-a", PKI_CLIENT, NULL, &err), -EKEYREJECTED);
	/* another key */
	assert_int_equal(pki_key_new(&other_key, &err), 0);
	assert_int_equal(pki_verify(f->ca, cert, "cell-a", PKI_SERVER, other_key, &err),
			 -EKEYREJECTED);
	assert_non_null(strstr(err.msg, "does not certify this key"));
}

static void test_pki__the_name_signed_is_the_callers_not_the_requests(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *cert = NULL;

	/* the request says cell-a; kiyot signs for the cell it launched */
	if (pki_sign(f->ca, f->ca_key, f->csr, "cell-z", PKI_CLIENT, 1, &cert, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(pki_verify(f->ca, cert, "cell-z", PKI_CLIENT, f->key, &err), 0);
	assert_int_equal(pki_verify(f->ca, cert, "cell-a", PKI_CLIENT, NULL, &err), -EKEYREJECTED);
}

static void test_pki__another_ca_does_not_vouch(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *ca2 = NULL, *ca2_key = NULL, *cert = NULL;

	assert_int_equal(pki_ca_new("other-ca", 10, &ca2, &ca2_key, &err), 0);
	assert_int_equal(pki_sign(ca2, ca2_key, f->csr, "cell-a", PKI_SERVER, 10, &cert, &err), 0);
	assert_int_equal(pki_verify(f->ca, cert, "cell-a", PKI_SERVER, NULL, &err), -EKEYREJECTED);
	assert_non_null(strstr(err.msg, "certificate of cell-a: "));
	/* and a CA key that is not the CA certificate's is refused */
	free(cert);
	cert = NULL;
	assert_int_equal(pki_sign(f->ca, ca2_key, f->csr, "cell-a", PKI_SERVER, 10, &cert, &err),
			 -EINVAL);
	assert_null(cert);
}

static void test_pki__key_id_binds_the_requests_key(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *csr2 = NULL, *key2 = NULL;
	char a[65], b[65], c[65];

	assert_int_equal(pki_csr_key_id(f->csr, a, &err), 0);
	assert_int_equal(strlen(a), 64);
	/* the same key asked again: the same id; another key: another */
	assert_int_equal(pki_csr_new(f->key, "cell-b", &csr2, &err), 0);
	assert_int_equal(pki_csr_key_id(csr2, b, &err), 0);
	assert_string_equal(a, b);
	assert_int_equal(pki_key_new(&key2, &err), 0);
	free(csr2);
	csr2 = NULL;
	assert_int_equal(pki_csr_new(key2, "cell-a", &csr2, &err), 0);
	assert_int_equal(pki_csr_key_id(csr2, c, &err), 0);
	assert_string_not_equal(a, c);
}

static void test_pki__bad_input_is_refused_saying_what(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *big = xmalloc(PKI_MAX_PEM + 2);
	_cleanup_free_ char *tampered = xstrdup(f->csr);
	char *cert = NULL;
	char id[65];
	size_t mid = strlen(tampered) / 2;

	memset(big, 'A', PKI_MAX_PEM + 1);
	big[PKI_MAX_PEM + 1] = '\0';
	assert_int_equal(pki_csr_key_id(big, id, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "over 16 KiB"));
	assert_int_equal(pki_csr_key_id("", id, &err), -EINVAL);
	assert_int_equal(pki_csr_key_id("not pem", id, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "certificate request: "));
	/* one base64 character changed in the middle of the request */
	tampered[mid] = tampered[mid] == 'A' ? 'B' : 'A';
	assert_true(pki_sign(f->ca, f->ca_key, tampered, "cell-a", PKI_SERVER, 1, &cert, &err) < 0);
	assert_null(cert);
	assert_int_equal(pki_sign(f->ca, f->ca_key, f->csr, "Cell A", PKI_SERVER, 1, &cert, &err),
			 -EINVAL);
	assert_int_equal(pki_sign(f->ca, f->ca_key, f->csr, "cell-a", PKI_SERVER, 0, &cert, &err),
			 -EINVAL);
	assert_int_equal(pki_csr_new(f->key, "", &cert, &err), -EINVAL);
	assert_int_equal(pki_csr_new("junk", "cell-a", &cert, &err), -EINVAL);
	assert_int_equal(pki_name_valid("-x"), 0);
	assert_int_equal(pki_name_valid("a.b-c0"), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_pki__signed_cell_certificate_verifies_for_its_name_usage_and_key,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_pki__the_name_signed_is_the_callers_not_the_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pki__another_ca_does_not_vouch, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_pki__key_id_binds_the_requests_key, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_pki__bad_input_is_refused_saying_what, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
