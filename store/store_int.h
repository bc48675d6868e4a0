/*
 * Private to store/: the connection object and the helpers that store.c
 * (open, migrations), store_volume.c (volumes), store_node.c (stagings,
 * publications), store_ctl.c (snapshots, group snapshots, attachments) and
 * store_intent.c (intents) share; they are defined in store_sql.c, except the
 * transaction helpers (store_txn.c). Nothing outside store/ includes
 * this file.
 *
 * Locking rule: every public entry point takes st->mu for its whole duration;
 * every helper below that takes a struct store expects the caller to hold it,
 * except the keyed queries at the end, which are public entry points' bodies.
 * st->mu is recursive: store_begin() keeps it until store_commit() or
 * store_rollback(), so the owner's calls in between take it again.
 */
#ifndef SEPCSI_STORE_INT_H
#define SEPCSI_STORE_INT_H

#include <pthread.h>
#include <stdint.h>
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
	STMT_PUBLICATION_WRITERS,
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
	STMT_INTENT_PUT,
	STMT_INTENT_GET,
	STMT_INTENT_DELETE,
	STMT_INTENT_LIST,
	STMT_STAGING_LIST,
	STMT_PUBLICATION_LIST,
	STMT_VOLUME_GET_BY_DIRECTORY,
	STMT__COUNT
};

struct store {
	pthread_mutex_t mu; /* recursive; serialises every use of db, stmt[], txn_open and below */
	sqlite3 *db;
	sqlite3_stmt *stmt[STMT__COUNT];
	/*
	 * A store_begin() transaction is open. Only its owner can see it true:
	 * it holds st->mu until the transaction ends.
	 */
	bool txn_open;
	/*
	 * Group commit (store_sync.c). depth: how many times st->mu is held now.
	 * committed: commits made so far (counted by sqlite's WAL hook); durable:
	 * how many of them the last finished fdatasync of the WAL covers; syncs:
	 * how many such fdatasyncs ran; syncing: a thread is in that fdatasync now, with st->mu
	 * released, for the commits up to sync_upto. A thread waiting for durability sleeps on
	 * synced_cv[syncs % 2] if the sync running covers it, else on the other one, for the
	 * next sync (waiting[] counts them). wal_fd: the WAL, opened by this store (-1 before
	 * store_sync_open), wal_path its name.
	 */
	unsigned depth;
	uint64_t committed, durable, syncs, sync_upto;
	uint64_t entry_committed; /* committed when the outermost hold began */
	bool syncing;
	pthread_cond_t synced_cv[2];
	unsigned waiting[2];
	int wal_fd;
	char *wal_path;
};

/*
 * Group commit. sqlite commits with synchronous=NORMAL (its commits write
 * the WAL without syncing it); store_unlock() then makes every commit durable
 * before the outermost hold of st->mu ends, with one fdatasync of the WAL
 * for every commit made meanwhile by any thread. store_sync_open() registers
 * the WAL hook and opens the WAL; store_sync_close() closes it.
 */
int store_sync_open(struct store *st, const char *path);
/* Every commit made so far durable (at open: the migrations'). */
void store_sync_all(struct store *st);
void store_sync_close(struct store *st);

/* Allocation helpers: they never return NULL, they abort. */
void *store_xcalloc(size_t n, size_t size);
void *store_xreallocarray(void *p, size_t n, size_t size);
char *store_xstrdup(const char *s);

void store_lock(struct store *st);
void store_unlock(struct store *st);
/* As store_unlock(), but what the hold committed need not be durable yet. */
void store_unlock_unsynced(struct store *st);

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
 * the same text for one id). NULL on failure, with store_last_error() set,
 * and while store_txn_lost().
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
/* Like store_bind_text, but NULL and "" bind STORE_KIND_IMAGE (the kind columns). */
int store_bind_kind(sqlite3_stmt *q, int idx, const char *kind);

/* Runs fixed SQL (never built from input) that returns no rows: BEGIN, COMMIT, ... */
int store_exec(struct store *st, const char *sql, const char *what);

/*
 * The transaction of one entry point that writes several rows (the caller
 * holds st->mu): enter begins it (BEGIN IMMEDIATE, or a savepoint when a
 * store_begin() transaction is open, so that it nests); leave keeps it when
 * rc is STORE_OK and undoes it otherwise, and returns rc, or STORE_ERROR when
 * keeping it failed (then undone as well).
 */
