/*
 * The helper's whole surface in one table: which request types it serves,
 * the handler of each, whether it only reads (answered at once by the main
 * loop) or changes something (run in a worker, mh_worker.c), the flags it
 * takes, and its safety argument in one line; and the answer to a request
 * no worker could run or finish (mh_ops_refuse), which the core never gives.
 * How a request meets its row: mh_dispatch.c.
 */
#include "mh_helper_ops.h"

#include <string.h>

#include "mh_looks.h"
#include "mh_proto_all.h"

void mh_fields_more(const struct mh_msg *q, struct mh_fields *f)
{
	const struct mh_req_dir *d = &q->u.dir;
	switch (q->type) {
	case MH_REQ_DELETE:
		f->a.volume_id = q->u.del.volume_id;
		break;
	case MH_REQ_STATS:
		mh_stats_fields(q, f);
		break;
	case MH_REQ_CREATE:
		f->a.volume_id = q->u.create.volume_id;
		break;
	case MH_REQ_RESIZE:
		f->a.volume_id = q->u.resize.volume_id;
		break;
	case MH_REQ_SNAPSHOT:
		f->a = (struct mh_audit){.volume_id = q->u.snapshot.volume_id,
		                         .snapshot_id = q->u.snapshot.snapshot_id};
		break;
	case MH_REQ_DELETE_SNAPSHOT:
		f->a.snapshot_id = q->u.del_snapshot.snapshot_id;
		break;
	case MH_REQ_GROUP_SNAPSHOT: /* the first member; the handler checks every one */
		f->a = (struct mh_audit){.volume_id = q->u.group.volume_id[0],
		                         .snapshot_id = q->u.group.snapshot_id[0]};
		break;
	case MH_REQ_BLOCKS: /* the base, if any, as the source */
		f->a = (struct mh_audit){.snapshot_id = q->u.blocks.snapshot_id,
		                         .source_id =
		                             q->u.blocks.base_id[0] ? q->u.blocks.base_id : NULL};
		f->source_is_snapshot = true;
		break;
	case MH_REQ_CLONE:
		f->a = (struct mh_audit){.volume_id = q->u.clone.volume_id,
		                         .source_id = q->u.clone.source_id};
		f->source_is_snapshot = q->u.clone.source_kind == MH_SRC_SNAPSHOT;
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
	case MH_REQ_DIR_NODE:
	case MH_REQ_PURGE:
		f->a = (struct mh_audit){.volume_id = d->volume_id[0] ? d->volume_id : NULL,
		                         .snapshot_id = d->snapshot_id[0] ? d->snapshot_id : NULL,
		                         .source_id = d->source_id[0] ? d->source_id : NULL,
		                         .path = d->path[0] ? d->path : NULL,
		                         .base = d->base,
		                         .directory = d->name[0] ? d->name : NULL};
		f->source_is_snapshot = d->source_kind == MH_SRC_SNAPSHOT;
		f->flags = d->flags;
		if (q->type == MH_REQ_DIR_PUBLISH)
			f->readonly = d->mode;
		break;
	default:
		break;
	}
}

size_t mh_ops_keys(const struct mh_msg *q, const char *keys[MH_OPS_KEYS_MAX])
{
	struct mh_fields f = mh_ops_fields(q);
	const char *all[] = {f.a.snapshot_id, f.a.volume_id, f.a.source_id, f.a.path};
	size_t n = 0;
	if (q->type == MH_REQ_STATS || q->type == MH_REQ_DIR_STATS ||
	    q->type == MH_REQ_DIR_CAPACITY || q->type == MH_REQ_DIR_NODE)
		return 0; /* read-only: answered at once, never in flight */
	if (q->type == MH_REQ_BLOCKS)
		return 0; /* reads snapshot images, which never change: beside anything */
	if (q->type == MH_REQ_GROUP_SNAPSHOT) { /* every member's ids (the codec bounds n) */
		for (size_t i = 0; i < q->u.group.n && i < MH_GROUP_MAX; i++) {
			keys[n++] = q->u.group.volume_id[i];
			keys[n++] = q->u.group.snapshot_id[i];
		}
		return n;
	}
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]) && n < MH_OPS_KEYS_MAX; i++)
		if (all[i])
			keys[n++] = all[i];
	return n;
}

