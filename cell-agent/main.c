/*
 * main.c: the cell-agent command.
 *
 *	cell-agent --bootstrap FILE   the agent of a cell
 *	cell-agent --bootstrap-imds [--bootstrap-cache FILE] [--imds-endpoint URL]
 *	                              the same on EC2: the document is the instance's user-data,
 *	                              read from the metadata service into FILE (once: a restarted
 *	                              agent reads FILE)
 *	cell-agent shim ...           the per-unit monitor the supervisor starts (see shim.c)
 *
 * The agent enters a private mount namespace first (crun needs the cgroup v1 layout without
 * the unified mount). Whoever runs the cell restarts a dead agent (systemd on a VM, the local
 * provider's heal for local cells); units survive that: they belong to their shims, and the
 * new agent adopts them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "cgroup.h"
#include "hostmount.h"
#include "podns.h"
#include "clock.h"
#include "enroll.h"
#include "feed.h"
#include "fsutil.h"
#include "image.h"
#include "imds.h"
#include "imdsguard.h"
#include "interrupt.h"
#include "log.h"
#include "pidlock.h"
#include "pki.h"
#include "rpc.h"
#include "supervisor.h"
#include "xalloc.h"
#include "version.h"

#define BOOTSTRAP_MAX (1u << 20)
#define BOOTSTRAP_CACHE_DEFAULT "/run/cell-agent/bootstrap.json"
#define USAGE                                                                                      \
	"usage: cell-agent --bootstrap FILE | cell-agent --bootstrap-imds [--bootstrap-cache "     \
	"FILE] [--imds-endpoint URL] | cell-agent shim ..."

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("cell-agent: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* The cell's own IPv4 address: the first up, non-loopback interface's. */
static char *cell_address(void)
{
	struct ifaddrs *ifs = NULL;
	char buf[INET_ADDRSTRLEN] = "";

	if (getifaddrs(&ifs) < 0)
		return NULL;
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
			continue;
		inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf,
			  sizeof(buf));
		break;
	}
	freeifaddrs(ifs);
	return buf[0] ? xstrdup(buf) : NULL;
}

/* Counts agent starts in the state dir, so kiyot can tell a restarted agent. */
static uint64_t next_incarnation(const char *state_dir)
{
	_cleanup_free_ char *path = xasprintf("%s/incarnation", state_dir);
	char *text = NULL;
	struct err err = ERR_INIT;
	uint64_t n = 0;
	char buf[32];

	if (fs_read_file(path, 64, &text, NULL, &err) == 0)
		n = strtoull(text, NULL, 10);
	free(text);
	n++;
	snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)n);
	if (fs_write_file(path, buf, strlen(buf), 0600, &err) < 0)
		log_warn("%s", err.msg);
	return n;
}

/* One agent per cell: its lock, in the state directory, is held until the process ends (the
 * descriptor is never closed, and nothing the agent executes inherits it). A second agent
 * started beside a live one, which would listen on the same address, leaves at once. */
static int hold_cell(const struct agent *a, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", a->cfg.state_dir, PIDLOCK_AGENT_FILE);
	int fd = pidlock_take(path, err);

	if (fd == -EBUSY)
		return err_wrap(err, "cell %s already has an agent; not starting a second one",
				a->cfg.cell_id);
	if (fd < 0)
		return err_wrap(err, "cell %s: the agent's lock", a->cfg.cell_id);
	return 0;
}

static void enrolled(struct agent *a)
{
	(void)a;
	/* the main thread stops the plaintext server (a handler cannot: it waits for them) */
	kill(getpid(), SIGUSR1);
}

/* A new cell: serves Enroll alone over plaintext until kiyot gave it its certificate (0), or
 * until asked to stop (1). */
static int serve_enrollment(struct agent *a, const char *addr, sigset_t *sigs)
{
	struct err err = ERR_INIT;
	struct rpc_server_config rc = { 0 };
	struct rpc_server *srv = NULL;
	int sig;

	rc.address = addr;
	rc.methods = agent_enroll_table(&rc.n_methods);
	rc.svc = a;
	rc.workers = 2;
	rc.max_message = 64u << 10;
	a->on_enrolled = enrolled;
	if (rpc_server_start(&rc, &srv, &err) < 0)
		die("%s", err.msg);
	log_info("cell %s (pod %s/%s) waiting on %s for kiyot to enroll it", a->cfg.cell_id,
		 a->cfg.pod_namespace, a->cfg.pod_name, addr);
	do {
		if (sigwait(sigs, &sig) != 0)
			sig = SIGTERM;
	} while (sig != SIGTERM && sig != SIGINT && !(sig == SIGUSR1 && enroll_done(a->enroll)));
	/* Enroll's answer goes out first: the stop waits for the call to end (a second at most;
	 * kiyot goes on without the answer, only later) */
	rpc_server_stop_within(srv, sig == SIGUSR1 ? 1000 : 0);
	return sig == SIGUSR1 ? 0 : 1;
}

