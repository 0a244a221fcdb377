/*
 * enroll.h: a cell's identity on kiyot's channel. At its first boot the cell makes its own key
 * (which never leaves it) and a certificate request naming the cell; kiyot fetches the request
 * with the proof that the cell booted from its bootstrap document (pki_enroll_proof over the
 * document's one-time secret), and sends back the certificate its CA issued. The cell keeps
 * both under <state_dir>/tls (0600) and from then on serves over TLS only; a restarted agent
 * finds them and serves TLS at once.
 *
 * States: new (no certificate: answers its request and proof, takes a certificate) and
 * enrolled (holds a certificate of the bootstrap's CA for its name and key: takes no other).
 * Thread-safe.
 */
#ifndef AGENT_ENROLL_H
#define AGENT_ENROLL_H

#include "err.h"

struct enroll;

/* Loads the key and certificate under dir, or makes the key and its request. A stored
 * certificate that is not of ca_pem for cell_id and the key (another CA, expired, damaged) is
 * ignored: the cell enrolls again, which needs a secret. -EINVAL when the cell is not enrolled
 * and secret is empty: nothing could ever enroll it. */
int enroll_open(const char *dir, const char *cell_id, const char *ca_pem, const char *secret,
		struct enroll **out, struct err *err);
void enroll_free(struct enroll *e);

/* Non-zero once the cell holds its certificate. */
int enroll_done(struct enroll *e);
/* The key and certificate (PEM) of an enrolled cell; they live as long as e. */
const char *enroll_key(struct enroll *e);
const char *enroll_cert(struct enroll *e);

/* The request and its proof (proof: 65 bytes), for a cell not yet enrolled; -EBUSY once it
 * is. *csr lives as long as e. */
int enroll_request(struct enroll *e, const char **csr, char *proof, struct err *err);
/* Takes the certificate kiyot's CA issued: checks it (the bootstrap's CA, the cell's name, its
 * key, server use), stores it 0600 beside the key and makes the cell enrolled. -EKEYREJECTED
 * for a certificate that does not check (-EINVAL for text that is none), -EBUSY once enrolled. */
int enroll_accept(struct enroll *e, const char *cert_pem, struct err *err);

#endif
