/*
 * Directory volumes: the handlers of the MH_REQ_DIR_* requests (mh_dir.c) and
 * the look at what dead workers left in the bases' own areas (mh_dir_area.c),
 * which PURGE removes.
 */
#ifndef SEPCSI_MH_DIR_H
#define SEPCSI_MH_DIR_H

#include <stdbool.h>
#include <stddef.h>

#include "mh.h"

/*
 * Every id that dead operations left something of in the work and trash areas
 * of the bases: found(base index, id) for each (an id in both areas twice).
 * Reads the areas' entries only (the helper's own names), never a tree in them.
 */
void mh_dir_leftovers(const struct mh_ctx *c, void (*found)(size_t base, const char *id));

/*
 * Remove what dead operations left of id in base_dir's work and trash areas:
 * each only if marked as id's, or an empty directory (PURGE, in a worker). 0,
 * or -1 with r.
 */
int mh_dir_purge_id(const struct mh_ctx *c, const char *base_dir, const char *id, struct mh_res *r);

#endif
