/*
 * A directory volume's tree, removed or copied on file descriptors without
 * ever following a symlink or leaving the tree: by the tree runner, which
 * cannot mount (mh_tree.c, runner/tree.c).
 */
#ifndef SEPCSI_MH_TREE_H
#define SEPCSI_MH_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include "mh.h"

/*
 * Remove everything inside the directory dirfd (not the directory itself).
 * 0, or -1 with r (BUSY if a mount lies inside or entries keep coming, else
 * the kind of the errno that stopped it).
 */
int mh_tree_empty(int dirfd, struct mh_res *r);

/* What a copy did. */
struct mh_tree_copied {
	uint64_t bytes;   /* the sizes of the regular files copied */
	bool reflinked;   /* every regular file shares its source's extents */
	unsigned skipped; /* device nodes, FIFOs and sockets, which are not copied */
};

/*
 * Copy the contents of the directory src into the empty directory dst, and
 * then src's own owner, mode, times and extended attributes onto dst: files
 * (reflinked, else their data extents only), directories, symlinks (as
 * symlinks), hard links (as hard links), with owners, modes, times and
 * extended attributes (not trusted.*, not security.*). 0, or -1 with r.
 */
int mh_tree_copy(int src, int dst, struct mh_tree_copied *out, struct mh_res *r);

/*
 * A btrfs subvolume, by the tree runner (it needs the subvolume's owner or
 * CAP_FOWNER): a writable snapshot named name in work (RN_SUBVOL_SNAP), or
 * made read-only or writable (RN_SUBVOL_RO, RN_SUBVOL_RW; work -1). 0, or -1 with r.
 */
int mh_tree_subvol(uint64_t what, int subvol, int work, const char *name, struct mh_res *r);

#endif
