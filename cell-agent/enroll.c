/*
 * enroll.c: a cell's key, certificate request and certificate (enroll.h).
 */
#include "enroll.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "log.h"
#include "pki.h"
#include "xalloc.h"

struct enroll {
	pthread_mutex_t lock;
	char *dir, *cell_id, *ca, *secret;
	char *key, *csr, *cert; /* cert NULL until enrolled */
};

static void wipe_free(char *s)
{
	if (s)
		explicit_bzero(s, strlen(s));
	free(s);
}

void enroll_free(struct enroll *e)
{
	if (!e)
		return;
	pthread_mutex_destroy(&e->lock);
	free(e->dir);
	free(e->cell_id);
	free(e->ca);
	wipe_free(e->secret);
	wipe_free(e->key);
	free(e->csr);
	free(e->cert);
	free(e);
}

int enroll_open(const char *dir, const char *cell_id, const char *ca_pem, const char *secret,
		struct enroll **out, struct err *err)
{
	struct enroll *e = xcalloc(1, sizeof(*e));
	_cleanup_free_ char *key_path = xasprintf("%s/key.pem", dir);
	_cleanup_free_ char *cert_path = xasprintf("%s/cert.pem", dir);
	struct err ferr = ERR_INIT;
	int ret = 0;

	pthread_mutex_init(&e->lock, NULL);
	e->dir = xstrdup(dir);
	e->cell_id = xstrdup(cell_id);
	e->ca = xstrdup(ca_pem);
	e->secret = xstrdup(secret ? secret : "");
	if (fs_mkdir_p(dir, 0700, err) < 0) {
		ret = -err->code;
		goto out;
	}
	if (fs_read_file(key_path, PKI_MAX_PEM, &e->key, NULL, &ferr) < 0) {
		/* first boot: the key is made here and kept, so a restart before kiyot answered
		 * presents the same request */
		if (pki_key_new(&e->key, err) < 0 ||
		    fs_write_file(key_path, e->key, strlen(e->key), 0600, err) < 0) {
			ret = err_wrap(err, "cell key %s", key_path);
			goto out;
		}
	} else if (fs_read_file(cert_path, PKI_MAX_PEM, &e->cert, NULL, &ferr) == 0 &&
		   pki_verify(ca_pem, e->cert, cell_id, PKI_SERVER, e->key, &ferr) < 0) {
		log_warn("%s: %s; enrolling again", cert_path, ferr.msg);
		free(e->cert);
		e->cert = NULL;
	}
	if (!e->cert && !e->secret[0]) {
		ret = err_set(err, EINVAL,
			      "cell %s has no certificate in %s and its bootstrap document no "
			      "enrollment secret: kiyot cannot enroll it",
			      cell_id, dir);
		goto out;
	}
	if (!e->cert && pki_csr_new(e->key, cell_id, &e->csr, err) < 0) {
		ret = err_wrap(err, "cell %s", cell_id);
		goto out;
	}
out:
	if (ret < 0) {
		enroll_free(e);
		return ret;
	}
	*out = e;
	return 0;
}

int enroll_done(struct enroll *e)
{
	int done;

	pthread_mutex_lock(&e->lock);
	done = e->cert != NULL;
	pthread_mutex_unlock(&e->lock);
	return done;
}

const char *enroll_key(struct enroll *e)
{
	return e->key;
}

const char *enroll_cert(struct enroll *e)
{
	const char *c;

	pthread_mutex_lock(&e->lock);
	c = e->cert;
	pthread_mutex_unlock(&e->lock);
	return c;
}

int enroll_request(struct enroll *e, const char **csr, char *proof, struct err *err)
{
	int ret;

	pthread_mutex_lock(&e->lock);
	if (e->cert)
		ret = err_set(err, EBUSY, "cell %s is enrolled: it takes calls over TLS only",
			      e->cell_id);
	else
		ret = pki_enroll_proof(e->secret, e->cell_id, e->csr, proof, err);
	if (ret == 0)
		*csr = e->csr;
	pthread_mutex_unlock(&e->lock);
	return ret;
}

int enroll_accept(struct enroll *e, const char *cert_pem, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/cert.pem", e->dir);
	int ret = 0;

	pthread_mutex_lock(&e->lock);
	if (e->cert)
		ret = err_set(err, EBUSY, "cell %s is enrolled: it takes no other certificate",
			      e->cell_id);
	else if (pki_verify(e->ca, cert_pem, e->cell_id, PKI_SERVER, e->key, err) < 0)
		ret = err_wrap(err, "cell %s: the certificate offered", e->cell_id);
	else if (fs_write_file(path, cert_pem, strlen(cert_pem), 0600, err) < 0)
		ret = -err->code;
	if (ret == 0) {
		e->cert = xstrdup(cert_pem);
		/* the secret has served its one use */
		explicit_bzero(e->secret, strlen(e->secret));
	}
	pthread_mutex_unlock(&e->lock);
	return ret;
}
