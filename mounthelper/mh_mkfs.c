/*
 * Signature probing (libblkid, in the tools runner: mh_tools_signature) and
 * formatting (mkfs.*, started by the tools runner, mh_tools.c).
 *
 * Runs in a worker of the helper as root with the helper's capabilities under
 * seccomp; the tool runs with no capability at all, under the tools' filter.
 * Nothing here is fatal.
 *
 * Safety argument. Data loss is the risk here, so formatting needs proof that
 * the device is blank: libblkid's safe probe with superblocks AND partition
 * tables enabled must report nothing. The probe runs in the capability-less
 * tools runner (runner/signature.c), never here: its parsers read bytes a
 * tenant may have written, each probe in a child of its own that can only
 * read its one image and answer. What it answers can at worst be a lie about
 * that image, its own tenant's. Any signature other than the requested
 * filesystem, a partition table, or an ambivalent result (two signatures) is
 * refused with MH_E_EXISTS and the device is left untouched. What is probed
 * is one of our own images (mh_loop.c), as the file or through its loop
 * device (mh_ops.c says which when), never a path from rpcd.
 *
 * The tool formats the image FILE, never a block device: it gets the
 * helper's descriptor of that one image as its fd 3 and names it
 * /proc/self/fd/3 (RN_TOOL_TARGET), the data directory not being in its
 * view. mkfs.xfs on a block device needs BLKBSZSET, i.e. CAP_SYS_ADMIN, and
 * the tool holds no capability. The
 * blocks the probe cached on the loop device are then dropped by the caller.
 * The tool is one of a fixed table, with a fixed argument vector (each option
 * an allowlist entry of the policy) and environment, stdin from /dev/null (a
 * prompt reads EOF and fails), its output kept for the error reason, and a
 * time limit (mh_tools.c).
 */
#include "mh_mkfs.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h> /* BLKFLSBUF */
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mh_helper_ops.h"
#include "mh_image_life.h"
#include "mh_loop.h"
#include "mh_mount.h"
#include "mh_pause.h"
#include "mh_tools.h"
#include "mh_worker.h"
#include "policy_all.h"

#define MKFS_TIMEOUT_MS (15L * 60 * 1000) /* a huge sparse xfs can discard for a while */
#define MKFS_OUTPUT_MAX 4096

static const struct {
	const char *fstype, *name;
	enum rn_tool tool;
} mkfs_tools[] = {
    {"ext4", "mkfs.ext4", RN_MKFS_EXT4},
    {"xfs", "mkfs.xfs", RN_MKFS_XFS},
    {"btrfs", "mkfs.btrfs", RN_MKFS_BTRFS},
};

int mh_probe(int devfd, const char *want, struct rn_answer *sig, struct mh_res *r)
{
	struct rn_answer a;
	if (mh_tools_signature(devfd, &a, r) < 0)
		return -1;
	*sig = a;
	if (a.status == RN_SIG_BLANK)
		return MH_PROBE_BLANK;
	if (a.status == RN_SIG_AMBIVALENT)
		return mh_fail(r, MH_E_EXISTS, 0,
		               "device carries ambivalent signatures; not touched");
	if (a.pttype[0])
		return mh_fail(r, MH_E_EXISTS, 0,
		               "device carries a %s partition table; not touched", a.pttype);
	if (!a.type[0])
		return mh_fail(r, MH_E_EXISTS, 0,
		               "device carries an unidentified signature; not touched");
	if (strcmp(a.type, want) != 0)
		return mh_fail(r, MH_E_EXISTS, 0, "device already holds %s, not %s; not touched",
		               a.type, want);
	return MH_PROBE_MATCH;
}

/* Squash the tool's output into one printable line for the reason field. */
static void one_line(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = ' ';
}

/*
 * An image that holds no data reads as zeros everywhere, so mkfs.ext4 need not
 * zero anything in it: with assume_storage_prezeroed (e2fsprogs 1.47) it skips
 * zeroing the journal and the inode tables and marks the tables zeroed (so the
 * kernel's lazy init does not write them either), where otherwise it first
 * punches holes through the whole image and then allocates the whole journal.
 * A new 64 MiB volume then takes 384 KiB of disk instead of 4.4 MiB, a 64 GiB
 * one 4.7 MiB instead of 517 MiB (until its journal was written through). An older
 * mke2fs refuses the option before it writes anything: the format is made
 * again without it, and this process does not offer it again.
 */
#define PREZEROED "assume_storage_prezeroed=1"
static bool prezeroed_unknown;

/*
 * Adds PREZEROED to argv[first..*argc): to the last -E option (mke2fs reads
 * only the last), or as a new one. False, argv unchanged, when it cannot.
 */
