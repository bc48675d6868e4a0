/*
 * Node service: NodeGetVolumeStats (usage and condition) and NodeExpandVolume
 * (grow the staged file system after the controller grew the image). Runs in
 * rpcd, unprivileged; the helper measures and grows, we only check that the
 * path asked about really is one of this volume's.
 */
#include "ctl_int.h"
#include "mh_proto_all.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/*
 * The staging of a volume, if path is its staging path or one of its
 * publication targets. CTL_OK with *stg set; NOT_FOUND otherwise.
 */
static int find_path(struct ctl *c, struct ctl_status *st, const struct store_volume *v,
                     const char *path, struct store_staging **stg)
{
	int rc = store_staging_get(c->st, v->id, stg);
	if (rc == STORE_NOTFOUND)
		return ctl_fail(st, CTL_NOT_FOUND, "volume %s is not staged on this node", v->id);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "look up staging", rc);
	if (strcmp((*stg)->staging_path, path) == 0)
		return CTL_OK;
	struct store_publication *p = NULL;
	rc = store_publication_get(c->st, v->id, path, &p);
	store_publication_free(p);
	if (rc == STORE_OK)
		return CTL_OK;
	store_staging_free(*stg);
	*stg = NULL;
	if (rc == STORE_NOTFOUND)
		return ctl_fail(st, CTL_NOT_FOUND, "volume %s is not available at %.200s", v->id,
		                path);
	return ctl_fail_store(st, "look up publication", rc);
}

static Csi__V1__VolumeUsage *usage(struct ctl_arena *a, Csi__V1__VolumeUsage__Unit unit,
                                   uint64_t avail, uint64_t total, uint64_t used)
{
	Csi__V1__VolumeUsage *u = ctl_alloc(a, sizeof(*u));
	csi__v1__volume_usage__init(u);
	u->unit = unit;
	u->available = (int64_t)avail;
	u->total = (int64_t)total;
	u->used = (int64_t)used;
	return u;
}

/*
 * Ask the helper: STATS of an image volume at the path, DIR_STATS of a
 * directory volume (through the target it is bound on; its staging path has
 * nothing mounted, so there the directory itself is measured: path "").
 */
static int stats(struct ctl *c, const struct store_volume *v, const struct store_staging *stg,
                 const char *path, const struct mh_req_stats *rq, struct mh_ans_stats *ans,
                 struct mh_err *e)
{
	if (!ctl_volume_is_dir(v))
		return mh_stats(c->mh, rq, ans, e);
	struct mh_req_dir q;
	struct mh_msg m = {0};
	ctl_dir_req(v, &q);
	if (strcmp(path, stg->staging_path) != 0)
		snprintf(q.path, sizeof(q.path), "%s", path);
	if (mh_dir(c->mh, MH_REQ_DIR_STATS, &q, &m, e) != 0)
		return -1;
	*ans = m.u.stats_ans;
	return 0;
}

int ctl_node_get_volume_stats(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                              struct ctl_status *st)
{
	const Csi__V1__NodeGetVolumeStatsRequest *req = r;
	struct store_volume *v = NULL;
	struct store_staging *stg = NULL;

	/*
	 * The volume first, then the path: an unknown volume is NOT_FOUND
	 * whatever the path says, and a path that is none of this volume's
	 * (whatever its spelling) is NOT_FOUND too, as kubelet expects. Only
	 * paths the store recorded reach the helper, which checks them again.
	 */
	if (ctl_check_required(st, req->volume_id, "volume_id") ||
	    ctl_check_required(st, req->volume_path, "volume_path"))
		return st->code;
	if (ctl_volume_resolve(c, st, req->volume_id, &v) ||
	    find_path(c, st, v, req->volume_path, &stg))
		goto out;

	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): find_path() sets stg on CTL_OK */
	struct mh_req_stats rq = {.flags = stg->access_type == 1 ? MH_F_BLOCK : 0};
	snprintf(rq.volume_id, sizeof(rq.volume_id), "%s", v->id);
	snprintf(rq.path, sizeof(rq.path), "%s", req->volume_path);
	struct mh_ans_stats ans;
	struct mh_err e;
	if (stats(c, v, stg, req->volume_path, &rq, &ans, &e) != 0) {
		if (e.kind != MH_E_NOTFOUND) {
			ctl_fail_mh(st, "stats", &e);
			goto out;
		}
		/*
		 * The store says the volume is here but the kernel has nothing at
		 * the path: that is the abnormal condition the CO should hear about,
		 * not a missing volume.
		 */
		memset(&ans, 0, sizeof(ans));
		ans.abnormal = 1;
		snprintf(ans.message, sizeof(ans.message),
		         "volume is not available at %.100s: %.120s", req->volume_path, e.reason);
	}
	Csi__V1__NodeGetVolumeStatsResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__node_get_volume_stats_response__init(out);
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of message pointers */
	out->usage = ctl_alloc(a, 2 * sizeof(*out->usage));
	if (ans.bytes_total)
		out->usage[out->n_usage++] =
		    usage(a, CSI__V1__VOLUME_USAGE__UNIT__BYTES, ans.bytes_available,
		          ans.bytes_total, ans.bytes_used);
	if (!(rq.flags & MH_F_BLOCK) && ans.inodes_total)
		out->usage[out->n_usage++] =
		    usage(a, CSI__V1__VOLUME_USAGE__UNIT__INODES, ans.inodes_free, ans.inodes_total,
		          ans.inodes_used);
	Csi__V1__VolumeCondition *cond = ctl_alloc(a, sizeof(*cond));
	csi__v1__volume_condition__init(cond);
	cond->abnormal = ans.abnormal != 0;
	cond->message = ctl_strdup(a, ans.abnormal ? ans.message : "healthy");
	out->volume_condition = cond;
	*resp = out;
	st->code = CTL_OK;
