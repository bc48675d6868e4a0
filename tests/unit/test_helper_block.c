/*
 * Real-process test of sepcsi-mounthelper, protocol v2, part 2: raw block
 * volumes (stage, publish to two targets and read-only, unpublish, unstage),
 * EXPAND of mounted ext4 and xfs with a file open on them, STATS (usage after
 * writing 10 MiB, abnormal once the loop device is gone behind the helper's
 * back), MOUNT_GROUP, CREATE_DIR/REMOVE_DIR, mkfs options, xfs clones mounted
 * with nouuid. Needs root (exits 77 otherwise); private mount namespace;
 * cleans up always.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/loop.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helper_harness.h"
#include "mh_proto_all.h"
#include "tap.h"

#define VA "sv-c0000000000000000000000000000001"
#define VB "sv-c0000000000000000000000000000002"
#define VC "sv-c0000000000000000000000000000003"
#define VD "sv-c0000000000000000000000000000004"
#define S1 "ss-d0000000000000000000000000000001"

static void path_in(char *out, size_t len, const char *dir, const char *name)
{
	snprintf(out, len, "%s/%s/%s", root, dir, name);
}

/*
 * A process holding the device path open from before this returns until gone
 * no longer exists (the UNSTAGE that unlinks it has reached its detach), then
 * letting go, inside the helper's wait for a held device: its pid, or -1.
 */
static pid_t hold_until_gone(const char *path, const char *gone)
{
	int ready[2];
	char c = 0;
	if (pipe(ready) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(path, O_RDONLY);
		(void)!write(ready[1], "x", 1);
		for (int i = 0; i < 60000 && access(gone, F_OK) == 0;
		     i++) /* 60 s for slow machines */
			nanosleep(&(struct timespec){0, 1000000L}, NULL);
		_exit(fd >= 0 ? 0 : 1);
	}
	close(ready[1]);
	if (pid > 0 && read(ready[0], &c, 1) != 1)
		pid = -1;
	close(ready[0]);
	return pid;
}

