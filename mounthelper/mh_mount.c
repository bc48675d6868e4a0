/*
 * Mounts by file descriptor: a file system on a loop device (fsopen, fsconfig,
 * fsmount, move_mount), a second mount of a staged file system for a publish
 * (the same calls: the kernel hands back the same superblock, and the new
 * mount gets its attributes from fsmount), a bind of a loop device's node
 * (open_tree clone, move_mount), and a careful unmount. What is mounted where
 * is mh_mountinfo.c.
 *
 * Runs in a worker of the helper as root with CAP_SYS_ADMIN under seccomp.
 * Neither mount(2) nor mount_setattr(2) is allowed by the filter: no remount,
 * no MS_MOVE, no propagation or attribute change of an existing mount is
 * reachable. Nothing here is fatal.
 *
 * Safety argument, for every mount made here:
 *  - the target is an fd from mh_at.c (a root-only parent, no symlink), and
 *    move_mount(..., MOVE_MOUNT_T_EMPTY_PATH) attaches to exactly that
 *    directory or file; the caller re-resolves the path afterwards and undoes
 *    the mount (mh_umount_id) if the path no longer reaches it;
 *  - the source is a loop device backed by one of our images, or its node;
 *  - nosuid and nodev are set on every file system mount (fsmount refuses
 *    none, and the seccomp filter refuses an fsmount without both), so a
 *    hostile image can carry neither set-uid programs nor device nodes into
 *    the node. The one mount without nodev is the bind of a loop device's own
 *    node for a raw block volume (its safety argument is in mh_block.c);
 *  - only options the policy allows arrive here, and an option this file
 *    cannot classify is refused (fail closed); ext4 gets errors=remount-ro
 *    unless the policy let the request name another, so what a file system
 *    does on an error never comes from its superblock (and no image a pod
 *    could have written raw is mounted at all: mh_image.h);
 *  - a mount is built detached and attached by the last step; if anything
 *    fails before, closing the fds discards it, so nothing is left mounted.
 */
#include "mh_mount.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

int mh_mount_opts_parse(const char *opts, bool readonly, struct mh_mount_opts *o, struct mh_res *r)
{
	char *user = NULL, *vfs = NULL;
	int ret = 0;
	memset(o, 0, sizeof(*o));
	o->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	if (opts && *opts && mnt_split_optstr(opts, &user, &vfs, &o->fs, 0, 0) != 0)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "cannot parse mount options");
	if (user) {
		ret = mh_fail(r, MH_E_REFUSED, EINVAL, "userspace mount option '%s' refused", user);
		goto out;
	}
	char *cur = vfs, *name, *value;
	size_t nsz, vsz;
	while (cur && mnt_optstr_next_option(&cur, &name, &nsz, &value, &vsz) == 0) {
		/* Only the options of the policy's table: every other VFS option is refused. */
		const struct pol_vfs_opt *v = pol_vfs_opt(name, nsz);
		if (value || !v) {
			ret = mh_fail(r, MH_E_REFUSED, EINVAL, "mount option '%.*s' not supported",
			              (int)nsz, name);
			goto out;
		}
		o->attr = (o->attr & ~v->attr_clear) | v->attr_set;
		o->sb = (o->sb & ~v->sb_clear) | v->sb_set;
	}
	if (readonly) {
		o->sb |= POL_SB_RO;
		o->attr |= MOUNT_ATTR_RDONLY;
	}
	o->attr |= MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
out:
	free(user);
	free(vfs);
	if (ret < 0)
		mh_mount_opts_free(o);
	return ret;
}

void mh_mount_opts_free(struct mh_mount_opts *o)
{
	free(o->fs);
	o->fs = NULL;
}

