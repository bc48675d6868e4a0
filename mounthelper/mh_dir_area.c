/*
 * Directory volumes: a base directory and what lies beneath it. The base, the
 * directories above a volume's, the helper's own areas in the base (work,
 * trash, snapshots), a directory opened only if it carries an id's mark, a
 * tree removed only if it proves to be that id's, and the sweep of what dead
 * workers left in the areas. The handlers and their safety argument are in
 * mh_dir.c.
 *
 * Runs in a helper worker (and the main loop at start and after a worker's
 * death: the sweep) as root with the helper's capabilities, under seccomp.
 * Nothing here is fatal.
 */
#include "mh_dir_area.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "log.h"
#include "mh_btrfs.h"
#include "mh_dir.h"
#include "mh_pause.h"
#include "mh_tree.h"
#include "openat2.h"
#include "pol_view.h"

/* Does the open object fd carry the mark of id, for its own inode? */
static bool marked(int fd, const char *id)
{
	struct stat st;
	return fstat(fd, &st) == 0 && mh_at_marked(fd, &st, id);
}

/*
 * Does the open (not O_PATH) object fd carry a mark of any id? True also when
 * the attribute cannot be read for any other reason than its absence.
 */
static bool has_mark(int fd)
{
	return fgetxattr(fd, MH_AT_MARK_XATTR, NULL, 0) >= 0 || errno != ENODATA;
}

/*
 * The base is root's alone, and no one else's to enter (0700): what tenants
 * write in their volumes (set-id programs, device nodes, anything to read) is
 * reachable only through their pods' nosuid,nodev binds, never through the
 * host's path to the base, whose mount has neither. A mode that lets others
 * in is taken back, here as at start (mh_view.c); the read-only clone cannot
 * be changed, so it is refused instead.
 */
static int keep_private(int fd, const char *base, bool ro, struct mh_res *r)
{
	struct stat st;
	char mode[8];
	if (fstat(fd, &st) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "stat base directory: %s", strerror(errno));
	if ((st.st_mode & 07777) == 0700)
		return 0;
	if (ro || fchmod(fd, 0700) < 0)
		return mh_fail(r, MH_E_REFUSED, EPERM,
		               "base directory %s is mode %04o, not 0700: others could reach what "
		               "tenants write there",
		               base, (unsigned)(st.st_mode & 07777));
	snprintf(mode, sizeof(mode), "%04o", (unsigned)(st.st_mode & 07777));
	log_kv(LOG_LVL_WARN, "base_dir_private", "path", base, "was", mode, NULL);
	return 0;
}