/* The cell holds its certificate, all a restarted agent needs: the one-time secret leaves
 * the bootstrap document on its disk and the agent's memory. A document that cannot be
 * rewritten is logged; its secret enrolls nothing any more (kiyot forgot it). */
static void forget_secret(struct agent *a)
{
	struct err err = ERR_INIT;

	if (!a->cfg.enroll_secret[0])
		return;
	if (agent_config_drop_secret(a->bootstrap, BOOTSTRAP_MAX, &err) < 0)
		log_warn("the enrollment secret stays in the bootstrap document: %s", err.msg);
	explicit_bzero(a->cfg.enroll_secret, strlen(a->cfg.enroll_secret));
}

/* The cell feed (feed.h) on the port after the gRPC one: kiyot's Watch of the cell, over the
 * same certificates, kiyot's alone. */
static struct feed_server *start_feed(struct agent *a)
{
	struct feed_server_config fc = { 0 };
	struct feed_server *feed = NULL;
	struct err err = ERR_INIT;
	_cleanup_free_ char *addr = xasprintf("%s:%d", a->ip, FEED_PORT(a->cfg.port));

	fc.address = addr;
	fc.req_desc = &kiyot__cell__v1__watch_request__descriptor;
	fc.max_request = 1u << 20;
	fc.max_conns = 64;
	fc.max_pending_per_peer = FEED_PENDING_PER_PEER;
	fc.max_sessions = 4; /* kiyot holds one; a few while a restarted one replaces it */
	fc.session = agent_feed_session;
	fc.arg = a;
	if (pki_tls_ctx(a->cfg.ca, enroll_cert(a->enroll), enroll_key(a->enroll), PKI_SERVER,
			"kiyot", &fc.ctx, &err) < 0 ||
	    feed_server_start(&fc, &feed, &err) < 0)
		die("the cell feed on %s: %s", addr, err.msg);
	SSL_CTX_free(fc.ctx); /* the server holds its own reference */
	return feed;
}

/* run_agent with imds set when the cell is on EC2 (--bootstrap-imds, or $KIYOT_IMDS_ENDPOINT
 * given): the instance metadata service is then watched for spot interruptions, at endpoint
 * (NULL: $KIYOT_IMDS_ENDPOINT, else EC2's). */
static int run_agent(struct agent *a, bool imds, const char *endpoint)
{
	struct interrupt_watch *interrupts = NULL;
	struct err err = ERR_INIT;
	struct rpc_server_config rc = { 0 };
	struct rpc_server *srv = NULL;
	struct feed_server *feed = NULL;
	const struct rpc_pool *pools;
	struct image_prepull *prepull;
	_cleanup_free_ char *addr = NULL;
	_cleanup_free_ char *tls_dir = xasprintf("%s/tls", a->cfg.state_dir);
	sigset_t sigs;
	int sig, stop = 0;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	a->boot_ns = clock_now_ns();
	a->incarnation = next_incarnation(a->cfg.state_dir);
	if (!a->cfg.ca[0])
		die("the bootstrap document names no CA (\"ca\"): kiyot's calls cannot be told "
		    "from "
		    "anyone's");
	if (enroll_open(tls_dir, a->cfg.cell_id, a->cfg.ca, a->cfg.enroll_secret, &a->enroll,
			&err) < 0)
		die("%s", err.msg);
	for (int tries = 0; !(a->ip = cell_address()); tries++) {
		if (tries > 100)
			die("the cell has no IPv4 address to listen on");
		usleep(50 * 1000);
	}
	if (agent_open(a, &err) < 0)
		die("%s", err.msg);
	if (imds)
		interrupts = interrupt_watch_start(a->hub, endpoint);
	addr = xasprintf("%s:%d", a->ip, a->cfg.port);
	/* the pod's images, while the kubelet is still on its way to asking for them; a
	 * restarted agent finds them in its store and fetches nothing again */
	prepull = image_prepull_start(a->images, a->cfg.prepull, a->cfg.n_prepull);
	if (!enroll_done(a->enroll))
		stop = serve_enrollment(a, addr, &sigs);
	if (!stop) {
		forget_secret(a);
		rc.address = addr;
		rc.methods = agent_method_table(&rc.n_methods);
		rc.svc = a;
		/* a pool per kind of call: stalled pulls never hold up exec probes or stats */
		pools = agent_pool_table(&rc.n_pools);
		memcpy(rc.pools, pools, rc.n_pools * sizeof(*pools));
		rc.max_message = 64u << 20;
		/* only the kiyot that made the cell may drive it: other cells share its network */
		rc.tls = (struct rpc_tls){ a->cfg.ca, enroll_cert(a->enroll), enroll_key(a->enroll),
					   "kiyot" };
		if (rpc_server_start(&rc, &srv, &err) < 0)
			die("%s", err.msg);
		feed = start_feed(a);
		log_info("cell %s (pod %s/%s) serving on %s over TLS (its feed on port %d), "
			 "incarnation %llu",
			 a->cfg.cell_id, a->cfg.pod_namespace, a->cfg.pod_name, addr,
			 FEED_PORT(a->cfg.port), (unsigned long long)a->incarnation);
		do {
			if (sigwait(&sigs, &sig) != 0)
				sig = SIGTERM;
		} while (sig != SIGTERM && sig != SIGINT);
	}
	log_info("stopping; units keep running under their shims");
	interrupt_watch_stop(interrupts);
	feed_server_stop(feed);
	rpc_server_stop(srv);
	if (image_prepull_stop(prepull, 2000) < 0) {
		/* the store is still in use: leave it to the exit; the next start removes the
		 * pull's partial files */
		log_info("stopping during a pre-pull; the next start finishes it");
		return 0;
	}
	agent_close(a);
	enroll_free(a->enroll);
	return 0;
}