/* The kernel's own explanation of a failed fsconfig, if it left one ("e ext4: ..."). */
static void fs_context_message(int fsfd, char *buf, size_t len)
{
	ssize_t n = read(fsfd, buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
}

static int fs_fail(struct mh_res *r, int fsfd, int err, const char *step)
{
	char msg[160];
	fs_context_message(fsfd, msg, sizeof(msg));
	return mh_fail(r, err == ENOSPC ? MH_E_NOSPACE : MH_E_FAILED, err, "%s: %s%s%s", step,
	               strerror(err), msg[0] ? ": " : "", msg);
}

/* Pass each filesystem option to fsconfig: a flag, or key=value as a string. */
static int fs_options(int fsfd, char *fsopts, struct mh_res *r)
{
	char *cur = fsopts, *name, *value; /* libmount's parser only reads it */
	size_t nsz, vsz;
	int ret = 0;
	while (cur && mnt_optstr_next_option(&cur, &name, &nsz, &value, &vsz) == 0) {
		char key[MH_OPTS_MAX + 1];
		snprintf(key, sizeof(key), "%.*s", (int)nsz, name);
		int rc;
		if (value) {
			char val[MH_OPTS_MAX + 1];
			snprintf(val, sizeof(val), "%.*s", (int)vsz, value);
			rc = fsconfig(fsfd, FSCONFIG_SET_STRING, key, val, 0);
		} else {
			rc = fsconfig(fsfd, FSCONFIG_SET_FLAG, key, NULL, 0);
		}
		if (rc < 0) {
			ret = fs_fail(r, fsfd, errno, key);
			break;
		}
	}
	return ret;
}

/*
 * MH_F_MOUNT_GROUP on the root directory of a detached mount (CSI
 * VOLUME_MOUNT_GROUP, Kubernetes fsGroup): group gid, g+rwx, setgid, so that
 * files the pod creates inherit the group. Only when it is not so already:
 * a fresh file system, or one staged before without the group.
 *
 * Privilege: chown to a group the helper is not in needs CAP_CHOWN. The mode
 * is set while the group is still 0 (the helper's own gid), so the kernel
 * keeps the setgid bit without CAP_FSETID; a chown of a directory never clears
 * it. The root directory must be owned by root (fresh mkfs): the helper has no
 * CAP_FOWNER, so a root directory that a pod chowned away is refused, not
 * overridden.
 */
int mh_mount_set_group(int dirfd, gid_t gid, bool *changed, struct mh_res *r)
{
	const mode_t want = S_ISGID | S_IRWXG;
	struct stat st;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = -1;
	if (fd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "open new root: %s", strerror(errno));
	if (fstat(fd, &st) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "stat new root: %s", strerror(errno));
		goto out;
	}
	if (st.st_gid == gid && (st.st_mode & want) == want) {
		ret = 0; /* already so: nothing to change */
		goto out;
	}
	if (st.st_uid != 0) {
		mh_fail(r, MH_E_REFUSED, EPERM, "volume root is owned by uid %u, not root",
		        (unsigned)st.st_uid);
		goto out;
	}
	if ((st.st_gid != 0 && fchown(fd, (uid_t)-1, 0) < 0) ||
	    fchmod(fd, (st.st_mode & 07777) | want) < 0 || fchown(fd, (uid_t)-1, gid) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "set volume group: %s", strerror(errno));
		goto out;
	}
	*changed = true;
	ret = 0;
out:
	close(fd);
	return ret;
}

