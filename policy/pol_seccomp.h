/*
 * The seccomp allowlists of the sepcsi processes, as reviewed tables in
 * seccomp.c (one source of truth for the filter and for docs/helper.md).
 */
#ifndef SEPCSI_POL_SECCOMP_H
#define SEPCSI_POL_SECCOMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum pol_role {
	POL_ROLE_HELPER = 1, /* sepcsi-mounthelper and the mkfs tools it execs */
	POL_ROLE_RPCD = 2,   /* sepcsi-rpcd (starting table; tuned against the running rpcd) */
};

/*
 * Install the role's filter on the calling process (all threads: TSYNC).
 * Default action: kill the process (SCMP_ACT_KILL_PROCESS), or log when
 * log_only (debugging only). Syscalls of any other architecture (i386 via
 * int 0x80, x32) kill the process in both modes. Needs no_new_privs or
 * CAP_SYS_ADMIN; libseccomp also sets no_new_privs. Returns 0, or -1 (the
 * caller must exit: fail closed).
 */
int pol_seccomp_install(enum pol_role role, bool log_only);

/* Number of distinct system calls the role's table allows (with or without an argument filter). */
size_t pol_seccomp_syscall_count(enum pol_role role);

/* Print the role's table as a Markdown table (name, argument filter, reason). */
void pol_seccomp_print(enum pol_role role, FILE *out);

#endif
