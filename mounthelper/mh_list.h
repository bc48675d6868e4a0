/* LIST's pages (mh_list.c: images and snapshots; mh_list_mounts.c: mounts). */
#ifndef SEPCSI_MH_LIST_H
#define SEPCSI_MH_LIST_H

#include <stdbool.h>
#include <stddef.h>

#include "mh_ops.h"

/* Append line to the page if it fits; else mark the page full ("more") and return false. */
bool mh_list_put(struct mh_ans_list *out, size_t *used, const char *line);

/* One page of the mounts of our loop devices after cursor (a mount id, or ""); 0 or -1. */
int mh_list_mounts(const struct mh_ctx *c, const char *cursor, struct mh_ans_list *out,
                   struct mh_res *r);

#endif
