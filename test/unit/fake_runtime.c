/*
 * fake_runtime.c: the OCI runtime stand-in of the agent's unit tests; see fake_runtime.h.
 */
#include "fake_runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fdpass.h"
#include "fsutil.h"
#include "proc.h"
#include "xalloc.h"

/* The global options and the command's own arguments. */
struct rt {
	const char *root, *log;
	const char *cmd;
	char **args; /* after cmd */
	int nargs;
};

/* An error as crun reports one: on stderr and in the --log file; returns status. */
static int __attribute__((format(printf, 3, 4)))
rt_fail(const struct rt *r, int status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", msg);
	if (r->log) {
		int fd = open(r->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

		if (fd >= 0) {
			dprintf(fd, "{\"msg\":\"%s\",\"level\":\"error\"}\n", msg);
			close(fd);
		}
	}
	return status;
}

int fake_runtime_called(const char *argv0)
{
	const char *slash = strrchr(argv0, '/');

	return strcmp(slash ? slash + 1 : argv0, FAKE_RUNTIME_NAME) == 0;
}

/* Appends the command and its arguments to root/calls.log. */
static void record_call(const struct rt *r)
{
	_cleanup_free_ char *path = xasprintf("%s/calls.log", r->root);
	_cleanup_free_ char *line = xstrdup(r->cmd);
	int fd;

	for (int i = 0; i < r->nargs; i++) {
		char *next = xasprintf("%s %s", line, r->args[i]);

		free(line);
		line = next;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd >= 0) {
		dprintf(fd, "%s\n", line);
		close(fd);
	}
}

char *fake_runtime_calls(const char *root)
{
	_cleanup_free_ char *path = xasprintf("%s/calls.log", root);
	char *text = NULL;
	struct err err = ERR_INIT;

	if (fs_read_file(path, 1 << 20, &text, NULL, &err) < 0)
		return xstrdup("");
	return text;
}

void fake_runtime_fail(const char *root, const char *command, const char *message)
{
	_cleanup_free_ char *path = xasprintf("%s/fail-%s", root, command);
	struct err err = ERR_INIT;

	if (!message)
		unlink(path);
	else if (fs_mkdir_p(root, 0700, &err) < 0 ||
		 fs_write_file(path, message, strlen(message), 0600, &err) < 0)
		abort();
}

/* The value of option name among the command's arguments, or NULL. */
static const char *opt(const struct rt *r, const char *name)
{
	for (int i = 0; i + 1 < r->nargs; i++)
		if (strcmp(r->args[i], name) == 0)
			return r->args[i + 1];
	return NULL;
}

static bool flag(const struct rt *r, const char *name)
{
	for (int i = 0; i < r->nargs; i++)
		if (strcmp(r->args[i], name) == 0)
			return true;
	return false;
}

/* The container's id: the last argument (kill's is the one before its signal). */
static const char *id_of(const struct rt *r)
{
	if (strcmp(r->cmd, "kill") == 0)
		return r->nargs >= 2 ? r->args[r->nargs - 2] : NULL;
	return r->nargs >= 1 ? r->args[r->nargs - 1] : NULL;
}

/* The process a container runs: its pid and start time, from root/ID/state; false when the
 * container was never made or was deleted. */
static bool read_state(const struct rt *r, const char *id, long *pid, unsigned long long *start)
{
	_cleanup_free_ char *path = xasprintf("%s/%s/state", r->root, id);
	_cleanup_free_ char *text = NULL;
	struct err err = ERR_INIT;

	return fs_read_file(path, 128, &text, NULL, &err) == 0 &&
	       sscanf(text, "%ld %llu", pid, start) == 2;
}

/* Gives the process a new terminal and sends its master to the console socket at path. */
static int take_terminal(const struct rt *r, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int m = posix_openpt(O_RDWR | O_NOCTTY), s = -1, slave;
	const char *name;

	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 || !(name = ptsname(m)))
		return rt_fail(r, -1, "openpty: %s", strerror(errno));
	if (strlen(path) >= sizeof(sa.sun_path))
		return rt_fail(r, -1, "console socket path too long: %s", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || fdpass_send(s, m) < 0)
		return rt_fail(r, -1, "console socket %s: %s", path, strerror(errno));
	close(s);
	setsid();
	slave = open(name, O_RDWR);
	if (slave < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
		return rt_fail(r, -1, "open %s: %s", name, strerror(errno));
	close(m);
	dup2(slave, 0);
	dup2(slave, 1);
	dup2(slave, 2);
	if (slave > 2)
		close(slave);
	return 0;
}

static void strv_release(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* Runs the OCI process object p (args, env, cwd) in place of this process: the pid file
 * first, then the command. Returns only on failure: 127 for run, crun's 255 for exec. */
static int run_process(const struct rt *r, json_t *p, const char *pid_file, const char *console)
{
	json_t *args = json_object_get(p, "args"), *env = json_object_get(p, "env"), *v;
	const char *cwd = json_string_value(json_object_get(p, "cwd"));
	size_t n = json_array_size(args), i;
	char **argv;
	struct err err = ERR_INIT;
	char pid[32];
	int ret;

	if (n == 0)
		return rt_fail(r, 1, "process: no args");
	argv = xcalloc(n + 1, sizeof(char *));
	json_array_foreach (args, i, v)
		argv[i] = xstrdup(json_string_value(v) ? json_string_value(v) : "");
	if (console && take_terminal(r, console) < 0) {
		strv_release(argv);
		return 1;
	}
	if (!console)
		setpgid(0, 0);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (pid_file && fs_write_file(pid_file, pid, strlen(pid), 0644, &err) < 0) {
		strv_release(argv);
		return rt_fail(r, 1, "%s", err.msg);
	}
	clearenv();
	json_array_foreach (env, i, v)
		if (json_string_value(v))
			putenv(xstrdup(json_string_value(v))); /* environ holds it */
	if (!cwd || chdir(cwd) < 0)
		(void)chdir("/");
	execvp(argv[0], argv);
	if (strcmp(r->cmd, "exec") == 0)
		ret = rt_fail(r, 255, "executable file `%s` not found in $PATH: %s", argv[0],
			      strerror(errno));
	else
		ret = rt_fail(r, 127, "exec %s: %s", argv[0], strerror(errno));
	strv_release(argv);
	return ret;
}

static int cmd_run(const struct rt *r, const char *id)
{
	const char *bundle = opt(r, "--bundle");
	_cleanup_free_ char *cfg_path = xasprintf("%s/config.json", bundle ? bundle : ".");
	_cleanup_free_ char *dir = xasprintf("%s/%s", r->root, id);
	_cleanup_free_ char *state = xasprintf("%s/state", dir);
	struct err err = ERR_INIT;
	unsigned long long start = 0;
	json_error_t jerr;
	json_t *cfg;
	char text[64];
	char st;
	int ret;

	if (fs_exists(state))
		return rt_fail(r, 1, "container `%s` already exists", id);
	cfg = json_load_file(cfg_path, 0, &jerr);
	if (!json_is_object(json_object_get(cfg, "process")))
		ret = rt_fail(r, 1, "%s: %s", cfg_path, cfg ? "no process" : jerr.text);
	else if (proc_stat(getpid(), &st, &start) < 0 || fs_mkdir_p(dir, 0700, &err) < 0)
		ret = rt_fail(r, 1, "state of %s: %s", id, err.msg);
	else if (snprintf(text, sizeof(text), "%d %llu\n", (int)getpid(), start) < 0 ||
		 fs_write_file(state, text, strlen(text), 0600, &err) < 0)
		ret = rt_fail(r, 1, "%s", err.msg);
	else
		ret = run_process(r, json_object_get(cfg, "process"), opt(r, "--pid-file"),
				  opt(r, "--console-socket"));
	json_decref(cfg);
	return ret;
}

static int cmd_exec(const struct rt *r, const char *id)
{
	const char *file = opt(r, "--process");
	unsigned long long start;
	json_error_t jerr = { 0 };
	json_t *p;
	long pid;
	int ret;

	if (!read_state(r, id, &pid, &start) || !proc_alive(pid, start))
		return rt_fail(r, 255, "container `%s` is not running", id);
	p = file ? json_load_file(file, 0, &jerr) : NULL;
	if (!json_is_object(p))
		ret = rt_fail(r, 255, "--process %s: %s", file ? file : "(none)",
			      p ? "not an object" : jerr.text);
	else
		ret = run_process(r, p, opt(r, "--pid-file"), opt(r, "--console-socket"));
	json_decref(p);
	return ret;
}

/* A signal by crun's names ("TERM", "SIGKILL") or number; 0 when unknown. */
static int signal_of(const char *s)
{
	static const struct {
		const char *name;
		int sig;
	} sigs[] = { { "TERM", SIGTERM }, { "KILL", SIGKILL }, { "INT", SIGINT },
		     { "HUP", SIGHUP },	  { "QUIT", SIGQUIT }, { "USR1", SIGUSR1 },
		     { "USR2", SIGUSR2 }, { "STOP", SIGSTOP }, { "CONT", SIGCONT } };
	char *end;
	long n = strtol(s, &end, 10);

	if (!*end && n > 0 && n < 65)
		return (int)n;
	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		if (strcmp(sigs[i].name, s) == 0)
			return sigs[i].sig;
	return 0;
}

static int cmd_kill(const struct rt *r, const char *id)
{
	int sig = signal_of(r->nargs ? r->args[r->nargs - 1] : "");
	unsigned long long start;
	long pid;

	if (!sig)
		return rt_fail(r, 1, "unknown signal %s", r->nargs ? r->args[r->nargs - 1] : "");
	if (!read_state(r, id, &pid, &start))
		return rt_fail(r, 1, "container `%s` does not exist", id);
	if (!proc_alive(pid, start))
		return rt_fail(r, 1, "container `%s` is not running", id);
	kill((pid_t)-pid, sig);
	kill((pid_t)pid, sig);
	return 0;
}

static int cmd_delete(const struct rt *r, const char *id)
{
	_cleanup_free_ char *dir = xasprintf("%s/%s", r->root, id);
	bool force = flag(r, "-f") || flag(r, "--force");
	struct err err = ERR_INIT;
	unsigned long long start;
	long pid;

	if (!read_state(r, id, &pid, &start))
		return force ? 0 : rt_fail(r, 1, "container `%s` does not exist", id);
	if (proc_alive(pid, start)) {
		if (!force)
			return rt_fail(r, 1, "container `%s` is running", id);
		kill((pid_t)-pid, SIGKILL);
		kill((pid_t)pid, SIGKILL);
	}
	return fs_remove_tree(dir, &err) < 0 ? rt_fail(r, 1, "%s", err.msg) : 0;
}

static int cmd_state(const struct rt *r, const char *id)
{
	unsigned long long start;
	long pid;

	if (!read_state(r, id, &pid, &start))
		return rt_fail(r, 1, "container `%s` does not exist", id);
	printf("{\"ociVersion\":\"1.0.0\",\"id\":\"%s\",\"pid\":%ld,\"status\":\"%s\"}\n", id, pid,
	       proc_alive(pid, start) ? "running" : "stopped");
	return 0;
}

int fake_runtime_main(int argc, char **argv)
{
	struct rt r = { .root = "/run/fake-runtime" };
	_cleanup_free_ char *fail = NULL, *why = NULL;
	struct err err = ERR_INIT;
	const char *id;
	int i = 1;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--root") == 0 && i + 1 < argc)
			r.root = argv[++i];
		else if (strcmp(argv[i], "--log") == 0 && i + 1 < argc)
			r.log = argv[++i];
	}
	if (i >= argc)
		return rt_fail(&r, 1, "usage: %s [--root DIR] [--log FILE] COMMAND ...", argv[0]);
	r.cmd = argv[i];
	r.args = argv + i + 1;
	r.nargs = argc - i - 1;
	if (fs_mkdir_p(r.root, 0700, &err) < 0)
		return rt_fail(&r, 1, "%s", err.msg);
	record_call(&r);
	fail = xasprintf("%s/fail-%s", r.root, r.cmd);
	if (fs_read_file(fail, 4096, &why, NULL, &err) == 0)
		return rt_fail(&r, 1, "%s", why);
	id = id_of(&r);
	if (!id)
		return rt_fail(&r, 1, "%s: no container id", r.cmd);
	if (strcmp(r.cmd, "run") == 0)
		return cmd_run(&r, id);
	if (strcmp(r.cmd, "exec") == 0)
		return cmd_exec(&r, id);
	if (strcmp(r.cmd, "kill") == 0)
		return cmd_kill(&r, id);
	if (strcmp(r.cmd, "delete") == 0)
		return cmd_delete(&r, id);
	if (strcmp(r.cmd, "state") == 0)
		return cmd_state(&r, id);
	if (strcmp(r.cmd, "update") == 0)
		return 0;
	return rt_fail(&r, 1, "unknown command %s", r.cmd);
}
