/*
 * The store's volumes table: one row per CreateVolume, keyed by id, unique by
 * CSI name; the columns that change during a volume's life are rewritten by
 * store_volume_update(). Stagings, publications and attachments reference a
 * volume, so the schema refuses to delete one that is still in use.
 *
 * Runs in rpcd, unprivileged. Fatal here (abort): allocation failure and a
 * pthread mutex call failing; everything else is a STORE_* code with the
 * reason in store_last_error(). Statements and locking are in store_sql.c.
 */
#include <stdlib.h>

#include "store_int.h"

#define VOLUME_COLUMNS                                                                             \
	"id, name, capacity_bytes, fs_type, parameters, content_source, created_unix_ns,"          \
	" mkfs_options, nouuid, mutable_parameters, condition, kind, dir_base, dir_name,"          \
	" on_delete, quota, shared"

static void *store_volume_from_row(sqlite3_stmt *q)
{
	struct store_volume *v = store_xcalloc(1, sizeof *v);

	v->id = store_column_text(q, 0);
	v->name = store_column_text(q, 1);
	v->capacity_bytes = sqlite3_column_int64(q, 2);
	v->fs_type = store_column_text(q, 3);
	v->parameters = store_column_text(q, 4);
	v->content_source = store_column_text(q, 5);
	v->created_unix_ns = sqlite3_column_int64(q, 6);
	v->mkfs_options = store_column_text(q, 7);
	v->nouuid = sqlite3_column_int(q, 8) != 0;
	v->mutable_parameters = store_column_text(q, 9);
	v->condition = store_column_text(q, 10);
	v->kind = store_column_text(q, 11);
	v->dir_base = store_column_text(q, 12);
	v->dir_name = store_column_text(q, 13);
	v->on_delete = store_column_text(q, 14);
	v->quota = sqlite3_column_int(q, 15) != 0;
	v->shared = sqlite3_column_int(q, 16);
	return v;
}

void store_volume_free(struct store_volume *v)
{
	if (!v)
		return;
	free(v->id);
	free(v->name);
	free(v->fs_type);
	free(v->parameters);
	free(v->content_source);
	free(v->mkfs_options);
	free(v->mutable_parameters);
	free(v->condition);
	free(v->kind);
	free(v->dir_base);
	free(v->dir_name);
	free(v->on_delete);
	free(v);
}

static void store_volume_free_row(void *v)
{
	store_volume_free(v);
}

void store_volume_list_free(struct store_volume **list, size_t n)
{
	store_free_list((void **)list, n, store_volume_free_row);
}

int store_volume_put(struct store *st, const struct store_volume *v)
{
	static const char what[] = "volume put";
	sqlite3_stmt *q;
	int rc;

	if (!st || !v) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	store_lock(st);
	q = store_stmt(st, STMT_VOLUME_PUT,
	               "INSERT INTO volumes (" VOLUME_COLUMNS
	               ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
	               " ?15, ?16, ?17)",
	               what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, v->id)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 2, v->name)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int64(q, 3, v->capacity_bytes)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 4, v->fs_type)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 5, v->parameters)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 6, v->content_source)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int64(q, 7, v->created_unix_ns)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 8, v->mkfs_options)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int(q, 9, v->nouuid ? 1 : 0)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 10, v->mutable_parameters)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 11, v->condition)) != SQLITE_OK ||
	    (rc = store_bind_kind(q, 12, v->kind)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 13, v->dir_base)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 14, v->dir_name)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 15, v->on_delete)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int(q, 16, v->quota ? 1 : 0)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int(q, 17, v->shared)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = store_step_write(st, q, what, NULL);
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

int store_volume_get(struct store *st, const char *id, struct store_volume **out)
{
	return store_get_one(st, STMT_VOLUME_GET,
	                     "SELECT " VOLUME_COLUMNS " FROM volumes WHERE id = ?1", "volume get",
	                     id, NULL, store_volume_from_row, "no such volume", (void **)out);
}

int store_volume_get_by_name(struct store *st, const char *name, struct store_volume **out)
{
	return store_get_one(st, STMT_VOLUME_GET_BY_NAME,
	                     "SELECT " VOLUME_COLUMNS " FROM volumes WHERE name = ?1",
	                     "volume get by name", name, NULL, store_volume_from_row,
	                     "no such volume", (void **)out);
}

int store_volume_get_by_directory(struct store *st, const char *base, const char *name,
                                  struct store_volume **out)
{
	return store_get_one(st, STMT_VOLUME_GET_BY_DIRECTORY,
	                     "SELECT " VOLUME_COLUMNS " FROM volumes WHERE kind = 'directory'"
	                     " AND dir_base = ?1 AND dir_name = ?2",
	                     "volume get by directory", base, name, store_volume_from_row,
	                     "no such volume", (void **)out);
}

int store_volume_delete(struct store *st, const char *id)
{
	static const char what[] = "volume delete";
	sqlite3_stmt *q;
	int rc;

	if (!st || !id) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	q = store_keyed_begin(st, STMT_VOLUME_DELETE, "DELETE FROM volumes WHERE id = ?1", what, id,
	                      NULL, &rc);
	if (!q)
		return rc;
	rc = sqlite3_step(q);
	if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) {
		/* The schema's REFERENCES clauses are what refuse this. */
		store_set_error("%s: volume is still staged or published (%s)", what,
		                sqlite3_errmsg(st->db));
		rc = STORE_ERROR;
	} else if (rc != SQLITE_DONE) {
		rc = store_fail(st, rc, what);
	} else if (sqlite3_changes(st->db) == 0) {
		store_set_error("%s: no such volume", what);
		rc = STORE_NOTFOUND;
	} else {
		rc = STORE_OK;
	}
	return store_keyed_end(st, q, rc);
}

int store_volume_list(struct store *st, const char *after_id, size_t limit,
                      struct store_volume ***out, size_t *n)
{
	static const char what[] = "volume list";
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
	/* Keyset pagination: "after this id" stays valid however rows come and go. */
	q = store_stmt(st, STMT_VOLUME_LIST,
	               "SELECT " VOLUME_COLUMNS " FROM volumes WHERE id > ?1 ORDER BY id LIMIT ?2",
	               what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, after_id ? after_id : "")) != SQLITE_OK ||
	    (rc = sqlite3_bind_int64(q, 2, store_sql_limit(limit))) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = store_collect(st, q, what, store_volume_from_row, store_volume_free_row, (void ***)out,
	                   n);
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

int store_volume_count(struct store *st, size_t *n)
{
	return store_count(st, STMT_VOLUME_COUNT, "SELECT count(*) FROM volumes", "volume count",
	                   NULL, n);
}

int store_volume_update(struct store *st, const struct store_volume *v)
{
	static const char what[] = "volume update";
	sqlite3_stmt *q;
	int rc, changes = 0;

	if (!st || !v || !v->id) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	store_lock(st);
	q = store_stmt(st, STMT_VOLUME_UPDATE,
	               "UPDATE volumes SET capacity_bytes = ?2, mutable_parameters = ?3,"
	               " condition = ?4 WHERE id = ?1",
	               what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, v->id)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int64(q, 2, v->capacity_bytes)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 3, v->mutable_parameters)) != SQLITE_OK ||
	    (rc = store_bind_text_or_empty(q, 4, v->condition)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = store_step_write(st, q, what, &changes);
	if (rc == STORE_OK && changes == 0) {
		store_set_error("%s: no such volume", what);
		rc = STORE_NOTFOUND;
	}
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}
