/* Backing images in <data-dir>/images (mh_image.c). */
#ifndef SEPCSI_MH_IMAGE_H
#define SEPCSI_MH_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mh.h"

#define MH_IMAGE_NAME_MAX (POL_ID_LEN + sizeof(".img.tmp"))
/*
 * The mode an image or snapshot file is made with: the owner's alone when
 * that is root; with another owner, group root too (images/ is set-group-ID,
 * group root: the capable core, root without CAP_DAC_OVERRIDE, reaches them
 * through the group).
 */
#define MH_IMAGE_MODE(c) ((c)->owner ? 0660 : 0600)
/* The raw-exposure mark: user.* counts; trusted.* is an earlier release's (mh_image.c). */
#define MH_IMAGE_RAW_XATTR     "user.sepcsi.raw"
#define MH_IMAGE_RAW_XATTR_OLD "trusted.sepcsi.raw"

/* The image's file name inside the images directory: "<id>.img". */
void mh_image_name(const char *id, char *buf, size_t len);

/* A failed step on an image file: ENOSPC/EDQUOT -> NOSPACE, EFBIG -> REFUSED, else FAILED. */
int mh_image_fail(struct mh_res *r, int err, const char *step);

/*
 * Open <id>.img (read-only or read-write) for attaching: a regular file, never
 * a symlink. Returns the fd (caller closes), with *st what it is (st may be
 * NULL), or -1 with r (NOTFOUND if missing).
 */
struct stat;
int mh_image_open(const struct mh_ctx *c, const char *id, bool readonly, struct stat *st,
                  struct mh_res *r);

/*
 * Raw exposure, recorded on the image itself: trusted.sepcsi.raw, which only
 * CAP_SYS_ADMIN can set or remove. An image a device ever exposed writable as
 * a raw block volume holds bytes a pod may have written, so it is never
 * mounted as a file system again (STAGE refuses it), and its snapshots and
 * clones inherit the mark.
 *
 * mh_image_mark_raw: set the mark on the open image fd if it has none,
 * durably (fsync) if it is not exposed yet (an fsync of an exposed image
 * costs what a pod wrote). 0, or -1 with r: then it must not be exposed.
 * mh_image_raw: does the open image fd carry it? True also when the attribute
 * cannot be read for any reason but its absence (or no xattr support there).
 */
int mh_image_mark_raw(int fd, bool durable, struct mh_res *r);
bool mh_image_raw(int fd);
#endif
