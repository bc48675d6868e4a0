/* Snapshots, clones and the data directory's capacity (mh_copy.c). */
#ifndef SEPCSI_MH_COPY_H
#define SEPCSI_MH_COPY_H

#include "mh.h"

/*
 * Thaw the file system of volume_id if it is mounted and frozen (after a
 * worker died mid-copy). Best effort, never fails; id is re-validated.
 */
void mh_copy_thaw(const struct mh_ctx *c, const char *volume_id);

#endif
