/*
 * A directory volume's tree: emptied (RN_TREE_EMPTY: DIR_DELETE,
 * DIR_DELETE_SNAPSHOT) or copied (RN_TREE_COPY: DIR_SNAPSHOT, DIR_CREATE from
 * a source), on the directory descriptors the helper opened and checked; on a
 * btrfs base, the few subvolume calls that need CAP_FOWNER (RN_TREE_SUBVOL:
 * snapshot, read-only flag, a trashed directory's sticky bit) instead.
 *
 * Runs in the tree runner (sepcsi-tree-runner), a job's child: uid 0 with
 * CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID and CAP_CHOWN only (a volume's
 * files belong to its pods' users, with any mode), under its own seccomp
 * filter (policy/seccomp_tools.c: no mount API, no loop ioctl, no trusted.*
 * xattr, no exec), in a view without kubelet's directories or the base
 * directories: it reaches a volume only through the descriptors it is given.
 * The helper, which holds CAP_SYS_ADMIN, never walks a pod's tree itself.
 * Nothing here is fatal: a failure is the job's answer.
 *
 * Safety argument. A volume's content belongs to its pods: any name, any
 * owner, symlinks to /etc, hard links to files elsewhere, sticky or mode-0
 * directories, entries renamed while the walk runs. So the walk never
 * follows a path. It holds a descriptor of each directory it is in, opens the
 * next one with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) and O_NOFOLLOW (so neither a
 * symlink nor a mount point is ever entered: a mount inside the tree stops the
 * removal with BUSY rather than reaching what is mounted there), and acts on
 * one entry of that directory at a time: unlinkat removes a symlink or a hard
 * link itself, never what it names. A rename by a pod meanwhile can only move
 * things within the tree, which is being removed or copied anyway. Copies are
 * made of open descriptors, symlinks are copied as text, hard links are
 * linked again inside the copy by a name resolved the same way. The helper's
 * marks (trusted.*) are neither copied nor readable here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/btrfs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "openat2.h"
#include "runner.h"

#define RM_DEPTH   64   /* directories deeper than this are moved up, not descended into */
#define RM_ROUNDS  4096 /* passes over one directory before giving up on it */
#define COPY_DEPTH 256  /* a deeper tree is not copied */
#define XATTR_BUF  65536

/* The job's answer, and the socket on which the helper waits for it. */
struct job {
	int sock;
	struct rn_answer *a;
};

/* Record the first failure (the root cause) in the answer; -1. */
static int __attribute__((format(printf, 4, 5)))
fail(struct job *j, int status, int err, const char *fmt, ...)
{
	va_list ap;
	if (j->a->err)
		return -1;
	j->a->status = status;
	j->a->err = err ? err : EIO;
	va_start(ap, fmt);
	vsnprintf(j->a->reason, sizeof(j->a->reason), fmt, ap);
	va_end(ap);
	return -1;
}

static int tree_fail(struct job *j, int err, const char *what, const char *name)
{
	if (err == EXDEV || err == EBUSY)
		return fail(j, RN_TREE_BUSY, err,
		            "something is mounted inside the volume (at an entry %.40s): "
		            "nothing beneath it is touched",
		            name);
	return fail(j, 0, err, "%s %.60s: %s", what, name, strerror(err));
}

static int openat2_tree(int dirfd, const char *name, int flags, mode_t mode)
{
	return openat2_retry(dirfd, name, flags, mode, RESOLVE_IN_TREE);
}

static int open_dir(int dirfd, const char *name)
{
	return openat2_tree(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
}

/* The helper stopped waiting (its worker gave up or died): stop between entries. */
static int abandoned(struct job *j)
{
	return rn_hung_up(j->sock) ? fail(j, 0, ECANCELED, "the helper stopped waiting") : 0;
}

static void closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
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

static int rm_contents(struct rm *t, int fd, int depth, struct job *j);

/* NOLINTNEXTLINE(misc-no-recursion): one level per directory, bounded (RM_DEPTH, COPY_DEPTH) */
static int rm_entry(struct rm *t, int dirfd, const char *name, unsigned char type, int depth,
                    struct job *j)
{
	struct stat st;
	if (type == DT_UNKNOWN) {
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return errno == ENOENT ? 0 : tree_fail(j, errno, "stat", name);
		type = S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
	}
	if (type != DT_DIR) {
		if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
			return 0;
		if (errno != EISDIR) /* EISDIR: a directory took its name meanwhile */
			return tree_fail(j, errno, "remove", name);
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
		return tree_fail(j, errno, "move up", name);
	}
	int fd = open_dir(dirfd, name);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == ENOTDIR || errno == ELOOP) /* a file or symlink took its name */
			return unlinkat(dirfd, name, 0) == 0 || errno == ENOENT
			           ? 0
			           : tree_fail(j, errno, "remove", name);
		return tree_fail(j, errno, "open", name);
	}
	int rc = rm_contents(t, fd, depth + 1, j);
	close(fd);
	if (rc < 0)
		return -1;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	return tree_fail(j, errno, "remove directory", name);
}

