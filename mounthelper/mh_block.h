/* Raw block volumes: the loop device's node bound onto files (mh_block.c). */
#ifndef SEPCSI_MH_BLOCK_H
#define SEPCSI_MH_BLOCK_H

#include "mh_common.h"
#include "mh_ops.h"

#define MH_BLOCK_DEV "dev" /* the device file inside a raw block staging directory */

/* STAGE with MH_F_BLOCK; role is the staging path's (POL_TARGET for an ephemeral volume). */
int mh_block_stage(const struct mh_ctx *c, const struct mh_req_stage *q, unsigned role,
                   struct mh_audit *a, struct mh_res *r);

/* PUBLISH with MH_F_BLOCK of the volume v (looked up). */
int mh_block_publish(const struct mh_ctx *c, const struct mh_req_publish *q, const struct mh_vol *v,
                     struct mh_audit *a, struct mh_res *r);

#endif
