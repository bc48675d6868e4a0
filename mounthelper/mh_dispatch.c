/*
 * How a request meets its row of the dispatch table (the helper's in
 * mh_table.c, the capable core's in core/core_table.c: each binary links
 * one): the checks every row declares (ids, flags, readonly), which ids and
 * paths it acts on (two requests sharing one never run at once), and the
 * audit record every request leaves, written by the process itself: one line
 * on stderr and one JSON object appended to <data-dir>/audit.log, which its
 * peer can neither forge nor suppress.
 *
 * Runs in the helper (main process and workers) and in the core, as root
 * under seccomp.
 * Nothing here is fatal; a request type outside the table is reported to the
 * caller, which ends the helper (protocol violation).
 */
#include "mh_ops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mh_common.h"

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

const struct mh_op_row *mh_ops_row(uint16_t type)
{
	for (size_t i = 0; i < mh_op_nrows; i++)
		if (mh_op_rows[i].req == type)
			return &mh_op_rows[i];
	return NULL;
}

bool mh_ops_known(uint16_t type)
{
	const struct mh_op_row *row = mh_ops_row(type);
	return row && (size_t)(row - mh_op_rows) < mh_op_npeer;
}

struct mh_fields mh_ops_fields(const struct mh_msg *q)
{
	struct mh_fields f = {.flags = -1, .readonly = -1};
	switch (q->type) {
	case MH_REQ_THAW:
	case MH_REQ_REFRESH:
	case MH_REQ_ATTACHED:
	case MH_REQ_FLUSH:
		f.a.volume_id = q->u.del.volume_id;
		break;
	case MH_REQ_FREEZE:
		f.a.volume_id = q->u.freeze.volume_id;
		break;
	case MH_REQ_STAGE:
		f.a = (struct mh_audit){.volume_id = q->u.stage.volume_id,
		                        .path = q->u.stage.staging_path};
		f.flags = q->u.stage.flags;
		f.readonly = q->u.stage.readonly;
		break;
	case MH_REQ_UNSTAGE:
		f.a = (struct mh_audit){.volume_id = q->u.unstage.volume_id,
		                        .path = q->u.unstage.staging_path};
		f.flags = q->u.unstage.flags;
		break;
	case MH_REQ_PUBLISH:
		f.a = (struct mh_audit){.volume_id = q->u.publish.volume_id,
		                        .path = q->u.publish.target_path,
		                        .staging_path = q->u.publish.staging_path};
		f.flags = q->u.publish.flags;
		f.readonly = q->u.publish.readonly;
		break;
	case MH_REQ_UNPUBLISH:
		f.a = (struct mh_audit){.volume_id = q->u.unpublish.volume_id,
		                        .path = q->u.unpublish.target_path};
		break;
	case MH_REQ_EXPAND:
		f.a = (struct mh_audit){.volume_id = q->u.expand.volume_id,
		                        .path = q->u.expand.staging_path};
		f.flags = q->u.expand.flags;
		break;
	default:
		mh_fields_more(q, &f);
		break;
	}
	return f;
}

/* The checks every row declares, before its handler: ids, flags, readonly. */
static int precheck(const struct mh_op_row *row, const struct mh_fields *f, struct mh_res *r)
{
	const char *src = f->a.source_id;
	if ((f->a.volume_id && mh_check_volume_id(f->a.volume_id, r) < 0) ||
	    (f->a.snapshot_id && mh_check_snapshot_id(f->a.snapshot_id, r) < 0) ||
	    (src && (f->source_is_snapshot ? mh_check_snapshot_id(src, r)
	                                   : mh_check_volume_id(src, r)) < 0))
		return -1;
	if (f->readonly > 1)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "readonly must be 0 or 1");
	if (f->flags > 0 && (f->flags & ~row->flags))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "flag not valid for %s", row->name);
	return 0;
}

/* ---- audit ---------------------------------------------------------------- */

#define AUDIT_PAIRS ((size_t)13)

void mh_ops_audit(const struct mh_ctx *c, const struct mh_msg *req, const char *op,
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
	    "base",         a->base,
	    "directory",    a->directory,
	    "result",       result,
	    "kind",         r->kind == MH_E_OK ? NULL : kind_names[r->kind],
	    "errno",        r->sys_errno ? errbuf : NULL,
	    "reason",       r->kind == MH_E_OK ? a->note : r->reason,
	};
	_Static_assert(sizeof(kv) / sizeof(kv[0]) == 2 * AUDIT_PAIRS, "AUDIT_PAIRS counts kv");
	_Static_assert(AUDIT_PAIRS <= LOG_FIELDS_MAX, "a record holds every pair");
	enum log_level lvl = req->type == MH_REQ_PING ? LOG_LVL_DEBUG : LOG_LVL_INFO;
	log_kv(lvl, "audit", kv[0], kv[1], kv[2], kv[3], kv[4], kv[5], kv[6], kv[7], kv[8], kv[9],
	       kv[10], kv[11], kv[12], kv[13], kv[14], kv[15], kv[16], kv[17], kv[18], kv[19],
	       kv[20], kv[21], kv[22], kv[23], kv[24], kv[25], NULL);
	/* PING is the liveness probe: it changes nothing and would flood the file. */
	if (c->audit_fd >= 0 && req->type != MH_REQ_PING)
		log_record(c->audit_fd, "audit", kv, sizeof(kv) / sizeof(kv[0]));
}

void mh_ops_to_error(struct mh_msg *ans, const struct mh_res *r)
{
	memset(&ans->u, 0, sizeof(ans->u));
	ans->type = MH_ANS_ERROR;
	ans->u.error.kind = (uint32_t)r->kind;
	ans->u.error.sys_errno = (uint32_t)r->sys_errno;
	snprintf(ans->u.error.reason, sizeof(ans->u.error.reason), "%s", r->reason);
}

int mh_ops_handle(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans)
{
	const struct mh_op_row *row = mh_ops_row(req->type);
	if (!row)
		return -1;

	struct mh_res r = {0};
	struct mh_fields f = mh_ops_fields(req);
	struct mh_audit a = f.a;
	memset(ans, 0, sizeof(*ans));
	ans->id = req->id;
	ans->type = row->ans;
	int rc = precheck(row, &f, &r) < 0 ? -1 : row->answer(c, req, ans, &a, &r);
	if (rc < 0 && r.kind == MH_E_OK)
		mh_fail(&r, MH_E_FAILED, 0,
		        "internal error"); /* never report success by accident */
	if (rc < 0 || r.kind != MH_E_OK)
		mh_ops_to_error(ans, &r);
	mh_ops_audit(c, req, row->name, &a, &r);
	return 0;
}
