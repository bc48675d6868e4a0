/*
 * Real-process test of sepcsi-mounthelper: real loop devices, mkfs and mounts.
 * Needs root (exits 77 = skipped otherwise). Runs in its own private mount
 * namespace so nothing it mounts is visible outside, and cleans up (mounts,
 * loop devices, temp dir) even when a check fails.
 *
 * The helper binary is argv[1], else the path CMake compiled in. Set
 * SEPCSI_TEST_STRACE=FILE to run the helper under `strace -f -o FILE` and
 * SEPCSI_TEST_SECCOMP_LOG=1 to run it with seccomp log_only (both are for
 * deriving the seccomp table, not for CI).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/loop.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helper_harness.h"
#include "mh_proto_all.h"
#include "supctl.h"
#include "tap.h"

#define V1 "sv-0123456789abcdef0123456789abcdef"
#define V2 "sv-00000000000000000000000000000002"
#define V3 "sv-00000000000000000000000000000003"
#define V4 "sv-00000000000000000000000000000004"
#define V5 "sv-00000000000000000000000000000005"

/* ---- the scenarios ---------------------------------------------------------- */

static void test_lifecycle(struct helper *h)
{
	char staging[256], target[256], opts[512], p[512];
	uint64_t real = 0;
	snprintf(staging, sizeof(staging), "%s/staging/v1", root);
	snprintf(target, sizeof(target), "%s/pods/p1/mount", root);

	CHECK(do_ping(h) == MH_E_OK);
	CHECK(do_create(h, V1, 64 * MiB, &real) == MH_E_OK && real == 64 * MiB);
	CHECK(do_create(h, V1, 64 * MiB, &real) == MH_E_OK && real == 64 * MiB);
	CHECK(do_create(h, V1, 65 * MiB, NULL) == MH_E_EXISTS);
	CHECK(do_create(h, V2, 1000, NULL) == MH_E_REFUSED); /* below min_bytes */
	snprintf(p, sizeof(p), "%s/images/%s.img", data, V1);
	struct stat st;
	CHECK(stat(p, &st) == 0 && st.st_size == (off_t)(64 * MiB) && st.st_blocks == 0);

	/* STAGE: the CO creates the staging dir; the helper formats and mounts. */
	CHECK(do_stage(h, V1, staging, "ext4", "", 0, NULL) == MH_E_NOTFOUND);
	mkdir(staging, 0750);
	CHECK(do_stage(h, V1, staging, "ext4", "noatime", 0, NULL) == MH_E_OK);
	mount_opts_at(staging, opts, sizeof(opts));
	CHECK(has_opt(opts, "nosuid") && has_opt(opts, "nodev") && has_opt(opts, "noatime"));
	CHECK(has_opt(opts, "rw"));
	int lines = mountinfo_lines();
	CHECK(do_stage(h, V1, staging, "ext4", "noatime", 0, NULL) == MH_E_OK);
	CHECK(mountinfo_lines() == lines);
	CHECK(do_stage(h, V1, staging, "xfs", "", 0, NULL) == MH_E_EXISTS);
	CHECK(do_delete(h, V1) == MH_E_BUSY);
	CHECK(our_loops(false) == 1);

	/* PUBLISH rw, idempotent, then write through the target. */
	CHECK(do_publish(h, V1, staging, target, 0) == MH_E_NOTFOUND); /* parent missing */
	snprintf(p, sizeof(p), "%s/pods/p1", root);
	mkdir(p, 0750);
	CHECK(do_publish(h, V1, staging, target, 0) == MH_E_OK);
	CHECK(mountinfo_lines() == lines + 1);
	mount_opts_at(target, opts, sizeof(opts));
	CHECK(has_opt(opts, "nosuid") && has_opt(opts, "nodev") && has_opt(opts, "rw"));
	snprintf(p, sizeof(p), "%s/hello", target);
	CHECK(write_file(p, "hello\n") == 0);
	CHECK(do_publish(h, V1, staging, target, 0) == MH_E_OK);
	CHECK(mountinfo_lines() == lines + 1);
	CHECK(do_publish(h, V1, staging, target, 1) == MH_E_EXISTS); /* same volume, other ro */
	CHECK(do_publish(h, V1, staging, staging, 0) == MH_E_REFUSED);
	/* Targets through a symlink inside the root (pointing outside) are refused. */
	char out2[256], plink[300];
	snprintf(out2, sizeof(out2), "%s/outside2", tmp);
	snprintf(plink, sizeof(plink), "%s/pods/plink", root);
	mkdir(out2, 0750);
	CHECK(symlink(out2, plink) == 0);
	CHECK(do_publish(h, V1, staging, plink, 0) == MH_E_REFUSED);
	snprintf(p, sizeof(p), "%s/m", plink);
	CHECK(do_publish(h, V1, staging, p, 0) == MH_E_REFUSED);
	CHECK(!exists(p) && rmdir(out2) == 0 && unlink(plink) == 0);
	CHECK(do_unstage(h, V1, staging) == MH_E_BUSY); /* still published */
	CHECK(mountinfo_lines() == lines + 1);

	CHECK(do_unpublish(h, V1, target) == MH_E_OK);
	CHECK(!exists(target));
	CHECK(mountinfo_lines() == lines);
	CHECK(do_unpublish(h, V1, target) == MH_E_OK);
	CHECK(do_unstage(h, V1, staging) == MH_E_OK);
	CHECK(mountinfo_lines() == lines - 1);
	CHECK(our_loops(false) == 0);
	CHECK(do_unstage(h, V1, staging) == MH_E_OK);
	CHECK(exists(staging)); /* the staging dir belongs to the CO */

	/* Stage again: the data survived. Publish read-only: writes fail. */
	CHECK(do_stage(h, V1, staging, "ext4", "", 0, NULL) == MH_E_OK);
	snprintf(p, sizeof(p), "%s/hello", staging);
	CHECK(file_has(p, "hello"));
	CHECK(do_publish(h, V1, staging, target, 1) == MH_E_OK);
	mount_opts_at(target, opts, sizeof(opts));
	CHECK(has_opt(opts, "ro") && has_opt(opts, "nosuid") && has_opt(opts, "nodev"));
	snprintf(p, sizeof(p), "%s/other", target);
	CHECK(write_file(p, "x") == -EROFS);
	snprintf(p, sizeof(p), "%s/hello", target);
	CHECK(file_has(p, "hello"));
	CHECK(do_publish(h, V1, staging, target, 1) == MH_E_OK);
	CHECK(mountinfo_lines() == lines + 1);
	CHECK(do_unpublish(h, V1, target) == MH_E_OK);
	CHECK(do_unstage(h, V1, staging) == MH_E_OK);
	CHECK(mountinfo_lines() == lines - 1);

	/*
	 * Unpublish removes only what the helper made: a plain empty directory
	 * someone else made stays (OK: nothing of this volume is there), and a
	 * file holding data stays and the call fails.
	 */
	mkdir(target, 0750);
	CHECK(do_unpublish(h, V1, target) == MH_E_OK && exists(target));
	rmdir(target);
	CHECK(write_file(target, "not the helper's") == 0);
	CHECK(do_unpublish(h, V1, target) == MH_E_REFUSED && file_has(target, "not the helper's"));
	unlink(target);

	CHECK(do_delete(h, V1) == MH_E_OK);
	CHECK(do_delete(h, V1) == MH_E_OK);
	snprintf(p, sizeof(p), "%s/images/%s.img", data, V1);
	CHECK(!exists(p));
	CHECK(our_loops(false) == 0);
}

