/*
 * Capability confinement of the privileged helper. The set it keeps is the
 * table in caps.c (one source of truth for the code and docs/helper.md).
 */
#ifndef SEPCSI_POL_CAPS_H
#define SEPCSI_POL_CAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One capability the helper keeps, and why. */
struct pol_cap_entry {
	unsigned int cap; /* CAP_* */
	const char *name;
	const char *why;
	/*
	 * 0: required, all must be there or no start. POL_CAP_OPTIONAL: kept
	 * only if the helper was started with it (the supervisor's bounding set
	 * decides); without it, only the operation named in why fails, with a
	 * reason. POL_CAP_DIRS: required, but only when the policy names base
	 * directories (directory volumes); dropped otherwise.
	 */
	int optional;
};

enum { POL_CAP_OPTIONAL = 1, POL_CAP_DIRS = 2 };

/* The kept capabilities; *n receives the count. */
const struct pol_cap_entry *pol_caps_helper_table(size_t *n);

/* The capability mask (bit i = CAP i) of the required entries. */
uint64_t pol_caps_helper_mask(void);

/* The mask of the optional entries. */
uint64_t pol_caps_helper_optional_mask(void);

/* The mask of the entries kept only with directory volumes. */
uint64_t pol_caps_helper_dirs_mask(void);
/* What the helper keeps beside a capable core: nothing (pol_caps_confine_helper_core). */
uint64_t pol_caps_helper_core_mask(void);

/* The name of capability cap ("CAP_SYS_ADMIN") in buf (len bytes), which is returned. */
const char *pol_caps_name(unsigned int cap, char *buf, size_t len);

/*
 * Print the helper's capabilities as a Markdown table (capability, kept, why):
 * the kept ones, then the dropped ones whose absence needs a reason.
 */
void pol_caps_print_helper(FILE *out);

/*
 * Confine the calling (single-threaded, uid 0, fully privileged) process to
 * the helper's capability set, in this order:
 *   1. lock securebits (NOROOT, NO_SETUID_FIXUP, KEEP_CAPS off, NO_CAP_AMBIENT_RAISE;
 *      all locked) so nothing it execs gains a capability for being uid 0;
 *   2. with libcap-ng: bounding set, effective and permitted = the table
 *      (the optional entries only if permitted at the start, the POL_CAP_DIRS
 *      ones only with directories: the policy names base directories), inheritable
 *      and ambient empty;
 *   3. PR_SET_NO_NEW_PRIVS;
 *   4. read everything back and compare.
 * Returns 0, or -1 with errno set (the caller must then exit: fail closed).
 */
int pol_caps_confine_helper(bool directories);
/*
 * The same with the sets given (caps_confine.c, which links no table): want,
 * plus those of optional the process holds permitted now; those of carried
 * among them also inheritable and ambient, for an exec that follows.
 */
int pol_caps_confine(uint64_t want, uint64_t optional, uint64_t carried);
/*
 * The capable core's, by its starter before the exec (mh_relay.c): the
 * helper's set, every one of them carried across the exec (inheritable and
 * ambient; the core, which cannot exec, empties both and checks the rest
 * itself). 0, or -1 with errno.
 */
int pol_caps_confine_core(void);
/*
 * The helper with a capable core (--core-fd), which mounts, unmounts, freezes,
 * grows, opens loop devices and lists mounts for it: no capability at all.
 * Same contract.
 */
int pol_caps_confine_helper_core(void);

/*
 * The same for the helper's tool runner and the tools it execs: securebits
 * locked as the helper's, every capability set (bounding too) empty,
 * no_new_privs, verified. 0, or -1 with errno.
 */
int pol_caps_confine_tools(void);

/*
 * The same for the tree runner (sepcsi-runner --tree), which keeps exactly
 * the capabilities of pol_caps_tree_mask() across its exec: in its bounding,
 * effective, permitted, inheritable and ambient sets (with SECBIT_NOROOT, an
 * exec by uid 0 keeps only the ambient ones); everything else as for the
 * tools. 0, or -1 with errno.
 */
int pol_caps_confine_tree(void);

/* The tree runner's capabilities: the table (*n entries), a mask, a Markdown table. */
const struct pol_cap_entry *pol_caps_tree_table(size_t *n);
uint64_t pol_caps_tree_mask(void);
void pol_caps_print_tree(FILE *out);

#endif
