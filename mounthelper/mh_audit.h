/* The helper's audit writer beside its capable core (mh_audit.c). */
#ifndef SEPCSI_MH_AUDIT_H
#define SEPCSI_MH_AUDIT_H

#include <stdbool.h>
#include <sys/types.h>

/*
 * Fork the writer of the audit file open as file_fd (which the helper then
 * closes), writing as uid and gid, under pol_sc_audit (logging only with
 * log_only). Returns the helper's end of its socket: one write, one record.
 * Fatal if it cannot.
 */
int mh_audit_writer_start(int file_fd, uid_t uid, gid_t gid, bool log_only);

/*
 * The helper's end again, for its main loop to notice the writer gone (it then
 * ends: nothing it does goes unrecorded); -1 without a writer.
 */
int mh_audit_writer_fd(void);

#endif
