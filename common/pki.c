/*
 * pki.c: keys, certificate requests and certificates for the kiyot-agent channel (pki.h), on
 * OpenSSL 3's EVP, X509 and X509_REQ interfaces.
 */
#include "pki.h"

#include <errno.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <string.h>

#include "codec.h"
#include "xalloc.h"

#define CLOCK_SKEW_S 60

/* Sets err from OpenSSL's error queue (and empties it): "<what>: <OpenSSL's reason>". */
static int ssl_fail(struct err *err, int code, const char *what)
{
	unsigned long e = ERR_get_error();
	char reason[256] = "unknown error";

	if (e)
		ERR_error_string_n(e, reason, sizeof(reason));
	ERR_clear_error();
	return err_set(err, code, "%s: %s", what, reason);
}

/* A read-only BIO over pem, refusing text over PKI_MAX_PEM. */
static BIO *pem_bio(const char *pem, const char *what, struct err *err)
{
	size_t n = pem ? strnlen(pem, PKI_MAX_PEM + 1) : 0;
	BIO *b;

	if (n == 0 || n > PKI_MAX_PEM) {
		err_set(err, EINVAL, "%s: %s", what, n ? "over 16 KiB of PEM" : "empty");
		return NULL;
	}
	b = BIO_new_mem_buf(pem, (int)n);
	if (!b)
		ssl_fail(err, ENOMEM, what);
	return b;
}

/* What a memory BIO holds, as a new C string. */
static char *bio_text(BIO *b)
{
	char *data = NULL;
	long n = BIO_get_mem_data(b, &data);

	return xstrndup(data, n > 0 ? (size_t)n : 0);
}

static EVP_PKEY *key_read(const char *pem, struct err *err)
{
	BIO *b = pem_bio(pem, "private key", err);
	EVP_PKEY *k;

	if (!b)
		return NULL;
	k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
	BIO_free(b);
	if (!k)
		ssl_fail(err, EINVAL, "private key");
	return k;
}

static X509 *cert_read(const char *pem, const char *what, struct err *err)
{
	BIO *b = pem_bio(pem, what, err);
	X509 *x;

	if (!b)
		return NULL;
	x = PEM_read_bio_X509(b, NULL, NULL, NULL);
	BIO_free(b);
	if (!x)
		ssl_fail(err, EINVAL, what);
	return x;
}

/* Reads a certificate request and checks its own signature. */
static X509_REQ *csr_read(const char *pem, struct err *err)
{
	BIO *b = pem_bio(pem, "certificate request", err);
	EVP_PKEY *pub;
	X509_REQ *r;

	if (!b)
		return NULL;
	r = PEM_read_bio_X509_REQ(b, NULL, NULL, NULL);
	BIO_free(b);
	if (!r) {
		ssl_fail(err, EINVAL, "certificate request");
		return NULL;
	}
	pub = X509_REQ_get0_pubkey(r);
	if (!pub || !EVP_PKEY_is_a(pub, "EC") || X509_REQ_verify(r, pub) != 1) {
		ERR_clear_error();
		X509_REQ_free(r);
		err_set(err, EINVAL, "certificate request: %s",
			pub && !EVP_PKEY_is_a(pub, "EC") ? "its key is not an EC key"
							 : "signature does not verify");
		return NULL;
	}
	return r;
}

int pki_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	return n >= 1 && n <= PKI_MAX_NAME &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789.-") == n && name[0] != '.' &&
	       name[0] != '-';
}

int pki_key_new(char **key_pem, struct err *err)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");
	BIO *b;

	if (!k)
		return ssl_fail(err, ENOMEM, "new EC key");
	b = BIO_new(BIO_s_mem());
	if (!b || !PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL)) {
		BIO_free(b);
		EVP_PKEY_free(k);
		return ssl_fail(err, ENOMEM, "new EC key");
	}
	*key_pem = bio_text(b);
	BIO_free(b);
	EVP_PKEY_free(k);
	return 0;
}

/* Sets "CN=name" as the name. */
static int set_cn(X509_NAME *n, const char *name)
{
	return X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8, (const unsigned char *)name, -1,
					  -1, 0);
}

/* Adds one extension, given in OpenSSL's configuration syntax, to x. */
static int add_ext(X509 *issuer, X509 *x, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *e;
	int ok;

	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!e)
		return 0;
	ok = X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
	return ok;
}

