/*
 * Seccomp allowlists (libseccomp), one reviewed table per role.
 *
 * Runs in the helper (and later rpcd) once, after the capability drop and
 * no_new_privs, before the first request. A failure to build or load the
 * filter is reported to the caller, who must exit (fail closed).
 *
 * How to read the tables: one row per allowed system call, or per allowed
 * argument value when the row carries a filter; a syscall with several
 * filtered rows is allowed when ANY row matches. The filter can only see
 * register values, never memory, so paths and structures are checked in code
 * (mh_path.c) and flag words are checked here. Everything not listed kills the
 * whole process (SCMP_ACT_KILL_PROCESS), or is logged in log_only mode.
 *
 * Architectures: the filter is built for the native ABI only (x86_64). A
 * system call made through another ABI the kernel also accepts, i386 via
 * int 0x80 or x32 (nr | 0x40000000), does not match the filter's architecture
 * and kills the process (SCMP_FLTATR_ACT_BADARCH), in log_only mode too;
 * libseccomp also rejects x32 numbers on the x86_64 ABI.
 */
#include "pol_seccomp.h"
#include "pol_md.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/blkzoned.h>
#include <linux/cdrom.h>
#include <linux/fd.h>
#include <linux/loop.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/xattr.h>
#include <termios.h>

/* From <linux/fs.h>, which cannot be included together with <sys/mount.h> on glibc 2.36. */
#ifndef BLKPBSZGET
#define BLKPBSZGET _IO(0x12, 123)
#endif
#ifndef BLKDISCARDZEROES
#define BLKDISCARDZEROES _IO(0x12, 124)
#endif
/* From xfsprogs' <xfs/xfs_fs.h>: _IOR('X', 30, struct dioattr), three __u32. */
#define XFS_IOC_DIOINFO _IOC(_IOC_READ, 'X', 30, 12)
/* <linux/fs.h> (which clashes with <sys/mount.h>), <linux/ext4.h>, <xfs/xfs_fs.h>, <linux/btrfs.h>.
 */
#define FICLONE               _IOW(0x94, 9, int)
#define FIFREEZE              _IOWR('X', 119, int)
#define FITHAW                _IOWR('X', 120, int)
#define EXT4_IOC_RESIZE_FS    _IOW('f', 16, uint64_t)
#define XFS_IOC_FSGEOMETRY_V1 _IOC(_IOC_READ, 'X', 100, 112)  /* struct xfs_fsop_geom_v1 */
#define XFS_IOC_FSGROWFSDATA  _IOC(_IOC_WRITE, 'X', 110, 16)  /* struct xfs_growfs_data */
#define BTRFS_IOC_RESIZE      _IOC(_IOC_WRITE, 0x94, 3, 4096) /* struct btrfs_ioctl_vol_args */

/*
 * SC_EAFNOSUPPORT_NE: the call fails with EAFNOSUPPORT when argument arg differs from
 * value (used so that gRPC's probes for IPv4/IPv6 support get a clean error
 * instead of a kill, while only AF_UNIX sockets can be made).
 */
enum sc_act { SC_ALLOW, SC_ENOSYS, SC_EAFNOSUPPORT_NE };

struct sc_rule {
	const char *name;
	enum sc_act act;
	int arg; /* -1: any arguments; else allowed when (arg & mask) == value */
	uint64_t mask, value;
	const char *filter; /* the filter in words, for the printed table */
	const char *why;
};

#define ALLOW(n, w)                                                                                \
	{                                                                                          \
		n, SC_ALLOW, -1, 0, 0, NULL, w                                                     \
	}
#define ALLOW_IF(n, a, m, v, f, w)                                                                 \
	{                                                                                          \
		n, SC_ALLOW, a, m, v, f, w                                                         \
	}
#define ALLOW_EQ(n, a, v, w) ALLOW_IF(n, a, ~0ULL, (uint64_t)(v), #v, w)
#define EAFNOSUPPORT_UNLESS(n, a, v, f, w)                                                         \
	{                                                                                          \
		n, SC_EAFNOSUPPORT_NE, a, ~0ULL, (uint64_t)(v), f, w                               \
	}
#define ENOSYS_(n, w)                                                                              \
	{                                                                                          \
		n, SC_ENOSYS, -1, 0, 0, NULL, w                                                    \
	}
