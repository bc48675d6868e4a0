/*
 * The syntax half of the policy: volume and snapshot identifiers, fixed in
 * code and not configurable (see policy.h; group ids and file-system types,
 * which the capable core never asks, are query.c's). A volume id is never a path; the
 * spelling of paths is paths.c's, of directory volumes' names dirname.c's.
 *
 * Pure functions, no privilege; used by the helper, rpcd's controller and the
 * tests, so that both sides of the helper protocol apply the same rules.
 */
#include "policy.h"

#include <string.h>

#include "pol_int.h"

/* ---- identifiers -------------------------------------------------------- */

bool pol_id_valid(const char *id, const char *prefix)
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
	return pol_id_valid(id, "sv-");
}

bool pol_snapshot_id_valid(const char *id)
{
	return pol_id_valid(id, "ss-");
}
