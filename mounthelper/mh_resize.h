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

#endif
