/*
 * Directory volumes' project quotas (mh_quota.c).
 */
#ifndef SEPCSI_MH_QUOTA_H
#define SEPCSI_MH_QUOTA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/quota.h>

#include "mh.h"

/* Does the base's file system keep project quotas? */
bool mh_quota_on(int base);

/* Give the new directory fd a project of its own, inherited, limited to bytes. 0, or -1 with r. */
int mh_quota_start(int base, int fd, const char *volume_id, uint64_t bytes, struct mh_res *r);

/* Set project id's hard limit to bytes (0: none). 0, or -1 with r. */
int mh_quota_set(int base, uint32_t id, uint64_t bytes, struct mh_res *r);

/*
 * The quota of volume volume_id's directory fd: the project the helper gave
 * it (*id, never what its files say) and its limit in *bytes (0: none); -1 none.
 */
int mh_quota_of(int base, int fd, const char *volume_id, uint32_t *id, uint64_t *bytes,
                struct dqblk *q);

#endif
