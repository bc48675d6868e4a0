/*
 * libFuzzer target for the helper protocol decoder (proto/mh_msg.c), which
 * the privileged helper runs on every datagram from rpcd. Any input must
 * decode or be refused without a crash or a read past the end; anything
 * accepted must re-encode to exactly the same bytes (the encoding is
 * canonical) and decode again to the same struct. What the decoder accepts
 * must also keep the invariants the helper relies on: flag sets inside
 * MH_F_ALL, a clone source of 1 or 2, booleans 0 or 1, strings NUL-free.
 */
#include <string.h>

#include "core_invariants.h"
#include "fuzz.h"
#include "mh_proto_all.h"

static int invariants_hold(const struct mh_msg *m)
{
	int core = core_invariants(m);
	if (core >= 0)
		return core;
	switch (m->type) {
	case MH_REQ_STATS:
		return (m->u.stats.flags & ~MH_F_ALL) == 0;
	case MH_REQ_CLONE:
		return m->u.clone.source_kind == MH_SRC_SNAPSHOT ||
		       m->u.clone.source_kind == MH_SRC_VOLUME;
	case MH_ANS_SNAPSHOT:
	case MH_ANS_CLONE:
		return m->u.copy_ans.reflinked <= 1;
	case MH_ANS_CAPACITY:
		return m->u.capacity_ans.reflink <= 1;
	case MH_ANS_STATS:
		return m->u.stats_ans.abnormal <= 1 &&
		       strlen(m->u.stats_ans.message) <= MH_REASON_MAX;
	default:
		return strcmp(mh_type_name(m->type), "UNKNOWN") != 0;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mh_msg a, b;
	static uint8_t out[MH_MSG_MAX];
	size_t len;

	if (mh_msg_decode(data, size, &a) < 0) {
		/* A refused message leaves nothing behind. */
		static const struct mh_msg zero;
		/* NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): decode memsets it whole */
		FUZZ_CHECK(memcmp(&a, &zero, sizeof(a)) == 0);
		return 0;
	}
	FUZZ_CHECK(invariants_hold(&a));
	FUZZ_CHECK(mh_msg_encode(&a, out, sizeof(out), &len) == 0);
	FUZZ_CHECK(len == size && memcmp(out, data, size) == 0);
	/* Byte for byte, so every union member is compared: decode clears padding too. */
	/* NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): decode memsets them whole */
	FUZZ_CHECK(mh_msg_decode(out, len, &b) == 0 && memcmp(&a, &b, sizeof(a)) == 0);
	return 0;
}
