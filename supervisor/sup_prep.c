/*
 * One-time preparation before the supervisor spawns anything. Runs in the
 * supervisor as root with its trimmed capabilities (CAP_CHOWN, CAP_FOWNER and
 * CAP_DAC_OVERRIDE are what this file uses). Any failure here is fatal: the
 * caller logs err and exits before a child exists.
 *
 * Safety: the three directories are opened with O_NOFOLLOW | O_DIRECTORY and
 * changed through that descriptor, so a symlink planted at the last component
 * is refused rather than followed, and owner and mode are enforced on every
 * start, not only when we create them. The endpoint's directory is handed to
 * the rpcd user; so that this can never give away a directory someone else
 * uses (think /run), an existing one must hold nothing but our own socket.
 * sup_config.c has already refused layouts where a directory the rpcd user
 * owns would contain the data directory or the policy file. The children
 * are run only from a directory, and as programs, that nobody but root can
 * change (children_dir, check_root_owned).
 */
#include "sup_prep.h"

#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void sup_prep_stdio(void)
{
	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		/* The lower ones are open, so this lands on fd. */
		if (open("/dev/null", O_RDWR) != fd)
			exit(1);
	}
}

/* Owned by root and writable by root only: nothing less privileged can swap it. */
static int check_root_owned(const char *path, const char *what, bool want_dir, char *err,
                            size_t errlen)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
		return -1;
	}
	if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s %s is not a %s", what, path,
		         want_dir ? "directory" : "regular file");
		return -1;
	}
	if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		snprintf(err, errlen, "%s %s must be owned by root and writable by root only", what,
		         path);
		return -1;
	}
	return 0;
}

static int find_sibling(const char *dir, const char *name, char out[PATH_MAX], char *err,
                        size_t errlen)
{
	if (snprintf(out, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX) {
		snprintf(err, errlen, "path of %s is too long", name);
		return -1;
	}
	if (check_root_owned(out, "program", false, err, errlen) < 0)
		return -1;
	if (access(out, X_OK) < 0) {
		snprintf(err, errlen, "program %s is not executable", out);
		return -1;
	}
	return 0;
}

/*
 * Does dir hold either child? Only a name that is missing lets the search go
 * on: anything else there (a dangling symlink, a file not ours) is found, and
 * then refused by the checks below.
 */
static int holds_children(const char *dir, bool *found, char *err, size_t errlen)
{
	static const char *const names[] = {"sepcsi-rpcd", "sepcsi-mounthelper"};
	char path[PATH_MAX];
	struct stat st;

	*found = false;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (snprintf(path, sizeof(path), "%s/%s", dir, names[i]) >= (int)sizeof(path)) {
			snprintf(err, errlen, "path of %s is too long", names[i]);
			return -1;
		}
		if (lstat(path, &st) == 0) {
			*found = true;
			return 0;
		}
		if (errno != ENOENT && errno != ENOTDIR) {
			snprintf(err, errlen, "program %s: %s", path, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/*
 * The directory of the children: beside the supervisor (the build tree's
 * bin/, a container image), else <dir>/../libexec/sepcsi (an install: the
 * supervisor in <prefix>/sbin, the children in <prefix>/libexec/sepcsi),
 * resolved by realpath() so that any prefix works and the checks and the
 * exec see one canonical path. The first directory holding either child is
 * the one: both must then be there, so children of two versions are never
 * paired, and a child found but refused is an error, never a reason to look
 * further. Its directory and programs get the checks of sup_prep_binaries.
 */
static int children_dir(char out[PATH_MAX], char *err, size_t errlen)
{
	char self[PATH_MAX], up[PATH_MAX + 32];
	bool found;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0 || n >= (ssize_t)sizeof(self) - 1) {
		snprintf(err, errlen, "cannot read /proc/self/exe: %s",
		         n < 0 ? strerror(errno) : "path too long");
		return -1;
	}
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash) {
		snprintf(err, errlen, "/proc/self/exe is not an absolute path: %s", self);
		return -1;
	}
	*slash = '\0';
	const char *dir = self[0] ? self : "/";
	if (holds_children(dir, &found, err, errlen) < 0)
		return -1;
	if (found) {
		snprintf(out, PATH_MAX, "%s", dir);
		return 0;
	}
	snprintf(up, sizeof(up), "%s/../libexec/sepcsi", self);
	if (realpath(up, out)) {
		if (holds_children(out, &found, err, errlen) < 0)
			return -1;
		if (found)
			return 0;
	} else if (errno != ENOENT && errno != ENOTDIR) {
		snprintf(err, errlen, "program directory %s: %s", up, strerror(errno));
		return -1;
	}
	snprintf(err, errlen,
	         "sepcsi-rpcd and sepcsi-mounthelper are neither beside this program in %s "
	         "nor in %s",
	         dir, up);
	return -1;
}

int sup_prep_program(const char *name, char out[PATH_MAX], char *err, size_t errlen)
{
	char dir[PATH_MAX];
	if (children_dir(dir, err, errlen) < 0 ||
	    check_root_owned(dir, "program directory", true, err, errlen) < 0)
		return -1;
	return find_sibling(dir, name, out, err, errlen);
}

int sup_prep_binaries(char rpcd[PATH_MAX], char helper[PATH_MAX], char *err, size_t errlen)
{
	char dir[PATH_MAX];

	if (children_dir(dir, err, errlen) < 0)
		return -1;
	if (check_root_owned(dir, "program directory", true, err, errlen) < 0)
		return -1;
	if (find_sibling(dir, "sepcsi-rpcd", rpcd, err, errlen) < 0 ||
	    find_sibling(dir, "sepcsi-mounthelper", helper, err, errlen) < 0)
		return -1;
	log_kv(LOG_LVL_INFO, "children_found", "dir", dir, NULL);
	return 0;
}

int sup_prep_policy(const struct sup_config *cfg, char *err, size_t errlen)
{
	if (cfg->policy[0] == '\0')
		return 0;
	/* stat() follows symlinks on purpose: a ConfigMap mount is a chain of them. */
	return check_root_owned(cfg->policy, "--policy file", false, err, errlen);
}

/* mkdir -p of every parent of path, mode 0755, owned by root. */
static int make_parents(const char *path, char *err, size_t errlen)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = strchr(tmp + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST) {
			snprintf(err, errlen, "mkdir %s: %s", tmp, strerror(errno));
			return -1;
		}
		*p = '/';
	}
	return 0;
}

