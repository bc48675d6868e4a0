/*
 * The helper's view of the file system (see pol_view.h): everything else of
 * the host (/etc, /home, /root, the host's /dev with its disks, other
 * processes' roots) is simply not there. Pure data (printed by view_print.c).
 */
#include "pol_view.h"

#include "policy.h"

static const struct pol_view_entry view[] = {
    {"/", POL_VIEW_TMPFS, "holds only what follows", true},
    {"<each allowed root>", POL_VIEW_ROOTS,
     "kubelet's directory: where volumes are staged and published; shared, so mounts made "
     "here reach the host and kubelet's reach the helper",
     false},
    {"<each base directory>", POL_VIEW_BASES,
     "directory volumes ([directories] base_dirs): the volumes' directories, bound onto "
     "targets from here; a read-only clone of each at /ro-bases/<n> for read-only binds",
     false},
    {"<data dir>", POL_VIEW_DATA,
     "the images, snapshots, loop records and audit log; a runner gets only the image "
     "descriptors the helper passes",
     false},
    {"/usr", POL_VIEW_RO_DIR, "the mkfs tools and the libraries they load", true},
    {"/bin", POL_VIEW_TOP, "merged /usr: the host's symlink", true},
    {"/sbin", POL_VIEW_TOP, "merged /usr: where the mkfs tools are found", true},
    {"/lib", POL_VIEW_TOP, "merged /usr: the dynamic loader", true},
    {"/lib32", POL_VIEW_TOP, "merged /usr", true},
    {"/lib64", POL_VIEW_TOP, "merged /usr: the dynamic loader's path", true},
    {"/libx32", POL_VIEW_TOP, "merged /usr", true},
    {"/etc/mke2fs.conf", POL_VIEW_RO_FILE, "mkfs.ext4's defaults (features, inode sizes)", true},
    {"/etc/ld.so.cache", POL_VIEW_RO_FILE, "the dynamic loader's library cache", true},
    {"/sys", POL_VIEW_RO_DIR, "loop device numbers, ext4 error counts; read-only", false},
    {"/proc", POL_VIEW_PROC,
     "/proc/self/mountinfo (the tools': /proc/self/mounts, and the image as /proc/self/fd/3); "
     "of other processes only the helper's own, which the capability-less tool runner cannot "
     "inspect",
     true},
    {"/dev/null", POL_VIEW_NODE,
     "the tools' standard input (the tool runner's in a /dev of its own, with nothing else)", true},
    {"/dev/loop-control", POL_VIEW_NODE, "find a free loop device", false},
    {"/dev/loopN", POL_VIEW_LOOPS,
     "the loop devices the helper uses: made as it needs them (mknodat, loop major only)", false},
};

const char *pol_view_ro_base(size_t i)
{
	static const char *const names[POL_BASES_MAX] = {
	    "/ro-bases/0", "/ro-bases/1", "/ro-bases/2", "/ro-bases/3",
	    "/ro-bases/4", "/ro-bases/5", "/ro-bases/6", "/ro-bases/7"};
	return i < POL_BASES_MAX ? names[i] : NULL;
}

const struct pol_view_entry *pol_view_table(size_t *n)
{
	*n = sizeof(view) / sizeof(view[0]);
	return view;
}

bool pol_view_tree(const struct pol_view_entry *e)
{
	return e->tools && e->kind != POL_VIEW_PROC;
}
