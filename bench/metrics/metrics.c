/*
 * The metrics benchmark: what kiyot's Prometheus metrics cost.
 *
 * 1. A scrape by the number of cells: kiyot's CRI server in this process
 *    (test/unit/crihost.h) with N sandboxes on cells of four types in NAMESPACES namespaces,
 *    every family kiyot serves (with a series for each CRI method) and the cells' collector
 *    (metrics/cellfigures.c) over the sandboxes; the exposition of the process's registry
 *    rendered SCRAPES times for each N, as GET /metrics renders it. Printed: p50 and
 *    max per N, the bytes, and the ratio to the smallest N. Goal: 1,000 cells under 50 ms.
 * 2. The hot path with metrics on and off: the same server started with the CRI observer
 *    (kiyot_cri_requests_total and the duration histogram, as kiyot serve starts it) and
 *    without, in turns after a warm-up turn whose figures are dropped; in each turn CALLS each
 *    of Version, PodSandboxStatus and ListPodSandbox over kiyot's socket, timed one by one. Printed: p50 and p99 per call on
 *    and off, and their ratio (goal: within noise).
 *
 *	make bench-metrics && build/bench/metrics
 * Prints figures; asserts nothing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../test/unit/crihost.h"
#include "buf.h"
#include "clock.h"
#include "log.h"
#include "metrics/metrics.h"
#include "sizing/catalog.h"
#include "xalloc.h"

#define SCRAPES 40
#define CALLS 2000
#define TURNS 3	      /* of each, on and off alternating */
#define NAMESPACES 50 /* the pods' namespaces: a price series each */

static const size_t cells_steps[] = { 10, 100, 1000, 4000 };
static const char *const cri_methods[] = {
	"Version",
	"RunPodSandbox",
	"StopPodSandbox",
	"RemovePodSandbox",
	"PodSandboxStatus",
	"ListPodSandbox",
	"CreateContainer",
	"StartContainer",
	"StopContainer",
	"RemoveContainer",
	"ListContainers",
	"ContainerStatus",
	"UpdateContainerResources",
	"ReopenContainerLog",
	"ExecSync",
	"Exec",
	"Attach",
	"PortForward",
	"ContainerStats",
	"ListContainerStats",
	"PodSandboxStats",
	"ListPodSandboxStats",
	"UpdateRuntimeConfig",
	"Status",
};
static const char *const types[] = { "t3a.micro", "m5.large", "c5.xlarge", "r5.2xlarge" };

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, int p)
{
	size_t i = (n * (size_t)p + 99) / 100;

	qsort(v, n, sizeof(*v), cmp_double);
	return v[i ? i - 1 : 0];
}

static int start(struct crihost *h, bool observed, struct err *err)
{
	if (crihost_start_observed(h, observed ? metrics_cri_observe : NULL) < 0)
		return err_set(err, EIO, "kiyot's CRI server did not start");
	return 0;
}

/* Adds sandboxes up to n, on cells of the types in turn, in NAMESPACES namespaces. */
static void add_cells(struct crihost *h, size_t from, size_t n)
{
	for (size_t i = from; i < n; i++) {
		char id[65], name[32], cell[32];
		struct sandbox *sb;

		snprintf(id, sizeof(id), "%064zx", i + 1);
		snprintf(name, sizeof(name), "pod-%zu", i);
		snprintf(cell, sizeof(cell), "c%zu", i);
		sb = crihost_add_sandbox(h, id, name, SANDBOX_READY, cell);
		records_lock(h->k.records);
		free(sb->instance_type);
		sb->instance_type = xstrdup(types[i % ARRAY_SIZE(types)]);
		free(sb->config->metadata->namespace_);
		sb->config->metadata->namespace_ = xasprintf("team-%zu", i % NAMESPACES);
		records_unlock(h->k.records);
	}
}

static int bench_scrapes(struct err *err)
{
	struct crihost h;
	struct metrics_cells *mc;
	double base = 0;
	size_t have = 0;

	if (start(&h, false, err) < 0)
		return -err->code;
	if (catalog_load("us-east-1", &h.k.catalog, err) < 0)
		return -err->code;
	/* every family kiyot serves, with the series a day of work leaves: each CRI method
	 * answered OK and some not, launches and provider calls */
	metrics_figures_init();
	for (size_t i = 0; i < ARRAY_SIZE(cri_methods); i++) {
		char path[96];

		snprintf(path, sizeof(path), "/runtime.v1.RuntimeService/%s", cri_methods[i]);
		metrics_cri_observe(NULL, path, 0, 0.002);
		metrics_cri_observe(NULL, path, 5, 0.001);
	}
	metrics_launch_step("sizing", 0.001);
	metrics_launch_step("provider", 1.5);
	metrics_launch_step("boot", 30);
	metrics_launch_failure("capacity");
	mc = metrics_cells_add(&h.k);
	printf("\n1. A scrape of /metrics by the number of cells (%d renders each)\n", SCRAPES);
	printf("%-8s %10s %10s %10s %12s\n", "cells", "p50 ms", "max ms", "bytes", "p50 ratio");
	for (size_t s = 0; s < ARRAY_SIZE(cells_steps); s++) {
		double v[SCRAPES];
		size_t bytes = 0;

		add_cells(&h, have, cells_steps[s]);
		have = cells_steps[s];
		for (int i = 0; i < SCRAPES; i++) {
			struct buf out = BUF_INIT;
			int64_t t0 = clock_mono_ns();

			if (metrics_render(metrics_default(), &out, err) < 0)
				return -err->code;
			v[i] = (double)(clock_mono_ns() - t0) / 1e6;
			bytes = out.len;
			buf_release(&out);
		}
		{
			double p50 = pct(v, SCRAPES, 50);

			if (!base)
				base = p50;
			printf("%-8zu %10.2f %10.2f %10zu %11.1fx\n", cells_steps[s], p50,
			       v[SCRAPES - 1], bytes, p50 / base);
		}
	}
	printf("goal: 1,000 cells under 50 ms\n");
	metrics_cells_remove(mc);
	catalog_free(h.k.catalog);
	h.k.catalog = NULL;
	crihost_stop(&h);
	return 0;
}

