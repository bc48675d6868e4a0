/*
 * Real-process test of sepcsi-mounthelper, protocol v2, part 1: RESIZE,
 * SNAPSHOT, CLONE, DELETE_SNAPSHOT, CAPACITY on a plain ext4 data directory
 * and on a reflink-capable xfs one; the worker model (a PING and a STAGE of
 * another volume answered while a clone is held at a test pause point, BUSY
 * for a second request on the same volume); the pool of workers; SIGTERM
 * finishing the work in flight; a worker killed mid-copy; the audit file.
 * Needs root (exits 77 otherwise); private mount namespace; cleans up always.
 * Prints the measured snapshot times (a figure, never an assertion).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "helper_harness.h"
#include "mh_proto_all.h"
#include "tap.h"

#define GiB         (1024 * MiB)
#define VA          "sv-a0000000000000000000000000000001"
#define WORKERS_MAX 16 /* the helper's MH_WORKERS_MAX */
#define VB          "sv-a0000000000000000000000000000002"
#define VC          "sv-a0000000000000000000000000000003"
#define VD          "sv-a0000000000000000000000000000004"
#define VE          "sv-a0000000000000000000000000000005"
#define VF          "sv-a0000000000000000000000000000006"
#define VG          "sv-a0000000000000000000000000000007"
#define S1          "ss-b0000000000000000000000000000001"
#define S2          "ss-b0000000000000000000000000000002"

#define FICLONE_ _IOW(0x94, 9, int) /* <linux/fs.h> clashes with <sys/mount.h> */