int store_txn_enter(struct store *st, const char *what);
int store_txn_leave(struct store *st, int rc, const char *what);
/*
 * True, with "<what>: sqlite rolled the open transaction back ..." recorded,
 * when a store_begin() transaction is open but sqlite has rolled it back (a
 * full disk, an I/O error): then nothing may run until store_rollback(), or
 * it would run outside the transaction its caller believes in.
 */
bool store_txn_lost(struct store *st, const char *what);

/* Runs a statement that returns no rows; *changes (if not NULL) gets the row count. */
int store_step_write(struct store *st, sqlite3_stmt *q, const char *what, int *changes);
/*
 * Runs an INSERT of a row that references volumes(id), saying plainly when
 * that volume does not exist: STORE_ERROR with "<what>: no such volume (...)".
 */
int store_step_insert_for_volume(struct store *st, sqlite3_stmt *q, const char *what);

/* A newly allocated copy of a text column; SQL NULL reads as "". */
char *store_column_text(sqlite3_stmt *q, int col);

/* A list's limit (0 = no limit) as the value to bind to LIMIT (-1 = no limit). */
int64_t store_sql_limit(size_t limit);

/*
 * Makes one newly allocated result struct (struct store_volume, ...) from the
 * current row of q; never NULL. Whoever receives it owns it.
 */
typedef void *store_from_row_fn(sqlite3_stmt *q);
/* Frees one struct that a store_from_row_fn made; accepts NULL. */
typedef void store_free_row_fn(void *row);

/* Frees the n structs of list with free_row, then list; accepts NULL. */
void store_free_list(void **list, size_t n, store_free_row_fn *free_row);

/*
 * Steps q to its end, collecting each row with from_row. On STORE_OK *out is
 * a newly allocated array of *n structs, all owned by the caller (NULL when
 * there are none); on failure nothing is handed out: what was collected is
 * freed with free_row, *out is NULL and *n is 0. Does not release q.
 */
int store_collect(struct store *st, sqlite3_stmt *q, const char *what, store_from_row_fn *from_row,
                  store_free_row_fn *free_row, void ***out, size_t *n);

/*
 * The keyed queries below are whole bodies of public entry points: unlike the
 * helpers above, each takes st->mu itself, so the caller must not hold it.
 * id is the cached statement prepared from sql. key is bound as ?1; key2 is
 * bound as ?2 when sql has a ?2 (pass NULL otherwise). NULL for st, for key,
 * for key2 when sql has a ?2, or for an out pointer is STORE_ERROR with
 * "<what>: invalid argument". Keys are only read during the call.
 */

/*
 * Reads the one row sql returns. *out is set to NULL first; on STORE_OK it
 * gets from_row's struct, which the caller owns and frees with its type's
 * _free function. No row is STORE_NOTFOUND with "<what>: <missing>".
 */
int store_get_one(struct store *st, enum store_stmt_id id, const char *sql, const char *what,
                  const char *key, const char *key2, store_from_row_fn *from_row,
                  const char *missing, void **out);

/* *n gets the single integer sql (a count) returns; it is set to 0 first. */
int store_count_by_key(struct store *st, enum store_stmt_id id, const char *sql, const char *what,
                       const char *key, size_t *n);
/* store_count_by_key(), but key may be NULL for sql that has no ?1. */
int store_count(struct store *st, enum store_stmt_id id, const char *sql, const char *what,
                const char *key, size_t *n);

/* Every row sql (which takes no key) returns, as store_collect() hands them out. */
int store_list_all(struct store *st, enum store_stmt_id id, const char *sql, const char *what,
                   store_from_row_fn *from_row, store_free_row_fn *free_row, void ***out,
                   size_t *n);

/* Every row sql returns, handed out as store_collect() does; *out and *n are zeroed first. */
int store_list_by_key(struct store *st, enum store_stmt_id id, const char *sql, const char *what,
                      const char *key, store_from_row_fn *from_row, store_free_row_fn *free_row,
                      void ***out, size_t *n);

/* Runs the DELETE sql; STORE_NOTFOUND with "<what>: <missing>" when no row went. */
int store_delete_keyed(struct store *st, enum store_stmt_id id, const char *sql, const char *what,
                       const char *key, const char *key2, const char *missing);

/*
 * The two halves of a keyed query, for an entry point that steps the
 * statement itself: begin takes st->mu and returns the statement id with its
 * keys bound (NULL, unlocked, with *rc set, on failure); end releases both
 * and returns rc.
 */
sqlite3_stmt *store_keyed_begin(struct store *st, enum store_stmt_id id, const char *sql,
                                const char *what, const char *key, const char *key2, int *rc);
int store_keyed_end(struct store *st, sqlite3_stmt *q, int rc);

#endif
