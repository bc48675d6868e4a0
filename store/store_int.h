/*
 * Private to store/: the connection object and the helpers that store.c
 * (open, migrations, volumes), store_node.c (stagings, publications) and
 * store_ctl.c (snapshots, group snapshots, attachments) share. Nothing outside store/ includes this
 * file.
 *
 * Locking rule: every public entry point takes st->mu for its whole duration;
 * every helper below that takes a struct store expects the caller to hold it.
 */
#ifndef SEPCSI_STORE_INT_H
#define SEPCSI_STORE_INT_H

#include <pthread.h>
#include <sqlite3.h>

#include "store.h"

/* One cached prepared statement per query; prepared on first use. */
enum store_stmt_id {
	STMT_VOLUME_PUT,
	STMT_VOLUME_GET,
	STMT_VOLUME_GET_BY_NAME,
	STMT_VOLUME_DELETE,
	STMT_VOLUME_LIST,
	STMT_VOLUME_COUNT,
	STMT_STAGING_PUT,
	STMT_STAGING_GET,
	STMT_STAGING_DELETE,
	STMT_PUBLICATION_PUT,
	STMT_PUBLICATION_GET,
	STMT_PUBLICATION_DELETE,
	STMT_PUBLICATION_COUNT,
	STMT_VOLUME_UPDATE,
	STMT_SNAPSHOT_PUT,
	STMT_SNAPSHOT_GET,
	STMT_SNAPSHOT_GET_BY_NAME,
	STMT_SNAPSHOT_DELETE,
	STMT_SNAPSHOT_LIST,
	STMT_SNAPSHOT_LIST_SOURCE,
	STMT_SNAPSHOT_LIST_GROUP,
	STMT_GROUP_PUT,
	STMT_GROUP_GET,
	STMT_GROUP_GET_BY_NAME,
	STMT_GROUP_DELETE,
	STMT_GROUP_DELETE_MEMBERS,
	STMT_ATTACHMENT_PUT,
	STMT_ATTACHMENT_GET,
	STMT_ATTACHMENT_DELETE,
	STMT_ATTACHMENT_DELETE_ALL,
	STMT_ATTACHMENT_LIST,
	STMT_ATTACHMENT_COUNT_NODE,
	STMT__COUNT
};

struct store {
	pthread_mutex_t mu; /* serialises every use of db and stmt[] */
	sqlite3 *db;
	sqlite3_stmt *stmt[STMT__COUNT];
};

/* Allocation helpers: they never return NULL, they abort. */
void *store_xcalloc(size_t n, size_t size);
void *store_xreallocarray(void *p, size_t n, size_t size);
char *store_xstrdup(const char *s);

void store_lock(struct store *st);
void store_unlock(struct store *st);

/* Sets this thread's store_last_error() text. */
void store_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Turns a failing sqlite result code into a STORE_* code and records
 * "<what>: <sqlite message>" for store_last_error(). Unique and primary-key
 * violations are STORE_EXISTS; everything else STORE_ERROR. SQLITE_NOMEM aborts.
 */
int store_fail(struct store *st, int sqlite_rc, const char *what);

/*
 * The cached statement id, prepared from sql on first use (sql must always be
 * the same text for one id). NULL on failure, with store_last_error() set.
 */
sqlite3_stmt *store_stmt(struct store *st, enum store_stmt_id id, const char *sql,
                         const char *what);
/* Resets a cached statement and drops its bindings; accepts NULL. */
void store_stmt_release(sqlite3_stmt *q);

/*
 * Binds a string that stays alive until store_stmt_release(). A NULL string
 * binds SQL NULL, which the schema's NOT NULL columns then refuse.
 */
int store_bind_text(sqlite3_stmt *q, int idx, const char *s);
/* Like store_bind_text, but NULL binds "" (for columns added after schema 1). */
int store_bind_text_or_empty(sqlite3_stmt *q, int idx, const char *s);

/* Runs fixed SQL (never built from input) that returns no rows: BEGIN, COMMIT, ... */
int store_exec(struct store *st, const char *sql, const char *what);

/* Runs a statement that returns no rows; *changes (if not NULL) gets the row count. */
int store_step_write(struct store *st, sqlite3_stmt *q, const char *what, int *changes);

/* A newly allocated copy of a text column; SQL NULL reads as "". */
char *store_column_text(sqlite3_stmt *q, int col);

#endif