/* Nothing is created or mounted by any of these. */
static void test_refusals(struct helper *h)
{
	char staging[256], outside[256], link[256], p[512];
	snprintf(staging, sizeof(staging), "%s/staging/v2", root);
	snprintf(outside, sizeof(outside), "%s/outside", tmp);
	snprintf(link, sizeof(link), "%s/link", root);
	mkdir(staging, 0750);
	mkdir(outside, 0750);
	CHECK(symlink(outside, link) == 0);
	CHECK(do_create(h, V2, 64 * MiB, NULL) == MH_E_OK);
	int lines = mountinfo_lines();

	CHECK(do_stage(h, V2, outside, "ext4", "", 0, NULL) == MH_E_REFUSED);
	CHECK(do_stage(h, V2, "/var/lib/kubelet/x", "ext4", "", 0, NULL) == MH_E_REFUSED);
	snprintf(p, sizeof(p), "%s/staging/../../outside", root);
	CHECK(do_stage(h, V2, p, "ext4", "", 0, NULL) == MH_E_REFUSED);
	snprintf(p, sizeof(p), "%s//staging/v2", root);
	CHECK(do_stage(h, V2, p, "ext4", "", 0, NULL) == MH_E_REFUSED);
	CHECK(do_stage(h, V2, root, "ext4", "", 0, NULL) == MH_E_REFUSED); /* the root itself */
	snprintf(p, sizeof(p), "%sX/a", root);
	CHECK(do_stage(h, V2, p, "ext4", "", 0, NULL) == MH_E_REFUSED);    /* prefix trick */
	CHECK(do_stage(h, V2, link, "ext4", "", 0, NULL) == MH_E_REFUSED); /* symlink out */
	snprintf(p, sizeof(p), "%s/sub", link);
	mkdir(p, 0750); /* created through the symlink, i.e. outside */
	CHECK(do_stage(h, V2, p, "ext4", "", 0, NULL) == MH_E_REFUSED);

	const char *bad_ids[] = {"sv-../../../../etc/passwd",
	                         "sv-0123456789abcdef/123456789abcdef",
	                         "sv-..",
	                         "..",
	                         "sv-0123456789ABCDEF0123456789ABCDEF",
	                         "sv-0123456789abcdef0123456789abcde",
	                         "sv-0123456789abcdef0123456789abcdef0",
	                         "ss-0123456789abcdef0123456789abcdef",
	                         "",
	                         NULL};
	for (int i = 0; bad_ids[i]; i++) {
		CHECK(do_stage(h, bad_ids[i], staging, "ext4", "", 0, NULL) == MH_E_REFUSED);
		CHECK(do_create(h, bad_ids[i], 64 * MiB, NULL) == MH_E_REFUSED);
		CHECK(do_delete(h, bad_ids[i]) == MH_E_REFUSED);
	}
	CHECK(do_stage(h, V2, staging, "vfat", "", 0, NULL) == MH_E_REFUSED);
	CHECK(do_stage(h, V2, staging, "ext2", "", 0, NULL) == MH_E_REFUSED);
	CHECK(do_stage(h, V2, staging, "ext4", "nobarrier", 0, NULL) == MH_E_REFUSED);
	CHECK(do_stage(h, V2, staging, "ext4", "suid", 0, NULL) == MH_E_REFUSED);
	CHECK(do_stage(h, V2, staging, "ext4", "dev", 0, NULL) == MH_E_REFUSED);
	CHECK(do_stage(h, V2, staging, "ext4", "noatime,,ro", 0, NULL) == MH_E_REFUSED);
	CHECK(do_stage(h, V2, staging, "ext4", "bind", 0, NULL) == MH_E_REFUSED);
	CHECK(do_stage(h, V2, staging, "ext4", "", 1, NULL) == MH_E_PRECONDITION); /* blank, ro */
	CHECK(do_publish(h, V2, staging, link, 0) == MH_E_PRECONDITION);           /* not staged */
	CHECK(do_unstage(h, V2, outside) == MH_E_REFUSED);

	CHECK(mountinfo_lines() == lines);
	CHECK(our_loops(false) == 0);
	snprintf(p, sizeof(p), "%s/sub", outside);
	CHECK(rmdir(p) == 0); /* still empty: nothing was mounted or made there */

	/* Unmount only what is ours: a tmpfs at a target is refused. */
	snprintf(p, sizeof(p), "%s/pods/p2", root);
	mkdir(p, 0750);
	CHECK(mount("tmpfs", p, "tmpfs", 0, NULL) == 0);
	CHECK(do_unpublish(h, V2, p) == MH_E_REFUSED);
	CHECK(do_unstage(h, V2, p) == MH_E_REFUSED);
	CHECK(do_stage(h, V2, p, "ext4", "", 0, NULL) == MH_E_EXISTS);
	CHECK(umount(p) == 0 && rmdir(p) == 0);
	CHECK(do_delete(h, V2) == MH_E_OK);
}

