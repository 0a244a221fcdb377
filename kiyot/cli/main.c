/*
 * main.c: the kiyot command.
 *
 *	kiyot serve [flags]            the CRI server the kubelet talks to
 *	kiyot run -f pod.yaml          run a Pod manifest through the CRI, as a kubelet would
 *	kiyot get pods|cells           list what runs
 *	kiyot logs POD [-c C] [-f]     a container's output
 *	kiyot delete pod NAME          stop and remove a pod and its cell
 *	kiyot exec|attach|port-forward  stream into a pod (cli_stream.c)
 *	kiyot version
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "fsutil.h"
#include "daemon/daemon.h"
#include "log.h"
#include "memtrim.h"
#include "xalloc.h"
#include "version.h"

/* How long a start waits for the socket's lock, and how often it looks. */
#define LOCK_WAIT_MS 3000
#define LOCK_POLL_MS 20

static void usage(FILE *f)
{
	fputs("usage: kiyot <command> [options]\n"
	      "\n"
	      "commands:\n"
	      "  serve [--config FILE] [--socket PATH] [--state-dir DIR] [--log-level L]\n"
	      "        [--cell-cidr CIDR] [--bridge NAME] [--agent PATH] [--region R]\n"
	      "        [--fallback-runtime-endpoint unix:///run/containerd/containerd.sock]\n"
	      "        [--kubeconfig FILE]  (Cell objects; default: in-cluster when there)\n"
	      "                           serve CRI v1 on a unix socket (for the kubelet)\n"
	      "  run -f POD.yaml [--seccomp-profile-root DIR]\n"
	      "                           run a Kubernetes Pod manifest in a cell (Localhost\n"
	      "                           seccomp profiles below DIR, default\n"
	      "                           /var/lib/kubelet/seccomp)\n"
	      "  get pods | get cells     list pods or cells\n"
	      "  logs POD [-c CONTAINER] [-f]\n"
	      "                           print a container's log (-f: follow)\n"
	      "  delete pod NAME          stop and remove a pod; its cell is terminated\n"
	      "  exec [-i] [-t] POD [-c CONTAINER] -- COMMAND [ARG...]\n"
	      "                           run a command in a container (-i stdin, -t terminal)\n"
	      "  attach [-i] [-t] POD [-c CONTAINER]\n"
	      "                           join a running container's stdio\n"
	      "  port-forward POD [LOCAL:]REMOTE...\n"
	      "                           forward 127.0.0.1:LOCAL to the pod's port REMOTE\n"
	      "  local-cell launch|terminate ...\n"
	      "                           boot a local cell from a bootstrap document\n"
	      "  version                  print the version\n"
	      "\n"
	      "Client commands talk to the server at --socket (default /run/kiyot/kiyot.sock,\n"
	      "or $KIYOT_SOCKET).\n",
	      f);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("kiyot: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void set(char **dst, const char *v)
{
	free(*dst);
	*dst = xstrdup(v);
}

/* Holds an exclusive lock next to the socket, so a second server cannot steal it (gRPC
 * unlinks an existing socket when it binds). A kiyot killed while it forks a child (a cell's
 * agent, iptables) leaves the lock with that child until it executes its program: a start
 * right after such a crash waits that moment out (LOCK_WAIT_MS at most). */
static int lock_socket(const char *socket, struct err *err)
{
	_cleanup_free_ char *lock = xasprintf("%s.lock", socket);
	int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0)
		return err_errno(err, "open %s", lock);
	for (int waited = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; waited += LOCK_POLL_MS) {
		if (waited >= LOCK_WAIT_MS) {
			close(fd);
			return err_set(err, EADDRINUSE, "another kiyot serves %s (lock %s is held)",
				       socket, lock);
		}
		usleep(LOCK_POLL_MS * 1000);
	}
	return fd; /* held for the life of the process */
}

/* Each cell costs kiyot a connection and a stream: take the hard limit on open files. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			log_warn("cannot raise the open-file limit: %s", strerror(errno));
	}
}

/* Waits for SIGTERM or SIGINT (blocked in every thread); meanwhile, every MEM_TRIM_PERIOD_S,
 * gives back the memory a burst of calls left free (memtrim.h). */
static void wait_for_stop(const sigset_t *sigs)
{
	const struct timespec period = { MEM_TRIM_PERIOD_S, 0 };
	struct mem_trim trim = { 0 };

	mem_trim_check(&trim);
	for (;;) {
		int sig = sigtimedwait(sigs, NULL, &period);

		if (sig == SIGTERM || sig == SIGINT)
			return;
		if (sig < 0 && errno == EAGAIN)
			mem_trim_check(&trim);
		else if (sig < 0 && errno != EINTR)
			return; /* no way to wait for a signal: stop */
	}
}

static int serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "state-dir", required_argument, NULL, 'd' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "cell-cidr", required_argument, NULL, 'C' },
		{ "bridge", required_argument, NULL, 'b' },
		{ "agent", required_argument, NULL, 'a' },
		{ "region", required_argument, NULL, 'r' },
		{ "fallback-runtime-endpoint", required_argument, NULL, 'F' },
		{ "kubeconfig", required_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct kiyot k;
	struct err err = ERR_INIT;
	struct rpc_server *srv = NULL;
	const char *config = NULL;
	_cleanup_free_ char *dir = NULL;
	sigset_t sigs;
	int opt;

	mem_tune(); /* before any thread: the allocator's settings (memtrim.h) */
	memset(&k, 0, sizeof(k));
	kiyot_config_defaults(&k.cfg);
	/* the config file comes first so flags override it, wherever they stand */
	for (int i = 1; i < argc - 1; i++)
		if (strcmp(argv[i], "--config") == 0)
			config = argv[i + 1];
	if (config && kiyot_config_load_file(&k.cfg, config, &err) < 0)
		die("%s", err.msg);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			break;
		case 's':
			set(&k.cfg.socket, optarg);
			break;
		case 'd':
			set(&k.cfg.state_dir, optarg);
			break;
		case 'l':
			set(&k.cfg.log_level, optarg);
			break;
		case 'C':
			set(&k.cfg.cell_cidr, optarg);
			break;
		case 'b':
			set(&k.cfg.bridge, optarg);
			break;
		case 'a':
			set(&k.cfg.agent_path, optarg);
			break;
		case 'r':
			set(&k.cfg.region, optarg);
			break;
		case 'F':
			set(&k.cfg.fallback_runtime_endpoint, optarg);
			break;
		case 'K':
			set(&k.cfg.kubeconfig, optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (log_parse_level(k.cfg.log_level) < 0)
		die("--log-level: \"%s\" is not one of debug, info, warn, error", k.cfg.log_level);
	log_set_level((enum log_level)log_parse_level(k.cfg.log_level));
	if (access(k.cfg.agent_path, X_OK) < 0)
		die("cell agent %s is not executable; build it (make) or pass --agent",
		    k.cfg.agent_path);

	/* signals go to sigwait below, in this thread; gRPC's threads inherit the mask */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();

	dir = xstrdup(k.cfg.socket);
	if (strrchr(dir, '/'))
		*strrchr(dir, '/') = '\0';
	if (dir[0] && fs_mkdir_p(dir, 0755, &err) < 0)
		die("%s", err.msg);
	if (lock_socket(k.cfg.socket, &err) < 0)
		die("%s", err.msg);
	reg_set_policy(&k.cfg.pulls); /* kiyot's own pulls; cells get it in their bootstrap */
	if (daemon_start(&k, &srv, &err) < 0)
		die("%s", err.msg);
	log_info("serving CRI v1 on %s (state %s, cells %s on %s)", k.cfg.socket, k.cfg.state_dir,
		 k.cfg.cell_cidr, k.cfg.bridge);
	wait_for_stop(&sigs);
	log_info("stopping (cells keep running and are adopted at the next start)");
	daemon_stop(&k, srv);
	log_info("stopped");
	kiyot_config_release(&k.cfg);
	return 0;
}

int main(int argc, char **argv)
{
	log_set_prefix("kiyot");
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "serve") == 0)
		return serve(argc - 1, argv + 1);
	if (strcmp(argv[1], "local-cell") == 0)
		return localcell_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
		puts("kiyot " KIYOT_VERSION " (CRI v1)");
		return 0;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	return cli_main(argc, argv);
}
