/*
 * The store's Controller-service tables: snapshots, group snapshots and
 * controller attachments (ControllerPublishVolume).
 *
 * Snapshots name their source volume without a foreign key, because a
 * snapshot outlives its source. A group snapshot and its member snapshots are
 * written and forgotten in one transaction, so a reader never sees half a
 * group. Attachments reference volumes(id): a volume cannot be deleted while
 * it is attached to a node.
 *
 * Runs in rpcd, unprivileged. Fatal here (abort): allocation failure and a
 * pthread mutex call failing; everything else is a STORE_* code with the
 * reason in store_last_error(). Statements and locking are in store_sql.c.
 */
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

/* ---- snapshots ---- */

#define SNAPSHOT_COLUMNS                                                                           \
	"id, name, source_volume_id, size_bytes, fs_type, parameters, group_id, created_unix_ns,"  \
	" kind, dir_base"

static void *snapshot_from_row(sqlite3_stmt *q)
{
	struct store_snapshot *s = store_xcalloc(1, sizeof *s);

	s->id = store_column_text(q, 0);
	s->name = store_column_text(q, 1);
	s->source_volume_id = store_column_text(q, 2);
	s->size_bytes = sqlite3_column_int64(q, 3);
	s->fs_type = store_column_text(q, 4);
	s->parameters = store_column_text(q, 5);
	s->group_id = store_column_text(q, 6);
	s->created_unix_ns = sqlite3_column_int64(q, 7);
	s->kind = store_column_text(q, 8);
	s->dir_base = store_column_text(q, 9);
	return s;
}

void store_snapshot_free(struct store_snapshot *s)
{
	if (!s)
		return;
	free(s->id);
	free(s->name);
	free(s->source_volume_id);
	free(s->fs_type);
	free(s->parameters);
	free(s->group_id);
	free(s->kind);
	free(s->dir_base);
	free(s);
}

static void snapshot_free_row(void *s)
{
	store_snapshot_free(s);
}

void store_snapshot_list_free(struct store_snapshot **list, size_t n)
{
	store_free_list((void **)list, n, snapshot_free_row);
}

/* Insert one snapshot row; the caller holds the lock. A name "" is stored as NULL. */
static int snapshot_insert_locked(struct store *st, const struct store_snapshot *s,
                                  const char *what)
{
	sqlite3_stmt *q;
	int rc;

	q = store_stmt(st, STMT_SNAPSHOT_PUT,
	               "INSERT INTO snapshots (" SNAPSHOT_COLUMNS
	               ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	               what);
	if (!q)
		return STORE_ERROR;
	if ((rc = store_bind_text(q, 1, s->id)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 2, s->name && *s->name ? s->name : NULL)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 3, s->source_volume_id)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int64(q, 4, s->size_bytes)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 5, s->fs_type)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 6, s->parameters)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 7, s->group_id)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int64(q, 8, s->created_unix_ns)) != SQLITE_OK ||
	    (rc = store_bind_kind(q, 9, s->kind)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 10, s->dir_base)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = store_step_write(st, q, what, NULL);
out:
	store_stmt_release(q);
	return rc;
}

int store_snapshot_put(struct store *st, const struct store_snapshot *s)
{
	static const char what[] = "snapshot put";
	int rc;

	if (!st || !s || !s->id || !s->source_volume_id) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	store_lock(st);
	rc = snapshot_insert_locked(st, s, what);
	store_unlock(st);
	return rc;
}

int store_snapshot_get(struct store *st, const char *id, struct store_snapshot **out)
{
	return store_get_one(
	    st, STMT_SNAPSHOT_GET, "SELECT " SNAPSHOT_COLUMNS " FROM snapshots WHERE id = ?1",
	    "snapshot get", id, NULL, snapshot_from_row, "not found", (void **)out);
}

int store_snapshot_get_by_name(struct store *st, const char *name, struct store_snapshot **out)
{
	/* "" is the name of every group member: it names no snapshot of its own. */
	if (name && !*name) {
		if (out)
			*out = NULL;
		store_set_error("snapshot get by name: not found");
		return out ? STORE_NOTFOUND : STORE_ERROR;
	}
	return store_get_one(st, STMT_SNAPSHOT_GET_BY_NAME,
	                     "SELECT " SNAPSHOT_COLUMNS " FROM snapshots WHERE name = ?1",
	                     "snapshot get by name", name, NULL, snapshot_from_row, "not found",
	                     (void **)out);
}

int store_snapshot_delete(struct store *st, const char *id)
{
	return store_delete_keyed(st, STMT_SNAPSHOT_DELETE, "DELETE FROM snapshots WHERE id = ?1",
	                          "snapshot delete", id, NULL, "not found");
}

