/*
 * supervisor_exec.c: OCI runtime commands the supervisor runs against its units' containers:
 * "kill" to signal a unit being stopped and "exec" for a command in a running unit.
 */
#include "supervisor_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "fsutil.h"
#include "xalloc.h"

#define EXEC_OUTPUT_MAX (16 * 1024 * 1024)
/* stdout and stderr together in one answer: the kubelet takes 16 MiB a message, framing
 * included */
#define EXEC_ANSWER_MAX (EXEC_OUTPUT_MAX - 4096)
#define EXEC_NOTE_MAX 256
#define RUNTIME_CMD_TIMEOUT_MS 10000
/* An exec without a timeout (or with one past this) ends after a day. */
#define EXEC_TIMEOUT_MAX_S (24LL * 3600)
/* How long a timed-out exec's processes are waited for after SIGKILL. */
#define EXEC_KILL_WAIT_NS (2 * 1000000000LL)

/* Runs "<runtime> kill <id> <sig>"; 0 when the runtime accepted it. */
int unit_runtime_kill(struct supervisor *s, struct unit *u, const char *sig)
{
	char *argv[] = { s->runtime, "--root", s->runtime_root, "kill", u->id, (char *)sig, NULL };
	struct err err = ERR_INIT;
	int status = 0;

	if (shim_run_capture(argv, RUNTIME_CMD_TIMEOUT_MS, 4096, NULL, NULL, NULL, NULL, &status,
			     &err) < 0)
		return -1;
	return status == 0 ? 0 : -1;
}

/* Runs "<runtime> update <flags> <id>"; the runtime's message when it fails. */
int unit_runtime_update(struct supervisor *s, const char *id, const char *mem, const char *quota,
			const char *period, struct err *err)
{
	char *argv[] = { s->runtime,	"--root",	s->runtime_root, "update", (char *)mem,
			 (char *)quota, (char *)period, (char *)id,	 NULL };
	char *out = NULL, *errout = NULL;
	size_t ol = 0, el = 0;
	int status = 0, ret;

	ret = shim_run_capture(argv, RUNTIME_CMD_TIMEOUT_MS, 4096, &out, &ol, &errout, &el, &status,
			       err);
	if (ret == 0 && status != 0)
		ret = err_set(err, EIO, "%s update: %.*s", s->runtime,
			      (int)(el && errout[el - 1] == '\n' ? el - 1 : el),
			      errout ? errout : "");
	free(out);
	free(errout);
	return ret;
}

/* See supervisor_internal.h. */
int exec_process_file(const char *unit_dir, char *const *cmd, bool tty, unsigned width,
		      unsigned height, const char *path, struct err *err)
{
	_cleanup_free_ char *cfg_path = xasprintf("%s/bundle/config.json", unit_dir);
	json_error_t jerr;
	json_t *cfg = json_load_file(cfg_path, 0, &jerr), *process, *args;
	char *text;
	int ret;

	if (!cfg)
		return err_set(err, EIO, "exec: the unit's config.json: %s", jerr.text);
	process = json_object_get(cfg, "process");
	if (!json_is_object(process)) {
		json_decref(cfg);
		return err_set(err, EIO, "exec: the unit's config.json has no process");
	}
	args = json_array();
	for (size_t i = 0; cmd[i]; i++)
		json_array_append_new(args, json_string(cmd[i]));
	json_object_set_new(process, "args", args);
	json_object_set_new(process, "terminal", json_boolean(tty));
	if (tty && json_is_array(json_object_get(process, "env"))) {
		json_t *env = json_object_get(process, "env"), *v;
		size_t i;

		/* as containerd: an exec with a terminal gets TERM=xterm, whatever the unit's */
		json_array_foreach (env, i, v)
			if (json_is_string(v) && strncmp(json_string_value(v), "TERM=", 5) == 0) {
				json_array_remove(env, i);
				break;
			}
		json_array_append_new(env, json_string("TERM=xterm"));
	}
	json_object_del(process, "consoleSize");
	if (tty && width && height && width <= 65535 && height <= 65535)
		json_object_set_new(process, "consoleSize",
				    json_pack("{s:I,s:I}", "height", (json_int_t)height, "width",
					      (json_int_t)width));
	text = json_dumps(process, JSON_COMPACT);
	json_decref(cfg);
	if (!text)
		return err_set(err, EINVAL, "exec: the command is not valid UTF-8");
	ret = fs_replace_file(path, text, strlen(text), 0600, err);
	free(text);
	return ret;
}

/* True while a process of process group pgid (or pgid itself) exists, zombies included. */
static bool group_exists(long pgid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	bool found = false;

	while (d && !found && (e = readdir(d))) {
		char path[64], buf[512], *p;
		long pid = strtol(e->d_name, &p, 10), pgrp = 0;
		_cleanup_close_ int fd = -1;
		ssize_t n;

		if (pid <= 0 || *p)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		p = strrchr(buf, ')');
		/* after the name: state, ppid, pgrp */
		if (p && sscanf(p + 1, " %*c %*d %ld", &pgrp) == 1)
			found = pid == pgid || pgrp == pgid;
	}
	if (d)
		closedir(d);
	return found;
}

