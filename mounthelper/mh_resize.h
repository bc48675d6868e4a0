/* Growing images and file systems (mh_resize.c). */
#ifndef SEPCSI_MH_RESIZE_H
#define SEPCSI_MH_RESIZE_H

#include <sys/stat.h>

#include "mh.h"

/*
 * LOOP_SET_CAPACITY on every loop device of ours backed by the image st, grow
 * only: PRECONDITION if the image is smaller than one of them (nothing
 * changed), FAILED if one came out smaller (its image truncated meanwhile).
 * The count, or -1 with r.
 */
int mh_resize_refresh_loops(const struct stat *st, struct mh_res *r);

/*
 * An xfs grows by MH_GROW_STEP_GROUPS allocation groups at most per EXPAND,
 * answered BUSY (EINPROGRESS) while more are left, and never past
 * MH_GROW_MAX_GROUPS in all (REFUSED, EFBIG): mh_resize.c says why.
 */
#define MH_GROW_STEP_GROUPS 1024
#define MH_GROW_MAX_GROUPS  65536

#endif
