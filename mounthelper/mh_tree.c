/*
 * A directory volume's tree, emptied or copied by the tree runner
 * (sepcsi-runner --tree, runner/tree.c) on the directory fds the caller
 * opened and checked: the helper itself never walks a pod's tree. See
 * mh_tools.c for how that runner is started and confined.
 *
 * Runs in a helper worker. Nothing here is fatal.
 */
#include "mh_tree.h"

#include <errno.h>
#include <stdio.h>

#include "mh_tools.h"

/* The runner's answer as the helper's result: 0, or -1 with r. */
static int outcome(const struct rn_answer *a, struct mh_res *r)
{
	if (!a->err)
		return 0;
	enum mh_err_kind kind = a->status == RN_TREE_BUSY      ? MH_E_BUSY
	                        : a->status == RN_TREE_REFUSED ? MH_E_REFUSED
	                                                       : mh_kind_of_errno(a->err);
	return mh_fail(r, kind, a->err, "%.*s", (int)sizeof(a->reason), a->reason);
}

int mh_tree_empty(int dirfd, struct mh_res *r)
{
	struct rn_answer a = {0};
	if (mh_tools_job(MH_RUNNER_TREE, RN_TREE_EMPTY, &dirfd, 1, 0, &a, r) < 0)
		return -1;
	return outcome(&a, r);
}

int mh_tree_copy(int src, int dst, struct mh_tree_copied *out, struct mh_res *r)
{
	struct rn_answer a = {0};
	if (mh_tools_job(MH_RUNNER_TREE, RN_TREE_COPY, (int[]){src, dst}, 2, 0, &a, r) < 0)
		return -1;
	*out = (struct mh_tree_copied){
	    .bytes = a.bytes, .reflinked = a.reflinked != 0, .skipped = a.skipped};
	return outcome(&a, r);
}

int mh_tree_subvol(uint64_t what, int subvol, int work, const char *name, struct mh_res *r)
{
	struct rn_answer a = {0};
	if (mh_tools_subvol(what, subvol, work < 0 ? subvol : work, name, &a, r) < 0)
		return -1;
	return outcome(&a, r);
}
