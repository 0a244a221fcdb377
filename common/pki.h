/*
 * pki.h: the small public-key infrastructure of kiyot's channel to its cells, on OpenSSL.
 * kiyot keeps a CA; each cell makes its own key when it boots and asks for a certificate with
 * a certificate request; certificates name a cell (or kiyot) as their common name and their one
 * DNS subject alternative name, which is what the peer checks. Keys are EC P-256. Everything
 * goes in and out as PEM text, at most PKI_MAX_PEM bytes (what a peer sends is refused past
 * that before any parsing).
 *
 * Errors say what was wrong ("certificate request: signature does not verify", "certificate
 * names cell-b, not cell-a"); -EINVAL for bad input, -EKEYREJECTED for a certificate that does
 * not verify or name what it must, -ENOMEM when OpenSSL fails to allocate.
 */
#ifndef KIYOT_PKI_H
#define KIYOT_PKI_H

#include <openssl/ssl.h>
#include <stdint.h>

#include "err.h"

#define PKI_MAX_PEM (16 * 1024)
#define PKI_MAX_NAME 64 /* a name in a certificate: [a-z0-9.-], 1-64 characters */

enum pki_usage {
	PKI_SERVER, /* extendedKeyUsage serverAuth: an agent serving kiyot's calls */
	PKI_CLIENT, /* clientAuth: kiyot calling agents */
};

/* A new EC P-256 private key (PKCS#8 PEM; the caller frees and should wipe it). */
int pki_key_new(char **key_pem, struct err *err);
/* A new self-signed CA named name, valid for days, with its key. */
int pki_ca_new(const char *name, int days, char **cert_pem, char **key_pem, struct err *err);
/* A certificate request for key_pem naming name. */
int pki_csr_new(const char *key_pem, const char *name, char **csr_pem, struct err *err);
/* The SHA-256 of the public key a certificate request carries (its DER SubjectPublicKeyInfo),
 * lowercase hex, after checking the request's own signature: what a bootstrap proof binds. */
int pki_csr_key_id(const char *csr_pem, char out[65], struct err *err);
/* Signs the request's public key into a certificate issued by the CA: subject CN and SAN DNS
 * are name (whatever the request asked), usage as given, valid from now (minus a minute of
 * clock skew) for days, a random serial. The request's signature must verify. */
int pki_sign(const char *ca_cert_pem, const char *ca_key_pem, const char *csr_pem, const char *name,
	     enum pki_usage usage, int days, char **cert_pem, struct err *err);
/* Checks cert_pem: issued by the CA and within its validity, its SAN DNS is name, it is for
 * usage and, when key_pem is non-NULL, it certifies that key. 0 when all hold. */
int pki_verify(const char *ca_cert_pem, const char *cert_pem, const char *name,
	       enum pki_usage usage, const char *key_pem, struct err *err);
/* Enrollment: a new cell proves it holds its one-time bootstrap secret (at most 256 bytes of
 * text) with HMAC-SHA256(secret, "kiyot-enroll\0" cell_id "\0" pki_csr_key_id(csr)), lowercase
 * hex, which binds the proof to the key the request carries. */
int pki_enroll_proof(const char *secret, const char *cell_id, const char *csr_pem, char out[65],
		     struct err *err);
/* Checks a proof (in constant time): 0, or -EKEYREJECTED naming the cell. */
int pki_enroll_check(const char *secret, const char *cell_id, const char *csr_pem,
		     const char *proof, struct err *err);
/* A TLS 1.3 context for one side of a channel of this PKI (the cell feed's, feed.h): it presents
 * cert_pem with key_pem (which must match), trusts the CA alone and requires the peer's
 * certificate, which must verify, be for the other usage (a client checks a serverAuth
 * certificate) and, when peer_name is set, name it (a client that means a different peer for
 * each connection sets SSL_set1_host instead). Idle connections release their record buffers.
 * The caller frees it with SSL_CTX_free. */
int pki_tls_ctx(const char *ca_cert_pem, const char *cert_pem, const char *key_pem,
		enum pki_usage usage, const char *peer_name, SSL_CTX **out, struct err *err);
/* Whether name may be put in a certificate (1-64 of [a-z0-9.-], not starting with '.'/'-'). */
int pki_name_valid(const char *name);

#endif
