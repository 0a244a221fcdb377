/* rpc_internal.h: what rpc.c and rpc_client.c share; not for other modules. */
#ifndef KIYOT_RPC_INTERNAL_H
#define KIYOT_RPC_INTERNAL_H

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

#include "err.h"

struct rpc_call;

/* The core call a served call wraps (for rpc_unary_for's parent). */
grpc_call *rpc_call_core(struct rpc_call *c);

ProtobufCMessage *rpc_unpack(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb,
			     size_t max, struct err *err);

#endif
