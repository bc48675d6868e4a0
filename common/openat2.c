/*
 * openat2(2) with a retry (openat2.h). Runs in the helper, its core, its
 * reader and its tree runner, on whatever privilege they hold; it only opens.
 */
#include "openat2.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

int (*openat2_no_syscall)(int dirfd, const char *rel, int flags, mode_t mode, uint64_t resolve);

int openat2_retry(int dirfd, const char *rel, int flags, mode_t mode, uint64_t resolve)
{
	struct open_how how = {
	    .flags = (uint64_t)flags | O_CLOEXEC, .mode = mode, .resolve = resolve};
	for (int tries = 0; tries < 8; tries++) {
		long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if (errno == ENOSYS && openat2_no_syscall)
			return openat2_no_syscall(dirfd, rel, flags, mode, resolve);
		if (errno != EAGAIN && errno != EINTR)
			break;
	}
	return -1;
}
