#include "xtables.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "xalloc.h"

extern char **environ;

/* A memory file holding text, read from its start: a command's stdin. */
static int memfd_with(const char *text)
{
	size_t len = strlen(text), done = 0;
	int fd = memfd_create("kiyot-xtables-in", MFD_CLOEXEC);

	if (fd < 0)
		return -errno;
	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;

			close(fd);
			return -e;
		}
		done += (size_t)n;
	}
	if (lseek(fd, 0, SEEK_SET) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/* What a command wrote to the memory file fd, NUL-terminated, at most XT_OUT_MAX bytes. */
static int memfd_text(int fd, char **out)
{
	struct stat st;
	size_t got = 0;
	char *text;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size > XT_OUT_MAX)
		return -EFBIG;
	text = xmalloc((size_t)st.st_size + 1);
	while (got < (size_t)st.st_size) {
		ssize_t n = pread(fd, text + got, (size_t)st.st_size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	text[got] = '\0';
	*out = text;
	return 0;
}

/* Joins the lines of what a command said into one: "; " between lines, a space after a line
 * ending in ':' (ebtables-restore puts its message on the next), usage hints dropped. */
static void one_line(char *msg, size_t size)
{
	_cleanup_free_ char *text = xstrdup(msg);
	size_t w = 0;

	msg[0] = '\0';
	for (char *line = text; line && *line;) {
		char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);

		while (len && (line[len - 1] == ' ' || line[len - 1] == '\r'))
			len--;
		if (len && strncmp(line, "Try `", 5) != 0 && w + 1 < size) {
			int n = snprintf(msg + w, size - w, "%s%.*s",
					 w == 0		     ? ""
					 : msg[w - 1] == ':' ? " "
							     : "; ",
					 (int)len, line);

			w = n < 0 ? w : w + (size_t)n >= size ? size - 1 : w + (size_t)n;
		}
		line = nl ? nl + 1 : NULL;
	}
}

/* Reads the command's stderr to its end, keeping what fits in msg, as one line. */
static void drain_stderr(int fd, char *msg, size_t size)
{
	size_t got = 0;
	char skip[512];

	for (;;) {
		ssize_t n = got + 1 < size ? read(fd, msg + got, size - 1 - got)
					   : read(fd, skip, sizeof(skip));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (got + 1 < size)
			got += (size_t)n;
	}
	msg[got] = '\0';
	one_line(msg, size);
}

int xt_run(char *const *argv, const char *input, char **out, char *msg, size_t msg_size)
{
	posix_spawn_file_actions_t fa;
	int in = -1, outfd = -1, errp[2] = { -1, -1 }, status = 0, ret;
	pid_t pid;

	msg[0] = '\0';
	if (input && (in = memfd_with(input)) < 0)
		return in;
	if (out && (outfd = memfd_create("kiyot-xtables-out", MFD_CLOEXEC)) < 0) {
		ret = -errno;
		goto done;
	}
	if (pipe2(errp, O_CLOEXEC) < 0) {
		ret = -errno;
		goto done;
	}
	posix_spawn_file_actions_init(&fa);
	if (in >= 0)
		posix_spawn_file_actions_adddup2(&fa, in, STDIN_FILENO);
	else
		posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	if (outfd >= 0)
		posix_spawn_file_actions_adddup2(&fa, outfd, STDOUT_FILENO);
	else
		posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, errp[1], STDERR_FILENO);
	ret = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(errp[1]);
	errp[1] = -1;
	if (ret != 0) {
		ret = -ret;
		goto done;
	}
	drain_stderr(errp[0], msg, msg_size);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			ret = -errno;
			goto done;
		}
	}
	ret = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
	if (ret == 0 && out) {
		int r = memfd_text(outfd, out);

		if (r < 0)
			ret = r;
	}
done:
	if (in >= 0)
		close(in);
	if (outfd >= 0)
		close(outfd);
	if (errp[0] >= 0)
		close(errp[0]);
	return ret;
}

int xt_iptables(char *const *args, char *msg, size_t msg_size)
{
	char *argv[XT_MAX_ARGS + 1] = { "iptables", "-w" };
	size_t n = 2;

	for (size_t i = 0; args[i] && n < XT_MAX_ARGS; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return xt_run(argv, NULL, NULL, msg, msg_size);
}

int xt_ensure_rule(const char *table, const char *chain, const char *where, char *const *rule,
		   const char *comment, struct err *err)
{
	char *args[XT_MAX_ARGS];
	char msg[XT_MSG_SIZE];
	size_t n = 0;
	int ret;

	args[n++] = "-t";
	args[n++] = (char *)table;
	args[n++] = "-C";
	args[n++] = (char *)chain;
	for (size_t i = 0; rule[i] && n + 5 < XT_MAX_ARGS; i++)
		args[n++] = rule[i];
	args[n++] = "-m";
	args[n++] = "comment";
	args[n++] = "--comment";
	args[n++] = (char *)comment;
	args[n] = NULL;
	ret = xt_iptables(args, msg, sizeof(msg));
	if (ret == -ENOENT)
		return err_set(err, ENOENT,
			       "the iptables command is missing (apt install iptables)");
	if (ret < 0)
		return err_set(err, -ret, "iptables: %s", strerror(-ret));
	if (ret == 0)
		return 0; /* there already */
	args[2] = (char *)where;
	ret = xt_iptables(args, msg, sizeof(msg));
	if (ret != 0)
		return err_set(err, EIO, "iptables -t %s %s %s: %s", table, where, chain,
			       msg[0] ? msg : "failed");
	log_info("cells: added the %s %s rule \"%s\"", table, chain, comment);
	return 0;
}

/* "<cmd>-save" or "<cmd>-restore", newly allocated. */
static char *tool(const char *cmd, const char *suffix)
{
	return xasprintf("%s-%s", cmd, suffix);
}

int xt_save(const char *cmd, const char *table, char **out, struct err *err)
{
	_cleanup_free_ char *name = tool(cmd, "save");
	char *argv[] = { name, "-t", (char *)table, NULL };
	char msg[XT_MSG_SIZE];
	int ret = xt_run(argv, NULL, out, msg, sizeof(msg));

	if (ret == -ENOENT)
		return err_set(err, ENOENT, "the %s command is missing (apt install iptables)",
			       name);
	if (ret < 0)
		return err_set(err, -ret, "%s -t %s: %s", name, table, strerror(-ret));
	if (ret != 0)
		return err_set(err, EIO, "%s -t %s: %s", name, table, msg[0] ? msg : "failed");
	return 0;
}

int xt_restore(const char *cmd, const char *text, struct err *err)
{
	_cleanup_free_ char *name = tool(cmd, "restore");
	char *with_wait[] = { name, "-w", "--noflush", NULL };
	char *plain[] = { name, "--noflush", NULL };
	char msg[XT_MSG_SIZE];
	/* iptables-restore waits for the xtables lock with -w; ebtables-restore has no lock */
	int ret = xt_run(strcmp(cmd, "iptables") == 0 ? with_wait : plain, text, NULL, msg,
			 sizeof(msg));

	if (ret == -ENOENT)
		return err_set(err, ENOENT, "the %s command is missing (apt install iptables)",
			       name);
	if (ret < 0)
		return err_set(err, -ret, "%s: %s", name, strerror(-ret));
	if (ret != 0)
		return err_set(err, EIO, "%s: %s", name, msg[0] ? msg : "failed");
	return 0;
}