/* A pre-formatted xfs image staged as ext4 is refused and its data stays intact. */
static void test_foreign_signature(struct helper *h)
{
	char img[300], mnt[256], staging[256], p[512];
	snprintf(img, sizeof(img), "%s/images/%s.img", data, V3);
	snprintf(mnt, sizeof(mnt), "%s/scratch", tmp);
	snprintf(staging, sizeof(staging), "%s/staging/v3", root);
	mkdir(mnt, 0700);
	mkdir(staging, 0750);
	CHECK(do_create(h, V3, 320 * MiB, NULL) == MH_E_OK);
	const char *mkfs[] = {"mkfs.xfs", "-q", img, NULL};
	CHECK(run(mkfs) == 0);
	const char *mnt_rw[] = {"mount", "-o", "loop", img, mnt, NULL};
	const char *umnt[] = {"umount", mnt, NULL};
	snprintf(p, sizeof(p), "%s/keep", mnt);
	CHECK(run(mnt_rw) == 0 && write_file(p, "precious\n") == 0 && run(umnt) == 0);
	int lines = mountinfo_lines();

	struct mh_msg a;
	CHECK(do_stage(h, V3, staging, "ext4", "", 0, &a) == MH_E_EXISTS);
	CHECK(strstr(a.u.error.reason, "xfs") != NULL);
	CHECK(do_stage(h, V3, staging, "btrfs", "", 0, NULL) == MH_E_EXISTS);
	CHECK(mountinfo_lines() == lines);
	CHECK(our_loops(false) == 0);
	const char *mnt_ro[] = {"mount", "-o", "loop,ro", img, mnt, NULL};
	CHECK(run(mnt_ro) == 0);
	CHECK(file_has(p, "precious"));
	CHECK(run(umnt) == 0);

	/* Staged as what it is, it mounts as is (no mkfs), data and all. */
	CHECK(do_stage(h, V3, staging, "xfs", "nouuid", 0, NULL) == MH_E_OK);
	snprintf(p, sizeof(p), "%s/keep", staging);
	CHECK(file_has(p, "precious"));
	CHECK(do_unstage(h, V3, staging) == MH_E_OK);
	CHECK(do_delete(h, V3) == MH_E_OK);

	/* Any other signature too: a swap area is not formatted over. */
	CHECK(do_create(h, V3, 64 * MiB, NULL) == MH_E_OK);
	const char *mkswap[] = {"mkswap", "-q", img, NULL};
	CHECK(run(mkswap) == 0);
	CHECK(do_stage(h, V3, staging, "ext4", "", 0, &a) == MH_E_EXISTS);
	CHECK(strstr(a.u.error.reason, "swap") != NULL);
	const char *blkid_img[] = {"blkid", "-p", "-s", "TYPE", "-o", "value", img, NULL};
	CHECK(run(blkid_img) == 0); /* still a swap area, untouched */
	CHECK(mountinfo_lines() == lines && our_loops(false) == 0);
	CHECK(do_delete(h, V3) == MH_E_OK);
}

