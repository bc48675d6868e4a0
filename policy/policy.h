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
#include <stdio.h>

#define POL_ROOTS_MAX    16 /* allowed_roots entries */
#define POL_BASES_MAX    8  /* base_dirs entries */
#define POL_PATTERNS_MAX 16 /* staging_paths, target_paths entries each */
#define POL_FSTYPES_MAX  8  /* filesystem types */
#define POL_OPTS_MAX     64 /* mount_options entries */
#define POL_ID_LEN       35 /* "sv-" or "ss-" followed by 32 lowercase hex digits */

/* Opaque; allocated by pol_load(), released by pol_free(). Immutable once loaded. */
struct pol;

/*
 * Load the policy: the embedded defaults, overridden key by key by the INI
 * file at path (NULL = defaults only). On success returns 0 and *out (the
 * caller frees it with pol_free). On failure returns -1, *out is NULL and err
 * holds one line such as "/etc/sepcsi/policy.ini:7: unknown key 'foo' in [paths]".
 */
int pol_load(const char *path, struct pol **out, char *err, size_t errlen);
/*
 * The same from a file already in memory (buf, len bytes, not NUL-terminated;
 * a NUL byte inside is an error); name stands for the file in err. pol_load
 * reads the file and calls this.
 */
int pol_load_buffer(const char *name, const char *buf, size_t len, struct pol **out, char *err,
                    size_t errlen);
void pol_free(struct pol *p); /* NULL is fine */

/*
 * The policy in compiled form (compiled.c), for a process that links no
 * parser of the policy file: pol_compile writes a loaded policy to out;
 * pol_load_compiled reads one from fd (to its end), 0 with *out, or -1 with
 * err. The compiled form is bounded and checked whole, not re-validated.
 */
int pol_compile(const struct pol *p, FILE *out);
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
/* "gs-" + 32 lowercase hex digits (a group snapshot; rpcd only). */
bool pol_group_id_valid(const char *id);

/* The file systems sepcsi knows how to format and grow; a policy may only narrow this. */
#define POL_FS_NTYPES 3
extern const char *const pol_fs_types[POL_FS_NTYPES];
/* Is fs one of pol_fs_types? */
bool pol_fs_known(const char *fs);

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

/* For logs and docs: the i-th path pattern of one role, NULL past the end. */
const char *pol_path_pattern(const struct pol *p, enum pol_path_role role, size_t i);

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

#define POL_MKFS_ARGS_MAX 16 /* options one STAGE may pass to mkfs */

/*
 * Check the space-separated mkfs options of a STAGE for fstype. A short flag
 * and its value may be written apart ("-m 0") or together ("-m0"); both are
 * normalised to the single argument "-m0", and each argument must then equal
 * an entry of the policy's mkfs_options_<fstype> list exactly. On success the
 * arguments are stored in buf (buflen bytes) and pointed to by args[0..n);
 * returns n (0 for an empty list). Returns -EINVAL (malformed, too many) or
 * -EPERM (not allowed) with err naming the option.
 */
int pol_mkfs_options_check(const struct pol *p, const char *fstype, const char *list, char *buf,
                           size_t buflen, char **args, size_t max, char *err, size_t errlen);

/* For logs and docs: the i-th allowed mkfs option for fstype, NULL past the end. */
const char *pol_mkfs_option(const struct pol *p, const char *fstype, size_t i);

/* Volume size bounds in bytes, inclusive. */
uint64_t pol_min_volume_bytes(const struct pol *p);
uint64_t pol_max_volume_bytes(const struct pol *p);

/*
 * Promised bytes (the sizes of all images and snapshots) may reach the data
 * directory's file system size times this many percent ([volumes]
 * overcommit_ratio, default 1.0 = 100).
 */
unsigned pol_overcommit_percent(const struct pol *p);

/* The longest a source file system may stay frozen for a copy, in seconds. */
unsigned pol_freeze_max_seconds(const struct pol *p);

/* True when the seccomp filters should log instead of kill (debugging only). */
bool pol_seccomp_log_only(const struct pol *p);

/*
 * Directory volumes: the i-th base directory ([directories] base_dirs), NULL
 * past the end; and whether path is one of them, exactly.
 */
const char *pol_base_dir(const struct pol *p, size_t i);
bool pol_base_dir_known(const struct pol *p, const char *path);
/*
 * Whether the i-th base is shared ([directories] shared_base_dirs): one cluster
 * file system mounted at that path on every node, so any node's helper may act
 * on its volumes, and marks are records in the base (no trusted.* attribute).
 */
bool pol_base_shared(const struct pol *p, size_t i);

/*
 * A directory volume's name beneath its base: 1 to 4 components separated by
 * one '/', each of ASCII letters, digits, '.', '_' and '-', not starting with
 * '.' or "archived-" (an archived volume's name), at most MH_DIRNAME_MAX
 * bytes in all. So a name never leaves its base,
 * never names the helper's own ".sepcsi-*" directories, and never an archive.
 */
bool pol_dir_name_ok(const char *name);

/* For logs and docs: the i-th allowed root / fs type / option, NULL past the end. */
const char *pol_root(const struct pol *p, size_t i);
const char *pol_fstype(const struct pol *p, size_t i);
const char *pol_mount_option(const struct pol *p, size_t i);

#endif
