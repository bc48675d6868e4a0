/*
 * The helper's own view of the file system: a private mount namespace whose
 * root is a small tmpfs holding only what the helper and its tools need, so
 * that even a compromised helper cannot open /etc/shadow, a host disk or
 * another process's root.
 *
 *   /var/lib/kubelet (each allowed root)  the host's, shared: mounts made here
 *                                         propagate to the host and back
 *   <data dir>                            the helper's images, read-write
 *   /usr, /bin, /sbin, /lib*              read-only, for the mkfs tools
 *   /etc/mke2fs.conf, /etc/ld.so.cache    read-only, if the host has them
 *   /sys                                  read-only (loop device numbers,
 *                                         ext4 error counts)
 *   /proc                                 a new instance showing processes
 *                                         only (subset=pid), and of those only
 *                                         the helper's own (hidepid=invisible)
 *   /dev                                  null, loop-control, and the loopN
 *                                         nodes the helper needs, made by it
 *
 * Runs once in the helper at start, as root with CAP_SYS_ADMIN and CAP_MKNOD,
 * before capabilities are dropped and before the seccomp filter (which allows
 * no namespace call and no pivot_root). Every failure is fatal: a helper that
 * cannot build its view refuses to start.
 *
 * Steps, and why in this order:
 *  1. each allowed root must be on a shared mount, or mounts the helper makes
 *     inside its namespace stay there: kubelet makes its directory shared; if
 *     it is not (a plain host, a test), the root is bound onto itself and
 *     made shared, in the host's namespace, as kubelet would;
 *  2. unshare(CLONE_NEWNS), then clone every tree the view needs with
 *     open_tree(OPEN_TREE_CLONE): a clone of a shared mount joins its peer
 *     group, so the roots stay connected to the host;
 *  3. mark the whole copied tree private, so nothing the helper attaches
 *     below (its tmpfs root, the view's mounts) propagates anywhere; the
 *     clones, detached until step 5, keep their membership;
 *  4. a new tmpfs (nosuid, noexec; device nodes allowed for the loop nodes)
 *     attached over the data directory's path, populated;
 *  5. the clones moved into it, pivot_root into it, the old root detached.
 */
#include "mh_view.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "log.h"
#include "mh_mount.h"
#include "mh_proto.h"
#include "pol_view.h"
#include "policy_all.h"

#define RO_ATTR (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)

/* At start, before any request: fd (a base) is on a superblock of the administrator's. */
static void trust(int fd)
{
	struct statx stx;
	if (mh_mount_nadmins < POL_BASES_MAX &&
	    statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE,
	          &stx) == 0)
		mh_mount_admins[mh_mount_nadmins++] = makedev(stx.stx_dev_major, stx.stx_dev_minor);
}

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_fatal("file-system view: %s: %s", msg, strerror(errno));
}

/* mkdir -p, each missing component 0755 and the last one mode. */
static void make_path(const char *path, mode_t mode)
{
	char p[MH_PATH_MAX + 1];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, c ? 0755 : mode) == 0)
			log_kv(LOG_LVL_INFO, "created", "path", p, NULL);
		else if (errno != EEXIST)
			die("mkdir %s", p);
		*s = c;
		if (!c)
			return;
	}
}

/* The mount that holds path: is path its mount point, and is it shared? */
static void mount_of(const char *path, bool *is_point, bool *shared)
{
	struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
	struct libmnt_fs *fs = tb ? mnt_table_find_mountpoint(tb, path, MNT_ITER_BACKWARD) : NULL;
	unsigned long prop = 0;
	if (!fs || mnt_fs_get_propagation(fs, &prop) != 0)
		die("cannot find the mount of %s", path);
	*is_point = strcmp(mnt_fs_get_target(fs), path) == 0;
	*shared = (prop & MS_SHARED) != 0;
	mnt_unref_table(tb);
}

