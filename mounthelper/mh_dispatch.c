/*
 * The helper's whole privileged surface in one table: which request types it
 * serves, the handler of each, whether it only reads (answered at once by the
 * main loop) or changes something (run in a worker, mh_worker.c), and which
 * ids and paths it acts on (two requests sharing one never run at once). Also
 * the audit record every request leaves, written by the helper itself: one
 * line on stderr and one JSON object appended to <data-dir>/audit.log, which
 * rpcd can neither forge nor suppress.
 *
 * Runs in the helper (main process and workers) as root under seccomp.
 * Nothing here is fatal; a request type outside the table is reported to the
 * caller, which ends the helper (protocol violation).
 */
#include "mh_ops.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static const struct {
	uint16_t req, ans;
	mh_answer_fn *answer;
	const char *name;
	bool read_only;
} dispatch[] = {
    {MH_REQ_PING, MH_ANS_PING, mh_answer_ping, "PING", true},
    {MH_REQ_CREATE, MH_ANS_CREATE, mh_answer_create, "CREATE", false},
    {MH_REQ_DELETE, MH_ANS_DELETE, mh_answer_delete, "DELETE", false},
    {MH_REQ_STAGE, MH_ANS_STAGE, mh_answer_stage, "STAGE", false},
    {MH_REQ_UNSTAGE, MH_ANS_UNSTAGE, mh_answer_unstage, "UNSTAGE", false},
    {MH_REQ_PUBLISH, MH_ANS_PUBLISH, mh_answer_publish, "PUBLISH", false},
    {MH_REQ_UNPUBLISH, MH_ANS_UNPUBLISH, mh_answer_unpublish, "UNPUBLISH", false},
    {MH_REQ_RESIZE, MH_ANS_RESIZE, mh_answer_resize, "RESIZE", false},
    {MH_REQ_SNAPSHOT, MH_ANS_SNAPSHOT, mh_answer_snapshot, "SNAPSHOT", false},
    {MH_REQ_DELETE_SNAPSHOT, MH_ANS_DELETE_SNAPSHOT, mh_answer_delete_snapshot, "DELETE_SNAPSHOT",
     false},
    {MH_REQ_CLONE, MH_ANS_CLONE, mh_answer_clone, "CLONE", false},
    {MH_REQ_CAPACITY, MH_ANS_CAPACITY, mh_answer_capacity, "CAPACITY", true},
    {MH_REQ_EXPAND, MH_ANS_EXPAND, mh_answer_expand, "EXPAND", false},
    {MH_REQ_STATS, MH_ANS_STATS, mh_answer_stats, "STATS", true},
    {MH_REQ_LIST, MH_ANS_LIST, mh_answer_list, "LIST", true},
};

#define NDISPATCH (sizeof(dispatch) / sizeof(dispatch[0]))

static const char *const kind_names[] = {
    [MH_E_OK] = "OK",
    [MH_E_REFUSED] = "REFUSED",
    [MH_E_NOTFOUND] = "NOTFOUND",
    [MH_E_EXISTS] = "EXISTS",
    [MH_E_BUSY] = "BUSY",
    [MH_E_NOSPACE] = "NOSPACE",
    [MH_E_FAILED] = "FAILED",
    [MH_E_PRECONDITION] = "PRECONDITION",
    [MH_E_UNAVAILABLE] = "UNAVAILABLE",
};

static int find(uint16_t type)
{
	for (size_t i = 0; i < NDISPATCH; i++)
		if (dispatch[i].req == type)
			return (int)i;
	return -1;
}

bool mh_ops_known(uint16_t type)
{
	return find(type) >= 0;
}

bool mh_ops_read_only(uint16_t type)
{
	int i = find(type);
	return i >= 0 && dispatch[i].read_only;
}

size_t mh_ops_keys(const struct mh_msg *q, const char *keys[MH_OPS_KEYS_MAX])
{
	size_t n = 0;
	switch (q->type) {
	case MH_REQ_CREATE:
		keys[n++] = q->u.create.volume_id;
		break;
	case MH_REQ_DELETE:
		keys[n++] = q->u.del.volume_id;
		break;
	case MH_REQ_STAGE:
		keys[n++] = q->u.stage.volume_id;
		keys[n++] = q->u.stage.staging_path;
		break;
	case MH_REQ_UNSTAGE:
		keys[n++] = q->u.unstage.volume_id;
		keys[n++] = q->u.unstage.staging_path;
		break;
	case MH_REQ_PUBLISH:
		keys[n++] = q->u.publish.volume_id;
		keys[n++] = q->u.publish.target_path;
		break;
	case MH_REQ_UNPUBLISH:
		keys[n++] = q->u.unpublish.volume_id;
		keys[n++] = q->u.unpublish.target_path;
		break;
	case MH_REQ_RESIZE:
		keys[n++] = q->u.resize.volume_id;
		break;
	case MH_REQ_SNAPSHOT:
		keys[n++] = q->u.snapshot.snapshot_id;
		keys[n++] = q->u.snapshot.volume_id;
		break;
	case MH_REQ_DELETE_SNAPSHOT:
		keys[n++] = q->u.del_snapshot.snapshot_id;
		break;
	case MH_REQ_CLONE:
		keys[n++] = q->u.clone.volume_id;
		keys[n++] = q->u.clone.source_id;
		break;
	case MH_REQ_EXPAND:
		keys[n++] = q->u.expand.volume_id;
		keys[n++] = q->u.expand.staging_path;
		break;
	default:
		break;
	}
	return n;
}

