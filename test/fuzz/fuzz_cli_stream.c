/*
 * fuzz_cli_stream: the answer a streaming server gives to the upgrade the kiyot CLI asks for
 * (cli_stream_parse_answer). Besides what the sanitizers catch, it checks the parser's
 * promises: a head it accepts ends within the bytes given and within CLI_STREAM_MAX_HEAD, its
 * status has three digits, the protocol fits its room and is NUL-terminated, and the answer is
 * the same however the bytes are cut.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the first byte is the protocol's room (1-32); the parser reads only what it is given */
	size_t room = size ? (size_t)(data[0] % 32) + 1 : 1;
	char *copy, proto[33], again[33];
	int status = -1, status2 = -1;
	ssize_t n, m = 0;

	if (size < 1)
		return 0;
	copy = malloc(size - 1 ? size - 1 : 1);
	memcpy(copy, data + 1, size - 1);
	memset(proto, 'x', sizeof(proto));
	n = cli_stream_parse_answer(copy, size - 1, &status, proto, room);
	if (n < 0 && n != -EBADMSG)
		abort();
	if (n > 0) {
		if ((size_t)n > size - 1 || n > CLI_STREAM_MAX_HEAD || status < 100 ||
		    status > 599 || strnlen(proto, room) == room)
			abort();
		/* a head complete in fewer bytes is complete the same way in more of them */
		for (size_t cut = 0; cut < (size_t)n && m == 0; cut++)
			m = cli_stream_parse_answer(copy, cut, &status2, again, room);
		if (m != 0)
			abort();
	}
	free(copy);
	return 0;
}
