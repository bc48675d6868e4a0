/*
 * The seccomp table of sepcsi-rpcd: the only filter compiled into rpcd. Read
 * the reasons as the review record; seccomp.c explains the form and how a
 * table is installed.
 */
#include "sc_rules.h"

#include <sched.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>

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
    ALLOW("restart_syscall",
          "the kernel resumes an interrupted sleep with it after SIGSTOP and SIGCONT"),
    ALLOW("rt_sigtimedwait", "the main thread waits for SIGTERM/SIGINT"),
    ALLOW("sigaltstack", NULL),
    ALLOW("getpid", NULL),
    ALLOW("sysinfo", "glibc's qsort asks the memory size before its first sort of more than 1 KiB "
                     "(a request's many parameters or group members)"),
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
    ALLOW("fdatasync", "sqlite; the store's group commit of the WAL"),
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
    ALLOW_EQ("memfd_create", 1, MFD_CLOEXEC | MFD_ALLOW_SEALING,
             "the metrics report for the supervisor, sealed before it is sent"),
    ALLOW("chmod", "CSI socket mode"),
    ALLOW("fchmod", NULL),
    ALLOW("umask", NULL),
    ALLOW("uname", NULL),
    ALLOW("prlimit64", NULL),
};

const struct pol_sc_table pol_sc_rpcd = SC_TABLE("sepcsi-rpcd", rpcd_rules);
