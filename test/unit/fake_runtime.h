/*
 * fake_runtime.h: a stand-in for the OCI runtime (crun) in the agent's unit tests, where no
 * container can be made. The agent takes its runtime by path (the bootstrap's "runtime",
 * supervisor_config.runtime); the agent fixture (agent_fixture.h) gives it a symlink to the
 * test binary named FAKE_RUNTIME_NAME, and the test binary's main hands such a start to
 * fake_runtime_main.
 *
 * It runs a unit's or an exec's process on the host itself, in a process group of its own,
 * without namespaces, cgroups or a change of root (the image's root file system is not used:
 * commands are the host's), and keeps crun's contract for what the agent asks of it:
 *
 *	[--root DIR] [--log FILE] run --bundle B --pid-file P [--console-socket S] ID
 *		runs process.args of B/config.json with its env, in the foreground, as the
 *		container's process (its pid in P): the runtime exits with its status
 *	[...] exec --process F [--pid-file P] [--tty] [--console-socket S] [-d] ID
 *		the same for the process in F, while ID runs; an executable not found is crun's
 *		status 255 with "executable file `x` not found" in FILE
 *	[...] kill ID SIG	 signals ID's process group; status 1 when ID does not run
 *	[...] delete [-f] ID	 forgets ID (with -f, kills what is left of it first)
 *	[...] state ID		 crun's JSON state: "running" or "stopped"
 *	[...] update ... ID	 accepted, nothing changes
 *
 * With --console-socket the process gets a new terminal whose master is sent to socket S.
 * The state of ID is DIR/ID/state. Every start appends one line to DIR/calls.log: its
 * arguments after the global options, separated by spaces ("kill c1 TERM"), for tests that
 * check what the agent asked. A file DIR/fail-COMMAND makes COMMAND fail (status 1) with the
 * file's text as its error, for tests of the runtime refusing.
 */
#ifndef KIYOT_TEST_FAKE_RUNTIME_H
#define KIYOT_TEST_FAKE_RUNTIME_H

#define FAKE_RUNTIME_NAME "fake-runtime"

/* Whether argv[0] names the fake runtime (its base name is FAKE_RUNTIME_NAME). */
int fake_runtime_called(const char *argv0);
/* The runtime's main; returns its exit status (an exec'd process never returns). */
int fake_runtime_main(int argc, char **argv);

/* What the runtime under root was asked, calls.log's text (caller frees; "" when nothing). */
char *fake_runtime_calls(const char *root);
/* Makes command (e.g. "run") of the runtime under root fail with message; NULL message: no
 * longer. */
void fake_runtime_fail(const char *root, const char *command, const char *message);

#endif
