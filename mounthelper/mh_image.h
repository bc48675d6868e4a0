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

/* The image's file name inside the images directory: "<id>.img". */
void mh_image_name(const char *id, char *buf, size_t len);

/* A failed step on an image file: ENOSPC/EDQUOT -> NOSPACE, EFBIG -> REFUSED, else FAILED. */
int mh_image_fail(struct mh_res *r, int err, const char *step);

/*
 * Create <id>.img of size bytes (rounded up to 4 KiB), sparse and durable.
 * Idempotent: an existing image of the same size is success, of another size
 * MH_E_EXISTS. The id must already have passed pol_volume_id_valid(). Sets
 * *real to the image's size. 0, or -1 with r.
 */
int mh_image_create(const struct mh_ctx *c, const char *id, uint64_t size, uint64_t *real,
                    struct mh_res *r);

/* Delete <id>.img: missing is success, attached to a loop device is MH_E_BUSY. */
int mh_image_delete(const struct mh_ctx *c, const char *id, struct mh_res *r);

/*
 * The temporary files ("<id>.img.tmp") a crash or a killed worker left in the
 * images and snapshots directories: mh_image_leftovers calls found(SIZE_MAX,
 * id) for each (it only reads the directories' names); mh_image_purge removes
 * id's, in both (PURGE, in a worker: an unlink costs what the copy's extents,
 * a tenant's writes, make it). 0, or -1 with r.
 */
void mh_image_leftovers(const struct mh_ctx *c, void (*found)(size_t base, const char *id));

/*
 * At start, as root: every image and snapshot gets mh_image_mark_upgrade; one
 * that cannot is logged (raw_mark_not_upgraded), and mh_image_taken_raw, the
 * helper's question before it formats or copies an image, says it is raw.
 */
void mh_image_marks_upgrade(const struct mh_ctx *c);
bool mh_image_taken_raw(int fd);
int mh_image_purge(const struct mh_ctx *c, const char *id, struct mh_res *r);

/*
 * Open <id>.img (read-only or read-write) for attaching: a regular file, never
 * a symlink. Returns the fd (caller closes) or -1 with r (NOTFOUND if missing).
 */
int mh_image_open(const struct mh_ctx *c, const char *id, bool readonly, struct mh_res *r);

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
/*
 * An image an earlier release marked (trusted.* only) gets the mark the helper
 * reads without a capability; run with CAP_SYS_ADMIN, which trusted.* needs to
 * be seen. 1 marked now, 0 nothing to do, -1 with errno.
 */
int mh_image_mark_upgrade(int fd);

/*
 * The open image holds no data: SEEK_DATA finds none, so every byte reads as
 * zero (a new sparse image). False when the file system cannot tell.
 */
bool mh_image_empty(int fd);

#endif
