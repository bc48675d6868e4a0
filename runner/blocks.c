/*
 * RN_BLOCKS (proto/rn_job.h): one page of a snapshot's block metadata, for
 * the CSI SnapshotMetadata service. Runs in a child of the tools runner per
 * page, holding no capability, on two read-only snapshot images the helper
 * opened and checked: the target, and the base (the target again when only
 * its allocated ranges are asked for). It opens nothing itself.
 *
 * Allocated ranges come from SEEK_DATA and SEEK_HOLE: nothing is read.
 * Changed ranges are found window by window (WINDOW bytes of both images):
 *  - FIEMAP gives each image's extents; a 4 KiB block that both map to the
 *    same physical address holds the same bytes (a reflinked lineage: the
 *    target was cut from the volume that the base was cut from, and the
 *    volume's unchanged blocks still share their extents), and a block that
 *    is a hole or unwritten in both reads zeros in both: neither is read;
 *  - every other block is read from both, in READ_CHUNK pieces, and compared.
 * So a reflinked pair costs reads only where the volume was written between
 * the two cuts, and a copied pair (no shared extents) reads both images' data.
 * A page ends when RN_BLOCKS_MAX ranges are found, when RN_BLOCKS_READ_MAX
 * bytes of each image have been read, or when its windows have covered
 * RN_BLOCKS_SCAN_MAX bytes: its time and memory are bounded whatever the
 * volume's size, and the helper asks for the next page from
 * where this one stopped. Ranges are whole 4 KiB blocks, but never past the
 * target's end. Beyond the base's end (the volume grew between the cuts) the
 * base reads as zeros.
 *
 * The bytes read are a tenant's: they are compared, never parsed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner.h"

#define WINDOW     (8ULL << 20) /* bytes of both images classified at a time */
#define WBLOCKS    (WINDOW / RN_BLOCK)
#define NEXTENTS   128        /* extents per FIEMAP call */
#define READ_CHUNK (1U << 20) /* bytes of each image read at a time */

/* Add [off, off + len) to the page, clipped to the target; false once it is full. */
static bool add(struct rn_blocks *b, uint64_t off, uint64_t len)
{
	if (off >= b->size)
		return true;
	if (len > b->size - off)
		len = b->size - off;
	if (b->n > 0) {
		uint64_t *last = b->range[b->n - 1];
		if (off <= last[0] + last[1]) { /* adjacent (or overlapping, once aligned) */
			if (off + len > last[0] + last[1])
				last[1] = off + len - last[0];
			return true;
		}
	}
	if (b->n == RN_BLOCKS_MAX) {
		b->next = off;
		return false;
	}
	b->range[b->n][0] = off;
	b->range[b->n][1] = len;
	b->n++;
	return true;
}

static uint64_t down(uint64_t v)
{
	return v & ~(RN_BLOCK - 1);
}

static uint64_t up(uint64_t v)
{
	return (v + RN_BLOCK - 1) & ~(RN_BLOCK - 1);
}

/* The target's data ranges from pos on: 0 or an errno. */
static int allocated(int fd, int sock, struct rn_blocks *b, uint64_t pos)
{
	for (unsigned k = 0; pos < b->size; k++) {
		if (k % 4096 == 4095 && rn_hung_up(sock))
			return ECANCELED;
		off_t data = lseek(fd, (off_t)pos, SEEK_DATA);
		if (data < 0)
			return errno == ENXIO ? 0 : errno; /* ENXIO: only a hole is left */
		off_t hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			return errno;
		if (!add(b, down((uint64_t)data), up((uint64_t)hole) - down((uint64_t)data)))
			return 0;
		pos = (uint64_t)hole;
	}
	return 0;
}

/* What a block of one image is, as its extent map says. */
enum bstate { B_ZERO, B_MAPPED, B_UNKNOWN };

static const uint32_t opaque = FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC |
                               FIEMAP_EXTENT_ENCODED | FIEMAP_EXTENT_DATA_INLINE |
                               FIEMAP_EXTENT_DATA_TAIL | FIEMAP_EXTENT_NOT_ALIGNED;

/*
 * The state and physical address of each block of [lo, *hi) of fd; *hi
 * shrinks to where the map is complete when more extents remain than one call
 * returns. Without an extent map (EOPNOTSUPP) every block is B_UNKNOWN.
 */
