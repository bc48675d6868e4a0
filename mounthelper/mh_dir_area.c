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
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "log.h"
#include "mh_btrfs.h"
#include "mh_dir.h"
#include "mh_pause.h"
#include "mh_tree.h"
#include "openat2.h"
#include "pol_view.h"
#include "policy_all.h"

/*
 * Marks on a shared base ([directories] shared_base_dirs). A network file
 * system carries no trusted.* attribute (and one a root-squashing export
 * would not let root set), so there a mark is a record in the base itself:
 * the file <base>/.sepcsi-marks/<inode number, hex>-<birth time> holding the
 * id, and for a kept directory (DIR_DELETE's retain and archive) a second,
 * "...-kept". A name is never used for two objects: an inode number is used
 * again once its object is gone, its birth time not, so a record left by a
 * directory removed by hand (or by a purge killed between its rmdir and the
 * record's removal) marks nothing that takes the number next, and no record
 * is ever rewritten in place. Where the file system keeps no birth time
 * ("0"), a record left behind marks no directory a tenant can make (every
 * such directory lies inside a marked one, which mh_dir_locate never passes)
 * and a directory the helper makes above a volume that takes its number is
 * refused.
 *
 * The records' area is the helper's alone (root's, 0700, as every area),
 * which no tenant reaches: a tenant sees its own directory only, through its
 * pods' binds, and the base lets no one else in. Any node's helper, root
 * there, reads and writes the same records, so a node that did not make a
 * volume proves its directory exactly as the one that did.
 *
 * Which base's records: the base this process opened last (mh_dir_base_open).
 * A worker serves one request at a time, every handler opens its base before
 * it looks at any mark, and no request acts on two bases.
 */
static int shared_marks = -1;          /* the records' area, or -1: trusted.* marks */
static int shared_pubs = -1;           /* its publications' area (below) */
static char shared_node[NAME_MAX + 1]; /* this helper's --node-id, "" for none */
static bool node_only;                 /* --node-only: a node plugin's helper alone */

#define RECORD_MAX 96

/* The names of the object fd's records: its mark's and its kept mark's. -1 if fd cannot be asked.
 */
static int record_names(int fd, char rec[RECORD_MAX], char kept[RECORD_MAX])
{
	struct statx sx;
	char birth[48] = "0";
	if (statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_BTIME, &sx) < 0)
		return -1;
	if (sx.stx_mask & STATX_BTIME)
		snprintf(birth, sizeof(birth), "%lld.%09u", (long long)sx.stx_btime.tv_sec,
		         sx.stx_btime.tv_nsec);
	snprintf(rec, RECORD_MAX, "%llx-%s", (unsigned long long)sx.stx_ino, birth);
	snprintf(kept, RECORD_MAX, "%s-kept", rec);
	return 0;
}

/*
 * Whether the small file name in the records' area dir holds want (NULL: any
 * text; its trailing newline not counted): 1, 0 if it does not or is absent,
 * -1 if it cannot be read.
 */
static int holds(int dir, const char *name, const char *want)
{
	char got[MH_PATH_MAX + 2];
	int fd = openat2_retry(dir, name, O_RDONLY | O_NOFOLLOW, 0, RESOLVE_IN_TREE);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	ssize_t n = read(fd, got, sizeof(got) - 1);
	close(fd);
	if (n < 0)
		return -1;
	if (n > 0 && got[n - 1] == '\n')
		n--;
	got[n] = '\0';
	return !want || strcmp(got, want) == 0;
}

/* 1 if the record name exists and (id not NULL) holds id, 0 if not, -1 if it cannot be read. */
static int record_is(const char *name, const char *id)
{
	return holds(shared_marks, name, id);
}

/* A kept mark's trusted.* value (mh_dir_keep): the volume's, for its inode, but kept. */
static void kept_value(const char *id, ino_t ino, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%llu:kept", id, (unsigned long long)ino);
}

