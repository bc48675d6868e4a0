/* Thawing what a dead process left frozen (mh_freeze.c). */
#ifndef SEPCSI_MH_FREEZE_H
#define SEPCSI_MH_FREEZE_H

#include "mh.h"

/*
 * Thaw every frozen file system mounted from one of our loop devices (a
 * freeze outlives the process that made it). Best effort; each thaw is logged.
 */
void mh_thaw_all(const struct mh_ctx *c);

#endif