static bool add_prezeroed(const char **argv, size_t first, size_t *argc, char *buf, size_t len)
{
	for (size_t i = *argc; i-- > first;) {
		if (strncmp(argv[i], "-E", 2) != 0)
			continue;
		if (argv[i][2] == '\0')
			return false; /* a value in the next argument: not the policy's form */
		if ((size_t)snprintf(buf, len, "%s,%s", argv[i], PREZEROED) >= len)
			return false;
		argv[i] = buf;
		return true;
	}
	argv[(*argc)++] = "-E" PREZEROED;
	return true;
}

static int run(size_t t, const char **argv, size_t argc, int img, const char *name, char *out,
               size_t outlen, int *status, struct mh_res *r)
{
	if (mh_tools_run(mkfs_tools[t].tool, argv, argc, img, out, outlen, MKFS_TIMEOUT_MS, status,
	                 r) < 0) {
		log_kv(LOG_LVL_WARN, "mkfs_failed", "tool", mkfs_tools[t].name, "image", name,
		       "reason", r->reason, NULL);
		return -1;
	}
	return 0;
}

int mh_mkfs(const char *fstype, char *const *args, size_t nargs, bool zeroed, int img,
            const char *name, struct mh_res *r)
{
	size_t t;
	for (t = 0; t < sizeof(mkfs_tools) / sizeof(mkfs_tools[0]); t++)
		if (strcmp(mkfs_tools[t].fstype, fstype) == 0)
			break;
	if (t == sizeof(mkfs_tools) / sizeof(mkfs_tools[0]))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "no mkfs for %s", fstype);
	if (nargs > POL_MKFS_ARGS_MAX)
		return mh_fail(r, MH_E_REFUSED, E2BIG, "too many mkfs options");

	const char *argv[4 + POL_MKFS_ARGS_MAX];
	char eopt[RN_ARG_LEN];
	size_t argc = 0;
	argv[argc++] = mkfs_tools[t].name;
	argv[argc++] = "-q";
	for (size_t i = 0; i < nargs; i++)
		argv[argc++] = args[i]; /* each one exactly an allowlist entry */
	const char *plain[4 + POL_MKFS_ARGS_MAX];
	size_t nplain = argc;
	memcpy(plain, argv, argc * sizeof(argv[0]));
	bool prezeroed = zeroed && mkfs_tools[t].tool == RN_MKFS_EXT4 && !prezeroed_unknown &&
	                 add_prezeroed(argv, 2, &argc, eopt, sizeof(eopt));
	/* The runner appends the image, RN_TOOL_TARGET. */

	char out[MKFS_OUTPUT_MAX];
	int status = 0;
	if (run(t, argv, argc, img, name, out, sizeof(out), &status, r) < 0)
		return -1;
	if (prezeroed && WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
	    strstr(out, "specified: " PREZEROED)) {
		log_kv(LOG_LVL_INFO, "mkfs_option_unknown", "tool", mkfs_tools[t].name, "option",
		       PREZEROED, NULL);
		prezeroed_unknown = true;
		if (run(t, plain, nplain, img, name, out, sizeof(out), &status, r) < 0)
			return -1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	one_line(out);
	log_kv(LOG_LVL_WARN, "mkfs_failed", "tool", mkfs_tools[t].name, "image", name, "output",
	       out, NULL);
	if (WIFSIGNALED(status))
		return mh_fail(r, MH_E_FAILED, 0, "%s killed by signal %d: %s", argv[0],
		               WTERMSIG(status), out);
	return mh_fail(r, MH_E_FAILED, 0, "%s exited with status %d: %s", argv[0],
	               WEXITSTATUS(status), out);
}

/*
 * Probe the volume; format it if, and only if, it is blank. The probe's
 * answer (MH_PROBE_MATCH: it held the file system already), or -1.
 *
 * An image that holds no data at all (SEEK_DATA finds none: a new sparse
 * image) reads as zeros everywhere, so it carries no signature: blank,
 * without a look. Any other image is looked at by the tools runner, in a
 * child of its own (mh_probe): this process parses none of the image's bytes.
 * The look reads the image file img, which is what the volume holds: the
 * device lfd, attached by this worker a moment ago, is a view of the whole
 * file, and its cache is flushed first so that it holds nothing the file does
 * not. arg keeps what it read of the file system's size, for the growing.
 * After mkfs the device's cache is flushed again, and the mount, which names
 * its file system type, is what checks the new file system.
 */
/* STAGE's mkfs options, checked against the policy before anything is touched. */
struct mkfs_args {
	char buf[MH_OPTS_MAX + POL_MKFS_ARGS_MAX + 1];
	char *v[POL_MKFS_ARGS_MAX];
	size_t n;
	/* What the look found, for growing it: MH_PROBE_MATCH, its size, the image's. */
	int probe;
	struct rn_answer sig;
	uint64_t image_bytes;
	bool ro;
};

