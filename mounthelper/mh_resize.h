/* Growing images and file systems (mh_resize.c). */
#ifndef SEPCSI_MH_RESIZE_H
#define SEPCSI_MH_RESIZE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "mh.h"

/* What a look inside an image read of its file system's size (an ext4's superblock). */
struct mh_fs_size {
	uint64_t block_size, blocks; /* 0, 0: not known */
};

/*
 * After STAGE mounted an existing file system (a restore or clone made larger
 * than its source): grow it online to dev_size if it is smaller. mnt_fd is a
 * directory fd of the verified mount; seen is what the tools runner read in
 * the image before the mount (for ext4, its superblock's block count: ext4
 * is asked to grow only when that falls short). *grown says whether it grew.
 * 0, or -1 with r.
 */
int mh_resize_grow_if_smaller(int mnt_fd, const char *fstype, const struct mh_fs_size *seen,
                              uint64_t dev_size, bool *grown, struct mh_res *r);

/*
 * LOOP_SET_CAPACITY on every loop device of ours backed by the image st, grow
 * only: PRECONDITION if the image is smaller than one of them (nothing
 * changed), FAILED if one came out smaller (its image truncated meanwhile).
 * The count, or -1 with r.
 */
int mh_resize_refresh_loops(const struct stat *st, struct mh_res *r);

#endif
