/*
 * Loop devices: attach an image, find the device backing an image, detach.
 *
 * Runs in the helper as root with CAP_SYS_ADMIN under seccomp (the ioctls used
 * here are the only loop ioctls the filter allows). Nothing here is fatal.
 *
 * Safety argument. The backing file is always an fd the helper opened itself
 * inside its own images directory (mh_image.c), never a path from rpcd, so a
 * loop device can only ever expose one of our images. Devices are attached
 * with LO_FLAGS_AUTOCLEAR and without LO_FLAGS_PARTSCAN: the kernel detaches
 * the device as soon as nothing holds it (no mount, no open fd), so a crash of
 * the helper at any point leaks no loop device, and a hostile partition table
 * inside an image does not become /dev/loopNpM (a pod holding its raw block
 * device open for writing can still turn scanning on, and rename the device:
 * docs/security.md, "Tenants and their bytes"). Raw block volumes are the one
 * exception: their device node is bind-mounted, which does not hold the device
 * open, so they are attached without autoclear, pinned (below: a pod holding
 * one is never its only opener), and detached explicitly by UNSTAGE (and a
 * STAGE after a crash re-uses such a device, see mh_block.c). A device is identified
 * by the backing file's (st_dev, st_ino) from LOOP_GET_STATUS64, not by a file name that could be
 * renamed or reused.
 *
 * Direct I/O: a device reads and writes its image with O_DIRECT wherever the
 * data directory's file system allows it at the device's 512-byte blocks
 * (forecast once, at the helper's start: mh_main.c), so that a pod's blocks
 * are cached once, in its own file system, not a second time as the image's
 * pages in the host's cache (where a pod's O_DIRECT would not be direct and
 * its memory limit would not count them). Elsewhere the device is buffered,
 * and the log says so.
 */
#include "mh_loop.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h> /* BLKGETSIZE64, BLKROSET, BLKROGET */
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mh_mount.h"

/*
 * LOOP_CTL_GET_FREE gives every attacher the same lowest free device; all but
 * one then find it taken (EBUSY) and ask again, after a pause that grows and
 * differs between workers, so that the losers do not spin on a device whose
 * configuration is still under way: about 30 ms in all at most.
 */
#define ATTACH_TRIES 48
#ifndef LOOP_MAJOR
#define LOOP_MAJOR 7 /* <linux/major.h> */
#endif               /* LOOP_CTL_GET_FREE can race another attacher */

static void loop_name(struct mh_loop *l, int nr)
{
	l->nr = nr;
	snprintf(l->path, sizeof(l->path), "/dev/loop%d", nr);
}

/* The device number of loopN, from sysfs ("7:N\n"); 0 if there is no such device. */
static dev_t loop_rdev(int nr)
{
	char p[64], buf[32], *end;
	snprintf(p, sizeof(p), "/sys/block/loop%d/dev", nr);
	if (mh_read_text(p, buf, sizeof(buf)) < 0)
		return 0;
	unsigned long maj = strtoul(buf, &end, 10), min = 0;
	if (*end == ':')
		min = strtoul(end + 1, &end, 10);
	if (maj != LOOP_MAJOR || *end != '\n' || min > 0xfffff)
		return 0;
	return makedev(maj, min);
}

/*
 * Open /dev/loopN. The helper's own /dev holds only the loop nodes it has
 * needed so far (mh_view.c): a missing one is made here, with the device
 * number the kernel gives loopN. Safety: mknodat is allowed by the seccomp
 * filter for block devices of the loop major only, and /dev is the helper's
 * private tmpfs, seen by no one else.
 */
bool mh_loop_make_nodes = true;

/*
 * How a device is opened only to be asked (LOOP_GET_STATUS64, BLKGETSIZE64):
 * neither for reading nor for writing (access mode 3), so that no byte of it
 * can be read through that descriptor, the reader's least of all.
 */
#define LOOP_LOOK (O_ACCMODE | O_NONBLOCK)

