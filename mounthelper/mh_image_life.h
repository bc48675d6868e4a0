/*
 * The lifecycle of image files, the helper's alone (mh_image_life.c; the
 * core only opens an image for a loop device: mh_image.h), and what it asks
 * of an image before it formats or copies one.
 */
#ifndef SEPCSI_MH_IMAGE_LIFE_H
#define SEPCSI_MH_IMAGE_LIFE_H

#include "mh_image.h"

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

/*
 * Call fn for each entry of the directory dirfd (not "." or ".."); -1 if it
 * cannot be read (mh_list.c: the images, snapshots and loop records).
 */
int mh_dir_each(int dirfd, void (*fn)(int dirfd, const char *name, void *arg), void *arg);

#endif
