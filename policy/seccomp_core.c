/*
 * The seccomp table of sepcsi-core, the capable core: every row it needs to
 * mount, attach, mark and check, and nothing to start, signal or reach any
 * other process (no clone, fork, exec, wait, pidfd, socketpair). The helper's
 * table (seccomp_helper.c) is this one and the rows its orchestration needs
 * on top, so a reason here may name a use of the helper's. Read the reasons
 * as the review record; seccomp.c explains the form and how a table is
 * installed.
 *
 * Deliberately absent: everything of the helper's own rows, and execve;
 * socket, connect, bind and every other network call; mount(2) and
 * mount_setattr (only the fd-based API, with flags pinned); unshare, setns,
 * pivot_root, chroot (the view is built before this filter); kill, tgkill
 * (ENOSYS), ptrace, process_vm_*; bpf, perf_event_open; kexec_*;
 * init/finit/delete_module; keyctl, add_key; userfaultfd; io_uring_*;
 * personality; setuid & co; mknod of anything but a loop device.
 *
 * ioctl is filtered by request number.
 */
#include "sc_rules.h"
#include "pol_seccomp.h"

#include <fcntl.h>
#include <stdio.h>
#include <linux/loop.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>

/* <linux/fs.h> (which clashes with <sys/mount.h>), <linux/ext4.h>, <xfs/xfs_fs.h>, <linux/btrfs.h>.
 */
#define FIFREEZE              _IOWR('X', 119, int)
#define FITHAW                _IOWR('X', 120, int)
#define EXT4_IOC_RESIZE_FS    _IOW('f', 16, uint64_t)
#define XFS_IOC_FSGEOMETRY_V1 _IOC(_IOC_READ, 'X', 100, 112)  /* struct xfs_fsop_geom_v1 */
#define XFS_IOC_FSGROWFSDATA  _IOC(_IOC_WRITE, 'X', 110, 16)  /* struct xfs_growfs_data */
#define BTRFS_IOC_RESIZE      _IOC(_IOC_WRITE, 0x94, 3, 4096) /* struct btrfs_ioctl_vol_args */

