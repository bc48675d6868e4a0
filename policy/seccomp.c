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
 * (mounthelper/mh_at.c) and flag words are checked here. Everything not listed kills the
 * whole process (SCMP_ACT_KILL_PROCESS), or is logged in log_only mode.
 *
 * Architectures: the filter is built for the native ABI only (x86_64). A
 * system call made through another ABI the kernel also accepts, i386 via
 * int 0x80 or x32 (nr | 0x40000000), does not match the filter's architecture
 * and kills the process (SCMP_FLTATR_ACT_BADARCH), in log_only mode too;
 * libseccomp also rejects x32 numbers on the x86_64 ABI.
 */
#include "sc_rules.h"

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

static int add_rules(scmp_filter_ctx ctx, const struct sc_rule *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int nr = seccomp_syscall_resolve_name(t[i].name), rc;
		if (nr == __NR_SCMP_ERROR && t[i].nr > 0)
			nr = t[i].nr; /* newer than libseccomp's table: by number */
		uint32_t act = t[i].act == SC_ENOSYS            ? SCMP_ACT_ERRNO(ENOSYS)
		               : t[i].act == SC_EACCES          ? SCMP_ACT_ERRNO(EACCES)
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
		else if (t[i].and2)
			rc = seccomp_rule_add(ctx, act, nr, 2,
			                      SCMP_CMP((unsigned int)t[i].arg, SCMP_CMP_MASKED_EQ,
			                               t[i].mask, t[i].value),
			                      SCMP_CMP((unsigned int)t[i].arg2, SCMP_CMP_MASKED_EQ,
			                               t[i].mask2, t[i].value2));
		else
			rc = seccomp_rule_add(ctx, act, nr, 1,
			                      SCMP_CMP((unsigned int)t[i].arg, SCMP_CMP_MASKED_EQ,
			                               t[i].mask, t[i].value));
		if (rc != 0)
			return -1;
	}
	return 0;
}

int pol_seccomp_install(const struct pol_sc_table *table, bool log_only)
{
	size_t n = table->n;
	const struct sc_rule *t = table->rules;
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
	if (rc == 0 && table->base)
		rc = add_rules(ctx, table->base->rules, table->base->n);
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
