/*
 * The store's node-side tables: stagings (one per volume, NodeStageVolume)
 * and publications (one per volume and target path, NodePublishVolume).
 * Both reference volumes(id), so a row here names a volume that exists, and
 * that volume cannot be deleted until the row is gone.
 *
 * Runs in rpcd, unprivileged. Fatal here (abort): allocation failure and a
 * pthread mutex call failing; everything else is a STORE_* code with the
 * reason in store_last_error(). Statements and locking are in store.c.
 */
#include <stdlib.h>

#include "store_int.h"

/* A put that names an unknown volume breaks the foreign key: say so plainly. */
static int store_node_put_fail(struct store *st, int sqlite_rc, const char *what)
{
	if (sqlite_rc == SQLITE_CONSTRAINT_FOREIGNKEY) {
		store_set_error("%s: no such volume (%s)", what, sqlite3_errmsg(st->db));
		return STORE_ERROR;
	}
	return store_fail(st, sqlite_rc, what);
}

/* ---- stagings ---- */

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
	q = store_stmt(st, STMT_STAGING_PUT,
	               "INSERT INTO stagings (volume_id, staging_path, fs_type, mount_flags,"
	               " access_type, access_mode) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	               what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, s->volume_id)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 2, s->staging_path)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 3, s->fs_type)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 4, s->mount_flags)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int(q, 5, s->access_type)) != SQLITE_OK ||
	    (rc = sqlite3_bind_int(q, 6, s->access_mode)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? STORE_OK : store_node_put_fail(st, rc, what);
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

int store_staging_get(struct store *st, const char *volume_id, struct store_staging **out)
{
	static const char what[] = "staging get";
	struct store_staging *s;
	sqlite3_stmt *q;
	int rc;

	if (!out) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	*out = NULL;
	if (!st || !volume_id) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	store_lock(st);
	q = store_stmt(st, STMT_STAGING_GET,
	               "SELECT volume_id, staging_path, fs_type, mount_flags, access_type,"
	               " access_mode FROM stagings WHERE volume_id = ?1",
	               what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, volume_id)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		s = store_xcalloc(1, sizeof *s);
		s->volume_id = store_column_text(q, 0);
		s->staging_path = store_column_text(q, 1);
		s->fs_type = store_column_text(q, 2);
		s->mount_flags = store_column_text(q, 3);
		s->access_type = sqlite3_column_int(q, 4);
		s->access_mode = sqlite3_column_int(q, 5);
		*out = s;
		rc = STORE_OK;
	} else if (rc == SQLITE_DONE) {
		store_set_error("%s: volume is not staged", what);
		rc = STORE_NOTFOUND;
	} else {
		rc = store_fail(st, rc, what);
	}
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

int store_staging_delete(struct store *st, const char *volume_id)
{
	static const char what[] = "staging delete";
	sqlite3_stmt *q;
	int rc, changes = 0;

	if (!st || !volume_id) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	store_lock(st);
	q = store_stmt(st, STMT_STAGING_DELETE, "DELETE FROM stagings WHERE volume_id = ?1", what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, volume_id)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = store_step_write(st, q, what, &changes);
	if (rc == STORE_OK && changes == 0) {
		store_set_error("%s: volume is not staged", what);
		rc = STORE_NOTFOUND;
	}
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

/* ---- publications ---- */

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
	               "INSERT INTO publications (volume_id, target_path, staging_path, readonly,"
	               " access_type, access_mode, mount_flags)"
	               " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
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
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? STORE_OK : store_node_put_fail(st, rc, what);
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

int store_publication_get(struct store *st, const char *volume_id, const char *target_path,
                          struct store_publication **out)
{
	static const char what[] = "publication get";
	struct store_publication *p;
	sqlite3_stmt *q;
	int rc;

	if (!out) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	*out = NULL;
	if (!st || !volume_id || !target_path) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	store_lock(st);
	q = store_stmt(st, STMT_PUBLICATION_GET,
	               "SELECT volume_id, target_path, staging_path, readonly, access_type,"
	               " access_mode, mount_flags FROM publications"
	               " WHERE volume_id = ?1 AND target_path = ?2",
	               what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, volume_id)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 2, target_path)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		p = store_xcalloc(1, sizeof *p);
		p->volume_id = store_column_text(q, 0);
		p->target_path = store_column_text(q, 1);
		p->staging_path = store_column_text(q, 2);
		p->readonly = sqlite3_column_int(q, 3) != 0;
		p->access_type = sqlite3_column_int(q, 4);
		p->access_mode = sqlite3_column_int(q, 5);
		p->mount_flags = store_column_text(q, 6);
		*out = p;
		rc = STORE_OK;
	} else if (rc == SQLITE_DONE) {
		store_set_error("%s: volume is not published at that path", what);
		rc = STORE_NOTFOUND;
	} else {
		rc = store_fail(st, rc, what);
	}
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

int store_publication_delete(struct store *st, const char *volume_id, const char *target_path)
{
	static const char what[] = "publication delete";
	sqlite3_stmt *q;
	int rc, changes = 0;

	if (!st || !volume_id || !target_path) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	store_lock(st);
	q = store_stmt(st, STMT_PUBLICATION_DELETE,
	               "DELETE FROM publications WHERE volume_id = ?1 AND target_path = ?2", what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, volume_id)) != SQLITE_OK ||
	    (rc = store_bind_text(q, 2, target_path)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = store_step_write(st, q, what, &changes);
	if (rc == STORE_OK && changes == 0) {
		store_set_error("%s: volume is not published at that path", what);
		rc = STORE_NOTFOUND;
	}
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

int store_publication_count(struct store *st, const char *volume_id, size_t *n)
{
	static const char what[] = "publication count";
	sqlite3_stmt *q;
	int rc;

	if (!st || !volume_id || !n) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	*n = 0;
	store_lock(st);
	q = store_stmt(st, STMT_PUBLICATION_COUNT,
	               "SELECT count(*) FROM publications WHERE volume_id = ?1", what);
	if (!q) {
		rc = STORE_ERROR;
		goto out;
	}
	if ((rc = store_bind_text(q, 1, volume_id)) != SQLITE_OK) {
		rc = store_fail(st, rc, what);
		goto out;
	}
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		*n = (size_t)sqlite3_column_int64(q, 0);
		rc = STORE_OK;
	} else {
		rc = store_fail(st, rc, what);
	}
out:
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}