static void test_block(struct helper *h)
{
	char staging[256], devfile[300], t1[256], t2[256], t3[256], dev[64];
	struct mh_req_stage q;
	struct stat s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
	path_in(staging, sizeof(staging), "staging", "blk");
	snprintf(devfile, sizeof(devfile), "%s/dev", staging);
	path_in(t1, sizeof(t1), "pods", "blk1");
	path_in(t2, sizeof(t2), "pods", "blk2");
	path_in(t3, sizeof(t3), "pods", "blk3");
	mkdir(staging, 0750);
	CHECK(do_create(h, VA, 64 * MiB, NULL) == MH_E_OK);
	int lines = mountinfo_lines();

	stage_req(&q, VA, staging, "", "noatime", 0, MH_F_BLOCK); /* no mount options for block */
	CHECK(do_stage2(h, &q, NULL) == MH_E_REFUSED);
	stage_req(&q, VA, staging, "", "", 0, MH_F_BLOCK | MH_F_MOUNT_GROUP);
	CHECK(do_stage2(h, &q, NULL) == MH_E_REFUSED);
	stage_req(&q, VA, staging, "", "", 0, MH_F_BLOCK);
	CHECK(do_stage2(h, &q, NULL) == MH_E_OK);
	CHECK(stat(devfile, &s0) == 0 && S_ISBLK(s0.st_mode));
	CHECK(loop_dev_of(VA, dev, sizeof(dev)));
	CHECK(do_stage2(h, &q, NULL) == MH_E_OK); /* idempotent */
	CHECK(mountinfo_lines() == lines + 1);
	q.readonly = 1;
	CHECK(do_stage2(h, &q, NULL) == MH_E_EXISTS); /* staged read-write already */
	CHECK(do_delete(h, VA) == MH_E_BUSY);

	/* Two targets: the same device; written through one, read through the other. */
	CHECK(do_publish2(h, VA, staging, t1, 0, MH_F_BLOCK) == MH_E_OK);
	CHECK(do_publish2(h, VA, staging, t1, 0, MH_F_BLOCK) == MH_E_OK); /* no second bind */
	CHECK(do_publish2(h, VA, staging, t2, 0, MH_F_BLOCK) == MH_E_OK);
	CHECK(mountinfo_lines() == lines + 3);
	CHECK(stat(t1, &s1) == 0 && stat(t2, &s2) == 0 && S_ISBLK(s1.st_mode));
	CHECK(s1.st_rdev == s2.st_rdev && s1.st_rdev == s0.st_rdev);
	int fd = open(t1, O_WRONLY);
	CHECK(fd >= 0 && pwrite(fd, "block!", 6, 4096) == 6 && fsync(fd) == 0);
	if (fd >= 0)
		close(fd);
	char buf[8] = "";
	fd = open(t2, O_RDONLY | O_DIRECT);
	static char aligned[4096] __attribute__((aligned(4096)));
	CHECK(fd >= 0 && pread(fd, aligned, 4096, 4096) == 4096);
	memcpy(buf, aligned, 6);
	CHECK(memcmp(buf, "block!", 6) == 0);
	if (fd >= 0)
		close(fd);
	CHECK(do_publish2(h, VA, staging, t1, 1, MH_F_BLOCK) == MH_E_EXISTS); /* rw already */

	/* Read-only: a read-only bind does not stop writes to a node; a read-only loop does. */
	CHECK(do_publish2(h, VA, staging, t3, 1, MH_F_BLOCK) == MH_E_OK);
	CHECK(do_publish2(h, VA, staging, t3, 1, MH_F_BLOCK) == MH_E_OK);
	CHECK(stat(t3, &s3) == 0 && S_ISBLK(s3.st_mode));
	fd = open(t3, O_WRONLY);
	bool refused = fd < 0 || pwrite(fd, "x", 1, 0) < 0;
	CHECK(refused);
	if (fd >= 0)
		close(fd);
	fd = open(t3, O_RDONLY | O_DIRECT);
	CHECK(fd >= 0 && pread(fd, aligned, 4096, 4096) == 4096 && !memcmp(aligned, "block!", 6));
	if (fd >= 0)
		close(fd);

	/* EXPAND and STATS of a block volume. */
	uint64_t size = 0;
	struct mh_ans_stats st;
	CHECK(do_stats(h, VA, t1, MH_F_BLOCK, &st) == MH_E_OK && st.bytes_total == 64 * MiB &&
	      !st.abnormal);
	CHECK(do_stats(h, VA, staging, MH_F_BLOCK, &st) == MH_E_OK && st.bytes_total == 64 * MiB);
	CHECK(do_resize(h, VA, 96 * MiB, NULL) == MH_E_OK);
	CHECK(do_expand(h, VA, staging, "", MH_F_BLOCK, &size, NULL) == MH_E_OK &&
	      size == 96 * MiB);
	CHECK(do_stats(h, VA, t2, MH_F_BLOCK, &st) == MH_E_OK && st.bytes_total == 96 * MiB);

	CHECK(do_unstage2(h, VA, staging, MH_F_BLOCK) == MH_E_BUSY); /* still published */
	CHECK(do_unpublish(h, VA, t1) == MH_E_OK && !exists(t1));
	CHECK(do_unpublish(h, VA, t1) == MH_E_OK);
	CHECK(do_unpublish(h, VA, t2) == MH_E_OK && !exists(t2));
	CHECK(our_loops(false) == 2); /* the staging's, and t3's read-only one */
	CHECK(do_unpublish(h, VA, t3) == MH_E_OK && !exists(t3));
	CHECK(our_loops(false) == 1); /* t3's went with its bind */
	/*
	 * A bind of the device made by someone else (kubelet, into a pod) after the
	 * helper last looked at every mount: the look in UNSTAGE learns the new
	 * mount (the worker keeps what it saw of the others) and refuses.
	 */
	char pod[256];
	path_in(pod, sizeof(pod), "pods", "pod-device");
	CHECK(write_file(pod, "") == 0 && mount(devfile, pod, NULL, MS_BIND, NULL) == 0);
	CHECK(do_unstage2(h, VA, staging, MH_F_BLOCK) == MH_E_BUSY);
	CHECK(umount(pod) == 0 && unlink(pod) == 0);
	CHECK(do_unstage2(h, VA, staging, MH_F_BLOCK) == MH_E_OK);
	CHECK(!exists(devfile) && exists(staging));
	CHECK(do_unstage2(h, VA, staging, MH_F_BLOCK) == MH_E_OK);
	CHECK(mountinfo_lines() == lines);
	CHECK(our_loops(false) == 0);

	/* Read-only staging; the device refuses writes. Then UNSTAGE with REMOVE_DIR. */
	stage_req(&q, VA, staging, "", "", 1, MH_F_BLOCK);
	CHECK(do_stage2(h, &q, NULL) == MH_E_OK);
	fd = open(devfile, O_WRONLY);
	CHECK(fd < 0 || pwrite(fd, "x", 1, 0) < 0);
	if (fd >= 0)
		close(fd);
	CHECK(do_publish2(h, VA, staging, t1, 0, MH_F_BLOCK) == MH_E_OK); /* forced read-only */
	CHECK(do_publish2(h, VA, staging, t1, 1, MH_F_BLOCK) == MH_E_OK);
	CHECK(do_unpublish(h, VA, t1) == MH_E_OK);
	/* REMOVE_DIR removes only a directory the helper made (CREATE_DIR); this one stays. */
	CHECK(do_unstage2(h, VA, staging, MH_F_BLOCK | MH_F_REMOVE_DIR) == MH_E_OK);
	CHECK(exists(staging) && !exists(devfile) && our_loops(false) == 0);

	/* A held-open device node: UNSTAGE answers BUSY (its bind is busy), never success. */
	mkdir(staging, 0750);
	stage_req(&q, VA, staging, "", "", 0, MH_F_BLOCK);
	CHECK(do_stage2(h, &q, NULL) == MH_E_OK);
	fd = open(devfile, O_RDONLY);
	CHECK(do_unstage2(h, VA, staging, MH_F_BLOCK) == MH_E_BUSY);
	if (fd >= 0)
		close(fd);
	CHECK(do_unstage2(h, VA, staging, MH_F_BLOCK) == MH_E_OK);
	CHECK(our_loops(false) == 0);
	/*
	 * The loop device itself held (not its node in the staging, whose bind would then
	 * be busy), and let go during the helper's wait (mh_relay.c): OK, the device gone.
	 */
	CHECK(do_stage2(h, &q, NULL) == MH_E_OK);
	CHECK(loop_dev_of(VA, dev, sizeof(dev)));
	pid_t holder = hold_until_gone(dev, devfile);
	CHECK(holder > 0 && do_unstage2(h, VA, staging, MH_F_BLOCK) == MH_E_OK);
	CHECK(holder > 0 && waitpid(holder, NULL, 0) == holder);
	CHECK(our_loops(false) == 0);
	/* Publish without a staging: PRECONDITION; a foreign file system there: REFUSED. */
	CHECK(do_publish2(h, VA, staging, t1, 0, MH_F_BLOCK) == MH_E_PRECONDITION);
	CHECK(!exists(t1));
	CHECK(do_delete(h, VA) == MH_E_OK);
}

