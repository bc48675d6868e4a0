/*
 * Syscall probe for the seccomp filters, in the spirit of bubblewrap's
 * tests/try-syscall.c: every probe runs in its own forked child that installs
 * the filter and makes one call with harmless arguments. A forbidden call must
 * kill the child with SIGSYS; an allowed one must return normally.
 *
 * With root it also checks the capability confinement, including what a
 * program exec'd by the confined helper really gets (nothing).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/loop.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "pol_caps.h"
#include "pol_seccomp.h"
#include "tap.h"

#ifndef SEPCSI_CAPDUMP
#define SEPCSI_CAPDUMP "helper_capdump"
#endif

#define X32_SYSCALL_BIT 0x40000000L

enum probe {
	P_GETPID,
	P_SOCKET_INET,
	P_SOCKET_UNIX,
	P_PTRACE,
	P_KEXEC_LOAD,
	P_INIT_MODULE,
	P_BPF,
	P_UNSHARE_USER,
	P_UNSHARE_NS,
	P_SETNS,
	P_MOUNT,
	P_UMOUNT_DETACH,
	P_CLONE_NEWNS,
	P_FORK,
	P_CLONE3,
	P_TIOCSTI,
	P_OPEN_TREE_RECURSIVE,
	P_KILL_TERM,
	P_KILL_KILL,
	P_EXECVE,
	P_MOUNT_SETATTR,
	P_MKNOD_CHAR,
	P_MKNOD_DISK,
	P_MKNOD_LOOP,
	P_PIVOT_ROOT,
	P_FTRUNCATE,
	P_I386_GETPID,
	P_X32_GETPID,
	P_ABORT,
	P_RESTART_SYSCALL,
	P_SCHED_YIELD,
	P_WRITE,
	P_PIDFD_OPEN,
	P_MMAP_FILE,
	P_MMAP_ANON,
	P_OPENAT,
	P_OPEN_WRITE,
	P_OPEN_TRUNC,
	P_FCNTL_SETOWN,
	P_LOOP_ADD_NEXT,
	P_LOOP_ADD_CHOSEN,
};

/* Leave the child without libc or sanitizer exit hooks (LeakSanitizer would need ptrace). */
static void __attribute__((noreturn)) raw_exit(int status)
{
	for (;;)
		syscall(SYS_exit_group, status);
}

/* getpid through the i386 ABI (int 0x80, syscall 20). */
static long int80_getpid(void)
{
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
	return ret;
}

