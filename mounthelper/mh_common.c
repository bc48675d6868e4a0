/*
 * What every operation handler shares: the error result, the re-validation
 * of ids and paths (the helper trusts nothing rpcd says), "this volume" (its
 * image and loop device), and the careful unmount of a mount proved to be
 * this volume's.
 *
 * Runs in the helper (main process or a worker) as root with the helper's
 * capabilities, under seccomp. Nothing here is fatal.
 *
 * Safety argument for ownership: a mount counts as this volume's only if its
 * source is the loop device currently backed by this volume's image, or it is
 * a bind of the node of such a loop device, the image being identified by
 * (st_dev, st_ino) of the file the helper opened in its own images directory
 * (LOOP_GET_STATUS64), never by a name. So rpcd naming a volume cannot make
 * the helper unmount, bind or expand anything else. Every mount the helper
 * makes is checked afterwards to be where it was asked (mh_verify_mount).
 */
#include "mh_common.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mh_image.h"

#define UNMOUNT_MAX 8 /* stacked mounts of the same volume we are willing to peel */

__attribute__((format(printf, 4, 0))) static int record(struct mh_res *r, enum mh_err_kind kind,
                                                        int err, const char *fmt, va_list ap)
{
	r->kind = kind;
	r->sys_errno = err;
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
	return -1;
}

int mh_fail(struct mh_res *r, enum mh_err_kind kind, int err, const char *fmt, ...)
{
	va_list ap;
	if (r->kind != MH_E_OK)
		return -1; /* keep the first (root) cause */
	va_start(ap, fmt);
	record(r, kind, err, fmt, ap);
	va_end(ap);
	return -1;
}

int mh_refail(struct mh_res *r, enum mh_err_kind kind, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	record(r, kind, err, fmt, ap);
	va_end(ap);
	return -1;
}

bool mh_absent(struct mh_res *r)
{
	if (r->kind != MH_E_NOTFOUND)
		return false;
	*r = (struct mh_res){0};
	return true;
}

int mh_missing_means(struct mh_res *r, enum mh_err_kind kind)
{
	if (r->kind == MH_E_NOTFOUND)
		r->kind = kind;
	return -1;
}

enum mh_err_kind mh_kind_of_errno(int err)
{
	switch (err) {
	case ENOENT:
		return MH_E_NOTFOUND;
	case EEXIST:
		return MH_E_EXISTS;
	case EBUSY:
		return MH_E_BUSY;
	case ENOSPC:
	case EDQUOT:
		return MH_E_NOSPACE;
	default:
		return MH_E_FAILED;
	}
}

int mh_read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n < 0 ? -1 : 0;
}

void mh_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int mh_check_volume_id(const char *id, struct mh_res *r)
{
	if (!pol_volume_id_valid(id))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "malformed volume id");
	return 0;
}

int mh_check_snapshot_id(const char *id, struct mh_res *r)
{
	if (!pol_snapshot_id_valid(id))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "malformed snapshot id");
	return 0;
}