/* Does the data directory itself support reflinks? (the answer CAPACITY must give) */
static bool data_reflinks(void)
{
	char buf[4096] = {1};
	int a = open(data, O_TMPFILE | O_RDWR, 0600), b = open(data, O_TMPFILE | O_RDWR, 0600);
	bool ok = a >= 0 && b >= 0 && write(a, buf, sizeof(buf)) == (ssize_t)sizeof(buf) &&
	          ioctl(b, FICLONE_, a) == 0;
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	return ok;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t blocks_bytes(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : UINT64_MAX;
}

static uint64_t loop_sectors(const char *dev)
{
	char p[128], buf[64] = "";
	snprintf(p, sizeof(p), "/sys/block/%s/size", dev + 5);
	FILE *f = fopen(p, "re");
	if (f && fgets(buf, sizeof(buf), f) == NULL)
		buf[0] = '\0';
	if (f)
		(void)fclose(f);
	return strtoull(buf, NULL, 10);
}

static void test_resize(struct helper *h)
{
	char staging[256], dev[64], img[300];
	uint64_t real = 0;
	snprintf(staging, sizeof(staging), "%s/staging/resize", root);
	snprintf(img, sizeof(img), "%s/images/%s.img", data, VA);
	mkdir(staging, 0750);
	CHECK(do_resize(h, VA, 128 * MiB, NULL) == MH_E_NOTFOUND);
	CHECK(do_create(h, VA, 64 * MiB, NULL) == MH_E_OK);
	CHECK(do_resize(h, VA, 64 * MiB, &real) == MH_E_OK && real == 64 * MiB); /* equal */
	CHECK(do_resize(h, VA, 32 * MiB, NULL) == MH_E_REFUSED);                 /* never shrink */
	CHECK(do_resize(h, VA, 2048ULL * GiB, NULL) == MH_E_REFUSED);            /* over max */
	CHECK(do_resize(h, "sv-../../etc", 128 * MiB, NULL) == MH_E_REFUSED);
	CHECK(do_resize(h, VA, 96 * MiB + 1, &real) == MH_E_OK && real == 96 * MiB + 4096);
	CHECK(blocks_bytes(img) == 0); /* still sparse */
	/* Staged: the loop device takes the new size at once. */
	CHECK(do_stage(h, VA, staging, "ext4", "", 0, NULL) == MH_E_OK);
	CHECK(loop_dev_of(VA, dev, sizeof(dev)));
	uint64_t before = loop_sectors(dev);
	CHECK(do_resize(h, VA, 160 * MiB, &real) == MH_E_OK && real == 160 * MiB);
	CHECK(before > 0 && loop_sectors(dev) == 160 * MiB / 512);
	CHECK(do_unstage(h, VA, staging) == MH_E_OK);
	CHECK(do_delete(h, VA) == MH_E_OK);
}

/*
 * Snapshot a staged volume with a file written but not synced (the freeze
 * must flush it), clone the snapshot bigger, stage the clone, read the file.
 */
static void test_snapshot_clone(struct helper *h, bool want_reflink)
{
	char staging[256], p[512], snap[300];
	struct mh_ans_copy cp;
	snprintf(staging, sizeof(staging), "%s/staging/snap", root);
	snprintf(snap, sizeof(snap), "%s/snapshots/%s.img", data, S1);
	mkdir(staging, 0750);
	CHECK(do_snapshot(h, S1, VB, NULL) == MH_E_NOTFOUND); /* no source */
	CHECK(do_create(h, VB, 256 * MiB, NULL) == MH_E_OK);
	CHECK(do_stage(h, VB, staging, "ext4", "", 0, NULL) == MH_E_OK);
	snprintf(p, sizeof(p), "%s/kept", staging);
	CHECK(write_file(p, "snapshot me\n") == 0); /* no fsync: FIFREEZE writes it out */
	CHECK(do_snapshot(h, S1, VB, &cp) == MH_E_OK);
	CHECK(cp.size_bytes == 256 * MiB && cp.reflinked == want_reflink);
	if (!want_reflink) /* holes stay holes: far less than the 256 MiB */
		CHECK(blocks_bytes(snap) < 64 * MiB);
	CHECK(do_snapshot(h, S1, VB, &cp) == MH_E_OK && cp.size_bytes == 256 * MiB); /* again */
	CHECK(do_snapshot(h, "ss-nothex", VB, NULL) == MH_E_REFUSED);
	CHECK(do_snapshot(h, VB, VB, NULL) == MH_E_REFUSED); /* a volume id is not a snapshot id */
	CHECK(do_snapshot(h, S1, "../x", NULL) == MH_E_REFUSED);
	/* The source is still mounted and writable: it was thawed. */
	snprintf(p, sizeof(p), "%s/after", staging);
	CHECK(write_file(p, "thawed\n") == 0);

	/* Clone from the snapshot, grown; stage it; the file is there. */
	CHECK(do_clone(h, VC, MH_SRC_SNAPSHOT, S1, 128 * MiB, NULL) == MH_E_REFUSED); /* smaller */
	CHECK(do_clone(h, VC, MH_SRC_SNAPSHOT, S2, 256 * MiB, NULL) == MH_E_NOTFOUND);
	CHECK(do_clone(h, VC, MH_SRC_SNAPSHOT, VB, 256 * MiB, NULL) == MH_E_REFUSED); /* kind */
	CHECK(do_clone(h, VC, MH_SRC_SNAPSHOT, S1, 320 * MiB, &cp) == MH_E_OK);
	CHECK(cp.size_bytes == 320 * MiB && cp.reflinked == want_reflink);
	CHECK(do_clone(h, VC, MH_SRC_SNAPSHOT, S1, 320 * MiB, &cp) == MH_E_OK); /* same again */
	CHECK(do_clone(h, VC, MH_SRC_SNAPSHOT, S1, 384 * MiB, NULL) == MH_E_EXISTS);
	char cstaging[256];
	snprintf(cstaging, sizeof(cstaging), "%s/staging/clone", root);
	mkdir(cstaging, 0750);
	CHECK(do_stage(h, VC, cstaging, "ext4", "", 0, NULL) == MH_E_OK);
	snprintf(p, sizeof(p), "%s/kept", cstaging);
	CHECK(file_has(p, "snapshot me"));
	/* Cloned larger: STAGE grows the file system (ext4 only with CAP_SYS_RESOURCE). */
	struct statvfs sv;
	bool grown = statvfs(cstaging, &sv) == 0 && sv.f_blocks * sv.f_frsize > 300 * MiB;
	CHECK(grown == (prctl(PR_CAPBSET_READ, CAP_SYS_RESOURCE, 0, 0, 0) == 1));
	snprintf(p, sizeof(p), "%s/after", cstaging);
	CHECK(!exists(p)); /* written after the snapshot */
	CHECK(do_unstage(h, VC, cstaging) == MH_E_OK);

	/* Clone straight from the (staged) volume. */
	CHECK(do_clone(h, VD, MH_SRC_VOLUME, VB, 256 * MiB, &cp) == MH_E_OK);
	CHECK(cp.reflinked == want_reflink);
	CHECK(do_stage(h, VD, cstaging, "ext4", "", 0, NULL) == MH_E_OK);
	snprintf(p, sizeof(p), "%s/after", cstaging);
	CHECK(file_has(p, "thawed"));
	CHECK(do_unstage(h, VD, cstaging) == MH_E_OK);

	CHECK(do_delete_snapshot(h, S1) == MH_E_OK);
	CHECK(!exists(snap));
	CHECK(do_delete_snapshot(h, S1) == MH_E_OK); /* missing = OK */
	CHECK(do_delete_snapshot(h, "ss-../../etc/passwd") == MH_E_REFUSED);
	CHECK(do_unstage(h, VB, staging) == MH_E_OK);
	CHECK(do_delete(h, VB) == MH_E_OK && do_delete(h, VC) == MH_E_OK &&
	      do_delete(h, VD) == MH_E_OK);
	CHECK(our_loops(false) == 0);
}

/* A 1 GiB image with 512 MiB of data in 1 MiB runs (every other MiB): time a snapshot. */
static void time_snapshot(struct helper *h, const char *what)
{
	char img[300], snap[300];
	struct mh_ans_copy cp = {0};
	snprintf(img, sizeof(img), "%s/images/%s.img", data, VE);
	snprintf(snap, sizeof(snap), "%s/snapshots/%s.img", data, S2);
	CHECK(do_create(h, VE, 1 * GiB, NULL) == MH_E_OK);
	bool ok = true;
	for (uint64_t off = 0; off < 1 * GiB && ok; off += 2 * MiB)
		ok = fill_file(img, off, 1 * MiB) == 0;
	CHECK(ok);
	double t0 = now();
	CHECK(do_snapshot(h, S2, VE, &cp) == MH_E_OK);
	double dt = now() - t0;
	printf("# snapshot of a 1 GiB image with 512 MiB of data, %s: %.3f s (reflinked=%d, "
	       "snapshot allocates %llu MiB)\n",
	       what, dt, cp.reflinked, (unsigned long long)(blocks_bytes(snap) / MiB));
	if (!cp.reflinked) /* the sparse copy keeps the holes: about the 512 MiB written */
		CHECK(blocks_bytes(snap) >= 512 * MiB && blocks_bytes(snap) < 600 * MiB);
	CHECK(do_delete_snapshot(h, S2) == MH_E_OK && do_delete(h, VE) == MH_E_OK);
}

static void test_capacity(struct helper *h, bool want_reflink)
{
	struct mh_ans_capacity cap;
	struct statvfs sv;
	CHECK(do_capacity(h, &cap) == MH_E_OK);
	CHECK(statvfs(data, &sv) == 0);
	CHECK(cap.total_bytes == (uint64_t)sv.f_blocks * sv.f_frsize);
	CHECK(cap.available_bytes > 0 && cap.available_bytes <= cap.total_bytes);
	CHECK(cap.reflink == want_reflink);
}

/*
 * An xfs cloned larger than its source is grown by its STAGE (the helper's
 * own EXPAND after the mount; xfs grows online with CAP_SYS_ADMIN alone), and
 * staging it again finds nothing left to grow.
 */
static void test_clone_grown_xfs(struct helper *h)
{
	char staging[256], p[512];
	struct mh_ans_copy cp;
	struct statvfs sv;
	snprintf(staging, sizeof(staging), "%s/staging/xfs-grown", root);
	mkdir(staging, 0750);
	CHECK(do_create(h, VF, 320 * MiB, NULL) == MH_E_OK);
	CHECK(do_stage(h, VF, staging, "xfs", "", 0, NULL) == MH_E_OK);
	snprintf(p, sizeof(p), "%s/kept", staging);
	CHECK(write_file(p, "small xfs\n") == 0);
	CHECK(do_unstage(h, VF, staging) == MH_E_OK);
	CHECK(do_clone(h, VG, MH_SRC_VOLUME, VF, 448 * MiB, &cp) == MH_E_OK);
	CHECK(do_stage(h, VG, staging, "xfs", "", 0, NULL) == MH_E_OK);
	CHECK(file_has(p, "small xfs"));
	/* 320 MiB of xfs shows 256 MiB (its log aside); grown to 448 MiB, 384 MiB. */
	CHECK(statvfs(staging, &sv) == 0 && sv.f_blocks * sv.f_frsize > 320 * MiB);
	CHECK(do_stage(h, VG, staging, "xfs", "", 0, NULL) == MH_E_OK); /* staged already */
	CHECK(do_unstage(h, VG, staging) == MH_E_OK);
	CHECK(do_delete(h, VF) == MH_E_OK && do_delete(h, VG) == MH_E_OK);
}

/*
 * The data directory on a reflink-capable xfs (mkfs.xfs -m reflink=1 on a
 * loop device mounted inside the test): snapshots and clones are reflinks.
 */
static void test_reflink_xfs(void)
{
	char img[200], saved[128], xdev[64] = "";
	snprintf(img, sizeof(img), "%s/xfs-data.img", tmp);
	snprintf(saved, sizeof(saved), "%s", data);
	int fd = open(img, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0 && ftruncate(fd, (off_t)(3 * GiB)) == 0);
	if (fd >= 0)
		close(fd);
	const char *mkfs[] = {"mkfs.xfs", "-q", "-m", "reflink=1", img, NULL};
	CHECK(run(mkfs) == 0);
	snprintf(data, sizeof(data), "%s/xdata", tmp);
	mkdir(data, 0700);
	const char *mnt[] = {"mount", "-o", "loop", img, data, NULL};
	if (run(mnt) != 0) {
		CHECK(!"mount xfs data dir");
		snprintf(data, sizeof(data), "%s", saved);
		return;
	}
	struct helper h;
	helper_start(&h);
	CHECK(do_ping(&h) == MH_E_OK);
	test_capacity(&h, true);
	test_snapshot_clone(&h, true);
	time_snapshot(&h, "reflink xfs");
	CHECK(helper_stop(&h) == 0);
	const char *umnt[] = {"umount", data, NULL};
	CHECK(run(umnt) == 0);
	(void)xdev;
	snprintf(data, sizeof(data), "%s", saved);
}

/*
 * Concurrency: a clone held in flight at the helper's "copy" pause point
 * (so its length owes nothing to sizes or machine speed): meanwhile PING and
 * a STAGE of another volume are answered, and a second request on the
 * volume being cloned is BUSY at once. Released, the clone completes.
 */
static void test_concurrency(struct helper *h)
{
	char img[300], staging[256], gate[64];
	struct mh_msg q, a;
	snprintf(img, sizeof(img), "%s/images/%s.img", data, VA);
	snprintf(staging, sizeof(staging), "%s/staging/conc", root);
	snprintf(gate, sizeof(gate), "copy@%s", VA);
	mkdir(staging, 0750);
	CHECK(do_create(h, VA, 256 * MiB, NULL) == MH_E_OK);
	CHECK(fill_file(img, 0, 16 * MiB) == 0);
	CHECK(do_create(h, VB, 64 * MiB, NULL) == MH_E_OK);

	pause_hold(gate);
	clone_req(&q, VC, MH_SRC_VOLUME, VA, 256 * MiB);
	uint32_t clone_id = send_req(h, &q);
	CHECK(clone_id != 0 && pause_wait(gate, 60000) > 0);
	/* PING: answered while the clone is held. */
	CHECK(do_ping(h) == MH_E_OK);
	/* A second request on the source or the target: BUSY at once. */
	CHECK(do_resize(h, VA, 512 * MiB, NULL) == MH_E_BUSY);
	CHECK(do_delete(h, VC) == MH_E_BUSY);
	struct mh_msg snap = {.type = MH_REQ_SNAPSHOT};
	snprintf(snap.u.snapshot.snapshot_id, sizeof(snap.u.snapshot.snapshot_id), "%s", S1);
	snprintf(snap.u.snapshot.volume_id, sizeof(snap.u.snapshot.volume_id), "%s", VA);
	CHECK(kind_of(call(h, &snap, &a), MH_ANS_SNAPSHOT, &a) == MH_E_BUSY);
	/* STAGE of another volume (mkfs and all): answered while the clone is held. */
	CHECK(do_stage(h, VB, staging, "ext4", "", 0, NULL) == MH_E_OK);
	/* No answer to the clone yet: it is still held. */
	CHECK(recv_ans(h, &a, 0) < 0);
	pause_release(gate);
	bool clone_done = false;
	while (!clone_done) {
		int t = recv_ans(h, &a, 120000);
		if (t < 0)
			break;
		if (a.id == clone_id) {
			clone_done = true;
			CHECK(t == MH_ANS_CLONE && a.u.copy_ans.size_bytes == 256 * MiB);
		}
	}
	CHECK(clone_done);
	CHECK(do_unstage(h, VB, staging) == MH_E_OK);
	CHECK(do_delete(h, VA) == MH_E_OK && do_delete(h, VB) == MH_E_OK &&
	      do_delete(h, VC) == MH_E_OK);
}

/* SIGTERM: the helper finishes the clone in flight, answers it, then exits 0. */
static void test_sigterm(void)
{
	char gate[64];
	struct helper h;
	struct mh_msg q, a;
	snprintf(gate, sizeof(gate), "copy@%s", VA);
	helper_start(&h);
	CHECK(do_create(&h, VA, 64 * MiB, NULL) == MH_E_OK);
	pause_hold(gate);
	clone_req(&q, VC, MH_SRC_VOLUME, VA, 64 * MiB);
	uint32_t id = send_req(&h, &q);
	CHECK(pause_wait(gate, 60000) > 0); /* the clone's worker is running */
	CHECK(kill(h.pid, SIGTERM) == 0);
	/* The helper waits for its worker: no answer and no exit while it is held. */
	CHECK(recv_ans(&h, &a, 200) < 0 && waitpid(h.pid, NULL, WNOHANG) == 0);
	pause_release(gate);
	CHECK(recv_ans(&h, &a, 120000) == MH_ANS_CLONE && a.id == id);
	int st = helper_stop(&h);
	CHECK(st == 0);
	helper_start(&h);
	CHECK(do_delete(&h, VA) == MH_E_OK && do_delete(&h, VC) == MH_E_OK);
	CHECK(helper_stop(&h) == 0);
}

/*
 * A worker killed mid-copy (of a mounted volume, frozen for the copy): the
 * helper answers for it (FAILED), thaws the volume, keeps serving, and the
 * copy can be retried.
 */
static void test_worker_killed(void)
{
	char staging[256], p[300], gate[64];
	struct helper h;
	struct mh_msg q, a;
	snprintf(staging, sizeof(staging), "%s/staging/killed", root);
	snprintf(gate, sizeof(gate), "copy@%s", VA);
	mkdir(staging, 0750);
	helper_start(&h);
	CHECK(do_create(&h, VA, 64 * MiB, NULL) == MH_E_OK);
	CHECK(do_stage(&h, VA, staging, "ext4", "", 0, NULL) == MH_E_OK);
	snprintf(p, sizeof(p), "%s/before", staging);
	CHECK(write_file(p, "written before the copy") == 0);
	pause_hold(gate);
	clone_req(&q, VC, MH_SRC_VOLUME, VA, 64 * MiB);
	uint32_t id = send_req(&h, &q);
	pid_t w = pause_wait(gate, 60000); /* held with the source frozen */
	CHECK(w > 0 && kill(w, SIGKILL) == 0);
	pause_release(gate);
	CHECK(recv_ans(&h, &a, 60000) == MH_ANS_ERROR && a.id == id &&
	      a.u.error.kind == MH_E_FAILED && strstr(a.u.error.reason, "signal 9"));
	/* Its half-made copy goes with it, not left for a retry that may never come: removed
	 * by PURGE in a worker, soon after (the main loop does not wait for it). */
	snprintf(p, sizeof(p), "%s/images/%s.img.tmp", data, VC);
	for (int i = 0; i < 2000 && access(p, F_OK) == 0; i++)
		tap_sleep_ms(10);
	CHECK(access(p, F_OK) < 0 && errno == ENOENT);
	/* Thawed: the volume takes writes again (a frozen one would block here). */
	alarm(20);
	snprintf(p, sizeof(p), "%s/after", staging);
	CHECK(write_file(p, "thawed") == 0);
	alarm(0);
	CHECK(do_ping(&h) == MH_E_OK);
	struct mh_ans_copy cp;
	int rc = MH_E_BUSY; /* until the purge of VC has answered */
	for (int i = 0; i < 2000 && rc == MH_E_BUSY; i++)
		if ((rc = do_clone(&h, VC, MH_SRC_VOLUME, VA, 64 * MiB, &cp)) == MH_E_BUSY)
			tap_sleep_ms(10);
	CHECK(rc == MH_E_OK); /* retried whole */
	CHECK(do_unstage(&h, VA, staging) == MH_E_OK);
	CHECK(do_delete(&h, VA) == MH_E_OK && do_delete(&h, VC) == MH_E_OK);
	CHECK(helper_stop(&h) == 0);
}

/*
 * DELETE of id once no operation holds it: after a worker died, or at a helper's
 * start, a PURGE of what a dead copy left holds the id a moment (BUSY, EINPROGRESS),
 * and the main loop does not wait for it.
 */
static int delete_when_free(struct helper *h, const char *id)
{
	int rc = MH_E_BUSY;
	for (int i = 0; i < 2000 && rc == MH_E_BUSY; i++)
		if ((rc = do_delete(h, id)) == MH_E_BUSY)
			tap_sleep_ms(10);
	return rc;
}

/* The helper's workers (its children other than the tool runner): how many, their pids in out. */
static size_t workers_of(pid_t helper, pid_t *out, size_t max)
{
	char path[64], word[16], comm[32];
	size_t n = 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", helper, helper);
	FILE *f = fopen(path, "re");
	while (f && fscanf(f, "%15s", word) == 1) {
		pid_t pid = (pid_t)strtol(word, NULL, 10);
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		FILE *c = fopen(path, "re");
		bool worker = c && fgets(comm, sizeof(comm), c) && strstr(comm, "mounthel");
		if (c)
			(void)fclose(c);
		if (worker && n < max)
			out[n] = pid;
		n += worker;
	}
	if (f)
		(void)fclose(f);
	return n;
}

/* How many descriptors pid has open. */
static int open_fds(pid_t pid)
{
	char path[64];
	int n = 0;
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	DIR *d = opendir(path);
	for (struct dirent *e; d && (e = readdir(d));)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return d ? n : -1;
}

/* Wait up to ms for the helper to have exactly want workers. */
static bool workers_become(pid_t helper, size_t want, int ms)
{
	pid_t w[WORKERS_MAX];
	for (int t = 0; t < ms; t += 10) {
		if (workers_of(helper, w, WORKERS_MAX) == want)
			return true;
		tap_sleep_ms(10);
	}
	return false;
}

/* How many "worker_retired reason=<why>" lines the helper logged after mark, idle at least min_ms.
 */
static int retired(long mark, const char *why, long min_ms)
{
	char want[64];
	int n = 0;
	snprintf(want, sizeof(want), "worker_retired reason=%s idle_ms=", why);
	FILE *f = fopen(logfile, "re");
	if (f && fseek(f, mark, SEEK_SET) == 0)
		for (char line[1024]; fgets(line, sizeof(line), f);) {
			const char *at = strstr(line, want);
			n += at && strtol(at + strlen(want), NULL, 10) >= min_ms;
		}
	if (f)
		(void)fclose(f);
	return n;
}

/*
 * The pool: requests one after another run in one worker, not a fork each;
 * after many requests it holds no more descriptors than after one, and none
 * of a mount it made (each UNSTAGE unmounts what the STAGE before it mounted).
 * A worker killed while idle is reaped and replaced by the next request, which
 * succeeds; an idle worker ends by itself. (Only a pause of 5 s between two
 * requests ends a worker between them; the helper logs it, and the test then
 * does not hold it against the pool.)
 */
static void test_worker_pool(void)
{
	char staging[256];
	struct helper h;
	struct stat lst;
	pid_t w[WORKERS_MAX] = {0}, again[WORKERS_MAX] = {0};
	snprintf(staging, sizeof(staging), "%s/staging/pool", root);
	mkdir(staging, 0750);
	helper_start(&h);
	long mark = stat(logfile, &lst) == 0 ? (long)lst.st_size : 0;
	CHECK(do_create(&h, VA, 64 * MiB, NULL) == MH_E_OK);
	CHECK(do_stage(&h, VA, staging, "ext4", "", 0, NULL) == MH_E_OK);
	CHECK(do_unstage(&h, VA, staging) == MH_E_OK);
	size_t first = workers_of(h.pid, w, WORKERS_MAX);
	int fds = first == 1 ? open_fds(w[0]) : -1;
	for (int i = 0; i < 20; i++) {
		CHECK(do_stage(&h, VA, staging, "ext4", "", 0, NULL) == MH_E_OK);
		CHECK(do_unstage(&h, VA, staging) == MH_E_OK);
	}
	size_t later = workers_of(h.pid, again, WORKERS_MAX);
	CHECK(retired(mark, "idle", 5000) > 0 ||
	      (first == 1 && later == 1 && again[0] == w[0] && fds > 0 && open_fds(w[0]) == fds));
	CHECK(later <= 1);
	if (later == 1) {
		CHECK(kill(again[0], SIGKILL) == 0);
		CHECK(workers_become(h.pid, 0, 10000)); /* reaped */
	}
	CHECK(do_delete(&h, VA) == MH_E_OK); /* in a new worker */
	w[0] = 0;
	CHECK(workers_of(h.pid, w, WORKERS_MAX) <= 1 && (later == 0 || w[0] != again[0]));
	CHECK(workers_become(h.pid, 0, 30000)); /* idle for 5 s: ended */
	CHECK(retired(mark, "idle", 5000) >= 1);
	CHECK(do_ping(&h) == MH_E_OK);
	CHECK(helper_stop(&h) == 0);
}

/*
 * LIST of mounts names each file system with the volume whose loop device it
 * is on, whatever the order of the devices: two staged volumes, each listed
 * once, as "f", with its own staging path; nothing after the last id.
 */
static void test_list_file_systems(void)
{
	char sa[256], sb[256], want[320], last[32];
	struct helper h;
	static struct mh_ans_list l;
	snprintf(sa, sizeof(sa), "%s/staging/list-a", root);
	snprintf(sb, sizeof(sb), "%s/staging/list-b", root);
	mkdir(sa, 0750);
	mkdir(sb, 0750);
	helper_start(&h);
	CHECK(do_create(&h, VB, 64 * MiB, NULL) == MH_E_OK);
	CHECK(do_create(&h, VA, 320 * MiB, NULL) == MH_E_OK); /* xfs wants 300 MB */
	CHECK(do_stage(&h, VB, sb, "ext4", "", 0, NULL) == MH_E_OK);
	CHECK(do_stage(&h, VA, sa, "xfs", "", 0, NULL) == MH_E_OK);
	CHECK(do_list(&h, MH_LIST_MOUNTS, "", &l) == MH_E_OK && !l.more);
	snprintf(want, sizeof(want), " f %s %s\n", VA, sa);
	CHECK(strstr(l.text, want) != NULL);
	snprintf(want, sizeof(want), " f %s %s\n", VB, sb);
	CHECK(strstr(l.text, want) != NULL);
	const char *nl = strrchr(l.text, '\n'), *prev = nl;
	while (prev && prev > l.text && prev[-1] != '\n')
		prev--;
	CHECK(nl && strchr(l.text, '\n') != nl && prev &&
	      sscanf(prev, "%31s", last) == 1); /* two lines; the last one's id */
	CHECK(do_list(&h, MH_LIST_MOUNTS, last, &l) == MH_E_OK && l.text[0] == '\0');
	CHECK(do_unstage(&h, VA, sa) == MH_E_OK && do_unstage(&h, VB, sb) == MH_E_OK);
	CHECK(do_delete(&h, VA) == MH_E_OK && do_delete(&h, VB) == MH_E_OK);
	CHECK(helper_stop(&h) == 0);
}

/*
 * A burst leaves its workers for the next one. Six requests held at once run
 * in six workers. None of them ends because it answered while more than four
 * were idle (which, under a load whose requests in flight rise and fall,
 * forked a worker over and over): the two beyond the four kept end after 1 s
 * idle, the four after 5 s, as the helper logs with how long each was idle.
 * Nothing here depends on how fast the machine is: the counts are of what
 * the helper did, and the times are lower bounds it enforces itself.
 */
static void test_worker_burst(void)
{
	enum { BURST = 6 };
	struct helper h;
	struct mh_msg q, a;
	char id[BURST][40];
	struct stat lst;
	helper_start(&h);
	long mark = stat(logfile, &lst) == 0 ? (long)lst.st_size : 0;
	pause_hold("answering");
	for (int i = 0; i < BURST; i++) {
		snprintf(id[i], sizeof(id[i]), "sv-b%031d", i);
		q = (struct mh_msg){.type = MH_REQ_CREATE};
		snprintf(q.u.create.volume_id, sizeof(q.u.create.volume_id), "%.39s", id[i]);
		q.u.create.size_bytes = 16 * MiB;
		CHECK(send_req(&h, &q) != 0);
	}
	CHECK(workers_become(h.pid, BURST, 30000)); /* all six in flight at once */
	pause_release("answering");
	for (int i = 0; i < BURST; i++)
		CHECK(recv_ans(&h, &a, 60000) == MH_ANS_CREATE);
	CHECK(workers_become(h.pid, 0, 60000));
	CHECK(retired(mark, "surplus", 1000) == 2 && retired(mark, "surplus", 0) == 2);
	CHECK(retired(mark, "idle", 5000) == 4 && retired(mark, "idle", 0) == 4);
	CHECK(retired(mark, "served", 0) == 0);
	for (int i = 0; i < BURST; i++)
		CHECK(do_delete(&h, id[i]) == MH_E_OK);
	CHECK(helper_stop(&h) == 0);
}

/*
 * A worker killed after it answered: the helper sends that answer, once, and
 * nothing else for the request; the channel stays up.
 */
static void test_worker_killed_after_answer(void)
{
	char gate[64];
	struct helper h;
	struct mh_msg q = {.type = MH_REQ_CREATE}, a;
	snprintf(gate, sizeof(gate), "answered@%s", VA);
	helper_start(&h);
	pause_hold(gate);
	snprintf(q.u.create.volume_id, sizeof(q.u.create.volume_id), "%s", VA);
	q.u.create.size_bytes = 16 * MiB;
	uint32_t id = send_req(&h, &q);
	pid_t w = pause_wait(gate, 60000);
	CHECK(w > 0 && kill(w, SIGKILL) == 0);
	pause_release(gate);
	CHECK(recv_ans(&h, &a, 60000) == MH_ANS_CREATE && a.id == id);
	CHECK(do_ping(&h) == MH_E_OK);
	CHECK(recv_ans(&h, &a, 0) < 0); /* no second answer */
	CHECK(do_delete(&h, VA) == MH_E_OK);
	CHECK(helper_stop(&h) == 0);
}

/* Write to path in a child; true if the write finished within 10 s (a frozen fs blocks it). */
static bool write_within(const char *path)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(write_file(path, "written") == 0 ? 0 : 1);
	for (int i = 0; i < 1000; i++) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) && WEXITSTATUS(st) == 0;
		tap_sleep_ms(10);
	}
	kill(pid, SIGKILL); /* it stays in D state until the thaw below; reaped then */
	return false;
}

