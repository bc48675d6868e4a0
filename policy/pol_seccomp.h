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

#include "pol_sc_load.h"

/*
 * One process's table. Each confined binary links only its own:
 * sepcsi_seccomp_core (pol_sc_core, sepcsi-core), sepcsi_seccomp_helper
 * (pol_sc_helper, which is pol_sc_core's rows and its own), sepcsi_seccomp_tools (pol_sc_tools,
 * sepcsi-runner), sepcsi_seccomp_tree (pol_sc_tree, sepcsi-tree-runner) or sepcsi_seccomp_rpcd
 * (pol_sc_rpcd), sepcsi_seccomp_metrics (pol_sc_metrics); the tools that print
 * tables link them all.
 */
struct pol_sc_table;
extern const struct pol_sc_table pol_sc_core;    /* sepcsi-core */
extern const struct pol_sc_table pol_sc_flusher; /* sepcsi-core's flusher child */
extern const struct pol_sc_table pol_sc_reader;  /* sepcsi-reader, the core's looks */
extern const struct pol_sc_table pol_sc_helper;  /* sepcsi-mounthelper and its workers: core's + */
extern const struct pol_sc_table pol_sc_tools;   /* its tool runner and the mkfs tools */
extern const struct pol_sc_table pol_sc_tree;    /* its tree runner */
extern const struct pol_sc_table pol_sc_probe; /* a tools runner's probe child, over pol_sc_tools */
/* The only descriptor a probe child may send on: its answer socket (runner/tools.c). */
#define POL_SC_PROBE_ANSWER_FD 3
extern const struct pol_sc_table pol_sc_rpcd;  /* sepcsi-rpcd */
extern const struct pol_sc_table pol_sc_audit; /* the helper's audit writer (mh_audit.c) */
/* Its two descriptors: the socket it reads records from, the file it appends them to. */
#define POL_SC_AUDIT_IN  3
#define POL_SC_AUDIT_OUT 4
extern const struct pol_sc_table pol_sc_metrics; /* sepcsi-metrics-check (the supervisor's) */
/* The one descriptor it may write to: the pipe a refusal's reason goes back on. */
#define POL_SC_METRICS_WHY_FD 4

/*
 * Install the table's filter on the calling process (all threads: TSYNC).
 * Default action: kill the process (SCMP_ACT_KILL_PROCESS), or log when
 * log_only (debugging only). Syscalls of any other architecture (i386 via
 * int 0x80, x32) kill the process in both modes. Needs no_new_privs or
 * CAP_SYS_ADMIN; libseccomp also sets no_new_privs. Returns 0, or -1 (the
 * caller must exit: fail closed).
 */
int pol_seccomp_install(const struct pol_sc_table *table, bool log_only);

/*
 * Write the table's filter, as pol_seccomp_install would load it, to out: a
 * big-endian u16 count of BPF instructions, then the instructions as the
 * kernel takes them (for the compiled policy, compiled.c). 0 or -1.
 */
int pol_seccomp_export(const struct pol_sc_table *table, bool log_only, FILE *out);

/* Number of distinct system calls the table allows (with or without an argument filter). */
size_t pol_seccomp_syscall_count(const struct pol_sc_table *table);

/* Print the table as a Markdown table (name, argument filter, reason). */
void pol_seccomp_print(const struct pol_sc_table *table, FILE *out);

#endif
