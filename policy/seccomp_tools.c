/*
 * The seccomp table of sepcsi-runner (the tools runner) and the mkfs tools it
 * starts: the only filter compiled into it. Read the reasons as the review record;
 * seccomp.c explains the form and how a table is installed.
 */
#include "sc_rules.h"

#include <fcntl.h>
#include <linux/cdrom.h>
#include <linux/fd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <termios.h>

/* From <linux/fs.h>, which cannot be included together with <sys/mount.h> on glibc 2.36. */
#define BLKPBSZGET       _IO(0x12, 123)
#define BLKDISCARDZEROES _IO(0x12, 124)
#define FICLONE          _IOW(0x94, 9, int)
#define BLKGETZONESZ     _IOR(0x12, 132, __u32)
/* From <linux/fs.h> too: _IOWR('f', 11, struct fiemap), 32 bytes. */
#define FS_IOC_FIEMAP _IOC(_IOC_READ | _IOC_WRITE, 'f', 11, 32)
/* From xfsprogs' <xfs/xfs_fs.h>: _IOR('X', 30, struct dioattr), three __u32. */
#define XFS_IOC_DIOINFO _IOC(_IOC_READ, 'X', 30, 12)

/*
 * sepcsi-runner (runner/tools.c) and the mkfs tools it execs: mkfs.ext4,
 * mkfs.xfs, mkfs.btrfs. The helper starts the runner capability-less with
 * no_new_privs; the runner installs this filter before it serves a job, and
 * the tools inherit it across exec. It holds the one execve of the helper's
 * side, the file I/O on image files the helper passed (sizing, copying), and
 * none of the mount API, loop ioctls, xattrs or mknod: a tool that a hostile
 * image could subvert gets no privilege and no mount call. Rows marked (tools)
 * are the dynamic loader's and the tools' own needs.
 */
static const struct sc_rule tools_rules[] = {
    ALLOW("brk", NULL),
    ALLOW("mmap", NULL),
    ALLOW("munmap", NULL),
    ALLOW("mprotect", "loader: RELRO (tools)"),
    ALLOW("madvise", "thread stack release (tools: mkfs.btrfs)"),
    ALLOW("arch_prctl", "loader: TLS (tools)"),
    ALLOW("set_tid_address", "libc start-up (tools)"),
    ALLOW("set_robust_list", "libc start-up, fork"),
    ALLOW("rseq", "libc start-up (tools)"),
    ALLOW("prlimit64", "libc start-up: stack limit (tools)"),
    ALLOW("membarrier", "liburcu (tools: mkfs.xfs)"),
    ALLOW("getrandom", "uuids (tools)"),
    ALLOW("futex", "threads (tools)"),
    ALLOW("sched_yield", "a contended lock's back-off: runner threads (the sanitizer runtime)"),
    ALLOW("exit", "thread exit (tools)"),
    ALLOW("exit_group", NULL),
    ALLOW("rt_sigaction", NULL),
    ALLOW("rt_sigprocmask", NULL),
    ALLOW("rt_sigreturn", NULL),
    ALLOW("restart_syscall",
          "the kernel resumes an interrupted sleep with it after SIGSTOP and SIGCONT"),
    ALLOW("getpid", NULL),
    ALLOW("gettid", NULL),
    ALLOW("getppid", "runner: is the helper still its parent"),
    ALLOW("getuid", "(tools)"),
    ALLOW("geteuid", "(tools)"),
    ALLOW("getgid", "(tools)"),
    ALLOW("getegid", "(tools)"),
    ALLOW("uname", "kernel version checks (tools: mkfs.ext4)"),
    ALLOW("sysinfo", "memory size (tools: mkfs.btrfs)"),
    ALLOW("sched_getaffinity", "thread count (tools)"),
    ALLOW("clock_gettime", NULL),
    ALLOW("clock_nanosleep", NULL),
    ALLOW("alarm", "runner: a probe or BLOCKS child's time limit"),
    ALLOW_EQ("prctl", 0, PR_SET_PDEATHSIG, "runner and its children: die with the helper"),
    ALLOW_EQ("prctl", 0, PR_GET_DUMPABLE, "secure_getenv check (tools: mkfs.ext4)"),
    ALLOW_EQ("prctl", 0, PR_SET_NO_NEW_PRIVS,
             "runner's probe child: libseccomp sets it (already set) before the probe filter"),
    ALLOW("seccomp", "runner's probe child: installs the probe filter over this one (a filter "
                     "only ever narrows)"),
    ALLOW("read", NULL),
    ALLOW("write", NULL),
    ALLOW("pread64", "(tools)"),
    ALLOW("pwrite64", "(tools)"),
    ALLOW("lseek", "(tools)"),
    ALLOW("openat", "the image (/proc/self/fd/3), libraries (tools)"),
    ALLOW("close", NULL),
    ALLOW("close_range", "runner child: close every inherited fd before exec"),
    ALLOW("newfstatat", NULL),
    ALLOW("statx", "(tools)"),
    ALLOW("getdents64", "(tools)"),
    ALLOW("readlink", "(tools: mkfs.btrfs)"),
    ALLOW("getcwd", "(tools: mkfs.btrfs)"),
    ALLOW("access", "loader: /etc/ld.so.preload (tools)"),
    ALLOW("faccessat2", "(tools)"),
    ALLOW("fadvise64", "(tools)"),
    ALLOW("fcntl", "(tools)"),
    ALLOW("fstatfs", "(tools)"),
    ALLOW("fallocate", "discard = punch holes in the image (tools: mkfs.ext4, mkfs.xfs)"),
    ALLOW("fsync", "runner: make a sized or copied image durable (tools)"),
    ALLOW("ftruncate", "runner: size a new image (sparse), grow one or a copy"),
    ALLOW("copy_file_range", "runner: copy an image's data extents (SNAPSHOT, CLONE)"),
    ALLOW("fdatasync", "(tools)"),
    ALLOW("dup2", "runner child: stdio, the image on fd 3"),
    ALLOW("recvmsg", "runner: one job with its fds"),
    ALLOW("sendto", "runner child: the tool's exit status"),
    ALLOW("poll", "runner child: the tool, or the requester going away"),
    ALLOW_IF("clone", 0, CLONE_NS_FLAGS, 0, "no CLONE_NEW* flag",
             "runner: a child per job, the tool; tool threads; never a namespace"),
    ENOSYS_("clone3", "flags in memory: ENOSYS makes libc use clone"),
    ALLOW("execve", "run /sbin/mkfs.*: capability-less, no_new_privs, still under this filter"),
    ALLOW("wait4", "reap the tool"),
    ALLOW("pidfd_open", "a handle on the tool"),
    ALLOW_EQ("pidfd_send_signal", 1, SIGKILL, "kill a tool that outlived its time"),
    IOCTL(BLKGETSIZE64, "(tools: mkfs.ext4, ENOTTY)"),
    IOCTL(BLKSSZGET, "(tools: mkfs.ext4, ENOTTY)"),
    IOCTL(BLKGETSIZE, "(tools: mkfs.ext4, ENOTTY)"),
    IOCTL(BLKPBSZGET, "(tools: mkfs.ext4, ENOTTY)"),
    IOCTL(BLKROGET, "(tools: mkfs.ext4, ENOTTY)"),
    IOCTL(BLKDISCARDZEROES, "(tools: mkfs.ext4, ENOTTY)"),
    IOCTL(FDGETPRM, "(tools: mkfs.ext4, ENOTTY)"),
    IOCTL(TCGETS, "isatty() (tools: mkfs.ext4)"),
    IOCTL(FDGETFDCSTAT, "runner: blkid asks whether a device it reads is a floppy (RN_SIGNATURE)"),
    IOCTL(CDROM_GET_CAPABILITY, "runner: blkid asks whether a device it reads is a CD"),
    IOCTL(CDROM_LAST_WRITTEN, "runner: blkid, the same"),
    IOCTL(BLKGETZONESZ, "runner: blkid asks whether a device it reads is zoned"),
    IOCTL(FICLONE, "runner: reflink an image (SNAPSHOT, CLONE)"),
    IOCTL(FS_IOC_FIEMAP, "runner: the extents two snapshot images share (BLOCKS)"),
    IOCTL(XFS_IOC_DIOINFO, "direct I/O limits of the host fs (tools: mkfs.xfs)"),
};

