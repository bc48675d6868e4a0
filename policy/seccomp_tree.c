/*
 * The seccomp table of sepcsi-tree-runner: the only filter compiled into it.
 * Read the reasons as the review record; seccomp.c explains the form and how
 * a table is installed.
 */
#include "sc_rules.h"

#include <fcntl.h>
#include <linux/btrfs.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>

/* From <linux/fs.h>, which cannot be included together with <sys/mount.h> on glibc 2.36. */
#define FICLONE _IOW(0x94, 9, int)

/*
 * The tree runner (sepcsi-tree-runner, runner/tree.c): the helper starts it
 * with the four file capabilities a pod's tree needs and nothing else, and it
 * installs this filter before it serves a job. Its jobs walk a directory
 * volume's tree on the descriptors the helper passed: so it has the *at
 * calls that remove, make, link and give owners, modes, times and extended
 * attributes, and data copying; and none of exec, the mount API, umount,
 * loop ioctls, mknod, namespaces or the network.
 */
static const struct sc_rule tree_rules[] = {
    ALLOW("brk", NULL),
    ALLOW("mmap", NULL),
    ALLOW("munmap", NULL),
    ALLOW("madvise", "malloc trimming"),
    ALLOW("futex", "libc locks (stdio, malloc)"),
    ALLOW("sched_yield", "a contended lock's back-off (the sanitizer runtime)"),
    ALLOW("exit_group", NULL),
    ALLOW("set_robust_list", "libc, in a forked child"),
    ALLOW("rt_sigaction", "a job's child restores SIGCHLD"),
    ALLOW("rt_sigprocmask", NULL),
    ALLOW("rt_sigreturn", NULL),
    ALLOW("restart_syscall",
          "the kernel resumes an interrupted sleep with it after SIGSTOP and SIGCONT"),
    ALLOW("getpid", NULL),
    ALLOW("gettid", NULL),
    ALLOW("getppid", "a job's child: is the runner still its parent"),
    ALLOW("clock_gettime", "log time stamps"),
    ALLOW_EQ("prctl", 0, PR_SET_PDEATHSIG, "a job's child: die with the runner"),
    ALLOW("write", "log lines on stderr"),
    ALLOW("recvmsg", "one job with its fds"),
    ALLOW("sendto", "a job's answer"),
    ALLOW("poll", "has the requester gone away"),
    ALLOW_IF("clone", 0, CLONE_NS_FLAGS, 0, "no CLONE_NEW* flag",
             "a child per job; never a namespace"),
    ENOSYS_("clone3", "flags in memory: ENOSYS makes libc use clone"),
    ALLOW("openat", "a directory again as \".\", to read its entries"),
    ALLOW("openat2", "every entry of the tree: beneath its directory, no symlink, no mount"),
    ALLOW("close", NULL),
    ALLOW("newfstatat", "an entry's type, owner, mode and times, never following a symlink"),
    ALLOW("getdents64", "a directory's entries"),
    ALLOW_EQ("fcntl", 1, F_GETFL, "fdopendir: is the descriptor open for reading"),
    ALLOW_EQ("fcntl", 1, F_SETFD, "fdopendir: close-on-exec"),
    ALLOW("unlinkat", "remove an entry (a symlink or hard link itself, never its target)"),
    ALLOW("renameat2", "move a too-deep directory up (RENAME_NOREPLACE)"),
    ALLOW("mkdirat", "a copied directory"),
    ALLOW("linkat", "a copied hard link, within the copy"),
    ALLOW("symlinkat", "a copied symlink, as text"),
    ALLOW("readlinkat", "a symlink's text"),
    ALLOW("fchown", "a copy's owner"),
    ALLOW("fchownat", "a copied symlink's owner (AT_SYMLINK_NOFOLLOW)"),
    ALLOW("fchmod", "a copy's mode"),
    ALLOW("utimensat", "a copy's times"),
    ALLOW("flistxattr", "a source's extended attributes (trusted.* is unreadable here)"),
    ALLOW("fgetxattr", NULL),
    ALLOW("fsetxattr", "a copy's extended attributes (not trusted.*, not security.*)"),
    ALLOW("lseek", "SEEK_DATA/SEEK_HOLE: a file's data extents"),
    ALLOW("copy_file_range", "a file's data extents"),
    ALLOW("pread64", "the copy's fallback"),
    ALLOW("pwrite64", "the copy's fallback"),
    ALLOW("ftruncate", "a copy's size (its holes)"),
    ALLOW("fsync", "a copied file, durable before the copy takes its name"),
    IOCTL(FICLONE, "reflink a copied file"),
    IOCTL(BTRFS_IOC_SNAP_CREATE_V2, "btrfs base: snapshot a volume (its owner or CAP_FOWNER)"),
    IOCTL(BTRFS_IOC_SUBVOL_SETFLAGS, "btrfs base: a snapshot made read-only, or writable again"),
};

const struct pol_sc_table pol_sc_tree = SC_TABLE("sepcsi-tree-runner", tree_rules);
