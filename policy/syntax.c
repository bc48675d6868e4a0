/*
 * The syntax half of the policy: identifiers and path spelling, fixed in code
 * and not configurable (see policy.h). A volume id is never a path, and a
 * path is only ever accepted in one canonical spelling, so the string checks
 * here and the kernel's RESOLVE_BENEATH in the helper agree on what it names.
 *
 * Pure functions, no privilege; used by the helper, rpcd's controller and the
 * tests, so that both sides of the helper protocol apply the same rules.
 */
#include "policy.h"

#include <limits.h>
#include <string.h>

#include "mh_limits.h"

/* ---- identifiers -------------------------------------------------------- */

static bool id_valid(const char *id, const char *prefix)
{
	if (!id || strncmp(id, prefix, 3) != 0)
		return false;
	for (size_t i = 3; i < POL_ID_LEN; i++) {
		char c = id[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false; /* also stops at a NUL: too short */
	}
	return id[POL_ID_LEN] == '\0';
}

bool pol_volume_id_valid(const char *id)
{
	return id_valid(id, "sv-");
}

bool pol_snapshot_id_valid(const char *id)
{
	return id_valid(id, "ss-");
}

bool pol_group_id_valid(const char *id)
{
	return id_valid(id, "gs-");
}

/* ---- file-system types -------------------------------------------------- */

const char *const pol_fs_types[POL_FS_NTYPES] = {"ext4", "xfs", "btrfs"};

bool pol_fs_known(const char *fs)
{
	for (size_t i = 0; fs && i < POL_FS_NTYPES; i++)
		if (strcmp(pol_fs_types[i], fs) == 0)
			return true;
	return false;
}

/* ---- paths -------------------------------------------------------------- */

bool pol_path_syntax_ok(const char *path)
{
	if (!path)
		return false;
	size_t len = strlen(path);
	if (len < 2 || len > MH_PATH_MAX || path[0] != '/' || path[len - 1] == '/')
		return false;
	const char *c = path + 1; /* start of the current component */
	for (const char *s = path + 1;; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '/' || ch == '\0') {
			size_t n = (size_t)(s - c);
			if (n == 0 || n > NAME_MAX) /* "//" or an over-long name */
				return false;
			if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
				return false;
			if (ch == '\0')
				return true;
			c = s + 1;
		} else if (ch < 0x20 || ch == 0x7f) {
			return false;
		}
	}
}

bool pol_paths_nested(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;
	return strncmp(a, b, n) == 0 && (la == lb || (la > lb ? a : b)[n] == '/');
}

/* ---- directory volume names --------------------------------------------- */

#define DIR_NAME_DEPTH 4

bool pol_dir_name_ok(const char *name)
{
	if (!name || !*name || strlen(name) > MH_DIRNAME_MAX)
		return false;
	size_t depth = 0;
	for (const char *c = name;;) {
		size_t n =
		    strspn(c, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");
		if (n == 0 || c[0] == '.' || n > NAME_MAX || ++depth > DIR_NAME_DEPTH ||
		    strncmp(c, "archived-", strlen("archived-")) == 0)
			return false;
		if (c[n] == '\0')
			return true;
		if (c[n] != '/')
			return false;
		c += n + 1;
	}
}
