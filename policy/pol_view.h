/*
 * The helper's view of the file system, as a table (policy/view.c): what
 * mounthelper/mh_view.c builds, and what `sepcsi-supervisor
 * --print-privileges` and the docs print. One source of truth.
 */
#ifndef SEPCSI_POL_VIEW_H
#define SEPCSI_POL_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum pol_view_kind {
	POL_VIEW_TMPFS,   /* the root: a tmpfs of the helper's own, nosuid, noexec */
	POL_VIEW_ROOTS,   /* each allowed root: the host's tree there, recursively, shared */
	POL_VIEW_BASES,   /* each base directory: read-write and read-only, nosuid, nodev */
	POL_VIEW_DATA,    /* the data directory: read-write, nosuid, nodev, noexec */
	POL_VIEW_RO_DIR,  /* a host directory (its mount only), read-only, nosuid, nodev */
	POL_VIEW_TOP,     /* /bin and friends: the host's symlink, else a read-only bind */
	POL_VIEW_RO_FILE, /* a host file, read-only, nosuid, nodev, noexec, if the host has it */
	POL_VIEW_PROC,    /* a new procfs: processes only (subset=pid), hidepid=invisible */
	POL_VIEW_NODE,    /* a device node with the host's number, in the view's own /dev */
	POL_VIEW_LOOPS,   /* /dev/loopN, made later by the helper as it needs them */
};

struct pol_view_entry {
	const char *path; /* in the view (and on the host, for what comes from there) */
	enum pol_view_kind kind;
	const char *why;
	bool tools; /* kept in the tool runner's view too (it drops the rest) */
};

/* The table, in the order it is built. */
const struct pol_view_entry *pol_view_table(size_t *n);

/*
 * Where the view holds the i-th base directory read-only (a second clone of
 * it, for read-only binds: the helper may not change a mount's attributes
 * once it is confined); NULL past POL_BASES_MAX. The read-write one is at the
 * base's own path.
 */
const char *pol_view_ro_base(size_t i);

/*
 * Whether an entry is in the tree runner's view: the tool runner's, less the
 * data directory and /proc. It works on the descriptors it is given only, so
 * it needs neither; without them it can reach no image by path, and no other
 * process (/proc/<pid>/mem of the tool runner or of a tool, which its
 * capabilities would let it open).
 */
bool pol_view_tree(const struct pol_view_entry *e);

/* Print it as a Markdown table (path, what it is, which runners keep it, why). */
void pol_view_print(FILE *out);

#endif
