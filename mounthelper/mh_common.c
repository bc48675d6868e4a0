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
 * source is the loop device currently backed by this volume's image, the image
 * being identified by (st_dev, st_ino) of the file the helper opened in its
 * own images directory (LOOP_GET_STATUS64), never by a name. So rpcd naming a
 * volume cannot make the helper unmount, bind or expand anything else.
 */
#include "mh_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mh_image.h"
#include "mh_path.h"

#define UNMOUNT_MAX 8 /* stacked mounts of the same volume we are willing to peel */

int mh_fail(struct mh_res *r, enum mh_err_kind kind, int err, const char *fmt, ...)
{
	va_list ap;
	if (r->kind != MH_E_OK)
		return -1; /* keep the first (root) cause */
	r->kind = kind;
	r->sys_errno = err;
	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
	va_end(ap);
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

int mh_check_path(const struct mh_ctx *c, const char *path, const char *what, const char **root,
                  struct mh_res *r)
{
	int rc = pol_path_check(c->pol, path, root);
	if (rc == -EINVAL)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "malformed %s", what);
	if (rc < 0)
		return mh_fail(r, MH_E_REFUSED, EPERM, "%s outside the allowed roots", what);
	return 0;
}

bool mh_nested(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	return (strncmp(a, b, lb) == 0 && (a[lb] == '\0' || a[lb] == '/')) ||
	       (strncmp(b, a, la) == 0 && (b[la] == '\0' || b[la] == '/'));
}

int mh_vol_lookup(const struct mh_ctx *c, const char *id, struct mh_vol *v, struct mh_res *r)
{
	int fd = mh_image_open(c, id, true, r);
	if (fd < 0)
		return -1;
	int rc = fstat(fd, &v->st);
	close(fd);
	if (rc < 0)
		return mh_fail(r, MH_E_FAILED, errno, "stat image: %s", strerror(errno));
	int found = mh_loop_find(v->st.st_dev, v->st.st_ino, &v->loop, r);
	if (found < 0)
		return -1;
	v->attached = found == 1;
	return 0;
}

bool mh_vol_owns(const struct mh_vol *v, const struct mh_mnt *m)
{
	return v->attached && mh_mount_is_loop(m, &v->loop);
}

int mh_unmount_ours(const char *root, const char *path, const struct mh_vol *v, int dirfd,
                    struct mh_res *r)
{
	const char *name;
	int parent = mh_path_open_parent(root, path, &name, r), ret = -1;
	if (parent < 0) {
		mh_closep(&dirfd);
		return -1;
	}
	for (int i = 0; i < UNMOUNT_MAX; i++) {
		struct mh_mnt m;
		if (dirfd < 0 && (dirfd = mh_path_open_child(parent, name, r)) < 0)
			break;
		if (mh_mount_info(dirfd, &m, r) < 0)
			break;
		mh_closep(&dirfd);
		if (!m.mounted) {
			ret = 0;
			break;
		}
		if (!mh_vol_owns(v, &m)) {
			/* Never unmount what is not ours. */
			mh_fail(r, MH_E_REFUSED, EPERM, "%s is mounted there, not this volume",
			        m.source);
			break;
		}
		/*
		 * Safety: the top mount at parent/name was just shown to be this
		 * volume's loop device; mh_umount re-checks the mount id right
		 * before umount2(UMOUNT_NOFOLLOW), relative to the verified parent.
		 */
		if (mh_umount(parent, name, m.id, r) < 0)
			break;
	}
	if (ret < 0 && r->kind == MH_E_OK)
		mh_fail(r, MH_E_BUSY, EBUSY, "too many stacked mounts");
	mh_closep(&dirfd);
	mh_closep(&parent);
	return ret;
}

int mh_remove_dir(const char *root, const char *path, struct mh_res *r)
{
	const char *name;
	int parent = mh_path_open_parent(root, path, &name, r);
	if (parent < 0) {
		if (r->kind != MH_E_NOTFOUND)
			return -1;
		*r = (struct mh_res){0};
		return 0;
	}
	/* rmdir only, never recursive: an unexpected file inside keeps the directory. */
	int ret = 0;
	if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		ret =
		    mh_fail(r, MH_E_FAILED, errno, "cannot remove directory: %s", strerror(errno));
	close(parent);
	return ret;
}

int mh_make_dir(const char *root, const char *path, bool *created, struct mh_res *r)
{
	const char *name;
	int parent = mh_path_open_parent(root, path, &name, r);
	*created = false;
	if (parent < 0)
		return -1;
	int ret = 0;
	/* Safety: mkdirat on a parent fd resolved beneath the root without symlinks. */
	if (mkdirat(parent, name, 0750) == 0)
		*created = true;
	else if (errno != EEXIST)
		ret = mh_fail(r, mh_kind_of_errno(errno), errno, "cannot create directory: %s",
		              strerror(errno));
	close(parent);
	return ret;
}
