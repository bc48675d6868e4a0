/*
 * The helpers every store file shares (declared in store_int.h): allocation,
 * error text, cached statements, binding and reading columns,
 * collecting rows, and the keyed queries (get one, count, list, delete) that
 * most public entry points are made of.
 *
 * Runs in rpcd, unprivileged. Fatal here (abort): allocation failure,
 * including SQLITE_NOMEM, and a pthread mutex call failing. Every other
 * failure is returned as a STORE_* code with the reason in store_last_error().
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

static _Thread_local char store_errbuf[512];

/* ---- helpers shared by every store file ---- */

void *store_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		abort();
	return p;
}

void *store_xreallocarray(void *p, size_t n, size_t size)
{
	size_t bytes;
	void *q;

	if (size && n > SIZE_MAX / size)
		abort();
	bytes = n * size;
	q = realloc(p, bytes ? bytes : 1);
	if (!q)
		abort();
	return q;
}

char *store_xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		abort();
	return p;
}

void store_set_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(store_errbuf, sizeof store_errbuf, fmt, ap);
	va_end(ap);
}

const char *store_last_error(void)
{
	return store_errbuf;
}

int store_fail(struct store *st, int sqlite_rc, const char *what)
{
	if ((sqlite_rc & 0xff) == SQLITE_NOMEM)
		abort();
	store_set_error("%s: %s", what, sqlite3_errmsg(st->db));
	if (sqlite_rc == SQLITE_CONSTRAINT_PRIMARYKEY || sqlite_rc == SQLITE_CONSTRAINT_UNIQUE)
		return STORE_EXISTS;
	return STORE_ERROR;
}

sqlite3_stmt *store_stmt(struct store *st, enum store_stmt_id id, const char *sql, const char *what)
{
	int rc;

	if (store_txn_lost(st, what))
		return NULL;
	if (st->stmt[id])
		return st->stmt[id];
	rc = sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st->stmt[id], NULL);
	if (rc != SQLITE_OK) {
		store_fail(st, rc, what);
		sqlite3_finalize(st->stmt[id]);
		st->stmt[id] = NULL;
	}
	return st->stmt[id];
}

void store_stmt_release(sqlite3_stmt *q)
{
	if (!q)
		return;
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
}

int store_bind_text(sqlite3_stmt *q, int idx, const char *s)
{
	if (!s)
		return sqlite3_bind_null(q, idx);
	return sqlite3_bind_text(q, idx, s, -1, SQLITE_STATIC);
}

int store_bind_text_or_empty(sqlite3_stmt *q, int idx, const char *s)
{
	return sqlite3_bind_text(q, idx, s ? s : "", -1, SQLITE_STATIC);
}

int store_bind_kind(sqlite3_stmt *q, int idx, const char *kind)
{
	return sqlite3_bind_text(q, idx, kind && *kind ? kind : STORE_KIND_IMAGE, -1,
	                         SQLITE_STATIC);
}

int store_step_write(struct store *st, sqlite3_stmt *q, const char *what, int *changes)
{
	int rc = sqlite3_step(q);

	if (rc != SQLITE_DONE)
		return store_fail(st, rc, what);
	if (changes)
		*changes = sqlite3_changes(st->db);
	return STORE_OK;
}

int store_step_insert_for_volume(struct store *st, sqlite3_stmt *q, const char *what)
{
	int rc = sqlite3_step(q);

	if (rc == SQLITE_DONE)
		return STORE_OK;
	if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) {
		store_set_error("%s: no such volume (%s)", what, sqlite3_errmsg(st->db));
		return STORE_ERROR;
	}
	return store_fail(st, rc, what);
}

char *store_column_text(sqlite3_stmt *q, int col)
{
	const unsigned char *t;

	if (sqlite3_column_type(q, col) == SQLITE_NULL)
		return store_xstrdup("");
	t = sqlite3_column_text(q, col);
	if (!t)
		abort(); /* a non-NULL value that could not be converted: out of memory */
	return store_xstrdup((const char *)t);
}

int64_t store_sql_limit(size_t limit)
{
	return limit == 0 || limit > (uint64_t)INT64_MAX ? -1 : (int64_t)limit;
}

void store_free_list(void **list, size_t n, store_free_row_fn *free_row)
{
	size_t i;

	if (!list)
		return;
	for (i = 0; i < n; i++)
		free_row(list[i]);
	free(list);
}

int store_collect(struct store *st, sqlite3_stmt *q, const char *what, store_from_row_fn *from_row,
                  store_free_row_fn *free_row, void ***out, size_t *n)
{
	void **list = NULL;
	size_t count = 0, cap = 0;
	int rc;

	*out = NULL;
	*n = 0;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		if (count == cap) {
			cap = cap ? cap * 2 : 32;
			list = store_xreallocarray(list, cap, sizeof *list);
		}
		list[count++] = from_row(q);
	}
	if (rc != SQLITE_DONE) {
		rc = store_fail(st, rc, what);
		store_free_list(list, count, free_row);
		return rc;
	}
	*out = list;
	*n = count;
	return STORE_OK;
}