/* Returns the value the child should exit with when the call was allowed. */
static int do_probe(enum probe p)
{
	char c = 0;
	switch (p) {
	case P_GETPID:
		return syscall(SYS_getpid) == getpid() ? 0 : 1;
	case P_SOCKET_INET: /* 2: refused cleanly with EAFNOSUPPORT */
		/* cppcheck-suppress leakReturnValNotUsed ; a probe in a child that exits at once */
		if (socket(AF_INET, SOCK_STREAM, 0) >= 0)
			return 0;
		return errno == EAFNOSUPPORT ? 2 : 1;
	case P_SOCKET_UNIX:
		/* cppcheck-suppress leakReturnValNotUsed ; a probe in a child that exits at once */
		return socket(AF_UNIX, SOCK_STREAM, 0) >= 0 ? 0 : 1;
	case P_PTRACE:
		return (int)ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0 ? 0 : 1;
	case P_KEXEC_LOAD:
		return (int)syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0UL) == 0 ? 0 : 1;
	case P_INIT_MODULE:
		return (int)syscall(SYS_init_module, NULL, 0UL, "") == 0 ? 0 : 1;
	case P_BPF:
		return (int)syscall(SYS_bpf, 0, NULL, 0) == 0 ? 0 : 1;
	case P_UNSHARE_USER:
		return unshare(CLONE_NEWUSER) == 0 ? 0 : 1;
	case P_UNSHARE_NS:
		return unshare(CLONE_NEWNS) == 0 ? 0 : 1;
	case P_SETNS:
		return setns(-1, 0) == 0 ? 0 : 1;
	case P_MOUNT:
		return mount("none", "/nonexistent", "tmpfs", 0, NULL) == 0 ? 0 : 1;
	case P_SCHED_YIELD:
		return syscall(SYS_sched_yield) == 0 ? 0 : 1;
	case P_RESTART_SYSCALL: /* allowed: EINTR, there being nothing to restart */
		return (int)syscall(SYS_restart_syscall) == -1 && errno == EINTR ? 0 : 1;
	case P_UMOUNT_DETACH:
		return umount2("/nonexistent", MNT_DETACH) == 0 ? 0 : 1;
	case P_CLONE_NEWNS:
		return (int)syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, NULL, NULL, NULL, 0) >= 0 ? 0
		                                                                                : 1;
	case P_FORK: {
		pid_t pid = fork();
		if (pid == 0)
			raw_exit(0);
		return pid > 0 ? 0 : 1;
	}
	case P_CLONE3: {
		long r = syscall(SYS_clone3, NULL, 0);
		return r < 0 && errno == ENOSYS ? 0 : 1;
	}
	case P_TIOCSTI:
		return ioctl(0, TIOCSTI, &c) == 0 ? 0 : 1;
	case P_OPEN_TREE_RECURSIVE:
		return open_tree(AT_FDCWD, "/", OPEN_TREE_CLONE | AT_RECURSIVE) >= 0 ? 0 : 1;
	case P_KILL_KILL:
		return syscall(SYS_kill, 1 << 22, SIGKILL) ==
		       0; /* no such pid, if it were allowed */
	case P_EXECVE: {
		char *argv[] = {(char *)"/bin/true", NULL}, *envp[] = {NULL};
		return (int)syscall(SYS_execve, "/nonexistent/sepcsi-probe", argv, envp) == 0;
	}
	case P_MOUNT_SETATTR:
		return syscall(SYS_mount_setattr, -1, "", AT_EMPTY_PATH, NULL, 0) == 0;
	case P_MKNOD_CHAR: /* /dev/mem-like: a char device of major 1 */
		return syscall(SYS_mknodat, AT_FDCWD, "/nonexistent/x", S_IFCHR | 0600,
		               makedev(1, 1)) == 0;
	case P_MKNOD_DISK: /* a SCSI disk, major 8 */
		return syscall(SYS_mknodat, AT_FDCWD, "/nonexistent/x", S_IFBLK | 0600,
		               makedev(8, 0)) == 0;
	case P_LOOP_ADD_NEXT: /* a new loop device, the kernel's next number; EBADF here */
		return syscall(SYS_ioctl, -1, LOOP_CTL_ADD, ~0UL) == -1 && errno == EBADF ? 0 : 1;
	case P_LOOP_ADD_CHOSEN: /* one of a number chosen (0xffffffff: an int -1 too); EBADF */
		return syscall(SYS_ioctl, -1, LOOP_CTL_ADD, 0xffffffffUL) == -1 ? 0 : 1;
	case P_MKNOD_LOOP: /* allowed by the filter; ENOENT here */
		return syscall(SYS_mknodat, AT_FDCWD, "/nonexistent/x", S_IFBLK | 0600,
		               makedev(7, 300)) == 0;
	case P_PIVOT_ROOT:
		return syscall(SYS_pivot_root, "/nonexistent", "/nonexistent") == 0;
	case P_FTRUNCATE: /* allowed: EBADF */
		return syscall(SYS_ftruncate, -1, 0) == -1 && errno == EBADF ? 0 : 1;
	case P_WRITE: /* to stderr: killed under the probe filter */
		return syscall(SYS_write, 2, "", 0) == 0 ? 0 : 1;
	case P_PIDFD_OPEN: /* the pid of the test itself */
		return syscall(SYS_pidfd_open, getppid(), 0) >= 0 ? 0 : 1;
	case P_MMAP_FILE: /* a mapping of a descriptor (stdin): killed under the probe filter */
		return syscall(SYS_mmap, NULL, 4096, PROT_READ, MAP_SHARED, 0, 0) != -1 ? 0 : 1;
	case P_MMAP_ANON:
		return syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != -1
		           ? 0
		           : 1;
	case P_OPENAT: /* 4: refused cleanly with EACCES */
		/* cppcheck-suppress leakReturnValNotUsed ; a probe in a child that exits at once */
		if (open("/dev/null", O_RDONLY | O_CLOEXEC) >= 0)
			return 0;
		return errno == EACCES ? 4 : 1;
	case P_OPEN_WRITE: /* /dev/null for writing */
		/* cppcheck-suppress leakReturnValNotUsed ; a probe in a child that exits at once */
		return open("/dev/null", O_WRONLY | O_CLOEXEC) >= 0 ? 0 : 1;
	case P_FCNTL_SETOWN: /* SIGIO aimed at a process of its choosing */
		return fcntl(0, F_SETOWN, getpid()) == 0 ? 0 : 1;
	case P_OPEN_TRUNC: /* read-only, but truncating: O_TRUNC on an empty file */
		/* cppcheck-suppress leakReturnValNotUsed ; a probe in a child that exits at once */
		return open("/dev/null", O_RDONLY | O_TRUNC | O_CLOEXEC) >= 0 ? 0 : 1;
	case P_KILL_TERM:
		return kill(getpid(), 0) == 0 ? 0 : 1;
	case P_I386_GETPID:
		return int80_getpid() == getpid() ? 0 : 1;
	case P_X32_GETPID:
		return syscall(X32_SYSCALL_BIT | SYS_getpid) >= 0 ? 0 : 1;
	case P_ABORT: {
		/*
		 * The default action for SIGSEGV, set past libc: a sanitizer build's
		 * handler would make calls outside the filter; the helper has none.
		 */
		const unsigned long dfl[4] = {0}; /* handler SIG_DFL, flags, restorer, mask */
		syscall(SYS_rt_sigaction, SIGSEGV, dfl, NULL, sizeof(dfl[3]));
		abort();
	}
	}
	return 2;
}

