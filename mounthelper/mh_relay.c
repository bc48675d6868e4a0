/*
 * The rows the helper hands to the capable core when it has one (--core-fd):
 * each asks the core the request as rpcd sent it, and answers what the core
 * answered. The core checks everything again itself (mounthelper/core/); the
 * helper's own checks (ids, flags: mh_dispatch.c) ran before. Without a core,
 * the helper's own handler runs, as it always did.
 *
 * Runs in a worker of the helper. Nothing here is fatal.
 */
#include "mh_ops.h"

#include <string.h>

#include "mh_worker.h"

int mh_relay(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
             struct mh_audit *a, struct mh_res *r)
{
	uint16_t type = ans->type;
	uint32_t id = ans->id;
	(void)c;
	int rc = mh_core_ask(req, ans, r);
	ans->id = id;
	if (rc < 0)
		return -1;
	if (ans->type != type)
		return mh_fail(r, MH_E_FAILED, 0, "the capable core answered %s to %s",
		               mh_type_name(ans->type), mh_type_name(req->type));
	a->note = "done by the capable core";
	return 0;
}

#define RELAYED(name, own)                                                                         \
	int name(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,             \
	         struct mh_audit *a, struct mh_res *r)                                             \
	{                                                                                          \
		return (c->core ? mh_relay : (own))(c, req, ans, a, r);                            \
	}

RELAYED(mh_relay_unstage, mh_answer_unstage)
RELAYED(mh_relay_publish, mh_answer_publish)
RELAYED(mh_relay_unpublish, mh_answer_unpublish)
RELAYED(mh_relay_expand, mh_answer_expand)
RELAYED(mh_relay_stats, mh_answer_stats)
