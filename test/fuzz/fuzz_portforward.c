/*
 * fuzz_portforward: the query of a port-forward URL, which a WebSocket client chooses, read
 * into the ports to forward (stream_ports_of_query). Besides what the sanitizers catch, it
 * checks the parser's promises: it stays within the ports it was given room for, every port
 * it reports is 1-65535, and a failure is -EINVAL or -E2BIG with a message.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stream/stream_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the first byte bounds the ports (0-7), the rest is the request target */
	int32_t ports[8 + 1];
	size_t max = size ? data[0] % 8 : 0, n = 99;
	struct err err = ERR_INIT;
	char *target;
	int ret;

	if (size < 1)
		return 0;
	target = malloc(size);
	memcpy(target, data + 1, size - 1);
	target[size - 1] = '\0';
	ports[max] = -1; /* the guard past the room given */
	ret = stream_ports_of_query(target, ports, max, &n, &err);
	if (n > max || ports[max] != -1)
		abort();
	if (ret < 0 && ((ret != -EINVAL && ret != -E2BIG) || !err.msg[0]))
		abort();
	for (size_t i = 0; ret == 0 && i < n; i++)
		if (ports[i] < 1 || ports[i] > 65535)
			abort();
	free(target);
	return 0;
}