/*
 * Run one probe in a child under a table's filter (NULL: no filter). Returns
 * the signal that killed the child, or -(exit status) (so 0 = allowed and
 * succeeded, -1 = allowed but failed, -3 = the filter could not be installed).
 */
static int probe_with(const struct pol_sc_table *table, const struct pol_sc_table *over,
                      bool log_only, enum probe p)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		if ((table && pol_seccomp_install(table, log_only) < 0) ||
		    (over && pol_seccomp_install(over, log_only) < 0))
			raw_exit(3);
		raw_exit(do_probe(p));
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFSIGNALED(st) ? WTERMSIG(st) : -WEXITSTATUS(st);
}

static int probe(const struct pol_sc_table *table, bool log_only, enum probe p)
{
	return probe_with(table, NULL, log_only, p);
}

/* The tool runner's filter: exec and fork, but no mount, namespace, node or network call. */
static void test_tools_filter(void)
{
	const enum probe killed[] = {P_SOCKET_INET,   P_SOCKET_UNIX, P_PTRACE,
	                             P_MOUNT,         P_UNSHARE_NS,  P_OPEN_TREE_RECURSIVE,
	                             P_MOUNT_SETATTR, P_MKNOD_LOOP,  P_MKNOD_DISK,
	                             P_KILL_KILL,     P_PIVOT_ROOT};
	for (size_t i = 0; i < sizeof(killed) / sizeof(killed[0]); i++) {
		int r = probe(&pol_sc_tools, false, killed[i]);
		if (r != SIGSYS)
			fprintf(stderr, "tools probe %d: got %d, want SIGSYS\n", (int)killed[i], r);
		CHECK(r == SIGSYS);
	}
	CHECK(probe(&pol_sc_tools, false, P_EXECVE) != SIGSYS);
	CHECK(probe(&pol_sc_tools, false, P_FORK) == 0);
	CHECK(probe(&pol_sc_tools, false, P_FTRUNCATE) == 0);   /* sizing an image file */
	CHECK(probe(&pol_sc_tools, false, P_SCHED_YIELD) == 0); /* a lock's back-off */
}

