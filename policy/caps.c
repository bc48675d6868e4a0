/*
 * Capability confinement of sepcsi-mounthelper (see pol_caps.h).
 *
 * Runs once in the helper, as uid 0 with full capabilities, before the
 * seccomp filter is installed. Any failure is fatal for the caller: a helper
 * that cannot prove it dropped what it should must not serve a request.
 *
 * Why each capability is kept or dropped. The helper keeps exactly one:
 *
 *   capability       | kept? | why
 *   -----------------+-------+------------------------------------------------
 *   CAP_SYS_ADMIN    | yes   | fsopen/fsconfig(CMD_CREATE)/fsmount, move_mount,
 *                    |       | open_tree(OPEN_TREE_CLONE), mount_setattr and
 *                    |       | umount2 all require it in the initial user ns.
 *   CAP_SETPCAP      | no    | only needed to set securebits and shrink the
 *                    |       | bounding set, both done here before it is dropped.
 *   CAP_DAC_OVERRIDE | no    | everything the helper opens is owned by root (uid
 *   CAP_DAC_READ_... |       | 0 passes owner checks without it): the data dir
 *   CAP_FOWNER       |       | (mode 0700, checked at start), /dev/loop-control
 *                    |       | and /dev/loopN (root:disk 0660), kubelet's
 *                    |       | directories. A directory not owned by root is
 *                    |       | refused rather than overridden (fail closed).
 *   CAP_MKNOD        | no    | no device node is created; loop nodes come from
 *                    |       | devtmpfs.
 *   CAP_SYS_RAWIO    | no    | loop ioctls (LOOP_CTL_GET_FREE, LOOP_CONFIGURE,
 *                    |       | LOOP_GET_STATUS64, LOOP_CLR_FD) and the blkid
 *                    |       | probe need no capability beyond an open device.
 *   CAP_CHOWN        | no    | the helper never changes ownership (kubelet
 *                    |       | applies fsGroup itself).
 *   CAP_KILL         | no    | it only signals its own mkfs child (same uid).
 *   CAP_NET_*        | no    | no network at all (seccomp denies socket()).
 *   all others       | no    | nothing the helper does needs them.
 *
 * The mkfs children it execs get none: with SECBIT_NOROOT locked, exec by uid
 * 0 grants no file-less capabilities, the inheritable and ambient sets are
 * empty, and no_new_privs stops set-uid and file capabilities. The process test
 * (test_seccomp, "exec gets no capabilities") checks this on a real exec.
 */
#include "pol_caps.h"

#include <cap-ng.h>
#include <errno.h>
#include <linux/securebits.h>
#include <stdbool.h>
#include <sys/prctl.h>

static const struct pol_cap_entry helper_caps[] = {
    {CAP_SYS_ADMIN, "CAP_SYS_ADMIN",
     "mount API (fsopen..move_mount, open_tree clone, mount_setattr) and umount2"},
};

#define HELPER_SECUREBITS                                                                          \
	(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |                           \
	 SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |   \
	 SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

const struct pol_cap_entry *pol_caps_helper_table(size_t *n)
{
	*n = sizeof(helper_caps) / sizeof(helper_caps[0]);
	return helper_caps;
}

uint64_t pol_caps_helper_mask(void)
{
	uint64_t m = 0;
	for (size_t i = 0; i < sizeof(helper_caps) / sizeof(helper_caps[0]); i++)
		m |= 1ULL << helper_caps[i].cap;
	return m;
}

/* Read the result back from the kernel; true only if it is exactly what we asked. */
static bool confinement_verified(void)
{
	uint64_t want = pol_caps_helper_mask();

	if (prctl(PR_GET_SECUREBITS, 0, 0, 0, 0) != HELPER_SECUREBITS)
		return false;
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return false;
	capng_clear(CAPNG_SELECT_BOTH);
	if (capng_get_caps_process() != 0)
		return false;
	for (unsigned int cap = 0; cap < 64; cap++) {
		int in_bset = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
		if (in_bset < 0)
			break; /* past the kernel's last capability */
		bool keep = (want >> cap) & 1;
		if ((in_bset == 1) != keep)
			return false;
		if (capng_have_capability(CAPNG_EFFECTIVE, cap) != keep ||
		    capng_have_capability(CAPNG_PERMITTED, cap) != keep ||
		    capng_have_capability(CAPNG_INHERITABLE, cap))
			return false;
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) != 0)
			return false;
	}
	return true;
}

int pol_caps_confine_helper(void)
{
	/*
	 * 1. Securebits first: setting them needs CAP_SETPCAP, which step 2 drops.
	 * NOROOT: exec by uid 0 no longer fills the permitted set. NO_SETUID_FIXUP:
	 * uid changes do not touch capabilities. KEEP_CAPS stays off. The _LOCKED
	 * bits make all of it irreversible for us and every descendant.
	 */
	if (prctl(PR_SET_SECUREBITS, HELPER_SECUREBITS, 0, 0, 0) < 0)
		return -1;

	/*
	 * 2. Bounding, effective and permitted = the table; inheritable and ambient
	 * empty. capng_apply drops the bounding set first (while CAP_SETPCAP is
	 * still effective), then calls capset.
	 */
	capng_clear(CAPNG_SELECT_ALL);
	for (size_t i = 0; i < sizeof(helper_caps) / sizeof(helper_caps[0]); i++) {
		if (capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED | CAPNG_BOUNDING_SET,
		                 helper_caps[i].cap) != 0) {
			errno = EINVAL;
			return -1;
		}
	}
	if (capng_apply(CAPNG_SELECT_ALL) != 0) {
		errno = EPERM;
		return -1;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -1;

	/* 3. No exec can gain privilege again (set-uid bits, file capabilities). */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;

	/* 4. Trust the kernel's answer, not our intent. */
	if (!confinement_verified()) {
		errno = EPERM;
		return -1;
	}
	return 0;
}
