/*
 * figures.c: the families kiyot reports into the process's registry (metrics.h): CRI calls,
 * cell launches, provider calls, image pulls, and the process's own figures read from
 * /proc/self at each scrape under Prometheus' standard names.
 */
#include "metrics.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "xalloc.h"

/* CRI calls: most answer within milliseconds, a cell's launch within a minute */
static const double cri_buckets[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
				      0.5,   1,	     2.5,   5,	  10,	 30,   60 };
/* a cell's launch steps: a local cell in a fraction of a second, an EC2 one in minutes */
static const double launch_buckets[] = { 0.1, 0.25, 0.5, 1,   2.5, 5,	10,
					 20,  30,   60,	 120, 300, 600, 900 };
/* provider API calls: tens of milliseconds to tens of seconds (with retries) */
static const double provider_buckets[] = {
	0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60
};
/* image pulls: a cached image at once, a large one in minutes */
static const double pull_buckets[] = { 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600 };

static struct {
	struct metrics_family *cri_requests, *cri_duration;
	struct metrics_family *launch_duration, *launch_failures;
	struct metrics_family *provider_calls, *provider_duration;
	struct metrics_family *pulls, *pull_bytes, *pull_duration;
} fig;

static void process_collect(void *ctx, struct metrics_writer *w);

static pthread_once_t fig_once = PTHREAD_ONCE_INIT;

static void fig_init(void)
{
	struct metrics_registry *r = metrics_default();

	fig.cri_requests = metrics_counter(r, "kiyot_cri_requests_total",
					   "CRI calls answered, by method and gRPC status code.",
					   (const char *const[]){ "method", "code", NULL });
	fig.cri_duration = metrics_histogram(
		r, "kiyot_cri_request_duration_seconds",
		"Time from a CRI call's arrival to its answer (its wait for a worker included).",
		(const char *const[]){ "method", NULL }, cri_buckets, ARRAY_SIZE(cri_buckets));
	fig.launch_duration = metrics_histogram(
		r, "kiyot_cell_launch_duration_seconds",
		"Time of each step of a cell's launch: sizing, provider (the launch call), boot "
		"(until its agent took its certificate), enrollment (until it answered over TLS "
		"with it), apply (the cell's first Apply of its pod).",
		(const char *const[]){ "step", NULL }, launch_buckets, ARRAY_SIZE(launch_buckets));
	fig.launch_failures = metrics_counter(r, "kiyot_cell_launch_failures_total",
					      "Cell launches that failed, by reason.",
					      (const char *const[]){ "reason", NULL });
	fig.provider_calls = metrics_counter(
		r, "kiyot_provider_calls_total",
		"Calls to a cell provider's API, by action and outcome (ok, throttled, capacity, "
		"error).",
		(const char *const[]){ "provider", "action", "outcome", NULL });
	fig.provider_duration =
		metrics_histogram(r, "kiyot_provider_call_duration_seconds",
				  "Time of calls to a cell provider's API.",
				  (const char *const[]){ "provider", "action", NULL },
				  provider_buckets, ARRAY_SIZE(provider_buckets));
	fig.pulls = metrics_counter(r, "kiyot_image_pulls_total",
				    "Image pulls (PullImage), by outcome (ok, error).",
				    (const char *const[]){ "outcome", NULL });
	fig.pull_bytes = metrics_counter(
		r, "kiyot_image_pull_bytes_total",
		"Compressed bytes of images pulled that were not held before.", NULL);
	fig.pull_duration = metrics_histogram(r, "kiyot_image_pull_duration_seconds",
					      "Time of image pulls.", NULL, pull_buckets,
					      ARRAY_SIZE(pull_buckets));
	metrics_collector_add(r, process_collect, NULL);
}

static void fig_ready(void)
{
	pthread_once(&fig_once, fig_init);
}

const char *metrics_grpc_code_name(int status)
{
	static const char *const names[] = {
		"OK",
		"CANCELLED",
		"UNKNOWN",
		"INVALID_ARGUMENT",
		"DEADLINE_EXCEEDED",
		"NOT_FOUND",
		"ALREADY_EXISTS",
		"PERMISSION_DENIED",
		"RESOURCE_EXHAUSTED",
		"FAILED_PRECONDITION",
		"ABORTED",
		"OUT_OF_RANGE",
		"UNIMPLEMENTED",
		"INTERNAL",
		"UNAVAILABLE",
		"DATA_LOSS",
		"UNAUTHENTICATED",
	};

	return status >= 0 && (size_t)status < ARRAY_SIZE(names) ? names[status] : "UNKNOWN";
}

