/*
 * The policy's queries that only the helper, the printers and the tests ask:
 * sizes, the roots and bases it lists, the patterns. Apart from policy.c, so
 * that the capable core, which asks none of them, links none of them.
 */
#include "policy_all.h"

#include <string.h>

#include "pol_int.h"

bool pol_group_id_valid(const char *id)
{
	return pol_id_valid(id, "gs-");
}

/* The file-system types sepcsi formats and grows. */
const char *const pol_fs_types[POL_FS_NTYPES] = {"ext4", "xfs", "btrfs"};

bool pol_fs_known(const char *fs)
{
	for (size_t i = 0; fs && i < POL_FS_NTYPES; i++)
		if (strcmp(pol_fs_types[i], fs) == 0)
			return true;
	return false;
}

static const char *list_at(const struct pol_list *l, size_t i)
{
	return i < l->n ? l->v[i] : NULL;
}

const char *pol_path_pattern(const struct pol *p, enum pol_path_role role, size_t i)
{
	return list_at(role == POL_STAGING ? &p->staging : &p->targets, i);
}

uint64_t pol_min_volume_bytes(const struct pol *p)
{
	return p->min_bytes;
}

uint64_t pol_max_volume_bytes(const struct pol *p)
{
	return p->max_bytes;
}

unsigned pol_overcommit_percent(const struct pol *p)
{
	return p->overcommit_pct;
}

bool pol_seccomp_log_only(const struct pol *p)
{
	return p->log_only;
}

const char *pol_root(const struct pol *p, size_t i)
{
	return list_at(&p->roots, i);
}

const char *pol_base_dir(const struct pol *p, size_t i)
{
	return list_at(&p->bases, i);
}

bool pol_base_dir_known(const struct pol *p, const char *path)
{
	return path && pol_list_has(&p->bases, path, strlen(path));
}

bool pol_base_shared(const struct pol *p, size_t i)
{
	return i < p->bases.n && (p->shared_bases >> i & 1);
}

const char *pol_fstype(const struct pol *p, size_t i)
{
	return list_at(&p->fstypes, i);
}

const char *pol_mount_option(const struct pol *p, size_t i)
{
	return list_at(&p->opts, i);
}
