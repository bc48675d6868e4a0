/*
 * Path spelling, fixed in code (see policy.h): a path is only ever accepted
 * in one canonical spelling, so the string checks here and the kernel's
 * RESOLVE_BENEATH in the helper agree on what it names.
 *
 * Pure functions, no privilege; used by the helper, its core, rpcd's
 * controller, the supervisor and the tests.
 */
#include "policy.h"

#include <limits.h>
#include <string.h>

#include "mh_limits.h"

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