/* Mounts named like loop devices, none of them the helper's, ahead of its own (or undone). */
enum { DECOYS = 300 };

static void decoys(bool mount_them)
{
	char d[300], src[32];
	snprintf(d, sizeof(d), "%s/decoys", root);
	mkdir(d, 0750);
	for (int i = 0; i < DECOYS; i++) {
		snprintf(d, sizeof(d), "%s/decoys/%d", root, i);
		snprintf(src, sizeof(src), "/dev/loop%d", 900000 + i);
		if (!mount_them) {
			umount2(d, MNT_DETACH);
			rmdir(d);
			continue;
		}
		mkdir(d, 0750);
		CHECK(mount(src, d, "tmpfs", MS_NOSUID | MS_NODEV, "size=4k") == 0);
	}
}

/*
 * No freeze outlives its bound: a copy held (pause point) with its source
 * frozen for longer than freeze_max_seconds is abandoned and the source
 * thawed; and a helper killed while a source is frozen thaws it at its next
 * start, however many mounts name loop devices before its own.
 */
static void test_freeze_bounds(void)
{
	char staging[256], p[300], gate[64], pol1[200];
	struct helper h;
	struct mh_msg q, a;
	snprintf(staging, sizeof(staging), "%s/staging/frozen", root);
	snprintf(gate, sizeof(gate), "copy@%s", VA);
	snprintf(p, sizeof(p), "%s/after", staging);
	snprintf(pol1, sizeof(pol1), "%s/policy-freeze.ini", tmp);
	write_policy(pol1, "[volumes]\nfreeze_max_seconds = 1\n");
	mkdir(staging, 0750);
	helper_start_with(&h, pol1);
	decoys(true); /* older than the volume's mount: listed before it */
	CHECK(do_create(&h, VA, 64 * MiB, NULL) == MH_E_OK);
	CHECK(do_stage(&h, VA, staging, "ext4", "", 0, NULL) == MH_E_OK);

	/* Held frozen past 1 s: FAILED with the reason, and the volume takes writes again. */
	pause_hold(gate);
	clone_req(&q, VC, MH_SRC_VOLUME, VA, 64 * MiB);
	uint32_t id = send_req(&h, &q);
	CHECK(pause_wait(gate, 60000) > 0);
	CHECK(recv_ans(&h, &a, 30000) == MH_ANS_ERROR && a.id == id &&
	      a.u.error.kind == MH_E_FAILED && strstr(a.u.error.reason, "freeze_max_seconds"));
	pause_release(gate);
	CHECK(write_within(p));
	CHECK(do_ping(&h) == MH_E_OK);
	/* Its worker killed, a PURGE of VC's half-made copy may hold VC a moment. */
	CHECK(delete_when_free(&h, VC) == MH_E_OK); /* nothing to delete: VC is free again */

	/* The helper itself killed while the source is frozen: the next helper thaws it. */
	pause_hold(gate);
	send_req(&h, &q);
	CHECK(pause_wait(gate, 60000) > 0);
	kill(h.pid, SIGKILL);
	helper_stop(&h);
	pause_release(gate);
	helper_start(&h);
	CHECK(do_ping(&h) == MH_E_OK);
	CHECK(write_within(p));
	CHECK(delete_when_free(&h, VC) == MH_E_OK); /* no clone made; its temporary gone too */
	CHECK(do_unstage(&h, VA, staging) == MH_E_OK && do_delete(&h, VA) == MH_E_OK);
	CHECK(helper_stop(&h) == 0);
	decoys(false);
}