/* Step 1: a root on a shared mount, so the helper's mounts reach the host. */
static void share_root(const char *root)
{
	bool point, shared;
	make_path(root, 0750);
	mount_of(root, &point, &shared);
	if (shared)
		return;
	if (!point && mount(root, root, NULL, MS_BIND | MS_REC, NULL) < 0)
		die("bind %s onto itself", root);
	if (mount(NULL, root, NULL, MS_SHARED, NULL) < 0)
		die("make %s shared", root);
	log_kv(LOG_LVL_WARN, "made_shared", "path", root, "why",
	       "mounts the helper makes there must reach the host (kubelet does the same)", NULL);
}

/*
 * A base is root's alone and no one else's to enter (0700), as every DIR_*
 * request checks again (mh_dir_area.c): what tenants write in their volumes
 * is reachable only through their pods' nosuid,nodev binds. One that another
 * owns is left as it is; every request refuses it.
 */
static void private_base(const char *base)
{
	struct stat st;
	char mode[8];
	if (lstat(base, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 07777) == 0700)
		return;
	if (chmod(base, 0700) < 0)
		die("chmod 0700 %s", base);
	snprintf(mode, sizeof(mode), "%04o", (unsigned)(st.st_mode & 07777));
	log_kv(LOG_LVL_WARN, "base_dir_private", "path", base, "was", mode, NULL);
}

static int clone_tree(const char *path, bool recursive)
{
	int fd = (int)syscall(SYS_open_tree, AT_FDCWD, path,
	                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0));
	if (fd < 0)
		die("clone %s", path);
	return fd;
}

/* Attributes of a clone; and private: only the allowed roots stay connected to the host. */
static void set_attr(int fd, uint64_t attr, const char *what)
{
	struct mount_attr a = {.attr_set = attr, .propagation = MS_PRIVATE};
	if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
		die("attributes of %s", what);
}