/* ---- audit ---------------------------------------------------------------- */

#define AUDIT_PAIRS ((size_t)11)

static void audit(const struct mh_ctx *c, const struct mh_msg *req, const char *op,
                  const struct mh_audit *a, const struct mh_res *r)
{
	char idbuf[16], errbuf[16];
	snprintf(idbuf, sizeof(idbuf), "%u", req->id);
	snprintf(errbuf, sizeof(errbuf), "%d", r->sys_errno);
	bool failed = r->kind == MH_E_FAILED || r->kind == MH_E_NOSPACE;
	const char *result = r->kind == MH_E_OK ? "ok" : failed ? "failed" : "refused";
	const char *kv[] = {
	    "req",          idbuf,
	    "op",           op,
	    "volume_id",    a->volume_id,
	    "snapshot_id",  a->snapshot_id,
	    "source_id",    a->source_id,
	    "path",         a->path,
	    "staging_path", a->staging_path,
	    "result",       result,
	    "kind",         r->kind == MH_E_OK ? NULL : kind_names[r->kind],
	    "errno",        r->sys_errno ? errbuf : NULL,
	    "reason",       r->kind == MH_E_OK ? a->note : r->reason,
	};
	_Static_assert(sizeof(kv) / sizeof(kv[0]) == 2 * AUDIT_PAIRS, "AUDIT_PAIRS counts kv");
	enum log_level lvl = req->type == MH_REQ_PING ? LOG_LVL_DEBUG : LOG_LVL_INFO;
	log_kv(lvl, "audit", kv[0], kv[1], kv[2], kv[3], kv[4], kv[5], kv[6], kv[7], kv[8], kv[9],
	       kv[10], kv[11], kv[12], kv[13], kv[14], kv[15], kv[16], kv[17], kv[18], kv[19],
	       kv[20], kv[21], NULL);
	/* PING is the liveness probe: it changes nothing and would flood the file. */
	if (c->audit_fd >= 0 && req->type != MH_REQ_PING)
		log_record(c->audit_fd, "audit", kv, sizeof(kv) / sizeof(kv[0]));
}

static void to_error(struct mh_msg *ans, const struct mh_res *r)
{
	memset(&ans->u, 0, sizeof(ans->u));
	ans->type = MH_ANS_ERROR;
	ans->u.error.kind = (uint32_t)r->kind;
	ans->u.error.sys_errno = (uint32_t)r->sys_errno;
	snprintf(ans->u.error.reason, sizeof(ans->u.error.reason), "%s", r->reason);
}

int mh_ops_handle(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans)
{
	int i = find(req->type);
	if (i < 0)
		return -1;

	struct mh_res r = {0};
	struct mh_audit a = {0};
	memset(ans, 0, sizeof(*ans));
	ans->id = req->id;
	ans->type = dispatch[i].ans;
	int rc = dispatch[i].answer(c, req, ans, &a, &r);
	if (rc < 0 && r.kind == MH_E_OK)
		mh_fail(&r, MH_E_FAILED, 0,
		        "internal error"); /* never report success by accident */
	if (rc < 0 || r.kind != MH_E_OK)
		to_error(ans, &r);
	audit(c, req, dispatch[i].name, &a, &r);
	return 0;
}

void mh_ops_refuse(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                   enum mh_err_kind kind, int err, const char *reason)
{
	int i = find(req->type);
	struct mh_res r = {0};
	struct mh_audit a = {0};
	const char *keys[MH_OPS_KEYS_MAX];
	size_t n = mh_ops_keys(req, keys);
	/* Name what the request was about, for the record. */
	for (size_t k = 0; k < n; k++) {
		if (keys[k][0] == '/')
			a.path = a.path ? a.path : keys[k];
		else if (strncmp(keys[k], "ss-", 3) == 0)
			a.snapshot_id = keys[k];
		else
			a.volume_id = a.volume_id ? a.volume_id : keys[k];
	}
	mh_fail(&r, kind, err, "%s", reason);
	memset(ans, 0, sizeof(*ans));
	ans->id = req->id;
	to_error(ans, &r);
	audit(c, req, i >= 0 ? dispatch[i].name : "UNKNOWN", &a, &r);
}