/* ioctl's request is an unsigned int in the kernel: compare the low 32 bits only. */
#define IOCTL(cmd, w) ALLOW_IF("ioctl", 1, 0xffffffffULL, (uint64_t)(cmd), #cmd, w)

/* clone(2) flags that would create a namespace: never allowed. */
#define CLONE_NS_FLAGS                                                                             \
	((uint64_t)(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |  \
	            CLONE_NEWPID | CLONE_NEWNET))
#define CLONE_THREAD_FLAGS ((uint64_t)(CLONE_VM | CLONE_THREAD))
#define MOUNT_FORCED       ((uint64_t)(MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV))

/*
 * sepcsi-mounthelper and, inherited across fork and exec, mkfs.ext4, mkfs.xfs
 * and mkfs.btrfs. Derived from `strace -f` of the process test
 * (tests/unit/test_helper_proc.c, which stages ext4, xfs and btrfs so that all
 * three tools run under this filter); rows marked (tools) are there only for
 * the mkfs tools and the dynamic loader, rows marked (code path) are reached
 * by a helper path the test may not exercise. Regenerate with:
 *   SEPCSI_TEST_SECCOMP_LOG=1 SEPCSI_TEST_STRACE=/tmp/mh.strace test_helper_proc
 *
 * Deliberately absent: socket, connect, bind and every other network call;
 * mount(2) (only the fd-based API: no remount, no MS_MOVE, no propagation
 * change); unshare, setns; ptrace, process_vm_*; bpf, perf_event_open;
 * kexec_*; init/finit/delete_module; keyctl, add_key; userfaultfd;
 * io_uring_*; personality; chroot, pivot_root; mknod; setuid & co; open, stat
 * and the other pre-*at calls glibc no longer uses.
 *
 * execve is the one wide door, and it is needed for mkfs: the child drops its
 * capabilities first, securebits (SECBIT_NOROOT, locked) and no_new_privs make
 * sure exec grants none back, and the tool stays under this very filter.
 *
 * ioctl is filtered by request number. mkfs now formats the image file rather
 * than the loop device, so the tools only ask harmless size/type questions
 * that fail with ENOTTY on a regular file. A newer e2fsprogs/xfsprogs asking
 * something new would be killed (SIGSYS) and STAGE fails with that reason:
 * fail closed; add the request here after review.
 */