int mh_vol_image(const struct mh_ctx *c, const char *id, struct mh_vol *v, struct mh_res *r)
{
	int fd = mh_image_open(c, id, true, &v->st, r);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

int mh_vol_lookup(const struct mh_ctx *c, const char *id, struct mh_vol *v, struct mh_res *r)
{
	if (mh_vol_image(c, id, v, r) < 0)
		return -1;
	int found = mh_loop_find(v->st.st_dev, v->st.st_ino, false, &v->loop, 1, r);
	if (found < 0)
		return -1;
	v->attached = found == 1;
	return 0;
}

int mh_loop_ours(const struct mh_ctx *c, int nr, struct mh_vol *v, char *vid)
{
	char img[MH_IMAGE_NAME_MAX];
	dev_t dev;
	ino_t ino;
	*v = (struct mh_vol){0};
	if (nr < 0 || mh_loop_status(nr, &v->loop, &dev, &ino, vid, MH_ID_MAX + 1) < 0 ||
	    !pol_volume_id_valid(vid))
		return 0;
	mh_image_name(vid, img, sizeof(img));
	v->attached = fstatat(c->images_fd, img, &v->st, AT_SYMLINK_NOFOLLOW) == 0 &&
	              v->st.st_dev == dev && v->st.st_ino == ino;
	return v->attached;
}

bool mh_vol_owns(const struct mh_vol *v, const struct mh_mnt *m, struct mh_loop *l)
{
	struct mh_loop tmp;
	struct mh_res ignore = {0};
	if (!m->mounted || v->st.st_ino == 0)
		return false;
	if (v->dir) /* a bind of the volume's directory: its root is that directory */
		return S_ISDIR(m->st.st_mode) && m->st.st_dev == v->st.st_dev &&
		       m->st.st_ino == v->st.st_ino;
	if (S_ISBLK(m->st.st_mode)) /* a bind of a device node: one of our loop devices? */
		return mh_loop_by_rdev(m->st.st_rdev, v->st.st_dev, v->st.st_ino, l ? l : &tmp,
		                       &ignore) == 1;
	/* A file system: from whichever of the image's devices it is, not only the first found;
	 * never a look at a device its source names that is none of them (another's may hang). */
	struct mh_loop *loops;
	bool ours = false;
	int n = mh_loop_list(v->st.st_dev, v->st.st_ino, &loops, &ignore);
	for (int i = 0; i < n && !ours; i++)
		if ((ours = mh_mount_is_loop(m, &loops[i])) && l)
			*l = loops[i];
	free(loops);
	return ours;
}

int mh_unmount_ours(const struct mh_at *at, const struct mh_vol *v, int *unmounted,
                    struct mh_res *r)
{
	int n = 0, ret = -1;
	for (int i = 0; i < UNMOUNT_MAX; i++) {
		struct mh_mnt m;
		int fd = mh_at_child(at, O_PATH, r);
		if (fd < 0) {
			if (mh_absent(r))
				ret = 0;
			break;
		}
		int rc = mh_mount_info(fd, &m, r);
		close(fd); /* an open fd inside the mount would keep it busy */
		if (rc < 0)
			break;
		if (!m.mounted) {
			ret = 0;
			break;
		}
		if (!mh_vol_owns(v, &m, NULL)) {
			/* Never unmount what is not ours. */
			mh_fail(r, MH_E_REFUSED, EPERM, "%s%s is mounted there, not this volume",
			        m.source, m.root);
			break;
		}
		/*
		 * Safety: the top mount at the checked parent/name was just shown to
		 * be this volume's; mh_umount re-checks the mount id right before
		 * umount2(UMOUNT_NOFOLLOW), relative to that parent.
		 */
		if (mh_umount(at->dir, at->name, m.id, r) < 0)
			break;
		n++;
	}
	if (ret < 0 && r->kind == MH_E_OK)
		mh_fail(r, MH_E_BUSY, EBUSY, "too many stacked mounts");
	if (unmounted)
		*unmounted = n;
	return ret;
}

void mh_remove_made(const struct mh_ctx *c, const char *path, unsigned roles, const char *volume_id)
{
	struct mh_at at;
	if (mh_at_open(c, path, roles, &at, &(struct mh_res){0}) == 0) {
		mh_at_remove_ours(&at, volume_id, &(struct mh_res){0});
		mh_at_close(&at);
	}
}

int mh_mount_covers_nothing(int fd, int mnt_id, struct mh_res *r)
{
	struct mh_res undo = {0};
	int has = mh_dir_has_entries(fd, r); /* the descriptor reads the covered directory */
	if (has == 0)
		return 0;
	if (mh_umount_id(mnt_id, &undo) < 0)
		log_kv(LOG_LVL_ERROR, "mount_undo_failed", "reason", undo.reason, NULL);
	return has < 0 ? -1
	               : mh_fail(r, MH_E_FAILED, EAGAIN,
	                         "something was made in the mount point meanwhile (another "
	                         "request's, now beneath this volume); mount undone");
}

int mh_verify_mount(const struct mh_ctx *c, const char *path, unsigned roles, int mnt_id,
                    struct mh_res *r)
{
	struct mh_at at;
	struct statx stx;
	bool ok = false;
	if (mh_at_open(c, path, roles, &at, r) == 0) {
		ok = statx(at.dir, at.name,
		           AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC, STATX_MNT_ID,
		           &stx) == 0 &&
		     (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) && (int)stx.stx_mnt_id == mnt_id;
		mh_at_close(&at);
	}
	if (ok)
		return 0;
	/* The path no longer reaches the new mount: take it away again, wherever it is. */
	struct mh_res undo = {0};
	if (mh_umount_id(mnt_id, &undo) < 0)
		log_kv(LOG_LVL_ERROR, "mount_undo_failed", "path", path, "reason", undo.reason,
		       NULL);
	return mh_refail(r, MH_E_FAILED, EAGAIN,
	                 "the path changed while the volume was mounted on it; mount undone");
}

static int detach_unused(const struct mh_vol *v, bool all, bool published,
                         const struct mh_loop *checked, struct mh_res *r)
{
	struct mh_loop *loops;
	char where[MH_PATH_MAX + 1];
	struct mh_res held = {0}; /* a device held open: the others are detached all the same */
	int n = mh_loop_list(v->st.st_dev, v->st.st_ino, &loops, r), ret = n < 0 ? -1 : 0;
	/* Autoclear ones too: a raw block device's holder may set that, and its pins would
	 * hold it for good; a file system's device in use is still mounted, so left. A
	 * read-only publication's own device may be the image's last (an UNSTAGE that
	 * detached the staging's, then answered BUSY for it). */
	for (int i = 0; i < n && ret == 0; i++) {
		if (published && !(loops[i].lo_flags & LO_FLAGS_READ_ONLY))
			continue;
		bool known =
		    checked && loops[i].nr == checked->nr && loops[i].rdev == checked->rdev;
		int used = known ? 0 : mh_loop_in_use(&loops[i], -1, where, sizeof(where), r);
		if (used < 0 || (used && all))
			ret = used < 0 ? -1
			               : mh_fail(r, MH_E_BUSY, EBUSY, "%s is still in use at %s",
			                         loops[i].path, where);
		/* Safety: no mount and no bind of this device exists anywhere in our view. */
		else if (!used && mh_loop_detach(&loops[i], v->st.st_dev, v->st.st_ino, r) < 0) {
			/* Held open: it goes at its close; the next one is looked at too. */
			ret = r->sys_errno == EALREADY ? 0 : -1;
			if (ret == 0) {
				held = *r;
				*r = (struct mh_res){0};
			}
		}
	}
	free(loops);
	if (ret == 0 && held.kind != MH_E_OK) {
		*r = held;
		ret = -1;
	}
	return ret;
}

int mh_detach_unused(const struct mh_vol *v, bool all, struct mh_res *r)
{
	return detach_unused(v, all, false, NULL, r);
}

int mh_detach_unused_but(const struct mh_vol *v, const struct mh_loop *checked, struct mh_res *r)
{
	return detach_unused(v, true, false, checked, r);
}

int mh_detach_published(const struct mh_vol *v, struct mh_res *r)
{
	return detach_unused(v, false, true, NULL, r);
}
