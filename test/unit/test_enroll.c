/* test_enroll: a cell's enrollment state machine (cell-agent/enroll.c): new, answering its
 * request and proof; taking only a certificate of its CA for its name and key; enrolled, kept
 * across restarts, taking no other. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "enroll.h"
#include "fsutil.h"
#include "pki.h"
#include "xalloc.h"

#define SECRET "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

struct fix {
	char root[64];
	char *dir;
	char *ca, *ca_key;
};

static int setup(void **state)
{
	struct fix *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;

	snprintf(f->root, sizeof(f->root), "/tmp/kiyot-test-enroll-XXXXXX");
	if (!mkdtemp(f->root))
		fail_msg("mkdtemp");
	f->dir = xasprintf("%s/tls", f->root);
	if (pki_ca_new("kiyot-cells", 1, &f->ca, &f->ca_key, &err) < 0)
		fail_msg("%s", err.msg);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *k = xasprintf("%s/key.pem", f->dir);
	_cleanup_free_ char *c = xasprintf("%s/cert.pem", f->dir);

	unlink(k);
	unlink(c);
	rmdir(f->dir);
	rmdir(f->root);
	free(f->dir);
	free(f->ca);
	free(f->ca_key);
	free(f);
	return 0;
}

/* What kiyot does with the cell's answer: checks the proof, signs the request as name. */
static char *kiyot_signs(struct fix *f, struct enroll *e, const char *name)
{
	struct err err = ERR_INIT;
	const char *csr = NULL;
	char proof[65];
	char *cert = NULL;

	assert_int_equal(enroll_request(e, &csr, proof, &err), 0);
	assert_int_equal(pki_enroll_check(SECRET, "cell-a", csr, proof, &err), 0);
	if (pki_sign(f->ca, f->ca_key, csr, name, PKI_SERVER, 1, &cert, &err) < 0)
		fail_msg("%s", err.msg);
	return cert;
}