/* Starts the pod's namespace holder now, while the agent is one small thread and can fork it
 * without an exec, rather than when the pod's first unit is created (in CreateContainer): the
 * kubelet's pods all share their IPC namespace, so nearly every cell needs it. A holder of an
 * earlier run of the agent is kept. Should this fail, a unit that needs the namespaces tries
 * again and reports why. */
static void start_podns(const struct agent *a)
{
	struct podns ns = { 0 };
	struct err err = ERR_INIT;

	if (podns_ensure(a->cfg.state_dir, NULL, &ns, &err) < 0)
		log_info("the pod's namespaces are left for its first unit that needs them: %s",
			 err.msg);
}

int main(int argc, char **argv)
{
	struct agent a;
	struct err err = ERR_INIT;
	const char *boot = NULL, *cache = BOOTSTRAP_CACHE_DEFAULT, *endpoint = NULL;
	bool from_imds = false;
	char *text = NULL;
	size_t len = 0;
	char self[PATH_MAX];
	ssize_t n;
	int lvl;

	if (argc > 1 && strcmp(argv[1], "shim") == 0)
		return shim_main(argc - 1, argv + 1);
	if (argc == 2 && strcmp(argv[1], PODNS_HOLDER_ARG) == 0)
		podns_holder_main();
	log_set_prefix("cell-agent");
	podns_set_args(argc, argv);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--bootstrap") == 0 && i + 1 < argc)
			boot = argv[++i];
		else if (strcmp(argv[i], "--bootstrap-imds") == 0)
			from_imds = true;
		else if (strcmp(argv[i], "--bootstrap-cache") == 0 && i + 1 < argc)
			cache = argv[++i];
		else if (strcmp(argv[i], "--imds-endpoint") == 0 && i + 1 < argc)
			endpoint = argv[++i];
		else if (strcmp(argv[i], "--version") == 0) {
			puts("cell-agent " KIYOT_VERSION);
			return 0;
		} else
			die(USAGE);
	}
	if (!boot == !from_imds || (cache[0] != '/'))
		die(USAGE " (one of --bootstrap and --bootstrap-imds; an absolute cache path)");
	if (from_imds) {
		struct imds_config ic = { .endpoint = endpoint };

		if (imds_bootstrap(&ic, NULL, cache, BOOTSTRAP_MAX, &text, &len, &err) < 0)
			die("%s", err.msg);
		boot = cache;
	} else if (fs_read_file(boot, BOOTSTRAP_MAX, &text, &len, &err) < 0)
		die("bootstrap: %s", err.msg);
	memset(&a, 0, sizeof(a));
	a.bootstrap = boot;
	if (agent_config_parse(text, len, &a.cfg, &err) < 0)
		die("bootstrap %s: %s", boot, err.msg);
	explicit_bzero(text, len); /* it held the enrollment secret */
	free(text);
	if ((lvl = log_parse_level(a.cfg.log_level)) >= 0)
		log_set_level((enum log_level)lvl);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		die("cannot find my own binary: %s", strerror(errno));
	self[n] = '\0';
	a.self_path = xstrdup(self);
	if (fs_mkdir_p(a.cfg.state_dir, 0700, &err) < 0)
		die("%s", err.msg);
	if (hold_cell(&a, &err) < 0)
		die("%s", err.msg);
	a.host_mnt_ns = hostmount_open_ns(&err);
	if (a.host_mnt_ns < 0)
		die("%s", err.msg);
	if (supervisor_private_cgroup_ns(&err) < 0)
		die("%s", err.msg);
	a.cgroup = cgroup_units_parent(&err);
	if (!a.cgroup)
		die("%s", err.msg);
	if ((from_imds || getenv(IMDS_ENDPOINT_ENV)) && cgroup_v2()) {
		/* on EC2 the units share the instance's network: keep them off its metadata
		 * service (the instance role's credentials, this bootstrap document) */
		_cleanup_free_ char *units = cgroup_file("", a.cgroup, "");

		if (imdsguard_attach(units, &err) < 0)
			die("%s (the cell's units would reach the instance's credentials: a "
			    "kernel with cgroup BPF, CONFIG_CGROUP_BPF, is needed)",
			    err.msg);
	}
	start_podns(&a);
	return run_agent(&a, from_imds || getenv(IMDS_ENDPOINT_ENV), endpoint);
}
