/*
 * pbjson.h: a protobuf-c message as JSON the way Go's encoding/json writes the structs
 * protoc-gen-gogo makes of it, which is what containerd puts in CRI's verbose info: each
 * field under its proto name, fields at their zero value left out (omitempty), enums as
 * numbers, 64-bit integers as numbers, bytes as base64, maps (repeated entries of key and
 * value) as objects keyed by the key's text.
 *
 *	json_t *j = pbjson_from_msg(&config->base);
 *	char *text = json_dumps(j, JSON_COMPACT);
 *	json_decref(j);
 *
 * Never NULL (out of memory aborts). Messages nest at most PBJSON_MAX_DEPTH deep; a deeper one
 * is written as an empty object.
 */
#ifndef KIYOT_PBJSON_H
#define KIYOT_PBJSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

#define PBJSON_MAX_DEPTH 32

json_t *pbjson_from_msg(const ProtobufCMessage *m);

#endif
