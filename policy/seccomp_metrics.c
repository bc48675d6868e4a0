/*
 * The seccomp table of sepcsi-metrics-check: the only filter compiled into it.
 * Read the reasons as the review record; seccomp.c explains the form and how
 * a table is installed.
 */
#include "sc_rules.h"

/*
 * The metrics check (supervisor/sup_metrics_check.c), started by the
 * supervisor for each of rpcd's metrics reports, under ids of its own and with no
 * capability: it reads the report from the memfd it was given, checks it,
 * and writes why it refused it. So it has memory, fstat and pread, and a write
 * to its answer pipe alone; no open, no socket, no exec, no signal.
 */
static const struct sc_rule metrics_rules[] = {
    ALLOW("brk", "malloc"),
    ALLOW("mmap", "malloc: the report's copy (up to 1 MiB) and the keys the check sorts"),
    ALLOW("munmap", "free"),
    ALLOW("mremap", "realloc of the keys"),
    ALLOW("madvise", "malloc trimming; a sanitizer build's shadow memory"),
    ALLOW("newfstatat", "the report's size (fstat)"),
    ALLOW("pread64", "the report"),
    ALLOW("sysinfo", "glibc's qsort asks the memory size before its first sort of more than 1 KiB"),
    ALLOW_EQ("write", 0, POL_SC_METRICS_WHY_FD, "a refusal's line and reason, in one write"),
    ALLOW("exit_group", NULL),
};

const struct pol_sc_table pol_sc_metrics = SC_TABLE("sepcsi-metrics-check", metrics_rules);