static const struct sc_rule core_rules[] = {
    /* memory, threads, process basics */
    ALLOW("brk", "malloc"),
    ALLOW("mmap", "malloc"),
    ALLOW("munmap", "malloc"),
    ALLOW("mremap", "glibc's realloc of a block above malloc's mmap threshold (LIST of "
                    "thousands of entries; a tree copy's hard links)"),
    ALLOW("mprotect", "malloc arenas (code path)"),
    ALLOW("madvise", "malloc trimming (code path); MADV_DONTFORK on the main loop's buffers"),
    ALLOW("getrandom", "libc malloc"),
    ALLOW("sysinfo", "glibc's qsort asks the memory size before its first sort of more than 1 KiB "
                     "(LIST of many mounts, or images in the helper)"),
    ALLOW("futex", "libc locks; the core's deadline thread waits for the next deadline"),
    ALLOW("exit_group", NULL),
    ALLOW("rt_sigaction", "signal handlers"),
    ALLOW("rt_sigprocmask", "SIGTERM blocked outside the wait"),
    ALLOW("rt_sigreturn", "return from a signal handler"),
    ALLOW("restart_syscall",
          "the kernel resumes an interrupted sleep with it after SIGSTOP and SIGCONT"),
    ALLOW("getpid", NULL),
    ALLOW("gettid", "abort(): raise() names its own thread"),
    ALLOW("clock_gettime", "time stamps when the vDSO is unavailable (code path)"),
    ALLOW("clock_nanosleep",
          "a moment between tries (an unmount, a loop device taken meanwhile); the helper: the "
          "wait for a held loop device to go; test pause points"),

    /* files: the data dir, /dev/loop*, /proc/self/mountinfo, /sys (paths in code) */
    ALLOW("read", NULL),
    ALLOW("write", "log lines, the audit file"),
    ALLOW("lseek", "SEEK_DATA: does an image hold data; re-read mountinfo"),
    ALLOW("openat", "images, /dev/loop*, /proc/self/mountinfo, /sys"),
    ALLOW("openat2", "staging/target paths beneath their root, no symlinks"),
    ALLOW("close", NULL),
    ALLOW("newfstatat", "fstat/fstatat"),
    ALLOW("statx", "mount id and mount-root attribute of a path"),
    ALLOW_NR("statmount", 457,
             "what is mounted on an fd, and on each mount not seen before, by its mount id "
             "(kernel 6.8 and later; else mountinfo)"),
    ALLOW_NR("listmount", 458,
             "every mount's id: is a loop device mounted or bound anywhere, LIST's mounts "
             "(kernel 6.8 and later; else mountinfo)"),
    ALLOW("getdents64", "list /sys/block, the images, a directory that must be empty"),
    ALLOW("readlink", "libmount path canonicalisation"),
    ALLOW_EQ("fcntl", 1, F_GETFD, "fdopendir"),
    ALLOW_EQ("fcntl", 1, F_SETFD, "close-on-exec"),
    ALLOW_EQ("fcntl", 1, F_GETFL, "fdopendir"),
    ALLOW_EQ("fcntl", 1, F_SETFL,
             "an image opened O_NONBLOCK back to blocking (never F_SETOWN, F_SETSIG or "
             "F_SETLEASE: a signal to another process, a lease on its file)"),
    ALLOW("fstatfs", "CAPACITY of the data directory; STATS of a volume"),
    ALLOW("fchown", "MH_F_MOUNT_GROUP: a new volume root's group (CAP_CHOWN); a copied file"),
    ALLOW("fchmod", "MH_F_MOUNT_GROUP: g+rwx,setgid on a new volume root; a copied file"),
    ALLOW("fsync", "directories after a new or removed entry (images, snapshots, marks)"),
    ALLOW_EQ("renameat2", 4, RENAME_NOREPLACE,
             "a directory or file made and marked under a temporary name takes its own; a new "
             "image (the helper's); never replacing anything"),
    ALLOW("unlinkat", "delete an image; remove a target the helper made; a volume's tree"),
    ALLOW("mkdirat", "create a target directory beneath its root; a directory volume"),
    ALLOW_EQ("fsetxattr", 4, XATTR_CREATE,
             "mark a directory or file the helper made (trusted.sepcsi.owner), an image exposed "
             "raw (trusted.sepcsi.raw); never replace one"),
    ALLOW("fgetxattr", "read those marks before removing or mounting anything"),
    ALLOW_IF2("mknodat", 2, S_IFMT, S_IFBLK, 3, 0xfff00, 0x700, "a block device of major 7 (loop)",
              "its own /dev/loopN node, in its private /dev (CAP_MKNOD)"),
    ALLOW("fchdir", "unmount relative to a verified parent"),
    ALLOW("chdir", "back to / after an unmount"),

    /* the sockets: requests (fd 3), the supervisor (fd 4); the helper's tool runner */
    ALLOW("recvfrom", "one request datagram"),
    ALLOW("sendto", "one answer datagram"),
    ALLOW("sendmsg", "READY and PEER_VIOLATION to the supervisor; a job to the tool runner; a "
                     "file system's descriptor to the core's flusher"),
    ALLOW("poll", "wait on mkfs output; on workers at shutdown; a new worker finds its open fds"),
    ALLOW("ppoll", "wait on the channels and workers, SIGTERM/SIGINT unblocked only there"),

    /* signals: none to anyone */
    ENOSYS_("tgkill", "abort() cannot signal itself, so glibc ends the process with SIGSEGV, "
                      "which the supervisor restarts (a kill here would read as a violation "
                      "and stop the driver); no signal reaches another process"),

    /* mounts: the fd-based API, CAP_SYS_ADMIN; the flags are pinned where they are registers */
    ALLOW_EQ("fsopen", 1, FSOPEN_CLOEXEC, "new filesystem context (type checked by policy)"),
    ALLOW_EQ("fsconfig", 1, FSCONFIG_SET_FLAG, "superblock flags, allowed flag options"),
    ALLOW_EQ("fsconfig", 1, FSCONFIG_SET_STRING, "source device, allowed key=value options"),
    ALLOW_EQ("fsconfig", 1, FSCONFIG_CMD_CREATE, "create (or reach) the superblock"),
    ALLOW_IF("fsmount", 2, MOUNT_FORCED, MOUNT_FORCED, "attr has NOSUID and NODEV",
             "detached mount: the kernel refuses one without nosuid,nodev"),
    ALLOW_EQ("move_mount", 4, MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
             "attach a detached mount onto a resolved directory or file fd"),
    ALLOW_EQ("open_tree", 2, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH,
             "clone a loop device's node for a raw block bind (not recursive)"),
    ALLOW_EQ("umount2", 1, UMOUNT_NOFOLLOW, "unmount a verified mount; never lazy or forced"),

    /* ioctl, by request */
    IOCTL(LOOP_CTL_GET_FREE, "find a free loop device"),
    ALLOW_IF2("ioctl", 1, 0xffffffffULL, LOOP_CTL_ADD, 2, ~0ULL, ~0ULL, "LOOP_CTL_ADD, -1",
              "a new loop device, numbered by the kernel, when the free one is still bound"),
    IOCTL(LOOP_CONFIGURE, "attach an image (autoclear), or pin a raw block device"),
    IOCTL(LOOP_GET_STATUS64, "which image backs a loop device, which device a pin holds"),
    IOCTL(LOOP_CLR_FD, "detach a raw block volume's device, its pins first; if autoclear did not"),
    IOCTL(LOOP_SET_CAPACITY, "RESIZE, EXPAND: the device takes its image's new size"),
    IOCTL(BLKGETSIZE64, "device size (EXPAND, STATS)"),
    IOCTL(BLKROSET, "a new raw block device read-only at the block layer, or not (its "
                    "number keeps the state of its last use)"),
    IOCTL(BLKROGET, "is a loop device read-only at the block layer"),
    IOCTL(FIFREEZE, "FREEZE: a volume's own mounted file system, for a consistent copy"),
    IOCTL(FITHAW, "thaw it again, always; at start, whatever a dead helper left frozen"),
    IOCTL(EXT4_IOC_RESIZE_FS, "EXPAND: grow a mounted ext4 (CAP_SYS_RESOURCE)"),
    IOCTL(XFS_IOC_FSGEOMETRY_V1, "EXPAND: an xfs's block size and data blocks"),
    IOCTL(XFS_IOC_FSGROWFSDATA, "EXPAND: grow a mounted xfs"),
    IOCTL(BTRFS_IOC_RESIZE, "EXPAND: grow a mounted btrfs to its device (\"max\")"),
};

const struct pol_sc_table pol_sc_core = SC_TABLE("sepcsi-core", core_rules);

/*
 * The core's flusher (mounthelper/core/core_flush.c): a child without
 * capabilities that receives a file system's descriptor on its socket,
 * writes it back, closes it and answers. Nothing else: no open, no path,
 * no memory it did not have before its filter.
 */
static const struct sc_rule flusher_rules[] = {
    ALLOW_EQ("recvmsg", 0, POL_SC_FLUSH_FD, "a descriptor from the core, on its socket only"),
    ALLOW("syncfs", "write back the file system the core handed over"),
    ALLOW("close", "that descriptor, once written back"),
    ALLOW_EQ("sendto", 0, POL_SC_FLUSH_FD, "the answer, on its socket only"),
    ALLOW("exit_group", "its socket has ended"),
    ALLOW("rt_sigreturn", NULL),
    ALLOW("restart_syscall", "a wait resumed after SIGSTOP and SIGCONT"),
};

const struct pol_sc_table pol_sc_flusher = SC_TABLE("sepcsi-core flusher", flusher_rules);
