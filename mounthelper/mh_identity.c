/*
 * The helper's own identity beside its capable core (--user UID:GID, given by
 * the supervisor's --helper-user): the images are that uid's, and once the
 * core runs the helper becomes it, so that a compromised helper holds nothing
 * of root's. It can no longer write the core's audit.log, the loop records,
 * the data directory itself or anything else root owns in its view; it keeps
 * the images and snapshots, which are its own.
 *
 * Runs in the helper at start, as uid 0 with the supervisor's capabilities,
 * before its confinement. Any failure is fatal (the caller's).
 *
 * Safety argument for the hand-over. images/ and snapshots/ hold only what
 * the helper made, but a compromised helper of an earlier run, as their
 * owner, may have left anything there, and a process of its uid may still
 * run. So the directory is made root's, 0700, first: from then on no other
 * uid adds, removes or renames a name in it while it is walked; then only a
 * regular file with one name is handed over (opened without following a link,
 * checked on that descriptor right before fchown), so that its one name is
 * the one in this directory and no link makes root chown a file elsewhere;
 * the directory is handed over last. Access control lists an earlier owner
 * set on the directory are removed first, and on each file handed over (one
 * left on a file already the owner's grants nothing: no other uid passes
 * the directory). A file that is not is left as it is (the
 * core refuses it as an image anyway), and so is one that cannot be handed
 * over (logged): its volume alone fails.
 */
#include "mh_identity.h"

#include <cap-ng.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "log.h"

/*
 * The uid the images were last handed to whole (root's, in the data
 * directory): while it names the owner, a start hands over no file, only the
 * two directories. Its hand-over then does not grow with the names a process
 * of that uid made, whose files that uid could already change as it liked.
 */
#define HANDED "handed"

/*
 * No access control list left by an earlier owner: with one, a uid named in
 * it (an earlier --helper-user, or rpcd's) would keep reaching the images
 * through the group class bits this hand-over sets. 0, or -1 with errno.
 */
static int drop_acls(int fd, bool dir)
{
	if (fremovexattr(fd, "system.posix_acl_access") < 0 && errno != ENODATA && errno != ENOTSUP)
		return -1;
	if (dir && fremovexattr(fd, "system.posix_acl_default") < 0 && errno != ENODATA &&
	    errno != ENOTSUP)
		return -1;
	return 0;
}

/*
 * One entry of a directory of images: owner uid, group root, the mode the core
 * reaches. One that is so already is left as it is, unopened: a start costs
 * one fstatat per name then, however many names a process of that uid made.
 */
static bool hand_file(int dirfd, const char *name, uid_t uid)
{
	struct stat st;
	mode_t mode = uid ? 0660 : 0600; /* the core reaches another owner's through group root */
	bool ok = true;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
	    (st.st_uid == uid && st.st_gid == 0 && (st.st_mode & 07777) == mode))
		return true;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return true;
	/* One that cannot be (immutable, say) stays as it is: its volume alone fails. */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
	    (drop_acls(fd, false) < 0 || fchown(fd, uid, 0) < 0 || fchmod(fd, mode) < 0)) {
		log_kv(LOG_LVL_ERROR, "image_not_handed", "file", name, "error", strerror(errno),
		       NULL);
		ok = false;
	}
	close(fd);
	return ok;
}

bool mh_identity_hand_images(int dirfd, uid_t uid, bool files)
{
	bool ok = true;
	/* Root's alone while it is walked: no name in it changes meanwhile. */
	if (fchown(dirfd, 0, 0) < 0 || fchmod(dirfd, 0700) < 0 || drop_acls(dirfd, true) < 0)
		log_fatal("cannot take a directory of images back: %s", strerror(errno));
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d)
		log_fatal("cannot list a directory of images: %s", strerror(errno));
	for (struct dirent *e; files && (e = readdir(d)) != NULL;)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			ok = hand_file(dirfd, e->d_name, uid) && ok;
	closedir(d);
	/* Set-group-ID: what the owner makes in it is group root's, as the core needs. */
	if (fchown(dirfd, uid, 0) < 0 || fchmod(dirfd, uid ? 02750 : 0700) < 0)
		log_fatal("cannot hand a directory of images to uid %u: %s", (unsigned)uid,
		          strerror(errno));
	return ok;
}

bool mh_identity_handed(int data_fd, uid_t uid)
{
	char buf[32], want[32];
	struct stat st;
	int fd = openat(data_fd, HANDED, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
	bool same = n > 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
	            (st.st_mode & 077) == 0 &&
	            (size_t)n == (size_t)snprintf(want, sizeof(want), "%u\n", (unsigned)uid) &&
	            memcmp(buf, want, (size_t)n) == 0;
	if (fd >= 0)
		close(fd);
	return same;
}

void mh_identity_record(int data_fd, uid_t uid)
{
	char text[32];
	int len = snprintf(text, sizeof(text), "%u\n", (unsigned)uid);
	(void)unlinkat(data_fd, HANDED ".tmp", 0);
	int fd = openat(data_fd, HANDED ".tmp",
	                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	/* The first failure's own errno: close() and later calls may change errno. */
	int err = fd < 0 ? errno : 0;
	if (!err) {
		errno = EIO; /* a short write sets none */
		if (write(fd, text, (size_t)len) != len || fsync(fd) < 0)
			err = errno;
		close(fd);
	}
	if (!err && (renameat(data_fd, HANDED ".tmp", data_fd, HANDED) < 0 || fsync(data_fd) < 0))
		err = errno;
	if (err)
		log_kv(LOG_LVL_WARN, "handed_not_recorded", "error", strerror(err), "next_start",
		       "walks the images again", NULL);
}

void mh_identity_take(uid_t uid, gid_t gid)
{
	pid_t parent = getppid();
	uid_t r, e, s;
	gid_t rg, eg, sg;
	/*
	 * Keep the capabilities across the uid change (KEEP_CAPS), for the
	 * confinement that follows, which drops every one of them: setting its
	 * securebits needs CAP_SETPCAP. The change empties the effective set;
	 * it is raised again from the permitted one.
	 */
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0 || setgroups(0, NULL) < 0 ||
	    setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0 ||
	    prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
		log_fatal("cannot become uid %u gid %u: %s", (unsigned)uid, (unsigned)gid,
		          strerror(errno));
	if (capng_get_caps_process() != 0)
		log_fatal("cannot read its capabilities after the uid change");
	for (unsigned cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (capng_have_capability(CAPNG_PERMITTED, cap) == 1 &&
		    capng_update(CAPNG_ADD, CAPNG_EFFECTIVE, cap) != 0)
			log_fatal("cannot raise capability %u again", cap);
	if (capng_apply(CAPNG_SELECT_CAPS) != 0)
		log_fatal("cannot raise the capabilities again after the uid change");
	if (getresuid(&r, &e, &s) < 0 || r != uid || e != uid || s != uid ||
	    getresgid(&rg, &eg, &sg) < 0 || rg != gid || eg != gid || sg != gid ||
	    getgroups(0, NULL) != 0)
		log_fatal("the uid change did not take");
	/* The uid change cleared the parent-death signal the supervisor set: set again. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		log_fatal("the supervisor is gone, or its death would go unnoticed");
}
