#include "proc.h"

#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "xalloc.h"

/* The command (field 2) may hold spaces and parentheses, so parsing starts after its last
 * ')'. */
int proc_stat(long pid, char *state, unsigned long long *start)
{
	_cleanup_free_ char *path = xasprintf("/proc/%ld/stat", pid);
	_cleanup_free_ char *data = NULL;
	struct err ignored = ERR_INIT;
	char *p;

	if (pid <= 0 || fs_read_file(path, 4096, &data, NULL, &ignored) < 0)
		return -1;
	p = strrchr(data, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -1;
	*state = p[2];
	p += 2;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -1;
		p++;
	}
	*start = strtoull(p, NULL, 10);
	return 0;
}

int proc_alive(long pid, unsigned long long start)
{
	unsigned long long now_start;
	char state;

	if (pid <= 1 || proc_stat(pid, &state, &now_start) < 0)
		return 0;
	if (state == 'Z' || state == 'X')
		return 0;
	return !start || start == now_start;
}