int store_snapshot_list(struct store *st, const char *source_volume_id, const char *after_id,
                        size_t limit, struct store_snapshot ***out, size_t *n)
{
	static const char what[] = "snapshot list";
	bool by_source = source_volume_id && *source_volume_id;
	sqlite3_stmt *q;
	int rc;

	if (!out || !n) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	*out = NULL;
	*n = 0;
	if (!st) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	store_lock(st);
	/* Keyset pagination, as for volumes: a cursor stays valid as rows come and go. */
	if (by_source)
		q = store_stmt(st, STMT_SNAPSHOT_LIST_SOURCE,
		               "SELECT " SNAPSHOT_COLUMNS
		               " FROM snapshots WHERE source_volume_id = ?3"
		               " AND id > ?1 ORDER BY id LIMIT ?2",
		               what);
	else
		q = store_stmt(st, STMT_SNAPSHOT_LIST,
		               "SELECT " SNAPSHOT_COLUMNS
		               " FROM snapshots WHERE id > ?1 ORDER BY id LIMIT ?2",
		               what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, after_id ? after_id : "")) != SQLITE_OK ||
	    (rc = sqlite3_bind_int64(q, 2, store_sql_limit(limit))) != SQLITE_OK ||
	    (by_source && (rc = store_bind_text(q, 3, source_volume_id)) != SQLITE_OK)) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = store_collect(st, q, what, snapshot_from_row, snapshot_free_row, (void ***)out, n);
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

int store_snapshot_list_group(struct store *st, const char *group_id, struct store_snapshot ***out,
                              size_t *n)
{
	/* "" is the group_id of every snapshot outside a group: as invalid as NULL. */
	if (group_id && !*group_id)
		group_id = NULL;
	return store_list_by_key(st, STMT_SNAPSHOT_LIST_GROUP,
	                         "SELECT " SNAPSHOT_COLUMNS
	                         " FROM snapshots WHERE group_id = ?1 ORDER BY id",
	                         "snapshot list group", group_id, snapshot_from_row,
	                         snapshot_free_row, (void ***)out, n);
}

/* ---- group snapshots ---- */

#define GROUP_COLUMNS "id, name, source_volume_ids, parameters, created_unix_ns"

static void *group_from_row(sqlite3_stmt *q)
{
	struct store_group_snapshot *g = store_xcalloc(1, sizeof *g);

	g->id = store_column_text(q, 0);
	g->name = store_column_text(q, 1);
	g->source_volume_ids = store_column_text(q, 2);
	g->parameters = store_column_text(q, 3);
	g->created_unix_ns = sqlite3_column_int64(q, 4);
	return g;
}

void store_group_snapshot_free(struct store_group_snapshot *g)
{
	if (!g)
		return;
	free(g->id);
	free(g->name);
	free(g->source_volume_ids);
	free(g->parameters);
	free(g);
}

int store_group_snapshot_put(struct store *st, const struct store_group_snapshot *g,
                             const struct store_snapshot *members, size_t n)
{
	static const char what[] = "group snapshot put";
	sqlite3_stmt *q = NULL;
	size_t i;
	int rc;

	if (!st || !g || !g->id || !g->name || (n && !members)) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	store_lock(st);
	if ((rc = store_txn_enter(st, what)) != STORE_OK)
		goto out;
	q = store_stmt(
	    st, STMT_GROUP_PUT,
	    "INSERT INTO group_snapshots (" GROUP_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5)", what);
	if (!q) {
		rc = STORE_ERROR;
		goto end;
	}
	if ((rc = store_bind_text(q, 1, g->id)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 2, g->name)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 3, g->source_volume_ids)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 4, g->parameters)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int64(q, 5, g->created_unix_ns)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto end;
	}
	rc = store_step_write(st, q, what, NULL);
	store_stmt_release(q);
	q = NULL;
	if (rc != STORE_OK)
		goto end;
	for (i = 0; i < n; i++) {
		struct store_snapshot m = members[i];

		m.group_id = g->id;
		m.name = NULL;
		if ((rc = snapshot_insert_locked(st, &m, what)) != STORE_OK)
			goto end;
	}
end:
	store_stmt_release(q);
	rc = store_txn_leave(st, rc, what);
out:
	store_unlock(st);
	return rc;
}

int store_group_snapshot_get(struct store *st, const char *id, struct store_group_snapshot **out)
{
	return store_get_one(
	    st, STMT_GROUP_GET, "SELECT " GROUP_COLUMNS " FROM group_snapshots WHERE id = ?1",
	    "group snapshot get", id, NULL, group_from_row, "not found", (void **)out);
}

int store_group_snapshot_get_by_name(struct store *st, const char *name,
                                     struct store_group_snapshot **out)
{
	return store_get_one(st, STMT_GROUP_GET_BY_NAME,
	                     "SELECT " GROUP_COLUMNS " FROM group_snapshots WHERE name = ?1",
	                     "group snapshot get by name", name, NULL, group_from_row, "not found",
	                     (void **)out);
}

