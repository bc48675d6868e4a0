/*
 * Directory volumes as btrfs subvolumes with quota group limits (mh_btrfs.c).
 */
#ifndef SEPCSI_MH_BTRFS_H
#define SEPCSI_MH_BTRFS_H

#include <stdbool.h>
#include <stdint.h>

#include "mh_common.h"

/* Is fd on btrfs; is it the root directory of a subvolume on btrfs? */
bool mh_btrfs_on(int fd);
bool mh_btrfs_subvol(int fd);

/* Does fd's btrfs keep quota groups (enabled by its administrator)? */
bool mh_btrfs_quota_on(int fd);

/* Make subvolume name in dir: empty, or a writable snapshot of subvolume src (>= 0). */
int mh_btrfs_make(int dir, const char *name, int src, struct mh_res *r);

/*
 * Make the subvolume fd read-only (a snapshot, once in place: a read-only
 * subvolume cannot be renamed), or writable again (before it goes to the trash).
 */
int mh_btrfs_set_ro(int fd, bool ro, struct mh_res *r);

/* Destroy subvolume name in dir, open as fd, with every subvolume made inside it. */
int mh_btrfs_destroy(int dir, const char *name, int fd, struct mh_res *r);

/*
 * Whether subvolumes were made inside subvolume fd (a tenant's own, whose
 * quota groups its limit does not bound): 1, 0, or -1 unknown.
 */
int mh_btrfs_escapes(int fd);

/*
 * Limit the referenced bytes of the quota group bounding subvolume fd (0: no
 * limit). The ioctls go through base, outside the volume: a transaction in a
 * volume at its limit could not reserve its own room.
 */
int mh_btrfs_limit(int base, int fd, uint64_t bytes, struct mh_res *r);

/* Subvolume fd's referenced bytes and limit (0: none), from its quota group; -1 none. */
int mh_btrfs_usage(int fd, uint64_t *used, uint64_t *limit);

#endif
