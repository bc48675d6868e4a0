/*
 * LIST: what exists that the helper made, one page at a time, for rpcd's
 * reconciliation at start (it compares with its store and asks for what is
 * left over to be removed, through the ordinary requests and their rules).
 *
 *  - images and snapshots: the "<id>.img" files of the images and snapshots
 *    directories, with their sizes;
 *  - mounts: mh_list_mounts.c's, asked of the core when there is one (in a
 *    worker then: mh_main.c).
 *
 * Pages are in id order (mount id for mounts) and start after the caller's
 * cursor, so an entry that appears or goes between pages moves nothing else.
 *
 * Also PURGE, which removes the temporary files and trees dead operations
 * left, in a worker (mh_worker.c finds them); the sweep of loop devices is
 * mh_sweep.c's.
 *
 * Runs inline in the helper's main loop as root under seccomp. Safety
 * argument: LIST changes nothing, and tells what a rpcd could learn anyway:
 * ids it made, sizes it asked for, and mount points in kubelet's CSI
 * directories it named itself. PURGE removes only temporary files and marked
 * trees of the id it names. Nothing here is fatal.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "mh_common.h"
#include "mh_dir.h"
#include "mh_helper_ops.h"
#include "mh_image_life.h"
#include "mh_list.h"
#include "mh_loop.h"
#include "mh_mount.h"
#include "mh_proto_all.h"
#include "policy_all.h"

/* ---- images and snapshots ------------------------------------------------------ */

struct file {
	char id[MH_ID_MAX + 1];
	long long size;
};

struct files {
	const char *after;
	struct file *v;
	size_t n, cap;
	bool failed; /* out of memory: the page is refused, not cut short silently */
};

/* "<id>.img" in a directory of the helper's, after the cursor. */
static void file_entry(int dirfd, const char *name, void *arg)
{
	struct files *f = arg;
	struct file e = {0};
	struct stat st;
	const char *dot = strchr(name, '.');
	size_t n = dot ? (size_t)(dot - name) : 0;
	if (!dot || n > MH_ID_MAX || strcmp(dot, ".img") != 0)
		return;
	memcpy(e.id, name, n);
	if (strcmp(e.id, f->after) <= 0 || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode))
		return;
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 256;
		struct file *nv = realloc(f->v, cap * sizeof(*nv));
		if (!nv) {
			f->failed = true;
			return;
		}
		f->v = nv;
		f->cap = cap;
	}
	e.size = (long long)st.st_size;
	f->v[f->n++] = e;
}

static int by_id(const void *a, const void *b)
{
	return strcmp(((const struct file *)a)->id, ((const struct file *)b)->id);
}

static int list_files(int dirfd, const char *after, struct mh_ans_list *out, struct mh_res *r)
{
	struct files f = {.after = after};
	char line[MH_ID_MAX + 32];
	size_t used = 0;
	int ret = 0;
	if (mh_dir_each(dirfd, file_entry, &f) < 0)
		ret = mh_fail(r, MH_E_FAILED, errno, "cannot list the data directory: %s",
		              strerror(errno));
	else if (f.failed)
		ret = mh_fail(r, MH_E_FAILED, ENOMEM, "out of memory");
	if (ret == 0 && f.n) /* qsort wants an array, even of nothing */
		qsort(f.v, f.n, sizeof(f.v[0]), by_id);
	for (size_t i = 0; ret == 0 && i < f.n; i++) {
		snprintf(line, sizeof(line), "%s %lld\n", f.v[i].id, f.v[i].size);
		if (!mh_list_put(out, &used, line))
			break;
	}
	free(f.v);
	return ret;
}

int mh_answer_list(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                   struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_list *q = &req->u.list;
	struct mh_ans_list *out = &ans->u.list_ans;
	out->more = 0;
	out->text[0] = '\0';
	if (q->what == MH_LIST_MOUNTS) /* with a core, asked in a worker (mh_main.c) */
		return c->core ? mh_relay(c, req, ans, a, r) : mh_list_mounts(c, q->after, out, r);
	return list_files(q->what == MH_LIST_IMAGES ? c->images_fd : c->snaps_fd, q->after, out, r);
}

/*
 * PURGE, the main loop's own request (rpcd may not send it; mh_worker.c):
 * what dead operations left of one id, found by the main loop's look at the
 * names in the data directory and the bases' areas. Without a base: the
 * image or copy's temporary files; with one: its trees in that base's work
 * and trash areas. It runs in a worker because what it costs is a tenant's to
 * choose (a copy's extents, a tree's files); it holds the id as its key, so a
 * request on that id meanwhile is answered BUSY.
 */
int mh_answer_purge(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                    struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_dir *q = &req->u.dir;
	const char *id = q->volume_id[0] ? q->volume_id : q->snapshot_id;
	(void)ans;
	(void)a;
	if ((q->base[0] && !pol_base_dir_known(c->pol, q->base)) ||
	    !!q->volume_id[0] == !!q->snapshot_id[0] || q->name[0] || q->path[0] ||
	    q->source_kind || q->size_bytes || q->mode || q->flags || q->gid)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "a purge names one id and a base, no more");
	return q->base[0] ? mh_dir_purge_id(c, q->base, id, r) : mh_image_purge(c, id, r);
}

int mh_dir_each(int dirfd, void (*fn)(int dirfd, const char *name, void *arg), void *arg)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			fn(dirfd, e->d_name, arg);
	closedir(d);
	return 0;
}