static uint64_t fs_size(const char *path)
{
	struct statvfs sv;
	return statvfs(path, &sv) == 0 ? (uint64_t)sv.f_blocks * sv.f_frsize : 0;
}

/* EXPAND of mounted ext4 and xfs with a file open on each; statvfs grows. */
static void test_expand(struct helper *h)
{
	const struct {
		const char *id, *fs;
		uint64_t from, to;
	} v[] = {{VB, "ext4", 64 * MiB, 160 * MiB}, {VC, "xfs", 320 * MiB, 640 * MiB}};
	bool have_resource = prctl(PR_CAPBSET_READ, CAP_SYS_RESOURCE, 0, 0, 0) == 1;
	for (size_t i = 0; i < 2; i++) {
		char staging[256], p[300];
		uint64_t size = 0;
		struct mh_msg a;
		path_in(staging, sizeof(staging), "staging", v[i].fs);
		mkdir(staging, 0750);
		CHECK(do_create(h, v[i].id, v[i].from, NULL) == MH_E_OK);
		CHECK(do_expand(h, v[i].id, staging, v[i].fs, 0, NULL, NULL) == MH_E_PRECONDITION);
		CHECK(do_stage(h, v[i].id, staging, v[i].fs, "", 0, NULL) == MH_E_OK);
		snprintf(p, sizeof(p), "%s/open", staging);
		int fd = open(p, O_CREAT | O_RDWR, 0600);
		CHECK(fd >= 0);
		uint64_t before = fs_size(staging);
		CHECK(do_resize(h, v[i].id, v[i].to, NULL) == MH_E_OK);
		CHECK(do_expand(h, v[i].id, staging, "btrfs", 0, NULL, NULL) == MH_E_REFUSED);
		int k = do_expand(h, v[i].id, staging, v[i].fs, 0, &size, &a);
		if (strcmp(v[i].fs, "ext4") == 0 && !have_resource) {
			/* This machine withholds CAP_SYS_RESOURCE from root: ext4 cannot grow. */
			CHECK(k == MH_E_FAILED && strstr(a.u.error.reason, "CAP_SYS_RESOURCE"));
			printf(
			    "# no CAP_SYS_RESOURCE here: ext4 online expand refused as expected\n");
		} else {
			CHECK(k == MH_E_OK && size == v[i].to);
			CHECK(fs_size(staging) > before + (v[i].to - v[i].from) / 2);
			/* Again: nothing left to grow, still OK. */
			CHECK(do_expand(h, v[i].id, staging, v[i].fs, 0, &size, NULL) == MH_E_OK);
		}
		CHECK(fd >= 0 && write(fd, "still open", 10) == 10);
		if (fd >= 0)
			close(fd);
		CHECK(do_unstage(h, v[i].id, staging) == MH_E_OK);
		CHECK(do_delete(h, v[i].id) == MH_E_OK);
	}
}

