/*
 * shim_main.c: cell-shim, the program of a unit's shim and of the pod's namespace holder:
 *
 *	cell-shim shim ...           the per-unit monitor the supervisor starts (see shim.c)
 *	cell-shim podns-holder       pid 1 of the pod's PID namespace (see podns.h)
 *
 * The agent runs the same code as `cell-agent shim ...` when no cell-shim is next to it. This
 * one links only what they use (libc and jansson), where the agent's binary loads some 90
 * libraries for gRPC, curl and libarchive: an exec of it took ~20 ms of CPU, of every
 * StartContainer, before the runtime even ran.
 */
#include <stdio.h>
#include <string.h>

#include "podns.h"
#include "supervisor.h"

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "shim") == 0)
		return shim_main(argc - 1, argv + 1);
	if (argc == 2 && strcmp(argv[1], PODNS_HOLDER_ARG) == 0)
		podns_holder_main();
	fprintf(stderr, "usage: cell-shim shim ... | cell-shim " PODNS_HOLDER_ARG "\n"
			"(the cell agent starts it; it is not meant to be run by hand)\n");
	return 2;
}
