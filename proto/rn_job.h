/*
 * The job format between sepcsi-mounthelper and its runner, sepcsi-runner
 * (runner/): one SOCK_SEQPACKET datagram, a struct rn_job, carrying the job's
 * descriptors (SCM_RIGHTS); the runner answers with one struct rn_answer on
 * the job's own answer socket, always the first descriptor. Both ends are
 * built from this header, so the layout needs no versioning.
 *
 *   RN_TOOL  fds: answer, working directory, write end of the output pipe
 *            run tool_paths[tool] with argv; status is its waitpid status
 *   RN_SIZE  fds: answer, a regular file
 *            ftruncate to size (sparse), fsync; err is the errno, or 0
 *   RN_COPY  fds: answer, source file, new empty destination file
 *            FICLONE, else the source's data extents only (holes stay holes);
 *            then grown to size if that is larger, fsync; err, reflinked
 *   RN_PROBE fds: answer, a directory
 *            with unnamed files there (O_TMPFILE, nothing left behind): does
 *            FICLONE work (reflinked), and the largest size ftruncate takes
 *            (bytes, to 4 KiB); err, or 0
 */
#ifndef SEPCSI_RN_JOB_H
#define SEPCSI_RN_JOB_H

#include <stdint.h>

#define RN_ARGS_MAX 24
#define RN_ARG_LEN  72

enum rn_kind {
	RN_TOOL = 1,
	RN_SIZE,
	RN_COPY,
	RN_PROBE,
};

/* The only programs the runner ever starts. Debian (merged /usr) installs them in /sbin. */
enum rn_tool {
	RN_MKFS_EXT4,
	RN_MKFS_XFS,
	RN_MKFS_BTRFS,
	RN_TOOL_COUNT,
};

struct rn_job {
	uint32_t kind;
	uint32_t tool; /* RN_TOOL */
	uint32_t argc; /* RN_TOOL: argv[0] is the tool's name */
	uint32_t nfds; /* descriptors sent with the job, the answer socket first */
	uint64_t size; /* RN_SIZE, RN_COPY */
	char argv[RN_ARGS_MAX][RN_ARG_LEN];
};

struct rn_answer {
	int32_t status; /* RN_TOOL: waitpid status */
	int32_t err;    /* RN_SIZE, RN_COPY: errno of the failed step, 0 on success */
	uint32_t
	    reflinked; /* RN_COPY: the copy shares the source's extents; RN_PROBE: FICLONE works */
	uint32_t pad;
	uint64_t bytes; /* RN_PROBE: the largest file the directory's file system takes */
};

/* The runner's fd for jobs, as it is exec'd. */
#define RN_FD_JOBS 3

#endif
