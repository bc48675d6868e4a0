/*
 * libFuzzer target for the codec as sepcsi-core builds it (sepcsi_proto_core:
 * proto/mh_msg.c with MH_PROTO_CORE, a struct mh_msg of the core's payloads
 * alone), which the core runs on every datagram from its peer. Any input
 * must decode or be refused without a crash or a read or write past its
 * smaller struct; a refused one leaves it zeroed; an accepted one is of a
 * type the core serves or answers, keeps the flag and boolean bounds its
 * rows rely on, and re-encodes to exactly the same bytes.
 */
#include <string.h>

#include "core_invariants.h"
#include "fuzz.h"

/* The core's payloads keep the codec's bounds; any other type is one of the core's enum. */
static int invariants_hold(const struct mh_msg *m)
{
	int core = core_invariants(m);
	if (core >= 0)
		return core;
	return (m->type >= MH_REQ_PING && m->type <= MH_ANS_UNPUBLISH) ||
	       m->type == MH_ANS_EXPAND || (m->type >= MH_REQ_FREEZE && m->type <= MH_ANS_FLUSH);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mh_msg a, b;
	static uint8_t out[MH_MSG_MAX];
	size_t len;

	if (mh_msg_decode_in(&mh_codecs_core, data, size, &a) < 0) {
		static const struct mh_msg zero;
		/* NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): decode memsets it whole */
		FUZZ_CHECK(memcmp(&a, &zero, sizeof(a)) == 0);
		return 0;
	}
	FUZZ_CHECK(invariants_hold(&a));
	FUZZ_CHECK(mh_msg_encode_in(&mh_codecs_core, &a, out, sizeof(out), &len) == 0);
	FUZZ_CHECK(len == size && memcmp(out, data, size) == 0);
	/* NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): decode memsets them whole */
	FUZZ_CHECK(mh_msg_decode_in(&mh_codecs_core, out, len, &b) == 0 &&
	           memcmp(&a, &b, sizeof(a)) == 0);
	return 0;
}
