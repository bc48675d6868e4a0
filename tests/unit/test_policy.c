/*
 * Unit tests of the policy library: defaults, file overrides, broken files
 * (always an error naming file:line, never silent defaults), identifier
 * syntax, path checks and the mount option allowlist. No privilege needed.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mh_limits.h"
#include "pol_caps.h"
#include "pol_seccomp.h"
#include "policy_all.h"
#include "tap.h"

static char dir[64];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)remove(p);
	return 0;
}

/* Write text to a file in the temp dir; returns its path (static buffer per slot). */
static const char *file_with(const char *text)
{
	static char path[128];
	static int seq;
	snprintf(path, sizeof(path), "%s/p%d.ini", dir, seq++);
	FILE *f = fopen(path, "w");
	fputs(text, f);
	CHECK(fclose(f) == 0);
	return path;
}

/* Load text; on failure copy the message into err. */
static struct pol *load_text(const char *text, char *err, size_t errlen)
{
	struct pol *p = NULL;
	if (pol_load(file_with(text), &p, err, errlen) < 0)
		return NULL;
	return p;
}

/* A broken file must fail, with a message naming file:line (line > 0 when given). */
static void broken(const char *text, int line, const char *needle)
{
	char err[512] = "";
	struct pol *p = load_text(text, err, sizeof(err));
	CHECK(p == NULL);
	pol_free(p);
	char want[32];
	snprintf(want, sizeof(want), ".ini:%d:", line);
	bool ok = line == 0 || strstr(err, want) != NULL;
	ok = ok && (!needle || strstr(err, needle) != NULL);
	CHECK(ok);
	if (!ok)
		fprintf(stderr, "  for %s: got \"%s\" (want line %d, \"%s\")\n", text, err, line,
		        needle ? needle : "");
}

static void test_defaults(void)
{
	struct pol *p = NULL;
	char err[256];
	CHECK(pol_load(NULL, &p, err, sizeof(err)) == 0 && p != NULL);
	CHECK(strcmp(pol_root(p, 0), "/var/lib/kubelet") == 0 && pol_root(p, 1) == NULL);
	CHECK(pol_fs_allowed(p, "ext4") && pol_fs_allowed(p, "xfs") && pol_fs_allowed(p, "btrfs"));
	CHECK(!pol_fs_allowed(p, "vfat") && !pol_fs_allowed(p, "ext2") && !pol_fs_allowed(p, ""));
	CHECK(!pol_fs_allowed(p, NULL) && !pol_fs_allowed(p, "ext4 "));
	CHECK(pol_min_volume_bytes(p) == 1ULL << 20);
	CHECK(pol_max_volume_bytes(p) == 16ULL << 40);
	CHECK(!pol_seccomp_log_only(p));
	const char *ok[] = {"ro",
	                    "rw",
	                    "noatime",
	                    "relatime",
	                    "nodiratime",
	                    "lazytime",
	                    "noexec",
	                    "sync",
	                    "dirsync",
	                    "discard",
	                    "nodiscard",
	                    "nouuid",
	                    "noatime,discard,nouuid",
	                    "",
	                    NULL};
	for (int i = 0; ok[i]; i++)
		CHECK(pol_mount_options_check(p, ok[i], err, sizeof(err)) == 0);
	CHECK(pol_mount_options_check(p, NULL, err, sizeof(err)) == 0);
	const char *no[] = {"nobarrier",   "suid", "dev",  "exec",     "bind",
	                    "remount",     "user", "loop", "commit=5", "noatime,nobarrier",
	                    "context=foo", NULL};
	for (int i = 0; no[i]; i++)
		CHECK(pol_mount_options_check(p, no[i], err, sizeof(err)) == -EPERM);
	CHECK(strstr(err, "context") != NULL);
	pol_free(p);
	pol_free(NULL);
}

