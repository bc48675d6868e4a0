/* openat2(2) with a retry, for the helper and its tree runner (openat2.c). */
#ifndef SEPCSI_OPENAT2_H
#define SEPCSI_OPENAT2_H

#include <linux/openat2.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * How every lookup inside a directory volume's base or tree is made: beneath
 * the directory it starts from, no symlink, no magic link, no mount crossed.
 */
#define RESOLVE_IN_TREE                                                                            \
	(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

/*
 * openat2 of rel beneath dirfd with these RESOLVE_* flags (O_CLOEXEC added),
 * retried on EAGAIN (a concurrent rename or mount raced the lookup) and
 * EINTR; the fd, or -1 with errno. Where openat2 answers ENOSYS, what
 * openat2_no_syscall does, if it is set (sepcsi-reader's filter: it opens one
 * name with openat, reader_openat2.c); else ENOSYS.
 */
int openat2_retry(int dirfd, const char *rel, int flags, mode_t mode, uint64_t resolve);
extern int (*openat2_no_syscall)(int dirfd, const char *rel, int flags, mode_t mode,
                                 uint64_t resolve);

#endif