void mh_ops_refuse(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                   enum mh_err_kind kind, int err, const char *reason)
{
	const struct mh_op_row *row = mh_ops_row(req->type);
	struct mh_res r = {0};
	struct mh_audit a = mh_ops_fields(req).a; /* what the request was about, for the record */
	mh_fail(&r, kind, err, "%s", reason);
	memset(ans, 0, sizeof(*ans));
	ans->id = req->id;
	mh_ops_to_error(ans, &r);
	mh_ops_audit(c, req, row ? row->name : "UNKNOWN", &a, &r);
}

/*
 * The whole argument of each row: docs/security.md. Every request also has
 * its ids checked, and a readonly field other than 0 or 1 refused, before its
 * handler runs (mh_dispatch.c). The last row, PURGE, is the main loop's own
 * request to its workers: from rpcd, a protocol violation.
 */
const struct mh_op_row mh_op_rows[] = {
    MH_ROW_PING,
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
    MH_ROW_UNSTAGE(mh_relay_unstage),
    MH_ROW_PUBLISH(mh_relay_publish),
    MH_ROW_UNPUBLISH(mh_relay_unpublish),
    {MH_REQ_RESIZE, MH_ANS_RESIZE, mh_answer_resize, "RESIZE", false, 0,
     "grows only images/<id>.img, never shrinks it; bounded and counted"},
    {MH_REQ_SNAPSHOT, MH_ANS_SNAPSHOT, mh_answer_snapshot, "SNAPSHOT", false, 0,
     "copies images/<id>.img to snapshots/<id>.img under a temporary name; freezes only "
     "this volume's verified mount, within freeze_max_seconds"},
    {MH_REQ_GROUP_SNAPSHOT, MH_ANS_GROUP_SNAPSHOT, mh_answer_group_snapshot, "GROUP_SNAPSHOT",
     false, 0,
     "as SNAPSHOT, for 2 to 16 distinct volumes: every one frozen before the first copy and "
     "thawed after the last, all within one freeze_max_seconds; any failure removes every copy"},
    {MH_REQ_DELETE_SNAPSHOT, MH_ANS_DELETE_SNAPSHOT, mh_answer_delete_snapshot, "DELETE_SNAPSHOT",
     false, 0, "unlinks only snapshots/<id>.img"},
    {MH_REQ_BLOCKS, MH_ANS_BLOCKS, mh_answer_blocks, "BLOCKS", false, 0,
     "reads snapshots/<id>.img (and a base's) only through the capability-less runner; "
     "changes nothing; answers offsets and lengths within them, checked for form"},
    {MH_REQ_CLONE, MH_ANS_CLONE, mh_answer_clone, "CLONE", false, 0,
     "copies a snapshot or volume image into a new images/<id>.img under a temporary "
     "name; freezes as SNAPSHOT does"},
    {MH_REQ_CAPACITY, MH_ANS_CAPACITY, mh_answer_capacity, "CAPACITY", true, 0,
     "reads its own counts"},
    MH_ROW_EXPAND(mh_relay_expand),
    MH_ROW_STATS(mh_relay_stats),
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
     MH_F_MOUNT_GROUP | MH_F_ONE_NODE,
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
    {MH_REQ_DIR_NODE, MH_ANS_DIR_NODE, mh_answer_dir_node, "DIR_NODE", true, 0,
     "looks for <base>/.sepcsi-nodes/<node id> on a shared base, which a helper started with "
     "that --node-id made; changes nothing"},
    /* The main loop's own: never from rpcd. */
    {MH_REQ_PURGE, MH_ANS_PURGE, mh_answer_purge, "PURGE", false, 0,
     "removes what dead operations left of one id: <id>.img.tmp in images/ and snapshots/; "
     "<base>/.sepcsi-work/<id> and <base>/.sepcsi-trash/<id>, root's alone, only if marked "
     "as that id's (or an empty directory), emptied as DIR_DELETE empties a tree"},
};

const size_t mh_op_nrows = sizeof(mh_op_rows) / sizeof(mh_op_rows[0]);
const size_t mh_op_npeer = sizeof(mh_op_rows) / sizeof(mh_op_rows[0]) - 1; /* all but PURGE */