/* The helper formats xfs and btrfs too (these runs exercise mkfs.xfs/mkfs.btrfs under seccomp). */
static void test_other_filesystems(struct helper *h)
{
	const struct {
		const char *id, *fs;
		uint64_t size;
	} v[] = {{V4, "xfs", 320 * MiB}, {V5, "btrfs", 256 * MiB}};
	for (size_t i = 0; i < 2; i++) {
		char staging[256], target[256], opts[512], p[300];
		snprintf(staging, sizeof(staging), "%s/staging/%s", root, v[i].fs);
		snprintf(target, sizeof(target), "%s/pods/%s", root, v[i].fs);
		mkdir(staging, 0750);
		CHECK(do_create(h, v[i].id, v[i].size, NULL) == MH_E_OK);
		CHECK(do_stage(h, v[i].id, staging, v[i].fs, "", 0, NULL) == MH_E_OK);
		mount_opts_at(staging, opts, sizeof(opts));
		CHECK(has_opt(opts, "nosuid") && has_opt(opts, "nodev"));
		int lines = mountinfo_lines();
		CHECK(do_stage(h, v[i].id, staging, v[i].fs, "", 0, NULL) == MH_E_OK);
		CHECK(do_publish(h, v[i].id, staging, target, 0) == MH_E_OK);
		CHECK(do_publish(h, v[i].id, staging, target, 0) == MH_E_OK);
		CHECK(mountinfo_lines() == lines + 1);
		snprintf(p, sizeof(p), "%s/f", target);
		CHECK(write_file(p, "data") == 0);
		CHECK(do_unpublish(h, v[i].id, target) == MH_E_OK);
		CHECK(do_unstage(h, v[i].id, staging) == MH_E_OK);
		CHECK(our_loops(false) == 0);
		CHECK(do_delete(h, v[i].id) == MH_E_OK);
	}
}

static bool have_sys_resource(void)
{
	return prctl(PR_CAPBSET_READ, CAP_SYS_RESOURCE, 0, 0, 0) == 1;
}

