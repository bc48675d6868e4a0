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

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mh_common.h"

/*
 * One row per operation: its handler, whether it only reads, the flags it
 * takes (any other is refused before the handler runs), and its safety
 * argument in one line (the whole argument: docs/security.md). Every request
 * also has its ids checked, and a readonly field other than 0 or 1 refused,
 * before its handler runs (precheck below). The rows past NFROM_RPCD are the
 * main loop's own requests to its workers: from rpcd, a protocol violation.
 */
static const struct {
	uint16_t req, ans;
	mh_answer_fn *answer;
	const char *name;
	bool read_only;
	uint8_t flags;
	const char *safety;
} dispatch[] = {
    {MH_REQ_PING, MH_ANS_PING, mh_answer_ping, "PING", true, 0, "changes nothing"},
    {MH_REQ_CREATE, MH_ANS_CREATE, mh_answer_create, "CREATE", false, 0,
     "makes only images/<id>.img, under a temporary name renamed without replacing; the id "
     "is the name's only variable part; the size is bounded and counted against the disk"},
    {MH_REQ_DELETE, MH_ANS_DELETE, mh_answer_delete, "DELETE", false, 0,
     "unlinks only images/<id>.img, and not while a loop device backs it"},
    {MH_REQ_STAGE, MH_ANS_STAGE, mh_answer_stage, "STAGE", false,
     MH_F_BLOCK | MH_F_CREATE_DIR | MH_F_MOUNT_GROUP,
     "mounts only this volume's image, through a loop device it attached itself, on an "
     "empty root-only directory of a staging pattern, resolved again after mkfs and checked "
     "after; formats only a device with no signature at all"},
    {MH_REQ_UNSTAGE, MH_ANS_UNSTAGE, mh_answer_unstage, "UNSTAGE", false,
     MH_F_BLOCK | MH_F_REMOVE_DIR,
     "unmounts only a mount proved this volume's (its loop device backed by the image); "
     "detaches only when no mount or bind of the device is left anywhere"},
    {MH_REQ_PUBLISH, MH_ANS_PUBLISH, mh_answer_publish, "PUBLISH", false, MH_F_BLOCK,
     "a second mount of the staged file system (a bind of its loop node for raw block), "
     "nosuid,nodev, on an empty target of a target pattern it made and marked or found "
     "empty; checked after"},
    {MH_REQ_UNPUBLISH, MH_ANS_UNPUBLISH, mh_answer_unpublish, "UNPUBLISH", false, 0,
     "unmounts only this volume's mounts at the target; removes the target only if its "
     "mark says the helper made it for this volume, and checks the unlink after"},
    {MH_REQ_RESIZE, MH_ANS_RESIZE, mh_answer_resize, "RESIZE", false, 0,
     "grows only images/<id>.img, never shrinks it; bounded and counted"},
    {MH_REQ_SNAPSHOT, MH_ANS_SNAPSHOT, mh_answer_snapshot, "SNAPSHOT", false, 0,
     "copies images/<id>.img to snapshots/<id>.img under a temporary name; freezes only "
     "this volume's verified mount, within freeze_max_seconds"},
    {MH_REQ_DELETE_SNAPSHOT, MH_ANS_DELETE_SNAPSHOT, mh_answer_delete_snapshot, "DELETE_SNAPSHOT",
     false, 0, "unlinks only snapshots/<id>.img"},
    {MH_REQ_CLONE, MH_ANS_CLONE, mh_answer_clone, "CLONE", false, 0,
     "copies a snapshot or volume image into a new images/<id>.img under a temporary "
     "name; freezes as SNAPSHOT does"},
    {MH_REQ_CAPACITY, MH_ANS_CAPACITY, mh_answer_capacity, "CAPACITY", true, 0,
     "reads its own counts"},
    {MH_REQ_EXPAND, MH_ANS_EXPAND, mh_answer_expand, "EXPAND", false, MH_F_BLOCK,
     "grows only a file system proved to be this volume's mount, with that file system's "
     "own ioctl on the verified mount"},
    {MH_REQ_STATS, MH_ANS_STATS, mh_answer_stats, "STATS", true, MH_F_BLOCK,
     "statvfs of a mount proved to be this volume's; changes nothing"},
    {MH_REQ_LIST, MH_ANS_LIST, mh_answer_list, "LIST", true, 0,
     "reads the helper's own files and the mounts of its own loop devices; changes nothing"},
    /* Directory volumes: the whole argument is at the top of mh_dir.c and mh_tree.c. */
    {MH_REQ_DIR_CREATE, MH_ANS_DIR_CREATE, mh_answer_dir_create, "DIR_CREATE", false, 0,
     "makes only <base>/<name> (a plain name, never leaving the base), marked and whole "
     "before it takes its name, never over anything; copies only a marked snapshot or "
     "volume of the same base; mkdir of missing parents, each root's alone"},
    {MH_REQ_DIR_DELETE, MH_ANS_DIR_DELETE, mh_answer_dir_delete, "DIR_DELETE", false, 0,
     "removes, archives or keeps only a directory marked as this volume's; removal renames "
     "it into the trash first and empties it on fds, never following a symlink or crossing "
     "a mount"},
    {MH_REQ_DIR_EXPAND, MH_ANS_DIR_EXPAND, mh_answer_dir_expand, "DIR_EXPAND", false, 0,
     "raises the project quota of a directory marked as this volume's; never lowers it"},
    {MH_REQ_DIR_PUBLISH, MH_ANS_DIR_PUBLISH, mh_answer_dir_publish, "DIR_PUBLISH", false,
     MH_F_MOUNT_GROUP,
     "binds only the directory marked as this volume's, nosuid,nodev (read-only from the "
     "base's read-only clone), on an empty target of a target pattern; checked after"},
    {MH_REQ_DIR_UNPUBLISH, MH_ANS_DIR_UNPUBLISH, mh_answer_dir_unpublish, "DIR_UNPUBLISH", false, 0,
     "unmounts only binds whose root is this volume's marked directory; removes the target "
     "only if its mark says the helper made it for this volume"},
    {MH_REQ_DIR_STATS, MH_ANS_DIR_STATS, mh_answer_dir_stats, "DIR_STATS", true, 0,
     "statvfs and the project quota of this volume's marked directory; changes nothing"},
    {MH_REQ_DIR_CAPACITY, MH_ANS_DIR_CAPACITY, mh_answer_dir_capacity, "DIR_CAPACITY", true, 0,
     "statvfs of a base the policy names; changes nothing"},
    {MH_REQ_DIR_SNAPSHOT, MH_ANS_DIR_SNAPSHOT, mh_answer_dir_snapshot, "DIR_SNAPSHOT", false, 0,
     "copies this volume's marked directory into <base>/.sepcsi-snapshots/<id>, root's "
     "alone, whole and marked before it takes its name"},
    {MH_REQ_DIR_DELETE_SNAPSHOT, MH_ANS_DIR_DELETE_SNAPSHOT, mh_answer_dir_delete_snapshot,
     "DIR_DELETE_SNAPSHOT", false, 0,
     "removes only <base>/.sepcsi-snapshots/<id> if marked as that snapshot, as DIR_DELETE "
     "does"},
    /* The main loop's own: never from rpcd. */
    {MH_REQ_PURGE, MH_ANS_PURGE, mh_answer_purge, "PURGE", false, 0,
     "removes what dead operations left of one id: <id>.img.tmp in images/ and snapshots/; "
     "<base>/.sepcsi-work/<id> and <base>/.sepcsi-trash/<id>, root's alone, only if marked "
     "as that id's (or an empty directory), emptied as DIR_DELETE empties a tree"},
};

