/*
 * Mounts by file descriptor: a filesystem on a loop device (fsopen, fsconfig,
 * fsmount, move_mount), a bind of a staged mount (open_tree clone,
 * mount_setattr, move_mount), what is mounted on a directory (statx + libmount's
 * view of /proc/self/mountinfo), and a careful unmount.
 *
 * Runs in a worker of the helper as root with CAP_SYS_ADMIN under seccomp. The old mount(2)
 * system call is not even allowed by the filter: no remount, no MS_MOVE, no
 * propagation change is reachable. Nothing here is fatal.
 *
 * Safety argument, for every mount made here:
 *  - the target is an fd from mh_path.c (beneath an allowed root, no symlink),
 *    and move_mount(..., MOVE_MOUNT_T_EMPTY_PATH) attaches to exactly that
 *    directory, whatever happens to path names meanwhile;
 *  - the source is a loop device backed by one of our images, or a clone of a
 *    mount the caller just proved is that volume's staging mount;
 *  - nosuid and nodev are always set on every file system mount and every
 *    bind of one, so a hostile image can carry neither set-uid programs nor
 *    device nodes into the node. The one bind without nodev is that of a loop
 *    device's own node for a raw block volume (mh_mount_bind_dev; its safety
 *    argument is at the top of mh_block.c);
 *  - only options the policy allows arrive here, and an option this file
 *    cannot classify is refused (fail closed);
 *  - a mount is built detached and only attached by the last step; if anything
 *    fails before, closing the fds discards it, so nothing is left mounted.
 */
#include "mh_mount.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define MOUNTINFO "/proc/self/mountinfo"

/* VFS options the helper knows how to apply; every other VFS option is refused. */
enum vfs_action {
	V_RO,
	V_RW,
	V_NOEXEC,
	V_EXEC,
	V_NOATIME,
	V_RELATIME,
	V_STRICTATIME,
	V_NODIRATIME,
	V_SYNC,
	V_DIRSYNC,
	V_LAZYTIME,
	V_FORCED
};

