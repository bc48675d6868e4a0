/*
 * A directory volume's tree: removed (DIR_DELETE, DIR_DELETE_SNAPSHOT) or
 * copied (DIR_SNAPSHOT, DIR_CREATE from a source).
 *
 * Runs in a helper worker as root with the helper's capabilities
 * (CAP_DAC_OVERRIDE, CAP_FOWNER and CAP_FSETID among them with directory
 * volumes), under seccomp. Nothing here is fatal.
 *
 * Safety argument. A volume's content belongs to its pods: any name, any
 * owner, symlinks to /etc, hard links to files elsewhere, sticky or mode-0
 * directories, entries renamed while the helper works. So the helper never
 * walks a path. It holds a descriptor of each directory it is in, opens the
 * next one with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) and O_NOFOLLOW (so neither a
 * symlink nor a mount point is ever entered: a mount inside the tree stops the
 * removal with BUSY rather than reaching what is mounted there), and acts on
 * one entry of that directory at a time: unlinkat removes a symlink or a hard
 * link itself, never what it names. A rename by a pod meanwhile can only move
 * things within the tree, which the helper is removing or copying anyway.
 * Copies are made of open descriptors (the data by sepcsi-runner, which gets
 * the two fds), symlinks are copied as text, hard links are linked again
 * inside the copy by a name resolved the same way.
 */
#include "mh_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "mh_at.h"
#include "mh_tools.h"

#define RM_DEPTH   64   /* directories deeper than this are moved up, not descended into */
#define RM_ROUNDS  4096 /* passes over one directory before giving up on it */
#define COPY_DEPTH 256  /* a deeper tree is not copied */
#define XATTR_BUF  65536

static int tree_fail(struct mh_res *r, int err, const char *what, const char *name)
{
	if (err == EXDEV || err == EBUSY)
		return mh_fail(r, MH_E_BUSY, err,
		               "something is mounted inside the volume (at an entry %.40s): "
		               "nothing beneath it is touched",
		               name);
	return mh_fail(r, mh_kind_of_errno(err), err, "%s %.60s: %s", what, name, strerror(err));
}

static int open_dir(int dirfd, const char *name)
{
	return mh_openat2(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, MH_RESOLVE_TREE);
}

static bool dots(const char *n)
{
	return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

/* ---- removal --------------------------------------------------------------- */

struct rm {
	int top;        /* the directory being emptied: deep subtrees are moved here */
	unsigned moved; /* names given to them */
};

static int rm_contents(struct rm *t, int fd, int depth, struct mh_res *r);

/* NOLINTNEXTLINE(misc-no-recursion): one level per directory, bounded (RM_DEPTH, COPY_DEPTH) */
static int rm_entry(struct rm *t, int dirfd, const char *name, unsigned char type, int depth,
                    struct mh_res *r)
{
	struct stat st;
	if (type == DT_UNKNOWN) {
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return errno == ENOENT ? 0 : tree_fail(r, errno, "stat", name);
		type = S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
	}
	if (type != DT_DIR) {
		if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
			return 0;
		if (errno != EISDIR) /* EISDIR: a directory took its name meanwhile */
			return tree_fail(r, errno, "remove", name);
	}
	if (depth >= RM_DEPTH) {
		/* One descriptor per level would run out: move it to the top, emptied later. */
		char up[40];
		int rc;
		do { /* a pod may have used the name already: the next one */
			snprintf(up, sizeof(up), ".sepcsi-deep-%u", t->moved++);
			rc = renameat2(dirfd, name, t->top, up, RENAME_NOREPLACE);
		} while (rc < 0 && errno == EEXIST);
		if (rc == 0 || errno == ENOENT)
			return 0;
		return tree_fail(r, errno, "move up", name);
	}
	int fd = open_dir(dirfd, name);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == ENOTDIR || errno == ELOOP) /* a file or symlink took its name */
			return unlinkat(dirfd, name, 0) == 0 || errno == ENOENT
			           ? 0
			           : tree_fail(r, errno, "remove", name);
		return tree_fail(r, errno, "open", name);
	}
	int rc = rm_contents(t, fd, depth + 1, r);
	close(fd);
	if (rc < 0)
		return -1;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	return tree_fail(r, errno, "remove directory", name);
}

