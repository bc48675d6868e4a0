/*
 * The rest of the policy's interface, beyond what the capable core reads
 * (policy.h): loading the file and compiling it, the group snapshot ids, the
 * file-system types sepcsi formats, mkfs options, sizes, directory volumes'
 * bases and names, and the lists printed for logs and docs. For the helper,
 * rpcd, the supervisor, the tools and the tests; the core includes none of it.
 */
#ifndef SEPCSI_POLICY_ALL_H
#define SEPCSI_POLICY_ALL_H

#include <stdio.h>

#include "policy.h"

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

/* The compiled form of a loaded policy, written to out (pol_load_compiled reads it). */
int pol_compile(const struct pol *p, FILE *out);

/* "gs-" + 32 lowercase hex digits (a group snapshot; rpcd only). */
bool pol_group_id_valid(const char *id);

/* The file systems sepcsi knows how to format and grow; a policy may only narrow this. */
#define POL_FS_NTYPES 3
extern const char *const pol_fs_types[POL_FS_NTYPES];
/* Is fs one of pol_fs_types? */
bool pol_fs_known(const char *fs);

/* For logs and docs: the i-th path pattern of one role, NULL past the end. */
const char *pol_path_pattern(const struct pol *p, enum pol_path_role role, size_t i);

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
