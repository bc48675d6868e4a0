/*
 * The job format between sepcsi-mounthelper and its runners, sepcsi-runner
 * and sepcsi-tree-runner (runner/): one SOCK_SEQPACKET datagram, a struct rn_job, carrying the
 * job's descriptors (SCM_RIGHTS); the runner answers with one struct rn_answer on the job's own
 * answer socket, always the first descriptor. Both ends are built from this header, so the layout
 * needs no versioning.
 *
 *   RN_TOOL  fds: answer, the image (a regular file, open read-write), write
 *            end of the output pipe
 *            run tool_paths[tool] with argv and, last, RN_TOOL_TARGET: the
 *            image, on the tool's fd 3; status is its waitpid status
 *   RN_SIZE  fds: answer, a regular file
 *            ftruncate to size (sparse), fsync; err is the errno, or 0
 *   RN_COPY  fds: answer, source file, new empty destination file
 *            FICLONE, else the source's data extents only (holes stay holes);
 *            then grown to size if that is larger, fsync; err, reflinked
 *   RN_PROBE fds: answer, two empty unnamed files (O_TMPFILE) the helper
 *            made in the data directory (nothing left behind): does FICLONE
 *            work from one to the other (reflinked), and the largest size
 *            ftruncate takes (bytes, to 4 KiB); err, or 0
 *   RN_SIGNATURE fds: answer, an image or its loop device (read, never written)
 *            in a child of its own under the probe filter: libblkid's safe
 *            probe, superblocks and partition tables: status (enum
 *            rn_signature), type and pttype as found; and, when the bytes
 *            at 1024 are an ext4 superblock, its block count and size
 *            (fs_blocks, fs_block_size); err, or 0. What it says comes from
 *            bytes a tenant may have written: the helper reads it as such.
 *   RN_BLOCKS fds: answer, a snapshot image (the target), another (the base;
 *            the target again for RN_BLOCKS_ALLOCATED), both read-only
 *            in a child of its own: one page of the target's ranges from
 *            offset on, tool saying which (enum rn_blocks_what): those
 *            holding data (SEEK_DATA), or those whose bytes differ from the
 *            base's (extents both share, by FIEMAP, are equal unread; the
 *            rest is compared in bounded chunks). The answer is a struct
 *            rn_blocks, not an rn_answer. Reads only, at most
 *            RN_BLOCKS_READ_MAX bytes of each image per page.
 *
 * Served only by the tree runner (sepcsi-tree-runner, runner/tree.c), which
 * holds the file capabilities a directory volume's tree needs:
 *
 *   RN_TREE_EMPTY fds: answer, a directory
 *            everything inside it removed (not the directory); err, reason
 *   RN_TREE_COPY  fds: answer, a source directory, an empty destination
 *            the source's contents copied into the destination, then its
 *            owner, mode, times and xattrs; err, reason, bytes (of regular
 *            files), reflinked (every file shares its source's extents),
 *            skipped (device nodes, FIFOs and sockets, not copied)
 *   RN_TREE_SUBVOL fds: answer, a btrfs subvolume, and for a snapshot the
 *            helper's work area; argv[0] (argc 1): a volume or snapshot id
 *            size RN_SUBVOL_SNAP: a writable snapshot of the subvolume, named
 *            argv[0] in the work area; RN_SUBVOL_RO, RN_SUBVOL_RW: the
 *            subvolume made read-only or writable (both need its owner or
 *            CAP_FOWNER, which the helper does not hold); RN_SUBVOL_UNSTICK:
 *            the directory given instead loses its sticky bit (a subvolume in
 *            it can then be destroyed by the helper); err, reason
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
	RN_TREE_EMPTY,
	RN_TREE_COPY,
	RN_SIGNATURE,
	RN_BLOCKS,
	RN_TREE_SUBVOL,
};

/* RN_TREE_SUBVOL: what is done, in size. */
enum rn_subvol { RN_SUBVOL_SNAP = 1, RN_SUBVOL_RO, RN_SUBVOL_RW, RN_SUBVOL_UNSTICK };

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
	uint32_t argc; /* RN_TOOL: argv[0] is the tool's name; below RN_ARGS_MAX */
	uint32_t nfds; /* descriptors sent with the job, the answer socket first */
	uint64_t size; /* RN_SIZE, RN_COPY; RN_BLOCKS: the offset to start from */
	char argv[RN_ARGS_MAX][RN_ARG_LEN];
};

#define RN_REASON_LEN 160

/* RN_TREE_*: what a failure means, in status (0: as its errno says). */
enum rn_tree_status {
	RN_TREE_BUSY = 1, /* a mount inside the tree, or entries still being made */
	RN_TREE_REFUSED,  /* the tree is deeper than the copy goes */
};

/* RN_SIGNATURE: what the probe found, in status. */
enum rn_signature {
	RN_SIG_BLANK = 0, /* no signature at all */
	RN_SIG_FOUND,     /* one: type (a file system) or pttype (a partition table), or neither */
	RN_SIG_AMBIVALENT /* more than one */
};

#define RN_TYPE_LEN 32

struct rn_answer {
	int32_t status; /* RN_TOOL: waitpid status; RN_TREE_*: enum rn_tree_status or 0;
	                   RN_SIGNATURE: enum rn_signature */
	int32_t err;    /* the others: errno of the failed step, 0 on success */
	uint32_t
	    reflinked; /* RN_COPY: the copy shares the source's extents; RN_PROBE: FICLONE works */
	uint32_t skipped; /* RN_TREE_COPY */
	uint64_t bytes;   /* RN_PROBE: the largest file the directory's file system takes */
	char reason[RN_REASON_LEN]; /* RN_TREE_*: what failed, on which entry; NUL-terminated */
	char type[RN_TYPE_LEN];     /* RN_SIGNATURE: blkid's TYPE, or empty */
	char pttype[RN_TYPE_LEN];   /* RN_SIGNATURE: blkid's PTTYPE, or empty */
	uint64_t fs_blocks;         /* RN_SIGNATURE: an ext4 superblock's block count, or 0 */
	uint32_t fs_block_size;     /* RN_SIGNATURE: and its block size, or 0 */
	uint32_t pad;
};

/* RN_BLOCKS: which ranges (in rn_job.tool), the page's bounds, and the answer. */
enum rn_blocks_what { RN_BLOCKS_ALLOCATED = 1, RN_BLOCKS_DELTA = 2 };
#define RN_BLOCKS_MAX      512            /* ranges in one answer (MH_BLOCKS_MAX) */
#define RN_BLOCKS_READ_MAX (256ULL << 20) /* bytes of each image one page may read */
#define RN_BLOCKS_SCAN_MAX (64ULL << 30)  /* bytes of the images one delta page may cover */
#define RN_BLOCK           4096ULL        /* the granularity of every range */

struct rn_blocks {
	int32_t err;                      /* errno of the failed step, 0 on success */
	uint32_t n;                       /* ranges in range[] */
	uint64_t size;                    /* the target's size */
	uint64_t next;                    /* where the next page starts; size: there is none */
	uint64_t range[RN_BLOCKS_MAX][2]; /* offset, length: ascending, disjoint */
};

/* RN_TOOL: the tool's last argument, naming the image it was given on its fd 3. */
#define RN_TOOL_TARGET "/proc/self/fd/3"

/* The runner's fd for jobs, as it is exec'd. */
#define RN_FD_JOBS 3

#endif
