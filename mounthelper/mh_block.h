/* Raw block volumes: the loop device's node bound onto files (mh_block.c). */
#ifndef SEPCSI_MH_BLOCK_H
#define SEPCSI_MH_BLOCK_H

#include "mh_ops.h"

/* STAGE with MH_F_BLOCK; staging_path already checked (root = its allowed root). */
int mh_block_stage(const struct mh_ctx *c, const struct mh_req_stage *q, const char *root,
                   struct mh_audit *a, struct mh_res *r);

/* UNSTAGE with MH_F_BLOCK. */
int mh_block_unstage(const struct mh_ctx *c, const struct mh_req_unstage *q, const char *root,
                     struct mh_audit *a, struct mh_res *r);

/* PUBLISH with MH_F_BLOCK. */
int mh_block_publish(const struct mh_ctx *c, const struct mh_req_publish *q, const char *sroot,
                     const char *troot, struct mh_audit *a, struct mh_res *r);

/*
 * UNPUBLISH of a target that is a file (not a directory): parent is the
 * target's parent directory (a real directory fd), name its last component,
 * fd an O_PATH fd of the file (consumed).
 */
int mh_block_unpublish(const struct mh_ctx *c, const char *volume_id, int parent, const char *name,
                       int fd, struct mh_audit *a, struct mh_res *r);

#endif
