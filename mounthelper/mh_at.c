/*
 * Where the helper acts in kubelet's tree, and what it may destroy there.
 *
 * Runs in a helper worker (STATS: the main loop) as root with the helper's
 * capabilities, under seccomp. Nothing here is fatal.
 *
 * Safety argument, paths. A staging or target path must match the policy's
 * patterns for its role (kubelet's CSI directories by default, never the rest
 * of its tree). It is then walked from its root one component at a time with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), and
 * every directory on the way, the root and the parent included, must be a
 * directory owned by root that neither its group nor others may write to
 * (group write is also where an ACL's mask shows). So only root can rename,
 * remove or replace the parent or any entry in it: a local user who owns a
 * directory somewhere in the tree cannot move a staging directory elsewhere
 * while mkfs runs, or swap the object the helper checked for another before
 * it acts. The helper still re-resolves the path after every mount and undoes
 * a mount that the path no longer reaches (mh_ops.c), as a second line. Nor
 * does a walk pass through a mount point where the policy lets volumes be
 * mounted (a parent that is both: a volume, whose tenant owns its root), so
 * nothing is made or undone beneath a volume (beneath_volume below).
 *
 * Safety argument, destruction. The helper unlinks or removes only what it
 * made: each directory or file it creates gets an extended attribute
 * trusted.sepcsi.owner = "<volume id>:<inode>" before it takes its name (it
 * is made under ".<name>.sepcsi-<volume id>", marked, then renamed into
 * place without replacing anything). Only a process
 * with CAP_SYS_ADMIN can set or read a trusted.* attribute, so no pod or
 * local user can forge one; the inode inside it makes a copy (cp -a as root)
 * worthless. Before removing, the helper opens the object without following
 * a symlink, reads the mark from that open file, compares it with the
 * object's own inode and the volume asked about, unlinks by name in the
 * checked parent, and then checks that the inode it opened has lost its
 * link. Anything else (kubelet's own files, another volume's directory, a
 * file someone put there) is left alone.
 */
#include "mh_at.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "mh_mount.h"
#include "mh_pause.h"
#include "openat2.h"
#include "policy.h"

#define RESOLVE_SAFE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

static int open_beneath(int dirfd, const char *rel, int flags, mode_t mode)
{
	return openat2_retry(dirfd, rel, flags, mode, RESOLVE_SAFE);
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

/*
 * One step of a walk: name beneath dirfd opened O_PATH (with flags, O_DIRECTORY
 * or 0), its file system checked by mh_mount_check_local before anything asks
 * it more. The fd, or -1 with r; what names it in the reason.
 */
static int enter(int dirfd, const char *name, int flags, const char *what, dev_t *root_sb,
                 struct mh_res *r)
{
	int fd = open_beneath(dirfd, name, O_PATH | flags, 0);
	if (fd < 0)
		return resolve_fail(r, errno, what);
	if (mh_mount_check_local(fd, what, root_sb, r) < 0)
		mh_closep(&fd);
	return fd;
}

int mh_at_check_dir(int fd, const char *what, struct mh_res *r)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "stat %s: %s", what, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return mh_fail(r, MH_E_REFUSED, ENOTDIR, "%s is not a directory", what);
	if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)))
		return mh_fail(r, MH_E_REFUSED, EPERM,
		               "%s is not owned by root or may be written by others: the helper "
		               "acts only where nobody but root can rename or replace things",
		               what);
	return 0;
}

/*
 * Whether the parent directory fd, the path's first len bytes, is a mount
 * point at a path that matches a staging or target pattern: where this driver
 * mounts volumes, so most likely one (its tenant, owner of its root, could make
 * what is bound beneath it impossible to look at for good, and every detach on
 * the node would wait for it). Refused with r; 0 otherwise.
 */
static int beneath_volume(const struct mh_ctx *c, int fd, const char *path, size_t len,
                          struct mh_res *r)
{
	char prefix[MH_PATH_MAX + 1];
	struct statx stx;
	const int how = AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC;
	if (statx(fd, "", how, STATX_TYPE, &stx) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "statx a parent directory: %s",
		               strerror(errno));
	if (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return mh_fail(r, MH_E_FAILED, ENOSYS,
		               "the kernel does not tell if a directory is a mount point");
	snprintf(prefix, sizeof(prefix), "%.*s", (int)len, path);
	if (!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) ||
	    pol_path_check(c->pol, prefix, POL_STAGING | POL_TARGET, NULL) != 0)
		return 0;
	return mh_fail(r, MH_E_REFUSED, EPERM,
	               "a parent directory is mounted on where the policy lets volumes be: "
	               "nothing is made or undone beneath a volume");
}

