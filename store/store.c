/*
 * The store: opening the sqlite database, its schema migrations, the helpers
 * shared with store_node.c and store_ctl.c (see store_int.h), and the volumes
 * table.
 *
 * Runs in rpcd, unprivileged; rpcd is the only writer of this file. One sqlite
 * connection per store, serialised by a pthread mutex, in WAL mode with
 * synchronous=FULL (a committed row survives power loss) and foreign keys on
 * (a volume cannot be deleted while a staging or publication names it).
 * Every query is a prepared statement with bound parameters: no SQL is ever
 * built from a caller's values.
 *
 * Fatal here (abort): allocation failure, including SQLITE_NOMEM, and a
 * pthread mutex call failing. Every other failure is returned as a STORE_*
 * code with the reason in store_last_error().
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_int.h"

/* How long one call waits for a lock held by another connection (e.g. an operator's sqlite3). */
#define STORE_BUSY_TIMEOUT_MS 5000

/* PRAGMA application_id of a sepcsi store: "sepc" in ASCII. */
#define STORE_APPLICATION_ID 0x73657063

/*
 * Forward migrations: entry i takes the schema from version i to i + 1, and is
 * applied together with "PRAGMA user_version = i + 1" in one transaction.
 * Released entries are never edited; a schema change is a new entry.
 */
static const char *const store_migrations[] = {
    /* to version 1: volumes, stagings, publications */
    "CREATE TABLE volumes ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT NOT NULL UNIQUE,"
    "  capacity_bytes INTEGER NOT NULL,"
    "  fs_type TEXT NOT NULL,"
    "  parameters TEXT NOT NULL,"
    "  content_source TEXT NOT NULL,"
    "  created_unix_ns INTEGER NOT NULL"
    ") STRICT;"
    "CREATE TABLE stagings ("
    "  volume_id TEXT PRIMARY KEY NOT NULL REFERENCES volumes(id),"
    "  staging_path TEXT NOT NULL,"
    "  fs_type TEXT NOT NULL,"
    "  mount_flags TEXT NOT NULL,"
    "  access_type INTEGER NOT NULL,"
    "  access_mode INTEGER NOT NULL"
    ") STRICT;"
    "CREATE TABLE publications ("
    "  volume_id TEXT NOT NULL REFERENCES volumes(id),"
    "  target_path TEXT NOT NULL,"
    "  staging_path TEXT NOT NULL,"
    "  readonly INTEGER NOT NULL,"
    "  access_type INTEGER NOT NULL,"
    "  access_mode INTEGER NOT NULL,"
    "  mount_flags TEXT NOT NULL,"
    "  PRIMARY KEY (volume_id, target_path)"
    ") STRICT;"
    "PRAGMA application_id = 1936027747;", /* STORE_APPLICATION_ID in decimal */

    /*
     * to version 2: what the Controller service needs beyond the skeleton.
     * Snapshots have no foreign key to volumes: they outlive their source.
     * Member snapshots of a group have a NULL name (UNIQUE ignores NULLs).
     */
    "ALTER TABLE volumes ADD COLUMN mkfs_options TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE volumes ADD COLUMN nouuid INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE volumes ADD COLUMN mutable_parameters TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE volumes ADD COLUMN condition TEXT NOT NULL DEFAULT '';"
    "CREATE TABLE snapshots ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT UNIQUE,"
    "  source_volume_id TEXT NOT NULL,"
    "  size_bytes INTEGER NOT NULL,"
    "  fs_type TEXT NOT NULL,"
    "  parameters TEXT NOT NULL,"
    "  group_id TEXT NOT NULL,"
    "  created_unix_ns INTEGER NOT NULL"
    ") STRICT;"
    "CREATE INDEX snapshots_by_source ON snapshots (source_volume_id, id);"
    "CREATE INDEX snapshots_by_group ON snapshots (group_id, id);"
    "CREATE TABLE group_snapshots ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT NOT NULL UNIQUE,"
    "  source_volume_ids TEXT NOT NULL,"
    "  parameters TEXT NOT NULL,"
    "  created_unix_ns INTEGER NOT NULL"
    ") STRICT;"
    "CREATE TABLE attachments ("
    "  volume_id TEXT NOT NULL REFERENCES volumes(id),"
    "  node_id TEXT NOT NULL,"
    "  readonly INTEGER NOT NULL,"
    "  access_type INTEGER NOT NULL,"
    "  access_mode INTEGER NOT NULL,"
    "  PRIMARY KEY (volume_id, node_id)"
    ") STRICT;"
    "CREATE INDEX attachments_by_node ON attachments (node_id);",
};

#define STORE_SCHEMA_VERSION ((int64_t)(sizeof store_migrations / sizeof store_migrations[0]))