static void test_overrides(void)
{
	char err[256] = "";
	struct pol *p = load_text("# comment\n; another\n"
	                          "[paths]\n"
	                          "allowed_roots = /var/lib/kubelet /srv/csi  ; inline comment\n"
	                          "[filesystems]\n"
	                          "types = xfs\n"
	                          "mount_options = noatime commit=\n"
	                          "  discard ; continuation line: appended, comment cut\n"
	                          "mount_options = nouuid\n"
	                          "[volumes]\n"
	                          "min_bytes = 4Mi\n"
	                          "max_bytes = 2Ti\n"
	                          "[seccomp]\n"
	                          "log_only = true\n",
	                          err, sizeof(err));
	CHECK(p != NULL);
	if (!p) {
		fprintf(stderr, "  %s\n", err);
		return;
	}
	CHECK(strcmp(pol_root(p, 1), "/srv/csi") == 0 && pol_root(p, 2) == NULL);
	CHECK(pol_fs_allowed(p, "xfs") && !pol_fs_allowed(p, "ext4"));
	CHECK(pol_mount_options_check(p, "noatime,commit=30,discard,nouuid", err, sizeof(err)) ==
	      0);
	CHECK(pol_mount_options_check(p, "commit", err, sizeof(err)) == -EPERM); /* "commit=" */
	CHECK(pol_mount_options_check(p, "ro", err, sizeof(err)) == -EPERM);     /* list replaced */
	CHECK(pol_mount_option(p, 3) != NULL &&
	      pol_mount_option(p, 4) == NULL); /* no comment words */
	CHECK(pol_min_volume_bytes(p) == 4ULL << 20 && pol_max_volume_bytes(p) == 2ULL << 40);
	CHECK(pol_seccomp_log_only(p));
	const char *root = NULL;
	CHECK(pol_path_check(p, "/srv/csi/pods/u/volumes/kubernetes.io~csi/pv/mount", POL_TARGET,
	                     &root) == 0 &&
	      strcmp(root, "/srv/csi") == 0);
	CHECK(pol_overcommit_percent(p) == 100 && pol_freeze_max_seconds(p) == 60);
	pol_free(p);

	/* A file that sets one key keeps every other default. */
	p = load_text("[volumes]\nmax_bytes = 1073741824\n", err, sizeof(err));
	CHECK(p && pol_max_volume_bytes(p) == 1ULL << 30 && pol_min_volume_bytes(p) == 1 << 20);
	CHECK(p && pol_fs_allowed(p, "btrfs") && strcmp(pol_root(p, 0), "/var/lib/kubelet") == 0);
	pol_free(p);

	p = load_text("", err, sizeof(err)); /* empty file: defaults */
	CHECK(p && pol_fs_allowed(p, "ext4"));
	pol_free(p);
}