/* Kills what an exec left behind when its runtime was killed at the deadline: the process the
 * runtime recorded in pid_path and its process group, and waits (a bounded time) until they
 * are gone and reaped, so the caller's next look finds nothing of them. */
void exec_kill_leftover(const char *pid_path)
{
	_cleanup_free_ char *text = NULL;
	struct err err = ERR_INIT;
	int64_t until = clock_mono_ns() + EXEC_KILL_WAIT_NS;
	long pid;

	if (fs_read_file(pid_path, 64, &text, NULL, &err) < 0)
		return;
	pid = strtol(text, NULL, 10);
	if (pid <= 1 || pid > INT32_MAX)
		return;
	kill((pid_t)-pid, SIGKILL);
	kill((pid_t)pid, SIGKILL);
	while (group_exists(pid) && clock_mono_ns() < until)
		usleep(5000);
}

/* Cuts a command's output to fit one answer (EXEC_ANSWER_MAX): each stream keeps its first
 * bytes, stderr at least half the room when both are long, and stderr ends with a note of
 * what was kept. A stream the capture cut (EXEC_OUTPUT_MAX) is always over the room. */
static void exec_output_fit(char *out, size_t *out_len, char **errout, size_t *err_len)
{
	size_t room = EXEC_ANSWER_MAX - EXEC_NOTE_MAX, keep_o, keep_e;
	char note[EXEC_NOTE_MAX];
	int n;

	if (*out_len + *err_len <= EXEC_ANSWER_MAX)
		return;
	keep_o = *err_len < room / 2 ? room - *err_len : room / 2;
	keep_o = keep_o < *out_len ? keep_o : *out_len;
	keep_e = *err_len < room - keep_o ? *err_len : room - keep_o;
	n = snprintf(note, sizeof(note),
		     "\n[output truncated: the first %zu bytes of stdout and %zu of stderr are "
		     "kept; an answer holds %d MiB]\n",
		     keep_o, keep_e, EXEC_OUTPUT_MAX >> 20);
	out[keep_o] = '\0';
	*out_len = keep_o;
	*errout = xrealloc(*errout, keep_e + (size_t)n + 1);
	memcpy(*errout + keep_e, note, (size_t)n + 1);
	*err_len = keep_e + (size_t)n;
}

int exec_status_of(const char *log_path, int status)
{
	_cleanup_free_ char *log = NULL;
	struct err ignore = ERR_INIT;

	/* 255 is also what a command may exit with: only the runtime's own message tells */
	if (status != 255 || fs_read_file(log_path, 64 * 1024, &log, NULL, &ignore) < 0)
		return status;
	if (strstr(log, "executable file `") && strstr(log, "not found"))
		return 127;
	if (strstr(log, "open executable") || strstr(log, "Permission denied"))
		return 126;
	return status;
}

/* Runs a command in a running unit; see the header. */
int supervisor_exec_sync(struct supervisor *s, const char *unit_id, char *const *cmd,
			 int64_t timeout_s, char **out, size_t *out_len, char **errout,
			 size_t *err_len, int *exit_code, struct err *err)
{
	static atomic_uint seq;
	_cleanup_free_ char *dir = NULL, *proc_path = NULL, *pid_path = NULL, *log_path = NULL;
	int64_t timeout_ms;
	bool running = false;
	int ret = unit_dir_of(s, unit_id, &dir, &running, err);

	if (ret < 0)
		return ret;
	if (!running)
		return err_set(err, EINVAL, "unit %s is not running", unit_id);
	if (!cmd || !cmd[0])
		return err_set(err, EINVAL, "exec in unit %s: empty command", unit_id);
	timeout_s = timeout_s > 0 && timeout_s < EXEC_TIMEOUT_MAX_S ? timeout_s
								    : EXEC_TIMEOUT_MAX_S;
	timeout_ms = timeout_s * 1000;
	{
		unsigned n = atomic_fetch_add(&seq, 1);

		proc_path = xasprintf("%s/exec-%d-%u.json", dir, (int)getpid(), n);
		pid_path = xasprintf("%s/exec-%d-%u.pid", dir, (int)getpid(), n);
		log_path = xasprintf("%s/exec-%d-%u.log", dir, (int)getpid(), n);
	}
	ret = exec_process_file(dir, cmd, false, 0, 0, proc_path, err);
	if (ret == 0) {
		char *argv[] = { s->runtime,	  "--log",  log_path,	     "--root",
				 s->runtime_root, "exec",   "--process",     proc_path,
				 "--pid-file",	  pid_path, (char *)unit_id, NULL };

		ret = shim_run_capture(argv, timeout_ms, EXEC_OUTPUT_MAX, out, out_len, errout,
				       err_len, exit_code, err);
		if (ret == 0) {
			exec_output_fit(*out, out_len, errout, err_len);
			*exit_code = exec_status_of(log_path, *exit_code);
		}
		if (ret == -ETIMEDOUT) {
			exec_kill_leftover(pid_path);
			err_clear(err);
			ret = err_set(err, ETIMEDOUT,
				      "command timed out after %lld s and was killed",
				      (long long)timeout_s);
		}
	}
	unlink(proc_path);
	unlink(pid_path);
	unlink(log_path);
	if (ret < 0)
		return err_wrap(err, "exec in unit %s", unit_id);
	return 0;
}
