/*
 * LIST of mounts, one page at a time: every mount, anywhere in this process's
 * view, of a loop device that its image backs (a file system), or a bind of
 * such a device's node (a raw block staging or publication), with the volume
 * id and the mount point, in mount id order after the caller's cursor (a
 * mount id). A page asks the kernel about the loop devices of its own entries
 * only and stops when it is full: its cost grows with the node's mounts only
 * by a look at the table (mh_mounts_look) and a sort.
 *
 * Served by the capable core (it alone opens loop devices), or by the helper
 * without one. Safety argument: it changes nothing, and tells what the asker
 * could learn anyway: ids it made and mount points in kubelet's CSI
 * directories it named itself. Nothing here is fatal.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mh_common.h"
#include "mh_list.h"
#include "mh_loop.h"
#include "mh_mount.h"

/* Append line to the page if it fits; else the page is full ("more"). */
bool mh_list_put(struct mh_ans_list *out, size_t *used, const char *line)
{
	size_t len = strlen(line);
	if (*used + len > MH_LIST_TEXT_MAX) {
		out->more = 1;
		return false;
	}
	memcpy(out->text + *used, line, len + 1);
	*used += len;
	return true;
}

/* A mount after the cursor, to be sorted by its id. */
struct pick {
	int id;
	const struct mh_mount_row *m;
};

static int by_mount_id(const void *a, const void *b)
{
	int x = ((const struct pick *)a)->id, y = ((const struct pick *)b)->id;
	return (x > y) - (x < y);
}

/*
 * Whose is mount m: a file system on one of ours (its source is /dev/loopN,
 * or its device number that device's): 'f'; a bind of the node of one of
 * ours (the block device node at its root is that device's, whatever it is
 * called): 'b'; 0 if neither. vid: the volume.
 */
static char mount_of_ours(const struct mh_ctx *c, const struct mh_mount_row *m, char *vid)
{
	struct mh_vol v;
	dev_t rdev;
	if (mh_loop_ours(c, m->src_nr, &v, vid) == 1)
		return 'f';
	if (mh_loop_ours(c, mh_loop_nr_of_rdev(m->dev), &v, vid) == 1 && v.loop.rdev == m->dev)
		return 'f';
	return mh_mount_row_node(m, &rdev) == 1 &&
	               mh_loop_ours(c, mh_loop_nr_of_rdev(rdev), &v, vid) == 1 &&
	               v.loop.rdev == rdev
	           ? 'b'
	           : 0;
}

int mh_list_mounts(const struct mh_ctx *c, const char *cursor, struct mh_ans_list *out,
                   struct mh_res *r)
{
	const struct mh_mount_row *v;
	struct pick *o;
	char vid[MH_ID_MAX + 1], target[MH_PATH_MAX + 1], line[MH_PATH_MAX + MH_ID_MAX + 32];
	size_t n, k = 0, used = 0;
	char *end = NULL;
	long after = cursor[0] ? strtol(cursor, &end, 10) : 0;
	if (end && *end)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "a mount cursor is a mount id");
	if (mh_mounts_look(&v, &n, r) < 0)
		return -1;
	if (!(o = calloc(n ? n : 1, sizeof(*o))))
		return mh_fail(r, MH_E_FAILED, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		if (v[i].id > after)
			o[k++] = (struct pick){.id = v[i].id, .m = &v[i]};
	if (k)
		qsort(o, k, sizeof(*o), by_mount_id);
	for (size_t i = 0; i < k; i++) {
		char kind = mount_of_ours(c, o[i].m, vid);
		if (!kind || mh_mount_row_target(o[i].m, target, sizeof(target)) != 1)
			continue;
		snprintf(line, sizeof(line), "%d %c %s %s\n", o[i].id, kind, vid, target);
		if (!mh_list_put(out, &used, line))
			break;
	}
	free(o);
	return 0;
}
