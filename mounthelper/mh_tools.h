/*
 * The tool runner (mh_tools.c): the capability-less process that starts the
 * mkfs tools for the helper, which itself may not execve.
 */
#ifndef SEPCSI_MH_TOOLS_H
#define SEPCSI_MH_TOOLS_H

#include <stddef.h>

#include "mh.h"
#include "policy.h"

enum mh_tool {
	MH_TOOL_MKFS_EXT4,
	MH_TOOL_MKFS_XFS,
	MH_TOOL_MKFS_BTRFS,
	MH_TOOL_COUNT,
};

/*
 * At start, before the helper confines itself: fork the runner, which makes
 * its own view and confines itself (the policy's seccomp log_only applies).
 */
void mh_tools_start(const struct pol *pol);

/* A pidfd of the runner, readable once it has exited (the helper cannot go on without it). */
int mh_tools_pidfd(void);

/*
 * Run tool with args (args[0] is its name) in the directory dir (an fd).
 * Waits for it, at most timeout_ms (then the runner kills it); out receives
 * up to cap - 1 bytes of its output, NUL-terminated. 0 with *status its
 * waitpid status, or -1 with r.
 */
int mh_tools_run(enum mh_tool tool, const char *const *args, size_t nargs, int dir, char *out,
                 size_t cap, long timeout_ms, int *status, struct mh_res *r);

#endif
