/* Snapshots, clones and the data directory's capacity (mh_copy.c). */
#ifndef SEPCSI_MH_COPY_H
#define SEPCSI_MH_COPY_H

#include "mh.h"

/*
 * Thaw the file system of volume_id if it is mounted and frozen (after a
 * worker died mid-copy). Best effort, never fails; id is re-validated.
 */
void mh_copy_thaw(const struct mh_ctx *c, const char *volume_id);

/*
 * At start: thaw every mounted file system of the helper's images, in case a
 * helper killed during a copy left one frozen (a freeze outlives the process
 * that made it). Best effort; each thaw is logged.
 */
void mh_copy_thaw_all(const struct mh_ctx *c);

#endif
