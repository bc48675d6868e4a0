/*
 * What the codec promises of the payloads of the core's own types, whichever
 * build of it decoded them (fuzz_mh_msg: every other program's; fuzz_core_msg:
 * the core's): flag sets inside MH_F_ALL, booleans 0 or 1, an error kind that
 * may cross the wire. Included by one harness file each.
 */
#ifndef SEPCSI_FUZZ_CORE_INVARIANTS_H
#define SEPCSI_FUZZ_CORE_INVARIANTS_H

#include "mh_proto.h"

/* 1 if m keeps them, 0 if not, -1 if its type holds none of these payloads. */
static int core_invariants(const struct mh_msg *m)
{
	switch (m->type) {
	case MH_REQ_STAGE:
	case MH_REQ_STAGE_CHECK:
		return (m->u.stage.flags & ~MH_F_ALL) == 0 && m->u.stage.readonly <= 1;
	case MH_REQ_UNSTAGE:
		return (m->u.unstage.flags & ~MH_F_ALL) == 0;
	case MH_REQ_PUBLISH:
		return (m->u.publish.flags & ~MH_F_ALL) == 0 && m->u.publish.readonly <= 1;
	case MH_REQ_EXPAND:
		return (m->u.expand.flags & ~MH_F_ALL) == 0;
	case MH_ANS_ERROR:
		return m->u.error.kind >= MH_E_REFUSED && m->u.error.kind < MH_E_UNAVAILABLE;
	default:
		return -1;
	}
}

#endif