static int format_if_blank(const struct mh_ctx *c, const struct mh_req_stage *q, int img, int lfd,
                           bool ro, void *arg, struct mh_res *r)
{
	struct mkfs_args *mk = arg;
	struct stat st;
	if (mh_loop_flush(lfd, r) < 0)
		return -1;
	if (fstat(img, &st) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "stat image: %s", strerror(errno));
	bool empty = mh_image_empty(img);
	mk->probe = empty ? MH_PROBE_BLANK : mh_probe(img, q->fs_type, &mk->sig, r);
	mk->image_bytes = (uint64_t)st.st_size;
	mk->ro = ro;
	if (mk->probe != MH_PROBE_BLANK)
		return mk->probe < 0 ? -1 : 0;
	if (ro)
		return mh_fail(r, MH_E_PRECONDITION, 0, "blank volume cannot be staged read-only");
	/*
	 * Safety: the image holds no data, or blkid found no signature of any
	 * kind in it, so no data is lost. mkfs writes the image file (see
	 * mh_mkfs.c); the loop device's cache may hold what was read before, so
	 * drop it.
	 */
	char name[MH_IMAGE_NAME_MAX];
	mh_image_name(q->volume_id, name, sizeof(name));
	mh_pause(c, "mkfs", q->volume_id); /* tests: the device attached, blank, unformatted */
	if (mh_mkfs(q->fs_type, mk->v, mk->n, empty, img, name, r) < 0 || mh_loop_flush(lfd, r) < 0)
		return -1;
	return 0;
}

/*
 * CSI: a volume restored or cloned larger than its source has the larger size
 * once staged. After a STAGE that mounted a file system the look found on a
 * bigger image, an EXPAND of it, the core's or this process's own. Best
 * effort: the mount stays even if growing fails (ext4 without
 * CAP_SYS_RESOURCE); the audit record says so and EXPAND can retry.
 */
static void grow_after_stage(const struct mh_ctx *c, const struct mh_msg *req,
                             const struct mkfs_args *mk, struct mh_audit *a)
{
	const struct mh_req_stage *q = &req->u.stage;
	struct mh_msg grow = {.type = MH_REQ_EXPAND, .id = req->id}, grown = {0};
	struct mh_audit ga = {0};
	struct mh_res why = {0};
	/* EXT4_IOC_RESIZE_FS needs CAP_SYS_RESOURCE even for a no-op: asked only if needed. */
	bool smaller =
	    strcmp(q->fs_type, "ext4") != 0 ||
	    (mk->sig.fs_block_size && mk->image_bytes / mk->sig.fs_block_size > mk->sig.fs_blocks);
	if (mk->probe != MH_PROBE_MATCH || mk->ro || !smaller)
		return;
	snprintf(grow.u.expand.volume_id, sizeof(grow.u.expand.volume_id), "%s", q->volume_id);
	snprintf(grow.u.expand.staging_path, sizeof(grow.u.expand.staging_path), "%s",
	         q->staging_path);
	snprintf(grow.u.expand.fs_type, sizeof(grow.u.expand.fs_type), "%s", q->fs_type);
	int rc = mh_relay_expand(c, &grow, &grown, &ga, &why);
	if (rc < 0) {
		log_kv(LOG_LVL_WARN, "grow_after_stage", "volume_id", q->volume_id, "reason",
		       why.reason, NULL);
		a->note = "staged; file system NOT grown to the volume's size (see log)";
	} else if (!c->core && !ga.note) { /* the core's EXPAND says nothing of what it did */
		a->note = "file system grown to the volume's size";
	}
}

/*
 * STAGE of a file system when the capable core mounts: the image file probed
 * and formatted here, if blank and attached nowhere, then the core's STAGE;
 * an existing file system on a bigger image (a larger restore or clone) then
 * grown by the core's EXPAND (grow_after_stage).
 */
