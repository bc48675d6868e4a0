/*
 * What the two parts of sepcsi-runner share: the file copy of runner.c, which
 * the tree walk of tree.c (the tree runner's jobs) uses for each regular file.
 */
#ifndef SEPCSI_RUNNER_H
#define SEPCSI_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "rn_job.h"

/* Has the requester gone away (its answer socket hung up)? */
bool rn_hung_up(int sock);

/*
 * Fill the new, empty file dst with src: a reflink where the file system can
 * (*reflinked = 1), else src's data extents only. 0, or an errno (ECANCELED
 * when the requester went away).
 */
int rn_copy_file(int src, int dst, int sock, uint32_t *reflinked);

/* RN_TREE_EMPTY and RN_TREE_COPY (tree.c): the outcome is written into a. */
void rn_tree_empty(int sock, int dir, struct rn_answer *a);
void rn_tree_copy(int sock, int src, int dst, struct rn_answer *a);

#endif