void metrics_cri_observe(void *arg, const char *method, int status, double seconds)
{
	const char *slash = method ? strrchr(method, '/') : NULL;
	const char *name = slash ? slash + 1 : method ? method : "unknown";

	(void)arg;
	fig_ready();
	metrics_add(fig.cri_requests, (const char *const[]){ name, metrics_grpc_code_name(status) },
		    1);
	metrics_observe(fig.cri_duration, (const char *const[]){ name }, seconds);
}

void metrics_launch_step(const char *step, double seconds)
{
	fig_ready();
	metrics_observe(fig.launch_duration, (const char *const[]){ step }, seconds);
}

void metrics_launch_failure(const char *reason)
{
	fig_ready();
	metrics_add(fig.launch_failures, (const char *const[]){ reason }, 1);
}

void metrics_provider_call(const char *provider, const char *action, const char *outcome,
			   double seconds)
{
	fig_ready();
	metrics_add(fig.provider_calls, (const char *const[]){ provider, action, outcome }, 1);
	metrics_observe(fig.provider_duration, (const char *const[]){ provider, action }, seconds);
}

void metrics_image_pull(const char *outcome, uint64_t bytes, double seconds)
{
	fig_ready();
	metrics_add(fig.pulls, (const char *const[]){ outcome }, 1);
	metrics_add(fig.pull_bytes, NULL, (double)bytes);
	metrics_observe(fig.pull_duration, NULL, seconds);
}

/* ---- the process, from /proc/self ---- */

/* The boot time, seconds since the epoch (/proc/stat's btime); 0 when unknown. */
static long long boot_time(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/stat", "re");
	char line[256];
	long long bt = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %lld", &bt) == 1)
			break;
	return bt;
}

/* /proc/self/stat's utime, stime (ticks), num_threads and starttime (ticks since boot). */
static int read_stat(unsigned long long *utime, unsigned long long *stime, long *threads,
		     unsigned long long *start)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/stat", "re");
	char line[1024];
	const char *p;

	if (!f || !fgets(line, sizeof(line), f))
		return -1;
	p = strrchr(line, ')'); /* the command may hold spaces and parentheses */
	if (!p)
		return -1;
	/* fields from 3 (state); utime is 14, stime 15, num_threads 20, starttime 22 */
	if (sscanf(p + 2,
		   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %ld "
		   "%*d %llu",
		   utime, stime, threads, start) != 4)
		return -1;
	return 0;
}

static long open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own descriptor */
}

static void gauge(struct metrics_writer *w, const char *name, const char *help, enum metrics_type t,
		  double v)
{
	metrics_write_family(w, name, help, t);
	metrics_write_sample(w, name, NULL, NULL, 0, v);
}

static void process_collect(void *ctx, struct metrics_writer *w)
{
	unsigned long long utime, stime, start;
	long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE), threads, fds;
	unsigned long long size = 0, resident = 0;
	struct rlimit rl;
	FILE *f;

	(void)ctx;
	if (ticks <= 0)
		ticks = 100;
	if (read_stat(&utime, &stime, &threads, &start) == 0) {
		gauge(w, "process_cpu_seconds_total", "User and system CPU time spent in seconds.",
		      METRICS_COUNTER, (double)(utime + stime) / (double)ticks);
		gauge(w, "process_start_time_seconds",
		      "Start time of the process since unix epoch in seconds.", METRICS_GAUGE,
		      (double)boot_time() + (double)start / (double)ticks);
		gauge(w, "process_threads", "Number of OS threads in the process.", METRICS_GAUGE,
		      (double)threads);
	}
	f = fopen("/proc/self/statm", "re");
	if (f && fscanf(f, "%llu %llu", &size, &resident) == 2) {
		gauge(w, "process_resident_memory_bytes", "Resident memory size in bytes.",
		      METRICS_GAUGE, (double)resident * (double)page);
		gauge(w, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
		      METRICS_GAUGE, (double)size * (double)page);
	}
	if (f)
		fclose(f);
	if ((fds = open_fds()) >= 0)
		gauge(w, "process_open_fds", "Number of open file descriptors.", METRICS_GAUGE,
		      (double)fds);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		gauge(w, "process_max_fds", "Maximum number of open file descriptors.",
		      METRICS_GAUGE,
		      rl.rlim_cur == RLIM_INFINITY ? (double)INT64_MAX : (double)rl.rlim_cur);
}

void metrics_figures_init(void)
{
	fig_ready();
}
