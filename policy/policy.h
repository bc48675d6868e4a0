/*
 * The helper's policy: what sepcsi-mounthelper will do for rpcd, and nothing
 * more. It names the roots beneath which staging and target paths must lie,
 * the filesystem types and mount options it accepts, the volume size bounds,
 * and the seccomp debug switch. It also fixes the identifier syntax: a volume
 * or snapshot id is never a path, so it can never climb out of a directory.
 *
 * The policy file is an INI file (docs/policy.md). Loading is all or nothing:
 * an unknown section or key, a malformed value or an unreadable file is an
 * error naming file:line; the defaults are never used in place of a broken file.
 *
 * Pure code (no privilege needed); used by the helper before and after it
 * confines itself, and by the tests.
 */
#ifndef SEPCSI_POLICY_H
#define SEPCSI_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POL_ROOTS_MAX    16 /* allowed_roots entries */
#define POL_BASES_MAX    8  /* base_dirs entries */
#define POL_PATTERNS_MAX 16 /* staging_paths, target_paths entries each */
#define POL_FSTYPES_MAX  8  /* filesystem types */
#define POL_OPTS_MAX     64 /* mount_options entries */
#define POL_ID_LEN       35 /* "sv-" or "ss-" followed by 32 lowercase hex digits */

/* Opaque; allocated by pol_load(), released by pol_free(). Immutable once loaded. */
struct pol;

void pol_free(struct pol *p); /* NULL is fine */

/*
 * The policy in compiled form (compiled.c), for a process that links no
 * parser of the policy file (pol_compile in policy_all.h writes it):
 * pol_load_compiled reads one from fd (to its end), 0 with *out, or -1 with
 * err. The compiled form is bounded and checked whole, not re-validated.
 */
int pol_load_compiled(int fd, struct pol **out, char *err, size_t errlen);

/*
 * What a compiled policy also carries, for the capable core, which links
 * neither its own capability table nor its seccomp tables: the capabilities it
 * keeps (and those it keeps if permitted), and its filter, its flusher's and
 * its reader's, built by the compiler from policy/seccomp_core.c and seccomp_reader.c
 * (pol_seccomp_load loads one). A policy loaded from its file has none (0, NULL).
 */
enum pol_filter { POL_FILTER_CORE, POL_FILTER_FLUSHER, POL_FILTER_READER, POL_FILTERS };
void pol_core_caps(const struct pol *p, uint64_t *caps, uint64_t *optional);
const void *pol_core_filter(const struct pol *p, enum pol_filter which, size_t *len);

/* "sv-" + 32 lowercase hex digits; anything else (NULL, '/', "..", upper case) is false. */
bool pol_volume_id_valid(const char *id);
/* "ss-" + 32 lowercase hex digits. */
bool pol_snapshot_id_valid(const char *id);
/*
 * The canonical spelling of an absolute path: starts with '/', no empty, "."
 * or ".." component (so no "//" and no trailing '/'), no control character,
 * at most MH_PATH_MAX bytes and NAME_MAX per component. "/" itself is refused.
 */
bool pol_path_syntax_ok(const char *path);

/* Is one of the two canonical paths equal to or beneath the other? */
bool pol_paths_nested(const char *a, const char *b);

/* What a path is for: where STAGE mounts, or where PUBLISH puts a volume. */
enum pol_path_role {
	POL_STAGING = 1, /* [paths] staging_paths */
	POL_TARGET = 2,  /* [paths] target_paths */
};

/*
 * Check a staging or target path: canonical spelling (pol_path_syntax_ok),
 * strictly beneath one of the allowed roots, and the rest matching one of the
 * path patterns of a role in roles (a mask of enum pol_path_role) under that root.
 * A pattern is relative to each root; '*' is one component, a last '**' one
 * or more. Returns 0 and sets *root_out (may be NULL) to the matching root,
 * owned by p; -EINVAL if malformed, -EPERM if no pattern matches.
 */
int pol_path_check(const struct pol *p, const char *path, unsigned roles, const char **root_out);

/* True if fstype is one of the policy's filesystem types (exact match). */
bool pol_fs_allowed(const struct pol *p, const char *fstype);

/*
 * Check a comma-separated mount option list (may be empty): well formed (no
 * empty item, no quotes, no control characters) and every option on the
 * allowlist. "name" is allowed by an entry "name"; "name=value" only by an
 * entry "name=". Returns 0, or -EINVAL (malformed) / -EPERM (not allowed)
 * with err naming the option.
 */
int pol_mount_options_check(const struct pol *p, const char *list, char *err, size_t errlen);

/*
 * The generic (VFS) mount options the helper can apply: one table for the
 * policy's check (the only VFS options a policy may allow) and the helper's
 * mount. Each sets and clears mount attributes (MOUNT_ATTR_*) and superblock
 * flags (POL_SB_*); nosuid and nodev are forced on every mount anyway.
 */
enum { POL_SB_RO = 1, POL_SB_SYNC = 2, POL_SB_DIRSYNC = 4, POL_SB_LAZYTIME = 8 };
struct pol_vfs_opt {
	const char *name;
	uint64_t attr_set, attr_clear;
	unsigned sb_set, sb_clear;
};
/* The option named by the len bytes at name, or NULL. */
const struct pol_vfs_opt *pol_vfs_opt(const char *name, size_t len);

/* The longest a source file system may stay frozen for a copy, in seconds. */
unsigned pol_freeze_max_seconds(const struct pol *p);

#endif