static _Thread_local char store_errbuf[512];

/* ---- helpers shared with store_node.c and store_ctl.c ---- */

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

void store_lock(struct store *st)
{
	if (pthread_mutex_lock(&st->mu) != 0)
		abort();
}

void store_unlock(struct store *st)
{
	if (pthread_mutex_unlock(&st->mu) != 0)
		abort();
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

/* Takes st->mu and returns the statement id with its keys bound; NULL (unlocked) on failure. */
static sqlite3_stmt *store_keyed_begin(struct store *st, enum store_stmt_id id, const char *sql,
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

/* Releases what store_keyed_begin() took, and returns rc. */
static int store_keyed_end(struct store *st, sqlite3_stmt *q, int rc)
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

/* store_count_by_key(), but key may be NULL for sql that has no ?1. */
static int store_count(struct store *st, enum store_stmt_id id, const char *sql, const char *what,
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

/* ---- open and migrate ---- */

/* Runs fixed SQL (never built from input) that returns no rows. */
int store_exec(struct store *st, const char *sql, const char *what)
{
	int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);

	if (rc != SQLITE_OK) {
		store_fail(st, rc, what);
		return STORE_ERROR;
	}
	return STORE_OK;
}

/*
 * Runs fixed SQL that returns one row; *out gets its first column as an
 * integer (0 on failure). Returns the sqlite result code (SQLITE_OK on
 * success), with store_last_error() set on failure.
 */
static int store_query_int(struct store *st, const char *sql, int64_t *out, const char *what)
{
	sqlite3_stmt *q = NULL;
	int rc;

	*out = 0;
	rc = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL);
	if (rc != SQLITE_OK) {
		store_fail(st, rc, what);
		return rc;
	}
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(q, 0);
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		store_set_error("%s: no result", what);
		rc = SQLITE_ERROR;
	} else {
		store_fail(st, rc, what);
	}
	sqlite3_finalize(q);
	return rc;
}

/*
 * Creates the file with mode 0600 if it does not exist yet, so the database
 * never appears with a wider mode (sqlite gives the -wal and -shm files the
 * mode of the main file). An existing file is left as it is.
 */
static int store_create_file(const char *path)
{
	struct stat sb;
	int fd;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0) {
		store_set_error("store open %s: %s", path, strerror(errno));
		return STORE_ERROR;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		store_set_error("store open %s: not a regular file", path);
		close(fd);
		return STORE_ERROR;
	}
	close(fd);
	return STORE_OK;
}

/*
 * Refuses, before anything is written, a file that is not a sqlite database,
 * a sqlite database that is not a sepcsi store, and a store whose schema is
 * newer than this code knows. *version gets the schema version found.
 */
static int store_check_identity(struct store *st, const char *path, int64_t *version)
{
	int64_t app_id = 0, objects = 0;
	int rc;

	rc = store_query_int(st, "PRAGMA user_version", version, "store open");
	if (rc != SQLITE_OK) {
		if ((rc & 0xff) == SQLITE_NOTADB)
			store_set_error("store open %s: not a sqlite database (%s)", path,
			                sqlite3_errmsg(st->db));
		return STORE_ERROR;
	}
	if (store_query_int(st, "PRAGMA application_id", &app_id, "store open") != SQLITE_OK ||
	    store_query_int(st, "SELECT count(*) FROM sqlite_master", &objects, "store open") !=
	        SQLITE_OK)
		return STORE_ERROR;
	if (*version == 0 ? (app_id != 0 || objects != 0) : app_id != STORE_APPLICATION_ID) {
		store_set_error("store open %s: a sqlite database but not a sepcsi store "
		                "(application_id %" PRId64 ", user_version %" PRId64 ")",
		                path, app_id, *version);
		return STORE_ERROR;
	}
	if (*version > STORE_SCHEMA_VERSION) {
		store_set_error("store open %s: schema version %" PRId64
		                " is newer than this build knows (%" PRId64 ")",
		                path, *version, STORE_SCHEMA_VERSION);
		return STORE_ERROR;
	}
	return STORE_OK;
}