int mh_at_open(const struct mh_ctx *c, const char *path, unsigned roles, struct mh_at *at,
               struct mh_res *r)
{
	char comp[MH_PATH_MAX + 1];
	at->dir = -1;
	at->name = NULL;
	at->root_sb = 0;
	int rc = pol_path_check(c->pol, path, roles, &at->root);
	if (rc == -EINVAL)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "malformed path");
	if (rc < 0)
		return mh_fail(r, MH_E_REFUSED, EPERM,
		               "path is not one of the %s directories the policy allows",
		               roles == POL_TARGET    ? "target"
		               : roles == POL_STAGING ? "staging"
		                                      : "CSI");
	int fd = open(at->root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "cannot open allowed root %s: %s", at->root,
		               strerror(errno));
	if (mh_mount_check_local(fd, "the allowed root", &at->root_sb, r) < 0 ||
	    mh_at_check_dir(fd, "the allowed root", r) < 0)
		goto fail;
	/* pol_path_check: path is "<root>/a/b/.../name", canonical, at least one component. */
	const char *s = path + strlen(at->root) + 1;
	for (;;) {
		size_t n = strcspn(s, "/");
		if (s[n] == '\0') {
			at->name = s;
			at->dir = fd;
			return 0;
		}
		memcpy(comp, s, n);
		comp[n] = '\0';
		int next = enter(fd, comp, O_DIRECTORY, "a parent directory", &at->root_sb, r);
		close(fd);
		fd = next;
		if (fd < 0 || mh_at_check_dir(fd, "a parent directory", r) < 0 ||
		    beneath_volume(c, fd, path, (size_t)(s + n - path), r) < 0)
			goto fail;
		s += n + 1;
	}
fail:
	mh_closep(&fd);
	return -1;
}

int mh_at_descend(const struct mh_at *at, const char *name, struct mh_at *sub, struct mh_res *r)
{
	sub->name = name;
	sub->root = at->root;
	sub->root_sb = at->root_sb;
	sub->dir = enter(at->dir, at->name, O_DIRECTORY, "the path", &sub->root_sb, r);
	if (sub->dir >= 0 && mh_at_check_dir(sub->dir, "the path", r) < 0)
		mh_closep(&sub->dir);
	return sub->dir < 0 ? -1 : 0;
}

void mh_at_close(struct mh_at *at)
{
	mh_closep(&at->dir);
}

/* The object of the O_PATH fd opened as asked: the same object again, not its name looked up twice.
 */
static int reopen(int fd, int flags)
{
	char self[32];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	return open(self, flags | O_CLOEXEC);
}

int mh_at_child(const struct mh_at *at, int flags, struct mh_res *r)
{
	/* O_PATH first: what is there is looked at before anything asks its file system. */
	dev_t root_sb = at->root_sb;
	int fd = enter(at->dir, at->name, flags & O_DIRECTORY, "the path", &root_sb, r);
	if (fd < 0 || (flags & O_PATH))
		return fd;
	int opened = reopen(fd, flags);
	int err = errno;
	close(fd);
	if (opened < 0)
		return resolve_fail(r, err, "the path");
	return opened;
}

int mh_at_look(const struct mh_at *at, struct stat *st, struct mh_res *r)
{
	int fd = mh_at_child(at, O_PATH, r);
	if (fd >= 0 && fstat(fd, st) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "stat the path: %s", strerror(errno));
		mh_closep(&fd);
	}
	return fd;
}

static void mark_value(const char *volume_id, ino_t ino, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%llu", volume_id, (unsigned long long)ino);
}

/* The name an object is made and marked under before it takes its own: ".<name>.sepcsi-<id>". */
static int temp_name(const struct mh_at *at, const char *volume_id, char *buf, size_t len)
{
	return snprintf(buf, len, ".%s.sepcsi-%s", at->name, volume_id) < (int)len ? 0 : -1;
}

/*
 * Remove a temporary object a killed attempt left: an empty directory or an
 * empty regular file (what mh_at_make makes), under our temporary name in a
 * root-only parent, so only root could have made it.
 */
void mh_at_remove_temp(const struct mh_at *at, const char *volume_id)
{
	char tmp[NAME_MAX + 1];
	struct stat st;
	struct mh_at t = *at;
	if (temp_name(at, volume_id, tmp, sizeof(tmp)) < 0)
		return;
	t.name = tmp;
	int fd = mh_at_look(&t, &st, &(struct mh_res){0});
	if (fd < 0)
		return;
	close(fd);
	if (S_ISDIR(st.st_mode))
		(void)unlinkat(at->dir, tmp, AT_REMOVEDIR); /* fails unless empty */
	else if (S_ISREG(st.st_mode) && st.st_size == 0)
		(void)unlinkat(at->dir, tmp, 0);
}