/* STATS: usage moves with 10 MiB written; abnormal when the loop is gone behind our back. */
static void test_stats(struct helper *h)
{
	char staging[256], target[256], p[300], dev[64], other[256];
	struct mh_ans_stats a, b;
	path_in(staging, sizeof(staging), "staging", "stats");
	path_in(target, sizeof(target), "pods", "stats");
	path_in(other, sizeof(other), "pods", "tmpfs");
	mkdir(staging, 0750);
	CHECK(do_create(h, VD, 128 * MiB, NULL) == MH_E_OK);
	CHECK(do_stats(h, VD, staging, 0, &a) == MH_E_OK && a.abnormal); /* not mounted */
	CHECK(do_stage(h, VD, staging, "ext4", "", 0, NULL) == MH_E_OK);
	CHECK(do_publish(h, VD, staging, target, 0) == MH_E_OK);
	CHECK(do_stats(h, VD, staging, 0, &a) == MH_E_OK && !a.abnormal);
	CHECK(a.bytes_total > 100 * MiB && a.bytes_available <= a.bytes_total);
	CHECK(a.inodes_total > 0 && a.inodes_used > 0 && a.inodes_free < a.inodes_total);
	snprintf(p, sizeof(p), "%s/ten", target);
	int fd = open(p, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK(fill_file(p, 0, 10 * MiB) == 0);
	CHECK(do_stats(h, VD, target, 0, &b) == MH_E_OK && !b.abnormal);
	CHECK(b.bytes_used >= a.bytes_used + 10 * MiB &&
	      b.bytes_available + 10 * MiB <= a.bytes_available);
	CHECK(b.inodes_used == a.inodes_used + 1);
	/* Not this volume's mount: NOTFOUND. */
	CHECK(do_stats(h, VB, staging, 0, NULL) == MH_E_NOTFOUND); /* no such image */
	mkdir(other, 0750);
	CHECK(mount("tmpfs", other, "tmpfs", 0, NULL) == 0);
	CHECK(do_stats(h, VD, other, 0, NULL) == MH_E_NOTFOUND);
	CHECK(umount(other) == 0 && rmdir(other) == 0);
	snprintf(p, sizeof(p), "%s/missing", root);
	CHECK(do_stats(h, VD, p, 0, NULL) == MH_E_NOTFOUND);
	CHECK(do_stats(h, VD, "/etc", 0, NULL) == MH_E_REFUSED);

	/* Behind the helper's back: lazy unmounts and losetup -d. */
	CHECK(do_unpublish(h, VD, target) == MH_E_OK);
	CHECK(loop_dev_of(VD, dev, sizeof(dev)));
	CHECK(umount2(staging, MNT_DETACH) == 0);
	int lfd = open(dev, O_RDONLY); /* losetup -d (ENXIO if autoclear was quicker) */
	if (lfd >= 0) {
		ioctl(lfd, LOOP_CLR_FD, 0);
		close(lfd);
	}
	for (int i = 0; i < 50 && loop_dev_of(VD, dev, sizeof(dev)); i++)
		tap_sleep_ms(20);
	CHECK(do_stats(h, VD, staging, 0, &a) == MH_E_OK && a.abnormal && a.message[0]);
	printf("# stats after the loop was detached: abnormal=%d \"%s\"\n", a.abnormal, a.message);
	CHECK(do_unstage(h, VD, staging) == MH_E_OK); /* nothing left to do */
	CHECK(do_delete(h, VD) == MH_E_OK);
}

/* MOUNT_GROUP: the root gets the gid, g+rwx and setgid; new files inherit the group. */
static void test_mount_group(struct helper *h)
{
	const char *fss[] = {"ext4", "xfs"};
	for (size_t i = 0; i < 2; i++) {
		char staging[256], p[300];
		struct mh_req_stage q;
		struct stat st;
		path_in(staging, sizeof(staging), "staging", "group");
		mkdir(staging, 0750);
		CHECK(do_create(h, VA, 320 * MiB, NULL) == MH_E_OK);
		stage_req(&q, VA, staging, fss[i], "", 0, MH_F_MOUNT_GROUP);
		q.gid = 4321;
		CHECK(do_stage2(h, &q, NULL) == MH_E_OK);
		CHECK(stat(staging, &st) == 0 && st.st_gid == 4321 && st.st_uid == 0);
		CHECK((st.st_mode & (S_ISGID | S_IRWXG)) == (S_ISGID | S_IRWXG));
		snprintf(p, sizeof(p), "%s/f", staging);
		CHECK(write_file(p, "g") == 0 && stat(p, &st) == 0 && st.st_gid == 4321);
		CHECK(do_stage2(h, &q, NULL) == MH_E_OK); /* idempotent */
		CHECK(do_unstage(h, VA, staging) == MH_E_OK);
		/* Staged again with another group: the root follows. */
		q.gid = 4322;
		CHECK(do_stage2(h, &q, NULL) == MH_E_OK);
		CHECK(stat(staging, &st) == 0 && st.st_gid == 4322 && (st.st_mode & S_ISGID));
		CHECK(do_unstage(h, VA, staging) == MH_E_OK);
		q.gid = UINT32_MAX;
		CHECK(do_stage2(h, &q, NULL) == MH_E_REFUSED);
		CHECK(do_delete(h, VA) == MH_E_OK);
	}
}

/* Ephemeral volumes: STAGE creates the directory, UNSTAGE removes it. mkfs options. */
static void test_dirs_and_mkfs(struct helper *h)
{
	char target[300], parent[256], p[400];
	struct mh_req_stage q;
	path_in(parent, sizeof(parent), "pods", "eph");
	snprintf(target, sizeof(target), "%s/mount", parent);
	CHECK(do_create(h, VB, 64 * MiB, NULL) == MH_E_OK);
	stage_req(&q, VB, target, "ext4", "", 0, MH_F_CREATE_DIR);
	CHECK(do_stage2(h, &q, NULL) == MH_E_NOTFOUND); /* the parent must exist */
	CHECK(!exists(target));
	mkdir(parent, 0750);
	snprintf(q.mkfs_options, sizeof(q.mkfs_options), "-d /etc"); /* populate: never */
	CHECK(do_stage2(h, &q, NULL) == MH_E_REFUSED);
	snprintf(q.mkfs_options, sizeof(q.mkfs_options), "-m 0 -E nodiscard --foo");
	CHECK(do_stage2(h, &q, NULL) == MH_E_REFUSED);
	snprintf(q.mkfs_options, sizeof(q.mkfs_options), "-m 0  -Enodiscard");
	CHECK(do_stage2(h, &q, NULL) == MH_E_OK);
	CHECK(exists(target));
	snprintf(p, sizeof(p), "%s/lost+found", target);
	CHECK(exists(p));
	CHECK(do_stage2(h, &q, NULL) == MH_E_OK);
	/* -m 0 reached mkfs: no reserved blocks. */
	char cmd[400], line[256];
	bool zero = false;
	snprintf(cmd, sizeof(cmd), "dumpe2fs -h %s/images/%s.img 2>/dev/null", data, VB);
	/* NOLINTNEXTLINE(cert-env33-c): a fixed command on the test's own image */
	FILE *f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f))
		zero |= strcmp(line, "Reserved block count:     0\n") == 0;
	if (f)
		pclose(f);
	CHECK(zero);
	CHECK(do_unstage2(h, VB, target, MH_F_REMOVE_DIR) == MH_E_OK);
	CHECK(!exists(target));
	CHECK(do_unstage2(h, VB, target, MH_F_REMOVE_DIR) == MH_E_OK);
	CHECK(do_unstage2(h, VB, target, MH_F_CREATE_DIR) == MH_E_REFUSED); /* not for UNSTAGE */
	CHECK(rmdir(parent) == 0);
	CHECK(do_delete(h, VB) == MH_E_OK);
}