static void test_broken(void)
{
	broken("[paths]\nallowed_rots = /x\n", 2, "unknown key 'allowed_rots'");
	broken("[path]\nallowed_roots = /x\n", 1, "unknown section");
	broken("[paths]\nallowed_roots = /x\n[seccmop]\n", 3, "unknown section [seccmop]");
	broken("allowed_roots = /x\n", 1, "outside a section");
	broken("[paths]\nthis is not ini\n", 2, "syntax");
	broken("[paths\nallowed_roots = /x\n", 1, NULL);
	broken("[volumes]\nmin_bytes = 1Mi\nmin_bytes = 2Mi\n", 3, "duplicate");
	broken("[volumes]\nmax_bytes = 12XB\n", 2, "not a size");
	broken("[volumes]\nmax_bytes = -5\n", 2, "not a size");
	broken("[volumes]\nmax_bytes = 99999999999999999999999\n", 2, "not a size");
	broken("[volumes]\nmax_bytes = 20000000Ti\n", 2, "not a size");
	broken("[volumes]\nmin_bytes = 2Gi\nmax_bytes = 1Gi\n", 0, "min_bytes <= max_bytes");
	broken("[seccomp]\nlog_only = yes\n", 2, "true or false");
	broken("[filesystems]\ntypes = ext4 vfat\n", 2, "vfat");
	broken("[filesystems]\ntypes =\n", 2, "at least one");
	broken("[filesystems]\nmount_options = suid\n", 2, "cannot be allowed");
	broken("[filesystems]\nmount_options = noatime bind\n", 2, "cannot be allowed");
	broken("[filesystems]\nmount_options = user\n", 2, "cannot be allowed");
	broken("[filesystems]\nmount_options = x-foo\n", 2, "cannot be allowed");
	broken("[filesystems]\nmount_options = noatime,discard\n", 2, "spaces");
	broken("[filesystems]\nmount_options = commit=5\n", 2, "name=");
	broken("[filesystems]\nmount_options = no;atime\n", 2, "not a valid option name");
	broken("[filesystems]\nmount_options = a:b\n", 2, "not a valid option name");
	broken("[paths]\nallowed_roots = /\n", 2, "canonical");
	broken("[paths]\nallowed_roots = var/lib\n", 2, "canonical");
	broken("[paths]\nallowed_roots = /var/../etc\n", 2, "canonical");
	broken("[paths]\nallowed_roots = /var/lib/\n", 2, "canonical");
	broken("[paths]\nallowed_roots = /var/lib/kubelet /var/lib/kubelet/pods\n", 0, "overlap");
	broken("[paths]\nallowed_roots = /srv/k/p /srv/k\n", 0, "overlap");
	/* Bases: one list of both keys, none in another, none twice. */
	broken("[directories]\nbase_dirs = /srv/a\nshared_base_dirs = /srv/a/b\n", 0, "overlap");
	broken("[directories]\nshared_base_dirs = /srv/a\nbase_dirs = /srv/a\n", 3, "twice");
	{
		char err[256];
		struct pol *q = load_text("[directories]\nshared_base_dirs = /mnt/c\n"
		                          "base_dirs = /srv/l\n",
		                          err, sizeof(err));
		CHECK(q && strcmp(pol_base_dir(q, 0), "/mnt/c") == 0 && pol_base_shared(q, 0) &&
		      strcmp(pol_base_dir(q, 1), "/srv/l") == 0 && !pol_base_shared(q, 1) &&
		      !pol_base_shared(q, 2));
		pol_free(q);
	}

	char longline[400];
	snprintf(longline, sizeof(longline), "[paths]\nallowed_roots = /%0250d\n", 0);
	broken(longline, 2, "longer than");

	/* A NUL byte anywhere. */
	const char *p = file_with("");
	FILE *f = fopen(p, "w");
	CHECK(fwrite("[paths]\n\0\n", 1, 10, f) == 10);
	CHECK(fclose(f) == 0);
	struct pol *pol = NULL;
	char err[256];
	CHECK(pol_load(p, &pol, err, sizeof(err)) < 0 && pol == NULL && strstr(err, "NUL"));

	/* A missing file is an error, not the defaults. */
	CHECK(pol_load("/nonexistent/policy.ini", &pol, err, sizeof(err)) < 0 && pol == NULL);
	CHECK(strstr(err, "/nonexistent/policy.ini") != NULL);
}

static void test_ids(void)
{
	CHECK(pol_volume_id_valid("sv-0123456789abcdef0123456789abcdef"));
	CHECK(pol_snapshot_id_valid("ss-0123456789abcdef0123456789abcdef"));
	const char *bad[] = {
	    "",
	    "sv-",
	    "sv-0123456789abcdef0123456789abcde",   /* 31 digits */
	    "sv-0123456789abcdef0123456789abcdef0", /* 33 digits */
	    "sv-0123456789ABCDEF0123456789ABCDEF",  /* upper case */
	    "SV-0123456789abcdef0123456789abcdef",
	    "sv-0123456789abcdef0123456789abcdeg",
	    "sv-0123456789abcdef/123456789abcdef",
	    "sv-../../../../../../../../etc/pass",
	    "sv-..",
	    "..",
	    "/sv-0123456789abcdef0123456789abcdef",
	    "sv-0123456789abcdef0123456789abcde\n",
	    "ss-0123456789abcdef0123456789abcdef", /* a snapshot id is not a volume id */
	    "sv_0123456789abcdef0123456789abcdef",
	    NULL,
	};
	for (int i = 0; bad[i]; i++)
		CHECK(!pol_volume_id_valid(bad[i]));
	CHECK(!pol_volume_id_valid(NULL));
	CHECK(!pol_snapshot_id_valid("sv-0123456789abcdef0123456789abcdef"));
	CHECK(!pol_snapshot_id_valid(NULL));
}