static void test_confinement(struct helper *h)
{
	char p[64], line[256];
	bool capeff = false, capprm = false, capbnd = false, capinh = false, capamb = false,
	     nnp = false, sec = false;
	if (getenv("SEPCSI_TEST_STRACE"))
		return; /* h->pid is strace, not the helper */
	snprintf(p, sizeof(p), "/proc/%d/status", (int)h->pid);
	FILE *f = fopen(p, "re");
	CHECK(f != NULL);
	/* SYS_ADMIN, CHOWN and MKNOD; SYS_RESOURCE (optional) if we could hand it over. */
	const char *want = have_sys_resource() ? "0000000009200001\n" : "0000000008200001\n";
	char eff[64], prm[64], bnd[64];
	snprintf(eff, sizeof(eff), "CapEff:\t%s", want);
	snprintf(prm, sizeof(prm), "CapPrm:\t%s", want);
	snprintf(bnd, sizeof(bnd), "CapBnd:\t%s", want);
	while (f && fgets(line, sizeof(line), f)) {
		capeff |= strcmp(line, eff) == 0;
		capprm |= strcmp(line, prm) == 0;
		capbnd |= strcmp(line, bnd) == 0;
		capinh |= strcmp(line, "CapInh:\t0000000000000000\n") == 0;
		capamb |= strcmp(line, "CapAmb:\t0000000000000000\n") == 0;
		nnp |= strcmp(line, "NoNewPrivs:\t1\n") == 0;
		sec |= strcmp(line, "Seccomp:\t2\n") == 0;
	}
	if (f)
		(void)fclose(f);
	CHECK(capeff && capprm && capbnd && capinh && capamb);
	CHECK(nnp && sec);
}

/*
 * UNSTAGE never reports success while the loop device stays attached: hold
 * the device open ourselves, so autoclear cannot run and LOOP_CLR_FD cannot
 * detach it; the answer is BUSY. Once we let go, the device goes away.
 */
static void test_unstage_loop_held(struct helper *h)
{
	char staging[256], dev[300] = "";
	snprintf(staging, sizeof(staging), "%s/staging/held", root);
	mkdir(staging, 0750);
	CHECK(do_create(h, V2, 32 * MiB, NULL) == MH_E_OK);
	CHECK(do_stage(h, V2, staging, "ext4", "", 0, NULL) == MH_E_OK);
	DIR *d = opendir("/sys/block");
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		char p[300], bf[PATH_MAX] = "";
		snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", e->d_name);
		FILE *f = fopen(p, "re");
		if (f && fgets(bf, sizeof(bf), f) && strstr(bf, V2))
			snprintf(dev, sizeof(dev), "/dev/%s", e->d_name);
		if (f)
			(void)fclose(f);
	}
	if (d)
		closedir(d);
	int fd = open(dev, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(do_unstage(h, V2, staging) == MH_E_BUSY);
	if (fd >= 0)
		close(fd);
	CHECK(do_unstage(h, V2, staging) == MH_E_OK); /* unmounted already; nothing left */
	for (int i = 0; i < 50 && our_loops(false) > 0; i++)
		tap_sleep_ms(20);
	CHECK(our_loops(false) == 0);
	CHECK(do_delete(h, V2) == MH_E_OK);
}

/* Under a supervisor: READY on fd 4, survive rpcd going away, take a new channel. */
static void test_supervised(void)
{
	int ctl[2], ch[2];
	struct helper h;
	struct sup_ctl_msg m = {0};
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) == 0);
	helper_start_ctl(&h, policy, ctl[1]);
	close(ctl[1]);
	struct pollfd p = {.fd = ctl[0], .events = POLLIN};
	CHECK(poll(&p, 1, 30000) == 1 && sup_ctl_recv(ctl[0], &m) == 0);
	CHECK(m.type == SUP_CTL_READY && m.fd < 0);
	CHECK(do_ping(&h) == MH_E_OK);

	close(h.fd); /* rpcd died: the helper must wait, not exit */
	tap_sleep_ms(200);
	CHECK(waitpid(h.pid, NULL, WNOHANG) == 0);
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ch) == 0);
	CHECK(sup_ctl_send(ctl[0], SUP_CTL_PEER_FD, ch[1]) == 0);
	close(ch[1]);
	h.fd = ch[0];
	CHECK(do_ping(&h) == MH_E_OK);

	/* A second replacement while the first channel is still open. */
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ch) == 0);
	CHECK(sup_ctl_send(ctl[0], SUP_CTL_PEER_FD, ch[1]) == 0);
	close(ch[1]);
	close(h.fd);
	h.fd = ch[0];
	CHECK(do_ping(&h) == MH_E_OK);

	close(ctl[0]); /* the supervisor is gone: exit cleanly */
	CHECK(helper_stop(&h) == 0);

	/* A control message other than PEER_FD is a violation. */
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) == 0);
	helper_start_ctl(&h, policy, ctl[1]);
	close(ctl[1]);
	CHECK(poll(&p, 1, 30000) == 1 && sup_ctl_recv(ctl[0], &m) == 0);
	CHECK(sup_ctl_send(ctl[0], SUP_CTL_HELPER_FAILED, -1) == 0);
	CHECK(helper_stop(&h) == 3);
	close(ctl[0]);
}