/* An xfs clone has its origin's UUID: with nouuid both mount side by side. */
static void test_xfs_clone_nouuid(struct helper *h)
{
	char s1[256], s2[256];
	struct mh_req_stage q;
	path_in(s1, sizeof(s1), "staging", "xorig");
	path_in(s2, sizeof(s2), "staging", "xclone");
	mkdir(s1, 0750);
	mkdir(s2, 0750);
	CHECK(do_create(h, VC, 320 * MiB, NULL) == MH_E_OK);
	stage_req(&q, VC, s1, "xfs", "", 0, 0);
	snprintf(q.mkfs_options, sizeof(q.mkfs_options), "-m reflink=1 -K");
	CHECK(do_stage2(h, &q, NULL) == MH_E_OK);
	CHECK(do_snapshot(h, S1, VC, NULL) == MH_E_OK);
	CHECK(do_clone(h, VD, MH_SRC_SNAPSHOT, S1, 448 * MiB, NULL) == MH_E_OK);
	CHECK(do_stage(h, VD, s2, "xfs", "", 0, NULL) == MH_E_FAILED); /* duplicate UUID */
	CHECK(do_stage(h, VD, s2, "xfs", "nouuid", 0, NULL) == MH_E_OK);
	/* Cloned larger: STAGE grew the file system to the new size. */
	printf("# xfs origin %llu MiB, clone %llu MiB\n", (unsigned long long)(fs_size(s1) / MiB),
	       (unsigned long long)(fs_size(s2) / MiB));
	CHECK(fs_size(s2) > fs_size(s1) + 100 * MiB);
	CHECK(do_unstage(h, VD, s2) == MH_E_OK && do_unstage(h, VC, s1) == MH_E_OK);
	CHECK(do_delete_snapshot(h, S1) == MH_E_OK);
	CHECK(do_delete(h, VC) == MH_E_OK && do_delete(h, VD) == MH_E_OK);
	CHECK(our_loops(false) == 0);
}

