/*
 * crimap.c: reading a CRI map (crimap.h).
 */
#include "crimap.h"

#include <string.h>

#include "cri_api.pb-c.h"

const char *cri_map_get(void **map, size_t n, const char *key)
{
	const char *v = NULL;

	/* the same key may appear twice on the wire; the last one wins */
	for (size_t i = 0; i < n; i++) {
		const Runtime__V1__PodSandboxConfig__LabelsEntry *e = map[i];

		if (strcmp(e->key, key) == 0)
			v = e->value;
	}
	return v;
}
