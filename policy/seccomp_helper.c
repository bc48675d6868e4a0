/*
 * The seccomp table of sepcsi-mounthelper (and its workers), and that of the
 * tool runner and the mkfs tools it starts (mounthelper/mh_tools.c): the only
 * filters compiled into the helper. Read the reasons as the review record;
 * seccomp.c explains the form and how a table is installed.
 */
#include "sc_rules.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/quota.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <termios.h>

/* From <linux/fs.h>, which cannot be included together with <sys/mount.h> on glibc 2.36. */
/* <linux/fs.h> (which clashes with <sys/mount.h>), <linux/ext4.h>, <xfs/xfs_fs.h>, <linux/btrfs.h>.
 */
#define FIFREEZE              _IOWR('X', 119, int)
#define FITHAW                _IOWR('X', 120, int)
#define EXT4_IOC_RESIZE_FS    _IOW('f', 16, uint64_t)
#define XFS_IOC_FSGEOMETRY_V1 _IOC(_IOC_READ, 'X', 100, 112)  /* struct xfs_fsop_geom_v1 */
#define XFS_IOC_FSGROWFSDATA  _IOC(_IOC_WRITE, 'X', 110, 16)  /* struct xfs_growfs_data */
#define BTRFS_IOC_RESIZE      _IOC(_IOC_WRITE, 0x94, 3, 4096) /* struct btrfs_ioctl_vol_args */

#define FS_IOC_FSGETXATTR _IOC(_IOC_READ, 'X', 31, 28)  /* struct fsxattr */
#define FS_IOC_FSSETXATTR _IOC(_IOC_WRITE, 'X', 32, 28) /* struct fsxattr */

/*
 * Project quota commands (<sys/quota.h>; PRJQUOTA is <linux/quota.h>'s 2): an
 * unsigned int, so only the register's low 32 bits are compared.
 */
