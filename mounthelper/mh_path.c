/*
 * Path resolution for the helper: every staging and target path is opened
 * beneath its allowed root with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS), and every later step works on the resulting fd.
 *
 * Runs in the helper as root with CAP_SYS_ADMIN under seccomp. Nothing here is
 * fatal; a refused path becomes an error answer.
 *
 * Safety argument. The string was already checked by pol_path_check (absolute,
 * canonical, strictly beneath an allowed root). The kernel then enforces the
 * same thing on the real tree: RESOLVE_BENEATH refuses ".." or an absolute
 * symlink that would leave the root fd, RESOLVE_NO_SYMLINKS refuses any
 * symlink component (including the last), RESOLVE_NO_MAGICLINKS refuses
 * /proc-style links. So whoever controls a directory beneath the root (a pod
 * writing into a volume, say) cannot redirect the helper elsewhere with a
 * symlink. The root itself is opened by its name: it comes from the policy
 * file the administrator wrote, not from rpcd. Mount crossings are allowed
 * (kubelet's tree spans several mounts); mounts are made only by root.
 */
#include "mh_path.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RESOLVE_SAFE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

static int openat2_mode(int dirfd, const char *rel, int flags, mode_t mode)
{
	struct open_how how = {
	    .flags = (uint64_t)flags | O_CLOEXEC, .mode = mode, .resolve = RESOLVE_SAFE};
	for (int tries = 0; tries < 8; tries++) {
		long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		/* EAGAIN: a concurrent rename or mount raced the lookup; try again. */
		if (errno != EAGAIN && errno != EINTR)
			break;
	}
	return -1;
}

static int openat2_safe(int dirfd, const char *rel, int flags)
{
	return openat2_mode(dirfd, rel, flags, 0);
}

static int resolve_fail(struct mh_res *r, int err, const char *what)
{
	switch (err) {
	case ENOENT:
		return mh_fail(r, MH_E_NOTFOUND, err, "%s does not exist", what);
	case ELOOP:
		return mh_fail(r, MH_E_REFUSED, err, "%s crosses a symlink", what);
	case EXDEV:
		return mh_fail(r, MH_E_REFUSED, err, "%s escapes its allowed root", what);
	case ENOTDIR:
		return mh_fail(r, MH_E_REFUSED, err, "%s is not a directory", what);
	case EEXIST:
		return mh_fail(r, MH_E_EXISTS, err, "%s exists already", what);
	default:
		return mh_fail(r, MH_E_FAILED, err, "cannot open %s: %s", what, strerror(err));
	}
}

static int open_root(const char *root, struct mh_res *r)
{
	int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "cannot open allowed root %s: %s", root,
		               strerror(errno));
	return fd;
}

int mh_path_open_dir(const char *root, const char *path, struct mh_res *r)
{
	return mh_path_open_flags(root, path, O_PATH | O_DIRECTORY, r);
}

int mh_path_open_flags(const char *root, const char *path, int flags, struct mh_res *r)
{
	size_t rl = strlen(root);
	if (strncmp(path, root, rl) != 0 || path[rl] != '/' || path[rl + 1] == '\0')
		return mh_fail(r, MH_E_REFUSED, EINVAL, "path not beneath its root");
	int rootfd = open_root(root, r);
	if (rootfd < 0)
		return -1;
	int fd = openat2_safe(rootfd, path + rl + 1, flags);
	int err = errno;
	close(rootfd);
	if (fd < 0)
		return resolve_fail(r, err, "path");
	return fd;
}

int mh_path_open_parent(const char *root, const char *path, const char **name, struct mh_res *r)
{
	size_t rl = strlen(root);
	if (strncmp(path, root, rl) != 0 || path[rl] != '/' || path[rl + 1] == '\0')
		return mh_fail(r, MH_E_REFUSED, EINVAL, "path not beneath its root");
	const char *rel = path + rl + 1;
	const char *slash = strrchr(rel, '/');
	char parent[MH_PATH_MAX + 1];
	if (slash) {
		size_t n = (size_t)(slash - rel);
		memcpy(parent, rel, n);
		parent[n] = '\0';
		*name = slash + 1;
	} else {
		strcpy(parent, "."); /* the parent is the root itself */
		*name = rel;
	}
	int rootfd = open_root(root, r);
	if (rootfd < 0)
		return -1;
	int fd = openat2_safe(rootfd, parent, O_RDONLY | O_DIRECTORY);
	int err = errno;
	close(rootfd);
	if (fd < 0)
		return resolve_fail(r, err, "parent directory");
	return fd;
}

int mh_path_open_child(int dirfd, const char *name, struct mh_res *r)
{
	int fd = openat2_safe(dirfd, name, O_PATH | O_DIRECTORY);
	if (fd < 0)
		return resolve_fail(r, errno, "path");
	return fd;
}

int mh_path_open_child_flags(int dirfd, const char *name, int flags, mode_t mode, struct mh_res *r)
{
	int fd = openat2_mode(dirfd, name, flags, mode);
	if (fd < 0)
		return resolve_fail(r, errno, "path");
	return fd;
}