/* How many lines of text contain every one of the words. */
static int lines_with(const char *text, const char *w1, const char *w2)
{
	int n = 0;
	for (const char *l = text; *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		char line[MH_PATH_MAX + 200];
		snprintf(line, sizeof(line), "%.*s", (int)len, l);
		n += strstr(line, w1) && (!w2 || strstr(line, w2));
		l += len + (nl != NULL);
	}
	return n;
}

/*
 * LIST tells what the helper made: images (with sizes), snapshots, and the
 * mounts and binds of its volumes' loop devices, with their paths; and a
 * worker killed between attaching a raw block volume's loop device and
 * binding it leaves no device behind (the sweep detaches it).
 */
static void test_list_and_sweep(struct helper *h)
{
	static struct mh_ans_list l;
	char staging[256], target[256], devfile[300], gate[64], dev[64];
	struct mh_req_stage q;
	path_in(staging, sizeof(staging), "staging", "lst");
	path_in(target, sizeof(target), "pods", "lst");
	snprintf(devfile, sizeof(devfile), "%s/dev", staging);
	mkdir(staging, 0750);
	CHECK(do_create(h, VA, 64 * MiB, NULL) == MH_E_OK);
	CHECK(do_create(h, VB, 32 * MiB, NULL) == MH_E_OK);
	CHECK(do_list(h, MH_LIST_IMAGES, "", &l) == MH_E_OK && !l.more);
	CHECK(lines_with(l.text, VA, " 67108864") == 1 && lines_with(l.text, VB, " 33554432") == 1);
	CHECK(do_list(h, MH_LIST_IMAGES, VA, &l) == MH_E_OK); /* after the cursor only */
	CHECK(lines_with(l.text, VA, NULL) == 0 && lines_with(l.text, VB, NULL) == 1);
	CHECK(do_list(h, MH_LIST_MOUNTS, "", &l) == MH_E_OK && l.text[0] == '\0');

	stage_req(&q, VA, staging, "", "", 0, MH_F_BLOCK);
	CHECK(do_stage2(h, &q, NULL) == MH_E_OK);
	CHECK(do_publish2(h, VA, staging, target, 0, MH_F_BLOCK) == MH_E_OK);
	CHECK(do_list(h, MH_LIST_MOUNTS, "", &l) == MH_E_OK);
	CHECK(lines_with(l.text, " b ", devfile) == 1 && lines_with(l.text, " b ", target) == 1);
	CHECK(lines_with(l.text, VA, NULL) == 2);
	CHECK(do_list(h, MH_LIST_MOUNTS, "x", NULL) == MH_E_REFUSED);
	CHECK(do_unpublish(h, VA, target) == MH_E_OK);
	CHECK(do_unstage2(h, VA, staging, MH_F_BLOCK) == MH_E_OK);

	/* Killed with the device attached, not bound: the main loop detaches it. */
	snprintf(gate, sizeof(gate), "attached@%s", VB);
	pause_hold(gate);
	stage_req(&q, VB, staging, "", "", 0, MH_F_BLOCK);
	static struct mh_msg m, a;
	m = (struct mh_msg){.type = MH_REQ_STAGE, .u.stage = q};
	uint32_t id = send_req(h, &m);
	pid_t w = pause_wait(gate, 60000);
	CHECK(w > 0 && loop_dev_of(VB, dev, sizeof(dev)));
	CHECK(w > 0 && kill(w, SIGKILL) == 0);
	pause_release(gate);
	CHECK(recv_ans(h, &a, 60000) == MH_ANS_ERROR && a.id == id);
	CHECK(!loop_dev_of(VB, dev, sizeof(dev)));
	CHECK(do_delete(h, VB) == MH_E_OK && do_delete(h, VA) == MH_E_OK);
	CHECK(do_list(h, MH_LIST_IMAGES, "", &l) == MH_E_OK && l.text[0] == '\0');

	/*
	 * A page of many entries: sorting them (glibc's qsort asks the memory size) and
	 * growing their array past malloc's mmap threshold (realloc moves it with
	 * mremap) are allowed.
	 */
	enum { MANY = 2100 };
	static char ids[MANY][40];
	int made = 0;
	for (int i = 0; i < MANY; i++) {
		snprintf(ids[i], sizeof(ids[i]), "sv-d%031x", (unsigned)i);
		made += do_create(h, ids[i], MiB, NULL) == MH_E_OK;
	}
	CHECK(made == MANY);
	int listed = 0;
	char after[40] = "";
	do {
		int k = do_list(h, MH_LIST_IMAGES, after, &l);
		CHECK(k == MH_E_OK);
		if (k != MH_E_OK)
			break;
		int n = lines_with(l.text, "sv-d", NULL);
		listed += n;
		if (n > 0)
			snprintf(after, sizeof(after), "%s", ids[listed - 1]);
	} while (l.more && listed < MANY);
	CHECK(listed == MANY);
	CHECK(do_ping(h) == MH_E_OK);
	for (int i = 0; i < MANY; i++)
		CHECK(do_delete(h, ids[i]) == MH_E_OK);
}

