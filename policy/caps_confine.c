/*
 * The confinement itself (pol_caps.h, pol_caps_confine): securebits, exactly
 * the capabilities asked, no_new_privs, and the kernel's answer read back.
 * Apart from the tables (caps.c) so that a process told its set, the capable
 * core (from its compiled policy), links no other process's table.
 *
 * Runs once, as uid 0 with full capabilities, before the seccomp filter; any
 * failure is fatal for the caller.
 */
#include "pol_caps.h"

#include <cap-ng.h>
#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HELPER_SECUREBITS                                                                          \
	(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |                           \
	 SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |   \
	 SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

/*
 * The calling thread's effective, permitted and inheritable sets, from
 * capget(2): no /proc, which a view may no longer hold when it confines
 * itself (the helper's, beside a core).
 */
static int caps_now(uint64_t *eff, uint64_t *prm, uint64_t *inh)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) < 0)
		return -1;
	*eff = d[0].effective | (uint64_t)d[1].effective << 32;
	*prm = d[0].permitted | (uint64_t)d[1].permitted << 32;
	*inh = d[0].inheritable | (uint64_t)d[1].inheritable << 32;
	return 0;
}

/*
 * Read the result back from the kernel; true only if it is exactly what we
 * asked: want in the bounding, effective and permitted sets, carried (the
 * capabilities kept across exec) in the inheritable and ambient sets.
 */
static bool confinement_verified(uint64_t want, uint64_t carried)
{
	uint64_t eff, prm, inh;
	if (prctl(PR_GET_SECUREBITS, 0, 0, 0, 0) != HELPER_SECUREBITS)
		return false;
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return false;
	if (caps_now(&eff, &prm, &inh) < 0 || eff != want || prm != want || inh != carried)
		return false;
	for (unsigned int cap = 0; cap < 64; cap++) {
		int in_bset = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
		if (in_bset < 0)
			break; /* past the kernel's last capability */
		bool keep = (want >> cap) & 1;
		if ((in_bset == 1) != keep)
			return false;
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) !=
		    (int)((carried >> cap) & 1))
			return false;
	}
	return true;
}

/*
 * Securebits, then exactly the capabilities in want, of which carried (a
 * subset) also inheritable and ambient, so that they survive the exec that
 * follows; then no_new_privs, then verify.
 */
static int confine(uint64_t want, uint64_t carried)
{
	/*
	 * 1. Securebits first: setting them needs CAP_SETPCAP, which step 2 drops.
	 * NOROOT: exec by uid 0 no longer fills the permitted set. NO_SETUID_FIXUP:
	 * uid changes do not touch capabilities. KEEP_CAPS stays off. The _LOCKED
	 * bits make all of it irreversible for us and every descendant.
	 */
	unsigned long bits = HELPER_SECUREBITS;
	if (carried) /* ambient raising is locked out only once it is done (step 2) */
		bits &= ~(unsigned long)(SECBIT_NO_CAP_AMBIENT_RAISE |
		                         SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED);
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		return -1;
	/*
	 * 2. Bounding, effective and permitted = want; inheritable and ambient
	 * empty. capng_apply drops the bounding set first (while CAP_SETPCAP is
	 * still effective), then calls capset.
	 */
	capng_clear(CAPNG_SELECT_ALL);
	for (unsigned int cap = 0; cap < 64; cap++) {
		if (!((want >> cap) & 1))
			continue;
		capng_type_t sets = CAPNG_EFFECTIVE | CAPNG_PERMITTED | CAPNG_BOUNDING_SET;
		if (capng_update(CAPNG_ADD, sets | ((carried >> cap) & 1 ? CAPNG_INHERITABLE : 0),
		                 cap) != 0) {
			errno = EINVAL;
			return -1;
		}
	}
	/* Carried capabilities: CAP_SETPCAP is kept (not in the bounding set) for step 2b. */
	if (carried &&
	    capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED, CAP_SETPCAP) != 0) {
		errno = EINVAL;
		return -1;
	}
	if (capng_apply(CAPNG_SELECT_ALL) != 0) {
		errno = EPERM;
		return -1;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -1;
	/* 2b. The carried ones made ambient, then ambient raising locked, then CAP_SETPCAP gone. */
	if (carried) {
		for (unsigned int cap = 0; cap < 64; cap++)
			if ((carried >> cap) & 1 &&
			    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
				return -1;
		if (prctl(PR_SET_SECUREBITS, HELPER_SECUREBITS, 0, 0, 0) < 0)
			return -1;
		if (capng_update(CAPNG_DROP, CAPNG_EFFECTIVE | CAPNG_PERMITTED, CAP_SETPCAP) != 0 ||
		    capng_apply(CAPNG_SELECT_CAPS) != 0) {
			errno = EPERM;
			return -1;
		}
	}

	/* 3. No exec can gain privilege again (set-uid bits, file capabilities). */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;

	/* 4. Trust the kernel's answer, not our intent. */
	if (!confinement_verified(want, carried)) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

int pol_caps_confine(uint64_t want, uint64_t optional, uint64_t carried)
{
	uint64_t eff, prm, inh;
	if (caps_now(&eff, &prm, &inh) < 0) {
		errno = EPERM;
		return -1;
	}
	want |= optional & prm;
	return confine(want, carried & want);
}
