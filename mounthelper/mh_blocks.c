/*
 * BLOCKS: one page of a snapshot's block metadata (the CSI SnapshotMetadata
 * service): the ranges of snapshots/<id>.img that hold data, or those where
 * it differs from snapshots/<base>.img. Runs in a worker, holding no key:
 * a snapshot image never changes once it has its name, and an image that is
 * unlinked meanwhile stays readable through the descriptors opened here. At
 * most MH_WORKERS_BLOCKS run at once (mh_worker.c): more are BUSY (EAGAIN),
 * so a burst of backups leaves workers to the volumes' own operations.
 *
 * The helper opens both images read-only (regular files of its snapshots
 * directory, by a name it builds from checked ids) and passes them to the
 * capability-less tools runner (runner/blocks.c), which reads them and
 * answers with the page; the helper reads none of a tenant's bytes itself.
 * The runner's answer is checked for form before it goes to rpcd: ranges
 * ascending, disjoint, non-empty, within the target, the first ending after
 * the offset asked for, and the next page starting after the last range and
 * after the offset (so rpcd's paging always ends).
 *
 * Safety argument: reads two of the helper's own snapshot images, changes
 * nothing, and tells rpcd only offsets and lengths within snapshots it named.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mh_common.h"
#include "mh_helper_ops.h"
#include "mh_pause.h"
#include "mh_proto_all.h"
#include "mh_tools.h"

_Static_assert(MH_BLOCKS_MAX == RN_BLOCKS_MAX, "one page fits one answer");
_Static_assert(MH_BLOCKS_ALLOCATED == RN_BLOCKS_ALLOCATED && MH_BLOCKS_DELTA == RN_BLOCKS_DELTA,
               "the same kinds on both sides");

/* snapshots/<id>.img, read-only: a regular file, or -1 with r (NOTFOUND if absent). */
static int open_snapshot(const struct mh_ctx *c, const char *id, struct stat *st, struct mh_res *r)
{
	char name[MH_ID_MAX + 16];
	snprintf(name, sizeof(name), "%s.img", id);
	int fd = openat(c->snaps_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT
		           ? mh_fail(r, MH_E_NOTFOUND, ENOENT, "snapshot %s does not exist", id)
		           : mh_fail(r, MH_E_FAILED, errno, "open snapshot %s: %s", id,
		                     strerror(errno));
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode) || st->st_uid != c->owner) {
		close(fd);
		return mh_fail(r, MH_E_FAILED, EINVAL, "snapshot %s is not the helper's file", id);
	}
	return fd;
}

/* The runner's page, as the header above says it must be. */
static int page_ok(const struct rn_blocks *b, uint64_t size, uint64_t offset, struct mh_res *r)
{
	uint64_t end = offset;
	bool ok = b->size == size && b->n <= RN_BLOCKS_MAX && b->next <= size;
	for (uint32_t i = 0; ok && i < b->n; i++) {
		uint64_t s = b->range[i][0], n = b->range[i][1];
		ok = n > 0 && n <= size && s <= size - n && (i == 0 ? s + n > offset : s >= end);
		end = s + n;
	}
	if (ok && b->next != size)
		ok = b->next >= end && b->next > offset;
	return ok ? 0 : mh_fail(r, MH_E_FAILED, EPROTO, "the tool runner's ranges are malformed");
}

int mh_answer_blocks(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                     struct mh_audit *a, struct mh_res *r)
{
	static struct rn_blocks b;
	const struct mh_req_blocks *q = &req->u.blocks;
	struct mh_ans_blocks *out = &ans->u.blocks_ans;
	bool delta = q->what == MH_BLOCKS_DELTA;
	struct stat st = {0}, sb = {0};
	int ret = -1, base = -1;
	if (delta != (q->base_id[0] != '\0'))
		return mh_fail(r, MH_E_REFUSED, EINVAL,
		               "a base snapshot goes with DELTA, and only");
	int target = open_snapshot(c, q->snapshot_id, &st, r);
	if (target < 0)
		return -1;
	if (delta && (base = open_snapshot(c, q->base_id, &sb, r)) < 0)
		goto out;
	mh_pause(c, "blocks", q->snapshot_id);
	if (q->offset > (uint64_t)st.st_size) {
		mh_fail(r, MH_E_REFUSED, EINVAL, "offset %llu is past the snapshot's end (%lld)",
		        (unsigned long long)q->offset, (long long)st.st_size);
		goto out;
	}
	if (mh_tools_blocks(q->what, q->offset, target, delta ? base : target, &b, r) < 0 ||
	    page_ok(&b, (uint64_t)st.st_size, q->offset, r) < 0)
		goto out;
	out->size_bytes = b.size;
	out->next = b.next;
	out->ranges.n = b.n;
	memcpy(out->ranges.v, b.range, b.n * sizeof(b.range[0]));
	a->note = delta ? "delta" : "allocated";
	ret = 0;
out:
	close(target);
	mh_closep(&base);
	return ret;
}
