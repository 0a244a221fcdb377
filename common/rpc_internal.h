/* rpc_internal.h: what rpc.c, rpc_client.c and rpc_loop.c share; not for other modules. */
#ifndef KIYOT_RPC_INTERNAL_H
#define KIYOT_RPC_INTERNAL_H

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

#include "err.h"

struct rpc_call;

/* The core call a served call wraps (for rpc_unary_for's parent). */
grpc_call *rpc_call_core(struct rpc_call *c);

/* Messages a client takes: 64 MiB at most. */
#define RPC_CLIENT_MAX_MESSAGE (64u << 20)

struct rpc_channel {
	grpc_channel *ch;
	char *target;
};

/* A message packed into a byte buffer the caller destroys. */
grpc_byte_buffer *rpc_pack(const ProtobufCMessage *msg);
/* A finished call's status as an error naming the target and method; its errno. */
int rpc_status_err(struct err *err, grpc_status_code st, grpc_slice details, const char *target,
		   const char *method);

ProtobufCMessage *rpc_unpack(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb,
			     size_t max, struct err *err);

#endif