/* WAL, synchronous=FULL, foreign keys: each read back, since each is part of the contract. */
static int store_configure(struct store *st, const char *path)
{
	sqlite3_stmt *q = NULL;
	const char *mode;
	int64_t v;
	int rc;

	rc = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &q, NULL);
	if (rc != SQLITE_OK) {
		store_fail(st, rc, "store open: journal_mode");
		return STORE_ERROR;
	}
	rc = sqlite3_step(q);
	if (rc != SQLITE_ROW) {
		store_fail(st, rc, "store open: journal_mode");
		sqlite3_finalize(q);
		return STORE_ERROR;
	}
	mode = (const char *)sqlite3_column_text(q, 0);
	if (!mode || strcasecmp(mode, "wal") != 0) {
		store_set_error("store open %s: cannot use WAL journal mode (got %s)", path,
		                mode ? mode : "nothing");
		sqlite3_finalize(q);
		return STORE_ERROR;
	}
	sqlite3_finalize(q);

	if (store_exec(st, "PRAGMA synchronous = FULL", "store open: synchronous") != STORE_OK ||
	    store_exec(st, "PRAGMA foreign_keys = ON", "store open: foreign_keys") != STORE_OK)
		return STORE_ERROR;
	if (store_query_int(st, "PRAGMA synchronous", &v, "store open") != SQLITE_OK)
		return STORE_ERROR;
	if (v != 2) {
		store_set_error("store open %s: synchronous is %" PRId64 ", not FULL", path, v);
		return STORE_ERROR;
	}
	if (store_query_int(st, "PRAGMA foreign_keys", &v, "store open") != SQLITE_OK)
		return STORE_ERROR;
	if (v != 1) {
		store_set_error("store open %s: sqlite cannot enforce foreign keys", path);
		return STORE_ERROR;
	}
	return STORE_OK;
}

/*
 * Applies the missing migrations in one write transaction. The version is read
 * again inside it: another process may have migrated since the identity check.
 */
static int store_migrate(struct store *st, const char *path)
{
	char pragma[64];
	int64_t v;

	if (store_exec(st, "BEGIN IMMEDIATE", "store migrate: begin") != STORE_OK)
		return STORE_ERROR;
	if (store_query_int(st, "PRAGMA user_version", &v, "store migrate") != SQLITE_OK)
		goto fail;
	if (v < 0 || v > STORE_SCHEMA_VERSION) {
		store_set_error("store open %s: schema version %" PRId64
		                " is not one this build knows",
		                path, v);
		goto fail;
	}
	for (; v < STORE_SCHEMA_VERSION; v++) {
		/* The number is ours, from the table's length; pragmas take no parameters. */
		snprintf(pragma, sizeof pragma, "PRAGMA user_version = %" PRId64, v + 1);
		if (store_exec(st, store_migrations[v], "store migrate") != STORE_OK ||
		    store_exec(st, pragma, "store migrate: user_version") != STORE_OK)
			goto fail;
	}
	if (store_exec(st, "COMMIT", "store migrate: commit") != STORE_OK)
		goto fail;
	return STORE_OK;
fail:
	/* Keep the first error's text: the rollback's outcome is secondary. */
	sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	return STORE_ERROR;
}

int store_open(const char *path, struct store **out)
{
	struct store *st;
	int64_t version = 0;
	int rc;

	if (!out || !path || !*path) {
		store_set_error("store open: invalid argument");
		return STORE_ERROR;
	}
	*out = NULL;
	if (!sqlite3_threadsafe()) {
		store_set_error("store open: sqlite3 was built without thread support");
		return STORE_ERROR;
	}
	if (store_create_file(path) != STORE_OK)
		return STORE_ERROR;

	st = store_xcalloc(1, sizeof *st);
	if (pthread_mutex_init(&st->mu, NULL) != 0)
		abort();
	/* NOMUTEX: st->mu already serialises every use of the connection. */
	rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		if (!st->db)
			abort(); /* sqlite could not allocate the connection */
		store_set_error("store open %s: %s", path, sqlite3_errmsg(st->db));
		goto fail;
	}
	sqlite3_extended_result_codes(st->db, 1);
	sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);

	if (store_check_identity(st, path, &version) != STORE_OK ||
	    store_configure(st, path) != STORE_OK)
		goto fail;
	if (version < STORE_SCHEMA_VERSION && store_migrate(st, path) != STORE_OK)
		goto fail;
	*out = st;
	return STORE_OK;
fail:
	store_close(st);
	return STORE_ERROR;
}

void store_close(struct store *st)
{
	size_t i;

	if (!st)
		return;
	for (i = 0; i < STMT__COUNT; i++)
		sqlite3_finalize(st->stmt[i]);
	/* Every statement is finalised, so this closes now (and checkpoints the WAL). */
	sqlite3_close_v2(st->db);
	pthread_mutex_destroy(&st->mu);
	free(st);
}

/* ---- volumes ---- */

#define VOLUME_COLUMNS                                                                             \
	"id, name, capacity_bytes, fs_type, parameters, content_source, created_unix_ns,"          \
	" mkfs_options, nouuid, mutable_parameters, condition"

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
	               ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
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
	    (rc = store_bind_text_or_empty(q, 11, v->condition)) != SQLITE_OK) {
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