static int classify(int fd, uint64_t lo, uint64_t *hi, uint8_t *state, uint64_t *phys)
{
	/* A struct fiemap and its NEXTENTS extents after it, 8-byte aligned. */
	static uint64_t room[(sizeof(struct fiemap) + NEXTENTS * sizeof(struct fiemap_extent)) / 8];
	struct fiemap *f = (struct fiemap *)room;
	const struct fiemap_extent *ext = f->fm_extents;
	uint64_t nb = (*hi - lo) / RN_BLOCK;
	memset(state, B_ZERO, nb);
	memset(room, 0, sizeof(room));
	f->fm_start = lo;
	f->fm_length = *hi - lo;
	f->fm_extent_count = NEXTENTS;
	if (ioctl(fd, FS_IOC_FIEMAP, f) < 0) {
		if (errno != EOPNOTSUPP && errno != ENOTTY)
			return errno;
		memset(state, B_UNKNOWN, nb);
		return 0;
	}
	uint32_t n = f->fm_mapped_extents;
	if (n == NEXTENTS && !(ext[n - 1].fe_flags & FIEMAP_EXTENT_LAST) &&
	    ext[n - 1].fe_logical + ext[n - 1].fe_length < *hi)
		*hi = up(ext[n - 1].fe_logical + ext[n - 1].fe_length);
	for (uint32_t i = 0; i < n; i++) {
		const struct fiemap_extent *x = &ext[i];
		uint64_t s = x->fe_logical < lo ? lo : x->fe_logical;
		uint64_t e = x->fe_logical + x->fe_length;
		if (e > *hi)
			e = *hi;
		for (uint64_t at = down(s); at < e; at += RN_BLOCK) {
			uint64_t k = (at - lo) / RN_BLOCK;
			if (x->fe_flags & FIEMAP_EXTENT_UNWRITTEN)
				continue; /* reads zeros */
			/* A block only partly in this extent is compared. */
			bool whole =
			    at >= x->fe_logical && at + RN_BLOCK <= x->fe_logical + x->fe_length;
			state[k] = (x->fe_flags & opaque) || !whole ? B_UNKNOWN : B_MAPPED;
			phys[k] = x->fe_physical + (at - x->fe_logical);
		}
	}
	return 0;
}

/* Read up to len bytes at off; what the file does not hold reads as zeros. */
static int read_zero(int fd, char *buf, size_t len, uint64_t off)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	memset(buf + got, 0, len - got);
	return 0;
}

struct delta {
	int target, base, sock;
	struct rn_blocks *b;
	uint64_t read; /* bytes read from each image in this page */
};

/* Compare blocks [lo, hi) of both images; 1 when the page ended, 0 to go on, or -errno. */
static int compare(struct delta *d, uint64_t lo, uint64_t hi)
{
	static char x[READ_CHUNK], y[READ_CHUNK];
	for (uint64_t at = lo; at < hi;) {
		if (d->read >= RN_BLOCKS_READ_MAX) {
			d->b->next = at;
			return 1;
		}
		if (rn_hung_up(d->sock))
			return -ECANCELED;
		size_t len = hi - at < READ_CHUNK ? (size_t)(hi - at) : READ_CHUNK;
		int err = read_zero(d->target, x, len, at);
		if (!err)
			err = read_zero(d->base, y, len, at);
		if (err)
			return -err;
		d->read += len;
		for (size_t k = 0; k < len; k += RN_BLOCK)
			if (memcmp(x + k, y + k, RN_BLOCK) != 0 && !add(d->b, at + k, RN_BLOCK))
				return 1;
		at += len;
	}
	return 0;
}

/* The blocks from pos on where the target differs from the base: 0 or an errno. */
static int delta(struct delta *d, uint64_t pos)
{
	static uint8_t st[WBLOCKS], sb[WBLOCKS];
	static uint64_t pt[WBLOCKS], pb[WBLOCKS];
	struct rn_blocks *b = d->b;
	uint64_t end = up(b->size), from = pos;
	while (pos < end) {
		if (pos - from >= RN_BLOCKS_SCAN_MAX) {
			b->next = pos; /* time enough for one page: the next goes on from here */
			return 0;
		}
		if (rn_hung_up(d->sock))
			return ECANCELED;
		uint64_t hi = end - pos < WINDOW ? end : pos + WINDOW, hb;
		int err = classify(d->target, pos, &hi, st, pt);
		hb = hi;
		if (!err)
			err = classify(d->base, pos, &hb, sb, pb);
		if (err)
			return err;
		hi = hb; /* where both maps are complete */
		/* Runs of blocks that must be read, between runs known equal. */
		uint64_t nb = (hi - pos) / RN_BLOCK, run = 0;
		for (uint64_t k = 0; k <= nb; k++) {
			bool same =
			    k < nb && ((st[k] == B_ZERO && sb[k] == B_ZERO) ||
			               (st[k] == B_MAPPED && sb[k] == B_MAPPED && pt[k] == pb[k]));
			bool last = k == nb;
			if (!same && !last)
				continue;
			int r = run < k ? compare(d, pos + run * RN_BLOCK, pos + k * RN_BLOCK) : 0;
			if (r != 0)
				return r < 0 ? -r : 0;
			run = k + 1;
		}
		pos = hi;
	}
	return 0;
}

void rn_blocks(const struct rn_job *j, const int fds[3])
{
	static struct rn_blocks b;
	struct stat st, sb;
	memset(&b, 0, sizeof(b));
	if (fstat(fds[1], &st) < 0 || fstat(fds[2], &sb) < 0 || !S_ISREG(st.st_mode) ||
	    !S_ISREG(sb.st_mode) || (fcntl(fds[1], F_GETFL) & O_ACCMODE) != O_RDONLY ||
	    (fcntl(fds[2], F_GETFL) & O_ACCMODE) != O_RDONLY || j->size > (uint64_t)st.st_size) {
		b.err = EINVAL; /* only read-only files, from within the target */
	} else {
		b.size = b.next = (uint64_t)st.st_size;
		uint64_t from = down(j->size);
		struct delta d = {.target = fds[1], .base = fds[2], .sock = fds[0], .b = &b};
		b.err = j->tool == RN_BLOCKS_ALLOCATED ? allocated(fds[1], fds[0], &b, from)
		        : j->tool == RN_BLOCKS_DELTA   ? delta(&d, from)
		                                       : EINVAL;
	}
	(void)!send(fds[0], &b, sizeof(b), MSG_NOSIGNAL);
}