out:
	store_staging_free(stg);
	store_volume_free(v);
	return st->code;
}

int ctl_node_expand_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                           struct ctl_status *st)
{
	const Csi__V1__NodeExpandVolumeRequest *req = r;
	struct store_volume *v = NULL;
	struct store_staging *stg = NULL;
	bool locked = false;

	if (ctl_check_required(st, req->volume_id, "volume_id") ||
	    ctl_check_required(st, req->volume_path, "volume_path"))
		return st->code;
	const Csi__V1__CapacityRange *cr = req->capacity_range;
	if (cr && (cr->required_bytes < 0 || cr->limit_bytes < 0))
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "capacity_range must not be negative");
	if (req->volume_capability &&
	    ctl_check_capability_modes(st, req->volume_capability, "volume_capability", true))
		return st->code;
	if (ctl_volume_resolve(c, st, req->volume_id, &v))
		goto out;
	/* Multi-node modes for a volume on a shared base only. */
	if (req->volume_capability && !ctl_volume_is_shared(v) &&
	    ctl_check_capability(st, req->volume_capability, "volume_capability"))
		goto out;
	if (!(locked = ctl_lock(c, req->volume_id))) {
		ctl_fail(st, CTL_ABORTED, "an operation on volume %s is already in progress",
		         req->volume_id);
		goto out;
	}
	if (find_path(c, st, v, req->volume_path, &stg))
		goto out;
	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): ctl_volume_resolve() set v */
	uint64_t size = (uint64_t)v->capacity_bytes;
	/*
	 * A directory volume's size is its quota, which ControllerExpandVolume
	 * raised: there is no file system to grow on the node.
	 */
	if (!ctl_volume_is_dir(v)) {
		/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): find_path() set stg */
		struct mh_req_expand rq = {.flags = stg->access_type == 1 ? MH_F_BLOCK : 0};
		snprintf(rq.volume_id, sizeof(rq.volume_id), "%s", v->id);
		snprintf(rq.staging_path, sizeof(rq.staging_path), "%s", stg->staging_path);
		if (!(rq.flags & MH_F_BLOCK))
			snprintf(rq.fs_type, sizeof(rq.fs_type), "%s", v->fs_type);
		struct mh_err e;
		if (mh_expand(c->mh, &rq, &size, &e) != 0) {
			if (e.kind == MH_E_REFUSED && e.sys_errno == EFBIG) /* past what it grows */
				ctl_fail(st, CTL_OUT_OF_RANGE, "expand: %s", e.reason);
			else
				ctl_fail_mh(st, "expand", &e);
			goto out;
		}
	}
	/* Made elsewhere (a shared base): its size is its controller's, and advisory. */
	if (v->shared == STORE_SHARED_ADOPTED && cr && (int64_t)size < cr->required_bytes)
		size = (uint64_t)cr->required_bytes;
	if (cr && cr->required_bytes && (int64_t)size < cr->required_bytes) {
		ctl_fail(st, CTL_OUT_OF_RANGE,
		         "volume %s holds %llu bytes, less than required_bytes %lld: expand it "
		         "with ControllerExpandVolume first",
		         v->id, (unsigned long long)size, (long long)cr->required_bytes);
		goto out;
	}
	Csi__V1__NodeExpandVolumeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__node_expand_volume_response__init(out);
	out->capacity_bytes = (int64_t)size;
	*resp = out;
	st->code = CTL_OK;
out:
	if (locked)
		ctl_unlock(c, req->volume_id);
	store_staging_free(stg);
	store_volume_free(v);
	return st->code;
}