/* Every action and refusal is also one JSON line in <data>/audit.log (0600). */
static void test_audit_file(void)
{
	char p[300], line[8192];
	struct stat st;
	snprintf(p, sizeof(p), "%s/audit.log", data);
	CHECK(stat(p, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
	FILE *f = fopen(p, "re");
	bool snap_ok = false, clone_ok = false, refused = false, busy = false, json = true;
	while (f && fgets(line, sizeof(line), f)) {
		json &= line[0] == '{' && strstr(line, "}\n") != NULL;
		snap_ok |= strstr(line, "\"op\":\"SNAPSHOT\"") &&
		           strstr(line, "\"result\":\"ok\"") &&
		           strstr(line, "\"snapshot_id\":\"" S1 "\"");
		clone_ok |= strstr(line, "\"op\":\"CLONE\"") && strstr(line, "\"result\":\"ok\"");
		refused |= strstr(line, "\"result\":\"refused\"") != NULL;
		busy |= strstr(line, "\"kind\":\"BUSY\"") != NULL;
	}
	if (f)
		(void)fclose(f);
	CHECK(json && snap_ok && clone_ok && refused && busy);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		helper_bin = argv[1];
	if (geteuid() != 0) {
		printf("test_helper_ops: skipped (needs root)\n");
		return 77;
	}
	if (harness_setup("helper-ops") < 0)
		return 1;
	struct helper h;
	helper_start(&h);
	CHECK(do_ping(&h) == MH_E_OK);
	test_resize(&h);
	bool rl = data_reflinks(); /* /tmp is a plain ext4 here: no reflink */
	test_capacity(&h, rl);
	test_snapshot_clone(&h, rl);
	test_clone_grown_xfs(&h);
	time_snapshot(&h, rl ? "/tmp (reflink)" : "plain ext4 (sparse copy)");
	test_concurrency(&h);
	CHECK(do_ping(&h) == MH_E_OK); /* still alive: seccomp killed nothing */
	CHECK(helper_stop(&h) == 0);
	test_sigterm();
	test_worker_killed();
	test_worker_killed_after_answer();
	test_worker_pool();
	test_worker_burst();
	test_list_file_systems();
	test_freeze_bounds();
	test_audit_file();
	test_reflink_xfs();
	CHECK(our_loops(false) == 0);
	if (tap_failures || getenv("SEPCSI_TEST_SHOW_LOG"))
		dump_log();
	return tap_done("test_helper_ops");
}