static void test_enroll__new_cell_answers_a_proof_of_its_secret_for_its_key(void **state)
{
	struct fix *f = *state;
	struct enroll *e = NULL;
	struct err err = ERR_INIT;
	const char *csr = NULL;
	char proof[65], key_id[65];
	_cleanup_free_ char *kp = xasprintf("%s/key.pem", f->dir);
	struct stat st;

	assert_int_equal(enroll_open(f->dir, "cell-a", f->ca, SECRET, &e, &err), 0);
	assert_false(enroll_done(e));
	assert_null(enroll_cert(e));
	assert_int_equal(enroll_request(e, &csr, proof, &err), 0);
	assert_int_equal(pki_csr_key_id(csr, key_id, &err), 0);
	/* kiyot, holding the secret, checks it; another secret does not */
	assert_int_equal(pki_enroll_check(SECRET, "cell-a", csr, proof, &err), 0);
	assert_int_equal(pki_enroll_check("0" SECRET, "cell-a", csr, proof, &err), -EKEYREJECTED);
	/* the key is kept, owner-only, so a restart before kiyot answered asks for the same */
	assert_int_equal(stat(kp, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	enroll_free(e);
	e = NULL;
	assert_int_equal(enroll_open(f->dir, "cell-a", f->ca, SECRET, &e, &err), 0);
	assert_int_equal(enroll_request(e, &csr, proof, &err), 0);
	{
		char again[65];

		assert_int_equal(pki_csr_key_id(csr, again, &err), 0);
		assert_string_equal(again, key_id);
	}
	enroll_free(e);
}

static void test_enroll__takes_only_a_certificate_of_its_ca_name_and_key(void **state)
{
	struct fix *f = *state;
	struct enroll *e = NULL;
	struct err err = ERR_INIT;
	char *other_ca = NULL, *other_key = NULL, *key2 = NULL, *csr2 = NULL, *cert = NULL;
	const char *csr = NULL;
	char proof[65];

	assert_int_equal(enroll_open(f->dir, "cell-a", f->ca, SECRET, &e, &err), 0);
	/* for another cell */
	cert = kiyot_signs(f, e, "cell-b");
	assert_int_equal(enroll_accept(e, cert, &err), -EKEYREJECTED);
	free(cert);
	/* of another CA */
	assert_int_equal(enroll_request(e, &csr, proof, &err), 0);
	if (pki_ca_new("kiyot-cells", 1, &other_ca, &other_key, &err) < 0 ||
	    pki_sign(other_ca, other_key, csr, "cell-a", PKI_SERVER, 1, &cert, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(enroll_accept(e, cert, &err), -EKEYREJECTED);
	free(cert);
	/* for another key */
	if (pki_key_new(&key2, &err) < 0 || pki_csr_new(key2, "cell-a", &csr2, &err) < 0 ||
	    pki_sign(f->ca, f->ca_key, csr2, "cell-a", PKI_SERVER, 1, &cert, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(enroll_accept(e, cert, &err), -EKEYREJECTED);
	free(cert);
	/* for client use */
	if (pki_sign(f->ca, f->ca_key, csr, "cell-a", PKI_CLIENT, 1, &cert, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(enroll_accept(e, cert, &err), -EKEYREJECTED);
	free(cert);
	/* no certificate at all */
	assert_int_equal(enroll_accept(e, "junk", &err), -EINVAL);
	assert_false(enroll_done(e));
	enroll_free(e);
	free(other_ca);
	free(other_key);
	free(key2);
	free(csr2);
}

static void test_enroll__enrolled_cell_keeps_its_certificate_and_takes_no_other(void **state)
{
	struct fix *f = *state;
	struct enroll *e = NULL;
	struct err err = ERR_INIT;
	_cleanup_free_ char *cp = xasprintf("%s/cert.pem", f->dir);
	char *cert, *cert2;
	const char *csr = NULL;
	char proof[65];
	struct stat st;

	assert_int_equal(enroll_open(f->dir, "cell-a", f->ca, SECRET, &e, &err), 0);
	cert = kiyot_signs(f, e, "cell-a");
	cert2 = kiyot_signs(f, e, "cell-a");
	assert_int_equal(enroll_accept(e, cert, &err), 0);
	assert_true(enroll_done(e));
	assert_string_equal(enroll_cert(e), cert);
	assert_int_equal(
		pki_verify(f->ca, enroll_cert(e), "cell-a", PKI_SERVER, enroll_key(e), &err), 0);
	assert_int_equal(stat(cp, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	/* the secret is spent: no request, no other certificate */
	assert_int_equal(enroll_request(e, &csr, proof, &err), -EBUSY);
	assert_int_equal(enroll_accept(e, cert2, &err), -EBUSY);
	enroll_free(e);
	/* a restart (even with the secret gone from the document) is enrolled at once */
	e = NULL;
	assert_int_equal(enroll_open(f->dir, "cell-a", f->ca, "", &e, &err), 0);
	assert_true(enroll_done(e));
	assert_string_equal(enroll_cert(e), cert);
	enroll_free(e);
	free(cert);
	free(cert2);
}

static void test_enroll__certificate_of_another_ca_on_disk_means_enrolling_again(void **state)
{
	struct fix *f = *state;
	struct enroll *e = NULL;
	struct err err = ERR_INIT;
	char *other_ca = NULL, *other_key = NULL;
	char *cert;

	assert_int_equal(enroll_open(f->dir, "cell-a", f->ca, SECRET, &e, &err), 0);
	cert = kiyot_signs(f, e, "cell-a");
	assert_int_equal(enroll_accept(e, cert, &err), 0);
	enroll_free(e);
	/* the document now names another CA (kiyot's state was replaced) */
	if (pki_ca_new("kiyot-cells", 1, &other_ca, &other_key, &err) < 0)
		fail_msg("%s", err.msg);
	e = NULL;
	assert_int_equal(enroll_open(f->dir, "cell-a", other_ca, SECRET, &e, &err), 0);
	assert_false(enroll_done(e));
	enroll_free(e);
	/* and without a secret nothing can enroll it: refused at start */
	e = NULL;
	assert_int_equal(enroll_open(f->dir, "cell-a", other_ca, "", &e, &err), -EINVAL);
	assert_null(e);
	assert_non_null(strstr(err.msg, "no enrollment secret"));
	free(cert);
	free(other_ca);
	free(other_key);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_enroll__new_cell_answers_a_proof_of_its_secret_for_its_key, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_enroll__takes_only_a_certificate_of_its_ca_name_and_key, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_enroll__enrolled_cell_keeps_its_certificate_and_takes_no_other, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_enroll__certificate_of_another_ca_on_disk_means_enrolling_again, setup,
			teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
