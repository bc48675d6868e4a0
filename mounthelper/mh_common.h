/*
 * Checks and lookups shared by the operation handlers (mh_common.c): ids,
 * "this volume" (its image and loop device), and the careful unmount of what
 * is proven to be this volume's mount or bind.
 */
#ifndef SEPCSI_MH_COMMON_H
#define SEPCSI_MH_COMMON_H

#include <stdbool.h>
#include <sys/stat.h>

#include "mh.h"
#include "mh_at.h"
#include "mh_loop.h"
#include "mh_mount.h"

int mh_check_volume_id(const char *id, struct mh_res *r);
int mh_check_snapshot_id(const char *id, struct mh_res *r);

/*
 * The volume's image identity and, if attached, its (first) loop device; or,
 * for a directory volume (dir), the identity of its directory.
 */
struct mh_vol {
	struct stat st;
	bool attached;
	struct mh_loop loop;
	bool dir;
};

/* Only the image's identity (v->st), no look at the loop devices: what mh_vol_lookup does first. */
int mh_vol_image(const struct mh_ctx *c, const char *id, struct mh_vol *v, struct mh_res *r);
/* Look the volume up; 0, or -1 with r (NOTFOUND if there is no image). */
int mh_vol_lookup(const struct mh_ctx *c, const char *id, struct mh_vol *v, struct mh_res *r);

/*
 * Is loopN one of ours: attached by the helper to a volume's image (named by
 * the volume id, its lo_file_name) and backed by that very file? 1 with *v
 * (that image's identity, the device as v->loop) and vid (MH_ID_MAX + 1
 * bytes) set, else 0 (nr -1: none).
 */
int mh_loop_ours(const struct mh_ctx *c, int nr, struct mh_vol *v, char *vid);

/*
 * Is what m describes this volume's: a file system mounted from one of its
 * loop devices, or a bind of the node of one of them (*l set to that device,
 * may be NULL); for a directory volume, a bind whose root is its directory?
 * Needs the identity (v->st) only: never which device a look found first.
 */
bool mh_vol_owns(const struct mh_vol *v, const struct mh_mnt *m, struct mh_loop *l);

/*
 * Unmount every mount of this volume stacked on the last component of at
 * (a directory or a file). Returns 0 when nothing is mounted there any more,
 * -1 with r otherwise (REFUSED if what is mounted is not this volume's: it is
 * never touched). *unmounted counts the mounts removed (may be NULL).
 */
int mh_unmount_ours(const struct mh_at *at, const struct mh_vol *v, int *unmounted,
                    struct mh_res *r);

/*
 * The directory at path, to be mounted on: resolved for role (mh_at_open),
 * made and marked first if make and missing (*made says so), then looked at.
 * Returns 1 if this volume is mounted there already (*m describes it), 0 if
 * it is an empty directory with nothing mounted on it (*fd open on it);
 * anything else is -1 with r: EXISTS (a file, something mounted, not empty),
 * NOTFOUND (missing). at stays open on success.
 */
int mh_mount_point(const struct mh_ctx *c, const char *path, unsigned role, const struct mh_vol *v,
                   const char *volume_id, bool make, struct mh_at *at, int *fd, struct mh_mnt *m,
                   bool *made, struct mh_res *r);
/*
 * What is at at's name: 1 this volume's mount or bind (*m, and *l unless NULL), 0
 * an empty directory (dir) or empty regular file with nothing mounted on it,
 * *fd left open on it either way; else -1 with r (NOTFOUND when missing).
 */
int mh_at_vacant(const struct mh_at *at, const struct mh_vol *v, bool dir, struct mh_mnt *m,
                 struct mh_loop *l, int *fd, struct mh_res *r);
/* After a failure: remove what the helper made at path for volume_id, if it did (mh_at.h). */
void mh_remove_made(const struct mh_ctx *c, const char *path, unsigned roles,
                    const char *volume_id);
/*
 * After a mount on the directory fd (opened before it, so it reads the
 * directory now covered): that directory must still be empty. Another
 * request's walk may have passed it before it was a mount point and made
 * something in it meanwhile (concurrent workers), which would then lie
 * beneath this volume, out of every look's reach; the new mount is undone
 * (-1 with r). 0 when nothing is covered.
 */
int mh_mount_covers_nothing(int fd, int mnt_id, struct mh_res *r);

/*
 * After a mount with id mnt_id onto the last component of path: walk path
 * again and check that it reaches that mount. If not (renamed, replaced
 * meanwhile), undo the mount and answer FAILED.
 */
int mh_verify_mount(const struct mh_ctx *c, const char *path, unsigned roles, int mnt_id,
                    struct mh_res *r);

/*
 * Detach every loop device of the volume's image, autoclear or not (a raw
 * block device's holder may set that, and its pins would hold it), that no
 * mount or bind uses anywhere in the helper's view; its pins first. With all,
 * one still in use is BUSY (UNSTAGE, and a raw block STAGE that finds devices
 * it does not re-use, must never go on with a device left); without, it is
 * skipped.
 */
int mh_detach_unused(const struct mh_vol *v, bool all, struct mh_res *r);

/*
 * mh_detach_unused with all, after UNSTAGE unmounted the one use the caller
 * had found of checked (mh_loop_in_use except that mount): checked is
 * detached without a second look at every mount. Nothing can have bound it
 * meanwhile that the helper answers for: only PUBLISH binds a volume's
 * device, and requests on one volume never run at once (mh_worker.c).
 */
int mh_detach_unused_but(const struct mh_vol *v, const struct mh_loop *checked, struct mh_res *r);

/*
 * After UNPUBLISH: mh_detach_unused without all, of the read-only devices
 * only. A raw block publication has a device of its own only when it is
 * read-only and its staging's device is not; it may be the image's last (an
 * UNSTAGE detached the staging's, then answered BUSY for it).
 */
int mh_detach_published(const struct mh_vol *v, struct mh_res *r);

#endif
