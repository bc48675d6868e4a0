/*
 * Capability confinement of sepcsi-mounthelper and its two runners (see
 * pol_caps.h): their tables, and what each confines itself to, with
 * caps_confine.c's pol_caps_confine.
 *
 * Runs once in the helper, as uid 0 with full capabilities, before the
 * seccomp filter is installed; and in each runner's child before its exec. Any failure is fatal for
 * the caller: a helper that cannot prove it dropped what it should must not serve a request.
 *
 * Why each capability is kept: helper_caps[] below; why some are dropped:
 * helper_dropped[] in caps_print.c, which prints both into docs/helper.md
 * (pol_caps_print_helper; linked only by what prints tables).
 *
 * The helper itself execs nothing; its tool runner (pol_caps_confine_tools)
 * empties every set and the mkfs tools it execs get none: with SECBIT_NOROOT
 * locked, exec by uid 0 grants no file-less capabilities, the inheritable and
 * ambient sets are empty, and no_new_privs stops set-uid and file
 * capabilities. The process test (test_seccomp, "exec gets no capabilities")
 * checks this on a real exec. The tree runner (pol_caps_confine_tree) is the
 * one exec that keeps capabilities: exactly tree_caps[], made inheritable and
 * ambient before its exec, which is all an exec under SECBIT_NOROOT keeps;
 * test_seccomp's tree exec test checks that too.
 */
#include "pol_caps.h"

#include <cap-ng.h>
#include <stdbool.h>
#include <stdio.h>

static const struct pol_cap_entry helper_caps[] = {
    {CAP_SYS_ADMIN, "CAP_SYS_ADMIN",
     "mount API (fsopen, fsconfig CMD_CREATE, fsmount, move_mount, open_tree OPEN_TREE_CLONE) "
     "and umount2, all in the initial user namespace; its own view of the file system at "
     "start (unshare, pivot_root); FIFREEZE/FITHAW "
     "(consistent snapshots); XFS_IOC_FSGROWFSDATA, BTRFS_IOC_RESIZE (EXPAND); BLKFLSBUF; "
     "BLKROSET (a read-only raw block device, read-only at the block layer)",
     0},
    {CAP_CHOWN, "CAP_CHOWN",
     "MH_F_MOUNT_GROUP: fchown of a new volume root to the pod's group, which the helper is "
     "not in",
     0},
    {CAP_MKNOD, "CAP_MKNOD",
     "the helper's own /dev/loopN nodes in its private /dev (its view of the file system "
     "holds no host /dev); the seccomp filter allows mknodat of loop block devices only",
     0},
    {CAP_SYS_RESOURCE, "CAP_SYS_RESOURCE",
     "EXT4_IOC_RESIZE_FS (EXPAND of ext4), checked in ext4_resize_begin(); kept if the helper "
     "starts with it (the supervisor's bounding set decides); without it only an ext4 EXPAND "
     "fails, with a reason",
     1},
    {CAP_DAC_OVERRIDE, "CAP_DAC_OVERRIDE",
     "directory volumes only: open, mark and move (delete, archive, a restore into place) a "
     "volume's directory, whatever owner and mode its pods or its copy gave it (moving a "
     "directory to another parent needs write access to it); what lies inside is walked by "
     "the tree runner, not the helper",
     POL_CAP_DIRS},
};

/*
 * The tree runner's (sepcsi-runner --tree, runner/tree.c): it empties and
 * copies a directory volume's tree, whose files belong to the pods' users,
 * with any mode; it holds these and nothing else (no CAP_SYS_ADMIN: it cannot
 * mount, unmount, or read or write the helper's trusted.* marks).
 */
static const struct pol_cap_entry tree_caps[] = {
    {CAP_DAC_OVERRIDE, "CAP_DAC_OVERRIDE",
     "read, search and write the directories and files of a volume's tree whatever their "
     "mode; every lookup stays beneath the directory fd the helper passed (openat2: no "
     "symlink, no mount crossed)",
     POL_CAP_DIRS},
    {CAP_FOWNER, "CAP_FOWNER",
     "remove entries of sticky directories the pods made; give copied files their owner's "
     "mode, times and extended attributes",
     POL_CAP_DIRS},
    {CAP_FSETID, "CAP_FSETID",
     "a copied file or directory keeps its set-group-ID bit when its group is not root's",
     POL_CAP_DIRS},
    {CAP_CHOWN, "CAP_CHOWN", "a copied file, directory or symlink keeps its owner and group",
     POL_CAP_DIRS},
};

#define NCAPS (sizeof(helper_caps) / sizeof(helper_caps[0]))

const struct pol_cap_entry *pol_caps_helper_table(size_t *n)
{
	*n = sizeof(helper_caps) / sizeof(helper_caps[0]);
	return helper_caps;
}

static uint64_t mask_of(int optional)
{
	uint64_t m = 0;
	for (size_t i = 0; i < NCAPS; i++)
		if (helper_caps[i].optional == optional)
			m |= 1ULL << helper_caps[i].cap;
	return m;
}

uint64_t pol_caps_helper_mask(void)
{
	return mask_of(0);
}

uint64_t pol_caps_helper_optional_mask(void)
{
	return mask_of(POL_CAP_OPTIONAL);
}

uint64_t pol_caps_helper_dirs_mask(void)
{
	return mask_of(POL_CAP_DIRS);
}

const struct pol_cap_entry *pol_caps_tree_table(size_t *n)
{
	*n = sizeof(tree_caps) / sizeof(tree_caps[0]);
	return tree_caps;
}

uint64_t pol_caps_tree_mask(void)
{
	uint64_t m = 0;
	for (size_t i = 0; i < sizeof(tree_caps) / sizeof(tree_caps[0]); i++)
		m |= 1ULL << tree_caps[i].cap;
	return m;
}

const char *pol_caps_name(unsigned int cap, char *buf, size_t len)
{
	const char *n = capng_capability_to_name(cap);
	int w = n ? snprintf(buf, len, "CAP_%s", n) : snprintf(buf, len, "CAP_%u", cap);
	for (char *c = buf; w > 0 && *c; c++)
		if (*c >= 'a' && *c <= 'z')
			*c = (char)(*c - 'a' + 'A');
	return buf;
}

uint64_t pol_caps_helper_core_mask(void)
{
	return 0;
}