/* The open directory holds nothing but (optionally) an entry named only. */
static int check_dedicated(int dfd, const char *path, const char *only, char *err, size_t errlen)
{
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	int rc = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "cannot list %s: %s", path, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
		    strcmp(e->d_name, only) == 0)
			continue;
		snprintf(err, errlen,
		         "the endpoint directory %s already exists and holds '%s': it is given "
		         "to the rpcd user, so it must be a directory of its own (empty, or "
		         "holding only the socket)",
		         path, e->d_name);
		rc = -1;
		break;
	}
	closedir(d);
	return rc;
}

struct dir_spec {
	const char *what; /* for the log and errors */
	const char *path;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	const char *only_entry; /* non-NULL: an existing directory may hold only this */
};

static int prepare_dir(const struct dir_spec *d, char *err, size_t errlen)
{
	bool created = false;
	char owner[32], mode[8];
	int fd;

	if (make_parents(d->path, err, errlen) < 0)
		return -1;
	if (mkdir(d->path, d->mode) == 0)
		created = true;
	else if (errno != EEXIST) {
		snprintf(err, errlen, "mkdir %s: %s", d->path, strerror(errno));
		return -1;
	}
	fd = open(d->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s %s: %s (a directory, not a symlink, is required)",
		         d->what, d->path, strerror(errno));
		return -1;
	}
	if (!created && d->only_entry &&
	    check_dedicated(fd, d->path, d->only_entry, err, errlen) < 0) {
		close(fd);
		return -1;
	}
	if (fchown(fd, d->uid, d->gid) < 0 || fchmod(fd, d->mode) < 0) {
		snprintf(err, errlen, "set owner and mode of %s: %s", d->path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	snprintf(owner, sizeof(owner), "%u:%u", (unsigned)d->uid, (unsigned)d->gid);
	snprintf(mode, sizeof(mode), "%04o", (unsigned)d->mode);
	log_kv(LOG_LVL_INFO, "dir_prepared", "what", d->what, "path", d->path, "owner", owner,
	       "mode", mode, "created", created ? "yes" : "no", NULL);
	return 0;
}

int sup_prep_dirs(const struct sup_config *cfg, char *err, size_t errlen)
{
	char sockdir[PATH_MAX];
	const char *slash = strrchr(cfg->socket_path, '/');

	snprintf(sockdir, sizeof(sockdir), "%.*s", (int)(slash - cfg->socket_path),
	         cfg->socket_path);
	const struct dir_spec dirs[] = {
	    /* rpcd keeps its sqlite store here; nobody else reads it. */
	    {"state directory", cfg->state_dir, 0700, cfg->rpcd_uid, cfg->rpcd_gid, NULL},
	    /* The helper's volume images: root only. */
	    {"data directory", cfg->data_dir, 0700, 0, 0, NULL},
	    /* rpcd binds the CSI socket here; its group may reach it. */
	    {"endpoint directory", sockdir, 0750, cfg->rpcd_uid, cfg->rpcd_gid, slash + 1},
	};

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (prepare_dir(&dirs[i], err, errlen) < 0)
			return -1;
	/* The metrics file's directory is the operator's: made if missing, never changed. */
	if (cfg->metrics_file[0] && make_parents(cfg->metrics_file, err, errlen) < 0)
		return -1;
	return 0;
}
