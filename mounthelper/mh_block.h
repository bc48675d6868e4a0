/* Raw block volumes: the loop device's node bound onto files (mh_block.c). */
#ifndef SEPCSI_MH_BLOCK_H
#define SEPCSI_MH_BLOCK_H

#include "mh_common.h"
#include "mh_ops.h"

/* STAGE with MH_F_BLOCK; role is the staging path's (POL_TARGET for an ephemeral volume). */
int mh_block_stage(const struct mh_ctx *c, const struct mh_req_stage *q, unsigned role,
                   struct mh_audit *a, struct mh_res *r);

/* UNSTAGE with MH_F_BLOCK: at is the staging path's, v the volume (st_ino 0: no image). */
int mh_block_unstage(const struct mh_at *at, const char *volume_id, const struct mh_vol *v,
                     struct mh_audit *a, struct mh_res *r);

/* PUBLISH with MH_F_BLOCK of the volume v (looked up). */
int mh_block_publish(const struct mh_ctx *c, const struct mh_req_publish *q, const struct mh_vol *v,
                     struct mh_audit *a, struct mh_res *r);

#endif
