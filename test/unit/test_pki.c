/* test_pki.c: the CA, cell keys, requests and certificates of common/pki.c. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/ssl.h>

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

/* A certificate of the fixture's CA for name, with its key. */
static void issue(struct fix *f, const char *name, enum pki_usage usage, char **cert, char **key)
{
	struct err err = ERR_INIT;
	_cleanup_free_ char *csr = NULL;

	if (pki_key_new(key, &err) < 0 || pki_csr_new(*key, name, &csr, &err) < 0 ||
	    pki_sign(f->ca, f->ca_key, csr, name, usage, 30, cert, &err) < 0)
		fail_msg("%s", err.msg);
}

/* Each side of a TLS connection made from pki_tls_ctx contexts shows only its own
 * certificate: the peer has the CA, and every certificate sent is one more parsed and kept
 * with the connection (4 KB for each of a kiyot's cell feeds). */
static void test_pki__tls_peers_send_their_certificate_without_the_ca(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *scert = NULL, *skey = NULL, *ccert = NULL, *ckey = NULL;
	SSL_CTX *sctx = NULL, *cctx = NULL;
	SSL *srv, *cli;
	int sv[2], sdone = 0, cdone = 0;

	issue(f, "cell-a", PKI_SERVER, &scert, &skey);
	issue(f, "kiyot", PKI_CLIENT, &ccert, &ckey);
	if (pki_tls_ctx(f->ca, scert, skey, PKI_SERVER, "kiyot", &sctx, &err) < 0 ||
	    pki_tls_ctx(f->ca, ccert, ckey, PKI_CLIENT, "cell-a", &cctx, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	srv = SSL_new(sctx);
	cli = SSL_new(cctx);
	assert_int_equal(SSL_set_fd(srv, sv[0]), 1);
	assert_int_equal(SSL_set_fd(cli, sv[1]), 1);
	/* one thread, both sides: each step goes as far as the other's bytes let it */
	for (int i = 0; i < 1000 && !(sdone && cdone); i++) {
		int r;

		if (!cdone && (r = SSL_connect(cli)) != 1)
			assert_int_equal(SSL_get_error(cli, r), SSL_ERROR_WANT_READ);
		else
			cdone = 1;
		if (!sdone && (r = SSL_accept(srv)) != 1)
			assert_int_equal(SSL_get_error(srv, r), SSL_ERROR_WANT_READ);
		else
			sdone = 1;
	}
	assert_true(sdone && cdone);
	assert_int_equal(SSL_get_verify_result(cli), X509_V_OK);
	assert_int_equal(SSL_get_verify_result(srv), X509_V_OK);
	/* a client's list has the server's certificate first; a server's leaves the client's
	 * own certificate out */
	assert_int_equal(sk_X509_num(SSL_get_peer_cert_chain(cli)), 1);
	assert_int_equal(sk_X509_num(SSL_get_peer_cert_chain(srv)), 0);
	/* and what each verified still reaches the CA */
	assert_int_equal(sk_X509_num(SSL_get0_verified_chain(cli)), 2);
	assert_int_equal(sk_X509_num(SSL_get0_verified_chain(srv)), 2);
	SSL_free(srv);
	SSL_free(cli);
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
	close(sv[0]);
	close(sv[1]);
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
		cmocka_unit_test_setup_teardown(
			test_pki__tls_peers_send_their_certificate_without_the_ca, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