static const struct sc_rule helper_rules[] = {
    /* memory, threads, process basics */
    ALLOW("brk", "malloc"),
    ALLOW("mmap", "malloc; loader (tools)"),
    ALLOW("munmap", "malloc"),
    ALLOW("mprotect", "loader: RELRO (tools)"),
    ALLOW("madvise", "thread stack release (tools: mkfs.btrfs)"),
    ALLOW("arch_prctl", "loader: TLS (tools)"),
    ALLOW("set_tid_address", "libc start-up (tools)"),
    ALLOW("set_robust_list", "libc start-up, fork"),
    ALLOW("rseq", "libc start-up (tools)"),
    ALLOW("prlimit64", "libc start-up: stack limit (tools)"),
    ALLOW("membarrier", "liburcu (tools: mkfs.xfs)"),
    ALLOW("getrandom", "libc malloc; uuids (tools)"),
    ALLOW("futex", "libc locks, threads (tools)"),
    ALLOW("exit", "thread exit (tools)"),
    ALLOW("exit_group", NULL),
    ALLOW("rt_sigaction", "libc thread set-up (tools)"),
    ALLOW("rt_sigprocmask", "fork; threads (tools)"),
    ALLOW("rt_sigreturn", "return from a signal handler"),
    ALLOW("getpid", NULL),
    ALLOW("gettid", "fork"),
    ALLOW("getppid", "mkfs child: is the helper still its parent"),
    ALLOW("getuid", "(tools)"),
    ALLOW("geteuid", "(tools: mkfs.ext4)"),
    ALLOW("getgid", "(tools: mkfs.ext4)"),
    ALLOW("getegid", "(tools: mkfs.ext4)"),
    ALLOW("uname", "kernel version checks (tools: mkfs.ext4)"),
    ALLOW("sysinfo", "memory size (tools: mkfs.btrfs)"),
    ALLOW("clock_gettime", "time stamps when the vDSO is unavailable (code path)"),
    ALLOW("clock_nanosleep", "wait for a loop device to autoclear (code path)"),
    ALLOW("capget", "mkfs child: libcap-ng reads the current sets"),
    ALLOW("capset", "mkfs child: drop every capability before exec (can only lower)"),
    ALLOW_EQ("prctl", 0, PR_SET_PDEATHSIG, "worker, mkfs child: die with the helper"),
    ALLOW_EQ("prctl", 0, PR_GET_DUMPABLE, "secure_getenv check (tools: mkfs.ext4)"),

    /* files: the images dir, /dev/loop*, /proc/self/mountinfo, /sys/block (paths in code) */
    ALLOW("read", NULL),
    ALLOW("write", "log lines; tool output"),
    ALLOW("pread64", "(tools)"),
    ALLOW("pwrite64", "(tools)"),
    ALLOW("lseek", "blkid probe; (tools)"),
    ALLOW("openat", "images, /dev/loop*, /proc/self/mountinfo, /sys/block"),
    ALLOW("openat2", "staging/target paths beneath their root, no symlinks"),
    ALLOW("close", NULL),
    ALLOW("close_range", "mkfs child: close every inherited fd"),
    ALLOW("newfstatat", "fstat/fstatat"),
    ALLOW("statx", "mount id and mount-root attribute of a directory"),
    ALLOW("getdents64", "list /sys/block"),
    ALLOW("readlink", "libmount path canonicalisation; (tools: mkfs.btrfs)"),
    ALLOW("getcwd", "(tools: mkfs.btrfs)"),
    ALLOW("access", "loader: /etc/ld.so.preload; (tools: mkfs.ext4)"),
    ALLOW("faccessat2", "blkid: sysfs attributes"),
    ALLOW("fadvise64", "blkid; (tools)"),
    ALLOW("fcntl", "(tools: mkfs.btrfs)"),
    ALLOW("dup2", "mkfs child: stdio; a new request channel on fd 3"),
    ALLOW("pipe2", "capture mkfs output; a worker's done/exit pipe"),
    ALLOW("ftruncate", "size a new image (sparse); grow one (RESIZE, CLONE)"),
    ALLOW("copy_file_range", "sparse copy of an image's data extents (SNAPSHOT, CLONE)"),
    ALLOW("fstatfs", "CAPACITY of the data directory; STATS of a volume"),
    ALLOW("fchown", "MH_F_MOUNT_GROUP: a new volume root's group (CAP_CHOWN)"),
    ALLOW("fchmod", "MH_F_MOUNT_GROUP: g+rwx,setgid on a new volume root (its owner)"),
    ALLOW("fallocate", "discard = punch holes in the image (tools: mkfs.ext4, mkfs.xfs)"),
    ALLOW("fsync", "a new image and its directory entry; (tools)"),
    ALLOW_EQ("renameat2", 4, RENAME_NOREPLACE, "publish a new image, never replacing one"),
    ALLOW("unlinkat", "delete an image; rmdir a target directory"),
    ALLOW("mkdirat", "create a target directory beneath its root"),
    ALLOW_EQ("fsetxattr", 4, XATTR_CREATE,
             "mark a directory or file the helper made (trusted.sepcsi.owner), never replace one"),
    ALLOW("fgetxattr", "read that mark before removing anything"),
    ALLOW("fchdir", "unmount relative to a verified parent; mkfs child: into images/"),
    ALLOW("chdir", "back to / after an unmount"),

    /* the two already-open sockets: requests (fd 3) and the supervisor (fd 4) */
    ALLOW("recvfrom", "one request datagram"),
    ALLOW("sendto", "one answer datagram"),
    ALLOW("recvmsg", "control message with a passed fd"),
    ALLOW_EQ("getsockopt", 2, SO_TYPE, "supctl: is the passed fd a SOCK_SEQPACKET socket"),
    ALLOW("sendmsg", "READY and PEER_VIOLATION to the supervisor"),
    ALLOW("poll", "wait on mkfs output; on workers at shutdown"),
    ALLOW("ppoll", "wait on the channels and workers, SIGTERM/SIGINT unblocked only there"),

    /* processes: the mkfs child and the tools' threads */
    ALLOW_IF("clone", 0, CLONE_NS_FLAGS, 0, "no CLONE_NEW* flag",
             "fork a worker, the mkfs child; tool threads; never a new namespace"),
    ENOSYS_("clone3", "its flags are in memory the filter cannot read: ENOSYS makes libc "
                      "fall back to clone, which is filtered"),
    ALLOW("execve", "run /sbin/mkfs.*, capability-less and still under this filter"),
    ALLOW("wait4", "reap a worker; reap the mkfs child"),
    ALLOW_EQ("kill", 1, SIGKILL, "kill a hung mkfs child (code path)"),

    /* mounts: the fd-based API, CAP_SYS_ADMIN; the flags are pinned where they are registers */
    ALLOW_EQ("fsopen", 1, FSOPEN_CLOEXEC, "new filesystem context (type checked by policy)"),
    ALLOW_EQ("fsconfig", 1, FSCONFIG_SET_FLAG, "superblock flags, allowed flag options"),
    ALLOW_EQ("fsconfig", 1, FSCONFIG_SET_STRING, "source device, allowed key=value options"),
    ALLOW_EQ("fsconfig", 1, FSCONFIG_CMD_CREATE, "create the superblock"),
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
    IOCTL(BLKGETSIZE64, "device size (EXPAND, STATS); blkid; (tools: mkfs.ext4, ENOTTY)"),
    IOCTL(BLKSSZGET, "blkid; (tools: mkfs.ext4, ENOTTY)"),
    IOCTL(BLKGETZONESZ, "blkid: zoned device check"),
    IOCTL(CDROM_GET_CAPABILITY, "blkid: is it a CD (EINVAL on a loop device)"),
    IOCTL(CDROM_LAST_WRITTEN, "blkid: CD session (EINVAL on a loop device)"),
    IOCTL(FDGETFDCSTAT, "blkid: is it a floppy (EINVAL on a loop device)"),
    IOCTL(BLKGETSIZE, "(tools: mkfs.ext4, ENOTTY)"),
    IOCTL(BLKPBSZGET, "(tools: mkfs.ext4, ENOTTY)"),
    IOCTL(BLKROGET, "(tools: mkfs.ext4, ENOTTY)"),
    IOCTL(BLKDISCARDZEROES, "(tools: mkfs.ext4, ENOTTY)"),
    IOCTL(FDGETPRM, "(tools: mkfs.ext4, ENOTTY)"),
    IOCTL(TCGETS, "isatty() (tools: mkfs.ext4)"),
    IOCTL(XFS_IOC_DIOINFO, "direct I/O limits of the host fs (tools: mkfs.xfs)"),
    IOCTL(FICLONE, "reflink an image (SNAPSHOT, CLONE); the start-up probe"),
    IOCTL(FIFREEZE, "freeze a mounted source volume for a consistent copy"),
    IOCTL(FITHAW, "thaw it again, always"),
    IOCTL(EXT4_IOC_RESIZE_FS, "EXPAND: grow a mounted ext4 (CAP_SYS_RESOURCE)"),
    IOCTL(XFS_IOC_FSGEOMETRY_V1, "EXPAND: an xfs's block size and data blocks"),
    IOCTL(XFS_IOC_FSGROWFSDATA, "EXPAND: grow a mounted xfs"),
    IOCTL(BTRFS_IOC_RESIZE, "EXPAND: grow a mounted btrfs to its device (\"max\")"),
};