int store_group_snapshot_delete(struct store *st, const char *id)
{
	static const char what[] = "group snapshot delete";
	sqlite3_stmt *q = NULL;
	int rc, changes = 0;

	if (!st || !id || !*id) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	store_lock(st);
	if ((rc = store_txn_enter(st, what)) != STORE_OK)
		goto out;
	q = store_stmt(st, STMT_GROUP_DELETE_MEMBERS, "DELETE FROM snapshots WHERE group_id = ?1",
	               what);
	if (!q) {
		rc = STORE_ERROR;
		goto end;
	}
	if ((rc = store_bind_text(q, 1, id)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto end;
	}
	rc = store_step_write(st, q, what, NULL);
	store_stmt_release(q);
	q = NULL;
	if (rc != STORE_OK)
		goto end;
	q = store_stmt(st, STMT_GROUP_DELETE, "DELETE FROM group_snapshots WHERE id = ?1", what);
	if (!q) {
		rc = STORE_ERROR;
		goto end;
	}
	if ((rc = store_bind_text(q, 1, id)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto end;
	}
	rc = store_step_write(st, q, what, &changes);
	store_stmt_release(q);
	q = NULL;
	if (rc != STORE_OK)
		goto end;
	if (changes == 0) {
		store_set_error("%s: not found", what);
		rc = STORE_NOTFOUND;
	}
end:
	store_stmt_release(q);
	rc = store_txn_leave(st, rc, what);
out:
	store_unlock(st);
	return rc;
}

/* ---- attachments ---- */

#define ATTACHMENT_COLUMNS "volume_id, node_id, readonly, access_type, access_mode"

static void *attachment_from_row(sqlite3_stmt *q)
{
	struct store_attachment *a = store_xcalloc(1, sizeof *a);

	a->volume_id = store_column_text(q, 0);
	a->node_id = store_column_text(q, 1);
	a->readonly = sqlite3_column_int(q, 2) != 0;
	a->access_type = sqlite3_column_int(q, 3);
	a->access_mode = sqlite3_column_int(q, 4);
	return a;
}

void store_attachment_free(struct store_attachment *a)
{
	if (!a)
		return;
	free(a->volume_id);
	free(a->node_id);
	free(a);
}

static void attachment_free_row(void *a)
{
	store_attachment_free(a);
}

void store_attachment_list_free(struct store_attachment **list, size_t n)
{
	store_free_list((void **)list, n, attachment_free_row);
}

int store_attachment_put(struct store *st, const struct store_attachment *a)
{
	static const char what[] = "attachment put";
	sqlite3_stmt *q;
	int rc;

	if (!st || !a) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	store_lock(st);
	q = store_stmt(
	    st, STMT_ATTACHMENT_PUT,
	    "INSERT INTO attachments (" ATTACHMENT_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5)", what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, a->volume_id)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 2, a->node_id)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int(q, 3, a->readonly ? 1 : 0)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int(q, 4, a->access_type)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int(q, 5, a->access_mode)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = store_step_insert_for_volume(st, q, what);
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

int store_attachment_get(struct store *st, const char *volume_id, const char *node_id,
                         struct store_attachment **out)
{
	return store_get_one(st, STMT_ATTACHMENT_GET,
	                     "SELECT " ATTACHMENT_COLUMNS
	                     " FROM attachments WHERE volume_id = ?1 AND node_id = ?2",
	                     "attachment get", volume_id, node_id, attachment_from_row,
	                     "volume is not attached to that node", (void **)out);
}

int store_attachment_delete(struct store *st, const char *volume_id, const char *node_id)
{
	if (node_id)
		return store_delete_keyed(
		    st, STMT_ATTACHMENT_DELETE,
		    "DELETE FROM attachments WHERE volume_id = ?1 AND node_id = ?2",
		    "attachment delete", volume_id, node_id, "not found");
	return store_delete_keyed(st, STMT_ATTACHMENT_DELETE_ALL,
	                          "DELETE FROM attachments WHERE volume_id = ?1",
	                          "attachment delete", volume_id, NULL, "not found");
}

int store_attachment_list(struct store *st, const char *volume_id, struct store_attachment ***out,
                          size_t *n)
{
	return store_list_by_key(st, STMT_ATTACHMENT_LIST,
	                         "SELECT " ATTACHMENT_COLUMNS
	                         " FROM attachments WHERE volume_id = ?1 ORDER BY node_id",
	                         "attachment list", volume_id, attachment_from_row,
	                         attachment_free_row, (void ***)out, n);
}

int store_attachment_count_node(struct store *st, const char *node_id, size_t *n)
{
	return store_count_by_key(st, STMT_ATTACHMENT_COUNT_NODE,
	                          "SELECT count(*) FROM attachments WHERE node_id = ?1",
	                          "attachment count", node_id, n);
}
