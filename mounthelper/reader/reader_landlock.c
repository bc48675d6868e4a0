/*
 * What sepcsi-reader may do to files, with Landlock (reader.h says what).
 *
 * Why Landlock as well as seccomp: the reader is uid 0, and uid 0 without a
 * capability still passes the permission checks of every root-owned file.
 * Its seccomp filter pins openat to reading, but openat2 takes its flags
 * behind a pointer, which no filter can read; a reader taken over could
 * otherwise open kubelet's files for writing, truncate them or make new
 * ones, and read every root-readable file in its view (a pod's secrets in
 * kubelet's directories). Here every access right the kernel knows is
 * handled, and the only ones granted are listing directories and reading
 * files under /proc, /sys and the images directory, and ioctls on the devices
 * of /dev (from ABI 5): not even a directory of kubelet's is listed (a pod's
 * secrets' names), and no device is read. Its walks beneath kubelet's
 * directories open O_PATH, and it opens a loop device neither for reading nor
 * for writing (access mode 3, mh_loop.c): Landlock checks neither, and its
 * filter pins what such a descriptor can do (two ioctls).
 *
 * Runs once at start, after no_new_privs (its starter's), before its
 * seccomp filter (which has no landlock_* call). A kernel without Landlock
 * answers ENOSYS or EOPNOTSUPP: 0, and the caller says so.
 */
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/landlock.h>

/* Newer than Debian 12's headers: truncate (ABI 3), ioctl on devices (ABI 5). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

/* Every file system right of each ABI, by ABI: what the ruleset handles (denies unless granted). */
static uint64_t handled(int abi)
{
	uint64_t all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0 to 12 */
	if (abi >= 2)
		all |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		all |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return all;
}

/* Grant rights beneath the directory open on dir. */
static int grant_fd(int ruleset, int dir, uint64_t rights)
{
	struct landlock_path_beneath_attr rule = {.allowed_access = rights, .parent_fd = dir};
	return syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0
	           ? -1
	           : 0;
}

/* The same beneath the directory at path; a path missing is skipped. */
static int grant(int ruleset, const char *path, uint64_t rights)
{
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	int rc = grant_fd(ruleset, fd, rights), err = errno;
	close(fd);
	errno = err;
	return rc;
}

int reader_landlock(int images_fd)
{
	int abi =
	    (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 0)
		return errno == ENOSYS || errno == EOPNOTSUPP ? 0 : -1;
	const uint64_t all = handled(abi),
	               file = LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_READ_FILE,
	               dev = LANDLOCK_ACCESS_FS_IOCTL_DEV & all;
	struct landlock_ruleset_attr attr = {.handled_access_fs = all};
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (rs < 0)
		return -1;
	/* The images directory is the descriptor it was handed: no name is looked up in it,
	 * which its owner may have made unsearchable to uid 0 until the core's start puts its
	 * mode back (the reader can start first). */
	int ok = grant(rs, "/proc", file) == 0 && grant(rs, "/sys", file) == 0 &&
	         (!dev || grant(rs, "/dev", dev) == 0) && grant_fd(rs, images_fd, file) == 0 &&
	         syscall(SYS_landlock_restrict_self, rs, 0) == 0;
	int err = errno;
	close(rs);
	errno = err;
	return ok ? 1 : -1;
}
