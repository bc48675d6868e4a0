/*
 * The helper's side of its runners (runner/): the capability-less tools
 * runner, sepcsi-runner, which runs the mkfs tools, sizes and copies image
 * files and reads what an image holds for the helper (which itself may not
 * execve, does no file I/O it need not do and parses no image), and the tree
 * runner, sepcsi-tree-runner, which walks directory volumes' trees.
 */
#ifndef SEPCSI_MH_TOOLS_H
#define SEPCSI_MH_TOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mh.h"
#include "policy.h"
#include "rn_job.h"

/* The tools runner (capability-less), and the tree runner (file capabilities; directory volumes).
 */
enum mh_runner { MH_RUNNER_TOOLS, MH_RUNNER_TREE, MH_RUNNERS };

/*
 * At start, before the helper enters its view: open sepcsi-runner and
 * sepcsi-tree-runner beside the helper's binary.
 */
void mh_tools_locate(void);

/*
 * After a fork whose child execs (a runner, the core): wait until its end of
 * started (a close-on-exec pipe made before the fork) is closed: at its exec,
 * when it closes its descriptors once its view is its own (a runner), or at
 * its death; so that what its parent changes in its own view next
 * (mh_view.c) comes after the child has a view of its own.
 */
void mh_wait_for_exec(int started[2]);

/*
 * At start, before the helper confines itself: fork a child that leaves the
 * helper's view, drops every capability and execs the tools runner with the
 * job socket on fd 3, in a view without data_dir; with directory volumes (the
 * policy names base directories), likewise the tree runner, keeping only its
 * file capabilities, in a view without /proc either. log_args are passed on
 * (--log-format, --log-level).
 */
void mh_tools_start(const struct pol *pol, const char *data_dir, const char *log_format,
                    const char *log_level);

/*
 * A pidfd of that runner, readable once it has exited (the helper cannot go
 * on without it); -1 for a runner not started.
 */
int mh_tools_pidfd(enum mh_runner which);

/*
 * Send a job of kind (with size, and fds after its answer socket) to that
 * runner and wait for its answer in a. 0, or -1 with r if it could not be
 * sent or got no answer; a->err is the job's own outcome.
 */
int mh_tools_job(enum mh_runner which, uint32_t kind, const int *fds, uint32_t nfds, uint64_t size,
                 struct rn_answer *a, struct mh_res *r);

/*
 * The tree runner's RN_TREE_SUBVOL what (enum rn_subvol) on btrfs subvolume
 * subvol: a writable snapshot named name in work, or its read-only flag set
 * or cleared (work: subvol again). 0 with the runner's answer in a, or -1 with r.
 */
int mh_tools_subvol(uint64_t what, int subvol, int work, const char *name, struct rn_answer *a,
                    struct mh_res *r);

/*
 * Run tool with args (args[0] is its name) on the image file img (an fd open
 * for reading and writing), which the runner appends as RN_TOOL_TARGET.
 * Waits for it, at most timeout_ms (then the runner kills it); out receives
 * up to cap - 1 bytes of its output, NUL-terminated. 0 with *status its
 * waitpid status, or -1 with r.
 */
int mh_tools_run(enum rn_tool tool, const char *const *args, size_t nargs, int img, char *out,
                 size_t cap, long timeout_ms, int *status, struct mh_res *r);

/*
 * One page of RN_BLOCKS (what: enum rn_blocks_what) of the read-only snapshot
 * images target and base, from offset on, into b. 0, or -1 with r (b->err
 * too: the job's own failure). What it says is read as the runner's word
 * about a tenant's bytes: the caller checks its form.
 */
int mh_tools_blocks(uint32_t what, uint64_t offset, int target, int base, struct rn_blocks *b,
                    struct mh_res *r);

/*
 * The open regular file fd extended to size bytes (sparse; never shrunk),
 * then fsync'd. 0, or -1 with r (NOSPACE for ENOSPC/EDQUOT, REFUSED for EFBIG).
 */
int mh_tools_size(int fd, uint64_t size, struct mh_res *r);

/*
 * The new, empty file dst filled with src (a reflink where the file system
 * can, else src's data extents; *reflinked says which), grown to size if
 * that is larger than src, fsync'd. 0, or -1 with r.
 */
int mh_tools_copy(int src, int dst, uint64_t size, bool *reflinked, struct mh_res *r);

/*
 * What the file system of directory dir can do, asked once at start: whether
 * FICLONE works there, and the largest file it takes. The runner gets two
 * unnamed files made there (O_TMPFILE), never the directory. 0, or -1 with r.
 */
int mh_tools_probe(int dir, bool *reflink, uint64_t *max_file, struct mh_res *r);

/*
 * What the image or loop device fd holds, read by the tools runner (libblkid's
 * safe probe, and an ext4 superblock's numbers; proto/rn_job.h RN_SIGNATURE).
 * The answer's form is checked (status known, strings bounded and printable):
 * it comes from bytes a tenant may have written. 0 with a, or -1 with r.
 */
int mh_tools_signature(int fd, struct rn_answer *a, struct mh_res *r);

#endif