static int open_loop(int nr, int flags)
{
	char p[32];
	snprintf(p, sizeof(p), "/dev/loop%d", nr);
	int fd = open(p, flags | O_CLOEXEC);
	if (fd >= 0 || errno != ENOENT || !mh_loop_make_nodes)
		return fd; /* sepcsi-reader: a node its core never made is no device of its */
	dev_t rdev = loop_rdev(nr);
	if (rdev == 0) {
		errno = ENOENT; /* no such device: gone */
		return -1;
	}
	/* A node that cannot be made keeps its errno: a device never taken for gone. */
	if (mknodat(AT_FDCWD, p, S_IFBLK | 0600, rdev) < 0 && errno != EEXIST)
		return -1;
	return open(p, flags | O_CLOEXEC);
}

int mh_loop_node(const struct mh_loop *l, struct mh_res *r)
{
	int fd = open_loop(l->nr, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "open %s: %s", l->path, strerror(errno));
	return fd;
}

/*
 * Whether loopN's node is still bound, or anything mounted from it, anywhere
 * in our view, as far as a look tells: a bind whose root cannot be looked at
 * (only root, or a compromised peer with a tenant, can hide one) does not
 * hold every number up, or every attach would make a new device.
 */
static bool still_used(int nr)
{
	struct mh_loop l = {.rdev = loop_rdev(nr)};
	char where[MH_PATH_MAX + 1];
	loop_name(&l, nr);
	if (l.rdev == 0)
		return true; /* gone meanwhile */
	int used = mh_loop_in_use(&l, -1, where, sizeof(where), &(struct mh_res){0});
	return used == 1 || used < 0;
}

/* A device with no image bound, by sysfs alone: never a question to a foreign backing file. */
static int unused_and_free(int nr, void *arg)
{
	char p[64];
	struct stat st;
	snprintf(p, sizeof(p), "/sys/block/loop%d/loop", nr); /* there from attach to teardown */
	if (stat(p, &st) == 0 || errno != ENOENT || still_used(nr))
		return 0;
	*(int *)arg = nr;
	return 1;
}

/*
 * The number of a free loop device for an attach: LOOP_CTL_GET_FREE's, unless
 * its node is still bound somewhere in our view. A tenant given a raw block
 * device can tear it down under its node: LOOP_CLR_FD needs no capability,
 * only the open device, and as its only opener the pod has it gone at its
 * close. The number is then free while the pod's node, and the binds kubelet
 * handed it through, still lead to it: attached anew, it would give the pod
 * the next volume's image. Such a number is never attached again while a bind
 * of it is left (the rule UNSTAGE keeps for its own detach: mh_common.c);
 * another free one bound nowhere is, else a new device, the kernel's next
 * unused number (LOOP_CTL_ADD). -1 with errno.
 */
static int free_number(int ctl)
{
	int nr = ioctl(ctl, LOOP_CTL_GET_FREE), other = -1;
	if (nr < 0 || !still_used(nr))
		return nr;
	char n[16];
	snprintf(n, sizeof(n), "%d", nr);
	log_kv(LOG_LVL_WARN, "loop_number_still_bound", "loop", n, "then",
	       "another number: a tenant may have detached its raw block device under its node",
	       NULL);
	if (mh_loop_each(unused_and_free, &other, &(struct mh_res){0}) == 1)
		return other;
	return ioctl(ctl, LOOP_CTL_ADD, -1L);
}

/*
 * Bind cfg's backing file, (dev, ino) as mh_loop_status names it, to a free
 * loop device, read-only at the block layer if block_ro, its loop record
 * written first. The new device's descriptor, or -1 with r.
 */