#define NDISPATCH  (sizeof(dispatch) / sizeof(dispatch[0]))
#define NFROM_RPCD (NDISPATCH - 1)

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
	int i = find(type);
	return i >= 0 && (size_t)i < NFROM_RPCD;
}

const char *mh_ops_safety(uint16_t type)
{
	int i = find(type);
	return i >= 0 ? dispatch[i].safety : "";
}

bool mh_ops_read_only(uint16_t type)
{
	int i = find(type);
	return i >= 0 && dispatch[i].read_only;
}

/* What a request names and carries that every operation checks the same way. */
struct fields {
	struct mh_audit a;   /* its ids and paths, as the audit record names them */
	int flags, readonly; /* -1: the request has no such field */
	bool source_is_snapshot;
};

static struct fields fields_of(const struct mh_msg *q)
{
	struct fields f = {.flags = -1, .readonly = -1};
	switch (q->type) {
	case MH_REQ_CREATE:
		f.a.volume_id = q->u.create.volume_id;
		break;
	case MH_REQ_DELETE:
		f.a.volume_id = q->u.del.volume_id;
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
	case MH_REQ_RESIZE:
		f.a.volume_id = q->u.resize.volume_id;
		break;
	case MH_REQ_SNAPSHOT:
		f.a = (struct mh_audit){.volume_id = q->u.snapshot.volume_id,
		                        .snapshot_id = q->u.snapshot.snapshot_id};
		break;
	case MH_REQ_DELETE_SNAPSHOT:
		f.a.snapshot_id = q->u.del_snapshot.snapshot_id;
		break;
	case MH_REQ_CLONE:
		f.a = (struct mh_audit){.volume_id = q->u.clone.volume_id,
		                        .source_id = q->u.clone.source_id};
		f.source_is_snapshot = q->u.clone.source_kind == MH_SRC_SNAPSHOT;
		break;
	case MH_REQ_EXPAND:
		f.a = (struct mh_audit){.volume_id = q->u.expand.volume_id,
		                        .path = q->u.expand.staging_path};
		f.flags = q->u.expand.flags;
		break;
	case MH_REQ_STATS:
		f.a = (struct mh_audit){.volume_id = q->u.stats.volume_id, .path = q->u.stats.path};
		f.flags = q->u.stats.flags;
		break;
	case MH_REQ_DIR_CREATE:
	case MH_REQ_DIR_DELETE:
	case MH_REQ_DIR_EXPAND:
	case MH_REQ_DIR_PUBLISH:
	case MH_REQ_DIR_UNPUBLISH:
	case MH_REQ_DIR_STATS:
	case MH_REQ_DIR_CAPACITY:
	case MH_REQ_DIR_SNAPSHOT:
	case MH_REQ_DIR_DELETE_SNAPSHOT:
	case MH_REQ_PURGE: {
		const struct mh_req_dir *d = &q->u.dir;
		f.a = (struct mh_audit){.volume_id = d->volume_id[0] ? d->volume_id : NULL,
		                        .snapshot_id = d->snapshot_id[0] ? d->snapshot_id : NULL,
		                        .source_id = d->source_id[0] ? d->source_id : NULL,
		                        .path = d->path[0] ? d->path : NULL,
		                        .base = d->base,
		                        .directory = d->name[0] ? d->name : NULL};
		f.source_is_snapshot = d->source_kind == MH_SRC_SNAPSHOT;
		f.flags = d->flags;
		if (q->type == MH_REQ_DIR_PUBLISH)
			f.readonly = d->mode;
		break;
	}
	default:
		break;
	}
	return f;
}

