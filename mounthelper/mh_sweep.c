/*
 * The sweep, at start (and in the helper after a worker died), of every loop
 * device of ours (attached by us to one of our images, named by its volume
 * id: mh_loop_ours), except those of volumes an operation in flight holds:
 *  - the file system mounted from it is thawed: a process killed during a
 *    copy or a freeze leaves nothing frozen for good;
 *  - a raw block device of one of our images without its pin is pinned,
 *    whatever its name: a process killed inside a detach, between taking
 *    the pins away and pinning again a device a holder kept, would leave the
 *    holder its only opener (mh_loop.c);
 *  - a device that no mount or bind uses anywhere in our view is detached,
 *    its pins first: a raw block volume's (no autoclear, unless its holder
 *    set it), so that a process killed between the attach and the bind, or a
 *    bind gone with its mount, leaves nothing attached for good (a file
 *    system's clears itself, or a holder keeps it). A writable raw one's image
 *    gets the raw mark first if a version before the mark made it.
 *
 * Runs in the helper, as root under seccomp, and in the core before its
 * filter, with its capabilities. Nothing here is fatal.
 */
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "log.h"
#include "mh_common.h"
#include "mh_image.h"
#include "mh_ops.h"

struct sweep {
	const struct mh_ctx *c;
	bool (*held)(const char *id);
};

/*
 * A raw block staging's writable device (no autoclear) whose image has no mark
 * of its exposure: one a helper before this mark made. Marked now, so that it
 * is never mounted as a file system (mh_image.h).
 */
static void mark_raw(const struct mh_ctx *c, const char *vid)
{
	struct mh_res r = {0};
	int img = mh_image_open(c, vid, true, NULL, &r);
	if (img >= 0 && mh_image_mark_raw(img, false, &r) < 0)
		log_kv(LOG_LVL_WARN, "mark_raw_failed", "volume_id", vid, "reason", r.reason, NULL);
	mh_closep(&img);
}

void mh_thaw_loop(const struct mh_loop *l, const char *volume_id, const char *why)
{
	/* Safety: a detached mount of the file system on this very device, never a path. */
	int fd = mh_mount_fs_fd(l, &(struct mh_res){0});
	if (fd >= 0 && ioctl(fd, FITHAW, 0) == 0) /* EINVAL: it was not frozen */
		log_kv(LOG_LVL_WARN, "thawed", "volume_id", volume_id, "why", why, NULL);
	mh_closep(&fd);
}

/*
 * A device its holder renamed (LOOP_SET_STATUS64 needs only a descriptor open
 * for writing), still backed by one of our images: 1 with that image in v and
 * its volume id in vid, else 0. The image is named by the kernel's path of the
 * backing file (sysfs, which no holder changes), then proved by (st_dev,
 * st_ino): no look through the images directory.
 */
static int renamed(const struct mh_ctx *c, int nr, struct mh_vol *v, char *vid)
{
	char attr[64], backing[MH_PATH_MAX + 16], name[64];
	dev_t dev;
	ino_t ino;
	snprintf(attr, sizeof(attr), "/sys/block/loop%d/loop/backing_file", nr);
	if (mh_loop_status(nr, &v->loop, &dev, &ino, name, sizeof(name)) < 0 ||
	    mh_read_text(attr, backing, sizeof(backing)) < 0)
		return 0;
	backing[strcspn(backing, "\n")] = '\0';
	const char *slash = strrchr(backing, '/'), *base = slash ? slash + 1 : backing;
	size_t len = strlen(base);
	if (len <= 4 || len - 4 > MH_ID_MAX || strcmp(base + len - 4, ".img") != 0)
		return 0;
	snprintf(vid, MH_ID_MAX + 1, "%.*s", (int)(len - 4), base);
	return pol_volume_id_valid(vid) &&
	       fstatat(c->images_fd, base, &v->st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       v->st.st_dev == dev && v->st.st_ino == ino;
}

/*
 * Is v's device a raw block volume's? Told by what no holder changes (a pod
 * may set autoclear, or rename it): read-only at the block layer alone, as
 * only a raw block device is attached (mh_loop_attach), or writable with its
 * image's raw mark, which every writable raw staging sets first (read from
 * the very file the device is backed by, whatever else names it). Never one
 * read-only as the loop driver sees it (a file system's, or an administrator's
 * losetup -r), nor one a file system is mounted from (a compromised
 * orchestrator may set the mark): nothing would take such a pin away.
 */
static bool raw(const struct mh_ctx *c, const struct mh_vol *v, const char *vid)
{
	const struct mh_loop *l = &v->loop;
	struct mh_mnt m;
	bool marked = false;
	if ((l->lo_flags & LO_FLAGS_READ_ONLY) && !l->block_ro)
		return false;
	if (!l->block_ro) {
		char name[MH_IMAGE_NAME_MAX];
		struct stat st;
		mh_image_name(vid, name, sizeof(name));
		int img =
		    openat(c->images_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		marked = img >= 0 && fstat(img, &st) == 0 && st.st_dev == v->st.st_dev &&
		         st.st_ino == v->st.st_ino && mh_image_raw(img);
		mh_closep(&img);
	}
	return (l->block_ro || marked) && mh_mount_find_loop(l, &m, &(struct mh_res){0}) == 0;
}

/*
 * A device of one of our images: its file system thawed; a raw block one
 * pinned, whatever its name, then detached if it is the volume's and unused.
 */
static int sweep_loop(int nr, void *arg)
{
	const struct sweep *s = arg;
	struct mh_vol v;
	struct mh_res r = {0};
	char vid[MH_ID_MAX + 1];
	int ours = mh_loop_ours(s->c, nr, &v, vid);
	if ((ours != 1 && !renamed(s->c, nr, &v, vid)) || (s->held && s->held(vid)))
		return 0;
	if (ours == 1) {
		mh_thaw_loop(&v.loop, vid,
		             "frozen by a process that died during a copy or a freeze");
		/* A file system staging's device (autoclear) is mounted, or clears itself; a
		 * raw block one's holder may have set autoclear, which its pins hold off. */
		if (!(v.loop.lo_flags & (LO_FLAGS_AUTOCLEAR | LO_FLAGS_READ_ONLY)))
			mark_raw(s->c, vid);
	}
	if (raw(s->c, &v, vid) && mh_loop_pin(&v.loop, &r) < 0)
		log_kv(LOG_LVL_WARN, "pin_failed", "volume_id", vid, "reason", r.reason, NULL);
	r = (struct mh_res){0};
	if (ours == 1 && mh_detach_unused(&v, false, &r) < 0)
		log_kv(LOG_LVL_WARN, "sweep_failed", "volume_id", vid, "reason", r.reason, NULL);
	return 0;
}

void mh_sweep(const struct mh_ctx *c, bool (*held)(const char *id))
{
	struct sweep s = {.c = c, .held = held};
	(void)mh_loop_each(sweep_loop, &s, &(struct mh_res){0});
}