static int configure(struct loop_config *cfg, dev_t dev, ino_t ino, int block_ro,
                     const char **buffered, struct mh_loop *out, struct mh_res *r)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return mh_fail(r, MH_E_FAILED, errno, "cannot open /dev/loop-control: %s",
		               strerror(errno));
	int err = 0;
	for (int tries = 0; tries < ATTACH_TRIES; tries++) {
		int nr = free_number(ctl);
		if (nr < 0) {
			err = errno;
			break;
		}
		loop_name(out, nr);
		/* Opened read-only, the kernel also forces the loop read-only. */
		int lfd =
		    open_loop(nr, (cfg->info.lo_flags & LO_FLAGS_READ_ONLY) ? O_RDONLY : O_RDWR);
		if (lfd < 0) {
			err = errno;
			if (err == ENOENT || err == ENXIO)
				continue; /* removed under us */
			break;
		}
		mh_loop_record_attach(dev, ino, nr); /* before: never missed */
		int rc = ioctl(lfd, LOOP_CONFIGURE, cfg);
		if (rc < 0 && errno == EINVAL && (cfg->info.lo_flags & LO_FLAGS_DIRECT_IO)) {
			*buffered = "the kernel refused direct I/O for it";
			cfg->info.lo_flags &= ~(uint32_t)LO_FLAGS_DIRECT_IO;
			rc = ioctl(lfd, LOOP_CONFIGURE, cfg);
		}
		if (rc == 0) {
			struct loop_info64 now;
			struct stat st;
			/* Set either way: a number keeps it across a detach. */
			if (fstat(lfd, &st) == 0 && S_ISBLK(st.st_mode) &&
			    ioctl(lfd, BLKROSET, &block_ro) == 0 &&
			    ioctl(lfd, LOOP_GET_STATUS64, &now) == 0) {
				out->rdev = st.st_rdev;
				out->lo_flags = now.lo_flags;
				close(ctl);
				return lfd;
			}
			err = EIO;
			ioctl(lfd, LOOP_CLR_FD, 0);
			mh_closep(&lfd);
			break;
		}
		err = errno;
		mh_closep(&lfd);
		if (err != EBUSY)
			break; /* EBUSY: someone took this device first; ask for another */
		struct timespec pause = {0, (long)(100 + tries * 20 + getpid() % 97) * 1000};
		nanosleep(&pause, NULL);
	}
	close(ctl);
	if (!err)
		err = EBUSY; /* every try lost the race */
	return mh_fail(r, MH_E_FAILED, err, "cannot attach a loop device: %s", strerror(err));
}

/*
 * The pins of a raw block device: loop devices of the helper's (or the
 * core's) own, read-only, named PIN_NAME, each backed by that device. A pod
 * holding its raw block device open may detach it (LOOP_CLR_FD needs no
 * capability); as its only opener it would have the device torn down at its
 * close, and could then bind the number to a file of its own (LOOP_SET_FD:
 * one on a FUSE file system whose daemon never answers would hold every status
 * question to that number). A pin holds the device open for as long as it is
 * attached, whoever else closes it: a pod's LOOP_CLR_FD then only marks it
 * autoclear, and a bound device takes no new backing file. A pin lives in
 * the kernel, so a restart of its maker loses none. No one else holds a node
 * of a pin. Attached with the device (mh_loop_attach), detached just before
 * it (clear), pinned again if a holder keeps it then.
 *
 * Found by the loop records: a device backed by a device node is named by that
 * node's number, (0, rdev) (mh_loop_status), so a raw device's pins are the
 * record of (0, its number), asked their status only there (their backing file
 * is a node: the question waits on no file system). Without a record (the
 * helper that mounts by itself keeps none for pins across its restarts) every
 * read-only device is asked, as every image's first look there asks every
 * device. With drop, each pin of rdev is detached; the number found, either way.
 */
#define PIN_NAME "sepcsi-pin"

struct pins {
	dev_t rdev;
	bool drop;
	int found;
};