static const struct {
	const char *name;
	enum vfs_action act;
} vfs_map[] = {
    {"ro", V_RO},
    {"rw", V_RW},
    {"noexec", V_NOEXEC},
    {"exec", V_EXEC},
    {"noatime", V_NOATIME},
    {"relatime", V_RELATIME},
    {"strictatime", V_STRICTATIME},
    {"nodiratime", V_NODIRATIME},
    {"sync", V_SYNC},
    {"dirsync", V_DIRSYNC},
    {"lazytime", V_LAZYTIME},
    {"nosuid", V_FORCED},
    {"nodev", V_FORCED},
};

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
		size_t i;
		for (i = 0; i < sizeof(vfs_map) / sizeof(vfs_map[0]); i++)
			if (strlen(vfs_map[i].name) == nsz && !memcmp(vfs_map[i].name, name, nsz))
				break;
		if (value || i == sizeof(vfs_map) / sizeof(vfs_map[0])) {
			ret = mh_fail(r, MH_E_REFUSED, EINVAL, "mount option '%.*s' not supported",
			              (int)nsz, name);
			goto out;
		}
		switch (vfs_map[i].act) {
		case V_RO:
			o->sb_ro = true;
			o->attr |= MOUNT_ATTR_RDONLY;
			break;
		case V_RW:
			o->sb_ro = false;
			o->attr &= ~(uint64_t)MOUNT_ATTR_RDONLY;
			break;
		case V_NOEXEC:
			o->attr |= MOUNT_ATTR_NOEXEC;
			break;
		case V_EXEC:
			o->attr &= ~(uint64_t)MOUNT_ATTR_NOEXEC;
			break;
		case V_NOATIME:
		case V_RELATIME:
		case V_STRICTATIME:
			o->attr &= ~(uint64_t)MOUNT_ATTR__ATIME;
			o->attr |= vfs_map[i].act == V_NOATIME       ? MOUNT_ATTR_NOATIME
			           : vfs_map[i].act == V_STRICTATIME ? MOUNT_ATTR_STRICTATIME
			                                             : MOUNT_ATTR_RELATIME;
			break;
		case V_NODIRATIME:
			o->attr |= MOUNT_ATTR_NODIRATIME;
			break;
		case V_SYNC:
			o->sb_sync = true;
			break;
		case V_DIRSYNC:
			o->sb_dirsync = true;
			break;
		case V_LAZYTIME:
			o->sb_lazytime = true;
			break;
		case V_FORCED:
			break; /* nosuid, nodev: set below whatever was asked */
		}
	}
	if (readonly) {
		o->sb_ro = true;
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

/* ---- what is mounted where ---------------------------------------------- */

static struct libmnt_table *mountinfo_load(struct mh_res *r)
{
	struct libmnt_table *tb = mnt_new_table_from_file(MOUNTINFO);
	if (!tb)
		mh_fail(r, MH_E_FAILED, errno ? errno : EIO, "cannot read " MOUNTINFO);
	return tb;
}

static bool opt_set(const char *optstr, const char *name)
{
	return optstr && mnt_optstr_get_option(optstr, name, NULL, NULL) == 0;
}

static void fill_from_fs(struct libmnt_fs *fs, struct mh_mnt *out)
{
	const char *src = mnt_fs_get_source(fs), *type = mnt_fs_get_fstype(fs);
	out->id = mnt_fs_get_id(fs);
	out->dev = mnt_fs_get_devno(fs);
	out->ro =
	    opt_set(mnt_fs_get_vfs_options(fs), "ro") || opt_set(mnt_fs_get_fs_options(fs), "ro");
	snprintf(out->source, sizeof(out->source), "%s", src ? src : "");
	snprintf(out->fstype, sizeof(out->fstype), "%s", type ? type : "");
}

int mh_mount_info(int dirfd, struct mh_mnt *out, struct mh_res *r)
{
	struct statx stx;
	memset(out, 0, sizeof(*out));
	if (statx(dirfd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_MNT_ID,
	          &stx) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "statx: %s", strerror(errno));
	if (!(stx.stx_mask & STATX_MNT_ID) || !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return mh_fail(r, MH_E_FAILED, ENOSYS, "kernel reports no mount id");
	if (!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return 0; /* a plain directory: nothing mounted on it */
	out->mounted = true;
	struct libmnt_table *tb = mountinfo_load(r);
	if (!tb)
		return -1;
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	int ret = -1;
	if (!it)
		abort();
	while (mnt_table_next_fs(tb, it, &fs) == 0) {
		if ((uint64_t)mnt_fs_get_id(fs) == stx.stx_mnt_id) {
			fill_from_fs(fs, out);
			ret = 0;
			break;
		}
	}
	if (ret < 0)
		mh_fail(r, MH_E_FAILED, ENOENT, "mount %llu not in " MOUNTINFO,
		        (unsigned long long)stx.stx_mnt_id);
	mnt_free_iter(it);
	mnt_unref_table(tb);
	return ret;
}

bool mh_mount_is_loop(const struct mh_mnt *m, const struct mh_loop *l)
{
	if (!m->mounted || strcmp(m->source, l->path) != 0)
		return false;
	/* btrfs reports an anonymous device number; the others report the block device. */
	return m->dev == l->rdev || strcmp(m->fstype, "btrfs") == 0;
}

int mh_mount_other_use(const struct pol *pol, const struct mh_loop *l, int except_id, char *where,
                       size_t wlen, struct mh_res *r)
{
	struct libmnt_table *tb = mountinfo_load(r);
	if (!tb)
		return -1;
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	int found = 0;
	if (!it)
		abort();
	while (mnt_table_next_fs(tb, it, &fs) == 0) {
		struct mh_mnt m = {.mounted = true};
		const char *target = mnt_fs_get_target(fs);
		fill_from_fs(fs, &m);
		if (m.id == except_id || !target || !mh_mount_is_loop(&m, l))
			continue;
		/* Copies propagated outside the allowed roots are not publications. */
		if (pol_path_check(pol, target, NULL) == 0) {
			snprintf(where, wlen, "%s", target);
			found = 1;
			break;
		}
	}
	mnt_free_iter(it);
	mnt_unref_table(tb);
	return found;
}

/* ---- mounting ----------------------------------------------------------- */

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
static int fs_options(int fsfd, const char *fsopts, struct mh_res *r)
{
	char *copy = strdup(fsopts ? fsopts : ""), *cur, *name, *value;
	size_t nsz, vsz;
	int ret = 0;
	if (!copy)
		abort();
	cur = copy;
	while (mnt_optstr_next_option(&cur, &name, &nsz, &value, &vsz) == 0) {
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
	free(copy);
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
static int apply_group(int mfd, struct mh_mount_opts *o, struct mh_res *r)
{
	const mode_t want = S_ISGID | S_IRWXG;
	struct stat st;
	int fd = openat(mfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = -1;
	if (fd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "open new root: %s", strerror(errno));
	if (fstat(fd, &st) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "stat new root: %s", strerror(errno));
		goto out;
	}
	if (st.st_gid == o->gid && (st.st_mode & want) == want) {
		ret = 0; /* already so: nothing to change */
		goto out;
	}
	if (st.st_uid != 0) {
		mh_fail(r, MH_E_REFUSED, EPERM, "volume root is owned by uid %u, not root",
		        (unsigned)st.st_uid);
		goto out;
	}
	if ((st.st_gid != 0 && fchown(fd, (uid_t)-1, 0) < 0) ||
	    fchmod(fd, (st.st_mode & 07777) | want) < 0 || fchown(fd, (uid_t)-1, o->gid) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "set volume group: %s", strerror(errno));
		goto out;
	}
	o->group_changed = true;
	ret = 0;
out:
	close(fd);
	return ret;
}

int mh_mount_fs(const char *dev, const char *fstype, struct mh_mount_opts *o, int target_fd,
                struct mh_res *r)
{
	int fsfd = -1, mfd = -1, ret = -1;
	const char *sbflags[4];
	size_t nflags = 0;
	if (o->sb_ro)
		sbflags[nflags++] = "ro";
	if (o->sb_sync)
		sbflags[nflags++] = "sync";
	if (o->sb_dirsync)
		sbflags[nflags++] = "dirsync";
	if (o->sb_lazytime)
		sbflags[nflags++] = "lazytime";

	fsfd = fsopen(fstype, FSOPEN_CLOEXEC);
	if (fsfd < 0) {
		mh_fail(r, MH_E_FAILED, errno, "fsopen %s: %s", fstype, strerror(errno));
		goto out;
	}
	if (fsconfig(fsfd, FSCONFIG_SET_STRING, "source", dev, 0) < 0) {
		fs_fail(r, fsfd, errno, "source");
		goto out;
	}
	for (size_t i = 0; i < nflags; i++) {
		if (fsconfig(fsfd, FSCONFIG_SET_FLAG, sbflags[i], NULL, 0) < 0) {
			fs_fail(r, fsfd, errno, sbflags[i]);
			goto out;
		}
	}
	if (fs_options(fsfd, o->fs, r) < 0)
		goto out;
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
	if (o->set_group && !o->sb_ro && apply_group(mfd, o, r) < 0)
		goto out;
	/* The only step visible to anyone: attach it on the directory we resolved. */
	if (move_mount(mfd, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) <
	    0) {
		mh_fail(r, MH_E_FAILED, errno, "move_mount: %s", strerror(errno));
		goto out;
	}
	ret = 0;
out:
	mh_closep(&mfd); /* a detached mount that was never attached disappears here */
	mh_closep(&fsfd);
	return ret;
}

int mh_mount_bind(int src_fd, int target_fd, bool ro, struct mh_res *r)
{
	/* A clone of that one mount only (no AT_RECURSIVE: submounts are not carried along). */
	int tfd = open_tree(src_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tfd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "open_tree: %s", strerror(errno));
	struct mount_attr attr = {
	    .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (ro ? MOUNT_ATTR_RDONLY : 0),
	};
	int ret = 0;
	if (mount_setattr(tfd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		ret = mh_fail(r, MH_E_FAILED, errno, "mount_setattr: %s", strerror(errno));
	else if (move_mount(tfd, "", target_fd, "",
	                    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		ret = mh_fail(r, MH_E_FAILED, errno, "move_mount: %s", strerror(errno));
	close(tfd);
	return ret;
}

int mh_mount_bind_dev(int src_fd, int target_fd, bool ro, struct mh_res *r)
{
	int tfd = open_tree(src_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tfd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "open_tree: %s", strerror(errno));
	/* nosuid as everywhere; nodev deliberately not set (the node must open). */
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | (ro ? MOUNT_ATTR_RDONLY : 0)};
	int ret = 0;
	if (mount_setattr(tfd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		ret = mh_fail(r, MH_E_FAILED, errno, "mount_setattr: %s", strerror(errno));
	else if (move_mount(tfd, "", target_fd, "",
	                    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		ret = mh_fail(r, MH_E_FAILED, errno, "move_mount: %s", strerror(errno));
	close(tfd);
	return ret;
}

int mh_mount_file_info(int fd, struct mh_fmnt *out, struct mh_res *r)
{
	struct statx stx;
	memset(out, 0, sizeof(*out));
	if (fstat(fd, &out->st) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "fstat: %s", strerror(errno));
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_MNT_ID,
	          &stx) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "statx: %s", strerror(errno));
	if (!(stx.stx_mask & STATX_MNT_ID) || !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return mh_fail(r, MH_E_FAILED, ENOSYS, "kernel reports no mount id");
	out->mounted = (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
	out->id = (int)stx.stx_mnt_id;
	if (out->mounted) {
		struct mh_mnt m;
		if (mh_mount_info(fd, &m, r) < 0)
			return -1;
		out->ro = m.ro;
	}
	return 0;
}

int mh_mount_other_dev_use(const struct pol *pol, dev_t dev, ino_t ino, dev_t only_rdev,
                           int except_id, char *where, size_t wlen, struct mh_res *r)
{
	struct libmnt_table *tb = mountinfo_load(r);
	if (!tb)
		return -1;
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	int found = 0;
	if (!it)
		abort();
	while (found == 0 && mnt_table_next_fs(tb, it, &fs) == 0) {
		const char *target = mnt_fs_get_target(fs), *root = mnt_fs_get_root(fs);
		struct stat st;
		struct mh_loop l;
		/* A bind of a device node has that node as its root: "/loopN" on devtmpfs. */
		if (mnt_fs_get_id(fs) == except_id || !target || !root ||
		    strncmp(root, "/loop", 5) != 0 || pol_path_check(pol, target, NULL) != 0)
			continue;
		if (fstatat(AT_FDCWD, target, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISBLK(st.st_mode) || (only_rdev != 0 && st.st_rdev != only_rdev))
			continue;
		found = mh_loop_by_rdev(st.st_rdev, dev, ino, &l, r);
		if (found == 1)
			snprintf(where, wlen, "%s", target);
	}
	mnt_free_iter(it);
	mnt_unref_table(tb);
	return found;
}

int mh_umount(int parent_fd, const char *name, int mnt_id, struct mh_res *r)
{
	struct statx stx;
	int ret = 0;
	/* umount2 has no *at form: make the verified parent our cwd, and name one component. */
	if (fchdir(parent_fd) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "fchdir: %s", strerror(errno));
	if (statx(parent_fd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_MNT_ID, &stx) < 0) {
		ret = mh_fail(r, MH_E_FAILED, errno, "statx: %s", strerror(errno));
	} else if (!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) || (int)stx.stx_mnt_id != mnt_id) {
		/* Something changed since we looked: unmount nothing we did not check. */
		ret = mh_fail(r, MH_E_BUSY, EAGAIN, "mount changed while unmounting");
	} else if (umount2(name, UMOUNT_NOFOLLOW) < 0) {
		int err = errno;
		ret = mh_fail(r, err == EBUSY ? MH_E_BUSY : MH_E_FAILED, err, "umount: %s",
		              strerror(err));
	}
	if (chdir("/") < 0)
		ret = mh_fail(r, MH_E_FAILED, errno, "chdir /: %s", strerror(errno));
	return ret;
}