/*
 * Does the open object fd carry the mark of id, for its own inode (kept_too:
 * or the kept mark of id, which no request acts on but an unpublish)?
 */
static bool marked_as(int fd, const char *id, bool kept_too)
{
	struct stat st;
	char rec[RECORD_MAX], kept[RECORD_MAX];
	if (fstat(fd, &st) < 0)
		return false;
	if (shared_marks < 0) {
		char v[MH_ID_MAX + 32];
		kept_value(id, st.st_ino, v, sizeof(v));
		return mh_at_marked(fd, &st, id) ||
		       (kept_too &&
		        fgetxattr(fd, MH_AT_MARK_XATTR, rec, sizeof(rec)) == (ssize_t)strlen(v) &&
		        memcmp(rec, v, strlen(v)) == 0);
	}
	if (record_names(fd, rec, kept) < 0)
		return false;
	int own = record_is(rec, id), k = record_is(kept, id);
	return (own == 1 && record_is(kept, NULL) == 0) || (kept_too && k == 1);
}

static bool marked(int fd, const char *id)
{
	return marked_as(fd, id, false);
}

/*
 * Does the open (not O_PATH) object fd carry a mark of any id (a kept one's
 * too)? True also when the mark cannot be read for any other reason than its
 * absence.
 */
static bool has_mark(int fd)
{
	char rec[RECORD_MAX], kept[RECORD_MAX];
	if (shared_marks < 0)
		return fgetxattr(fd, MH_AT_MARK_XATTR, NULL, 0) >= 0 || errno != ENODATA;
	return record_names(fd, rec, kept) < 0 || record_is(rec, NULL) != 0 ||
	       record_is(kept, NULL) != 0;
}

/*
 * The record name in the area dir, holding text (and a newline if nl), made
 * whole: written under the temporary name tmp (a killed writer leaves only
 * that, which the next one removes), then linked into place: link(2) never
 * replaces a name and is atomic on a network file system too, where
 * renameat2's RENAME_NOREPLACE is refused. 0 with *made (may be NULL) true if
 * made now, false if it held text already; -1 with errno (EEXIST: it holds
 * something else; a name made now whose directory cannot be synced is removed).
 */
static int write_whole(int dir, const char *name, const char *tmp, const char *text, bool nl,
                       bool *made)
{
	if (made)
		*made = false;
	(void)unlinkat(dir, tmp, 0);
	int w = openat2_retry(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600,
	                      RESOLVE_IN_TREE);
	size_t n = strlen(text);
	bool ok = w >= 0 && write(w, text, n) == (ssize_t)n && (!nl || write(w, "\n", 1) == 1) &&
	          fsync(w) == 0;
	ok = ok && linkat(dir, tmp, dir, name, 0) == 0;
	int err = errno;
	mh_closep(&w);
	(void)unlinkat(dir, tmp, 0);
	if (ok && fsync(dir) == 0) {
		if (made)
			*made = true;
		return 0;
	}
	if (ok) { /* made now, not known to last: not kept */
		err = errno;
		(void)unlinkat(dir, name, 0);
	} else if (err == EEXIST && holds(dir, name, text) == 1) {
		return 0; /* made already, by a request killed after it */
	}
	errno = err;
	return -1;
}

