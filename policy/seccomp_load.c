/*
 * A seccomp filter loaded as it was compiled (pol_sc_load.h): for the capable
 * core, whose filters come in its compiled policy, built by its starter from
 * the core's tables (seccomp_core.c), so that it links neither the tables nor
 * libseccomp. The program is the compiler's; the kernel checks it is a valid
 * one; the compiled policy's hash that it arrived whole (compiled.c).
 */
#include "pol_sc_load.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int pol_seccomp_load(const void *bpf, size_t len)
{
	/* A copy the kernel may take as not const; no allocation, so nothing to free under it. */
	static struct sock_filter copy[BPF_MAXINSNS];
	struct sock_fprog prog = {.len = (unsigned short)(len / sizeof(copy[0])), .filter = copy};
	if (len == 0 || len % sizeof(copy[0]) != 0 || len > sizeof(copy))
		return -1;
	memcpy(copy, bpf, len);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) == 0
	           ? 0
	           : -1;
}
