/*
 * Directory volumes: the handlers of the MH_REQ_DIR_* requests (mh_dir.c) and
 * the start-up sweep of what dead workers left in the bases' own areas
 * (mh_dir_area.c).
 */
#ifndef SEPCSI_MH_DIR_H
#define SEPCSI_MH_DIR_H

#include <stdbool.h>

#include "mh.h"

/* Remove what dead operations left in the work and trash areas of every base, but held ids. */
void mh_dir_sweep(const struct mh_ctx *c, bool (*held)(const char *id));

#endif