/* ---- keyed queries, shared by every table ---- */

/*
 * Binds key as ?1 and key2 as ?2, each only if q has that parameter. A NULL
 * key there is an invalid argument (bound, it would match no row).
 */
static int store_bind_keys(struct store *st, sqlite3_stmt *q, const char *what, const char *key,
                           const char *key2)
{
	int params = sqlite3_bind_parameter_count(q), rc;

	if ((params >= 1 && !key) || (params >= 2 && !key2)) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	if ((params >= 1 && (rc = store_bind_text(q, 1, key)) != SQLITE_OK) ||
	    (params >= 2 && (rc = store_bind_text(q, 2, key2)) != SQLITE_OK))
		return store_fail(st, rc, what);
	return STORE_OK;
}

sqlite3_stmt *store_keyed_begin(struct store *st, enum store_stmt_id id, const char *sql,
                                const char *what, const char *key, const char *key2, int *rc)
{
	sqlite3_stmt *q;

	store_lock(st);
	q = store_stmt(st, id, sql, what);
	if (!q) {
		*rc = STORE_ERROR;
		goto fail;
	}
	if ((*rc = store_bind_keys(st, q, what, key, key2)) != STORE_OK)
		goto fail;
	return q;
fail:
	store_stmt_release(q);
	store_unlock(st);
	return NULL;
}

int store_keyed_end(struct store *st, sqlite3_stmt *q, int rc)
{
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

int store_get_one(struct store *st, enum store_stmt_id id, const char *sql, const char *what,
                  const char *key, const char *key2, store_from_row_fn *from_row,
                  const char *missing, void **out)
{
	sqlite3_stmt *q;
	int rc;

	if (!out) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	*out = NULL;
	if (!st || !key) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	if (!(q = store_keyed_begin(st, id, sql, what, key, key2, &rc)))
		return rc;
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		*out = from_row(q);
		rc = STORE_OK;
	} else if (rc == SQLITE_DONE) {
		store_set_error("%s: %s", what, missing);
		rc = STORE_NOTFOUND;
	} else {
		rc = store_fail(st, rc, what);
	}
	return store_keyed_end(st, q, rc);
}

int store_count(struct store *st, enum store_stmt_id id, const char *sql, const char *what,
                const char *key, size_t *n)
{
	sqlite3_stmt *q;
	int rc;

	if (!st || !n) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	*n = 0;
	if (!(q = store_keyed_begin(st, id, sql, what, key, NULL, &rc)))
		return rc;
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		*n = (size_t)sqlite3_column_int64(q, 0);
		rc = STORE_OK;
	} else {
		rc = store_fail(st, rc, what);
	}
	return store_keyed_end(st, q, rc);
}

int store_count_by_key(struct store *st, enum store_stmt_id id, const char *sql, const char *what,
                       const char *key, size_t *n)
{
	if (!key) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	return store_count(st, id, sql, what, key, n);
}

int store_list_all(struct store *st, enum store_stmt_id id, const char *sql, const char *what,
                   store_from_row_fn *from_row, store_free_row_fn *free_row, void ***out, size_t *n)
{
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
	q = store_stmt(st, id, sql, what);
	rc = q ? store_collect(st, q, what, from_row, free_row, out, n) : STORE_ERROR;
	store_stmt_release(q);
	store_unlock(st);
	return rc;
}

int store_list_by_key(struct store *st, enum store_stmt_id id, const char *sql, const char *what,
                      const char *key, store_from_row_fn *from_row, store_free_row_fn *free_row,
                      void ***out, size_t *n)
{
	sqlite3_stmt *q;
	int rc;

	if (!out || !n) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	*out = NULL;
	*n = 0;
	if (!st || !key) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	if (!(q = store_keyed_begin(st, id, sql, what, key, NULL, &rc)))
		return rc;
	rc = store_collect(st, q, what, from_row, free_row, out, n);
	return store_keyed_end(st, q, rc);
}

int store_delete_keyed(struct store *st, enum store_stmt_id id, const char *sql, const char *what,
                       const char *key, const char *key2, const char *missing)
{
	sqlite3_stmt *q;
	int rc, changes = 0;

	if (!st || !key) {
		store_set_error("%s: invalid argument", what);
		return STORE_ERROR;
	}
	if (!(q = store_keyed_begin(st, id, sql, what, key, key2, &rc)))
		return rc;
	rc = store_step_write(st, q, what, &changes);
	if (rc == STORE_OK && changes == 0) {
		store_set_error("%s: %s", what, missing);
		rc = STORE_NOTFOUND;
	}
	return store_keyed_end(st, q, rc);
}

int store_exec(struct store *st, const char *sql, const char *what)
{
	int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);

	if (rc != SQLITE_OK) {
		store_fail(st, rc, what);
		return STORE_ERROR;
	}
	return STORE_OK;
}
