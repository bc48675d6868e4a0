/* Probing a device (through the tools runner's libblkid) and formatting a blank one (mh_mkfs.c). */
#ifndef SEPCSI_MH_MKFS_H
#define SEPCSI_MH_MKFS_H

#include <stdbool.h>
#include <stddef.h>

#include "mh.h"
#include "rn_job.h"

enum mh_probe_result {
	MH_PROBE_BLANK = 0, /* no signature at all: safe to format */
	MH_PROBE_MATCH = 1, /* exactly the wanted filesystem: mount as is */
};

/*
 * Probe the open image or block device devfd for superblocks and partition
 * tables, in the tools runner.
 * Returns MH_PROBE_BLANK or MH_PROBE_MATCH, or -1 with r filled: MH_E_EXISTS
 * naming what was found (another filesystem, a partition table, an ambivalent
 * result), MH_E_FAILED if probing itself failed. Never writes to the device.
 * sig receives the runner's answer (mh_tools_signature).
 */
int mh_probe(int devfd, const char *want_fstype, struct rn_answer *sig, struct mh_res *r);

/*
 * Format the blank image file img (open for reading and writing; name is the
 * image's, for the log) with fstype, in a child process that holds no
 * capability and sees no other image. The tool writes the regular file,
 * not the loop device: on a block device mkfs.xfs insists on BLKBSZSET, which
 * needs CAP_SYS_ADMIN. The caller must then drop the loop device's cached
 * blocks (mh_loop_flush). args are extra options, already checked against the
 * policy's allowlist for fstype (pol_mkfs_options_check), placed before the
 * image. zeroed: the image holds no data (mh_image_empty), so it reads as
 * zeros and ext4 is formatted without zeroing anything. 0, or -1 with r (the
 * tool's output in the reason).
 */
int mh_mkfs(const char *fstype, char *const *args, size_t nargs, bool zeroed, int img,
            const char *name, struct mh_res *r);

/* Drop the device's cached blocks (BLKFLSBUF) after its backing file was written directly. */
int mh_loop_flush(int loop_fd, struct mh_res *r);

#endif