/* A certificate for pub named name, issued by issuer (NULL: itself), not yet signed. */
static X509 *cert_make(X509 *issuer, EVP_PKEY *pub, const char *name, int days)
{
	X509 *x = X509_new();
	BIGNUM *serial = BN_new();
	int ok = x && serial;

	ok = ok && X509_set_version(x, X509_VERSION_3);
	ok = ok && BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY);
	ok = ok && BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x));
	ok = ok && set_cn(X509_get_subject_name(x), name);
	ok = ok && X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer)
						  : X509_get_subject_name(x));
	ok = ok && X509_gmtime_adj(X509_getm_notBefore(x), -CLOCK_SKEW_S);
	ok = ok && X509_gmtime_adj(X509_getm_notAfter(x), (long)days * 86400);
	ok = ok && X509_set_pubkey(x, pub);
	BN_free(serial);
	if (!ok) {
		X509_free(x);
		return NULL;
	}
	return x;
}

/* x as PEM into *out. */
static int cert_text(X509 *x, char **out, struct err *err)
{
	BIO *b = BIO_new(BIO_s_mem());

	if (!b || !PEM_write_bio_X509(b, x)) {
		BIO_free(b);
		return ssl_fail(err, ENOMEM, "certificate");
	}
	*out = bio_text(b);
	BIO_free(b);
	return 0;
}

int pki_ca_new(const char *name, int days, char **cert_pem, char **key_pem, struct err *err)
{
	_cleanup_free_ char *kpem = NULL;
	EVP_PKEY *k = NULL;
	X509 *x = NULL;
	int ret;

	if (!pki_name_valid(name) || days < 1)
		return err_set(err, EINVAL, "CA name \"%s\" or %d days: not valid", name, days);
	ret = pki_key_new(&kpem, err);
	if (ret == 0 && !(k = key_read(kpem, err)))
		ret = -err->code;
	if (ret == 0) {
		x = cert_make(NULL, k, name, days);
		if (!x || !add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
		    !add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") ||
		    !add_ext(x, x, NID_subject_key_identifier, "hash") ||
		    !X509_sign(x, k, EVP_sha256()))
			ret = ssl_fail(err, ENOMEM, "new CA certificate");
	}
	if (ret == 0)
		ret = cert_text(x, cert_pem, err);
	if (ret == 0)
		*key_pem = steal_ptr(kpem);
	else if (kpem)
		explicit_bzero(kpem, strlen(kpem));
	X509_free(x);
	EVP_PKEY_free(k);
	return ret;
}

int pki_csr_new(const char *key_pem, const char *name, char **csr_pem, struct err *err)
{
	EVP_PKEY *k;
	X509_REQ *r;
	BIO *b = NULL;
	int ok;

	if (!pki_name_valid(name))
		return err_set(err, EINVAL, "name \"%s\": 1-64 of a-z, 0-9, '.', '-'", name);
	k = key_read(key_pem, err);
	if (!k)
		return -err->code;
	r = X509_REQ_new();
	ok = r && X509_REQ_set_version(r, X509_REQ_VERSION_1) &&
	     set_cn(X509_REQ_get_subject_name(r), name) && X509_REQ_set_pubkey(r, k) &&
	     X509_REQ_sign(r, k, EVP_sha256()) && (b = BIO_new(BIO_s_mem())) &&
	     PEM_write_bio_X509_REQ(b, r);
	if (ok)
		*csr_pem = bio_text(b);
	BIO_free(b);
	X509_REQ_free(r);
	EVP_PKEY_free(k);
	return ok ? 0 : ssl_fail(err, ENOMEM, "new certificate request");
}

int pki_csr_key_id(const char *csr_pem, char out[65], struct err *err)
{
	X509_REQ *r = csr_read(csr_pem, err);
	unsigned char md[32];
	unsigned char *der = NULL;
	int n;

	if (!r)
		return -err->code;
	n = i2d_PUBKEY(X509_REQ_get0_pubkey(r), &der);
	X509_REQ_free(r);
	if (n <= 0)
		return ssl_fail(err, EINVAL, "certificate request: public key");
	EVP_Digest(der, (size_t)n, md, NULL, EVP_sha256(), NULL);
	OPENSSL_free(der);
	hex_encode(md, sizeof(md), out);
	return 0;
}

int pki_sign(const char *ca_cert_pem, const char *ca_key_pem, const char *csr_pem, const char *name,
	     enum pki_usage usage, int days, char **cert_pem, struct err *err)
{
	_cleanup_free_ char *san = NULL;
	X509 *ca = NULL, *x = NULL;
	EVP_PKEY *cakey = NULL;
	X509_REQ *r = NULL;
	int ret = 0;

