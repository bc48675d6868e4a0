/*
 * The helper's records of an image's loop devices, on disk, for the helper
 * without a core (its workers are processes of their own; the core keeps its
 * records in memory: core/core_loops.c): <data-dir>/loops/<dev>-<ino> lists
 * the numbers of the loop devices the helper attached to the image with that
 * identity, so that finding them costs a look at each listed device instead
 * of one at every loop device of the machine.
 *
 * Safety argument. A record grants nothing: every number in it is checked
 * with LOOP_GET_STATUS64 against the image's (st_dev, st_ino) before it is
 * used, exactly as the scan checks every device; a wrong number is skipped.
 * It must only never miss a device, and:
 *  - a record is written when its image is made (no device can exist yet),
 *    or seeded by a full scan, and the records of the attached images are
 *    rebuilt from one full scan at start (mh_loop_records_rebuild; an image
 *    no device backs then has none, and its first look scans);
 *  - every attach goes through mh_loop_attach, which rewrites the record with
 *    the new number before LOOP_CONFIGURE;
 *  - a record is rewritten in place, whole (RECORD_BYTES at offset 0, so an
 *    image keeps one record file for its life and an attach makes no new
 *    file), and it carries a hash of its numbers: a reader that sees a write
 *    half done (or a file cut short by a crash) finds the hash wrong and
 *    treats it as none; and with none (or one it cannot read) it scans every
 *    device, as before records existed;
 *  - two requests on one volume never run at once, so no attach of an image
 *    races a look for its devices in a worker. A read-only request answered
 *    by the main loop (STATS) may read a record just before an attach in
 *    flight rewrites it: it then answers as of before that attach, and acts
 *    on nothing.
 * The directory is the helper's own (0700, root), out of rpcd's reach.
 */
#include "mh_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mh_common.h"
#include "mh_image_life.h"

#define RECORD_BYTES 192 /* "<hash> <nr> <nr> ...\n", zero-padded: always written whole */

static int records_dir = -1;

static void record_name(dev_t dev, ino_t ino, char *buf, size_t len)
{
	snprintf(buf, len, "%llx-%llx", (unsigned long long)dev, (unsigned long long)ino);
}

/* FNV-1a of the record's numbers, as written after the hash. */
static uint32_t record_hash(const char *text, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)text[i]) * 16777619u;
	return h;
}

/* The numbers recorded for (dev, ino): how many, or -1 when there is no usable record. */
int mh_loop_record_read(dev_t dev, ino_t ino, int nr[MH_LOOP_RECORD_MAX])
{
	char name[48], buf[RECORD_BYTES + 1];
	int count = 0;

	if (records_dir < 0)
		return -1;
	record_name(dev, ino, name, sizeof(name));
	int fd = openat(records_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, RECORD_BYTES);
	close(fd);
	if (n != RECORD_BYTES)
		return -1;
	buf[n] = '\0';
	char *end, *line_end = strchr(buf, '\n');
	unsigned long want = strtoul(buf, &end, 16);
	if (!line_end || end == buf || *end != ' ' ||
	    record_hash(end + 1, (size_t)(line_end - end)) != want)
		return -1; /* none, half written, or cut short */
	for (char *p = end + 1; *p != '\n';) {
		if (*p < '0' || *p > '9' || count == MH_LOOP_RECORD_MAX)
			return -1;
		long v = strtol(p, &end, 10);
		if (v > 1 << 20 || (*end != ' ' && *end != '\n'))
			return -1;
		nr[count++] = (int)v;
		p = *end == ' ' ? end + 1 : end;
	}
	return count;
}

static void record_drop(dev_t dev, ino_t ino)
{
	char name[48];
	record_name(dev, ino, name, sizeof(name));
	if (records_dir >= 0)
		unlinkat(records_dir, name, 0);
}

