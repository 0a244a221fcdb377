/*
 * crimap.h: reading a CRI map (a sandbox's or container's labels and annotations, protobuf-c
 * map entries of string keys and values), shared by the CRI handlers and the cells' sizing and
 * Cell objects.
 */
#ifndef KIYOT_CRIMAP_H
#define KIYOT_CRIMAP_H

#include <stddef.h>

/* The value of key in a CRI map of n entries, or NULL; of a key given twice, the last. */
const char *cri_map_get(void **map, size_t n, const char *key);

#endif
