/*
 * fuzz_cri_validate: CRI requests as a hostile caller would send them. The first byte picks
 * the method (one of those cri_validate checks, or one it lets through), the rest is the
 * protobuf message, decoded by protobuf-c as kiyot's server does and then checked. Besides
 * what the sanitizers catch, it checks the validator's promises: 0, or -EINVAL with a message
 * that fits on one line.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cri_api.pb-c.h"
#include "cri/cri_validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ProtobufCMessageDescriptor *const methods[] = {
	&runtime__v1__run_pod_sandbox_request__descriptor,
	&runtime__v1__create_container_request__descriptor,
	&runtime__v1__update_container_resources_request__descriptor,
	&runtime__v1__exec_sync_request__descriptor,
	&runtime__v1__exec_request__descriptor,
	&runtime__v1__attach_request__descriptor,
	&runtime__v1__port_forward_request__descriptor,
	&runtime__v1__pull_image_request__descriptor,
	&runtime__v1__version_request__descriptor,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const ProtobufCMessageDescriptor *desc;
	ProtobufCMessage *m;
	struct err err = ERR_INIT;
	int ret;

	if (size < 1)
		return 0;
	desc = methods[data[0] % (sizeof(methods) / sizeof(methods[0]))];
	m = protobuf_c_message_unpack(desc, NULL, size - 1, data + 1);
	if (!m)
		return 0;
	ret = cri_validate(m, &err);
	if (ret != 0 && (ret != -EINVAL || err.code != EINVAL || !err.msg[0]))
		abort();
	if (ret != 0 && strchr(err.msg, '\n'))
		abort();
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
