#include "provider.h"

#include <stdlib.h>

/* Frees the strings of one cell_info and leaves it zeroed, safe to release again. */
void cell_info_release(struct cell_info *c)
{
	if (!c)
		return;
	free(c->cell_id);
	free(c->instance_id);
	free(c->instance_type);
	free(c->ip);
	free(c->pod_uid);
	free(c->reason);
	free(c->launch_note);
	*c = (struct cell_info){ 0 };
}

/* Releases n cell_infos and the array that holds them (as returned by a provider's list). */
void cell_info_array_free(struct cell_info *a, size_t n)
{
	if (!a)
		return;
	for (size_t i = 0; i < n; i++)
		cell_info_release(&a[i]);
	free(a);
}