/* Pass over fd until a pass finds it empty (entries may come and go meanwhile). */
/* NOLINTNEXTLINE(misc-no-recursion): one level per directory, bounded (RM_DEPTH, COPY_DEPTH) */
static int rm_contents(struct rm *t, int fd, int depth, struct mh_res *r)
{
	for (int round = 0; round < RM_ROUNDS; round++) {
		int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
		if (!d) {
			if (dfd >= 0)
				close(dfd);
			return tree_fail(r, errno, "read", "a directory");
		}
		bool any = false;
		int ret = 0;
		struct dirent *e;
		while (ret == 0 && (e = readdir(d)) != NULL) {
			if (dots(e->d_name))
				continue;
			any = true;
			ret = rm_entry(t, fd, e->d_name, e->d_type, depth, r);
		}
		closedir(d);
		if (ret < 0 || !any)
			return ret;
	}
	return mh_fail(r, MH_E_BUSY, ENOTEMPTY, "the volume is still being written to");
}

int mh_tree_empty(int dirfd, struct mh_res *r)
{
	struct rm t = {.top = dirfd};
	return rm_contents(&t, dirfd, 0, r);
}

/* ---- copy ------------------------------------------------------------------ */

struct link {
	dev_t dev;
	ino_t ino;
	char *rel; /* its first copy's path, relative to the copy's root */
};

struct cp {
	struct mh_tree_copied *out;
	int dst_root;
	char rel[PATH_MAX]; /* the directory being filled, relative to dst_root ("" the root) */
	size_t rel_len;
	struct link *links;
	size_t nlinks, cap;
	char *buf; /* XATTR_BUF bytes: names, then values */
};

/* Extended attributes (not trusted.*, which holds the helper's marks, nor security.*). */
static int copy_xattrs(struct cp *cp, int src, int dst, const char *name, struct mh_res *r)
{
	char *names = cp->buf, *value = cp->buf + XATTR_BUF / 2;
	ssize_t n = flistxattr(src, names, XATTR_BUF / 2);
	if (n < 0)
		return errno == ENOTSUP ? 0 : tree_fail(r, errno, "list attributes of", name);
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
		const char *x = names + i;
		if (strncmp(x, "trusted.", 8) == 0 || strncmp(x, "security.", 9) == 0)
			continue;
		ssize_t v = fgetxattr(src, x, value, XATTR_BUF / 2);
		if (v < 0 && errno == ENODATA)
			continue;
		if (v < 0 || fsetxattr(dst, x, value, (size_t)v, XATTR_CREATE) < 0)
			return tree_fail(r, errno, "copy an attribute of", name);
	}
	return 0;
}

/* Owner, then mode (after the chown, which may clear set-id bits), then times. */
static int copy_meta(struct cp *cp, int src, int dst, const struct stat *st, const char *name,
                     struct mh_res *r)
{
	const struct timespec ts[2] = {st->st_atim, st->st_mtim};
	if (copy_xattrs(cp, src, dst, name, r) < 0)
		return -1;
	if (fchown(dst, st->st_uid, st->st_gid) < 0 || fchmod(dst, st->st_mode & 07777) < 0 ||
	    futimens(dst, ts) < 0)
		return tree_fail(r, errno, "set owner, mode or times of", name);
	return 0;
}

static int push(struct cp *cp, const char *name, size_t *saved)
{
	*saved = cp->rel_len;
	int n = snprintf(cp->rel + cp->rel_len, sizeof(cp->rel) - cp->rel_len, "%s%s",
	                 cp->rel_len ? "/" : "", name);
	if (n < 0 || (size_t)n >= sizeof(cp->rel) - cp->rel_len)
		return -1;
	cp->rel_len += (size_t)n;
	return 0;
}