/*
 * Sanitizer builds only (-DSEPCSI_SANITIZE=ON): the ASan runtime sets up an
 * alternate signal stack in every new process, the forked mkfs child included.
 * Never compiled into a release build. (LeakSanitizer needs ptrace and cannot
 * run under this filter at all: the tests run the helper with detect_leaks=0.)
 */
static const struct sc_rule sanitizer_rules[] = {
    ALLOW("sigaltstack", "ASan runtime (sanitizer builds only)"),
};

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZER_RULES 1
#else
#define SANITIZER_RULES 0
#endif

/*
 * sepcsi-rpcd: the gRPC C core server, protobuf-c, sqlite and the helper
 * channel, and nothing else. Installed after the store is open and before
 * gRPC starts; derived from `strace -f` of rpcd through the whole end-to-end
 * suite (tests/e2e). Deliberately absent: execve and fork (threads only),
 * every mount call, ptrace, setuid & co, network sockets (socket() outside
 * AF_UNIX fails with EAFNOSUPPORT), and ioctl (nothing in rpcd needs one).
 */
static const struct sc_rule rpcd_rules[] = {
    ALLOW("brk", NULL),
    ALLOW("mmap", NULL),
    ALLOW("munmap", NULL),
    ALLOW("mremap", NULL),
    ALLOW("mprotect", "thread stacks"),
    ALLOW("madvise", "malloc trimming"),
    ALLOW("futex", "gRPC and sqlite threads"),
    ALLOW("set_robust_list", "new threads"),
    ALLOW("rseq", "new threads"),
    ALLOW("sched_yield", "gRPC spin locks"),
    ALLOW("sched_getaffinity", "gRPC sizes its thread pools"),
    ALLOW("sched_getparam", "pthread attributes of new threads"),
    ALLOW("sched_getscheduler", "pthread attributes of new threads"),
    ALLOW_IF("clone", 0, CLONE_THREAD_FLAGS | CLONE_NS_FLAGS, CLONE_THREAD_FLAGS,
             "CLONE_VM|CLONE_THREAD set, no CLONE_NEW*", "threads only, never a process"),
    ENOSYS_("clone3", "flags in memory: ENOSYS makes libc use clone"),
    ALLOW_EQ("prctl", 0, PR_SET_NAME, "gRPC names its threads"),
    ALLOW("exit", NULL),
    ALLOW("exit_group", NULL),
    ALLOW("rt_sigaction", NULL),
    ALLOW("rt_sigprocmask", NULL),
    ALLOW("rt_sigreturn", NULL),
    ALLOW("rt_sigtimedwait", "the main thread waits for SIGTERM/SIGINT"),
    ALLOW("sigaltstack", NULL),
    ALLOW("getpid", NULL),
    ALLOW("gettid", NULL),
    ALLOW("getuid", "sqlite, gRPC"),
    ALLOW("geteuid", "sqlite, gRPC"),
    ALLOW("getgid", NULL),
    ALLOW("getegid", NULL),
    ALLOW_EQ("kill", 1, SIGTERM, "the control thread stops rpcd when the supervisor is gone"),
    ALLOW("tgkill", "gRPC wakes threads; abort()"),
    ALLOW("getrandom", "volume ids"),
    ALLOW("clock_gettime", NULL),
    ALLOW("clock_nanosleep", NULL),
    ALLOW("nanosleep", NULL),
    ALLOW("gettimeofday", NULL),
    ALLOW("epoll_create1", "gRPC event engine"),
    ALLOW("epoll_ctl", "gRPC event engine"),
    ALLOW("epoll_wait", "gRPC event engine"),
    ALLOW("epoll_pwait", "gRPC event engine"),
    ALLOW("eventfd2", "gRPC wakeup fd"),
    ALLOW("pipe2", "gRPC wakeup fd fallback"),
    ALLOW("poll", NULL),
    ALLOW("ppoll", NULL),
    ALLOW("read", NULL),
    ALLOW("write", NULL),
    ALLOW("readv", NULL),
    ALLOW("writev", NULL),
    ALLOW("pread64", "sqlite"),
    ALLOW("pwrite64", "sqlite"),
    ALLOW("openat", "sqlite database, WAL and shm files"),
    ALLOW("access", "sqlite checks for its journal"),
    ALLOW("close", NULL),
    ALLOW("fstat", NULL),
    ALLOW("newfstatat", NULL),
    ALLOW("lseek", NULL),
    ALLOW("fcntl", "sqlite locks, O_NONBLOCK, close-on-exec"),
    ALLOW("fsync", "sqlite"),
    ALLOW("fdatasync", "sqlite"),
    ALLOW("ftruncate", "sqlite"),
    ALLOW("unlink", "sqlite journal, stale CSI socket"),
    ALLOW("getcwd", "sqlite resolves its path"),
    ALLOW_EQ("socket", 0, AF_UNIX, "the CSI endpoint (unix socket)"),
    EAFNOSUPPORT_UNLESS("socket", 0, AF_UNIX, "domain != AF_UNIX",
                        "gRPC probes IPv4/IPv6 support: a clean error, no network"),
    ALLOW_EQ("socketpair", 0, AF_UNIX, "gRPC wakeups"),
    ALLOW("bind", "the CSI endpoint"),
    ALLOW("listen", "the CSI endpoint"),
    ALLOW("accept4", "CSI connections"),
    ALLOW("getsockname", NULL),
    ALLOW("getpeername", NULL),
    ALLOW("getsockopt", NULL),
    ALLOW("setsockopt", NULL),
    ALLOW("shutdown", NULL),
    ALLOW("recvfrom", NULL),
    ALLOW("sendto", NULL),
    ALLOW("recvmsg", "helper answers, control messages with a new helper fd"),
    ALLOW("sendmsg", "helper requests, gRPC"),
    ALLOW("chmod", "CSI socket mode"),
    ALLOW("fchmod", NULL),
    ALLOW("umask", NULL),
    ALLOW("uname", NULL),
    ALLOW("prlimit64", NULL),
};

