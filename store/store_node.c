/*
 * The store's node-side tables: stagings (one per volume, NodeStageVolume)
 * and publications (one per volume and target path, NodePublishVolume).
 * Both reference volumes(id), so a row here names a volume that exists, and
 * that volume cannot be deleted until the row is gone.
 *
 * Runs in rpcd, unprivileged. Fatal here (abort): allocation failure and a
 * pthread mutex call failing; everything else is a STORE_* code with the
 * reason in store_last_error(). Statements and locking are in store_sql.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "store_int.h"

/* ---- stagings ---- */

#define STAGING_COLUMNS                                                                            \
	"volume_id, staging_path, fs_type, mount_flags, access_type, access_mode, mount_group"

static void *staging_from_row(sqlite3_stmt *q)
{
	struct store_staging *s = store_xcalloc(1, sizeof *s);

	s->volume_id = store_column_text(q, 0);
	s->staging_path = store_column_text(q, 1);
	s->fs_type = store_column_text(q, 2);
	s->mount_flags = store_column_text(q, 3);
	s->access_type = sqlite3_column_int(q, 4);
	s->access_mode = sqlite3_column_int(q, 5);
	s->mount_group = sqlite3_column_int64(q, 6);
	return s;
}

void store_staging_free(struct store_staging *s)
{
	if (!s)
		return;
	free(s->volume_id);
	free(s->staging_path);
	free(s->fs_type);
	free(s->mount_flags);
	free(s);
}

int store_staging_put(struct store *st, const struct store_staging *s)
{
	static const char what[] = "staging put";
	sqlite3_stmt *q;
	int rc;

	if (!st || !s) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	store_lock(st);
	q = store_stmt(
	    st, STMT_STAGING_PUT,
	    "INSERT INTO stagings (" STAGING_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, s->volume_id)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 2, s->staging_path)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 3, s->fs_type)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 4, s->mount_flags)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int(q, 5, s->access_type)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int(q, 6, s->access_mode)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int64(q, 7, s->mount_group)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = store_step_insert_for_volume(st, q, what);
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

int store_staging_get(struct store *st, const char *volume_id, struct store_staging **out)
{
	return store_get_one(
	    st, STMT_STAGING_GET, "SELECT " STAGING_COLUMNS " FROM stagings WHERE volume_id = ?1",
	    "staging get", volume_id, NULL, staging_from_row, "volume is not staged", (void **)out);
}

static void staging_free_row(void *row)
{
	store_staging_free(row);
}

int store_staging_list(struct store *st, struct store_staging ***out, size_t *n)
{
	return store_list_all(st, STMT_STAGING_LIST,
	                      "SELECT " STAGING_COLUMNS " FROM stagings ORDER BY volume_id",
	                      "staging list", staging_from_row, staging_free_row, (void ***)out, n);
}

void store_staging_list_free(struct store_staging **list, size_t n)
{
	store_free_list((void **)list, n, staging_free_row);
}

int store_staging_delete(struct store *st, const char *volume_id)
{
	return store_delete_keyed(st, STMT_STAGING_DELETE,
	                          "DELETE FROM stagings WHERE volume_id = ?1", "staging delete",
	                          volume_id, NULL, "volume is not staged");
}

/* ---- publications ---- */

#define PUBLICATION_COLUMNS                                                                        \
	"volume_id, target_path, staging_path, readonly, access_type, access_mode, mount_flags"

static void *publication_from_row(sqlite3_stmt *q)
{
	struct store_publication *p = store_xcalloc(1, sizeof *p);

	p->volume_id = store_column_text(q, 0);
	p->target_path = store_column_text(q, 1);
	p->staging_path = store_column_text(q, 2);
	p->readonly = sqlite3_column_int(q, 3) != 0;
	p->access_type = sqlite3_column_int(q, 4);
	p->access_mode = sqlite3_column_int(q, 5);
	p->mount_flags = store_column_text(q, 6);
	return p;
}

void store_publication_free(struct store_publication *p)
{
	if (!p)
		return;
	free(p->volume_id);
	free(p->target_path);
	free(p->staging_path);
	free(p->mount_flags);
	free(p);
}

int store_publication_put(struct store *st, const struct store_publication *p)
{
	static const char what[] = "publication put";
	sqlite3_stmt *q;
	int rc;

	if (!st || !p) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	store_lock(st);
	q = store_stmt(st, STMT_PUBLICATION_PUT,
	               "INSERT INTO publications (" PUBLICATION_COLUMNS
	               ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	               what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, p->volume_id)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 2, p->target_path)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 3, p->staging_path)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int(q, 4, p->readonly ? 1 : 0)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int(q, 5, p->access_type)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int(q, 6, p->access_mode)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 7, p->mount_flags)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = store_step_insert_for_volume(st, q, what);
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

int store_publication_get(struct store *st, const char *volume_id, const char *target_path,
                          struct store_publication **out)
{
	return store_get_one(st, STMT_PUBLICATION_GET,
	                     "SELECT " PUBLICATION_COLUMNS
	                     " FROM publications WHERE volume_id = ?1 AND target_path = ?2",
	                     "publication get", volume_id, target_path, publication_from_row,
	                     "volume is not published at that path", (void **)out);
}

static void publication_free_row(void *row)
{
	store_publication_free(row);
}

int store_publication_list(struct store *st, struct store_publication ***out, size_t *n)
{
	return store_list_all(
	    st, STMT_PUBLICATION_LIST,
	    "SELECT " PUBLICATION_COLUMNS " FROM publications ORDER BY volume_id, target_path",
	    "publication list", publication_from_row, publication_free_row, (void ***)out, n);
}

void store_publication_list_free(struct store_publication **list, size_t n)
{
	store_free_list((void **)list, n, publication_free_row);
}

int store_publication_delete(struct store *st, const char *volume_id, const char *target_path)
{
	return store_delete_keyed(
	    st, STMT_PUBLICATION_DELETE,
	    "DELETE FROM publications WHERE volume_id = ?1 AND target_path = ?2",
	    "publication delete", volume_id, target_path, "volume is not published at that path");
}

int store_publication_count(struct store *st, const char *volume_id, size_t *n)
{
	return store_count_by_key(st, STMT_PUBLICATION_COUNT,
	                          "SELECT count(*) FROM publications WHERE volume_id = ?1",
	                          "publication count", volume_id, n);
}

int store_publication_writers(struct store *st, const char *volume_id, int mode, size_t *n,
                              size_t *of_mode)
{
	static const char what[] = "publication writers";
	char key2[16];
	sqlite3_stmt *q;
	int rc;

	if (!st || !volume_id || !n || !of_mode) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	*n = *of_mode = 0;
	snprintf(key2, sizeof(key2), "%d", mode); /* the column's INTEGER affinity converts it */
	if (!(q = store_keyed_begin(st, STMT_PUBLICATION_WRITERS,
	                            "SELECT count(*), count(*) FILTER (WHERE access_mode = ?2) "
	                            "FROM publications WHERE volume_id = ?1 AND readonly = 0",
	                            what, volume_id, key2, &rc)))
		return rc;
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		*n = (size_t)sqlite3_column_int64(q, 0);
		*of_mode = (size_t)sqlite3_column_int64(q, 1);
		rc = STORE_OK;
	} else {
		rc = store_fail(st, rc, what);
	}
	return store_keyed_end(st, q, rc);
}
