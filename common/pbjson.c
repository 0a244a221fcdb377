/*
 * pbjson.c: protobuf-c messages as Go's encoding/json writes them (pbjson.h).
 */
#include "pbjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "xalloc.h"

static json_t *msg_json(const ProtobufCMessage *m, int depth);

static json_t *checked(json_t *j)
{
	if (!j)
		abort(); /* jansson fails only for want of memory here */
	return j;
}

/* One value of field f at p (an element of a repeated field, or the field itself). */
static json_t *value_json(const ProtobufCFieldDescriptor *f, const void *p, int depth)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_ENUM:
		return checked(json_integer(*(const int32_t *)p));
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		return checked(json_integer(*(const uint32_t *)p));
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		return checked(json_integer(*(const int64_t *)p));
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		/* JSON numbers here are int64: what does not fit is written as its text */
		if (*(const uint64_t *)p > (uint64_t)INT64_MAX) {
			char s[24];

			snprintf(s, sizeof(s), "%llu", (unsigned long long)*(const uint64_t *)p);
			return checked(json_string(s));
		}
		return checked(json_integer((json_int_t) * (const uint64_t *)p));
	case PROTOBUF_C_TYPE_FLOAT:
		return checked(json_real(*(const float *)p));
	case PROTOBUF_C_TYPE_DOUBLE:
		return checked(json_real(*(const double *)p));
	case PROTOBUF_C_TYPE_BOOL:
		return checked(json_boolean(*(const protobuf_c_boolean *)p));
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		json_t *j = json_string(s ? s : "");

		/* not UTF-8: its bytes as Latin-1 would lie; keep what can be told */
		return j ? j : checked(json_string("<not UTF-8>"));
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;
		_cleanup_free_ char *s = b64_encode(b->data, b->len);

		return checked(json_string(s));
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		return msg_json(*(ProtobufCMessage *const *)p, depth + 1);
	}
	return checked(json_null());
}

/* Whether field f's value at p is its zero value (Go's omitempty leaves it out). */
static int is_zero(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;

		return !s || !s[0];
	}
	case PROTOBUF_C_TYPE_BYTES:
		return ((const ProtobufCBinaryData *)p)->len == 0;
	case PROTOBUF_C_TYPE_MESSAGE:
		return *(ProtobufCMessage *const *)p == NULL;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return *(const uint64_t *)p == 0;
	case PROTOBUF_C_TYPE_DOUBLE:
		return *(const double *)p == 0;
	case PROTOBUF_C_TYPE_BOOL:
		return !*(const protobuf_c_boolean *)p;
	default: /* 32-bit numbers, floats and enums */
		return *(const uint32_t *)p == 0;
	}
}

/* A map entry's key as an object key. */
static char *key_text(const ProtobufCMessage *entry)
{
	const ProtobufCFieldDescriptor *kf = &entry->descriptor->fields[0];
	const void *p = (const char *)entry + kf->offset;
	json_t *k;
	char *s;

	if (kf->type == PROTOBUF_C_TYPE_STRING)
		return xstrdup(*(char *const *)p ? *(char *const *)p : "");
	k = value_json(kf, p, PBJSON_MAX_DEPTH);
	s = json_dumps(k, JSON_ENCODE_ANY);
	json_decref(k);
	return s ? s : xstrdup("");
}

/* Whether f is a map: repeated messages of a "...Entry" type with key and value. */
static int is_map(const ProtobufCFieldDescriptor *f)
{
	const ProtobufCMessageDescriptor *d = f->descriptor;
	size_t n;

	if (f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE)
		return 0;
	n = strlen(d->name);
	return n > 5 && strcmp(d->name + n - 5, "Entry") == 0 && d->n_fields == 2 &&
	       strcmp(d->fields[0].name, "key") == 0 && strcmp(d->fields[1].name, "value") == 0;
}

/* The size of one element of a repeated field of f's type. */
static size_t elem_size(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_STRING:
		return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_DOUBLE:
		return sizeof(double);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return sizeof(int64_t);
	default: /* 32-bit numbers, floats and enums */
		return sizeof(int32_t);
	}
}

static json_t *repeated_json(const ProtobufCFieldDescriptor *f, size_t n, const char *elems,
			     int depth)
{
	json_t *out;

	if (is_map(f)) {
		out = checked(json_object());
		for (size_t i = 0; i < n; i++) {
			const ProtobufCMessage *e = ((ProtobufCMessage *const *)elems)[i];
			const ProtobufCFieldDescriptor *vf = &e->descriptor->fields[1];
			_cleanup_free_ char *key = key_text(e);

			json_object_set_new(out, key,
					    value_json(vf, (const char *)e + vf->offset, depth));
		}
		return out;
	}
	out = checked(json_array());
	for (size_t i = 0; i < n; i++)
		json_array_append_new(out, value_json(f, elems + i * elem_size(f), depth));
	return out;
}

static json_t *msg_json(const ProtobufCMessage *m, int depth)
{
	json_t *out = checked(json_object());

	if (!m || depth > PBJSON_MAX_DEPTH)
		return out;
	for (unsigned i = 0; i < m->descriptor->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &m->descriptor->fields[i];
		const char *p = (const char *)m + f->offset;

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);

			if (n)
				json_object_set_new(out, f->name,
						    repeated_json(f, n, *(char *const *)p, depth));
			continue;
		}
		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			if (*(const uint32_t *)((const char *)m + f->quantifier_offset) != f->id)
				continue;
		} else if (is_zero(f, p)) {
			continue;
		}
		json_object_set_new(out, f->name, value_json(f, p, depth));
	}
	return out;
}

json_t *pbjson_from_msg(const ProtobufCMessage *m)
{
	return msg_json(m, 0);
}