struct call_figures {
	double *v; /* every sample of every turn */
	size_t n;
};

static int time_calls(struct crihost *h, const char *sandbox_id, struct call_figures *f,
		      struct err *err)
{
	Runtime__V1__VersionRequest vreq = RUNTIME__V1__VERSION_REQUEST__INIT;
	Runtime__V1__PodSandboxStatusRequest sreq = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
	Runtime__V1__ListPodSandboxRequest lreq = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
	const struct {
		const char *path;
		const ProtobufCMessage *req;
		const ProtobufCMessageDescriptor *desc;
	} calls[] = {
		{ CRI_RT("Version"), &vreq.base, &runtime__v1__version_response__descriptor },
		{ CRI_RT("PodSandboxStatus"), &sreq.base,
		  &runtime__v1__pod_sandbox_status_response__descriptor },
		{ CRI_RT("ListPodSandbox"), &lreq.base,
		  &runtime__v1__list_pod_sandbox_response__descriptor },
	};

	vreq.version = "v1";
	sreq.pod_sandbox_id = (char *)sandbox_id;
	for (size_t c = 0; c < ARRAY_SIZE(calls); c++)
		for (int i = 0; i < CALLS + 50; i++) {
			ProtobufCMessage *resp = NULL;
			int64_t t0 = clock_mono_ns();

			if (crihost_call(h, calls[c].path, calls[c].req, calls[c].desc, &resp,
					 err) < 0)
				return err_wrap(err, "%s", calls[c].path);
			if (i >= 50) /* the first are warm-up */
				f[c].v[f[c].n++] = (double)(clock_mono_ns() - t0) / 1e3;
			protobuf_c_message_free_unpacked(resp, NULL);
		}
	return 0;
}

static int bench_hot_path(struct err *err)
{
	static const char *const names[] = { "Version", "PodSandboxStatus", "ListPodSandbox" };
	struct call_figures on[3], off[3];

	for (int c = 0; c < 3; c++) {
		on[c] = (struct call_figures){ xcalloc(CALLS * TURNS, sizeof(double)), 0 };
		off[c] = (struct call_figures){ xcalloc(CALLS * TURNS, sizeof(double)), 0 };
	}
	/* turn -1 warms the process up and its figures are dropped; then on and off alternate */
	for (int t = -1; t < 2 * TURNS; t++) {
		bool observed = t % 2 == 0;
		struct call_figures warm[3] = { { 0 } };
		struct crihost h;

		if (start(&h, observed, err) < 0)
			return -err->code;
		add_cells(&h, 0, 50);
		for (int c = 0; t < 0 && c < 3; c++)
			warm[c].v = xcalloc(CALLS, sizeof(double));
		if (time_calls(&h,
			       "0000000000000000000000000000000000000000000000000000000000000001",
			       t < 0	  ? warm
			       : observed ? on
					  : off,
			       err) < 0)
			return -err->code;
		for (int c = 0; c < 3; c++)
			free(warm[c].v);
		crihost_stop(&h);
	}
	printf("\n2. CRI calls with metrics on and off (%d turns of %d calls each, one at a "
	       "time over kiyot's socket, microseconds)\n",
	       TURNS, CALLS);
	printf("%-18s %10s %10s %10s %10s %10s %10s\n", "call", "on p50", "off p50", "ratio",
	       "on p99", "off p99", "ratio");
	for (int c = 0; c < 3; c++) {
		double a = pct(on[c].v, on[c].n, 50), b = pct(off[c].v, off[c].n, 50);
		double a99 = pct(on[c].v, on[c].n, 99), b99 = pct(off[c].v, off[c].n, 99);

		printf("%-18s %10.1f %10.1f %9.2fx %10.1f %10.1f %9.2fx\n", names[c], a, b, a / b,
		       a99, b99, a99 / b99);
		free(on[c].v);
		free(off[c].v);
	}
	printf("goal: on within noise of off\n");
	return 0;
}

int main(void)
{
	struct err err = ERR_INIT;

	log_set_level(LOG_WARN);
	if (bench_scrapes(&err) < 0 || bench_hot_path(&err) < 0) {
		fprintf(stderr, "bench/metrics: %s\n", err.msg);
		return 1;
	}
	return 0;
}