static void pop(struct cp *cp, size_t saved)
{
	cp->rel_len = saved;
	cp->rel[saved] = '\0';
}

/* A second name of a file already copied: a hard link to that copy, found without symlinks. */
static int link_again(struct cp *cp, const struct link *l, int dfd, const char *name,
                      struct mh_res *r)
{
	const char *slash = strrchr(l->rel, '/'), *leaf = slash ? slash + 1 : l->rel;
	int pfd = cp->dst_root, ret = 0;
	if (slash) {
		char parent[PATH_MAX];
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - l->rel), l->rel);
		pfd = mh_openat2(cp->dst_root, parent, O_PATH | O_DIRECTORY, 0, MH_RESOLVE_TREE);
		if (pfd < 0)
			return tree_fail(r, errno, "find the first copy of", name);
	}
	if (linkat(pfd, leaf, dfd, name, 0) < 0)
		ret = tree_fail(r, errno, "link", name);
	if (pfd != cp->dst_root)
		close(pfd);
	return ret;
}

static int remember(struct cp *cp, const struct stat *st, const char *name)
{
	size_t saved;
	if (cp->nlinks == cp->cap) {
		size_t cap = cp->cap ? cp->cap * 2 : 64;
		struct link *l = realloc(cp->links, cap * sizeof(*l));
		if (!l)
			abort();
		cp->links = l;
		cp->cap = cap;
	}
	if (push(cp, name, &saved) < 0)
		return -1;
	struct link *l = &cp->links[cp->nlinks];
	*l = (struct link){st->st_dev, st->st_ino, strdup(cp->rel)};
	pop(cp, saved);
	if (!l->rel)
		abort();
	cp->nlinks++;
	return 0;
}

static int copy_file(struct cp *cp, int sfd, int dfd, const char *name, struct mh_res *r)
{
	struct stat st;
	bool reflinked = false;
	int src = mh_openat2(sfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, MH_RESOLVE_TREE),
	    dst = -1, ret = -1;
	if (src < 0)
		return errno == ENOENT ? 0 : tree_fail(r, errno, "open", name);
	if (fstat(src, &st) < 0) {
		tree_fail(r, errno, "stat", name);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) { /* replaced meanwhile by something not copied */
		cp->out->skipped++;
		ret = 0;
		goto out;
	}
	if (st.st_nlink > 1) {
		for (size_t i = 0; i < cp->nlinks; i++) {
			if (cp->links[i].dev == st.st_dev && cp->links[i].ino == st.st_ino) {
				ret = link_again(cp, &cp->links[i], dfd, name, r);
				goto out;
			}
		}
	}
	dst =
	    mh_openat2(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600, MH_RESOLVE_TREE);
	if (dst < 0) {
		tree_fail(r, errno, "create", name);
		goto out;
	}
	if (mh_tools_copy(src, dst, 0, &reflinked, r) < 0 ||
	    copy_meta(cp, src, dst, &st, name, r) < 0)
		goto out;
	if (st.st_nlink > 1 && remember(cp, &st, name) < 0) {
		mh_fail(r, MH_E_FAILED, ENAMETOOLONG, "path too long in the copy");
		goto out;
	}
	cp->out->bytes += (uint64_t)st.st_size;
	cp->out->reflinked = cp->out->reflinked && reflinked;
	ret = 0;
out:
	mh_closep(&src);
	mh_closep(&dst);
	return ret;
}