static const struct sc_rule *role_table(enum pol_role role, size_t *n)
{
	switch (role) {
	case POL_ROLE_HELPER:
		*n = sizeof(helper_rules) / sizeof(helper_rules[0]);
		return helper_rules;
	case POL_ROLE_RPCD:
		*n = sizeof(rpcd_rules) / sizeof(rpcd_rules[0]);
		return rpcd_rules;
	}
	*n = 0;
	return NULL;
}

static int add_rules(scmp_filter_ctx ctx, const struct sc_rule *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int nr = seccomp_syscall_resolve_name(t[i].name), rc;
		uint32_t act = t[i].act == SC_ENOSYS            ? SCMP_ACT_ERRNO(ENOSYS)
		               : t[i].act == SC_EAFNOSUPPORT_NE ? SCMP_ACT_ERRNO(EAFNOSUPPORT)
		                                                : SCMP_ACT_ALLOW;
		if (nr == __NR_SCMP_ERROR)
			return -1; /* a typo in a table must not silently shrink or grow it */
		if (t[i].act == SC_EAFNOSUPPORT_NE)
			rc = seccomp_rule_add(
			    ctx, act, nr, 1,
			    SCMP_CMP((unsigned int)t[i].arg, SCMP_CMP_NE, t[i].value, 0));
		else if (t[i].arg < 0)
			rc = seccomp_rule_add(ctx, act, nr, 0);
		else
			rc = seccomp_rule_add(ctx, act, nr, 1,
			                      SCMP_CMP((unsigned int)t[i].arg, SCMP_CMP_MASKED_EQ,
			                               t[i].mask, t[i].value));
		if (rc != 0)
			return -1;
	}
	return 0;
}

