/*
 * What a process that links no seccomp table (the capable core, its reader and
 * flusher) needs of the filters: loading one compiled elsewhere, and the
 * flusher's descriptor. The tables themselves: pol_seccomp.h.
 */
#ifndef SEPCSI_POL_SC_LOAD_H
#define SEPCSI_POL_SC_LOAD_H

#include <stddef.h>

/* The core flusher's socket (pol_sc_flusher pins its recvmsg and sendto to it). */
#define POL_SC_FLUSH_FD 6

/*
 * Load a filter exported by pol_seccomp_export (len bytes) on the calling
 * process, all threads, after setting no_new_privs: for a process that links
 * no table and no libseccomp (the capable core). 0, or -1 (fail closed).
 */
int pol_seccomp_load(const void *bpf, size_t len);

#endif