/*
 * A probe child of the tools runner: the probe filter over the tools' (as
 * runner/tools.c installs it). libblkid's reads and anonymous memory and the
 * answer; no write, no exec, no fork, no pidfd, no mapping of a file, no open
 * (EACCES, so that libblkid goes on without sysfs).
 */
static int probe_stacked(enum probe p)
{
	return probe_with(&pol_sc_tools, &pol_sc_probe, false, p);
}

static void test_probe_filter(void)
{
	const enum probe killed[] = {P_WRITE,     P_EXECVE,     P_FORK,        P_FTRUNCATE,
	                             P_KILL_KILL, P_PIDFD_OPEN, P_SOCKET_UNIX, P_MOUNT,
	                             P_PTRACE,    P_UNSHARE_NS, P_GETPID,      P_MMAP_FILE};
	for (size_t i = 0; i < sizeof(killed) / sizeof(killed[0]); i++) {
		int r = probe_stacked(killed[i]);
		if (r != SIGSYS)
			fprintf(stderr, "probe child %d: got %d, want SIGSYS\n", (int)killed[i], r);
		CHECK(r == SIGSYS);
	}
	CHECK(probe_stacked(P_MMAP_ANON) == 0);
	CHECK(probe_stacked(P_OPENAT) == -4);
	/* The tools' own filter lets the runner install it, and keeps its pidfd for tools. */
	CHECK(probe(&pol_sc_tools, false, P_PIDFD_OPEN) == 0);
}

/* The tree runner's filter: fork and file calls, but no exec, mount, namespace or node call. */
static void test_tree_filter(void)
{
	const enum probe killed[] = {P_SOCKET_INET,   P_SOCKET_UNIX,   P_PTRACE,
	                             P_MOUNT,         P_UMOUNT_DETACH, P_UNSHARE_NS,
	                             P_CLONE_NEWNS,   P_EXECVE,        P_OPEN_TREE_RECURSIVE,
	                             P_MOUNT_SETATTR, P_MKNOD_LOOP,    P_MKNOD_DISK,
	                             P_KILL_KILL,     P_PIVOT_ROOT,    P_TIOCSTI};
	for (size_t i = 0; i < sizeof(killed) / sizeof(killed[0]); i++) {
		int r = probe(&pol_sc_tree, false, killed[i]);
		if (r != SIGSYS)
			fprintf(stderr, "tree probe %d: got %d, want SIGSYS\n", (int)killed[i], r);
		CHECK(r == SIGSYS);
	}
	CHECK(probe(&pol_sc_tree, false, P_FORK) == 0);        /* a child per job */
	CHECK(probe(&pol_sc_tree, false, P_FTRUNCATE) == 0);   /* a copied file's size */
	CHECK(probe(&pol_sc_tree, false, P_SCHED_YIELD) == 0); /* a lock's back-off */
}

/* What neither the helper nor the capable core may do. */
static const enum probe mounter_killed[] = {
    P_SOCKET_INET,   P_SOCKET_UNIX,
    P_PTRACE,        P_KEXEC_LOAD,
    P_INIT_MODULE,   P_BPF,
    P_UNSHARE_USER,  P_UNSHARE_NS,
    P_SETNS,         P_MOUNT,
    P_UMOUNT_DETACH, P_CLONE_NEWNS,
    P_TIOCSTI,       P_OPEN_TREE_RECURSIVE,
    P_KILL_TERM,     P_KILL_KILL,
    P_EXECVE,        P_MOUNT_SETATTR,
    P_MKNOD_CHAR,    P_MKNOD_DISK,
    P_PIVOT_ROOT,    P_X32_GETPID,
    P_FTRUNCATE, /* image files are sized by the runner */
};

