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
#include <dirent.h>
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
 * A device renamed by its holder (LOOP_SET_STATUS64 needs only a descriptor
 * open for writing), still backed by one of our images: 1 with that image in
 * v and its volume id in vid, else 0. Only for a device backed by a file of the
 * images' file system that no volume id names, so the scan of the images is rare.
 */
static int renamed(const struct mh_ctx *c, int nr, struct mh_vol *v, char *vid)
{
	struct stat dir;
	dev_t dev;
	ino_t ino;
	char name[64];
	int fd, found = 0;
	DIR *d;
	if (mh_loop_status(nr, &v->loop, &dev, &ino, name, sizeof(name)) < 0 ||
	    fstat(c->images_fd, &dir) < 0 || dev != dir.st_dev ||
	    (fd = openat(c->images_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return 0;
	if (!(d = fdopendir(fd))) {
		mh_closep(&fd);
		return 0;
	}
	for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
		size_t len = strlen(e->d_name);
		found = len > 4 && len - 4 <= MH_ID_MAX &&
		        strcmp(e->d_name + len - 4, ".img") == 0 &&
		        snprintf(vid, MH_ID_MAX + 1, "%.*s", (int)(len - 4), e->d_name) > 0 &&
		        pol_volume_id_valid(vid) &&
		        fstatat(c->images_fd, e->d_name, &v->st, AT_SYMLINK_NOFOLLOW) == 0 &&
		        v->st.st_dev == dev && v->st.st_ino == ino;
	}
	closedir(d);
	return found;
}

/*
 * Is l, one of vid's devices, a raw block volume's? Told by what no holder
 * changes (a pod may set autoclear): its image's raw mark, which every writable
 * raw staging sets first, or read-only at the block layer alone, as only a raw
 * block device is attached (mh_loop_attach); never one a file system is
 * mounted from (a compromised orchestrator may set the mark), since nothing
 * would take that pin away once the volume is unstaged.
 */
static bool raw(const struct mh_ctx *c, const struct mh_loop *l, const char *vid)
{
	struct mh_mnt m;
	struct mh_res r = {0};
	int img = l->block_ro ? -1 : mh_image_open(c, vid, true, NULL, &r);
	bool marked = img >= 0 && mh_image_raw(img);
	mh_closep(&img);
	return (l->block_ro || marked) && mh_mount_find_loop(l, &m, &r) == 0;
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
	if (raw(s->c, &v.loop, vid) && mh_loop_pin(&v.loop, &r) < 0)
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