/* The default policy: kubelet's CSI directories, and nothing else of its tree. */
static void test_default_patterns(void)
{
	struct pol *p = NULL;
	char err[256];
	const char *root = NULL;
	pol_load(NULL, &p, err, sizeof(err));
	const char *staging[] = {
	    "/var/lib/kubelet/plugins/kubernetes.io/csi/local.sepcsi.io/0123abcd/globalmount",
	    "/var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-1/globalmount",
	    "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pvc-1",
	    NULL,
	};
	const char *target[] = {
	    "/var/lib/kubelet/pods/0a1b/volumes/kubernetes.io~csi/pvc-1/mount",
	    "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-1/0a1b",
	    NULL,
	};
	const char *neither[] = {
	    "/var/lib/kubelet/pki",
	    "/var/lib/kubelet/config.yaml",
	    "/var/lib/kubelet/pods/0a1b/volumes/kubernetes.io~secret/token/x",
	    "/var/lib/kubelet/pods/0a1b/volumes/kubernetes.io~csi/pvc-1",
	    "/var/lib/kubelet/pods/0a1b/volumes/kubernetes.io~csi/pvc-1/mount/deeper",
	    "/var/lib/kubelet/plugins/kubernetes.io/csi/local.sepcsi.io/0123abcd",
	    "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging",
	    "/var/lib/kubelet/plugins/kubernetes.io/csi/x/y/globalmount/z",
	    "/var/lib/kubelet/plugins_registry/x",
	    NULL,
	};
	for (int i = 0; staging[i]; i++) {
		CHECK(pol_path_check(p, staging[i], POL_STAGING, &root) == 0 &&
		      strcmp(root, "/var/lib/kubelet") == 0);
		CHECK(pol_path_check(p, staging[i], POL_TARGET, NULL) == -EPERM);
	}
	for (int i = 0; target[i]; i++) {
		CHECK(pol_path_check(p, target[i], POL_TARGET, NULL) == 0);
		CHECK(pol_path_check(p, target[i], POL_STAGING, NULL) == -EPERM);
		CHECK(pol_path_check(p, target[i], POL_STAGING | POL_TARGET, NULL) == 0);
	}
	for (int i = 0; neither[i]; i++)
		CHECK(pol_path_check(p, neither[i], POL_STAGING | POL_TARGET, NULL) == -EPERM);
	CHECK(strcmp(pol_path_pattern(p, POL_STAGING, 0),
	             "plugins/kubernetes.io/csi/*/*/globalmount") == 0);
	CHECK(pol_path_pattern(p, POL_TARGET, 2) == NULL);
	pol_free(p);

	/* Another layout (Nomad's mount_dir), and '**'. */
	p = load_text("[paths]\nallowed_roots = /csi\nstaging_paths = staging/*/*/*\n"
	              "target_paths = per-alloc/**\n",
	              err, sizeof(err));
	CHECK(p != NULL);
	if (p) {
		CHECK(pol_path_check(p,
		                     "/csi/staging/default/vol/rw-file-system-single-node-writer",
		                     POL_STAGING, NULL) == 0);
		CHECK(pol_path_check(p, "/csi/per-alloc/a1/vol/rw", POL_TARGET, NULL) == 0);
		CHECK(pol_path_check(p, "/csi/per-alloc/a1", POL_TARGET, NULL) == 0);
		CHECK(pol_path_check(p, "/csi/per-alloc", POL_TARGET, NULL) == -EPERM);
		CHECK(pol_path_check(p, "/csi/staging/a/b", POL_STAGING, NULL) == -EPERM);
		CHECK(pol_path_check(p, "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/v/mount",
		                     POL_TARGET, NULL) == -EPERM);
	}
	pol_free(p);
	/* Patterns that could name what they should not are refused at load. */
	broken("[paths]\nstaging_paths = /abs/path\n", 2, "path pattern");
	broken("[paths]\ntarget_paths = a/../b\n", 2, "path pattern");
	broken("[paths]\ntarget_paths = a/**/b\n", 2, "path pattern");
	broken("[paths]\ntarget_paths = a/b*\n", 2, "path pattern");
	broken("[paths]\ntarget_paths = a//b\n", 2, "path pattern");
	broken("[paths]\ntarget_paths = a/b;c\n", 2, "path pattern");
	broken("[paths]\ntarget_paths = a/b?c\n", 2, "path pattern");
	broken("[volumes]\novercommit_ratio = 0\n", 2, "overcommit_ratio");
	broken("[volumes]\novercommit_ratio = 1.234\n", 2, "overcommit_ratio");
	broken("[volumes]\novercommit_ratio = 101\n", 2, "overcommit_ratio");
	broken("[volumes]\nfreeze_max_seconds = 0\n", 2, "freeze_max_seconds");
	p = load_text("[volumes]\novercommit_ratio = 2.5\nfreeze_max_seconds = 5\n", err,
	              sizeof(err));
	CHECK(p && pol_overcommit_percent(p) == 250 && pol_freeze_max_seconds(p) == 5);
	pol_free(p);
}