/* Wait (up to 60 s) for the helper to exit while its channel stays open; its status. */
static int exit_status_open(struct helper *h)
{
	int st = 0;
	for (int i = 0; i < 600; i++) {
		if (waitpid(h->pid, &st, WNOHANG) == h->pid) {
			h->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		tap_sleep_ms(100);
	}
	return -1;
}

static long log_size(void)
{
	struct stat st;
	return stat(logfile, &st) == 0 ? (long)st.st_size : 0;
}

/* Has the helper logged a line containing text after offset from (waiting up to 30 s)? */
static bool log_shows(long from, const char *text)
{
	char line[4096];
	for (int i = 0; i < 3000; i++) {
		FILE *f = fopen(logfile, "re");
		bool found = false;
		if (f && fseek(f, from, SEEK_SET) == 0)
			while (!found && fgets(line, sizeof(line), f))
				found = strstr(line, text) != NULL;
		if (f)
			(void)fclose(f);
		if (found)
			return true;
		tap_sleep_ms(10);
	}
	return false;
}

/* The next control message from the helper, within timeout_ms; 0 or -1. */
static int ctl_next(int ctl, struct sup_ctl_msg *m, int timeout_ms)
{
	struct pollfd p = {.fd = ctl, .events = POLLIN};
	if (poll(&p, 1, timeout_ms) != 1)
		return -1;
	return sup_ctl_recv(ctl, m);
}

/* As the supervisor does for a restarted rpcd: a fresh channel, sent as PEER_FD. */
static void new_channel(struct helper *h, int ctl)
{
	int ch[2];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ch) == 0);
	CHECK(sup_ctl_send(ctl, SUP_CTL_PEER_FD, ch[1]) == 0);
	close(ch[1]);
	h->fd = ch[0];
}

/*
 * Replace the helper's channel by one that holds len bytes as one
 * datagram, sent by a peer that has closed its end already.
 */
static void dead_channel(struct helper *h, int ctl, const void *bytes, size_t len)
{
	int ch[2];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ch) == 0);
	CHECK(send(ch[0], bytes, len, 0) == (ssize_t)len);
	close(ch[0]);
	CHECK(sup_ctl_send(ctl, SUP_CTL_PEER_FD, ch[1]) == 0);
	close(ch[1]);
	close(h->fd);
	h->fd = -1;
}

/* End of file on fd within 30 s: the helper closed its end. */
static bool channel_closed(int fd)
{
	char b;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 30000) == 1 && recv(fd, &b, 1, MSG_DONTWAIT) == 0;
}

/*
 * Supervised, rpcd is the suspect: for each kind of violation the helper
 * reports SUP_CTL_PEER_VIOLATION, closes that channel, keeps running and
 * serves the next channel the supervisor hands it. A worker in flight
 * finishes, and its answer is dropped with the channel its request came on.
 */