static void check_killed(const struct pol_sc_table *t, const enum probe *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = probe(t, false, p[i]);
		if (r != SIGSYS)
			fprintf(stderr, "probe %d: got %d, want SIGSYS\n", (int)p[i], r);
		CHECK(r == SIGSYS);
	}
}

static void test_helper_filter(void)
{
	check_killed(&pol_sc_helper, mounter_killed,
	             sizeof(mounter_killed) / sizeof(mounter_killed[0]));
	CHECK(probe(&pol_sc_helper, false, P_GETPID) == 0);
	CHECK(probe(&pol_sc_helper, false, P_FORK) == 0);            /* a worker */
	CHECK(probe(&pol_sc_helper, false, P_MKNOD_LOOP) != SIGSYS); /* its own /dev/loopN */
	CHECK(probe(&pol_sc_helper, false, P_CLONE3) == 0); /* ENOSYS, so libc uses clone */
	/* abort() ends the helper with a signal the supervisor restarts, not as a violation. */
	int aborted = probe(&pol_sc_helper, false, P_ABORT);
	CHECK(aborted > 0 && aborted != SIGSYS);
	printf("# abort() under the helper's filter: signal %d\n", aborted);

	/* The i386 ABI: only meaningful if the kernel has it enabled at all. */
	if (probe(NULL, false, P_I386_GETPID) == 0)
		CHECK(probe(&pol_sc_helper, false, P_I386_GETPID) == SIGSYS);
	else
		printf("# i386 ABI not available on this kernel; int 0x80 probe skipped\n");

	/* log_only: the call is logged, not killed; a foreign ABI is still killed. */
	CHECK(probe(&pol_sc_helper, true, P_BPF) == -1);
	CHECK(probe(&pol_sc_helper, true, P_X32_GETPID) == SIGSYS);

	CHECK(pol_seccomp_syscall_count(&pol_sc_helper) > 50);
	CHECK(pol_seccomp_syscall_count(&pol_sc_helper) < 90);
	printf("# helper filter allows %zu system calls\n",
	       pol_seccomp_syscall_count(&pol_sc_helper));
}

/*
 * The capable core: the helper's dangers, no process of its own either, and
 * no SIGIO aimed at another process (fcntl pinned to descriptor and status flags).
 */
static void test_core_filter(void)
{
	const enum probe no_process[] = {P_FORK, P_CLONE3, P_PIDFD_OPEN, P_FCNTL_SETOWN};
	check_killed(&pol_sc_core, mounter_killed,
	             sizeof(mounter_killed) / sizeof(mounter_killed[0]));
	check_killed(&pol_sc_core, no_process, sizeof(no_process) / sizeof(no_process[0]));
	CHECK(probe(&pol_sc_core, false, P_GETPID) == 0);
	CHECK(probe(&pol_sc_core, false, P_MKNOD_LOOP) != SIGSYS); /* its own /dev/loopN */
	/* A new loop device only as the kernel numbers it: never one of a number it chose. */
	CHECK(probe(&pol_sc_core, false, P_LOOP_ADD_NEXT) == 0);
	CHECK(probe(&pol_sc_core, false, P_LOOP_ADD_CHOSEN) == SIGSYS);
	int aborted = probe(&pol_sc_core, false, P_ABORT);
	CHECK(aborted > 0 && aborted != SIGSYS);
	/* Every row of the core's is the helper's too: the helper is the core and more. */
	CHECK(pol_seccomp_syscall_count(&pol_sc_core) < pol_seccomp_syscall_count(&pol_sc_helper));
	printf("# core filter allows %zu system calls\n", pol_seccomp_syscall_count(&pol_sc_core));
}

