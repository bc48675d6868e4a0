/*
 * The capability tables of the helper and its tree runner as the docs show
 * them (docs/helper.md), with why some capabilities are dropped. Pure code,
 * linked only by what prints tables (sepcsi-privileges, sepcsi-privtables);
 * never by the processes that hold the capabilities.
 */
#include "pol_caps.h"
#include "pol_md.h"

#include <stdio.h>

/* Capabilities the helper drops although one might expect it to need them. */
static const struct {
	const char *caps, *kept, *why;
} helper_dropped[] = {
    {"CAP_SETPCAP", "during confinement only",
     "securebits and the bounding set, both set by pol_caps_confine_helper(), which drops it "
     "in the same call"},
    {"CAP_FSETID", "no",
     "only copies keep set-group-ID bits of other groups, and the tree runner makes them; the "
     "helper sets a mount group's setgid bit while the group is still its own"},
    {"CAP_FOWNER", "no",
     "every directory whose entries the helper changes is root's: the base and each "
     "directory on the way (checked), its work and trash areas; a mount group is set only on "
     "a root directory owned by root; a volume's contents, owned by its pods, are the tree "
     "runner's"},
    {"CAP_DAC_OVERRIDE", "only with base_dirs",
     "without directory volumes everything the helper opens is owned by root, which passes "
     "owner checks without them: the data dir (0700, checked at start), its own "
     "/dev/loop-control and /dev/loopN (made by root), kubelet's directories, a fresh volume "
     "root; a directory on a path the helper walks that is not owned by root is refused, not "
     "overridden (fail closed), with or without them"},
    {"CAP_DAC_READ_SEARCH", "no",
     "the tree runner's CAP_DAC_OVERRIDE covers reading and searching a volume's tree; hard "
     "links are copied by name (linkat without AT_EMPTY_PATH)"},
    {"CAP_SYS_RAWIO", "no",
     "the loop ioctls (LOOP_CTL_GET_FREE, LOOP_CTL_ADD, LOOP_CONFIGURE, LOOP_GET_STATUS64, "
     "LOOP_CLR_FD, LOOP_SET_CAPACITY) and BLKROGET need only an open fd"},
    {"CAP_KILL", "no", "it signals only its own workers, through pidfds (same uid)"},
    {"CAP_NET_*", "no", "no network at all (the seccomp filter has no socket())"},
    {"every other", "no", "nothing the helper does needs them"},
};

void pol_caps_print_tree(FILE *out)
{
	size_t n;
	const struct pol_cap_entry *t = pol_caps_tree_table(&n);
	pol_md_head(out, 2, (const char *[]){"capability", "why"});
	for (size_t i = 0; i < n; i++)
		pol_md_row(out, 2, (const char *[]){t[i].name, t[i].why});
}

void pol_caps_print_helper(FILE *out)
{
	size_t n;
	const struct pol_cap_entry *h = pol_caps_helper_table(&n);
	pol_md_head(out, 3, (const char *[]){"capability", "kept", "why"});
	for (size_t i = 0; i < n; i++)
		pol_md_row(out, 3,
		           (const char *[]){h[i].name,
		                            h[i].optional == POL_CAP_DIRS ? "with base_dirs"
		                            : h[i].optional               ? "optional"
		                                                          : "yes",
		                            h[i].why});
	for (size_t i = 0; i < sizeof(helper_dropped) / sizeof(helper_dropped[0]); i++)
		pol_md_row(out, 3,
		           (const char *[]){helper_dropped[i].caps, helper_dropped[i].kept,
		                            helper_dropped[i].why});
}
