/* cli.h: the client commands of kiyot (run, get, logs, delete); see cli.c. */
#ifndef KIYOT_CLI_H
#define KIYOT_CLI_H

/* argv[1] is the command. Returns the process exit status. */
int cli_main(int argc, char **argv);

/* `kiyot local-cell launch|terminate ...` (cmd_localcell.c); argv[0] is "local-cell". */
int localcell_main(int argc, char **argv);

#endif
