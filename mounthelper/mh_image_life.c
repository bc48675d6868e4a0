/*
 * The lifecycle of the backing image files: CREATE, DELETE and RESIZE of
 * <data-dir>/images/<volume-id>.img, and the removal of the temporary files a
 * crash left. None of it needs a capability (the orchestrating side's part of
 * the helper; the capable core never links it).
 *
 * Runs in a worker of the helper under seccomp. Nothing here is fatal.
 *
 * Safety argument. The file name is built from a volume id that passed
 * pol_volume_id_valid (mh_image.c): every name stays inside the images
 * directory. Creation goes through a temporary name, fsync and
 * renameat2(RENAME_NOREPLACE), so a crash never leaves a half-made image
 * under the final name and an existing image is never replaced. Deletion
 * refuses while a loop device still uses the image. RESIZE grows the file,
 * never shrinks it, within the policy's bounds and the space counted.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "log.h"
#include "mh_helper_ops.h"
#include "mh_image_life.h"
#include "mh_loop.h"
#include "mh_pause.h"
#include "mh_resize.h"
#include "mh_space.h"
#include "mh_tools.h"
#include "mh_worker.h"
#include "policy_all.h"

#define NAME_LEN MH_IMAGE_NAME_MAX

/* "<id>.img", or its temporary name "<id>.img.tmp". */
static void image_name(const char *id, char *buf, size_t len, bool tmp)
{
	mh_image_name(id, buf, len);
	if (tmp)
		strncat(buf, ".tmp", len - strlen(buf) - 1);
}

static int check_existing(const struct stat *st, uint64_t size, uint64_t *real, struct mh_res *r)
{
	if (!S_ISREG(st->st_mode))
		return mh_fail(r, MH_E_EXISTS, EEXIST, "image exists and is not a regular file");
	if ((uint64_t)st->st_size != size)
		return mh_fail(r, MH_E_EXISTS, EEXIST, "image exists with size %lld, not %llu",
		               (long long)st->st_size, (unsigned long long)size);
	*real = size;
	return 0;
}

int mh_image_create(const struct mh_ctx *c, const char *id, uint64_t size, uint64_t *real,
                    struct mh_res *r)
{
	char name[NAME_LEN], tmp[NAME_LEN];
	struct stat st;
	image_name(id, name, sizeof(name), false);
	image_name(id, tmp, sizeof(tmp), true);