size_t mh_ops_keys(const struct mh_msg *q, const char *keys[MH_OPS_KEYS_MAX])
{
	struct fields f = fields_of(q);
	const char *all[] = {f.a.snapshot_id, f.a.volume_id, f.a.source_id, f.a.path};
	size_t n = 0;
	if (q->type == MH_REQ_STATS || q->type == MH_REQ_DIR_STATS ||
	    q->type == MH_REQ_DIR_CAPACITY)
		return 0; /* read-only: answered at once, never in flight */
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]) && n < MH_OPS_KEYS_MAX; i++)
		if (all[i])
			keys[n++] = all[i];
	return n;
}

/* The checks every row declares, before its handler: ids, flags, readonly. */
static int precheck(int i, const struct fields *f, struct mh_res *r)
{
	const char *src = f->a.source_id;
	if ((f->a.volume_id && mh_check_volume_id(f->a.volume_id, r) < 0) ||
	    (f->a.snapshot_id && mh_check_snapshot_id(f->a.snapshot_id, r) < 0) ||
	    (src && (f->source_is_snapshot ? mh_check_snapshot_id(src, r)
	                                   : mh_check_volume_id(src, r)) < 0))
		return -1;
	if (f->readonly > 1)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "readonly must be 0 or 1");
	if (f->flags > 0 && (f->flags & ~dispatch[i].flags))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "flag not valid for %s", dispatch[i].name);
	return 0;
}

/* ---- audit ---------------------------------------------------------------- */

#define AUDIT_PAIRS ((size_t)13)

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
	struct fields f = fields_of(req);
	struct mh_audit a = f.a;
	memset(ans, 0, sizeof(*ans));
	ans->id = req->id;
	ans->type = dispatch[i].ans;
	int rc = precheck(i, &f, &r) < 0 ? -1 : dispatch[i].answer(c, req, ans, &a, &r);
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
	struct mh_audit a = fields_of(req).a; /* what the request was about, for the record */
	mh_fail(&r, kind, err, "%s", reason);
	memset(ans, 0, sizeof(*ans));
	ans->id = req->id;
	to_error(ans, &r);
	audit(c, req, i >= 0 ? dispatch[i].name : "UNKNOWN", &a, &r);
}
