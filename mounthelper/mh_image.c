/*
 * A volume's backing image, <data-dir>/images/<volume-id>.img, opened for a
 * loop device, and the raw-exposure mark on it (its files' lifecycle:
 * mh_image_life.c).
 *
 * Runs in the helper and in the capable core, as root under seccomp. Nothing
 * here is fatal.
 *
 * Safety argument. The file name is built from a volume id that passed
 * pol_volume_id_valid ("sv-" + 32 hex digits): it has no '/', no "..", so
 * every name stays inside the images directory, opened once at start and used
 * only through *at() calls with O_NOFOLLOW. What is opened must be a regular
 * file owned by the images' owner (c->owner): root for the helper; for the
 * core, the orchestrating side, which can then only have the core attach a
 * file it could read and write itself. O_NONBLOCK: a FIFO planted under the
 * name cannot hold the open; it is refused as not a regular file.
 */
#include "mh_image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define NAME_LEN MH_IMAGE_NAME_MAX

void mh_image_name(const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s.img", id);
}

int mh_image_fail(struct mh_res *r, int err, const char *step)
{
	enum mh_err_kind k = (err == ENOSPC || err == EDQUOT) ? MH_E_NOSPACE
	                     : err == EFBIG                   ? MH_E_REFUSED
	                                                      : MH_E_FAILED;
	return mh_fail(r, k, err, "%s: %s", step, strerror(err));
}

int mh_image_open(const struct mh_ctx *c, const char *id, bool readonly, struct stat *st,
                  struct mh_res *r)
{
	char name[NAME_LEN];
	struct stat s;
	mh_image_name(id, name, sizeof(name));
	int fd = openat(c->images_fd, name,
	                (readonly ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return mh_fail(r, MH_E_NOTFOUND, ENOENT, "volume image does not exist");
		if (errno == ELOOP)
			return mh_fail(r, MH_E_REFUSED, ELOOP, "volume image is a symlink");
		return mh_image_fail(r, errno, "open image");
	}
	if (fstat(fd, &s) < 0 || !S_ISREG(s.st_mode)) {
		close(fd);
		return mh_fail(r, MH_E_FAILED, EINVAL, "image is not a regular file");
	}
	if (s.st_uid != c->owner) {
		close(fd);
		return mh_fail(r, MH_E_REFUSED, EPERM, "image is not owned by the images' owner");
	}
	if (s.st_nlink != 1) { /* another name is another volume id for the same device */
		close(fd);
		return mh_fail(r, MH_E_REFUSED, EMLINK, "image has another name (a hard link)");
	}
	/* Back to blocking I/O: O_NONBLOCK was only for the open. */
	if (fcntl(fd, F_SETFL, readonly ? O_RDONLY : O_RDWR) < 0) {
		close(fd);
		return mh_image_fail(r, errno, "open image");
	}
	if (st)
		*st = s; /* only the image the caller gets */
	return fd;
}

/*
 * The mark, under two names: user.* is the one that counts, which the helper
 * reads and writes without a capability (only the images' owner can, and no
 * tenant or rpcd reaches the files); trusted.* is the name an earlier release
 * read, set too where the process may (CAP_SYS_ADMIN), and honoured when found.
 */

static bool marked(int fd, const char *name)
{
	return fgetxattr(fd, name, NULL, 0) >= 0 || (errno != ENODATA && errno != ENOTSUP);
}

bool mh_image_raw(int fd)
{
	return marked(fd, MH_IMAGE_RAW_XATTR) || marked(fd, MH_IMAGE_RAW_XATTR_OLD);
}

int mh_image_mark_raw(int fd, bool durable, struct mh_res *r)
{
	/* Durable before any device exposes the image: a crash keeps the mark with the bytes.
	 * Also a mark found (the sweep sets its own without an fsync). */
	if ((fgetxattr(fd, MH_IMAGE_RAW_XATTR, NULL, 0) < 0 &&
	     fsetxattr(fd, MH_IMAGE_RAW_XATTR, "1", 1, XATTR_CREATE) < 0 && errno != EEXIST) ||
	    (durable && fsync(fd) < 0))
		return mh_fail(r, MH_E_FAILED, errno,
		               "cannot record on the image that it is exposed raw: %s",
		               strerror(errno));
	/* For an older release, which reads trusted.* only. */
	(void)fsetxattr(fd, MH_IMAGE_RAW_XATTR_OLD, "1", 1, XATTR_CREATE);
	return 0;
}
