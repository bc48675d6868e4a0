/*
 * What the two runners share (runner/): the job loop of serve.c, and the file
 * copy of copy.c, which the tools runner uses for images and the tree runner
 * for each regular file of a tree. Each runner is a program of its own, so
 * that neither links what only the other needs: the tools runner (tools.c,
 * capability-less) links libblkid for the signature probe; the tree runner
 * (tree.c, with file capabilities) links no parser of image content.
 */
#ifndef SEPCSI_RUNNER_H
#define SEPCSI_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "pol_seccomp.h"
#include "rn_job.h"

/* The most descriptors a job carries (the answer socket first). */
#define RN_FDS_MAX 3

/* One runner: what it serves, and how it takes a job. */
struct rn_role {
	const char *program;               /* its binary's name, for messages */
	const char *log_name;              /* its name in the log */
	const struct pol_sc_table *filter; /* installed before the first job */
	const uint32_t *fds; /* per kind: the descriptors a job carries; 0: not served */
	uint32_t nkinds;     /* entries of fds */
	/*
	 * Take a valid job. Each fds[i] it keeps (a thread's) it sets to -1; the
	 * loop closes the rest when it returns.
	 */
	void (*take)(const struct rn_job *j, int fds[RN_FDS_MAX]);
};

/* Parse the common options, check how it was started, confine, serve fd 3. */
int rn_main(int argc, char **argv, const struct rn_role *role);

/* Has the requester gone away (its answer socket hung up)? */
bool rn_hung_up(int sock);

/* The job's one answer; a requester that has gone away gets none. */
void rn_send_answer(int sock, const struct rn_answer *a);

/* In a job's child: answer, and end. */
void __attribute__((noreturn)) rn_answer_exit(int sock, const struct rn_answer *a);

/*
 * A child for one job: in it, 0, dying with the runner and waiting for its
 * own children; in the runner, the child's pid (or -1).
 */
int rn_fork_job(void);

/* Was --seccomp-log-only given (a filter a job installs logs too)? */
bool rn_seccomp_log_only(void);

/* Run fn(arg) in a detached thread (or here, when no thread is to be had). */
void rn_thread(void *(*fn)(void *), void *arg);

/*
 * Fill the new, empty file dst with src: a reflink where the file system can
 * (*reflinked = 1), else src's data extents only. 0, or an errno (ECANCELED
 * when the requester went away).
 */
int rn_copy_file(int src, int dst, int sock, uint32_t *reflinked);

/*
 * The tools runner's RN_SIGNATURE (signature.c): what fd (an image, or its
 * loop device) holds, into a: status, type, pttype, and an ext4 superblock's
 * numbers. Reads only.
 */
void rn_signature(int fd, struct rn_answer *a);

/*
 * The tools runner's RN_BLOCKS (blocks.c): one page of a snapshot's allocated
 * or changed ranges, fds being the answer socket, the target and the base;
 * the struct rn_blocks answer is sent on fds[0]. Reads only.
 */
void rn_blocks(const struct rn_job *j, const int fds[3]);

#define RN_EXT4_SB_LEN 1024
/*
 * The block count and block size an ext4 primary superblock (RN_EXT4_SB_LEN
 * bytes, as read from offset 1024) declares: 0, or -1 with both cleared when
 * it is not one (no magic, or a block size over 64 KiB).
 */
int rn_ext4_sb_blocks(const unsigned char sb[RN_EXT4_SB_LEN], uint64_t *blocks, uint32_t *bsize);

#endif
