/*
 * netdelay: a slow, lossy link for the test suite's load mode, where the kernel has no netem
 * qdisc. Packets that an iptables rule sends to NFQUEUE queue NUM are held DELAY_MS each and
 * then let through, in the order they came; LOSS_PERMILLE of them (drawn at random) are
 * dropped instead.
 *
 *   netdelay QUEUE DELAY_MS LOSS_PERMILLE
 *
 * Runs until SIGTERM or SIGINT. The rule sending packets here should carry --queue-bypass, so
 * that traffic flows again once netdelay is gone. Only the packets' ids cross to user space.
 * It runs at a real-time priority: a link does not slow down with the node's CPU (netem works
 * in the kernel's softirqs), and the load the tests make would otherwise starve it.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <libnfnetlink/libnfnetlink.h>

/* At most this many packets held at once; more are let through at once (a queue this deep
 * holds several seconds of a busy link). */
#define HELD_MAX 65536

struct held {
	uint32_t id;
	int64_t due_ns;
};

static struct held held[HELD_MAX];
static size_t head, count;
static int64_t delay_ns;
static int loss_permille;
static volatile sig_atomic_t stop;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* A packet came: dropped, held, or (the queue being full) let through now. */
static int on_packet(struct nfq_q_handle *q, struct nfgenmsg *msg, struct nfq_data *nfa, void *arg)
{
	struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
	uint32_t id;

	(void)msg;
	(void)arg;
	if (!ph)
		return 0;
	id = ntohl(ph->packet_id);
	if (loss_permille > 0 && rand() % 1000 < loss_permille)
		return nfq_set_verdict(q, id, NF_DROP, 0, NULL);
	if (count == HELD_MAX)
		return nfq_set_verdict(q, id, NF_ACCEPT, 0, NULL);
	held[(head + count) % HELD_MAX] = (struct held){ id, now_ns() + delay_ns };
	count++;
	return 0;
}

/* Lets through every held packet whose time has come; the milliseconds until the next one's,
 * or -1 when none is held. */
static int release_due(struct nfq_q_handle *q)
{
	int64_t now = now_ns();

	while (count && held[head].due_ns <= now) {
		nfq_set_verdict(q, held[head].id, NF_ACCEPT, 0, NULL);
		head = (head + 1) % HELD_MAX;
		count--;
	}
	if (!count)
		return -1;
	return (int)((held[head].due_ns - now + 999999) / 1000000);
}

/* A real-time priority, so that the node's load does not slow the link. */
static void realtime(void)
{
	struct sched_param sp = { .sched_priority = 10 };

	if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
		fprintf(stderr, "netdelay: no real-time priority (%s); the load may slow it\n",
			strerror(errno));
}

int main(int argc, char **argv)
{
	struct nfq_handle *h;
	struct nfq_q_handle *q;
	char buf[65536] __attribute__((aligned));
	struct pollfd pfd;
	long queue;

	if (argc != 4) {
		fprintf(stderr, "usage: netdelay QUEUE DELAY_MS LOSS_PERMILLE\n");
		return 2;
	}
	queue = strtol(argv[1], NULL, 10);
	delay_ns = strtoll(argv[2], NULL, 10) * 1000000;
	loss_permille = (int)strtol(argv[3], NULL, 10);
	srand((unsigned int)now_ns());
	realtime();
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	h = nfq_open();
	if (!h) {
		fprintf(stderr, "netdelay: nfq_open: %s\n", strerror(errno));
		return 1;
	}
	q = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
	if (!q || nfq_set_mode(q, NFQNL_COPY_META, 0) < 0 ||
	    nfq_set_queue_maxlen(q, HELD_MAX) < 0) {
		fprintf(stderr, "netdelay: queue %ld: %s\n", queue, strerror(errno));
		return 1;
	}
	nfnl_rcvbufsiz(nfq_nfnlh(h), 8 << 20);
	pfd.fd = nfq_fd(h);
	pfd.events = POLLIN;
	fprintf(stderr, "netdelay: queue %ld, %lld ms, %d/1000 lost\n", queue,
		(long long)(delay_ns / 1000000), loss_permille);
	while (!stop) {
		int wait = release_due(q);

		if (poll(&pfd, 1, wait) > 0) {
			ssize_t n = recv(pfd.fd, buf, sizeof(buf), MSG_DONTWAIT);

			if (n > 0)
				nfq_handle_packet(h, buf, (int)n);
		}
	}
	/* what is still held goes through: the rule's removal does not release it */
	while (count) {
		nfq_set_verdict(q, held[head].id, NF_ACCEPT, 0, NULL);
		head = (head + 1) % HELD_MAX;
		count--;
	}
	nfq_destroy_queue(q);
	nfq_close(h);
	return 0;
}
