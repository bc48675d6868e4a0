/*
 * sepcsi-reader's walk without openat2 (its filter answers openat2 ENOSYS,
 * its flags being behind a pointer no filter reads): openat2_retry
 * (common/openat2.c) comes here, through openat2_no_syscall, which the
 * reader alone sets.
 */
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "openat2.h"

/*
 * The same as openat2 with RESOLVE_BENEATH, NO_SYMLINKS and NO_MAGICLINKS for
 * one name that is no "." or ".." and holds no '/': openat with O_NOFOLLOW.
 * A symlink is ELOOP however it is asked for (openat2 would return one asked
 * for with O_PATH|O_NOFOLLOW, which no caller here wants); its type is asked
 * of the inode the kernel holds (AT_STATX_DONT_SYNC: a stalled FUSE daemon is
 * never asked). Anything else, and a mount it would have to promise not to
 * cross (RESOLVE_NO_XDEV), stays ENOSYS.
 */
int reader_openat2_one_name(int dirfd, const char *rel, int flags, mode_t mode, uint64_t resolve)
{
	struct statx st;
	if ((resolve &
	     ~(uint64_t)(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)) != 0 ||
	    strchr(rel, '/') || !rel[0] || strcmp(rel, ".") == 0 || strcmp(rel, "..") == 0) {
		errno = ENOSYS;
		return -1;
	}
	int fd = openat(dirfd, rel, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	/* A symlink asked for as a directory: ELOOP, as openat2 answers, not ENOTDIR. */
	if (fd < 0 && errno == ENOTDIR && (flags & O_DIRECTORY) &&
	    statx(dirfd, rel, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE, &st) == 0 &&
	    S_ISLNK(st.stx_mode)) {
		errno = ELOOP;
		return -1;
	}
	if (fd >= 0 && (flags & O_PATH) &&
	    (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &st) < 0 ||
	     S_ISLNK(st.stx_mode))) {
		close(fd);
		errno = ELOOP;
		return -1;
	}
	return fd;
}