/* Pass over fd until a pass finds it empty (entries may come and go meanwhile). */
/* NOLINTNEXTLINE(misc-no-recursion): one level per directory, bounded (RM_DEPTH, COPY_DEPTH) */
static int rm_contents(struct rm *t, int fd, int depth, struct job *j)
{
	for (int round = 0; round < RM_ROUNDS; round++) {
		if (abandoned(j) < 0)
			return -1;
		int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
		if (!d) {
			if (dfd >= 0)
				close(dfd);
			return tree_fail(j, errno, "read", "a directory");
		}
		bool any = false;
		int ret = 0;
		struct dirent *e;
		while (ret == 0 && (e = readdir(d)) != NULL) {
			if (dots(e->d_name))
				continue;
			any = true;
			ret = rm_entry(t, fd, e->d_name, e->d_type, depth, j);
		}
		closedir(d);
		if (ret < 0 || !any)
			return ret;
	}
	return fail(j, RN_TREE_BUSY, ENOTEMPTY, "the volume is still being written to");
}

static void tree_empty(int sock, int dir, struct rn_answer *a)
{
	struct job j = {.sock = sock, .a = a};
	struct rm t = {.top = dir};
	(void)rm_contents(&t, dir, 0, &j);
}

/* ---- copy ------------------------------------------------------------------ */

struct link {
	dev_t dev;
	ino_t ino;
	char *rel; /* its first copy's path, relative to the copy's root */
};

struct cp {
	struct rn_answer *out; /* bytes, reflinked, skipped */
	int dst_root;
	char rel[PATH_MAX]; /* the directory being filled, relative to dst_root ("" the root) */
	size_t rel_len;
	struct link *links;
	size_t nlinks, cap;
	char *buf; /* XATTR_BUF bytes: names, then values */
};

/* Extended attributes (not trusted.*, which holds the helper's marks, nor security.*). */
static int copy_xattrs(struct cp *cp, int src, int dst, const char *name, struct job *j)
{
	char *names = cp->buf, *value = cp->buf + XATTR_BUF / 2;
	ssize_t n = flistxattr(src, names, XATTR_BUF / 2);
	if (n < 0)
		return errno == ENOTSUP ? 0 : tree_fail(j, errno, "list attributes of", name);
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
		const char *x = names + i;
		if (strncmp(x, "trusted.", 8) == 0 || strncmp(x, "security.", 9) == 0)
			continue;
		ssize_t v = fgetxattr(src, x, value, XATTR_BUF / 2);
		if (v < 0 && errno == ENODATA)
			continue;
		if (v < 0 || fsetxattr(dst, x, value, (size_t)v, XATTR_CREATE) < 0)
			return tree_fail(j, errno, "copy an attribute of", name);
	}
	return 0;
}

/* Owner, then mode (after the chown, which may clear set-id bits), then times. */
static int copy_meta(struct cp *cp, int src, int dst, const struct stat *st, const char *name,
                     struct job *j)
{
	const struct timespec ts[2] = {st->st_atim, st->st_mtim};
	if (copy_xattrs(cp, src, dst, name, j) < 0)
		return -1;
	if (fchown(dst, st->st_uid, st->st_gid) < 0 || fchmod(dst, st->st_mode & 07777) < 0 ||
	    futimens(dst, ts) < 0)
		return tree_fail(j, errno, "set owner, mode or times of", name);
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
static int link_again(struct cp *cp, const struct link *l, int dfd, const char *name, struct job *j)
{
	const char *slash = strrchr(l->rel, '/'), *leaf = slash ? slash + 1 : l->rel;
	int pfd = cp->dst_root, ret = 0;
	if (slash) {
		char parent[PATH_MAX];
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - l->rel), l->rel);
		pfd = openat2_tree(cp->dst_root, parent, O_PATH | O_DIRECTORY, 0);
		if (pfd < 0)
			return tree_fail(j, errno, "find the first copy of", name);
	}
	if (linkat(pfd, leaf, dfd, name, 0) < 0)
		ret = tree_fail(j, errno, "link", name);
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