/* The base (ro: its read-only clone), O_RDONLY: quotactl_fd and fstatvfs want a real fd. */
int mh_dir_base_open(const struct mh_ctx *c, const char *base, bool ro, struct mh_res *r)
{
	size_t i = 0;
	while (pol_base_dir(c->pol, i) && strcmp(pol_base_dir(c->pol, i), base) != 0)
		i++;
	int fd =
	    open(ro ? pol_view_ro_base(i) : base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "cannot open base directory %s: %s", base,
		               strerror(errno));
	if (mh_at_check_dir(fd, "the base directory", r) < 0 || keep_private(fd, base, ro, r) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * The parent of name's last component beneath base, each directory on the way
 * root's alone and no volume's: a directory that carries a mark (a volume's,
 * retained, archived or in use, or a snapshot's) is never passed through, so
 * no volume is ever made, found or removed inside another, whatever names the
 * patterns render or a client sends. (A volume never contains another
 * either: its directory is new and empty when it takes its place, and only
 * this walk leads beneath it.) With create, missing ones are made (0755,
 * behind the base's 0700). at->dir, at->name.
 */
int mh_dir_locate(int base, const char *name, bool create, struct mh_at *at, struct mh_res *r)
{
	char comp[NAME_MAX + 1];
	int fd = openat(base, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	at->dir = -1;
	at->root = NULL;
	for (const char *s = name;;) {
		size_t n = strcspn(s, "/");
		if (fd < 0)
			return mh_fail(r, mh_kind_of_errno(errno), errno,
			               "cannot open a directory above the volume's: %s",
			               strerror(errno));
		if (s[n] == '\0') {
			at->dir = fd;
			at->name = s;
			return 0;
		}
		snprintf(comp, sizeof(comp), "%.*s", (int)n, s);
		if (create && mkdirat(fd, comp, 0755) < 0 && errno != EEXIST) {
			close(fd);
			return mh_fail(r, mh_kind_of_errno(errno), errno, "mkdir %s: %s", comp,
			               strerror(errno));
		}
		int next = openat2_retry(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0,
		                         RESOLVE_IN_TREE);
		close(fd);
		if (next >= 0 && mh_at_check_dir(next, "a directory above the volume's", r) < 0) {
			close(next);
			return -1;
		}
		if (next >= 0 && has_mark(next)) {
			close(next);
			return mh_fail(
			    r, MH_E_EXISTS, EEXIST,
			    "%.*s is a volume's or a snapshot's directory: no volume lies "
			    "inside another",
			    (int)(s + n - name), name);
		}
		fd = next;
		s += n + 1;
	}
}

/* One of the helper's areas in the base, root's alone (0700). */
int mh_dir_area(int base, const char *which, bool create, struct mh_res *r)
{
	if (create && mkdirat(base, which, 0700) < 0 && errno != EEXIST)
		return mh_fail(r, mh_kind_of_errno(errno), errno, "mkdir %s: %s", which,
		               strerror(errno));
	int fd =
	    openat2_retry(base, which, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, RESOLVE_IN_TREE);
	if (fd < 0)
		return mh_fail(r, mh_kind_of_errno(errno), errno, "open %s: %s", which,
		               strerror(errno));
	if (mh_at_check_dir(fd, which, r) < 0 || fchmod(fd, 0700) < 0) {
		close(fd);
		return mh_fail(r, MH_E_FAILED, errno, "%s: not root's alone", which);
	}
	return fd;
}

/*
 * Open the directory name in dir if it carries id's mark: the fd; -1 with r
 * NOTFOUND if it is absent, EXISTS if something else is there.
 */
int mh_dir_open_marked(int dir, const char *name, const char *id, struct mh_res *r)
{
	int fd = openat2_retry(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, RESOLVE_IN_TREE);
	if (fd < 0) {
		if (errno == ENOENT)
			return mh_fail(r, MH_E_NOTFOUND, ENOENT, "%s does not exist", name);
		return mh_fail(r, MH_E_EXISTS, errno, "%s is not a directory of sepcsi's", name);
	}
	if (!marked(fd, id)) {
		close(fd);
		return mh_fail(r, MH_E_EXISTS, EEXIST,
		               "%s exists and is not %s's: it is left as it is", name, id);
	}
	return fd;
}

/* The volume's marked directory; NOTFOUND if it (or a directory above) is missing. */
int mh_dir_volume_open(int base, const struct mh_req_dir *q, struct mh_res *r)
{
	struct mh_at at = {.dir = -1};
	if (mh_dir_locate(base, q->name, false, &at, r) < 0)
		return -1;
	int fd = mh_dir_open_marked(at.dir, at.name, q->volume_id, r);
	mh_at_close(&at);
	return fd;
}

/*
 * Remove the tree name (a volume or snapshot id) in one of the helper's areas,
 * if present, and only if it proves to be that id's: its mark (the volume's
 * directory keeps it through the rename into the trash), or, unmarked, an
 * empty directory (what a worker killed between mkdir and mark leaves). On
 * btrfs a subvolume with another id's mark is a snapshot made for name by a
 * worker killed before it marked it (only the helper writes in its areas),
 * and a subvolume is destroyed whole, without a walk of its tree.
 * Anything else there is left alone (and then blocks that id's next make or
 * removal, which fails rather than replace it).
 */
int mh_dir_purge(const struct mh_ctx *c, int area_fd, const char *name, struct mh_res *r)
{
	int fd =
	    openat2_retry(area_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, RESOLVE_IN_TREE);
	if (fd < 0)
		return errno == ENOENT
		           ? 0
		           : mh_fail(r, MH_E_FAILED, errno, "open %s: %s", name, strerror(errno));
	bool subvol = mh_btrfs_subvol(fd);
	bool ours = marked(fd, name) || (subvol && has_mark(fd));
	if (ours)
		mh_pause(c, "purge", name); /* tests: a tree about to be emptied */
	if (ours && subvol) {
		int rc = mh_btrfs_destroy(area_fd, name, fd, r);
		close(fd);
		return rc;
	}
	int rc = ours ? mh_tree_empty(fd, r) : 0;
	close(fd);
	if (rc == 0 && unlinkat(area_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT &&
	    (ours || errno != ENOTEMPTY))
		rc = mh_fail(r, MH_E_FAILED, errno, "remove %s: %s", name, strerror(errno));
	return rc;
}

/* Rename name in dir into the trash area and remove it there. */
int mh_dir_trash(const struct mh_ctx *c, int base, int dir, const char *name, const char *id,
                 struct mh_res *r)
{
	int t = mh_dir_area(base, MH_DIR_TRASH, true, r);
	if (t < 0)
		return -1;
	int rc = mh_dir_purge(c, t, id, r);
	/* A read-only subvolume (a snapshot) cannot be renamed: made writable first. */
	int fd = openat2_retry(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, RESOLVE_IN_TREE);
	if (rc == 0 && fd >= 0 && marked(fd, id) && mh_btrfs_subvol(fd))
		rc = mh_btrfs_set_ro(fd, false, r);
	mh_closep(&fd);
	if (rc == 0 && renameat2(dir, name, t, id, RENAME_NOREPLACE) < 0)
		rc = mh_fail(r, mh_kind_of_errno(errno), errno, "move to the trash: %s",
		             strerror(errno));
	if (rc == 0) {
		(void)fsync(dir);
		mh_pause(c, "trashed", id); /* tests: out of its place, not removed yet */
		rc = mh_dir_purge(c, t, id, r);
	}
	close(t);
	return rc;
}

/*
 * Make id's directory in the work area, marked. On btrfs a subvolume: a
 * writable snapshot of src when src is one (*whole: nothing left to copy),
 * else an empty one. An empty one is given mode 0755.
 */
int mh_dir_work_make(const struct mh_ctx *c, int work, const char *id, int src, bool *whole,
                     struct mh_res *r)
{
	*whole = src >= 0 && mh_btrfs_on(work) && mh_btrfs_subvol(src);
	if (mh_dir_purge(c, work, id, r) < 0)
		return -1;
	if (mh_btrfs_on(work) && mh_btrfs_make(work, id, *whole ? src : -1, r) < 0)
		return -1;
	if (!mh_btrfs_on(work) && mkdirat(work, id, 0700) < 0)
		return mh_fail(r, mh_kind_of_errno(errno), errno, "mkdir: %s", strerror(errno));
	int fd = openat2_retry(work, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, RESOLVE_IN_TREE);
	if (fd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "open the new directory: %s",
		               strerror(errno));
	/* A snapshot keeps its source's mode and owner, and carries its source's mark. */
	if (mh_at_mark(fd, id, *whole, r) < 0 || (!*whole && fchmod(fd, 0755) < 0)) {
		mh_fail(r, MH_E_FAILED, errno, "mark the new directory: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

void mh_dir_leftovers(const struct mh_ctx *c, void (*found)(size_t base, const char *id))
{
	static const char *const areas[] = {MH_DIR_WORK, MH_DIR_TRASH};
	for (size_t i = 0; pol_base_dir(c->pol, i); i++) {
		struct mh_res ignore = {0};
		int base = mh_dir_base_open(c, pol_base_dir(c->pol, i), false, &ignore);
		for (size_t k = 0; base >= 0 && k < sizeof(areas) / sizeof(areas[0]); k++) {
			int fd = mh_dir_area(base, areas[k], false, &ignore);
			DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
			struct dirent *e;
			if (!d && fd >= 0)
				close(fd);
			while (d && (e = readdir(d)) != NULL)
				if (pol_volume_id_valid(e->d_name) ||
				    pol_snapshot_id_valid(e->d_name))
					found(i, e->d_name);
			if (d)
				closedir(d);
		}
		if (base >= 0)
			close(base);
	}
}

int mh_dir_purge_id(const struct mh_ctx *c, const char *base_dir, const char *id, struct mh_res *r)
{
	int base = mh_dir_base_open(c, base_dir, false, r);
	if (base < 0)
		return -1;
	int work = mh_dir_area(base, MH_DIR_WORK, false, &(struct mh_res){0});
	int trash = mh_dir_area(base, MH_DIR_TRASH, false, &(struct mh_res){0});
	int ret = (work < 0 || mh_dir_purge(c, work, id, r) == 0) &&
	                  (trash < 0 || mh_dir_purge(c, trash, id, r) == 0)
	              ? 0
	              : -1;
	mh_closep(&trash);
	mh_closep(&work);
	close(base);
	return ret;
}
