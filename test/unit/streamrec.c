/*
 * streamrec.c: an agent stream's callbacks recorded for a test (see streamrec.h).
 */
#include "streamrec.h"

static void rec_msg(void *arg, ProtobufCMessage *msg)
{
	struct streamrec *r = arg;

	pthread_mutex_lock(&r->mu);
	r->late |= r->ended;
	r->msg = msg;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->mu);
}

static void rec_sent(void *arg, int ret)
{
	struct streamrec *r = arg;

	pthread_mutex_lock(&r->mu);
	r->late |= r->ended;
	r->sent += ret == 0;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->mu);
}

static void rec_end(void *arg, int ret, const struct err *err)
{
	struct streamrec *r = arg;

	(void)err;
	pthread_mutex_lock(&r->mu);
	r->late |= r->ended;
	r->ended = true;
	r->ret = ret;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->mu);
}

const struct agent_stream_cbs streamrec_cbs = { rec_msg, rec_sent, rec_end };

void streamrec_init(struct streamrec *r)
{
	*r = (struct streamrec){ .mu = PTHREAD_MUTEX_INITIALIZER,
				 .cond = PTHREAD_COND_INITIALIZER };
}

int streamrec_take(struct streamrec *r, ProtobufCMessage **m)
{
	int ret;

	pthread_mutex_lock(&r->mu);
	while (!r->msg && !r->ended)
		pthread_cond_wait(&r->cond, &r->mu);
	*m = r->msg;
	r->msg = NULL;
	ret = *m ? 1 : r->ret;
	pthread_mutex_unlock(&r->mu);
	return ret;
}

int streamrec_wait_sent(struct streamrec *r, int n)
{
	int sent;

	pthread_mutex_lock(&r->mu);
	while (r->sent < n && !r->ended)
		pthread_cond_wait(&r->cond, &r->mu);
	sent = r->sent;
	pthread_mutex_unlock(&r->mu);
	return sent;
}

int streamrec_wait_end(struct streamrec *r)
{
	int ret;

	pthread_mutex_lock(&r->mu);
	while (!r->ended)
		pthread_cond_wait(&r->cond, &r->mu);
	ret = r->ret;
	pthread_mutex_unlock(&r->mu);
	return ret;
}