static int copy_file(struct cp *cp, int sfd, int dfd, const char *name, struct job *j)
{
	struct stat st;
	uint32_t reflinked = 0;
	int src = openat2_tree(sfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0), dst = -1,
	    ret = -1;
	if (src < 0)
		return errno == ENOENT ? 0 : tree_fail(j, errno, "open", name);
	if (fstat(src, &st) < 0) {
		tree_fail(j, errno, "stat", name);
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
				ret = link_again(cp, &cp->links[i], dfd, name, j);
				goto out;
			}
		}
	}
	dst = openat2_tree(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
	if (dst < 0) {
		tree_fail(j, errno, "create", name);
		goto out;
	}
	int err = rn_copy_file(src, dst, j->sock, &reflinked);
	if (!err && fsync(dst) < 0)
		err = errno;
	if (err) {
		tree_fail(j, err, "copy", name);
		goto out;
	}
	if (copy_meta(cp, src, dst, &st, name, j) < 0)
		goto out;
	if (st.st_nlink > 1 && remember(cp, &st, name) < 0) {
		fail(j, 0, ENAMETOOLONG, "path too long in the copy");
		goto out;
	}
	cp->out->bytes += (uint64_t)st.st_size;
	cp->out->reflinked = cp->out->reflinked && reflinked;
	ret = 0;
out:
	closep(&src);
	closep(&dst);
	return ret;
}