/* The syntax every path must have, whatever the patterns (here: anything beneath the root). */
static void test_paths(void)
{
	char err[256];
	const char *root = NULL;
	const unsigned any = POL_STAGING | POL_TARGET;
	struct pol *p =
	    load_text("[paths]\nstaging_paths = **\ntarget_paths = **\n", err, sizeof(err));
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK(pol_path_check(p, "/var/lib/kubelet/plugins/x/globalmount", any, &root) == 0);
	CHECK(root && strcmp(root, "/var/lib/kubelet") == 0);
	CHECK(pol_path_check(p, "/var/lib/kubelet/a", any, NULL) == 0);
	CHECK(pol_path_check(p, "/var/lib/kubelet/a b/\xc3\xa9", any, NULL) == 0); /* utf-8 */

	CHECK(pol_path_check(p, "/var/lib/kubelet", any, &root) == -EPERM && root == NULL);
	CHECK(pol_path_check(p, "/var/lib/kubeletX/a", any, NULL) == -EPERM);
	CHECK(pol_path_check(p, "/var/lib", any, NULL) == -EPERM);
	CHECK(pol_path_check(p, "/etc/passwd", any, NULL) == -EPERM);
	CHECK(pol_path_check(p, "/", any, NULL) == -EINVAL);
	const char *bad[] = {
	    "",
	    "var/lib/kubelet/a",
	    "/var/lib/kubelet/../../etc",
	    "/var/lib/kubelet/a/..",
	    "/var/lib/kubelet/./a",
	    "/var/lib/kubelet/.",
	    "/var/lib/kubelet//a",
	    "//var/lib/kubelet/a",
	    "/var/lib/kubelet/a/",
	    "/var/lib/kubelet/a\nb",
	    "/var/lib/kubelet/a\tb",
	    "/var/lib/kubelet/a\x7f",
	    NULL,
	};
	for (int i = 0; bad[i]; i++)
		CHECK(pol_path_check(p, bad[i], any, NULL) == -EINVAL);
	CHECK(pol_path_check(p, NULL, any, NULL) == -EINVAL);
	CHECK(pol_path_syntax_ok("/a") && !pol_path_syntax_ok("/") && !pol_path_syntax_ok(NULL));
	CHECK(!pol_path_syntax_ok("/a/../b") && !pol_path_syntax_ok("a/b"));
	/* "..." and ".a" are ordinary names. */
	CHECK(pol_path_check(p, "/var/lib/kubelet/.../.a", any, NULL) == 0);

	/* Length bounds: MH_PATH_MAX in total, NAME_MAX per component. */
	static char big[MH_PATH_MAX + 256];
	strcpy(big, "/var/lib/kubelet");
	while (strlen(big) + 101 <= MH_PATH_MAX)
		snprintf(big + strlen(big), sizeof(big) - strlen(big), "%s",
		         "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	CHECK(pol_path_check(p, big, any, NULL) == 0);
	snprintf(big + strlen(big), sizeof(big) - strlen(big), "%s",
	         "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	         "aaaaaaaaaaaaaaaaaaaa");
	CHECK(pol_path_check(p, big, any, NULL) == -EINVAL);
	char name[300] = "/var/lib/kubelet/";
	memset(name + strlen(name), 'n', 256);
	CHECK(pol_path_check(p, name, any, NULL) == -EINVAL);
	pol_free(p);
}

static void test_options(void)
{
	struct pol *p = NULL;
	char err[256];
	pol_load(NULL, &p, err, sizeof(err));
	CHECK(pol_mount_options_check(p, "noatime,,ro", err, sizeof(err)) == -EINVAL);
	CHECK(pol_mount_options_check(p, ",ro", err, sizeof(err)) == -EINVAL);
	CHECK(pol_mount_options_check(p, "ro,", err, sizeof(err)) == -EINVAL);
	CHECK(pol_mount_options_check(p, "ro,\"x\"", err, sizeof(err)) == -EINVAL);
	CHECK(pol_mount_options_check(p, "ro\n", err, sizeof(err)) == -EINVAL);
	CHECK(pol_mount_options_check(p, "=ro", err, sizeof(err)) == -EINVAL);
	CHECK(pol_mount_options_check(p, "ro=1", err, sizeof(err)) == -EPERM);
	CHECK(pol_mount_options_check(p, "nouuid=yes", err, sizeof(err)) == -EPERM);
	static char huge[MH_OPTS_MAX + 8];
	memset(huge, 'a', sizeof(huge) - 1);
	CHECK(pol_mount_options_check(p, huge, err, sizeof(err)) == -EINVAL);
	pol_free(p);
}

/* mkfs options: per fs type, exact words, "-m 0" normalised to "-m0". */
static void test_mkfs_options(void)
{
	char err[256], buf[MH_OPTS_MAX + POL_MKFS_ARGS_MAX + 1];
	char *args[POL_MKFS_ARGS_MAX];
	struct pol *p = load_text("", err, sizeof(err));
	CHECK(p != NULL);
	CHECK(pol_mkfs_options_check(p, "ext4", "", buf, sizeof(buf), args, POL_MKFS_ARGS_MAX, err,
	                             sizeof(err)) == 0);
	CHECK(pol_mkfs_options_check(p, "ext4", NULL, buf, sizeof(buf), args, POL_MKFS_ARGS_MAX,
	                             err, sizeof(err)) == 0);
	int n = pol_mkfs_options_check(p, "ext4", " -m 0  -E nodiscard -O ^has_journal ", buf,
	                               sizeof(buf), args, POL_MKFS_ARGS_MAX, err, sizeof(err));
	CHECK(n == 3 && strcmp(args[0], "-m0") == 0 && strcmp(args[1], "-Enodiscard") == 0 &&
	      strcmp(args[2], "-O^has_journal") == 0);
	CHECK(pol_mkfs_options_check(p, "ext4", "-m0", buf, sizeof(buf), args, POL_MKFS_ARGS_MAX,
	                             err, sizeof(err)) == 1);
	/* Never: populate from a host directory, a root owner, unknown or long options. */
	const char *refused[] = {
	    "-d /etc", "-E root_owner=0:0", "--foo", "-m 3", "-m", "-mreflink=1", "-q", "0", NULL};
	for (int i = 0; refused[i]; i++)
		CHECK(pol_mkfs_options_check(p, "ext4", refused[i], buf, sizeof(buf), args,
		                             POL_MKFS_ARGS_MAX, err, sizeof(err)) == -EPERM ||
		      strcmp(refused[i], "0") == 0);
	CHECK(pol_mkfs_options_check(p, "ext4", "0", buf, sizeof(buf), args, POL_MKFS_ARGS_MAX, err,
	                             sizeof(err)) == -EINVAL);
	CHECK(pol_mkfs_options_check(p, "ext4", "-m\t0", buf, sizeof(buf), args, POL_MKFS_ARGS_MAX,
	                             err, sizeof(err)) == -EINVAL);
	CHECK(pol_mkfs_options_check(p, "ext4", "-m '0'", buf, sizeof(buf), args, POL_MKFS_ARGS_MAX,
	                             err, sizeof(err)) == -EINVAL);
	CHECK(pol_mkfs_options_check(p, "xfs", "-m reflink=1 -K", buf, sizeof(buf), args,
	                             POL_MKFS_ARGS_MAX, err, sizeof(err)) == 2);
	CHECK(pol_mkfs_options_check(p, "btrfs", "-m dup -d single", buf, sizeof(buf), args,
	                             POL_MKFS_ARGS_MAX, err, sizeof(err)) == 2);
	CHECK(pol_mkfs_options_check(p, "vfat", "-K", buf, sizeof(buf), args, POL_MKFS_ARGS_MAX,
	                             err, sizeof(err)) == -EPERM);
	CHECK(pol_mkfs_options_check(p, "ext4", "-m0 -m1 -m5", buf, sizeof(buf), args, 2, err,
	                             sizeof(err)) == -EINVAL); /* too many for the caller */
	CHECK(strcmp(pol_mkfs_option(p, "xfs", 0), "-K") == 0);
	CHECK(pol_mkfs_option(p, "vfat", 0) == NULL);
	pol_free(p);

	/* A file replaces one type's list and leaves the others. */
	p = load_text("[filesystems]\nmkfs_options_ext4 = -m0\n  -Enodiscard\n", err, sizeof(err));
	CHECK(p != NULL);
	CHECK(pol_mkfs_options_check(p, "ext4", "-m 1", buf, sizeof(buf), args, POL_MKFS_ARGS_MAX,
	                             err, sizeof(err)) == -EPERM);
	CHECK(pol_mkfs_options_check(p, "ext4", "-E nodiscard -m 0", buf, sizeof(buf), args,
	                             POL_MKFS_ARGS_MAX, err, sizeof(err)) == 2);
	CHECK(pol_mkfs_options_check(p, "xfs", "-K", buf, sizeof(buf), args, POL_MKFS_ARGS_MAX, err,
	                             sizeof(err)) == 1);
	pol_free(p);
	broken("[filesystems]\nmkfs_options_ext4 = -m 0\n", 2, "mkfs option '0'");
	broken("[filesystems]\nmkfs_options_xfs = -m'x'\n", 2, "mkfs option");
	broken("[filesystems]\nmkfs_options_vfat = -F32\n", 2, "unknown key");
}

/* Compile p, read it back through a pipe-less file: the same answers to every query. */
static struct pol *round_trip(const struct pol *p, size_t cut, const char *append)
{
	char err[256];
	struct pol *q = NULL;
	FILE *f = tmpfile();
	if (!f)
		abort();
	CHECK(pol_compile(p, f) == 0);
	long len = ftell(f);
	if (cut)
		CHECK(ftruncate(fileno(f), len - (long)cut) == 0);
	if (append)
		CHECK(fputs(append, f) >= 0);
	CHECK(fflush(f) == 0);
	lseek(fileno(f), 0, SEEK_SET);
	if (pol_load_compiled(fileno(f), &q, err, sizeof(err)) < 0)
		CHECK(strstr(err, "compiled policy") != NULL);
	(void)fclose(f);
	return q;
}

/*
 * The core's confinement in its compiled policy: its capabilities, and filters
 * that are the core's own tables' (one allows what the core does, kills what
 * it never does); one byte changed anywhere in it refuses the whole record.
 */
static void test_compiled_confinement(struct pol *file, struct pol *q)
{
	uint64_t caps, optional;
	size_t len = 0, flen = 0;
	pol_core_caps(file, &caps, &optional);
	CHECK(caps == 0 && optional == 0 && pol_core_filter(file, POL_FILTER_CORE, &len) == NULL);
	pol_core_caps(q, &caps, &optional);
	CHECK(caps == pol_caps_helper_mask() && optional == pol_caps_helper_optional_mask());
	const void *core = pol_core_filter(q, POL_FILTER_CORE, &len);
	CHECK(core && len >= 8 && len % 8 == 0 && pol_core_filter(q, POL_FILTER_FLUSHER, &flen) &&
	      flen < len);
	for (int allowed = 0; core && allowed < 2; allowed++) {
		pid_t pid = fork();
		if (pid == 0) {
			if (pol_seccomp_load(core, len) < 0)
				_exit(3);
			if (allowed)
				_exit(getpid() > 0 ? 0 : 4);                /* getpid: the core's */
			(void)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0); /* never the core's */
			_exit(5);
		}
		int st = 0;
		CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
		CHECK(allowed ? WIFEXITED(st) && WEXITSTATUS(st) == 0
		              : WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
	}
	/* Its reader's filter, carried too: it reads (getpid), and opens no socket, forks nothing.
	 */
	size_t rlen;
	const void *reader = pol_core_filter(q, POL_FILTER_READER, &rlen);
	CHECK(reader && rlen >= 8 && rlen % 8 == 0 && rlen < len);
	for (int allowed = 0; reader && allowed < 3; allowed++) {
		pid_t pid = fork();
		if (pid == 0) {
			if (pol_seccomp_load(reader, rlen) < 0)
				_exit(3);
			if (allowed == 1)
				_exit(getpid() > 0 ? 0 : 4);
			if (allowed == 2) /* openat2 answers ENOSYS: its flags are out of sight */
				_exit(syscall(SYS_openat2, AT_FDCWD, "/", NULL, 0) < 0 &&
				              errno == ENOSYS
				          ? 0
				          : 6);
			(void)syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
			_exit(5);
		}
		int st = 0;
		CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
		CHECK(allowed ? WIFEXITED(st) && WEXITSTATUS(st) == 0
		              : WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
	}
	char *buf = NULL, err[256];
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	CHECK(f && pol_compile(q, f) == 0 && fclose(f) == 0);
	for (size_t at = 0; buf && at < n; at += 7) { /* anywhere: the hash covers it all */
		int fd = memfd_create("compiled", 0);
		buf[at] ^= 0x20;
		CHECK(fd >= 0 && write(fd, buf, n) == (ssize_t)n && lseek(fd, 0, SEEK_SET) == 0);
		struct pol *bad = NULL;
		CHECK(pol_load_compiled(fd, &bad, err, sizeof(err)) < 0 && bad == NULL);
		buf[at] ^= 0x20;
		close(fd);
	}
	free(buf);
}

static void test_compiled(void)
{
	char err[256] = "";
	struct pol *p =
	    load_text("[paths]\nallowed_roots = /var/lib/kubelet /srv/csi\n"
	              "staging_paths = plugins/x/*\ntarget_paths = pods/*/**\n"
	              "[filesystems]\ntypes = xfs ext4\nmount_options = noatime nouuid\n"
	              "mkfs_options_ext4 = -m0\n[directories]\nbase_dirs = /srv/vols\n"
	              "[volumes]\nmin_bytes = 4Mi\nmax_bytes = 2Ti\n"
	              "overcommit_ratio = 1.5\nfreeze_max_seconds = 30\n"
	              "[seccomp]\nlog_only = true\n",
	              err, sizeof(err));
	CHECK(p != NULL);
	if (!p) {
		fprintf(stderr, "  %s\n", err);
		return;
	}
	struct pol *q = round_trip(p, 0, NULL);
	CHECK(q != NULL);
	for (size_t i = 0; q && i < 20; i++) {
		const char *a[] = {pol_root(p, i),
		                   pol_base_dir(p, i),
		                   pol_fstype(p, i),
		                   pol_mount_option(p, i),
		                   pol_path_pattern(p, POL_STAGING, i),
		                   pol_path_pattern(p, POL_TARGET, i),
		                   pol_mkfs_option(p, "ext4", i)};
		const char *b[] = {pol_root(q, i),
		                   pol_base_dir(q, i),
		                   pol_fstype(q, i),
		                   pol_mount_option(q, i),
		                   pol_path_pattern(q, POL_STAGING, i),
		                   pol_path_pattern(q, POL_TARGET, i),
		                   pol_mkfs_option(q, "ext4", i)};
		for (size_t k = 0; k < sizeof(a) / sizeof(a[0]); k++)
			CHECK(a[k] == b[k] || (a[k] && b[k] && strcmp(a[k], b[k]) == 0));
	}
	CHECK(q && pol_min_volume_bytes(q) == 4ULL << 20 && pol_max_volume_bytes(q) == 2ULL << 40);
	CHECK(q && pol_overcommit_percent(q) == 150 && pol_freeze_max_seconds(q) == 30);
	CHECK(q && pol_seccomp_log_only(q));
	pol_free(q);
	/* Cut short anywhere, or followed by anything: refused whole. */
	for (size_t cut = 1; cut < 40; cut++)
		CHECK(round_trip(p, cut, NULL) == NULL);
	CHECK(round_trip(p, 0, "x") == NULL);
	pol_free(p);
	/* The defaults compile too. */
	CHECK(pol_load(NULL, &p, err, sizeof(err)) == 0);
	q = round_trip(p, 0, NULL);
	CHECK(q && strcmp(pol_root(q, 0), "/var/lib/kubelet") == 0 && pol_fs_allowed(q, "btrfs"));
	if (q)
		test_compiled_confinement(p, q);
	pol_free(q);
	pol_free(p);
	/* Not a compiled policy at all. */
	FILE *f = tmpfile();
	if (!f)
		abort();
	CHECK(fputs("[paths]\nallowed_roots = /\n", f) >= 0);
	CHECK(fflush(f) == 0);
	lseek(fileno(f), 0, SEEK_SET);
	CHECK(pol_load_compiled(fileno(f), &q, err, sizeof(err)) < 0 && q == NULL);
	(void)fclose(f);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/sepcsi-policy-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	test_defaults();
	test_overrides();
	test_broken();
	test_ids();
	test_paths();
	test_default_patterns();
	test_options();
	test_mkfs_options();
	test_compiled();
	nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
	return tap_done("test_policy");
}
