/* Growing images and file systems (mh_resize.c). */
#ifndef SEPCSI_MH_RESIZE_H
#define SEPCSI_MH_RESIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "mh.h"

/*
 * After STAGE mounted an existing file system (a restore or clone made larger
 * than its source): grow it online to dev_size if it is smaller. mnt_fd is a
 * directory fd of the verified mount, img_fd the volume's image (to read an
 * ext4 superblock). *grown says whether it grew. 0, or -1 with r.
 */
int mh_resize_grow_if_smaller(int mnt_fd, const char *fstype, int img_fd, uint64_t dev_size,
                              bool *grown, struct mh_res *r);

/*
 * The block count and block size an ext4 primary superblock (the MH_EXT4_SB_LEN
 * bytes at offset 1024 of the device, little-endian fields) records. Pure: the
 * bytes come from an image whose contents the volume's user controls. 0, or -1
 * (outputs cleared) if it is not an ext4 superblock or its block size is over 64 KiB.
 */
#define MH_EXT4_SB_LEN 1024
int mh_ext4_sb_blocks(const unsigned char sb[MH_EXT4_SB_LEN], uint64_t *blocks, uint32_t *bsize);

#endif
