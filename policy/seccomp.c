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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/xattr.h>
#include <termios.h>
#include <unistd.h>

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

/* The table's filter, ready to load or export; NULL if it cannot be built. */
static scmp_filter_ctx build(const struct pol_sc_table *table, bool log_only)
{
	size_t n = table->n;
	const struct sc_rule *t = table->rules;
	if (seccomp_arch_native() != SCMP_ARCH_X86_64)
		return NULL; /* the tables were derived on x86_64 only */

	scmp_filter_ctx ctx = seccomp_init(log_only ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return NULL;
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
	if (rc != 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

int pol_seccomp_install(const struct pol_sc_table *table, bool log_only)
{
	scmp_filter_ctx ctx = build(table, log_only);
	int rc = ctx ? seccomp_load(ctx) : -1;
	if (ctx)
		seccomp_release(ctx);
	return rc == 0 ? 0 : -1;
}

int pol_seccomp_export(const struct pol_sc_table *table, bool log_only, FILE *out)
{
	scmp_filter_ctx ctx = build(table, log_only);
	int fd = memfd_create("sepcsi-filter", MFD_CLOEXEC), rc = -1;
	off_t len;
	if (ctx && fd >= 0 && seccomp_export_bpf(ctx, fd) == 0 &&
	    (len = lseek(fd, 0, SEEK_CUR)) > 0 && len % 8 == 0 && len / 8 <= 4096 &&
	    lseek(fd, 0, SEEK_SET) == 0) {
		/* u16 instructions, then the program as the kernel takes it (host order) */
		(void)fputc((int)(len / 8) >> 8, out);
		(void)fputc((int)(len / 8) & 0xff, out);
		char buf[4096];
		ssize_t n;
		rc = 0;
		while (rc == 0 && (n = read(fd, buf, sizeof(buf))) != 0)
			rc = n > 0 && fwrite(buf, 1, (size_t)n, out) == (size_t)n ? 0 : -1;
	}
	if (fd >= 0)
		close(fd);
	if (ctx)
		seccomp_release(ctx);
	return rc;
}