static int copy_symlink(int sfd, int dfd, const char *name, const struct stat *st, struct job *j)
{
	char target[PATH_MAX];
	const struct timespec ts[2] = {st->st_atim, st->st_mtim};
	ssize_t n = readlinkat(sfd, name, target, sizeof(target) - 1);
	if (n < 0)
		return errno == ENOENT ? 0 : tree_fail(j, errno, "read symlink", name);
	target[n] = '\0';
	/* Copied as text, never resolved: it means in the copy what it meant in the source. */
	if (symlinkat(target, dfd, name) < 0 ||
	    fchownat(dfd, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0 ||
	    utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return tree_fail(j, errno, "copy symlink", name);
	return 0;
}

static int copy_dir(struct cp *cp, int sfd, int dfd, int depth, struct job *j);

/* NOLINTNEXTLINE(misc-no-recursion): one level per directory, bounded (RM_DEPTH, COPY_DEPTH) */
static int copy_subdir(struct cp *cp, int sfd, int dfd, const char *name, int depth, struct job *j)
{
	struct stat st;
	size_t saved;
	int s = -1, d = -1, ret = -1;
	if (depth >= COPY_DEPTH)
		return fail(j, RN_TREE_REFUSED, ELOOP, "the tree is deeper than %d directories",
		            COPY_DEPTH);
	if ((s = open_dir(sfd, name)) < 0) {
		if (errno == ENOENT)
			return 0;
		return tree_fail(j, errno, "open", name);
	}
	if (fstat(s, &st) < 0 || mkdirat(dfd, name, 0700) < 0 || (d = open_dir(dfd, name)) < 0) {
		tree_fail(j, errno, "make directory", name);
		goto out;
	}
	if (push(cp, name, &saved) < 0) {
		fail(j, 0, ENAMETOOLONG, "path too long in the copy");
		goto out;
	}
	ret = copy_dir(cp, s, d, depth + 1, j);
	pop(cp, saved);
	/* The directory's own mode and times last: filling it changed its times. */
	if (ret == 0)
		ret = copy_meta(cp, s, d, &st, name, j);
out:
	closep(&s);
	closep(&d);
	return ret;
}

/* NOLINTNEXTLINE(misc-no-recursion): one level per directory, bounded (RM_DEPTH, COPY_DEPTH) */
static int copy_dir(struct cp *cp, int sfd, int dfd, int depth, struct job *j)
{
	if (abandoned(j) < 0)
		return -1;
	int fd = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return tree_fail(j, errno, "read", "a directory");
	}
	struct dirent *e;
	while (ret == 0 && (e = readdir(d)) != NULL) {
		struct stat st;
		if (dots(e->d_name))
			continue;
		if (fstatat(sfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				ret = tree_fail(j, errno, "stat", e->d_name);
			continue;
		}
		if (S_ISDIR(st.st_mode))
			ret = copy_subdir(cp, sfd, dfd, e->d_name, depth, j);
		else if (S_ISREG(st.st_mode))
			ret = copy_file(cp, sfd, dfd, e->d_name, j);
		else if (S_ISLNK(st.st_mode))
			ret = copy_symlink(sfd, dfd, e->d_name, &st, j);
		else
			cp->out->skipped++; /* device nodes, FIFOs, sockets */
	}
	closedir(d);
	return ret;
}

static void tree_copy(int sock, int src, int dst, struct rn_answer *a)
{
	struct stat st;
	struct job job = {.sock = sock, .a = a}, *j = &job;
	struct cp cp = {.out = a, .dst_root = dst, .buf = malloc(XATTR_BUF)};
	if (!cp.buf)
		abort();
	a->reflinked = 1;
	int ret = fstat(src, &st) < 0 ? tree_fail(j, errno, "stat", "the source") : 0;
	if (ret == 0)
		ret = copy_dir(&cp, src, dst, 0, j);
	if (ret == 0)
		(void)copy_meta(&cp, src, dst, &st, "the volume's directory", j);
	for (size_t i = 0; i < cp.nlinks; i++)
		free(cp.links[i].rel);
	free(cp.links);
	free(cp.buf);
}

/*
 * A btrfs subvolume (a volume or snapshot the helper proved its own):
 * snapshotted into the work area under a name that is one plain component,
 * or made read-only or writable; or a directory of a trashed volume holding
 * a subvolume to destroy, its sticky bit cleared. The kernel does each in
 * one call, whatever the tree holds.
 */
static void tree_subvol(const struct rn_job *j, const int fds[3], struct rn_answer *a)
{
	uint64_t flags = j->size == RN_SUBVOL_RO ? BTRFS_SUBVOL_RDONLY : 0;
	const char *name = j->argv[0];
	if (j->size == RN_SUBVOL_SNAP) {
		struct btrfs_ioctl_vol_args_v2 v = {.fd = fds[1]};
		if (j->argc != 1 || !memchr(name, '\0', RN_ARG_LEN) || !name[0] ||
		    strchr(name, '/') || name[0] == '.' || fds[2] < 0) {
			a->err = EINVAL;
			snprintf(a->reason, sizeof(a->reason), "not a name for a snapshot");
			return;
		}
		snprintf(v.name, sizeof(v.name), "%s", name);
		if (ioctl(fds[2], BTRFS_IOC_SNAP_CREATE_V2, &v) < 0) {
			a->err = errno;
			snprintf(a->reason, sizeof(a->reason), "snapshot into %.72s: %s", name,
			         strerror(errno));
		}
	} else if (j->size == RN_SUBVOL_UNSTICK) {
		struct stat st;
		if (fstat(fds[1], &st) < 0 || !S_ISDIR(st.st_mode) ||
		    fchmod(fds[1], st.st_mode & 07777 & ~(mode_t)S_ISVTX) < 0) {
			a->err = errno ? errno : ENOTDIR;
			snprintf(a->reason, sizeof(a->reason), "clear a directory's sticky bit: %s",
			         strerror(a->err));
		}
	} else if ((j->size != RN_SUBVOL_RO && j->size != RN_SUBVOL_RW) ||
	           ioctl(fds[1], BTRFS_IOC_SUBVOL_SETFLAGS, &flags) < 0) {
		a->err = j->size == RN_SUBVOL_RO || j->size == RN_SUBVOL_RW ? errno : EINVAL;
		snprintf(a->reason, sizeof(a->reason), "make the subvolume %s: %s",
		         flags ? "read-only" : "writable", strerror(a->err));
	}
}

/* The descriptors each kind of job carries, the answer socket first; 0: the tools runner's. */
static const uint32_t job_fds[] = {[RN_TREE_EMPTY] = 2, [RN_TREE_COPY] = 3, [RN_TREE_SUBVOL] = 3};

/* Each job in a child of its own: a walk can take long, and a hang-up stops it. */
static void take(const struct rn_job *j, int fds[RN_FDS_MAX])
{
	if (rn_fork_job() != 0)
		return;
	struct rn_answer a = {0};
	if (j->kind == RN_TREE_EMPTY)
		tree_empty(fds[0], fds[1], &a);
	else if (j->kind == RN_TREE_SUBVOL)
		tree_subvol(j, fds, &a);
	else
		tree_copy(fds[0], fds[1], fds[2], &a);
	rn_answer_exit(fds[0], &a);
}

static const struct rn_role tree_role = {
    .program = "sepcsi-tree-runner",
    .log_name = "tree-runner",
    .filter = &pol_sc_tree,
    .fds = job_fds,
    .nkinds = sizeof(job_fds) / sizeof(job_fds[0]),
    .take = take,
};

int main(int argc, char **argv)
{
	return rn_main(argc, argv, &tree_role);
}
