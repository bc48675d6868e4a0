/*
 * The seccomp table of sepcsi-mounthelper (and its workers): the capable
 * core's rows (seccomp_core.c, installed with these) and what the helper's
 * orchestration needs on top: workers, copies, image files, the runners,
 * directory volumes. Read the reasons as the review record; seccomp.c
 * explains the form and how a table is installed.
 */
#include "sc_rules.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
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

/*
 * sepcsi-mounthelper and its workers (forked, same filter): these rows and the
 * core's. Derived from
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
    /* processes: forking workers */
    ALLOW("set_robust_list", "fork"),
    ALLOW("rseq", "fork"),
    ALLOW("getppid", "worker: is the helper still its parent"),
    ALLOW_EQ("prctl", 0, PR_SET_PDEATHSIG, "worker: die with the helper"),

    /* files: the data dir and the images */
    ALLOW("close_range", "a worker closes every descriptor a request opened before it answers"),
    ALLOW("dup2", "a new request channel on fd 3"),
    ALLOW("pipe2", "a worker's pipe to the main loop"),
    ALLOW_EQ("fcntl", 1, F_DUPFD_CLOEXEC,
             "a new worker fills the gaps below its request channel's descriptors"),

    /* directory volumes: a volume's tree beneath its base, on fds (mh_dir.c, mh_tree.c) */
    ALLOW_EQ("linkat", 4, 0,
             "copy a tree: a second name of a file already copied; a shared base's record "
             "put in place whole, never over another name"),
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
    IOCTL(BTRFS_IOC_SUBVOL_CREATE, "btrfs base: a new volume, a subvolume in the work area"),
    IOCTL(BTRFS_IOC_SNAP_DESTROY_V2,
          "btrfs base: destroy a trashed volume or snapshot, and subvolumes a tenant made in it "
          "(CAP_SYS_ADMIN)"),
    IOCTL(BTRFS_IOC_INO_LOOKUP, "btrfs base: a subvolume's id, from its root directory"),
    IOCTL(BTRFS_IOC_TREE_SEARCH,
          "btrfs base: quota groups' usage and limits; subvolumes inside a trashed one "
          "(CAP_SYS_ADMIN)"),
    IOCTL(BTRFS_IOC_QGROUP_LIMIT, "btrfs base: a volume's size (CAP_SYS_ADMIN)"),
    ALLOW_EQ("fsetxattr", 4, XATTR_REPLACE,
             "btrfs base: a snapshot's mark, its source's copied by the kernel, made its own; "
             "a retained or archived directory's mark made a kept one's"),

    /* the sockets: a new channel from the supervisor, workers, the runners */
    ALLOW("recvmsg", "control message with a passed fd; the tool runner's answer"),
    ALLOW_EQ("getsockopt", 2, SO_TYPE, "supctl: is the passed fd a SOCK_SEQPACKET socket"),
    ALLOW("socketpair", "a worker's pair; a private answer channel for one tool run (AF_UNIX)"),
    ALLOW("shutdown", "end a worker: end of file on its pair (no socket reaches a network)"),

    /* processes: workers only, signalled through pidfds */
    ALLOW_IF("clone", 0, CLONE_NS_FLAGS, 0, "no CLONE_NEW* flag",
             "fork a worker; never a new namespace"),
    ENOSYS_("clone3", "its flags are in memory the filter cannot read: ENOSYS makes libc "
                      "fall back to clone, which is filtered"),
    ALLOW("wait4", "reap a worker"),
    ALLOW("pidfd_open", "a handle on a worker just forked (no pid reuse race)"),
    ALLOW_EQ("pidfd_send_signal", 1, SIGKILL,
             "kill a worker whose freeze ran out; nothing else is ever signalled"),

    /* ioctl, by request: STAGE's mkfs, and copies */
    IOCTL(BLKFLSBUF, "drop the loop device's cache after mkfs wrote the image"),
};

const struct pol_sc_table pol_sc_helper =
    SC_TABLE_ON("sepcsi-mounthelper", helper_rules, &pol_sc_core);

/*
 * The helper's audit writer beside its core (mounthelper/mh_audit.c): root
 * without any capability, it appends what the helper sends on its socket to
 * helper-audit.log. It reads that socket and writes that file, on their
 * fixed numbers, and nothing else: no open, no seek, no truncation, no map.
 */
static const struct sc_rule audit_rules[] = {
    ALLOW_EQ("read", 0, POL_SC_AUDIT_IN, "a record from the helper, on its socket only"),
    ALLOW_EQ("write", 0, POL_SC_AUDIT_OUT, "that record, appended to the audit file only"),
    ALLOW("exit_group", "the helper's end of its socket is closed"),
    ALLOW("rt_sigreturn", NULL),
    ALLOW("restart_syscall", "a read resumed after SIGSTOP and SIGCONT"),
};

const struct pol_sc_table pol_sc_audit = SC_TABLE("sepcsi-mounthelper audit writer", audit_rules);
