/*
 * The policy's mkfs options: which words each file system's mkfs may be
 * given. Only what formats links this (the helper's STAGE, the policy
 * loader); the capable core never formats and does not.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pol_int.h"
#include "policy_all.h"

static int fs_index(const char *fstype)
{
	for (size_t i = 0; i < TABLE_LEN(pol_fs_types); i++)
		if (fstype && strcmp(pol_fs_types[i], fstype) == 0)
			return (int)i;
	return -1;
}

/* An mkfs argument word: '-' then printable characters without quotes, '\\' or spaces. */
bool pol_mkfs_word_ok(const char *w, size_t n)
{
	if (n < 2 || n > 64 || w[0] != '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)w[i];
		if (ch <= 0x20 || ch >= 0x7f || ch == '"' || ch == '\'' || ch == '\\')
			return false;
	}
	return true;
}

int pol_mkfs_options_check(const struct pol *p, const char *fstype, const char *list, char *buf,
                           size_t buflen, char **args, size_t max, char *err, size_t errlen)
{
	int fi = fs_index(fstype);
	size_t n = 0, used = 0;
	if (!list || !*list)
		return 0;
	if (fi < 0 || !pol_fs_allowed(p, fstype)) {
		pol_seterr(err, errlen, "no mkfs options for file system '%s'",
		           fstype ? fstype : "");
		return -EPERM;
	}
	for (const char *s = list; *s; s++) {
		if (*s != ' ' && ((unsigned char)*s < 0x20 || *s == 0x7f)) {
			pol_seterr(err, errlen, "control character in mkfs options");
			return -EINVAL;
		}
	}
	const char *s = list;
	for (;;) {
		s += strspn(s, " ");
		size_t wl = strcspn(s, " ");
		if (wl == 0)
			break;
		const char *w = s, *v = NULL;
		size_t vl = 0;
		s += wl;
		/* "-X value": a bare short flag takes the next word as its value. */
		if (wl == 2 && w[0] == '-' && w[1] != '-') {
			const char *t = s + strspn(s, " ");
			size_t tl = strcspn(t, " ");
			if (tl > 0 && t[0] != '-') {
				v = t;
				vl = tl;
				s = t + tl;
			}
		}
		if (n >= max || used + wl + vl + 1 > buflen) {
			pol_seterr(err, errlen, "too many mkfs options");
			return -EINVAL;
		}
		char *arg = buf + used;
		memcpy(arg, w, wl);
		if (v)
			memcpy(arg + wl, v, vl);
		arg[wl + vl] = '\0';
		used += wl + vl + 1;
		if (!pol_mkfs_word_ok(arg, wl + vl)) {
			pol_seterr(err, errlen, "malformed mkfs option '%.64s'", arg);
			return -EINVAL;
		}
		if (!pol_list_has(&p->mkfs[fi], arg, wl + vl)) {
			pol_seterr(err, errlen, "mkfs option '%s' not allowed by policy for %s",
			           arg, fstype);
			return -EPERM;
		}
		args[n++] = arg;
	}
	return (int)n;
}

const char *pol_mkfs_option(const struct pol *p, const char *fstype, size_t i)
{
	int fi = fs_index(fstype);
	return fi < 0 || i >= p->mkfs[fi].n ? NULL : p->mkfs[fi].v[i];
}
