/*
 * The supervisor's own privilege, and the primitives its rpcd child uses to
 * shed all of it. Runs in the supervisor as root, once at start (trim), and in
 * the forked rpcd child before exec (drop/clear/read). A trim that does not
 * leave exactly the intended sets is fatal: the supervisor refuses to run.
 *
 * The supervisor keeps the capabilities below in its permitted and bounding
 * sets and nothing else. The bounding set is inherited by every descendant, so
 * this list is also the most the helper (exec'd as uid 0) can ever hold; the
 * helper then confines itself further. The supervisor also sets no_new_privs.
 * That does not stop the helper's uid-0 exec from receiving capabilities: the
 * kernel only refuses an exec under no_new_privs that would gain capabilities
 * beyond the caller's permitted set, and the helper's new permitted set (the
 * bounding set) equals ours. It does stop any setuid or file-capability
 * program anywhere below us from gaining anything.
 *
 * CAP_SYS_ADMIN is kept permitted but not effective: the supervisor never
 * mounts anything; it holds the capability only so the helper can receive it.
 */
#include "sup_caps.h"

#include "log.h"
#include "pol_caps.h"

#include <cap-ng.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* What the supervisor uses itself; the helper's are added from policy/caps.c. */
static const struct sup_kept_cap own[] = {
    {CAP_CHOWN, true,
     "supervisor: give the state and endpoint directories to the rpcd user; "
     "helper: group of a volume's root directory (VOLUME_MOUNT_GROUP)",
     false},
    {CAP_DAC_OVERRIDE, true,
     "supervisor: open directories the rpcd user owns (0700) to re-prepare them", false},
    {CAP_FOWNER, true, "supervisor: chmod directories the rpcd user owns", false},
    {CAP_KILL, true,
     "supervisor: signal rpcd, which runs under another uid (SIGTERM to stop, "
     "SIGKILL on timeout or protocol violation)",
     false},
    {CAP_SETGID, true, "rpcd child: setgroups() and setresgid() to the rpcd gid", false},
    {CAP_SETUID, true, "rpcd child: setresuid() to the rpcd uid", false},
    {CAP_SETPCAP, true,
     "supervisor: trim its bounding set; rpcd child: empty it; helper: trim its own", false},
};

#define NOWN     (sizeof(own) / sizeof(own[0]))
#define MAX_KEPT 64

/*
 * The kept table: the supervisor's own, then every capability of the
 * helper's table (pol_caps_helper_table) and of its tree runner's
 * (pol_caps_tree_table) it does not use itself, held permitted only, so that
 * the helper can receive it (and hand the tree runner's on, at its start).
 * One source for all.
 */
static struct sup_kept_cap kept[MAX_KEPT];
static size_t nkept;

static void add_helpers(const struct pol_cap_entry *h, size_t n, bool tree)
{
	for (size_t i = 0; i < n && nkept < MAX_KEPT; i++) {
		bool have = false;
		for (size_t j = 0; j < nkept; j++)
			have = have || kept[j].cap == h[i].cap;
		if (!have)
			kept[nkept++] = (struct sup_kept_cap){
			    h[i].cap, false,
			    tree ? "the helper's tree runner only, and only with directory volumes "
			           "(see the helper's tables)"
			    : h[i].optional == POL_CAP_DIRS
			        ? "helper only, and only with directory volumes (see the helper's "
			          "table)"
			    : h[i].optional
			        ? "helper only, optional (see the helper's table): "
			          "without it only the operation it serves fails, with a "
			          "reason"
			        : "helper only (see the helper's table)",
			    h[i].optional == POL_CAP_OPTIONAL};
	}
}

static void build_table(void)
{
	if (nkept)
		return;
	size_t n, nt;
	const struct pol_cap_entry *h = pol_caps_helper_table(&n), *t = pol_caps_tree_table(&nt);
	for (size_t i = 0; i < NOWN; i++)
		kept[nkept++] = own[i];
	add_helpers(h, n, false);
	add_helpers(t, nt, true);
}

/* Optional capabilities found present at trim time (bit mask). */
static uint64_t optional_present;

static bool is_kept(size_t i)
{
	return !kept[i].optional || (optional_present & (UINT64_C(1) << kept[i].cap));
}

uint64_t sup_caps_kept_permitted(void)
{
	uint64_t m = 0;
	build_table();
	for (size_t i = 0; i < nkept; i++)
		if (is_kept(i))
			m |= UINT64_C(1) << kept[i].cap;
	return m;
}

uint64_t sup_caps_kept_effective(void)
{
	uint64_t m = 0;
	build_table();
	for (size_t i = 0; i < nkept; i++)
		if (kept[i].effective && is_kept(i))
			m |= UINT64_C(1) << kept[i].cap;
	return m;
}

const struct sup_kept_cap *sup_caps_table(size_t *n)
{
	build_table();
	*n = nkept;
	return kept;
}

