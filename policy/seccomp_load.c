/*
 * A seccomp filter loaded as it was compiled (pol_seccomp.h): for the capable
 * core, whose filters come in its compiled policy, built by its starter from
 * the core's tables (seccomp_core.c), so that it links neither the tables nor
 * libseccomp. The program is the compiler's; the kernel checks it is a valid
 * one; the compiled policy's hash that it arrived whole (compiled.c).
 */
#include "pol_seccomp.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int pol_seccomp_load(const void *bpf, size_t len)
{
	struct sock_fprog prog = {.len = (unsigned short)(len / sizeof(struct sock_filter)),
	                          .filter = (struct sock_filter *)(uintptr_t)bpf};
	if (len == 0 || len % sizeof(struct sock_filter) != 0 || prog.len != len / 8 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) == 0
	           ? 0
	           : -1;
}
