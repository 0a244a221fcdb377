/*
 * cmd_localcell.c: `kiyot local-cell`, the local provider on the command line. It boots a cell
 * from a bootstrap document the way EC2 boots an instance from its user-data, which is how the
 * test suite's EC2 endpoint gives its "instances" real cells.
 *
 *	kiyot local-cell launch --state-dir D --id ID --bootstrap FILE [--cpus N]
 *	      [--memory BYTES] [--instance-type T] [--bridge B] [--cidr C] [--agent PATH]
 *	      [--cluster-id X]                    prints {"ip": ..., "instance_id": ...}
 *	kiyot local-cell terminate --state-dir D --id ID [--bridge B] [--cidr C]
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "fsutil.h"
#include "providers/provider.h"
#include "xalloc.h"

#define BOOTSTRAP_MAX (1u << 20)

/* Prints "kiyot: <message>" and returns code. */
static int complain(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int complain(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("kiyot: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

static int usage(void)
{
	fputs("usage: kiyot local-cell launch --state-dir D --id ID --bootstrap FILE [--cpus N]\n"
	      "                         [--memory BYTES] [--instance-type T] [--bridge B]\n"
	      "                         [--cidr C] [--agent PATH] [--cluster-id X]\n"
	      "       kiyot local-cell terminate --state-dir D --id ID [--bridge B] [--cidr C]\n",
	      stderr);
	return 2;
}

int localcell_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state-dir", required_argument, NULL, 'd' },
		{ "id", required_argument, NULL, 'i' },
		{ "bootstrap", required_argument, NULL, 'f' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "memory", required_argument, NULL, 'm' },
		{ "instance-type", required_argument, NULL, 't' },
		{ "bridge", required_argument, NULL, 'b' },
		{ "cidr", required_argument, NULL, 'C' },
		{ "agent", required_argument, NULL, 'a' },
		{ "cluster-id", required_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 },
	};
	struct local_provider_config lc = { 0 };
	struct cell_spec spec = { 0 };
	struct cell_info info = { 0 };
	struct provider prov = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *boot = NULL;
	_cleanup_free_ char *lock_path = NULL;
	_cleanup_close_ int lock_fd = -1;
	const char *boot_file = NULL;
	char *end;
	int opt, ret, launch;

	if (argc < 2 || (strcmp(argv[1], "launch") && strcmp(argv[1], "terminate")))
		return usage();
	launch = strcmp(argv[1], "launch") == 0;
	lc.bridge = "kiyot0";
	lc.cidr = "10.77.0.0/16";
	lc.cgroup_root = "kiyot";
	lc.cluster_id = "";
	lc.agent_path = "/usr/local/bin/cell-agent";
	spec.cpus = 2;
	spec.memory_bytes = 1LL << 30;
	spec.instance_type = "";
	optind = 2;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			lc.state_dir = optarg;
			break;
		case 'i':
			spec.cell_id = optarg;
			break;
		case 'f':
			boot_file = optarg;
			break;
		case 'c':
			spec.cpus = strtod(optarg, &end);
			if (*end || spec.cpus <= 0)
				return complain(2, "--cpus: \"%s\" is not a positive number",
						optarg);
			break;
		case 'm':
			spec.memory_bytes = strtoll(optarg, &end, 10);
			if (*end || spec.memory_bytes <= 0)
				return complain(2, "--memory: \"%s\" is not a byte count", optarg);
			break;
		case 't':
			spec.instance_type = optarg;
			break;
		case 'b':
			lc.bridge = optarg;
			break;
		case 'C':
			lc.cidr = optarg;
			break;
		case 'a':
			lc.agent_path = optarg;
			break;
		case 'k':
			lc.cluster_id = optarg;
			break;
		default:
			return usage();
		}
	}
	if (!lc.state_dir || !spec.cell_id || (launch && !boot_file))
		return usage();
	if (launch && fs_read_file(boot_file, BOOTSTRAP_MAX, &boot, NULL, &err) < 0)
		return complain(1, "bootstrap: %s", err.msg);
	if (fs_mkdir_p(lc.state_dir, 0700, &err) < 0)
		return complain(1, "%s", err.msg);
	/* several of these may run at once on one state dir (a test EC2 endpoint booting many
	 * instances): the provider's address leases are per process, so take turns */
	lock_path = xasprintf("%s/.local-cell.lock", lc.state_dir);
	lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0)
		return complain(1, "lock %s: %s", lock_path, strerror(errno));
	if (provider_local_new(&lc, &prov, &err) < 0)
		return complain(1, "%s", err.msg);
	spec.cluster_id = lc.cluster_id;
	spec.bootstrap = boot;
	if (launch) {
		ret = prov.ops->launch(prov.self, &spec, &info, &err);
		if (ret == 0) {
			json_t *o = json_pack("{s:s, s:s}", "ip", info.ip, "instance_id",
					      info.instance_id);
			char *text = json_dumps(o, JSON_COMPACT);

			puts(text);
			free(text);
			json_decref(o);
			cell_info_release(&info);
		}
	} else {
		ret = prov.ops->terminate(prov.self, spec.cell_id, &err);
	}
	prov.ops->destroy(prov.self);
	if (ret < 0)
		return complain(1, "%s", err.msg);
	return 0;
}