static int pin_one(int nr, void *arg)
{
	struct pins *p = arg;
	struct loop_info64 info;
	char ro[8], sys[64];
	/* A pin is read-only: no other device is asked (a status asks its backing file),
	 * which is what keeps the look without a record from most of the machine's. */
	snprintf(sys, sizeof(sys), "/sys/block/loop%d/ro", nr);
	if (mh_read_text(sys, ro, sizeof(ro)) < 0 || ro[0] != '1')
		return 0;
	int fd = open_loop(nr, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return 0;
	if (ioctl(fd, LOOP_GET_STATUS64, &info) == 0 && info.lo_rdevice == (uint64_t)p->rdev &&
	    (info.lo_flags & (LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR)) == LO_FLAGS_READ_ONLY &&
	    strncmp((const char *)info.lo_file_name, PIN_NAME, sizeof(info.lo_file_name)) == 0) {
		p->found++;
		/* Safety: only a pin (named so, read-only, backed by the device being detached). */
		if (p->drop)
			ioctl(fd, LOOP_CLR_FD, 0); /* with no other opener, gone at the close */
	}
	close(fd);
	return 0;
}

static int pins(dev_t rdev, bool drop)
{
	struct pins p = {.rdev = rdev, .drop = drop};
	int nr[MH_LOOP_RECORD_MAX], n = mh_loop_record_read(0, (ino_t)rdev, nr);
	if (n < 0)
		return mh_loop_each(pin_one, &p, &(struct mh_res){0}) < 0 ? -1 : p.found;
	for (int i = 0; i < n; i++)
		pin_one(nr[i], &p);
	if (drop) /* none left, nor the other devices a start's look recorded there */
		mh_loop_record_none(0, (ino_t)rdev);
	return p.found;
}

/* A new pin of l (mh_loop_pin: unless it has one). */
static int pin(const struct mh_loop *l, struct mh_res *r)
{
	struct loop_config cfg = {.info.lo_flags = LO_FLAGS_READ_ONLY};
	struct mh_loop pin;
	struct stat st;
	const char *buffered = NULL;
	int node = open_loop(l->nr, O_RDONLY | O_NONBLOCK);
	if (node < 0 || fstat(node, &st) < 0 || st.st_rdev != l->rdev) {
		mh_closep(&node);
		return mh_fail(r, MH_E_FAILED, ENXIO, "%s is gone", l->path);
	}
	cfg.fd = (uint32_t)node;
	snprintf((char *)cfg.info.lo_file_name, sizeof(cfg.info.lo_file_name), "%s", PIN_NAME);
	int pfd = configure(&cfg, 0, (ino_t)l->rdev, 0, &buffered, &pin, r);
	close(node);
	if (pfd < 0)
		return -1;
	close(pfd); /* no autoclear: it stays, holding the device */
	return 0;
}

int mh_loop_pin(const struct mh_loop *l, struct mh_res *r)
{
	int n = pins(l->rdev, false);
	if (n != 0)
		return n < 0 ? mh_fail(r, MH_E_FAILED, EIO, "cannot look for %s's pin", l->path)
		             : 0;
	return pin(l, r);
}

int mh_loop_attach(int image_fd, const char *name, bool readonly, bool autoclear, bool direct,
                   struct mh_loop *out, struct mh_res *r)
{
	struct loop_config cfg;
	/*
	 * Safety: a device a pod may hold (a raw block one: no autoclear) is never
	 * read-only as the loop driver sees it, which would let its holder give it
	 * another backing file (LOOP_CHANGE_FD needs no capability), one whose file
	 * system never answers the status questions every look asks; read-only, it
	 * is so at the block layer instead (BLKROSET), which every write path obeys
	 * and only CAP_SYS_ADMIN changes. It is pinned (above).
	 */
	const bool lo_ro = readonly && autoclear;
	memset(&cfg, 0, sizeof(cfg));
	cfg.fd = (uint32_t)image_fd;
	cfg.info.lo_flags = (autoclear ? LO_FLAGS_AUTOCLEAR : 0) | (lo_ro ? LO_FLAGS_READ_ONLY : 0);
	snprintf((char *)cfg.info.lo_file_name, sizeof(cfg.info.lo_file_name), "%s", name);
	const char *buffered = direct ? NULL : "the data directory takes no direct I/O (at start)";
	if (direct) {
		cfg.info.lo_flags |= LO_FLAGS_DIRECT_IO;
		cfg.block_size = 512;
	}

	struct stat ist;
	if (fstat(image_fd, &ist) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "stat image: %s", strerror(errno));
	int lfd =
	    configure(&cfg, ist.st_dev, ist.st_ino, readonly && !autoclear, &buffered, out, r);
	if (lfd < 0)
		return -1;
	/* A new device has no pin: what a record of its number says is of another's. */
	if (!autoclear)
		mh_loop_record_none(0, (ino_t)out->rdev);
	if (!autoclear && pin(out, r) < 0) {
		ioctl(lfd, LOOP_CLR_FD, 0);
		close(lfd);
		return -1;
	}
	out->lo_flags |= readonly ? LO_FLAGS_READ_ONLY : 0; /* read-only either way, it says so */
	if (!(out->lo_flags & LO_FLAGS_DIRECT_IO))
		log_kv(LOG_LVL_INFO, "loop_buffered", "device", out->path, "volume_id", name, "why",
		       buffered ? buffered : "the kernel kept it buffered", NULL);
	return lfd;
}

int mh_loop_status(int nr, struct mh_loop *out, dev_t *dev, ino_t *ino, char *name, size_t len)
{
	struct loop_info64 info;
	struct stat st;
	loop_name(out, nr);
	int fd = open_loop(nr, LOOP_LOOK), ret = -1, block_ro = 0;
	if (fd < 0)
		return -1; /* ENOENT, ENXIO: no such device */
	if (ioctl(fd, LOOP_GET_STATUS64, &info) == 0 && ioctl(fd, BLKROGET, &block_ro) == 0 &&
	    fstat(fd, &st) == 0) {
		out->rdev = st.st_rdev;
		/* Read-only at the block layer (a raw block one, mh_loop_attach) is read-only. */
		out->lo_flags = info.lo_flags | (block_ro ? LO_FLAGS_READ_ONLY : 0);
		out->block_ro = block_ro && !(info.lo_flags & LO_FLAGS_READ_ONLY);
		/* A device node backing it (a pin) is named by its number: no image is (0, x). */
		*dev = info.lo_rdevice ? 0 : (dev_t)info.lo_device;
		*ino = info.lo_rdevice ? (ino_t)info.lo_rdevice : (ino_t)info.lo_inode;
		snprintf(name, len, "%.*s", (int)sizeof(info.lo_file_name),
		         (const char *)info.lo_file_name);
		ret = 0;
	} else if (errno == ENOENT) {
		errno = EIO; /* the backing file's getattr: a device that is there, not asked */
	}
	close(fd);
	return ret;
}

/*
 * A device someone else attached to one of our images (losetup names it by its
 * path), or whose name its holder changed (LOOP_SET_STATUS64 needs only a
 * descriptor open for writing: a pod's own raw block device), is never taken
 * for the volume's: not unmounted, detached, grown or bound; it still holds
 * the image (any_name), so the image is not removed or formatted under it.
 */
int mh_loop_bound(int nr, dev_t dev, ino_t ino, bool any_name, struct mh_loop *out)
{
	struct mh_loop l;
	dev_t d;
	ino_t i;
	char name[MH_ID_MAX + 1];
	if (mh_loop_status(nr, &l, &d, &i, name, sizeof(name)) < 0)
		return (errno == ENOENT || errno == ENXIO) ? 0 : -1; /* ENXIO: not bound */
	/* Ours only: named by a volume id when attached (mh_loop_attach); not root's. */
	if (d != dev || i != ino || !(any_name || pol_volume_id_valid(name)))
		return 0;
	if (out)
		*out = l;
	return 1;
}

int mh_loop_nr_of(const char *s, const char *prefix)
{
	size_t len = strlen(prefix);
	char again[32];
	if (!s || strncmp(s, prefix, len) != 0 || s[len] < '0' || s[len] > '9')
		return -1;
	long nr = strtol(s + len, NULL, 10);
	if (nr < 0 || nr > 1 << 20)
		return -1;
	snprintf(again, sizeof(again), "%s%ld", prefix, nr);
	return strcmp(again, s) == 0 ? (int)nr : -1;
}

int mh_loop_each(int (*fn)(int nr, void *arg), void *arg, struct mh_res *r)
{
	DIR *d = opendir("/sys/block");
	if (!d)
		return mh_fail(r, MH_E_FAILED, errno, "cannot list /sys/block: %s",
		               strerror(errno));
	struct dirent *e;
	int ret = 0;
	while (ret == 0 && (e = readdir(d)) != NULL) {
		int nr = mh_loop_nr_of(e->d_name, "loop");
		if (nr >= 0)
			ret = fn(nr, arg);
	}
	closedir(d);
	return ret;
}

/* A look for the devices bound to (dev, ino), one number at a time (find_one). */
struct scan {
	dev_t dev;
	ino_t ino;
	bool any_name;
	struct mh_loop *out;
	size_t max;
	int found;
	struct mh_res *r;
};

static int find_one(int nr, void *arg)
{
	struct scan *f = arg;
	int m = mh_loop_bound(nr, f->dev, f->ino, f->any_name, f->out ? &f->out[f->found] : NULL);
	if (m < 0) {
		f->found = mh_fail(f->r, MH_E_FAILED, errno, "cannot query loop%d: %s", nr,
		                   strerror(errno));
		return 1;
	}
	return m == 1 && (size_t)++f->found == f->max;
}

int mh_loop_scan(dev_t dev, ino_t ino, bool any_name, struct mh_loop *out, size_t max,
                 struct mh_res *r)
{
	struct scan f = {
	    .dev = dev, .ino = ino, .any_name = any_name, .out = out, .max = max, .r = r};
	return mh_loop_each(find_one, &f, r) < 0 ? -1 : f.found;
}

/* See mh_loop.h: by the image's record or, without one, a scan. */
int mh_loop_find(dev_t dev, ino_t ino, bool any_name, struct mh_loop *out, size_t max,
                 struct mh_res *r)
{
	struct scan f = {
	    .dev = dev, .ino = ino, .any_name = any_name, .out = out, .max = max, .r = r};
	int nr[MH_LOOP_RECORD_MAX], n = mh_loop_record_read(dev, ino, nr);
	if (n < 0)
		return mh_loop_scan(dev, ino, any_name, out, max, r);
	for (int i = 0; i < n; i++)
		if (find_one(nr[i], &f))
			break; /* max found, or a device that cannot be asked (f.found -1) */
	return f.found;
}

int mh_loop_list(dev_t dev, ino_t ino, struct mh_loop **out, struct mh_res *r)
{
	*out = NULL;
	for (size_t cap = 8;; cap *= 2) {
		struct mh_loop *v = realloc(*out, cap * sizeof(*v));
		if (!v)
			abort(); /* allocation failure aborts (docs/error-handling.md) */
		*out = v;
		int n = mh_loop_find(dev, ino, false, v, cap, r);
		if (n < 0 || (size_t)n < cap)
			return n; /* every device: fewer than there was room for */
	}
}

/*
 * LOOP_CLR_FD of l, on the descriptor that proved it still the same device
 * bound to (dev, ino) (an open device is neither torn down nor bound anew):
 * detached at once, or, with another holder, only marked autoclear.
 */
static void clear(const struct mh_loop *l, dev_t dev, ino_t ino)
{
	struct loop_info64 info;
	struct stat st;
	int fd = open_loop(l->nr, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return;
	if (ioctl(fd, LOOP_GET_STATUS64, &info) == 0 && fstat(fd, &st) == 0) {
		char name[sizeof(info.lo_file_name) + 1];
		snprintf(name, sizeof(name), "%.*s", (int)sizeof(info.lo_file_name),
		         (const char *)info.lo_file_name);
		/* Ours as mh_loop_bound() tells: (dev, ino), the device itself, named by a volume
		 * id. */
		bool ours = st.st_rdev == l->rdev && info.lo_device == (uint64_t)dev &&
		            info.lo_inode == (uint64_t)ino && pol_volume_id_valid(name);
		/* Its pins first (a raw block device's, autoclear or not: a holder may set
		 * that), else they would hold it for good; this descriptor holds it meanwhile. */
		int pinned = ours ? pins(l->rdev, true) : 0;
		if (ours && ioctl(fd, LOOP_CLR_FD, 0) == 0 &&
		    ioctl(fd, LOOP_GET_STATUS64, &info) < 0 && errno == ENXIO)
			/* Its only opener: no one opens it again before its end at the close
			 * below, so its number is left writable for whoever attaches it next
			 * (the kernel keeps a read-only state across a detach); never while a
			 * holder could write through it (mh_loop_attach). */
			ioctl(fd, BLKROSET, &(int){0});
		else if (pinned > 0)
			/* Held elsewhere: pinned again before this close, so that the holder is
			 * never its only opener; the next detach tries again. */
			mh_loop_pin(l, &(struct mh_res){0});
	}
	close(fd);
}

void mh_loop_writable_if_unbound(int nr)
{
	char dev[48], bound[64];
	struct stat st;
	int ro = 0, fd = -1;
	snprintf(dev, sizeof(dev), "/sys/block/loop%d", nr);
	snprintf(bound, sizeof(bound), "%s/loop", dev); /* there while bound */
	/* Safety: changes only a number sysfs shows bound to nothing, opened only then. */
	if (stat(dev, &st) == 0 && stat(bound, &st) < 0 && errno == ENOENT &&
	    (fd = open_loop(nr, LOOP_LOOK)) >= 0 && ioctl(fd, BLKROGET, &ro) == 0 && ro &&
	    ioctl(fd, BLKROSET, &(int){0}) < 0)
		log_kv(LOG_LVL_WARN, "loop_left_read_only", "device", dev, "error", strerror(errno),
		       NULL);
	mh_closep(&fd);
}

int mh_loop_nr_of_rdev(dev_t rdev)
{
	char p[64], buf[256], *name, *eol;
	if (major(rdev) != LOOP_MAJOR)
		return -1;
	/* The kernel's name for the device number: DEVNAME=loopN in its uevent file. */
	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/uevent", major(rdev), minor(rdev));
	if (mh_read_text(p, buf, sizeof(buf)) < 0)
		return -1; /* no such device */
	if (!(name = strstr(buf, "DEVNAME=")) || !(eol = strchr(name, '\n')))
		return -1;
	*eol = '\0';
	return mh_loop_nr_of(name, "DEVNAME=loop");
}

int mh_loop_by_rdev(dev_t rdev, dev_t dev, ino_t ino, struct mh_loop *out, struct mh_res *r)
{
	int nr = mh_loop_nr_of_rdev(rdev);
	if (nr < 0)
		return 0;
	int m = mh_loop_bound(nr, dev, ino, false, out);
	if (m < 0)
		return mh_fail(r, MH_E_FAILED, errno, "cannot query loop%d: %s", nr,
		               strerror(errno));
	return m == 1 && out->rdev == rdev;
}

/* The ioctl req (named what) with arg on l, opened as flags: 0, or -1 with r. */
static int loop_ioctl(const struct mh_loop *l, int flags, unsigned long req, const char *what,
                      void *arg, struct mh_res *r)
{
	int fd = open_loop(l->nr, flags), ret = 0;
	if (fd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "open %s: %s", l->path, strerror(errno));
	if (ioctl(fd, req, arg) < 0)
		ret = mh_fail(r, MH_E_FAILED, errno, "%s %s: %s", what, l->path, strerror(errno));
	close(fd);
	return ret;
}

int mh_loop_set_capacity(const struct mh_loop *l, struct mh_res *r)
{
	/* Safety: only re-reads the size of the file that already backs our device. */
	return loop_ioctl(l, O_RDONLY | O_NONBLOCK, LOOP_SET_CAPACITY, "LOOP_SET_CAPACITY", NULL,
	                  r);
}

int mh_loop_size(const struct mh_loop *l, uint64_t *size, struct mh_res *r)
{
	return loop_ioctl(l, LOOP_LOOK, BLKGETSIZE64, "BLKGETSIZE64", size, r);
}

int mh_loop_detach(const struct mh_loop *l, dev_t dev, ino_t ino, struct mh_res *r)
{
	struct mh_loop now;
	clear(l, dev, ino); /* with no other opener, the kernel detaches it at once */
	int bound = mh_loop_by_rdev(l->rdev, dev, ino, &now, r);
	if (bound <= 0)
		return bound; /* gone (0), or not asked (-1) */
	/* A holder keeps it: it goes when that holder closes it (EALREADY: mh_relay.c waits). */
	return mh_fail(r, MH_E_BUSY, EALREADY,
	               "%s is still attached (held open elsewhere; it goes when it is closed)",
	               l->path);
}
