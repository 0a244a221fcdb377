/* rpc_internal.h: what rpc_call.c, rpc_client.c and rpc_loop.c share; not for other modules. */
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

/* The gRPC channel of ch for a call, made again if it was released (NULL with err when it
 * cannot be made); every take is given back with rpc_channel_give once the call is unref'd.
 * A channel's owner may free it while calls are taken: the last give frees it then. */
grpc_channel *rpc_channel_take(struct rpc_channel *ch, struct err *err);
void rpc_channel_give(struct rpc_channel *ch);
const char *rpc_channel_target(const struct rpc_channel *ch);

/* Shuts a pluck queue down, takes what is left on it and destroys it. */
void rpc_cq_drain_destroy(grpc_completion_queue *cq);
/* A message packed into a byte buffer the caller destroys. */
grpc_byte_buffer *rpc_pack(const ProtobufCMessage *msg);
/* A finished call's status as an error naming the target and method; its errno. */
int rpc_status_err(struct err *err, grpc_status_code st, grpc_slice details, const char *target,
		   const char *method);

ProtobufCMessage *rpc_unpack(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb,
			     size_t max, struct err *err);

#endif
