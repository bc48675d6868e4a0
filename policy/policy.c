/*
 * The policy's queries, which the helper asks before it touches anything
 * (see policy.h and docs/policy.md): paths, file-system types, mount and
 * mkfs options. Loading the file is policy_load.c; the fixed syntax of ids and
 * paths is syntax.c.
 *
 * Runs in the helper, as root, under seccomp: the queries only read memory.
 * Nothing here is fatal.
 */
#include "policy.h"

#include <errno.h>
#include <libmount/libmount.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "mh_limits.h"
#include "pol_int.h"

/*
 * Generic (VFS) mount options a policy may allow: those the helper maps onto
 * mount attributes or superblock flags. Every other option libmount knows as
 * a VFS or userspace option (suid, dev, bind, remount, shared, user, loop, ...)
 * cannot be allowed at all. nosuid and nodev are always forced, so listing
 * them changes nothing.
 */
static const struct pol_vfs_opt vfs_opts[] = {
    {"ro", MOUNT_ATTR_RDONLY, 0, POL_SB_RO, 0},
    {"rw", 0, MOUNT_ATTR_RDONLY, 0, POL_SB_RO},
    {"noexec", MOUNT_ATTR_NOEXEC, 0, 0, 0},
    {"exec", 0, MOUNT_ATTR_NOEXEC, 0, 0},
    {"noatime", MOUNT_ATTR_NOATIME, MOUNT_ATTR__ATIME, 0, 0},
    {"relatime", MOUNT_ATTR_RELATIME, MOUNT_ATTR__ATIME, 0, 0},
    {"strictatime", MOUNT_ATTR_STRICTATIME, MOUNT_ATTR__ATIME, 0, 0},
    {"nodiratime", MOUNT_ATTR_NODIRATIME, 0, 0, 0},
    {"sync", 0, 0, POL_SB_SYNC, 0},
    {"dirsync", 0, 0, POL_SB_DIRSYNC, 0},
    {"lazytime", 0, 0, POL_SB_LAZYTIME, 0},
    {"nosuid", MOUNT_ATTR_NOSUID, 0, 0, 0},
    {"nodev", MOUNT_ATTR_NODEV, 0, 0, 0},
};

const struct pol_vfs_opt *pol_vfs_opt(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(vfs_opts) / sizeof(vfs_opts[0]); i++)
		if (strlen(vfs_opts[i].name) == len && memcmp(vfs_opts[i].name, name, len) == 0)
			return &vfs_opts[i];
	return NULL;
}

void pol_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

char *pol_xstrdup(const char *s)
{
	char *d = strdup(s);
	if (!d)
		abort(); /* allocation failure aborts (error-handling contract) */
	return d;
}

bool pol_list_has(const struct pol_list *l, const char *s, size_t n)
{
	for (size_t i = 0; i < l->n; i++)
		if (strlen(l->v[i]) == n && memcmp(l->v[i], s, n) == 0)
			return true;
	return false;
}

/* ---- paths -------------------------------------------------------------- */

/* Does rel (a canonical relative path) match pattern? '*' one component, last '**' the rest. */
static bool pattern_match(const char *pat, const char *rel)
{
	for (;;) {
		size_t pl = strcspn(pat, "/"), rl = strcspn(rel, "/");
		if (pl == 2 && pat[0] == '*' && pat[1] == '*' && pat[2] == '\0')
			return true; /* one or more components: rel is not empty here */
		if (!(pl == 1 && pat[0] == '*') && (pl != rl || memcmp(pat, rel, pl) != 0))
			return false;
		pat += pl;
		rel += rl;
		if (*pat == '\0' || *rel == '\0')
			return *pat == '\0' && *rel == '\0';
		pat++;
		rel++;
	}
}

static const struct pol_list *role_list(const struct pol *p, enum pol_path_role role)
{
	return role == POL_STAGING ? &p->staging : &p->targets;
}