#define PRJ_QCMD(cmd) (((uint32_t)(cmd) << SUBCMDSHIFT) | 2u)
#define QUOTACTL(cmd, w)                                                                           \
	ALLOW_IF("quotactl_fd", 1, 0xffffffffULL, (uint64_t)PRJ_QCMD(cmd),                         \
	         "QCMD(" #cmd ", PRJQUOTA)", w)

#define MOUNT_FORCED ((uint64_t)(MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV))

/*
 * sepcsi-mounthelper and its workers (forked, same filter). Derived from
 * `strace -f` of the process tests (tests/unit/test_helper_*.c, which stage
 * ext4, xfs and btrfs); rows marked (code path) are reached by a helper path
 * the tests may not exercise. Regenerate with:
 *   SEPCSI_TEST_SECCOMP_LOG=1 SEPCSI_TEST_STRACE=/tmp/mh.strace test_helper_proc
 *
 * Deliberately absent: execve (the mkfs tools are started by the tool runner,
 * a separate process with its own filter, below); socket, connect, bind and
 * every other network call; mount(2) and mount_setattr (only the fd-based
 * API, with flags pinned: no remount, no MS_MOVE, no propagation or attribute
 * change of an existing mount); unshare, setns, pivot_root, chroot (the view
 * is built before this filter); kill and tgkill (its own workers are signalled
 * through pidfds); ptrace, process_vm_*; bpf, perf_event_open; kexec_*;
 * init/finit/delete_module; keyctl, add_key; userfaultfd; io_uring_*;
 * personality; setuid & co; mknod of anything but a loop device.
 *
 * ioctl is filtered by request number.
 */
static const struct sc_rule helper_rules[] = {
    /* memory, threads, process basics */
    ALLOW("brk", "malloc"),
    ALLOW("mmap", "malloc"),
    ALLOW("munmap", "malloc"),
    ALLOW("mremap", "glibc's realloc of a block above malloc's mmap threshold (LIST of "
                    "thousands of entries; a tree copy's hard links)"),
    ALLOW("mprotect", "malloc arenas (code path)"),
    ALLOW("madvise", "malloc trimming (code path); MADV_DONTFORK on the main loop's buffers"),
    ALLOW("set_robust_list", "fork"),
    ALLOW("rseq", "fork"),
    ALLOW("getrandom", "libc malloc"),
    ALLOW("futex", "libc locks"),
    ALLOW("exit_group", NULL),
    ALLOW("rt_sigaction", "signal handlers"),
    ALLOW("rt_sigprocmask", "fork; SIGTERM blocked outside the wait"),
    ALLOW("rt_sigreturn", "return from a signal handler"),
    ALLOW("restart_syscall",
          "the kernel resumes an interrupted sleep with it after SIGSTOP and SIGCONT"),
    ALLOW("getpid", NULL),
    ALLOW("gettid", "fork"),
    ALLOW("getppid", "worker: is the helper still its parent"),
    ALLOW("sysinfo", "glibc's qsort asks the memory size before its first sort of more than 1 KiB "
                     "(LIST of many entries)"),
    ALLOW("clock_gettime", "time stamps when the vDSO is unavailable (code path)"),
    ALLOW("clock_nanosleep", "wait for a loop device to autoclear; test pause points"),
    ALLOW_EQ("prctl", 0, PR_SET_PDEATHSIG, "worker: die with the helper"),

    /* files: the data dir, /dev/loop*, /proc/self/mountinfo, /sys (paths in code) */
    ALLOW("read", NULL),
    ALLOW("write", "log lines, the audit file"),
    ALLOW("lseek", "SEEK_DATA: does an image hold data; re-read mountinfo"),
    ALLOW("openat", "images, /dev/loop*, /proc/self/mountinfo, /sys"),
    ALLOW("openat2", "staging/target paths beneath their root, no symlinks"),
    ALLOW("close", NULL),
    ALLOW("close_range", "a worker closes every descriptor a request opened before it answers"),
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
    ALLOW("fcntl", "fdopendir"),
    ALLOW("dup2", "a new request channel on fd 3"),
    ALLOW("pipe2", "a worker's pipe to the main loop"),
    ALLOW("fstatfs", "CAPACITY of the data directory; STATS of a volume"),
    ALLOW("fchown", "MH_F_MOUNT_GROUP: a new volume root's group (CAP_CHOWN); a copied file"),
    ALLOW("fchmod", "MH_F_MOUNT_GROUP: g+rwx,setgid on a new volume root; a copied file"),
    ALLOW("fsync", "directories after a new or removed entry (images, snapshots, marks)"),
    ALLOW_EQ("renameat2", 4, RENAME_NOREPLACE, "publish a new image, never replacing one"),
    ALLOW("unlinkat", "delete an image; remove a target the helper made; a volume's tree"),
    ALLOW("mkdirat", "create a target directory beneath its root; a directory volume"),
    ALLOW_EQ("fsetxattr", 4, XATTR_CREATE,
             "mark a directory or file the helper made (trusted.sepcsi.owner), an image exposed "
             "raw (trusted.sepcsi.raw); never replace one"),
    ALLOW("fgetxattr", "read those marks before removing or mounting anything"),
    ALLOW_IF2("mknodat", 2, S_IFMT, S_IFBLK, 3, 0xfff00, 0x700, "a block device of major 7 (loop)",
              "the helper's own /dev/loopN node, in its private /dev (CAP_MKNOD)"),
    ALLOW("fchdir", "unmount relative to a verified parent"),

    /* directory volumes: a volume's tree beneath its base, on fds (mh_dir.c, mh_tree.c) */
    ALLOW_EQ("linkat", 4, 0, "copy a tree: a second name of a file already copied"),
    ALLOW("symlinkat", "copy a tree: a symlink, copied as a symlink, never followed"),
    ALLOW("readlinkat", "copy a tree: what a symlink says"),
    ALLOW_EQ("fchownat", 4, AT_SYMLINK_NOFOLLOW, "copy a tree: a symlink's owner"),
    ALLOW("utimensat", "copy a tree: times of files, directories and symlinks"),
    ALLOW("flistxattr", "copy a tree: a file's extended attributes (not trusted.*)"),
    QUOTACTL(Q_GETINFO, "does the base have project quotas"),
    QUOTACTL(Q_GETQUOTA, "a volume's project: usage and limit"),
    QUOTACTL(Q_SETQUOTA, "a volume's project: its limit (CAP_SYS_ADMIN)"),
    IOCTL(FS_IOC_FSGETXATTR, "a new volume directory's flags, before its project is set"),
    IOCTL(FS_IOC_FSSETXATTR,
          "give a new volume directory its project id, inherited (recorded apart: trusted.*)"),
    ALLOW("chdir", "back to / after an unmount"),

    /* the sockets: requests (fd 3), the supervisor (fd 4), the tool runner */
    ALLOW("recvfrom", "one request datagram"),
    ALLOW("sendto", "one answer datagram"),
    ALLOW("recvmsg", "control message with a passed fd; the tool runner's answer"),
    ALLOW_EQ("getsockopt", 2, SO_TYPE, "supctl: is the passed fd a SOCK_SEQPACKET socket"),
    ALLOW("sendmsg", "READY and PEER_VIOLATION to the supervisor; a job to the tool runner"),
    ALLOW("socketpair", "a worker's pair; a private answer channel for one tool run (AF_UNIX)"),
    ALLOW("shutdown", "end a worker: end of file on its pair (no socket reaches a network)"),
    ALLOW("poll", "wait on mkfs output; on workers at shutdown; a new worker finds its open fds"),
    ALLOW("ppoll", "wait on the channels and workers, SIGTERM/SIGINT unblocked only there"),

    /* processes: workers only, signalled through pidfds */
    ALLOW_IF("clone", 0, CLONE_NS_FLAGS, 0, "no CLONE_NEW* flag",
             "fork a worker; never a new namespace"),
    ENOSYS_("tgkill", "abort() cannot signal itself, so glibc ends the process with SIGSEGV, "
                      "which the supervisor restarts (a kill here would read as a violation "
                      "and stop the driver); no signal reaches another process"),
    ENOSYS_("clone3", "its flags are in memory the filter cannot read: ENOSYS makes libc "
                      "fall back to clone, which is filtered"),
    ALLOW("wait4", "reap a worker"),
    ALLOW("pidfd_open", "a handle on a worker just forked (no pid reuse race)"),
    ALLOW_EQ("pidfd_send_signal", 1, SIGKILL,
             "kill a worker whose freeze ran out; nothing else is ever signalled"),

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
    IOCTL(LOOP_CONFIGURE, "attach an image, autoclear"),
    IOCTL(LOOP_GET_STATUS64, "which image backs a loop device"),
    IOCTL(LOOP_CLR_FD, "detach a raw block volume's device; if autoclear did not"),
    IOCTL(LOOP_SET_CAPACITY, "RESIZE, EXPAND: the device takes its image's new size"),
    IOCTL(BLKFLSBUF, "drop the loop device's cache after mkfs wrote the image"),
    IOCTL(BLKGETSIZE64, "device size (EXPAND, STATS)"),
    IOCTL(FIFREEZE, "freeze a mounted source volume for a consistent copy"),
    IOCTL(FITHAW, "thaw it again, always; at start, whatever a dead helper left frozen"),
    IOCTL(EXT4_IOC_RESIZE_FS, "EXPAND: grow a mounted ext4 (CAP_SYS_RESOURCE)"),
    IOCTL(XFS_IOC_FSGEOMETRY_V1, "EXPAND: an xfs's block size and data blocks"),
    IOCTL(XFS_IOC_FSGROWFSDATA, "EXPAND: grow a mounted xfs"),
    IOCTL(BTRFS_IOC_RESIZE, "EXPAND: grow a mounted btrfs to its device (\"max\")"),
};

const struct pol_sc_table pol_sc_helper = SC_TABLE("sepcsi-mounthelper", helper_rules);
