/*
 * A file copied into a new, empty one: a reflink where the file system can,
 * else the source's data extents only (holes stay holes), in chunks between
 * which a requester that went away is noticed. Runs in both runners: the
 * tools runner copies images (SNAPSHOT, CLONE), the tree runner each regular
 * file of a tree. Nothing here is fatal: an errno is the answer.
 */
#include <errno.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner.h"

#define COPY_CHUNK (64 << 20) /* copy_file_range per call: a hang-up is noticed between */
#define BUF_CHUNK  (1 << 20)  /* the read/write fallback's buffer */

/* Copy [off, off + len) of src to the same offset of dst; 0 or an errno. */
static int copy_range(int src, int dst, off_t off, off_t len, int sock)
{
	off_t in = off, out = off, end = off + len;
	static char *buf;
	while (in < end) {
		ssize_t n;
		size_t want = (size_t)(end - in);
		if (rn_hung_up(sock))
			return ECANCELED;
		if (!buf) {
			n = copy_file_range(src, &in, dst, &out,
			                    want < COPY_CHUNK ? want : COPY_CHUNK, 0);
			if (n < 0 && (errno == EXDEV || errno == EOPNOTSUPP || errno == ENOSYS ||
			              errno == EINVAL)) {
				buf = malloc(BUF_CHUNK); /* the kernel will not: copy by hand */
				if (!buf)
					return ENOMEM;
				continue;
			}
		} else {
			n = pread(src, buf, want < BUF_CHUNK ? want : BUF_CHUNK, in);
			if (n > 0 && pwrite(dst, buf, (size_t)n, out) != n)
				n = -1;
			if (n > 0) {
				in += n;
				out += n;
			}
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errno : 0; /* 0: the source shrank */
	}
	return 0;
}

/* Fill the new, empty dst with src: a reflink if the file system can, else its data extents. */
int rn_copy_file(int src, int dst, int sock, uint32_t *reflinked)
{
	struct stat st;
	if (fstat(src, &st) < 0)
		return errno;
	if (ioctl(dst, FICLONE, src) == 0) {
		*reflinked = 1;
		return 0;
	}
	if (errno != EOPNOTSUPP && errno != EXDEV && errno != EINVAL && errno != ENOTTY)
		return errno;
	if (ftruncate(dst, st.st_size) < 0)
		return errno;
	for (off_t off = 0; off < st.st_size;) {
		off_t data = lseek(src, off, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break; /* only a hole is left */
		off_t hole = data < 0 ? -1 : lseek(src, data, SEEK_HOLE);
		if (data < 0 || hole < 0)
			return errno;
		if (hole > st.st_size)
			hole = st.st_size;
		int err = copy_range(src, dst, data, hole - data, sock);
		if (err)
			return err;
		off = hole;
	}
	return 0;
}
