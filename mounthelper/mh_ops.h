/* The helper's operations: dispatch table and handlers (mh_ops.c). */
#ifndef SEPCSI_MH_OPS_H
#define SEPCSI_MH_OPS_H

#include "mh.h"

/*
 * Answer one decoded message. Returns 0 with *ans filled (the operation's
 * answer, or MH_ANS_ERROR with a reason) and the audit line written; returns
 * -1 if req is not a request in the dispatch table (a protocol violation: the
 * caller ends the helper).
 */
int mh_ops_handle(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans);

#endif
