/*
 * The names of directory volumes beneath a base, fixed in code (see
 * policy.h). Pure functions, no privilege; used by the helper, rpcd's
 * controller and the tests (not the capable core: it serves no directory
 * volume).
 */
#include "policy_all.h"

#include <limits.h>
#include <string.h>

#include "mh_limits.h"

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
