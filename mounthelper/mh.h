/*
 * Shared state and the error result of sepcsi-mounthelper's operations.
 * Internal to mounthelper/; each module has its own small header.
 */
#ifndef SEPCSI_MH_H
#define SEPCSI_MH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mh_proto.h"
#include "policy.h"

/* What the whole helper shares: set up in mh_main.c before confinement, read-only afterwards. */
struct mh_ctx {
	const struct pol *pol;
	int data_fd;    /* <data-dir>, O_RDONLY|O_DIRECTORY, root-owned, not group/other writable */
	int images_fd;  /* <data-dir>/images, O_RDONLY|O_DIRECTORY, root-owned 0700 */
	int snaps_fd;   /* <data-dir>/snapshots, O_RDONLY|O_DIRECTORY, root-owned 0700 */
	int audit_fd;   /* <data-dir>/audit.log, O_WRONLY|O_APPEND, 0600; -1 if none */
	bool direct_io; /* the data directory takes loop devices' direct I/O (forecast at start) */
	bool reflink;   /* FICLONE works in the data directory (the runner's probe at start) */
	uint64_t max_file_bytes; /* the largest file the data directory takes (the same probe) */
	uid_t owner; /* who owns the images: root for the helper, the orchestrator's uid for the
	                core */
	bool core;   /* the helper asks the capable core to mount, unmount, grow and look */
};

/* Why an operation was not done; becomes MH_ANS_ERROR and the audit line. */
struct mh_res {
	enum mh_err_kind kind; /* MH_E_OK while nothing failed */
	int sys_errno;         /* errno of the failed step, 0 if none */
	char reason[MH_REASON_MAX + 1];
};

/*
 * The helper's error contract (docs/error-handling.md): a step that fails
 * returns -1 (or another negative value) and records why in r; the first
 * failure recorded is the one answered, so a cleanup after it passes a
 * scratch result of its own (&(struct mh_res){0}). Only these four change r.
 */

/* Record the first failure in r (later calls keep it) and return -1. */
int mh_fail(struct mh_res *r, enum mh_err_kind kind, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Replace what r holds by a failure that explains it better; -1. */
int mh_refail(struct mh_res *r, enum mh_err_kind kind, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* r says NOTFOUND and the caller takes absence as an answer: r is cleared, true. */
bool mh_absent(struct mh_res *r);
/* A NOTFOUND in r means the caller's precondition is not met: it becomes kind; -1. */
int mh_missing_means(struct mh_res *r, enum mh_err_kind kind);

/* The error kind for a failed system call: ENOENT -> NOTFOUND, EBUSY -> BUSY, ... */
enum mh_err_kind mh_kind_of_errno(int err);

/* Read a small text file (sysfs) into buf, NUL-terminated; 0, or -1 with errno. */
int mh_read_text(const char *path, char *buf, size_t len);

/* Close *fd if open and set it to -1. */
void mh_closep(int *fd);

#endif