int mh_at_make(const struct mh_ctx *c, const struct mh_at *at, bool dir, const char *volume_id,
               struct mh_res *r)
{
	char tmp[NAME_MAX + 1];
	struct stat st;
	int ret = 1, fd = mh_at_look(at, &st, r);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (!mh_absent(r))
		return -1;
	if (temp_name(at, volume_id, tmp, sizeof(tmp)) < 0)
		return mh_fail(r, MH_E_REFUSED, ENAMETOOLONG, "the last component is too long");
	/*
	 * Made and marked under a temporary name, then renamed into place: the
	 * path never names an object of ours without its mark, whenever the
	 * worker dies. A temporary one a dead attempt left is removed first.
	 */
	mh_at_remove_temp(at, volume_id);
	if (dir) {
		fd = mkdirat(at->dir, tmp, 0750) < 0
		         ? -1
		         : open_beneath(at->dir, tmp, O_RDONLY | O_DIRECTORY, 0);
	} else {
		fd = open_beneath(at->dir, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
	}
	if (fd < 0)
		return mh_fail(r, mh_kind_of_errno(errno), errno, "cannot create %s: %s",
		               dir ? "directory" : "file", strerror(errno));
	mh_pause(c, "made", volume_id); /* tests: killed before the mark */
	if (mh_at_mark(fd, volume_id, false, r) < 0)
		ret = -1;
	close(fd);
	if (ret == 1 && renameat2(at->dir, tmp, at->dir, at->name, RENAME_NOREPLACE) < 0) {
		if (errno == EEXIST)
			ret = 0; /* made by someone else meanwhile: theirs, left as it is */
		else
			ret = mh_fail(r, mh_kind_of_errno(errno), errno,
			              "cannot rename into place: %s", strerror(errno));
	}
	if (ret != 1)
		mh_at_remove_temp(at, volume_id);
	return ret;
}

int mh_at_mark(int fd, const char *id, bool replace, struct mh_res *r)
{
	struct stat st;
	char mark[64];
	/* Safety: the mark goes on the object just made, through its own fd. */
	if (fstat(fd, &st) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "stat new object: %s", strerror(errno));
	mark_value(id, st.st_ino, mark, sizeof(mark));
	if (fsetxattr(fd, MH_AT_MARK_XATTR, mark, strlen(mark),
	              replace ? XATTR_REPLACE : XATTR_CREATE) < 0)
		return mh_fail(r, MH_E_FAILED, errno,
		               "cannot mark the new object as sepcsi's (trusted xattr): %s",
		               strerror(errno));
	return 0;
}

bool mh_at_marked(int fd, const struct stat *st, const char *volume_id)
{
	char want[64], got[64];
	mark_value(volume_id, st->st_ino, want, sizeof(want));
	ssize_t n = fgetxattr(fd, MH_AT_MARK_XATTR, got, sizeof(got) - 1);
	if (n < 0)
		return false;
	got[n] = '\0';
	return strcmp(got, want) == 0;
}

int mh_at_remove_ours(const struct mh_at *at, const char *volume_id, struct mh_res *r)
{
	struct stat st, st2;
	mh_at_remove_temp(at, volume_id); /* left by an attempt killed while making the object */
	/* First only look: opening a device node or a FIFO for real could act on it. */
	int fd = mh_at_look(at, &st, r);
	if (fd < 0)
		return mh_absent(r) ? 1 : -1;
	int ret = 0;
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		goto out; /* not a kind of object the helper makes */
	int opened =
	    reopen(fd, S_ISDIR(st.st_mode) ? O_RDONLY | O_DIRECTORY : O_RDONLY | O_NONBLOCK);
	close(fd);
	fd = opened;
	if (fd < 0) {
		ret = errno == ENOENT ? 1 : resolve_fail(r, errno, "the path");
		goto out;
	}
	if (fstat(fd, &st2) < 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino ||
	    !mh_at_marked(fd, &st2, volume_id))
		goto out; /* replaced meanwhile, or not ours: leave it */
	/*
	 * Safety: the parent is root-only (mh_at_open), so the name still names
	 * the object just checked; the link count below proves it.
	 */
	if (unlinkat(at->dir, at->name, S_ISDIR(st2.st_mode) ? AT_REMOVEDIR : 0) < 0) {
		ret = errno == ENOENT
		          ? 1
		          : mh_fail(r, mh_kind_of_errno(errno), errno, "cannot remove %s: %s",
		                    S_ISDIR(st2.st_mode) ? "directory" : "file", strerror(errno));
		goto out;
	}
	if (fstat(fd, &st2) < 0 || st2.st_nlink != 0)
		ret = mh_fail(r, MH_E_FAILED, EAGAIN, "the object removed was not the one checked");
	else
		ret = 1;
out:
	close(fd);
	return ret;
}

int mh_dir_has_entries(int dirfd, struct mh_res *r)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "open directory: %s", strerror(errno));
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return mh_fail(r, MH_E_FAILED, errno, "read directory: %s", strerror(errno));
	}
	struct dirent *e;
	int found = 0;
	errno = 0;
	while (!found && (e = readdir(d)) != NULL)
		found = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	if (!found && errno != 0)
		found = mh_fail(r, MH_E_FAILED, errno, "read directory: %s", strerror(errno));
	closedir(d);
	return found;
}
