/*
 * supervisor_exec.c: OCI runtime commands the supervisor runs against its units' containers:
 * "kill" to signal a unit being stopped and "exec" for a command in a running unit.
 */
#include "supervisor_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "xalloc.h"

#define EXEC_OUTPUT_MAX (16 * 1024 * 1024)
#define RUNTIME_CMD_TIMEOUT_MS 10000

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

/* Runs a command in a running unit; see the header. */
int supervisor_exec_sync(struct supervisor *s, const char *unit_id, char *const *cmd,
			 int64_t timeout_s, char **out, size_t *out_len, char **errout,
			 size_t *err_len, int *exit_code, struct err *err)
{
	_cleanup_free_ char *dir = NULL;
	char **argv;
	size_t n = 0;
	bool running = false;
	int ret = unit_dir_of(s, unit_id, &dir, &running, err);

	if (ret < 0)
		return ret;
	if (!running)
		return err_set(err, EINVAL, "unit %s is not running", unit_id);
	while (cmd && cmd[n])
		n++;
	if (n == 0)
		return err_set(err, EINVAL, "exec in unit %s: empty command", unit_id);
	argv = xcalloc(n + 6, sizeof(*argv));
	argv[0] = s->runtime;
	argv[1] = "--root";
	argv[2] = s->runtime_root;
	argv[3] = "exec";
	argv[4] = (char *)unit_id;
	for (size_t i = 0; i < n; i++)
		argv[5 + i] = cmd[i];
	ret = shim_run_capture(argv, (timeout_s > 0 ? timeout_s : 3600) * 1000, EXEC_OUTPUT_MAX,
			       out, out_len, errout, err_len, exit_code, err);
	free(argv);
	if (ret < 0)
		return err_wrap(err, "exec in unit %s", unit_id);
	return 0;
}