static int stage_by_core(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                         struct mh_audit *a, struct mkfs_args *mk, struct mh_res *r)
{
	const struct mh_req_stage *q = &req->u.stage;
	struct stat st;
	struct mh_mount_opts o = {0};
	struct mh_msg look = *req, seen;
	/*
	 * Everything the core would refuse the request for, before the image is
	 * touched: the policy's checks here, then the core's (the path too, which
	 * the helper cannot see: a look only, nothing made). Read-only as the mount
	 * will be: asked, or "ro" among the mount options.
	 */
	int checked = mh_stage_check(c, q, &o, r);
	mk->ro = (o.sb & POL_SB_RO) != 0;
	mh_mount_opts_free(&o);
	look.type = MH_REQ_STAGE_CHECK;
	if (checked < 0 || mh_core_ask(&look, &seen, r) < 0)
		return -1;
	int img = mh_image_open(c, q->volume_id, mk->ro, &st, r);
	if (img < 0)
		return -1;
	int found = mh_core_attached(q->volume_id, r);
	mk->image_bytes = found < 0 ? 0 : (uint64_t)st.st_size;
	/* Attached: staged already (the core answers so), or busy; never formatted under it. */
	if (found == 0 && !mh_image_taken_raw(img)) {
		bool empty = mh_image_empty(img);
		mk->probe = empty ? MH_PROBE_BLANK : mh_probe(img, q->fs_type, &mk->sig, r);
		if (mk->probe == MH_PROBE_BLANK && mk->ro)
			mk->probe = mh_fail(r, MH_E_PRECONDITION, 0,
			                    "blank volume cannot be staged read-only");
		else if (mk->probe == MH_PROBE_BLANK) {
			char name[MH_IMAGE_NAME_MAX];
			mh_image_name(q->volume_id, name, sizeof(name));
			mh_pause(c, "mkfs", q->volume_id); /* tests: blank, unformatted */
			if (mh_mkfs(q->fs_type, mk->v, mk->n, empty, img, name, r) < 0)
				mk->probe = -1;
		}
	}
	close(img);
	if (found < 0 || mk->probe < 0 || mh_relay(c, req, ans, a, r) < 0)
		return -1;
	if (found == 0) /* a device attached before: staged already, nothing looked at */
		grow_after_stage(c, req, mk, a);
	return 0;
}

/*
 * Online discard unless asked otherwise: what a pod deletes inside an ext4 or
 * xfs volume is given back to the data directory at the file system's next
 * journal commit (the loop device punches it out of the image). Not added
 * where the mount options say discard or nodiscard themselves, where the
 * policy does not allow it, or to a read-only mount (asked, or "ro" among the
 * options); btrfs discards by itself (asynchronously, kernel 6.2 on) on a
 * device that can, as a loop device can.
 */
static void discard_by_default(const struct mh_ctx *c, struct mh_req_stage *q)
{
	char *opts = q->mount_flags;
	size_t len = strlen(opts);
	if ((q->flags & MH_F_BLOCK) || q->readonly ||
	    (strcmp(q->fs_type, "ext4") != 0 && strcmp(q->fs_type, "xfs") != 0) ||
	    pol_mount_options_check(c->pol, "discard", NULL, 0) < 0 ||
	    len + sizeof(",discard") > sizeof(q->mount_flags))
		return;
	for (const char *s = opts; *s; s += strcspn(s, ","), s += *s == ',') {
		size_t n = strcspn(s, ",=");
		if ((n == 7 && strncmp(s, "discard", n) == 0) ||
		    (n == 9 && strncmp(s, "nodiscard", n) == 0) ||
		    (n == 2 && strncmp(s, "ro", n) == 0))
			return;
	}
	snprintf(opts + len, sizeof(q->mount_flags) - len, "%sdiscard", len ? "," : "");
}

int mh_answer_stage(const struct mh_ctx *c, const struct mh_msg *in, struct mh_msg *ans,
                    struct mh_audit *a, struct mh_res *r)
{
	struct mh_msg staged = *in, *req = &staged;
	const struct mh_req_stage *q = &req->u.stage;
	struct mkfs_args mk = {.probe = MH_PROBE_MATCH};
	(void)ans;
	discard_by_default(c, &staged.u.stage);
	if (!(q->flags & MH_F_BLOCK)) {
		char why[200];
		int n = pol_mkfs_options_check(c->pol, q->fs_type, q->mkfs_options, mk.buf,
		                               sizeof(mk.buf), mk.v, POL_MKFS_ARGS_MAX, why,
		                               sizeof(why));
		if (n < 0)
			return mh_fail(r, MH_E_REFUSED, EPERM, "%s", why);
		mk.n = (size_t)n;
	}
	if (c->core && !(q->flags & MH_F_BLOCK))
		return stage_by_core(c, req, ans, a, &mk, r);
	if (c->core)
		return mh_relay(c, req, ans, a, r);
	mk.probe = MH_PROBE_BLANK; /* an idempotent STAGE runs no prep: nothing to grow */
	if (mh_stage_volume(c, req, a, format_if_blank, &mk, r) < 0)
		return -1;
	if (!(q->flags & MH_F_BLOCK))
		grow_after_stage(c, req, &mk, a);
	return 0;
}

int mh_loop_flush(int loop_fd, struct mh_res *r)
{
	/* Needs CAP_SYS_ADMIN: the helper has it, the mkfs child does not. */
	if (ioctl(loop_fd, BLKFLSBUF, 0) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "BLKFLSBUF: %s", strerror(errno));
	return 0;
}

bool mh_image_empty(int fd)
{
	return lseek(fd, 0, SEEK_DATA) < 0 && errno == ENXIO;
}