int mh_mount_fs_fd(const struct mh_loop *l, struct mh_res *r)
{
	struct mh_mnt m;
	if (mh_mount_find_loop(l, &m, r) <= 0)
		return -1;
	int fsfd = fsopen(m.fstype, FSOPEN_CLOEXEC), mfd = -1, fd = -1;
	if (fsfd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "fsopen %s: %s", m.fstype, strerror(errno));
	/* The superblock exists: CMD_CREATE hands it back (flags must agree on ro). */
	if (fsconfig(fsfd, FSCONFIG_SET_STRING, "source", l->path, 0) < 0 ||
	    (m.sb_ro && fsconfig(fsfd, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0) ||
	    fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		fs_fail(r, fsfd, errno, "reach the staged file system");
		goto out;
	}
	mfd = fsmount(fsfd, FSMOUNT_CLOEXEC,
	              MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC |
	                  (m.sb_ro ? MOUNT_ATTR_RDONLY : 0));
	if (mfd < 0) {
		fs_fail(r, fsfd, errno, "fsmount");
		goto out;
	}
	/* fsmount gives an O_PATH fd; ioctl and fstatvfs want a real one. */
	fd = openat(mfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		mh_fail(r, MH_E_FAILED, errno, "open the staged file system: %s", strerror(errno));
out:
	mh_closep(&mfd);
	mh_closep(&fsfd);
	return fd;
}

/* ---- mounting ----------------------------------------------------------- */

static int new_mount_id(int mfd, int *id, struct mh_res *r)
{
	struct statx stx;
	if (statx(mfd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID))
		return mh_fail(r, MH_E_FAILED, errno ? errno : ENOSYS, "mount id of new mount");
	*id = (int)stx.stx_mnt_id;
	return 0;
}

static int attach(int mfd, int target_fd, int *id, struct mh_res *r)
{
	if (new_mount_id(mfd, id, r) < 0)
		return -1;
	/* The only step visible to anyone: attach it on the directory or file we resolved. */
	if (move_mount(mfd, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) <
	    0)
		return mh_fail(r, MH_E_FAILED, errno, "move_mount: %s", strerror(errno));
	return 0;
}

int mh_mount_fs(const struct mh_loop *l, const char *fstype, struct mh_mount_opts *o, int target_fd,
                int *id, struct mh_res *r)
{
	int fsfd = -1, mfd = -1, ret = -1;
	static const struct {
		unsigned bit;
		const char *name;
	} sb_names[] = {{POL_SB_RO, "ro"},
	                {POL_SB_SYNC, "sync"},
	                {POL_SB_DIRSYNC, "dirsync"},
	                {POL_SB_LAZYTIME, "lazytime"}};

	fsfd = fsopen(fstype, FSOPEN_CLOEXEC);
	if (fsfd < 0) {
		mh_fail(r, MH_E_FAILED, errno, "fsopen %s: %s", fstype, strerror(errno));
		goto out;
	}
	if (fsconfig(fsfd, FSCONFIG_SET_STRING, "source", l->path, 0) < 0) {
		fs_fail(r, fsfd, errno, "source");
		goto out;
	}
	for (size_t i = 0; i < sizeof(sb_names) / sizeof(sb_names[0]); i++) {
		if ((o->sb & sb_names[i].bit) &&
		    fsconfig(fsfd, FSCONFIG_SET_FLAG, sb_names[i].name, NULL, 0) < 0) {
			fs_fail(r, fsfd, errno, sb_names[i].name);
			goto out;
		}
	}
	if (fs_options(fsfd, o->fs, r) < 0)
		goto out;
	/* ext4 acts on errors as the policy says, never as its superblock says (errors=panic). */
	if (strcmp(fstype, "ext4") == 0 &&
	    !(o->fs && mnt_optstr_get_option(o->fs, "errors", NULL, NULL) == 0) &&
	    fsconfig(fsfd, FSCONFIG_SET_STRING, "errors", "remount-ro", 0) < 0) {
		fs_fail(r, fsfd, errno, "errors");
		goto out;
	}
	if (fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		fs_fail(r, fsfd, errno, "mount");
		goto out;
	}
	/* Detached mount with nosuid,nodev (always) and the asked attributes. */
	mfd = fsmount(fsfd, FSMOUNT_CLOEXEC, (unsigned int)o->attr);
	if (mfd < 0) {
		fs_fail(r, fsfd, errno, "fsmount");
		goto out;
	}
	/* Still detached: nobody else can see the root directory while it changes. */
	if (o->set_group && !(o->sb & POL_SB_RO) &&
	    mh_mount_set_group(mfd, o->gid, &o->group_changed, r) < 0)
		goto out;
	ret = attach(mfd, target_fd, id, r);
out:
	mh_closep(&mfd); /* a detached mount that was never attached disappears here */
	mh_closep(&fsfd);
	return ret;
}

int mh_mount_bind(int src_fd, int target_fd, int *id, struct mh_res *r)
{
	/* A clone of src's own mount only (no AT_RECURSIVE), with that mount's attributes. */
	int tfd = open_tree(src_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tfd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "clone the bind's source: %s",
		               strerror(errno));
	int ret = attach(tfd, target_fd, id, r);
	close(tfd);
	return ret;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
	nanosleep(&ts, NULL);
}

int mh_umount(int parent_fd, const char *name, int mnt_id, struct mh_res *r)
{
	struct statx stx;
	int ret = 0;
	/* umount2 has no *at form: make the verified parent our cwd, and name one component. */
	if (fchdir(parent_fd) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "fchdir: %s", strerror(errno));
	if (statx(parent_fd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC,
	          STATX_MNT_ID, &stx) < 0) {
		ret = mh_fail(r, MH_E_FAILED, errno, "statx: %s", strerror(errno));
	} else if (!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) || (int)stx.stx_mnt_id != mnt_id) {
		/* Something changed since we looked: unmount nothing we did not check. */
		ret = mh_fail(r, MH_E_BUSY, EAGAIN, "mount changed while unmounting");
	} else {
		int err = 0;
		for (int i = 0; i < 10; i++) {
			if (umount2(name, UMOUNT_NOFOLLOW) == 0) {
				err = 0;
				break;
			}
			err = errno;
			if (err != EBUSY)
				break;
			sleep_ms(20); /* a reference that goes by itself (a probe, a reader) */
		}
		if (err)
			ret = mh_fail(r, err == EBUSY ? MH_E_BUSY : MH_E_FAILED, err, "umount: %s",
			              strerror(err));
	}
	if (chdir("/") < 0)
		ret = mh_fail(r, MH_E_FAILED, errno, "chdir /: %s", strerror(errno));
	return ret;
}

int mh_umount_id(int mnt_id, struct mh_res *r)
{
	char target[MH_PATH_MAX + 1] = "";
	int found = mh_mount_target(mnt_id, target, sizeof(target), r);
	if (found <= 0)
		return found; /* gone already, or r set */
	char *slash = strrchr(target, '/');
	if (!slash || slash[1] == '\0')
		return mh_fail(r, MH_E_FAILED, EINVAL, "cannot undo the mount at %.100s", target);
	*slash = '\0';
	/* Its parent reached through file systems that answer for themselves only. */
	int dir = mh_open_local(target[0] ? target : "/", r);
	if (dir < 0)
		return -1;
	int ret = mh_umount(dir, slash + 1, mnt_id, r);
	close(dir);
	return ret;
}