/*
 * Read from the kernel directly, not through libcap-ng: capng_get_caps_process()
 * takes the bounding and ambient sets from /proc/<tid>/status, which names
 * another process when the supervisor runs in a PID namespace with the host's
 * /proc (PID 1 of a container); the supervisor must check its own sets.
 */
int sup_caps_read(struct sup_capsets *out)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];

	memset(out, 0, sizeof(*out));
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) < 0)
		return -1;
	out->effective = d[0].effective | (uint64_t)d[1].effective << 32;
	out->permitted = d[0].permitted | (uint64_t)d[1].permitted << 32;
	out->inheritable = d[0].inheritable | (uint64_t)d[1].inheritable << 32;
	/* The kernel answers EINVAL past its last capability: that ends the scan. */
	for (unsigned c = 0; c < 64; c++) {
		int r = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
		if (r < 0)
			break;
		if (r == 1)
			out->bounding |= UINT64_C(1) << c;
	}
	for (unsigned c = 0; c < 64; c++) {
		int r = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0);
		if (r < 0)
			break;
		if (r == 1)
			out->ambient |= UINT64_C(1) << c;
	}
	return 0;
}

int sup_caps_drop_bounding(void)
{
	capng_clear(CAPNG_SELECT_BOUNDS);
	return capng_apply(CAPNG_SELECT_BOUNDS) == 0 ? 0 : -1;
}

int sup_caps_clear(void)
{
	capng_clear(CAPNG_SELECT_CAPS);
	return capng_apply(CAPNG_SELECT_CAPS) == 0 ? 0 : -1;
}

static const char *cap_name(unsigned c)
{
	const char *n = capng_capability_to_name(c);
	return n ? n : "?";
}

/* Name the first capability in mask, for an error message. */
static const char *first_cap(uint64_t mask)
{
	for (unsigned c = 0; c < 64; c++)
		if (mask & (UINT64_C(1) << c))
			return cap_name(c);
	return "none";
}

int sup_caps_trim(char *err, size_t errlen)
{
	struct sup_capsets cs;

	if (sup_caps_read(&cs) < 0) {
		snprintf(err, errlen, "cannot read capabilities: %s", strerror(errno));
		return -1;
	}
	build_table();
	optional_present = 0;
	for (size_t i = 0; i < nkept; i++) {
		uint64_t bit = UINT64_C(1) << kept[i].cap;
		if (kept[i].optional && (cs.permitted & cs.bounding & bit))
			optional_present |= bit;
	}
	const uint64_t want_p = sup_caps_kept_permitted();
	const uint64_t want_e = sup_caps_kept_effective();
	uint64_t missing = want_p & ~(cs.permitted & cs.bounding);
	if (missing) {
		snprintf(err, errlen,
		         "capability %s is missing (sepcsi needs a privileged container or a "
		         "root service with CAP_SYS_ADMIN)",
		         first_cap(missing));
		return -1;
	}

	capng_clear(CAPNG_SELECT_ALL);
	for (size_t i = 0; i < nkept; i++) {
		if (!is_kept(i))
			continue;
		capng_type_t t = CAPNG_PERMITTED | CAPNG_BOUNDING_SET;
		if (kept[i].effective)
			t |= CAPNG_EFFECTIVE;
		if (capng_update(CAPNG_ADD, t, kept[i].cap) < 0) {
			snprintf(err, errlen, "capng_update(%s) failed", cap_name(kept[i].cap));
			return -1;
		}
	}
	/* Bounding set, then effective/permitted/inheritable, then ambient. */
	if (capng_apply(CAPNG_SELECT_ALL) != 0) {
		snprintf(err, errlen, "cannot trim capabilities (capng_apply): %s",
		         strerror(errno));
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(err, errlen, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
		return -1;
	}

	/* Trust the kernel's answer, not the library's return code. */
	if (sup_caps_read(&cs) < 0 || cs.effective != want_e || cs.permitted != want_p ||
	    cs.inheritable != 0 || cs.bounding != want_p || cs.ambient != 0 ||
	    prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
		snprintf(err, errlen,
		         "capabilities after trimming are not as intended: eff=%016llx "
		         "prm=%016llx inh=%016llx bnd=%016llx amb=%016llx",
		         (unsigned long long)cs.effective, (unsigned long long)cs.permitted,
		         (unsigned long long)cs.inheritable, (unsigned long long)cs.bounding,
		         (unsigned long long)cs.ambient);
		return -1;
	}
	for (size_t i = 0; i < nkept; i++)
		log_kv(is_kept(i) ? LOG_LVL_DEBUG : LOG_LVL_WARN,
		       is_kept(i) ? "cap_kept" : "cap_unavailable", "cap", cap_name(kept[i].cap),
		       "effective", kept[i].effective ? "yes" : "no", "why", kept[i].why, NULL);
	return 0;
}