static int copy_symlink(int sfd, int dfd, const char *name, const struct stat *st, struct mh_res *r)
{
	char target[PATH_MAX];
	const struct timespec ts[2] = {st->st_atim, st->st_mtim};
	ssize_t n = readlinkat(sfd, name, target, sizeof(target) - 1);
	if (n < 0)
		return errno == ENOENT ? 0 : tree_fail(r, errno, "read symlink", name);
	target[n] = '\0';
	/* Copied as text, never resolved: it means in the copy what it meant in the source. */
	if (symlinkat(target, dfd, name) < 0 ||
	    fchownat(dfd, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0 ||
	    utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return tree_fail(r, errno, "copy symlink", name);
	return 0;
}

static int copy_dir(struct cp *cp, int sfd, int dfd, int depth, struct mh_res *r);

/* NOLINTNEXTLINE(misc-no-recursion): one level per directory, bounded (RM_DEPTH, COPY_DEPTH) */
static int copy_subdir(struct cp *cp, int sfd, int dfd, const char *name, int depth,
                       struct mh_res *r)
{
	struct stat st;
	size_t saved;
	int s = -1, d = -1, ret = -1;
	if (depth >= COPY_DEPTH)
		return mh_fail(r, MH_E_REFUSED, ELOOP, "the tree is deeper than %d directories",
		               COPY_DEPTH);
	if ((s = open_dir(sfd, name)) < 0) {
		if (errno == ENOENT)
			return 0;
		return tree_fail(r, errno, "open", name);
	}
	if (fstat(s, &st) < 0 || mkdirat(dfd, name, 0700) < 0 || (d = open_dir(dfd, name)) < 0) {
		tree_fail(r, errno, "make directory", name);
		goto out;
	}
	if (push(cp, name, &saved) < 0) {
		mh_fail(r, MH_E_FAILED, ENAMETOOLONG, "path too long in the copy");
		goto out;
	}
	ret = copy_dir(cp, s, d, depth + 1, r);
	pop(cp, saved);
	/* The directory's own mode and times last: filling it changed its times. */
	if (ret == 0)
		ret = copy_meta(cp, s, d, &st, name, r);
out:
	mh_closep(&s);
	mh_closep(&d);
	return ret;
}

/* NOLINTNEXTLINE(misc-no-recursion): one level per directory, bounded (RM_DEPTH, COPY_DEPTH) */
static int copy_dir(struct cp *cp, int sfd, int dfd, int depth, struct mh_res *r)
{
	int fd = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return tree_fail(r, errno, "read", "a directory");
	}
	struct dirent *e;
	while (ret == 0 && (e = readdir(d)) != NULL) {
		struct stat st;
		if (dots(e->d_name))
			continue;
		if (fstatat(sfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				ret = tree_fail(r, errno, "stat", e->d_name);
			continue;
		}
		if (S_ISDIR(st.st_mode))
			ret = copy_subdir(cp, sfd, dfd, e->d_name, depth, r);
		else if (S_ISREG(st.st_mode))
			ret = copy_file(cp, sfd, dfd, e->d_name, r);
		else if (S_ISLNK(st.st_mode))
			ret = copy_symlink(sfd, dfd, e->d_name, &st, r);
		else
			cp->out->skipped++; /* device nodes, FIFOs, sockets */
	}
	closedir(d);
	return ret;
}

int mh_tree_copy(int src, int dst, struct mh_tree_copied *out, struct mh_res *r)
{
	struct stat st;
	struct cp cp = {.out = out, .dst_root = dst, .buf = malloc(XATTR_BUF)};
	if (!cp.buf)
		abort();
	*out = (struct mh_tree_copied){.reflinked = true};
	int ret = fstat(src, &st) < 0 ? tree_fail(r, errno, "stat", "the source") : 0;
	if (ret == 0)
		ret = copy_dir(&cp, src, dst, 0, r);
	if (ret == 0)
		ret = copy_meta(&cp, src, dst, &st, "the volume's directory", r);
	for (size_t i = 0; i < cp.nlinks; i++)
		free(cp.links[i].rel);
	free(cp.links);
	free(cp.buf);
	return ret;
}
