/*
 * At start: thaw every file system of ours that a dead process left frozen
 * (a helper's worker killed during a copy, or a core killed during a
 * freeze). Ours only: mounted from a loop device attached to one of our
 * images and named by its volume id (mh_loop_ours).
 *
 * Runs in the helper, as root under seccomp, and in the core before its
 * filter, with its capabilities; before the first request. Nothing here is fatal.
 */
#include <linux/fs.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "log.h"
#include "mh_common.h"
#include "mh_freeze.h"

void mh_thaw_all(const struct mh_ctx *c)
{
	const struct mh_mount_row *v;
	struct mh_res r = {0};
	size_t n, k = 0;
	/* The loop devices file systems are mounted from, copied: each thaw looks again. */
	int *nrs = mh_mounts_look(&v, &n, &r) == 0 ? calloc(n ? n : 1, sizeof(int)) : NULL;
	for (size_t i = 0; nrs && i < n; i++)
		if (v[i].src_nr >= 0)
			nrs[k++] = v[i].src_nr;
	for (size_t i = 0; i < k; i++) {
		struct mh_vol ours;
		char id[MH_ID_MAX + 1];
		/* Ours only: attached by the helper (named by a volume id) to that very image. */
		if (mh_loop_ours(c, nrs[i], &ours, id) != 1)
			continue;
		int fd = mh_mount_fs_fd(&ours.loop, &r);
		if (fd >= 0 && ioctl(fd, FITHAW, 0) == 0)
			log_kv(LOG_LVL_WARN, "thawed", "volume_id", id, "why",
			       "frozen by a process that died during a copy", NULL);
		mh_closep(&fd);
		r = (struct mh_res){0};
	}
	free(nrs);
}