/*
 * A publication keeps its staging's access-time mode: strictatime too, which
 * mountinfo names by neither relatime nor noatime (so the look by mountinfo
 * must say it: it once dropped it, and the publication was relatime).
 */
static void test_atime_kept(struct helper *h)
{
	const char *modes[] = {"strictatime", "noatime", "relatime"};
	for (size_t i = 0; i < 3; i++) {
		char staging[256], parent[256], target[300], opts[512];
		struct mh_req_stage q;
		path_in(staging, sizeof(staging), "staging", modes[i]);
		path_in(parent, sizeof(parent), "pods", modes[i]);
		snprintf(target, sizeof(target), "%s/mount", parent);
		mkdir(staging, 0750);
		mkdir(parent, 0750);
		CHECK(do_create(h, VA, 64 * MiB, NULL) == MH_E_OK);
		stage_req(&q, VA, staging, "ext4", modes[i], 0, 0);
		CHECK(do_stage2(h, &q, NULL) == MH_E_OK);
		CHECK(do_publish(h, VA, staging, target, 0) == MH_E_OK);
		mount_opts_at(target, opts, sizeof(opts));
		bool strict = !has_opt(opts, "relatime") && !has_opt(opts, "noatime");
		CHECK(i == 0 ? strict : has_opt(opts, modes[i]));
		CHECK(do_unpublish(h, VA, target) == MH_E_OK);
		CHECK(do_unstage(h, VA, staging) == MH_E_OK);
		CHECK(do_delete(h, VA) == MH_E_OK);
	}
}