/* The core's flusher: it writes back what it is handed, and can do nothing else at all. */
static void test_flusher_filter(void)
{
	const enum probe killed[] = {P_OPENAT,    P_WRITE,     P_MMAP_ANON,   P_MOUNT,  P_FORK,
	                             P_EXECVE,    P_KILL_KILL, P_SOCKET_UNIX, P_PTRACE, P_GETPID,
	                             P_FTRUNCATE, P_SETNS,     P_MKNOD_LOOP};
	check_killed(&pol_sc_flusher, killed, sizeof(killed) / sizeof(killed[0]));
	CHECK(pol_seccomp_syscall_count(&pol_sc_flusher) <= 8);
	printf("# core flusher filter allows %zu system calls\n",
	       pol_seccomp_syscall_count(&pol_sc_flusher));
}

/*
 * The core's reader: it reads (openat pinned to reading), answers on fd 3 and
 * logs on stderr; nothing that writes, mounts, forks or signals.
 */
static void test_reader_filter(void)
{
	const enum probe killed[] = {P_OPEN_WRITE,    P_OPEN_TRUNC, P_FTRUNCATE,     P_MOUNT,
	                             P_FORK,          P_CLONE3,     P_EXECVE,        P_KILL_KILL,
	                             P_SOCKET_UNIX,   P_PTRACE,     P_SETNS,         P_MKNOD_LOOP,
	                             P_UMOUNT_DETACH, P_PIDFD_OPEN, P_MOUNT_SETATTR, P_FCNTL_SETOWN,
	                             P_LOOP_ADD_NEXT};
	check_killed(&pol_sc_reader, killed, sizeof(killed) / sizeof(killed[0]));
	CHECK(probe(&pol_sc_reader, false, P_OPENAT) == 0); /* reading is what it is for */
	CHECK(probe(&pol_sc_reader, false, P_WRITE) == 0);  /* its log, on stderr */
	printf("# core reader filter allows %zu system calls\n",
	       pol_seccomp_syscall_count(&pol_sc_reader));
}

/* The helper's audit writer: it appends to its file what its socket brings, and nothing else. */
static void test_audit_filter(void)
{
	const enum probe killed[] = {P_OPENAT, P_WRITE,  P_MMAP_ANON, P_MMAP_FILE,   P_FTRUNCATE,
	                             P_FORK,   P_EXECVE, P_KILL_KILL, P_SOCKET_UNIX, P_PTRACE,
	                             P_GETPID, P_SETNS,  P_MOUNT,     P_MKNOD_LOOP};
	check_killed(&pol_sc_audit, killed, sizeof(killed) / sizeof(killed[0]));
	CHECK(pol_seccomp_syscall_count(&pol_sc_audit) <= 5);
	printf("# helper audit writer filter allows %zu system calls\n",
	       pol_seccomp_syscall_count(&pol_sc_audit));
}

/* The supervisor's metrics check: it reads its report, answers on its pipe, and that is all. */
static void test_metrics_filter(void)
{
	const enum probe killed[] = {P_OPENAT,    P_WRITE,      P_FORK,        P_EXECVE,
	                             P_CLONE3,    P_KILL_KILL,  P_SOCKET_UNIX, P_SOCKET_INET,
	                             P_PTRACE,    P_GETPID,     P_SETNS,       P_MOUNT,
	                             P_FTRUNCATE, P_MKNOD_LOOP, P_BPF};
	check_killed(&pol_sc_metrics, killed, sizeof(killed) / sizeof(killed[0]));
	CHECK(probe(&pol_sc_metrics, false, P_MMAP_ANON) == 0); /* malloc */
	CHECK(pol_seccomp_syscall_count(&pol_sc_metrics) <= 10);
	printf("# metrics check filter allows %zu system calls\n",
	       pol_seccomp_syscall_count(&pol_sc_metrics));
}