/* Make the record of (dev, ino) nr[0..count); on any failure there is none. */
static void record_write(dev_t dev, ino_t ino, const int *nr, int count)
{
	char name[48], nums[MH_LOOP_RECORD_MAX * 8 + 2], buf[RECORD_BYTES] = {0};
	size_t len = 0;

	if (records_dir < 0)
		return;
	record_name(dev, ino, name, sizeof(name));
	for (int i = 0; i < count; i++)
		len +=
		    (size_t)snprintf(nums + len, sizeof(nums) - len, "%s%d", i ? " " : "", nr[i]);
	nums[len++] = '\n';
	snprintf(buf, sizeof(buf), "%08x %.*s", record_hash(nums, len), (int)len, nums);
	int fd = openat(records_dir, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	/* A new descriptor writes at offset 0: the whole record, over the old one. */
	if (fd < 0 || write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		unlinkat(records_dir, name, 0);
	if (fd >= 0)
		close(fd);
}

/* Before loopN is attached to (dev, ino): the devices still backed by it, and N. */
void mh_loop_record_attach(dev_t dev, ino_t ino, int new_nr)
{
	int nr[MH_LOOP_RECORD_MAX], keep[MH_LOOP_RECORD_MAX], k = 0;
	int n = mh_loop_record_read(dev, ino, nr);

	if (n < 0) { /* none: one scan finds what is attached already */
		struct mh_loop found[MH_LOOP_RECORD_MAX];
		struct mh_res ignore = {0};
		n = mh_loop_scan(dev, ino, true, found, MH_LOOP_RECORD_MAX, &ignore);
		if (n < 0 || n == MH_LOOP_RECORD_MAX) {
			record_drop(dev, ino);
			return;
		}
		for (int i = 0; i < n; i++)
			nr[i] = found[i].nr;
	}
	for (int i = 0; i < n; i++) {
		/* A device that cannot be asked is kept: a record may hold too much, never too
		 * little. */
		if (nr[i] != new_nr && mh_loop_bound(nr[i], dev, ino, true, NULL) != 0)
			keep[k++] = nr[i];
	}
	if (k == MH_LOOP_RECORD_MAX) {
		record_drop(dev, ino);
		return;
	}
	keep[k++] = new_nr;
	record_write(dev, ino, keep, k);
}

void mh_loop_records_open(int dirfd)
{
	records_dir = dirfd;
}

void mh_loop_record_new(int image_fd)
{
	struct stat st;
	if (fstat(image_fd, &st) == 0)
		record_write(st.st_dev, st.st_ino, NULL, 0);
}

void mh_loop_record_forget(dev_t dev, ino_t ino)
{
	record_drop(dev, ino);
}

void mh_loop_record_none(dev_t dev, ino_t ino)
{
	record_write(dev, ino, NULL, 0);
}

/* ---- rebuilding the records at start ---- */

struct bound {
	int nr;
	dev_t rdev; /* the device's own number */
	dev_t dev;
	ino_t ino;
};

struct rebuild {
	struct bound *b;
	size_t n, cap;
	bool incomplete; /* a device could not be asked: no record is written */
};

static int note_bound(int nr, void *arg)
{
	struct rebuild *rb = arg;
	struct mh_loop l;
	dev_t dev;
	ino_t ino;
	char name[LO_NAME_SIZE];
	if (mh_loop_status(nr, &l, &dev, &ino, name, sizeof(name)) < 0) {
		/* Unbound, or gone; one that cannot be asked leaves every look to scan. */
		rb->incomplete |= errno != ENXIO && errno != ENOENT;
		return 0;
	}
	if (rb->n == rb->cap) {
		size_t cap = rb->cap ? 2 * rb->cap : 64;
		struct bound *nb = realloc(rb->b, cap * sizeof(*nb));
		if (!nb)
			abort();
		rb->b = nb;
		rb->cap = cap;
	}
	rb->b[rb->n++] = (struct bound){nr, l.rdev, dev, ino};
	return 0;
}

static void drop_record(int dirfd, const char *name, void *arg)
{
	(void)arg;
	unlinkat(dirfd, name, 0);
}

/* The record of (dev, ino), the bound devices backed by it, if any are (empty: if empty). */
static void record_key(const struct rebuild *rb, dev_t dev, ino_t ino, bool empty)
{
	int nr[MH_LOOP_RECORD_MAX], k = 0;
	for (size_t i = 0; i < rb->n; i++) {
		if (rb->b[i].dev != dev || rb->b[i].ino != ino)
			continue;
		if (k == MH_LOOP_RECORD_MAX)
			return; /* too many to record: looks scan */
		nr[k++] = rb->b[i].nr;
	}
	if (k > 0 || empty)
		record_write(dev, ino, nr, k);
}

/*
 * Each attached image's record: the bound devices backed by it; and each of
 * those devices' record of pins (mh_loop.c): the devices backed by its node,
 * so that no detach after a restart asks every read-only device. An image no
 * device backs gets none (its first look scans): the records never outnumber
 * the devices, whatever the images directory holds.
 */
static void record_image(int dirfd, const char *name, void *arg)
{
	const struct rebuild *rb = arg;
	struct stat st;
	size_t len = strlen(name);
	if (len < 5 || strcmp(name + len - 4, ".img") != 0 ||
	    fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return;
	record_key(rb, st.st_dev, st.st_ino, false);
	for (size_t i = 0; i < rb->n; i++)
		if (rb->b[i].dev == st.st_dev && rb->b[i].ino == st.st_ino && rb->b[i].rdev)
			record_key(rb, 0, (ino_t)rb->b[i].rdev, true);
}

void mh_loop_records_rebuild(int images_fd)
{
	struct rebuild rb = {0};
	struct mh_res ignore = {0};
	if (records_dir < 0)
		return;
	mh_dir_each(records_dir, drop_record, NULL);
	if (mh_loop_each(note_bound, &rb, &ignore) == 0 && !rb.incomplete)
		mh_dir_each(images_fd, record_image, &rb);
	free(rb.b);
}