int main(int argc, char **argv)
{
	if (argc > 1)
		helper_bin = argv[1];
	if (geteuid() != 0) {
		printf("test_helper_block: skipped (needs root)\n");
		return 77;
	}
	if (harness_setup("helper-block") < 0)
		return 1;
	struct helper h;
	helper_start(&h);
	CHECK(do_ping(&h) == MH_E_OK);
	test_block(&h);
	test_expand(&h);
	test_stats(&h);
	test_mount_group(&h);
	test_dirs_and_mkfs(&h);
	test_xfs_clone_nouuid(&h);
	test_list_and_sweep(&h);
	CHECK(do_ping(&h) == MH_E_OK); /* still alive: seccomp killed nothing */
	CHECK(helper_stop(&h) == 0);
	CHECK(our_loops(false) == 0);
	/* The same raw block life, LIST, and a publication's attributes on a kernel without
	 * listmount and statmount: mountinfo answers alike. */
	char atime_policy[160];
	snprintf(atime_policy, sizeof(atime_policy), "%s/policy-atime.ini", tmp);
	write_policy(atime_policy, "[filesystems]\nmount_options = strictatime noatime relatime\n");
	helper_before_statmount = true;
	helper_start_with(&h, atime_policy);
	helper_before_statmount = false;
	test_block(&h);
	test_list_and_sweep(&h);
	test_atime_kept(&h);
	CHECK(do_ping(&h) == MH_E_OK);
	CHECK(helper_stop(&h) == 0);
	CHECK(our_loops(false) == 0);
	if (tap_failures || getenv("SEPCSI_TEST_SHOW_LOG"))
		dump_log();
	return tap_done("test_helper_block");
}