static void test_rpcd_filter(void)
{
	CHECK(probe(&pol_sc_rpcd, false, P_GETPID) == 0);
	CHECK(probe(&pol_sc_rpcd, false, P_SOCKET_UNIX) == 0);
	/* No network: an IPv4 socket fails with EAFNOSUPPORT (gRPC probes for it at start). */
	CHECK(probe(&pol_sc_rpcd, false, P_SOCKET_INET) == -2);
	CHECK(probe(&pol_sc_rpcd, false, P_FORK) == SIGSYS); /* threads only */
	CHECK(probe(&pol_sc_rpcd, false, P_MOUNT) == SIGSYS);
	CHECK(probe(&pol_sc_rpcd, false, P_PTRACE) == SIGSYS);
	CHECK(probe(&pol_sc_rpcd, false, P_UNSHARE_USER) == SIGSYS);
	CHECK(probe(&pol_sc_rpcd, false, P_X32_GETPID) == SIGSYS);
}

/* Find "Key:\tvalue" in text; true if present with exactly that value. */
static bool status_is(const char *text, const char *key, const char *value)
{
	char want[128];
	snprintf(want, sizeof(want), "%s:\t%s\n", key, value);
	return strstr(text, want) != NULL;
}

/* In a child: confine as the helper does (checking its bounding set); 0, or an exit code. */
static int confine_like_helper(void)
{
	if (pol_caps_confine_helper(false) < 0)
		return 10;
	if (prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) != 1 ||
	    prctl(PR_CAPBSET_READ, CAP_CHOWN, 0, 0, 0) != 1 ||
	    prctl(PR_CAPBSET_READ, CAP_FOWNER, 0, 0, 0) != 0 ||
	    prctl(PR_CAPBSET_READ, CAP_SETPCAP, 0, 0, 0) != 0)
		return 11;
	/* Deliberately no capability drop after this: securebits alone must do it. */
	return 0;
}

static int confine_like_tree_runner(void)
{
	return pol_caps_confine_tree() < 0 ? 10 : 0;
}

/*
 * In a child: confine(), the tools' filter (which allows exec), then exec
 * helper_capdump; its /proc/self/status in out. True if all of it worked.
 */