static void test_supervised_violations(void)
{
	int ctl[2];
	struct helper h;
	struct sup_ctl_msg m = {0};
	struct mh_msg ping = {.type = MH_REQ_PING, .id = 7}, ans_ping = {.type = MH_ANS_PING}, a;
	static uint8_t enc[MH_MSG_MAX + 8], wrong_version[MH_HDR_LEN], answer[MH_HDR_LEN],
	    trailing[MH_HDR_LEN + 1], oversized[MH_MSG_MAX + 1];
	const uint8_t unknown[MH_HDR_LEN] = {0, MH_PROTO_VERSION, 0, 50, 0, 0, 0, 9, 0, 0, 0, 0};
	size_t len;

	mh_msg_encode(&ping, enc, sizeof(enc), &len);
	memcpy(wrong_version, enc, MH_HDR_LEN);
	wrong_version[1] = MH_PROTO_VERSION + 1;
	memcpy(trailing, enc, MH_HDR_LEN);
	trailing[11] = 1; /* the length field counts the extra byte */
	mh_msg_encode(&ans_ping, enc, sizeof(enc), &len);
	memcpy(answer, enc, MH_HDR_LEN);
	const struct {
		const char *what;
		const void *data;
		size_t len;
	} bad[] = {
	    {"empty datagram", "", 0},
	    {"garbage", "hello, helper", 13},
	    {"wrong version", wrong_version, sizeof(wrong_version)},
	    {"unknown type", unknown, sizeof(unknown)},
	    {"answer as request", answer, sizeof(answer)},
	    {"trailing byte", trailing, sizeof(trailing)},
	    {"oversized", oversized, sizeof(oversized)},
	};

	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) == 0);
	helper_start_ctl(&h, policy, ctl[1]);
	close(ctl[1]);
	CHECK(ctl_next(ctl[0], &m, 30000) == 0 && m.type == SUP_CTL_READY);
	CHECK(do_ping(&h) == MH_E_OK);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		m = (struct sup_ctl_msg){0};
		CHECK(send(h.fd, bad[i].data, bad[i].len, 0) == (ssize_t)bad[i].len);
		CHECK(ctl_next(ctl[0], &m, 30000) == 0);
		if (m.type != SUP_CTL_PEER_VIOLATION || m.fd >= 0)
			fprintf(stderr, "%s: no PEER_VIOLATION (type %d)\n", bad[i].what, m.type);
		CHECK(m.type == SUP_CTL_PEER_VIOLATION && m.fd < 0);
		CHECK(channel_closed(h.fd));
		CHECK(waitpid(h.pid, NULL, WNOHANG) == 0);
		close(h.fd);
		new_channel(&h, ctl[0]);
		CHECK(do_ping(&h) == MH_E_OK);
	}

	/*
	 * A violation from an rpcd that has hung up already is not reported: that
	 * rpcd is gone, and a report could only hit its successor. The datagram
	 * is queued and its sender gone before the helper gets the channel, so
	 * that the helper cannot read it while the sender is still there.
	 */
	long mark = log_size();
	dead_channel(&h, ctl[0], "hello, helper", 13);
	CHECK(log_shows(mark, "rpcd has gone already"));
	new_channel(&h, ctl[0]);
	CHECK(do_ping(&h) == MH_E_OK);
	/* Nor is an empty datagram followed by end of file: that is rpcd leaving. */
	mark = log_size();
	dead_channel(&h, ctl[0], "", 0);
	CHECK(log_shows(mark, "request channel closed; waiting for a new one"));
	new_channel(&h, ctl[0]);
	CHECK(do_ping(&h) == MH_E_OK);
	struct pollfd none = {.fd = ctl[0], .events = POLLIN};
	CHECK(poll(&none, 1, 0) == 0);

	/*
	 * A clone in flight outlives the violation, but its answer goes nowhere:
	 * the channel it was asked on is closed, and the next rpcd never asked.
	 */
	char gate[80];
	snprintf(gate, sizeof(gate), "copy@%s", V2);
	CHECK(do_create(&h, V2, 32 * MiB, NULL) == MH_E_OK);
	pause_hold(gate);
	clone_req(&a, V3, MH_SRC_VOLUME, V2, 32 * MiB);
	uint32_t id = send_req(&h, &a);
	CHECK(id != 0 && pause_wait(gate, 60000) > 0);
	CHECK(send(h.fd, "", 0, 0) == 0);
	CHECK(ctl_next(ctl[0], &m, 30000) == 0 && m.type == SUP_CTL_PEER_VIOLATION);
	struct helper old = {.pid = h.pid, .fd = h.fd};
	new_channel(&h, ctl[0]);
	CHECK(do_ping(&h) == MH_E_OK);
	CHECK(channel_closed(old.fd)); /* no worker holds a channel */
	close(old.fd);
	mark = log_size();
	pause_release(gate);
	CHECK(log_shows(mark, "answer_dropped op=REQ_CLONE"));
	CHECK(do_ping(&h) == MH_E_OK);
	CHECK(recv_ans(&h, &a, 0) < 0); /* nothing for the new channel */
	CHECK(do_delete(&h, V3) == MH_E_OK && do_delete(&h, V2) == MH_E_OK);
	close(ctl[0]);
	CHECK(helper_stop(&h) == 0);

	/* The supervisor's side stays strict: PEER_VIOLATION sent to the helper is fatal. */
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) == 0);
	helper_start_ctl(&h, policy, ctl[1]);
	close(ctl[1]);
	CHECK(ctl_next(ctl[0], &m, 30000) == 0 && m.type == SUP_CTL_READY);
	CHECK(sup_ctl_send(ctl[0], SUP_CTL_PEER_VIOLATION, -1) == 0);
	CHECK(helper_stop(&h) == 3);
	close(ctl[0]);
}