int pol_seccomp_install(enum pol_role role, bool log_only)
{
	size_t n;
	const struct sc_rule *t = role_table(role, &n);
	if (!t)
		return -1;
	if (seccomp_arch_native() != SCMP_ARCH_X86_64)
		return -1; /* the tables were derived on x86_64 only */

	scmp_filter_ctx ctx = seccomp_init(log_only ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return -1;
	int rc = 0;
	/* Another ABI (i386 int 0x80, x32) never matches: kill, even in log_only mode. */
	rc |= seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	rc |= seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	rc |= seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
	if (rc == 0)
		rc = add_rules(ctx, t, n);
	if (rc == 0 && SANITIZER_RULES)
		rc = add_rules(ctx, sanitizer_rules,
		               sizeof(sanitizer_rules) / sizeof(sanitizer_rules[0]));
	if (rc == 0)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc == 0 ? 0 : -1;
}

size_t pol_seccomp_syscall_count(enum pol_role role)
{
	size_t n, count = 0;
	const struct sc_rule *t = role_table(role, &n);
	for (size_t i = 0; i < n; i++) {
		size_t j;
		for (j = 0; j < i; j++)
			if (strcmp(t[j].name, t[i].name) == 0)
				break;
		if (j == i)
			count++;
	}
	return count;
}

void pol_seccomp_print(enum pol_role role, FILE *out)
{
	size_t n;
	const struct sc_rule *t = role_table(role, &n);
	pol_md_head(out, 3, (const char *[]){"syscall", "allowed when", "why"});
	for (size_t i = 0; i < n; i++) {
		char when[160];
		const char *filter = t[i].filter ? t[i].filter : "always";
		if (t[i].act == SC_ENOSYS)
			filter = "fails with ENOSYS";
		snprintf(when, sizeof(when), "%s%s",
		         t[i].act == SC_EAFNOSUPPORT_NE ? "fails with EAFNOSUPPORT when " : "",
		         filter);
		pol_md_row(out, 3, (const char *[]){t[i].name, when, t[i].why});
	}
}