	if (fstatat(c->images_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return check_existing(&st, size, real, r);
	if (errno != ENOENT)
		return mh_image_fail(r, errno, "stat image");

	/* A temporary file left by a crash mid-create is ours to remove. */
	if (unlinkat(c->images_fd, tmp, 0) < 0 && errno != ENOENT)
		return mh_image_fail(r, errno, "remove stale temporary");
	int fd = openat(c->images_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	                MH_IMAGE_MODE(c));
	if (fd < 0)
		return mh_image_fail(r, errno, "create image");
	/* Sized (sparse) and made durable by the runner, which needs no capability for it. */
	int sized = mh_tools_size(fd, size, r);
	if (sized == 0)
		mh_loop_record_new(fd); /* no loop device backs it yet */
	close(fd);
	if (sized < 0) {
		unlinkat(c->images_fd, tmp, 0);
		return -1;
	}
	mh_pause(c, "image", id); /* tests: killed with the temporary file made */
	if (renameat2(c->images_fd, tmp, c->images_fd, name, RENAME_NOREPLACE) < 0) {
		int err = errno;
		unlinkat(c->images_fd, tmp, 0);
		if (err == EEXIST && fstatat(c->images_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			return check_existing(&st, size, real, r);
		return mh_image_fail(r, err, "rename image");
	}
	if (fsync(c->images_fd) < 0)
		return mh_image_fail(r, errno, "sync images directory");
	*real = size;
	return 0;
}

int mh_image_delete(const struct mh_ctx *c, const char *id, struct mh_res *r)
{
	char name[NAME_LEN];
	struct stat st;
	image_name(id, name, sizeof(name), false);

	if (fstatat(c->images_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0; /* already gone: idempotent */
		return mh_image_fail(r, errno, "stat image");
	}
	if (!S_ISREG(st.st_mode))
		return mh_fail(r, MH_E_FAILED, EINVAL, "image is not a regular file; not removed");
	/* Held by any device, a renamed one too: never removed under it (its space stays used). */
	int found = c->core ? mh_core_attached(id, r)
	                    : mh_loop_find(st.st_dev, st.st_ino, true, NULL, MH_LOOP_RECORD_MAX, r);
	if (found < 0)
		return -1;
	if (found)
		return mh_fail(r, MH_E_BUSY, EBUSY, "image is still held by a loop device");
	if (unlinkat(c->images_fd, name, 0) < 0 && errno != ENOENT)
		return mh_image_fail(r, errno, "remove image");
	mh_loop_record_forget(st.st_dev, st.st_ino);
	if (fsync(c->images_fd) < 0)
		return mh_image_fail(r, errno, "sync images directory");
	return 0;
}

/* The id of a half-made image or copy's temporary file "<id>.img.tmp"; false if not one. */
static bool temp_id(const char *name, char id[NAME_LEN])
{
	const char *dot = strchr(name, '.');
	size_t n = dot ? (size_t)(dot - name) : 0;
	if (!dot || n >= NAME_LEN || strcmp(dot, ".img.tmp") != 0)
		return false;
	memcpy(id, name, n);
	id[n] = '\0';
	return pol_volume_id_valid(id) || pol_snapshot_id_valid(id);
}

static void leftover(int dirfd, const char *name, void *arg)
{
	void (*found)(size_t base, const char *id) = *(void (**)(size_t, const char *))arg;
	char id[NAME_LEN];
	(void)dirfd;
	if (temp_id(name, id))
		found(SIZE_MAX, id);
}

void mh_image_leftovers(const struct mh_ctx *c, void (*found)(size_t base, const char *id))
{
	(void)mh_dir_each(c->images_fd, leftover, &found);
	(void)mh_dir_each(c->snaps_fd, leftover, &found);
}

/*
 * Images whose older release's raw mark (trusted.*) could not be given the
 * mark the helper reads (user.*) at start: the helper takes them as raw too,
 * so that it never formats their bytes. Only images the core marked raw can be
 * here (no process of the owner's uid can set a trusted.* mark), so the list
 * is as long as the raw volumes it could not mark, at most.
 */
static struct image_key {
	dev_t dev;
	ino_t ino;
} * unmarked;
static size_t nunmarked;

static void upgrade_mark(int dirfd, const char *name, void *arg)
{
	size_t *n = arg;
	size_t len = strlen(name);
	if (len < 5 || strcmp(name + len - 4, ".img") != 0)
		return;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	int rc =
	    fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? mh_image_mark_upgrade(fd) : 0;
	if (rc < 0) {
		/* An earlier owner may have made that so (its attributes fill the file's room). */
		log_kv(LOG_LVL_ERROR, "raw_mark_not_upgraded", "file", name, "error",
		       strerror(errno), "taken_as", "raw", NULL);
		struct image_key *more = realloc(unmarked, (nunmarked + 1) * sizeof(*unmarked));
		if (!more)
			log_fatal("out of memory");
		unmarked = more;
		unmarked[nunmarked++] = (struct image_key){st.st_dev, st.st_ino};
	}
	*n += rc > 0;
	if (fd >= 0)
		close(fd);
}

void mh_image_marks_upgrade(const struct mh_ctx *c)
{
	size_t n = 0;
	mh_dir_each(c->images_fd, upgrade_mark, &n);
	mh_dir_each(c->snaps_fd, upgrade_mark, &n);
	if (n > 0) {
		char count[24];
		snprintf(count, sizeof(count), "%zu", n);
		log_kv(LOG_LVL_INFO, "raw_marks_upgraded", "images", count, NULL);
	}
}

bool mh_image_taken_raw(int fd)
{
	struct stat st;
	if (mh_image_raw(fd))
		return true;
	if (nunmarked > 0 && fstat(fd, &st) != 0)
		return true; /* cannot tell: raw, never formatted */
	for (size_t i = 0; i < nunmarked; i++)
		if (st.st_dev == unmarked[i].dev && st.st_ino == unmarked[i].ino)
			return true;
	return false;
}

int mh_image_purge(const struct mh_ctx *c, const char *id, struct mh_res *r)
{
	const int dirs[] = {c->images_fd, c->snaps_fd};
	char tmp[NAME_LEN];
	struct stat st;
	image_name(id, tmp, sizeof(tmp), true);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (fstatat(dirs[i], tmp, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		mh_pause(c, "purge", id); /* tests: a temporary file about to be removed */
		if (unlinkat(dirs[i], tmp, 0) < 0 || fsync(dirs[i]) < 0)
			return mh_image_fail(r, errno, "remove a temporary file");
		log_kv(LOG_LVL_INFO, "temporary_removed", "file", tmp, NULL);
	}
	return 0;
}

/* ---- handlers ----------------------------------------------------------- */

int mh_answer_create(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                     struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_create *q = &req->u.create;
	uint64_t size;
	(void)a;
	if (mh_space_size_ok(c, q->size_bytes, &size, r) < 0)
		return -1;
	return mh_image_create(c, q->volume_id, size, &ans->u.size_ans.size_bytes, r);
}

int mh_answer_delete(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                     struct mh_audit *a, struct mh_res *r)
{
	(void)ans;
	(void)a;
	return mh_image_delete(c, req->u.del.volume_id, r);
}

static int refresh_by_core(const char *volume_id, struct mh_res *r)
{
	struct mh_msg q = {.type = MH_REQ_REFRESH}, ans;
	snprintf(q.u.del.volume_id, sizeof(q.u.del.volume_id), "%s", volume_id);
	return mh_core_ask(&q, &ans, r);
}

int mh_answer_resize(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                     struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_resize *q = &req->u.resize;
	struct stat st;
	int ret = -1;
	/* Below the smallest size there is nothing to grow: answered below as "never smaller". */
	uint64_t size = q->size_bytes;
	if (size >= pol_min_volume_bytes(c->pol) && mh_space_size_ok(c, size, &size, r) < 0)
		return -1;
	int fd = mh_image_open(c, q->volume_id, false, &st, r);
	if (fd < 0)
		return -1;
	if (size < (uint64_t)st.st_size) {
		mh_fail(r, MH_E_REFUSED, EINVAL, "image is %lld bytes; it is never shrunk",
		        (long long)st.st_size);
		goto out;
	}
	if (size == (uint64_t)st.st_size) {
		a->note = "already that size";
	} else if (mh_tools_size(fd, size, r) < 0) {
		goto out; /* grown by the runner, which needs no capability for it */
	}
	/* An attached image: its loop device(s) take the new size now (the core's, with one). */
	if (c->core ? refresh_by_core(req->u.resize.volume_id, r) < 0
	            : mh_resize_refresh_loops(&st, r) < 0)
		goto out;
	ans->u.size_ans.size_bytes = size;
	ret = 0;
out:
	close(fd);
	return ret;
}

int mh_image_mark_upgrade(int fd)
{
	if (fgetxattr(fd, MH_IMAGE_RAW_XATTR_OLD, NULL, 0) < 0)
		return errno == ENODATA || errno == ENOTSUP ? 0 : -1; /* else: cannot tell */
	if (fgetxattr(fd, MH_IMAGE_RAW_XATTR, NULL, 0) >= 0)
		return 0;
	return fsetxattr(fd, MH_IMAGE_RAW_XATTR, "1", 1, XATTR_CREATE) < 0 || fsync(fd) < 0 ? -1
	                                                                                    : 1;
}