/* Unsupervised, each violation ends the helper with status 3. */
static void test_violations(void)
{
	struct helper h;
	uint8_t buf[MH_MSG_MAX + 8];
	size_t len;
	struct mh_msg ping = {.type = MH_REQ_PING, .id = 7}, ans_ping = {.type = MH_ANS_PING};

	helper_start(&h); /* garbage */
	CHECK(do_ping(&h) == MH_E_OK);
	CHECK(send(h.fd, "hello, helper", 13, 0) == 13);
	CHECK(helper_stop(&h) == 3);

	helper_start(&h); /* wrong version */
	mh_msg_encode(&ping, buf, sizeof(buf), &len);
	buf[1] = MH_PROTO_VERSION + 1;
	CHECK(send(h.fd, buf, len, 0) == (ssize_t)len);
	CHECK(helper_stop(&h) == 3);

	helper_start(&h); /* unknown type (header only) */
	uint8_t unk[MH_HDR_LEN] = {0, MH_PROTO_VERSION, 0, 50, 0, 0, 0, 9, 0, 0, 0, 0};
	CHECK(send(h.fd, unk, sizeof(unk), 0) == (ssize_t)sizeof(unk));
	CHECK(helper_stop(&h) == 3);

	helper_start(&h); /* an answer sent as a request */
	mh_msg_encode(&ans_ping, buf, sizeof(buf), &len);
	CHECK(send(h.fd, buf, len, 0) == (ssize_t)len);
	CHECK(helper_stop(&h) == 3);

	helper_start(&h); /* oversized datagram */
	memset(buf, 0, sizeof(buf));
	CHECK(send(h.fd, buf, MH_MSG_MAX + 1, 0) == MH_MSG_MAX + 1);
	CHECK(helper_stop(&h) == 3);

	/*
	 * An empty datagram is a violation, not end of file. The channel stays
	 * open until the helper has exited: an empty datagram from a peer that
	 * has hung up already counts as the end of the channel.
	 */
	helper_start(&h);
	CHECK(do_ping(&h) == MH_E_OK);
	CHECK(send(h.fd, "", 0, 0) == 0);
	CHECK(exit_status_open(&h) == 3);
	CHECK(helper_stop(&h) == -1); /* gone already */

	helper_start(&h); /* a byte after a whole PING (its length field counts it) */
	mh_msg_encode(&ping, buf, sizeof(buf), &len);
	buf[11] = 1;
	buf[len] = 0;
	CHECK(send(h.fd, buf, len + 1, 0) == (ssize_t)len + 1);
	CHECK(helper_stop(&h) == 3);

	helper_start(&h); /* end of channel: clean exit */
	CHECK(do_ping(&h) == MH_E_OK);
	CHECK(helper_stop(&h) == 0);

	char bad[160];
	snprintf(bad, sizeof(bad), "%s/bad-policy.ini", tmp);
	FILE *f = fopen(bad, "w");
	fprintf(f, "[paths]\nallowed_rots = /x\n");
	CHECK(fclose(f) == 0);
	helper_start_with(&h, bad); /* broken policy: exit 2 */
	CHECK(helper_stop(&h) == 2);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		helper_bin = argv[1];
	if (geteuid() != 0) {
		printf("test_helper_proc: skipped (needs root)\n");
		return 77;
	}
	if (harness_setup("helper") < 0)
		return 1;

	struct helper h;
	helper_start(&h);
	CHECK(do_ping(&h) == MH_E_OK);
	test_confinement(&h);
	test_lifecycle(&h);
	test_refusals(&h);
	test_foreign_signature(&h);
	test_other_filesystems(&h);
	test_unstage_loop_held(&h);
	CHECK(do_ping(&h) == MH_E_OK); /* still alive: seccomp killed nothing */
	CHECK(helper_stop(&h) == 0);
	test_violations();
	test_supervised();
	test_supervised_violations();

	/* The audit trail names refusals and privileged actions. */
	FILE *lf = fopen(logfile, "re");
	char line[4096];
	bool saw_ok = false, saw_refused = false;
	while (lf && fgets(line, sizeof(line), lf)) {
		saw_ok |=
		    strstr(line, "audit") && strstr(line, "op=STAGE") && strstr(line, "result=ok");
		saw_refused |= strstr(line, "audit") && strstr(line, "result=refused");
	}
	if (lf)
		(void)fclose(lf);
	CHECK(saw_ok && saw_refused);
	CHECK(our_loops(false) == 0);
	if (tap_failures || getenv("SEPCSI_TEST_SHOW_LOG")) {
		fprintf(stderr, "---- helper log ----\n");
		lf = fopen(logfile, "re");
		while (lf && fgets(line, sizeof(line), lf))
			fputs(line, stderr);
		if (lf)
			(void)fclose(lf);
	}
	return tap_done("test_helper_proc");
}