	if (!pki_name_valid(name) || days < 1)
		return err_set(err, EINVAL, "certificate for \"%s\", %d days: not valid", name,
			       days);
	san = xasprintf("DNS:%s", name);
	if (!(ca = cert_read(ca_cert_pem, "CA certificate", err)) ||
	    !(cakey = key_read(ca_key_pem, err)) || !(r = csr_read(csr_pem, err)))
		ret = -err->code;
	if (ret == 0 && X509_check_private_key(ca, cakey) != 1)
		ret = err_set(err, EINVAL, "the CA key is not the CA certificate's");
	if (ret == 0) {
		x = cert_make(ca, X509_REQ_get0_pubkey(r), name, days);
		if (!x || !add_ext(ca, x, NID_basic_constraints, "critical,CA:FALSE") ||
		    !add_ext(ca, x, NID_key_usage, "critical,digitalSignature") ||
		    !add_ext(ca, x, NID_ext_key_usage,
			     usage == PKI_SERVER ? "serverAuth" : "clientAuth") ||
		    !add_ext(ca, x, NID_subject_alt_name, san) ||
		    !add_ext(ca, x, NID_authority_key_identifier, "keyid:always") ||
		    !X509_sign(x, cakey, EVP_sha256()))
			ret = ssl_fail(err, ENOMEM, "certificate");
	}
	if (ret == 0)
		ret = cert_text(x, cert_pem, err);
	X509_free(x);
	X509_REQ_free(r);
	EVP_PKEY_free(cakey);
	X509_free(ca);
	return ret;
}

/* The first DNS name of x's subject alternative names, or "(none)"; the caller frees it. */
static char *san_dns(X509 *x)
{
	GENERAL_NAMES *names = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	char *out = NULL;

	for (int i = 0; names && i < sk_GENERAL_NAME_num(names) && !out; i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);

		if (g->type == GEN_DNS)
			out = xstrndup((const char *)ASN1_STRING_get0_data(g->d.dNSName),
				       (size_t)ASN1_STRING_length(g->d.dNSName));
	}
	GENERAL_NAMES_free(names);
	return out ? out : xstrdup("(none)");
}

int pki_verify(const char *ca_cert_pem, const char *cert_pem, const char *name,
	       enum pki_usage usage, const char *key_pem, struct err *err)
{
	X509_STORE *store = NULL;
	X509_STORE_CTX *ctx = NULL;
	X509 *ca = NULL, *x = NULL;
	EVP_PKEY *k = NULL;
	int ret = 0;

	if (!(ca = cert_read(ca_cert_pem, "CA certificate", err)) ||
	    !(x = cert_read(cert_pem, "certificate", err)) ||
	    (key_pem && !(k = key_read(key_pem, err))))
		ret = -err->code;
	if (ret == 0 &&
	    (!(store = X509_STORE_new()) || !X509_STORE_add_cert(store, ca) ||
	     !(ctx = X509_STORE_CTX_new()) || !X509_STORE_CTX_init(ctx, store, x, NULL)))
		ret = ssl_fail(err, ENOMEM, "certificate check");
	if (ret == 0) {
		X509_VERIFY_PARAM *p = X509_STORE_CTX_get0_param(ctx);

		X509_STORE_CTX_set_purpose(ctx, usage == PKI_SERVER ? X509_PURPOSE_SSL_SERVER
								    : X509_PURPOSE_SSL_CLIENT);
		X509_VERIFY_PARAM_set_hostflags(p, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		X509_VERIFY_PARAM_set1_host(p, name, 0);
		if (X509_verify_cert(ctx) != 1) {
			int e = X509_STORE_CTX_get_error(ctx);
			_cleanup_free_ char *named = san_dns(x);

			ERR_clear_error();
			if (e == X509_V_ERR_HOSTNAME_MISMATCH)
				ret = err_set(err, EKEYREJECTED, "certificate names %s, not %s",
					      named, name);
			else
				ret = err_set(err, EKEYREJECTED, "certificate of %s: %s", named,
					      X509_verify_cert_error_string(e));
		}
	}
	if (ret == 0 && k && X509_check_private_key(x, k) != 1) {
		ERR_clear_error();
		ret = err_set(err, EKEYREJECTED, "certificate does not certify this key");
	}
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	EVP_PKEY_free(k);
	X509_free(x);
	X509_free(ca);
	return ret;
}

int pki_tls_ctx(const char *ca_cert_pem, const char *cert_pem, const char *key_pem,
		enum pki_usage usage, const char *peer_name, SSL_CTX **out, struct err *err)
{
	SSL_CTX *ctx = NULL;
	X509 *ca = NULL, *x = NULL;
	EVP_PKEY *k = NULL;
	int ret = 0;