static bool capdump_after(int (*confine)(void), char *out, size_t cap)
{
	int pfd[2];
	if (pipe(pfd) < 0)
		abort();
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		int rc = confine();
		if (rc)
			_exit(rc);
		if (pol_seccomp_install(&pol_sc_tools, false) < 0)
			_exit(12);
		char *argv[] = {(char *)SEPCSI_CAPDUMP, NULL}, *envp[] = {NULL};
		execve(SEPCSI_CAPDUMP, argv, envp);
		_exit(13);
	}
	close(pfd[1]);
	size_t len = 0;
	ssize_t n;
	while ((n = read(pfd[0], out + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = '\0';
	close(pfd[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		fprintf(stderr, "capdump child status 0x%x\n%s", st, out);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Confine like the helper, then exec: the program gets no capability. */
static void test_exec_gets_no_caps(void)
{
	char out[4096] = "";
	CHECK(capdump_after(confine_like_helper, out, sizeof(out)));
	CHECK(status_is(out, "CapEff", "0000000000000000"));
	CHECK(status_is(out, "CapPrm", "0000000000000000"));
	CHECK(status_is(out, "CapInh", "0000000000000000"));
	CHECK(status_is(out, "CapAmb", "0000000000000000"));
	/* The optional CAP_SYS_RESOURCE is kept if this test has it (not every machine does). */
	CHECK(status_is(out, "CapBnd",
	                prctl(PR_CAPBSET_READ, CAP_SYS_RESOURCE, 0, 0, 0) == 1
	                    ? "0000000009200001"
	                    : "0000000008200001"));
	CHECK(status_is(out, "NoNewPrivs", "1"));
	CHECK(status_is(out, "Seccomp", "2"));
}

/*
 * Confine like the tree runner, then exec: exactly the four file capabilities
 * survive the exec (as ambient ones), nothing else.
 */
static void test_tree_exec_keeps_file_caps(void)
{
	char out[4096] = "";
	CHECK(capdump_after(confine_like_tree_runner, out, sizeof(out)));
	/* CAP_CHOWN (0), CAP_DAC_OVERRIDE (1), CAP_FOWNER (3), CAP_FSETID (4). */
	CHECK(pol_caps_tree_mask() == 0x1b);
	for (const char *const *k =
	         (const char *const[]){"CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd", NULL};
	     *k; k++)
		CHECK(status_is(out, *k, "000000000000001b"));
	CHECK(status_is(out, "NoNewPrivs", "1"));
	CHECK(status_is(out, "Seccomp", "2"));
}

/* Started without CAP_SYS_RESOURCE (like under the supervisor): confinement still works. */
static void test_optional_cap_absent(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		if (prctl(PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0) < 0)
			raw_exit(10);
		struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
		struct __user_cap_data_struct d[2];
		if (syscall(SYS_capget, &h, d) < 0)
			raw_exit(11);
		d[0].permitted &= ~(1U << CAP_SYS_RESOURCE);
		d[0].effective &= ~(1U << CAP_SYS_RESOURCE);
		if (syscall(SYS_capset, &h, d) < 0)
			raw_exit(12);
		if (pol_caps_confine_helper(false) < 0)
			raw_exit(13);
		if (syscall(SYS_capget, &h, d) < 0)
			raw_exit(14);
		raw_exit(d[0].effective == 0x8200001 && d[0].permitted == 0x8200001 &&
		                 d[1].effective == 0
		             ? 0
		             : 15);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_caps_table(void)
{
	size_t n;
	const struct pol_cap_entry *t = pol_caps_helper_table(&n);
	CHECK(n == 5 && t[0].cap == CAP_SYS_ADMIN && t[1].cap == CAP_CHOWN &&
	      t[2].cap == CAP_MKNOD && t[3].cap == CAP_SYS_RESOURCE);
	CHECK(!t[0].optional && !t[1].optional && !t[2].optional &&
	      t[3].optional == POL_CAP_OPTIONAL);
	CHECK(pol_caps_helper_dirs_mask() == 1ULL << CAP_DAC_OVERRIDE);
	CHECK(pol_caps_helper_mask() ==
	      ((1ULL << CAP_SYS_ADMIN) | (1ULL << CAP_CHOWN) | (1ULL << CAP_MKNOD)));
	CHECK(pol_caps_helper_mask() == 0x8200001ULL);
	CHECK(pol_caps_helper_optional_mask() == 1ULL << CAP_SYS_RESOURCE);
}

int main(void)
{
	test_caps_table();
	/* Every process survives SIGSTOP and SIGCONT during a sleep: restart_syscall is allowed. */
	for (const struct pol_sc_table *const *t =
	         (const struct pol_sc_table *const[]){&pol_sc_core, &pol_sc_flusher, &pol_sc_audit,
	                                              &pol_sc_helper, &pol_sc_tools, &pol_sc_tree,
	                                              &pol_sc_rpcd, NULL};
	     *t; t++)
		CHECK(probe(*t, false, P_RESTART_SYSCALL) == 0);
	test_helper_filter();
	test_core_filter();
	test_flusher_filter();
	test_reader_filter();
	test_audit_filter();
	test_metrics_filter();
	test_tools_filter();
	test_tree_filter();
	test_probe_filter();
	test_rpcd_filter();
	if (geteuid() == 0)
		test_exec_gets_no_caps();
	else
		printf("# not root: exec-capability check skipped\n");
	if (geteuid() == 0)
		test_tree_exec_keeps_file_caps();
	if (geteuid() == 0)
		test_optional_cap_absent();
	return tap_done("test_seccomp");
}