int pol_path_check(const struct pol *p, const char *path, unsigned roles, const char **root_out)
{
	if (root_out)
		*root_out = NULL;
	if (!path || !pol_path_syntax_ok(path))
		return -EINVAL;
	for (size_t i = 0; i < p->roots.n; i++) {
		const char *r = p->roots.v[i];
		size_t rl = strlen(r);
		/* Strictly beneath: "/root/x", never "/root" itself nor "/rootX/...". */
		if (strncmp(path, r, rl) != 0 || path[rl] != '/' || path[rl + 1] == '\0')
			continue;
		for (unsigned role = POL_STAGING; role <= POL_TARGET; role <<= 1) {
			const struct pol_list *l = role_list(p, (enum pol_path_role)role);
			for (size_t j = 0; (roles & role) && j < l->n; j++) {
				if (pattern_match(l->v[j], path + rl + 1)) {
					if (root_out)
						*root_out = r;
					return 0;
				}
			}
		}
	}
	return -EPERM;
}

/* ---- filesystems and options -------------------------------------------- */

bool pol_fs_allowed(const struct pol *p, const char *fstype)
{
	return fstype && pol_list_has(&p->fstypes, fstype, strlen(fstype));
}

int pol_mount_options_check(const struct pol *p, const char *list, char *err, size_t errlen)
{
	if (!list)
		return 0;
	size_t len = strlen(list);
	if (len == 0)
		return 0;
	if (len > MH_OPTS_MAX) {
		pol_seterr(err, errlen, "mount options longer than %d bytes", MH_OPTS_MAX);
		return -EINVAL;
	}
	/* libmount skips empty items and honours quotes; we refuse both outright. */
	if (list[0] == ',' || list[len - 1] == ',' || strstr(list, ",,")) {
		pol_seterr(err, errlen, "empty item in mount options");
		return -EINVAL;
	}
	for (const char *s = list; *s; s++) {
		if (*s == '"' || (unsigned char)*s < 0x20 || *s == 0x7f) {
			pol_seterr(err, errlen, "quote or control character in mount options");
			return -EINVAL;
		}
	}
	char *copy = pol_xstrdup(list), *cur = copy, *name, *value;
	size_t nsz, vsz;
	int rc, ret = 0;
	while ((rc = mnt_optstr_next_option(&cur, &name, &nsz, &value, &vsz)) == 0) {
		char want[MH_OPTS_MAX + 2];
		if (nsz == 0 || nsz > MH_OPTS_MAX || memchr(name, '=', nsz)) {
			pol_seterr(err, errlen, "malformed mount option");
			ret = -EINVAL;
			break;
		}
		/* "name=value" needs the entry "name=" */
		snprintf(want, sizeof(want), "%.*s%s", (int)nsz, name, value ? "=" : "");
		if (!pol_list_has(&p->opts, want, strlen(want))) {
			pol_seterr(err, errlen, "mount option '%s%s' not allowed by policy", want,
			           value ? "..." : "");
			ret = -EPERM;
			break;
		}
	}
	if (rc < 0 && ret == 0) {
		pol_seterr(err, errlen, "malformed mount options");
		ret = -EINVAL;
	}
	free(copy);
	return ret;
}

unsigned pol_freeze_max_seconds(const struct pol *p)
{
	return p->freeze_max_s;
}

/* ---- mkfs options ------------------------------------------------------- */

struct pol_list *pol_list_at(struct pol *p, size_t i)
{
	struct pol_list *all[] = {&p->roots,   &p->fstypes, &p->opts,    &p->bases,  &p->staging,
	                          &p->targets, &p->mkfs[0], &p->mkfs[1], &p->mkfs[2]};
	_Static_assert(POL_NFS == 3, "one list per file system");
	return i < sizeof(all) / sizeof(all[0]) ? all[i] : NULL;
}

void pol_list_clear(struct pol_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	l->n = 0;
}

void pol_free(struct pol *p)
{
	if (!p)
		return;
	pol_list_clear(&p->roots);
	pol_list_clear(&p->bases);
	pol_list_clear(&p->staging);
	pol_list_clear(&p->targets);
	pol_list_clear(&p->fstypes);
	pol_list_clear(&p->opts);
	for (size_t i = 0; i < POL_NFS; i++)
		pol_list_clear(&p->mkfs[i]);
	for (size_t i = 0; i < POL_FILTERS; i++)
		free(p->filter[i]);
	free(p);
}
