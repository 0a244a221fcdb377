/*
 * The records benchmark: how long the kubelet's list and status calls wait while cells send
 * log bytes. A whole kiyot runs in this process with the unit tests' fake provider and agents
 * (test/unit/kiyot_fixture.h); PODS pods each run one container, and the CRI calls go over
 * kiyot's socket as the kubelet's do. For DURATION_S seconds at a time, one thread per
 * container hands kiyot log chunks of CHUNK bytes, as a cell's Watch callback does with what
 * the agent streams (kiyot_on_unit_log): PACED_RATE chunks a second each ("paced"), then as
 * fast as kiyot takes them ("flat out", which also leaves the client little CPU on a small
 * machine), while a client calls ListContainers, ContainerStatus and ListPodSandbox one after
 * another. Printed: each call's latency idle and under each load (p50, p99, max), and the
 * chunks the writers got through.
 *
 *	make bench-records && build/bench/records
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../test/unit/kiyot_fixture.h"
#include "cri/cri.h"
#include "clock.h"
#include "xalloc.h"

#define PODS 20
#define CHUNK 128
#define DURATION_S 3
#define IDLE_CALLS 500
#define PACED_RATE 1000

struct writer {
	struct kiyot *k;
	const char *unit_id;
	int rate; /* chunks a second; 0: as fast as kiyot takes them */
	volatile int *stop;
	pthread_t thread;
	uint64_t off; /* where its unit's log stands, across loads */
	uint64_t chunks;
	int64_t max_ns;
};

struct lat {
	int64_t *ns;
	size_t n, cap;
};

static void lat_add(struct lat *l, int64_t ns)
{
	xgrow((void **)&l->ns, &l->cap, l->n + 1, sizeof(*l->ns));
	l->ns[l->n++] = ns;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* p50, p99 and max in microseconds, "-" when nothing was measured. */
static void lat_print(const char *what, const char *load, struct lat *l)
{
	if (!l->n) {
		printf("%-18s %-6s %8s\n", what, load, "-");
		return;
	}
	qsort(l->ns, l->n, sizeof(*l->ns), cmp_i64);
	printf("%-18s %-6s %8zu %10.1f %10.1f %10.1f\n", what, load, l->n,
	       (double)l->ns[l->n / 2] / 1e3, (double)l->ns[l->n * 99 / 100] / 1e3,
	       (double)l->ns[l->n - 1] / 1e3);
	free(l->ns);
	*l = (struct lat){ 0 };
}

static void *write_logs(void *arg)
{
	struct writer *w = arg;
	char line[CHUNK];
	struct timespec next;

	memset(line, 'x', sizeof(line));
	memcpy(line, "2026-01-01T00:00:00.000000000Z stdout F ", 40);
	line[CHUNK - 1] = '\n';
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!*w->stop) {
		int64_t t0, dt;

		if (w->rate) {
			next.tv_nsec += 1000000000L / w->rate;
			if (next.tv_nsec >= 1000000000L) {
				next.tv_sec++;
				next.tv_nsec -= 1000000000L;
			}
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		}
		t0 = clock_mono_ns();
		kiyot_on_unit_log(w->k, w->unit_id, w->off, (const uint8_t *)line, sizeof(line));
		dt = clock_mono_ns() - t0;
		if (dt > w->max_ns)
			w->max_ns = dt;
		w->off += sizeof(line);
		w->chunks++;
	}
	return NULL;
}

/* One call of each kind, timed; exits on a failed call. */
static void call_round(struct kfix *f, const char *ctr, struct lat *list, struct lat *status,
		       struct lat *pods)
{
	Runtime__V1__ListContainersRequest lc = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
	Runtime__V1__ContainerStatusRequest cs = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
	Runtime__V1__ListPodSandboxRequest lp = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
	const struct {
		const char *method;
		const ProtobufCMessage *req;
		struct lat *lat;
	} calls[] = {
		{ "ListContainers", &lc.base, list },
		{ "ContainerStatus", &cs.base, status },
		{ "ListPodSandbox", &lp.base, pods },
	};
	struct err err = ERR_INIT;

