/*
 * libFuzzer target for the helper protocol decoder (proto/mh_msg.c), which
 * the privileged helper runs on every datagram from rpcd. Any input must
 * decode or be refused without a crash or a read past the end; anything
 * accepted must re-encode to exactly the same bytes (the encoding is
 * canonical) and decode again to the same struct.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mh_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mh_msg a, b;
	static uint8_t out[MH_MSG_MAX];
	size_t len;

	if (mh_msg_decode(data, size, &a) < 0)
		return 0;
	if (mh_msg_encode(&a, out, sizeof(out), &len) < 0 || len != size ||
	    memcmp(out, data, size) != 0)
		abort();
	if (mh_msg_decode(out, len, &b) < 0 || memcmp(&a, &b, sizeof(a)) != 0)
		abort();
	return 0;
}