/* The mark record name, holding id, made whole (write_whole; temporary name name.new). */
static int write_record(const char *name, const char *id, struct mh_res *r)
{
	char tmp[RECORD_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.new", name);
	if (write_whole(shared_marks, name, tmp, id, false, NULL) == 0)
		return 0;
	return mh_fail(r, MH_E_FAILED, errno, "cannot record the directory as sepcsi's: %s",
	               strerror(errno));
}

/* Mark the object fd, just made, as id's. */
static int mark(int fd, const char *id, bool replace, struct mh_res *r)
{
	char rec[RECORD_MAX], kept[RECORD_MAX];
	if (shared_marks < 0)
		return mh_at_mark(fd, id, replace, r);
	if (record_names(fd, rec, kept) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "statx: %s", strerror(errno));
	/* Only without birth times can records by these names be there: of an object gone. */
	(void)unlinkat(shared_marks, kept, 0);
	(void)unlinkat(shared_marks, rec, 0);
	return write_record(rec, id, r);
}

/*
 * A kept directory (DIR_DELETE's retain and archive): its mark becomes a kept
 * one's, still a mark (no volume is ever made or found inside it) but no
 * longer the volume's: no request for that id publishes, grows, copies or
 * removes it again (an unpublish still unbinds it), and on a shared base no
 * node adopts it. There the kept record is made first and the volume's then
 * removed, so a kill between leaves it kept.
 */
int mh_dir_keep(int fd, const char *id, struct mh_res *r)
{
	struct stat st;
	char v[MH_ID_MAX + 48];
	if (shared_marks >= 0) {
		char rec[RECORD_MAX], kept[RECORD_MAX];
		if (record_names(fd, rec, kept) < 0)
			return mh_fail(r, MH_E_FAILED, errno, "statx: %s", strerror(errno));
		if (write_record(kept, id, r) < 0)
			return -1;
		(void)unlinkat(shared_marks, rec, 0);
		(void)fsync(shared_marks);
		return 0;
	}
	if (fstat(fd, &st) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "stat the directory: %s", strerror(errno));
	kept_value(id, st.st_ino, v, sizeof(v));
	int rc = fsetxattr(fd, MH_AT_MARK_XATTR, v, strlen(v), XATTR_REPLACE);
	/* A subvolume its tenant made read-only: writable for the mark, then read-only again. */
	if (rc < 0 && errno == EROFS && mh_btrfs_subvol(fd)) {
		if (mh_btrfs_set_ro(fd, false, r) < 0)
			return -1;
		rc = fsetxattr(fd, MH_AT_MARK_XATTR, v, strlen(v), XATTR_REPLACE);
		int err = errno;
		if (mh_btrfs_set_ro(fd, true, r) < 0)
			return -1;
		errno = err;
	}
	if (rc < 0)
		return mh_fail(r, MH_E_FAILED, errno, "mark the directory kept: %s",
		               strerror(errno));
	return 0;
}

/*
 * After the object whose records are named rec and kept is gone: they go too
 * when they are id's (NULL: it had none), and so does what a worker killed
 * while writing one left (rec.new, kept.new: names of that object alone).
 */
static void unmark(const char *rec, const char *kept, const char *id)
{
	char tmp[RECORD_MAX + 8];
	if (shared_marks < 0 || !rec[0])
		return;
	for (int k = 0; k < 2; k++) {
		const char *name = k ? kept : rec;
		if (id && record_is(name, id) == 1)
			(void)unlinkat(shared_marks, name, 0);
		snprintf(tmp, sizeof(tmp), "%s.new", name);
		(void)unlinkat(shared_marks, tmp, 0);
	}
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

/*
 * One of a shared base's record areas (ro: not made, not changed), as every
 * area, root's alone: the fd, or -1 with r.
 */
static int area_open(int base, const char *which, bool ro, struct mh_res *r)
{
	if (!ro)
		return mh_dir_area(base, which, true, r);
	int fd =
	    openat2_retry(base, which, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, RESOLVE_IN_TREE);
	if (fd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "open %s: %s", which, strerror(errno));
	if (mh_at_check_dir(fd, which, r) < 0)
		mh_closep(&fd);
	return fd;
}

/* The base (ro: its read-only clone), O_RDONLY: quotactl_fd and fstatvfs want a real fd. */
int mh_dir_base_open(const struct mh_ctx *c, const char *base, bool ro, struct mh_res *r)
{
	size_t i = 0;
	while (pol_base_dir(c->pol, i) && strcmp(pol_base_dir(c->pol, i), base) != 0)
		i++;
	mh_closep(&shared_marks);
	mh_closep(&shared_pubs);
	int fd =
	    open(ro ? pol_view_ro_base(i) : base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "cannot open base directory %s: %s", base,
		               strerror(errno));
	if (mh_at_check_dir(fd, "the base directory", r) < 0 || keep_private(fd, base, ro, r) < 0 ||
	    (pol_base_shared(c->pol, i) &&
	     ((shared_marks = area_open(fd, MH_DIR_MARKS, ro, r)) < 0 ||
	      (shared_pubs = area_open(fd, MH_DIR_PUBS, ro, r)) < 0))) {
		mh_closep(&shared_marks);
		close(fd);
		return -1;
	}
	return fd;
}

bool mh_dir_shared(void)
{
	return shared_marks >= 0;
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
static int open_marked(int dir, const char *name, const char *id, bool kept_too, struct mh_res *r)
{
	int fd = openat2_retry(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, RESOLVE_IN_TREE);
	if (fd < 0) {
		if (errno == ENOENT)
			return mh_fail(r, MH_E_NOTFOUND, ENOENT, "%s does not exist", name);
		return mh_fail(r, MH_E_EXISTS, errno, "%s is not a directory of sepcsi's", name);
	}
	if (!marked_as(fd, id, kept_too)) {
		close(fd);
		return mh_fail(r, MH_E_EXISTS, EEXIST,
		               "%s exists and is not %s's: it is left as it is", name, id);
	}
	return fd;
}

int mh_dir_open_marked(int dir, const char *name, const char *id, struct mh_res *r)
{
	return open_marked(dir, name, id, false, r);
}

/* The volume's marked directory; NOTFOUND if it (or a directory above) is missing. */
int mh_dir_volume_open(int base, const struct mh_req_dir *q, bool kept_too, struct mh_res *r)
{
	struct mh_at at = {.dir = -1};
	if (mh_dir_locate(base, q->name, false, &at, r) < 0)
		return -1;
	int fd = open_marked(at.dir, at.name, q->volume_id, kept_too, r);
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
	char rec[RECORD_MAX] = "", kept[RECORD_MAX] = "";
	bool subvol = mh_btrfs_subvol(fd);
	bool ours = marked(fd, name) || (subvol && has_mark(fd));
	if (shared_marks >= 0 && record_names(fd, rec, kept) < 0)
		ours = false;
	/*
	 * A shared base: a volume some node still publishes is never emptied, even
	 * if a delete that moved it into the trash died before it could look
	 * (mh_dir_still_free) or move it back: it waits there for the unpublish.
	 */
	if (ours && mh_dir_shared() && pol_volume_id_valid(name) &&
	    mh_dir_published(name, r) != 0) {
		close(fd);
		return -1;
	}
	if (ours)
		mh_pause(c, "purge", name); /* tests: a tree about to be emptied */
	if (ours && subvol) {
		int rc = mh_btrfs_destroy(area_fd, name, fd, r);
		close(fd);
		return rc;
	}
	int rc = ours ? mh_tree_empty(fd, r) : 0;
	close(fd);
	bool gone = false;
	if (rc == 0 && (unlinkat(area_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT))
		gone = true;
	else if (rc == 0 && (ours || errno != ENOTEMPTY))
		rc = mh_fail(r, MH_E_FAILED, errno, "remove %s: %s", name, strerror(errno));
	if (gone)
		unmark(rec, kept, ours ? name : NULL);
	return rc;
}

/*
 * On a shared base, after volume id's directory moved from dir/name to
 * to/to_name: if a node published it meanwhile (its record written before it
 * opened the directory, mh_dir_pub_note), it goes back where it was and the
 * move is refused. 0, or -1 with r.
 */
int mh_dir_still_free(const char *id, int dir, const char *name, int to, const char *to_name,
                      struct mh_res *r)
{
	if (mh_dir_published(id, r) == 0)
		return 0;
	/* Failing that, the trash keeps it whole until no node publishes it (mh_dir_purge). */
	if (renameat2(to, to_name, dir, name, RENAME_NOREPLACE) < 0)
		log_kv(LOG_LVL_ERROR, "dir_move_back_failed", "volume", id, "error",
		       strerror(errno), NULL);
	return -1;
}

/* Rename name in dir into the trash area and remove it there. */
int mh_dir_trash(const struct mh_ctx *c, int base, int dir, const char *name, const char *id,
                 struct mh_res *r)
{
	int t = mh_dir_area(base, MH_DIR_TRASH, true, r);
	if (t < 0)
		return -1;
	int rc = mh_dir_purge(c, t, id, r);
	struct stat was = {0}, moved;
	/* A read-only subvolume (a snapshot) cannot be renamed: made writable first. */
	int fd = openat2_retry(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, RESOLVE_IN_TREE);
	if (rc == 0 && (fd < 0 || !marked(fd, id) || fstat(fd, &was) < 0))
		rc = mh_fail(r, MH_E_EXISTS, EEXIST, "%s is not %s's any more", name, id);
	if (rc == 0 && mh_btrfs_subvol(fd))
		rc = mh_btrfs_set_ro(fd, false, r);
	mh_closep(&fd);
	if (rc == 0 && renameat2(dir, name, t, id, RENAME_NOREPLACE) < 0)
		rc = mh_fail(r, mh_kind_of_errno(errno), errno, "move to the trash: %s",
		             strerror(errno));
	/* What moved is what was proved id's (a name another request changed meanwhile goes back).
	 */
	if (rc == 0 && (fstatat(t, id, &moved, AT_SYMLINK_NOFOLLOW) < 0 ||
	                moved.st_dev != was.st_dev || moved.st_ino != was.st_ino)) {
		(void)renameat2(t, id, dir, name, RENAME_NOREPLACE);
		rc = mh_fail(r, MH_E_FAILED, EAGAIN, "%s changed while it was moved", name);
	}
	if (rc == 0 && mh_dir_shared() && mh_dir_still_free(id, dir, name, t, id, r) < 0)
		rc = -1;
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
	if (mark(fd, id, *whole, r) < 0 || (!*whole && fchmod(fd, 0755) < 0)) {
		mh_fail(r, MH_E_FAILED, errno, "mark the new directory: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Publications on a shared base: the file <base>/.sepcsi-published/<volume
 * id>@<node id>@<hash of the target path> (FNV-1a, 16 hex digits), holding
 * the target, written by the node that binds before it opens the volume's
 * directory and removed once its bind is gone. The node id is the helper's
 * own (--node-id, from the supervisor), never a request's: a node removes
 * only its own records, whatever target it is sent. A delete on any node
 * moves the directory away first and looks for publications after
 * (mh_dir_published): a publication that opened the directory before the
 * move wrote its record before that, and is seen.
 */
static void pub_name(const char *id, const char *target, bool one, char *buf, size_t len)
{
	uint64_t h = 14695981039346656037ULL;
	for (const unsigned char *p = (const unsigned char *)target; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	snprintf(buf, len, "%s@%s@%016llx%s", id, shared_node, (unsigned long long)h,
	         one ? "@1" : "");
}

/*
 * A record's temporary name while it is written: ".n-" in place of the
 * volume id's "sv-", so no volume id's scan sees it, and no longer than the
 * record's own name.
 */
static void pub_tmp_name(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, ".n-%s", name + 3);
}

/* 1 if the publication record name holds target, 0 if not or absent, -1 if unreadable. */
static int pub_holds(const char *name, const char *target)
{
	return holds(shared_pubs, name, target);
}

void mh_dir_set_node(const char *node, bool only)
{
	snprintf(shared_node, sizeof(shared_node), "%s", node ? node : "");
	node_only = only;
}

/* Remove the record of id's publication at target made in mode one, if it holds target. */
static int pub_remove(const char *id, const char *target, bool one, struct mh_res *r)
{
	char name[MH_ID_MAX + NAME_MAX + 32], tmp[MH_ID_MAX + NAME_MAX + 32];
	pub_name(id, target, one, name, sizeof(name));
	pub_tmp_name(name, tmp, sizeof(tmp));
	(void)unlinkat(shared_pubs, tmp, 0); /* what a killed writer left */
	if (pub_holds(name, target) == 1 && unlinkat(shared_pubs, name, 0) < 0 && errno != ENOENT)
		return mh_fail(r, MH_E_FAILED, errno, "remove the publication's record: %s",
		               strerror(errno));
	return 0;
}

int mh_dir_pub_note(const char *id, const char *target, int one, bool *made, struct mh_res *r)
{
	char name[MH_ID_MAX + NAME_MAX + 32], tmp[MH_ID_MAX + NAME_MAX + 32];
	if (!shared_node[0])
		return mh_fail(r, MH_E_REFUSED, EPERM,
		               "this helper serves no node plugin (no --node-id): it publishes "
		               "nothing on a shared base");
	if (one < 0) /* removed, whichever mode it was made with, if it is this target's */
		return pub_remove(id, target, false, r) < 0 || pub_remove(id, target, true, r) < 0
		           ? -1
		           : 0;
	/*
	 * Written whole or not at all (write_whole): a worker killed while writing
	 * leaves only the temporary name, never a record that holds no target and
	 * would stand in the way of this target for good.
	 */
	pub_name(id, target, one, name, sizeof(name));
	pub_tmp_name(name, tmp, sizeof(tmp));
	if (write_whole(shared_pubs, name, tmp, target, true, made) == 0)
		return 0;
	if (errno == EEXIST) /* another target of this node's, its hash the same */
		return mh_fail(r, MH_E_FAILED, EEXIST, "the publication's record is another's");
	return mh_fail(r, MH_E_FAILED, errno, "record the publication: %s", strerror(errno));
}

void mh_dir_pub_undo(const char *id, const char *target, bool one)
{
	if (shared_node[0])
		(void)pub_remove(id, target, one, &(struct mh_res){0});
}

/* Which of volume id's publications pub_scan() looks for. */
enum pub_which {
	PUB_ANY,       /* any node's, this one's too */
	PUB_OTHER,     /* another node's */
	PUB_OTHER_ONE, /* another node's, made in a single-node access mode */
};

/* 0 if none of volume id's publications is one of which, else 1 with r PRECONDITION (or -1). */
static int pub_scan(const char *id, enum pub_which which, struct mh_res *r)
{
	size_t n = strlen(id), own = strlen(shared_node);
	int fd = openat2_retry(shared_pubs, ".", O_RDONLY | O_DIRECTORY, 0, RESOLVE_IN_TREE);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	if (!d) {
		mh_closep(&fd);
		return mh_fail(r, MH_E_FAILED, errno, "read %s: %s", MH_DIR_PUBS, strerror(errno));
	}
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, id, n) != 0 || e->d_name[n] != '@')
			continue;
		const char *node = e->d_name + n + 1, *at = strchr(node, '@');
		if (!at)
			continue;
		size_t len = strlen(e->d_name);
		bool mine = (size_t)(at - node) == own && strncmp(node, shared_node, own) == 0;
		bool one = len > 2 && strcmp(e->d_name + len - 2, "@1") == 0;
		if ((which != PUB_ANY && mine) || (which == PUB_OTHER_ONE && !one))
			continue;
		mh_fail(r, MH_E_PRECONDITION, EBUSY, "volume %s is published on node %.*s%s", id,
		        (int)(at - node), node,
		        which == PUB_ANY ? ": unpublish it there first"
		                         : ", and a single-node access mode allows no other");
		break;
	}
	closedir(d);
	return r->kind == MH_E_OK ? 0 : 1;
}

int mh_dir_other_nodes(const char *id, bool one, struct mh_res *r)
{
	return pub_scan(id, one ? PUB_OTHER : PUB_OTHER_ONE, r);
}

int mh_dir_published(const char *id, struct mh_res *r)
{
	return pub_scan(id, PUB_ANY, r);
}

int mh_dir_node_known(int base, const char *node, struct mh_res *r)
{
	struct stat st;
	int area = mh_dir_area(base, MH_DIR_NODES, false, r);
	if (area < 0)
		return mh_missing_means(r, MH_E_NOTFOUND);
	int rc = fstatat(area, node, &st, AT_SYMLINK_NOFOLLOW);
	close(area);
	if (rc == 0 && S_ISREG(st.st_mode))
		return 0;
	return mh_fail(r, MH_E_NOTFOUND, ENOENT,
	               "no node plugin with node id %.128s has started on this base", node);
}

int mh_dir_shared_check(const struct mh_ctx *c, size_t i, const char *node, struct mh_res *r)
{
	const char *b = pol_base_dir(c->pol, i);
	struct statfs sfs;
	struct stat st;
	/* A publication's record is one name: <volume id>@<node id>@<16 hex digits>@1. */
	if (node && strlen(node) > MH_DIR_NODE_MAX)
		return mh_fail(r, MH_E_REFUSED, ENAMETOOLONG,
		               "a node id is at most %d bytes on a shared base (its publications' "
		               "records are named by it); this one is %zu",
		               MH_DIR_NODE_MAX, strlen(node));
	int base = mh_dir_base_open(c, b, false, r), fd = -1;
	if (base < 0)
		return -1;
	/* Inode numbers name the records; every btrfs subvolume's root has the same one. */
	if (fstatfs(base, &sfs) == 0 && sfs.f_type == BTRFS_SUPER_MAGIC)
		mh_fail(r, MH_E_REFUSED, EINVAL, "a btrfs base cannot be shared");
	else if ((fd = openat(shared_marks, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600)) < 0 &&
	         (fd = openat2_retry(shared_marks, ".probe", O_WRONLY | O_CREAT | O_NOFOLLOW, 0600,
	                             RESOLVE_IN_TREE)) < 0)
		mh_fail(r, MH_E_FAILED, errno, "cannot write in %s: %s", MH_DIR_MARKS,
		        strerror(errno));
	else if (fstat(fd, &st) < 0 || st.st_uid != 0 || st.st_gid != 0)
		mh_fail(r, MH_E_REFUSED, EPERM,
		        "what root makes there is not root's: the export squashes root");
	(void)unlinkat(shared_marks, ".probe", 0);
	mh_closep(&fd);
	/* This node's plugin: a record any controller's ControllerPublishVolume looks for. */
	int nodes = r->kind == MH_E_OK && node ? mh_dir_area(base, MH_DIR_NODES, true, r) : -1;
	if (nodes >= 0 && (fd = openat2_retry(nodes, node, O_WRONLY | O_CREAT | O_NOFOLLOW, 0600,
	                                      RESOLVE_IN_TREE)) < 0)
		mh_fail(r, MH_E_FAILED, errno, "record node %s: %s", node, strerror(errno));
	mh_closep(&fd);
	mh_closep(&nodes);
	mh_closep(&shared_marks); /* the main loop opens its base again for each request */
	mh_closep(&shared_pubs);
	close(base);
	return r->kind == MH_E_OK ? 0 : -1;
}

void mh_dir_leftovers(const struct mh_ctx *c, void (*found)(size_t base, const char *id))
{
	static const char *const areas[] = {MH_DIR_WORK, MH_DIR_TRASH};
	for (size_t i = 0; pol_base_dir(c->pol, i); i++) {
		struct mh_res ignore = {0};
		/*
		 * A shared base's areas hold what the controller's helper, on another
		 * node, may be doing right now: a node plugin's helper leaves them to
		 * that one's (a volume any node publishes is never emptied anyway,
		 * mh_dir_purge).
		 */
		if (pol_base_shared(c->pol, i) && node_only)
			continue;
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
