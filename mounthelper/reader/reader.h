/* sepcsi-reader's parts: reader_main.c, reader_table.c, reader_landlock.c, reader_openat2.c and
 * reader_flush.c. */
#ifndef SEPCSI_READER_H
#define SEPCSI_READER_H

#include <stdint.h>
#include <sys/types.h>

/* Its descriptors, as its starter (mh_relay.c) or a test hands them over. */
#define READER_FD_PEER   3 /* its channel: STATS and LIST of mounts, one at a time */
#define READER_FD_IMAGES 4 /* <data-dir>/images, to match a loop device with its image */
#define READER_FD_POLICY 5 /* the policy, compiled, as the core reads it */
/* With --flusher: its socket to the core is POL_SC_FLUSH_FD (6), and nothing else. */

/*
 * Keep the calling process to reading, with Landlock: no file written,
 * truncated, made, removed, renamed or executed anywhere; files read and
 * directories listed only under /proc, /sys and beneath images_fd; ioctls
 * only on the devices of /dev (from Landlock ABI 5). 1 once in force, 0 when
 * the kernel has no Landlock (what it could do then: docs/helper.md), -1
 * with errno.
 */
int reader_landlock(int images_fd);

/*
 * One name beneath dirfd, opened as openat2 with these RESOLVE_* flags would
 * open it, without openat2 (reader_openat2.c): its openat2_no_syscall.
 */
int reader_openat2_one_name(int dirfd, const char *rel, int flags, mode_t mode, uint64_t resolve);

/* With --flusher, once its filter is in: write back what the core hands over (reader_flush.c). */
void __attribute__((noreturn)) reader_flush_serve(void);

#endif