/* Attach a detached tree at path inside the view (relative to its root fd). */
static void attach_at(int tree, int view, const char *rel, const char *what)
{
	if (move_mount(tree, "", view, rel, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		die("attach %s", what);
	close(tree);
}

/* mkdir -p rel inside the view (relative to its root fd). */
static void view_dirs(int view, const char *rel)
{
	char p[MH_PATH_MAX + 1];
	snprintf(p, sizeof(p), "%s", rel);
	for (char *s = p;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (p[0] && mkdirat(view, p, 0755) < 0 && errno != EEXIST)
			die("mkdir %s in the view", p);
		*s = c;
		if (!c)
			return;
	}
}

/* /bin, /sbin, /lib...: the same symlink as the host's (merged /usr), or a read-only bind. */
static void top_level(int view, const char *name)
{
	char host[64];
	struct stat st;
	snprintf(host, sizeof(host), "/%s", name);
	if (lstat(host, &st) < 0)
		return;
	if (S_ISLNK(st.st_mode)) {
		char target[256];
		ssize_t n = readlink(host, target, sizeof(target) - 1);
		if (n <= 0)
			die("readlink %s", host);
		target[n] = '\0';
		if (symlinkat(target, view, name) < 0)
			die("symlink %s in the view", name);
	} else if (S_ISDIR(st.st_mode)) {
		int t = clone_tree(host, false);
		set_attr(t, RO_ATTR, host);
		view_dirs(view, name);
		attach_at(t, view, name, host);
	}
}

/* A host file, read-only, at the same path, if the host has it. */
static void etc_file(int view, const char *host)
{
	const char *rel = host + 1;
	if (access(host, F_OK) < 0)
		return;
	int fd = openat(view, rel, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		die("create %s in the view", rel);
	close(fd);
	int t = clone_tree(host, false);
	set_attr(t, RO_ATTR | MOUNT_ATTR_NOEXEC, host);
	attach_at(t, view, rel, host);
}

/*
 * A new procfs showing processes only (no /proc/sys, /proc/kcore, ...), and
 * only those the helper could ptrace-read anyway (hidepid=invisible): its own.
 */
static int proc_mount(void)
{
	int fs = fsopen("proc", FSOPEN_CLOEXEC);
	if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "subset", "pid", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "hidepid", "invisible", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		die("new procfs");
	int m =
	    fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	if (m < 0)
		die("mount procfs");
	close(fs);
	return m;
}

static int view_tmpfs(void)
{
	int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "source", MH_VIEW_SOURCE, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "size", "4m", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		die("new tmpfs");
	/* Device nodes stay usable: the view's /dev holds the loop nodes. */
	int m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
	if (m < 0)
		die("mount tmpfs");
	close(fs);
	return m;
}

/* A node with the number of the host's node at the same path. */
static dev_t host_node(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
		die("%s", path);
	return st.st_rdev;
}

#define VIEW_ROWS_MAX 32

/* The trees of steps 2 and 3, detached until step 5 attaches them. */
struct clones {
	int roots[POL_ROOTS_MAX], nroots;
	int bases[POL_BASES_MAX][2], nbases; /* read-write, read-only */
	int data;
	int rows[VIEW_ROWS_MAX];    /* POL_VIEW_RO_DIR rows, by row */
	dev_t nodes[VIEW_ROWS_MAX]; /* POL_VIEW_NODE rows: the host's node numbers */
};

/* Steps 1 to 3. */
static void clone_trees(const struct pol *pol, const char *data_dir, const struct pol_view_entry *t,
                        size_t n, struct clones *c)
{
	for (const char *root; (root = pol_root(pol, (size_t)c->nroots)) != NULL; c->nroots++)
		share_root(root); /* 1 */
	for (const char *b; (b = pol_base_dir(pol, (size_t)c->nbases)) != NULL; c->nbases++) {
		if (pol_paths_nested(b, data_dir)) {
			errno = EINVAL;
			die("base directory %s and the data directory overlap", b);
		}
		make_path(b, 0700);
		private_base(b);
		int fd = open(b, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			die("open %s", b);
		trust(fd); /* its binds are the administrator's file system */
		close(fd);
	}
	for (size_t i = 0; i < n; i++)
		if (t[i].kind == POL_VIEW_NODE)
			c->nodes[i] = host_node(t[i].path);

	if (unshare(CLONE_NEWNS) < 0) /* 2 */
		die("unshare");
	for (int i = 0; i < c->nroots; i++)
		c->roots[i] = clone_tree(pol_root(pol, (size_t)i), true);
	for (int i = 0; i < c->nbases; i++) {
		const char *b = pol_base_dir(pol, (size_t)i);
		c->bases[i][0] = clone_tree(b, false);
		set_attr(c->bases[i][0], MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, b);
		c->bases[i][1] = clone_tree(b, false);
		set_attr(c->bases[i][1], RO_ATTR, b);
	}
	c->data = clone_tree(data_dir, false);
	set_attr(c->data, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, data_dir);
	for (size_t i = 0; i < n; i++) {
		if (t[i].kind == POL_VIEW_RO_DIR) {
			c->rows[i] = clone_tree(t[i].path, false);
			set_attr(c->rows[i], RO_ATTR, t[i].path);
		}
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) /* 3 */
		die("make the copied tree private");
}

/* Step 5 up to the pivot: the view's rows, in the table's order, into the tmpfs at v. */
static void fill_view(int v, const struct pol *pol, const char *data_dir,
                      const struct pol_view_entry *t, size_t n, const struct clones *c)
{
	for (size_t i = 0; i < n; i++) {
		const char *rel = t[i].path + 1;
		switch (t[i].kind) {
		case POL_VIEW_TMPFS:
		case POL_VIEW_LOOPS:
			break;
		case POL_VIEW_ROOTS:
			for (int k = 0; k < c->nroots; k++) {
				const char *root = pol_root(pol, (size_t)k);
				view_dirs(v, root + 1);
				attach_at(c->roots[k], v, root + 1, root);
			}
			break;
		case POL_VIEW_BASES:
			for (int k = 0; k < c->nbases; k++) {
				const char *b = pol_base_dir(pol, (size_t)k);
				view_dirs(v, b + 1);
				attach_at(c->bases[k][0], v, b + 1, b);
				view_dirs(v, pol_view_ro_base((size_t)k) + 1);
				attach_at(c->bases[k][1], v, pol_view_ro_base((size_t)k) + 1, b);
			}
			break;
		case POL_VIEW_DATA:
			view_dirs(v, data_dir + 1);
			attach_at(c->data, v, data_dir + 1, data_dir);
			break;
		case POL_VIEW_RO_DIR:
			view_dirs(v, rel);
			attach_at(c->rows[i], v, rel, t[i].path);
			break;
		case POL_VIEW_TOP:
			top_level(v, rel);
			break;
		case POL_VIEW_RO_FILE:
			view_dirs(v, "etc");
			etc_file(v, t[i].path);
			break;
		case POL_VIEW_PROC:
			view_dirs(v, rel);
			attach_at(proc_mount(), v, rel, t[i].path);
			break;
		case POL_VIEW_NODE:
			view_dirs(v, "dev");
			if (mknodat(v, rel, S_IFCHR | 0666, c->nodes[i]) < 0)
				die("mknod %s", t[i].path);
			break;
		}
	}
}

void mh_view_enter(const struct pol *pol, const char *data_dir)
{
	size_t n;
	const struct pol_view_entry *t = pol_view_table(&n);
	struct clones c = {.data = -1};
	if (n > VIEW_ROWS_MAX)
		die("view table too long");
	clone_trees(pol, data_dir, t, n, &c); /* 1 to 3 */

	int tmp = view_tmpfs(); /* 4 */
	if (move_mount(tmp, "", AT_FDCWD, data_dir, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		die("attach the view at %s", data_dir);
	int v = open(data_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (v < 0)
		die("open the view");
	close(tmp);
	fill_view(v, pol, data_dir, t, n, &c); /* 5 */

	if (fchdir(v) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
		die("pivot_root");
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		die("detach the old root");
	close(v);
	log_kv(LOG_LVL_INFO, "view", "root", "sepcsi-helper tmpfs", "roots", pol_root(pol, 0),
	       "data_dir", data_dir, NULL);
}

int mh_view_detach(const char *path)
{
	struct stat at, top;
	while (mount(NULL, path, NULL, MS_REC | MS_PRIVATE, NULL) == 0)
		if (umount2(path, MNT_DETACH) < 0)
			return -1;
	if (errno != EINVAL)
		return -1;
	if (stat(path, &at) < 0 || stat("/", &top) < 0)
		return -1;
	if (at.st_dev != top.st_dev) { /* not the view's own directory: someone's mount */
		errno = EBUSY;
		return -1;
	}
	return 0;
}

void mh_view_leave_to_core(const struct pol *pol)
{
	/*
	 * Private first, each mount beneath too: an unmount of a mount whose parent
	 * is shared propagates to that parent's peers, which would unmount the
	 * volumes staged and published beneath the roots on the host and in the
	 * core's namespace. Made private, the helper's copies leave their peer groups
	 * and nothing that happens to them reaches anyone else.
	 */
	for (size_t i = 0; pol_root(pol, i) != NULL; i++) /* never nested: the policy's rule */
		if (mh_view_detach(pol_root(pol, i)) < 0)
			die("detach %s from the view", pol_root(pol, i));
	if (unlink("/dev/loop-control") < 0)
		die("remove /dev/loop-control from the view");
	/* Its root read-only: nothing in the view's tmpfs is renamed, replaced or added. */
	struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
	if (syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &ro, sizeof(ro)) < 0)
		die("make the view's root read-only");
	log_kv(LOG_LVL_INFO, "view_narrowed", "why",
	       "the capable core alone acts in kubelet's directories and on loop devices", NULL);
}

void mh_view_drop_proc(void)
{
	if (umount2("/proc", MNT_DETACH) < 0)
		die("detach /proc from the view");
}