	cs.container_id = (char *)ctr;
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		int64_t t0 = clock_mono_ns();

		if (kfix_call0(f, calls[i].method, calls[i].req, &err) < 0) {
			fprintf(stderr, "bench records: %s: %s\n", calls[i].method, err.msg);
			exit(1);
		}
		lat_add(calls[i].lat, clock_mono_ns() - t0);
	}
}

/* DURATION_S seconds of calls while the writers write at rate (0: flat out); prints the
 * figures. */
static void under_load(struct kfix *f, struct writer *w, char **ctr, int rate, const char *name)
{
	struct lat list = { 0 }, status = { 0 }, pods = { 0 };
	volatile int stop = 0;
	uint64_t chunks = 0;
	int64_t t0, elapsed, worst = 0;

	for (int i = 0; i < PODS; i++) {
		w[i].rate = rate;
		w[i].stop = &stop;
		w[i].chunks = 0;
		w[i].max_ns = 0;
		if (pthread_create(&w[i].thread, NULL, write_logs, &w[i]) != 0)
			abort();
	}
	t0 = clock_mono_ns();
	for (int i = 0; clock_mono_ns() - t0 < (int64_t)DURATION_S * 1000000000; i++)
		call_round(f, ctr[i % PODS], &list, &status, &pods);
	stop = 1;
	for (int i = 0; i < PODS; i++) {
		pthread_join(w[i].thread, NULL);
		chunks += w[i].chunks;
		if (w[i].max_ns > worst)
			worst = w[i].max_ns;
	}
	elapsed = clock_mono_ns() - t0;
	lat_print("ListContainers", name, &list);
	lat_print("ContainerStatus", name, &status);
	lat_print("ListPodSandbox", name, &pods);
	printf("  %s: %.0f log chunks/s (%.1f MiB/s) over %d containers; the slowest took %.1f "
	       "ms\n",
	       name, (double)chunks * 1e9 / (double)elapsed,
	       (double)chunks * CHUNK * 1e9 / (double)elapsed / (1 << 20), PODS,
	       (double)worst / 1e6);
}

int main(void)
{
	struct kfix *f = kfix_new(5);
	struct writer w[PODS] = { 0 };
	char *sb[PODS], *ctr[PODS];
	struct lat list = { 0 }, status = { 0 }, pods = { 0 };
	struct err err = ERR_INIT;

	if (kfix_open(f, &err) < 0) {
		fprintf(stderr, "bench records: kiyot_open: %s\n", err.msg);
		return 1;
	}
	for (int i = 0; i < PODS; i++) {
		_cleanup_free_ char *name = xasprintf("pod%02d", i);

		kfix_pod_with_container(f, name, &sb[i], &ctr[i]);
	}
	printf("records: CRI calls while %d containers log %d-byte chunks, %d/s each (paced) or "
	       "as fast as kiyot takes them (flat) (us)\n",
	       PODS, CHUNK, PACED_RATE);
	printf("%-18s %-6s %8s %10s %10s %10s\n", "call", "load", "calls", "p50", "p99", "max");
	for (int i = 0; i < IDLE_CALLS; i++)
		call_round(f, ctr[i % PODS], &list, &status, &pods);
	lat_print("ListContainers", "idle", &list);
	lat_print("ContainerStatus", "idle", &status);
	lat_print("ListPodSandbox", "idle", &pods);

	for (int i = 0; i < PODS; i++)
		w[i] = (struct writer){ .k = &f->k, .unit_id = ctr[i] };
	under_load(f, w, ctr, PACED_RATE, "paced");
	under_load(f, w, ctr, 0, "flat");
	for (int i = 0; i < PODS; i++) {
		free(sb[i]);
		free(ctr[i]);
	}
	kfix_free(f);
	return 0;
}
