/*
 * The seccomp table of sepcsi-reader: the looks of the capable core's
 * orchestrating side that need no capability (STATS and LIST of mounts),
 * served by a process of uid 0 without any. Read the reasons as the review
 * record; seccomp.c explains the form and how a table is installed.
 *
 * It can open only for reading (openat's flags are pinned; openat2, whose
 * flags are behind a pointer, is ENOSYS: common/openat2.c then opens each
 * name with openat), write only its log, send and receive only on its
 * channel; Landlock (mounthelper/reader/reader_landlock.c) keeps what it may
 * read to /proc, /sys, /dev and the images. Deliberately absent: everything that changes a file, a
 * mount, a loop device or a process (no mount API, no mknod, no rename, no unlink, no fork, no
 * exec, no kill, no socket of its own).
 */
#include "sc_rules.h"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/mount.h>

#define READ_ONLY_OPEN (O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND)

static const struct sc_rule reader_rules[] = {
    ALLOW("brk", "malloc"),
    ALLOW("mmap", "malloc"),
    ALLOW("munmap", "malloc"),
    ALLOW("mremap", "realloc of the mount table LIST sorts"),
    ALLOW("mprotect", "malloc arenas (code path)"),
    ALLOW("madvise", "malloc trimming; a sanitizer build's shadow memory"),
    ALLOW("getrandom", "libc malloc"),
    ALLOW("sysinfo", "glibc's qsort asks the memory size before its first sort of more than 1 KiB "
                     "(LIST of many mounts)"),
    ALLOW("futex", "libc locks"),
    ALLOW("exit_group", NULL),
    ALLOW("rt_sigreturn", NULL),
    ALLOW("restart_syscall", "a wait resumed after SIGSTOP and SIGCONT"),
    ALLOW("getpid", NULL),
    ALLOW("gettid", "abort(): raise() names its own thread"),
    ALLOW("clock_gettime", "time stamps when the vDSO is unavailable (code path)"),
    ENOSYS_("tgkill", "abort() cannot signal itself; no signal reaches another process"),

    ALLOW("read", "sysfs, /proc/self/mountinfo"),
    ALLOW_EQ("write", 0, 2, "its log lines, on stderr only"),
    ALLOW("lseek", "re-read mountinfo"),
    ALLOW_IF("openat", 2, READ_ONLY_OPEN, O_RDONLY,
             "read-only: no write, create, truncate or append",
             "images, /proc/self/mountinfo, /sys"),
    ALLOW_IF("openat", 2, READ_ONLY_OPEN, O_ACCMODE,
             "access mode 3: neither read nor write, no create, truncate or append",
             "a loop device, to be asked (its ioctls are pinned below): none of its bytes"),
    ENOSYS_("openat2", "its flags are behind a pointer no filter reads: the walk beneath a root "
                       "opens each name with the pinned openat and O_NOFOLLOW instead "
                       "(common/openat2.c)"),
    ALLOW("close", NULL),
    ALLOW("newfstatat", "fstat/fstatat"),
    ALLOW("statx", "mount id and mount-root attribute of a path"),
    ALLOW("fstatfs", "STATS of a volume (statvfs)"),
    ALLOW_NR("statmount", 457,
             "what is mounted on an fd, by its mount id (kernel 6.8 and later; "
             "else mountinfo)"),
    ALLOW_NR("listmount", 458,
             "every mount's id, for LIST (kernel 6.8 and later; else "
             "mountinfo)"),
    ALLOW("getdents64", "list /sys/block"),
    ALLOW("readlink", "libmount path canonicalisation"),
    ALLOW_EQ("fcntl", 1, F_GETFD, "fdopendir"),
    ALLOW_EQ("fcntl", 1, F_SETFD, "close-on-exec"),
    ALLOW_EQ("fcntl", 1, F_GETFL, "fdopendir"),
    ALLOW_EQ("fcntl", 1, F_SETFL,
             "an image opened O_NONBLOCK back to blocking (never F_SETOWN, "
             "F_SETSIG or F_SETLEASE: a signal to another process, a lease "
             "on its file)"),
    IOCTL(LOOP_GET_STATUS64, "which image backs a loop device"),
    IOCTL(BLKGETSIZE64, "a raw block volume's size (STATS)"),
    IOCTL(BLKROGET, "is a loop device read-only at the block layer"),

    ALLOW_EQ("recvfrom", 0, 3, "one request, on its channel only"),
    ALLOW_EQ("sendto", 0, 3, "one answer, on its channel only"),
    ALLOW("poll", "an empty datagram or the end of its channel?"),
};

const struct pol_sc_table pol_sc_reader = SC_TABLE("sepcsi-reader", reader_rules);