	if (!(ca = cert_read(ca_cert_pem, "CA certificate", err)) ||
	    !(x = cert_read(cert_pem, "certificate", err)) || !(k = key_read(key_pem, err)))
		ret = -err->code;
	if (ret == 0 &&
	    !(ctx = SSL_CTX_new(usage == PKI_SERVER ? TLS_server_method() : TLS_client_method())))
		ret = ssl_fail(err, ENOMEM, "TLS context");
	if (ret == 0 &&
	    (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	     !X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca) ||
	     SSL_CTX_use_certificate(ctx, x) != 1 || SSL_CTX_use_PrivateKey(ctx, k) != 1 ||
	     SSL_CTX_check_private_key(ctx) != 1))
		ret = ssl_fail(err, EINVAL, "TLS context");
	if (ret == 0) {
		X509_VERIFY_PARAM *p = SSL_CTX_get0_param(ctx);

		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
		SSL_CTX_set_purpose(ctx, usage == PKI_SERVER ? X509_PURPOSE_SSL_CLIENT
							     : X509_PURPOSE_SSL_SERVER);
		X509_VERIFY_PARAM_set_hostflags(p, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		if (peer_name && !X509_VERIFY_PARAM_set1_host(p, peer_name, 0))
			ret = ssl_fail(err, ENOMEM, "TLS context");
		/* only the certificate itself goes to the peer: it has the CA (the chain OpenSSL
		 * builds otherwise adds the CA's certificate, which the peer parses and keeps
		 * with the session: 4 KB a connection) */
		SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_NO_AUTO_CHAIN);
		/* no resumption: no session cache, no tickets (a TLS 1.3 server sends two after
		 * each handshake otherwise, which its client would parse and keep) */
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
		SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
		SSL_CTX_set_num_tickets(ctx, 0);
	}
	EVP_PKEY_free(k);
	X509_free(x);
	X509_free(ca);
	if (ret < 0) {
		SSL_CTX_free(ctx);
		return ret;
	}
	*out = ctx;
	return 0;
}

int pki_enroll_proof(const char *secret, const char *cell_id, const char *csr_pem, char out[65],
		     struct err *err)
{
	static const char label[] = "kiyot-enroll"; /* with its NUL */
	char key_id[65];
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	size_t slen = secret ? strnlen(secret, 257) : 0;
	unsigned char msg[sizeof(label) + PKI_MAX_NAME + 1 + 64];
	int ok;

	if (slen == 0 || slen > 256)
		return err_set(err, EINVAL, "enrollment secret: %s",
			       slen ? "over 256 bytes" : "empty");
	if (!pki_name_valid(cell_id))
		return err_set(err, EINVAL, "enrollment: cell id \"%.64s\" is not valid", cell_id);
	if (pki_csr_key_id(csr_pem, key_id, err) < 0)
		return -err->code;
	/* label NUL cell_id NUL key_id: the id is at most PKI_MAX_NAME */
	n = (unsigned int)(sizeof(label) + strlen(cell_id) + 1);
	memcpy(msg, label, sizeof(label));
	memcpy(msg + sizeof(label), cell_id, strlen(cell_id) + 1);
	memcpy(msg + n, key_id, 64);
	ok = HMAC(EVP_sha256(), secret, (int)slen, msg, n + 64, mac, &n) != NULL;
	if (!ok || n != 32)
		return ssl_fail(err, ENOMEM, "enrollment proof");
	hex_encode(mac, 32, out);
	OPENSSL_cleanse(mac, sizeof(mac));
	return 0;
}

int pki_enroll_check(const char *secret, const char *cell_id, const char *csr_pem,
		     const char *proof, struct err *err)
{
	char want[65];
	int ok;

	if (pki_enroll_proof(secret, cell_id, csr_pem, want, err) < 0)
		return -err->code;
	ok = proof && strnlen(proof, 65) == 64 && CRYPTO_memcmp(want, proof, 64) == 0;
	OPENSSL_cleanse(want, sizeof(want));
	if (!ok)
		return err_set(err, EKEYREJECTED,
			       "cell %s: the enrollment proof does not match its bootstrap secret "
			       "and key",
			       cell_id);
	return 0;
}