const struct pol_sc_table pol_sc_tools = SC_TABLE("sepcsi-runner, mkfs", tools_rules);

/*
 * A probe child of the tools runner (runner/tools.c, RN_SIGNATURE): forked for
 * one probe, holding only its answer socket and a read-only descriptor of the
 * one image or device, it installs this filter over the tools' own before
 * libblkid reads a byte. libblkid parses what a tenant wrote, so a subverted
 * parser must find nothing to do but read that descriptor and answer: no
 * write, no shared writable mapping, no exec, no signal, no other file, no
 * process, and it dies with its time (an alarm set before the filter).
 */
static const struct sc_rule probe_rules[] = {
    ALLOW("read", "libblkid reads the image or device"),
    ALLOW("pread64", "the ext4 superblock"),
    ALLOW("lseek", "libblkid"),
    ALLOW("newfstatat", "libblkid: the descriptor's type and size"),
    ALLOW("fadvise64", "libblkid: random access"),
    EACCES_("openat", "libblkid's look at sysfs and its config: refused, it goes on without"),
    ALLOW_IF("mmap", 4, 0xffffffffULL, 0xffffffffULL, "fd -1",
             "malloc: anonymous memory only, never a mapping of the image"),
    ALLOW("munmap", "malloc"),
    ALLOW("brk", "malloc"),
    ALLOW("mremap", "malloc"),
    ALLOW("madvise", "malloc"),
    ALLOW_EQ("sendto", 0, POL_SC_PROBE_ANSWER_FD,
             "the answer, on its socket only (stdio and every other descriptor are closed)"),
    ALLOW("close", NULL),
    ALLOW("exit_group", NULL),
    ALLOW("rt_sigreturn", NULL),
    IOCTL(BLKGETSIZE64, "libblkid: a device's size"),
    IOCTL(BLKSSZGET, "libblkid: a device's sector size"),
    IOCTL(BLKGETZONESZ, "libblkid: is the device zoned"),
    IOCTL(CDROM_GET_CAPABILITY, "libblkid: is the device a CD"),
    IOCTL(CDROM_LAST_WRITTEN, "libblkid: the same"),
    IOCTL(FDGETFDCSTAT, "libblkid: is the device a floppy"),
};

const struct pol_sc_table pol_sc_probe = SC_TABLE("sepcsi-runner probe child", probe_rules);
